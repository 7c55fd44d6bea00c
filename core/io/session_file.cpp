#include "core/io/session_file.h"

#include "core/read_file.h"
#include "core/safe_file.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <tuple>
#include <type_traits>

#include "core/error.h"
#include "core/json_error.h"
#include "core/run/context_limit.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace kvlens {
namespace {

constexpr const char* kFormat = "kvlens-session";

class Fnv1a {
public:
    void add(const char* data, size_t n) {
        for (size_t i = 0; i < n; ++i) m_h = (m_h ^ static_cast<unsigned char>(data[i])) * 1099511628211ull;
    }
    void add(const std::string& s) { add(s.data(), s.size() + 1); }  // with the NUL: "ab"+"c" ≠ "a"+"bc"
    void add(uint64_t v) { add(reinterpret_cast<const char*>(&v), sizeof v); }
    std::string hex() const {
        char buf[17];
        std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(m_h));
        return buf;
    }

private:
    uint64_t m_h = 1469598103934665603ull;
};

// A model's files are read only when they are regular files: a FIFO named
// config.json would block the window's thread forever (readRegularFile
// refuses it in one sentence, as it does a folder or a device).
void addFile(Fnv1a& h, const fs::path& p) {
    h.add(p.filename().string());
    h.add(readRegularFile(p));
}

void addSafetensors(Fnv1a& h, const fs::path& p) {
    std::error_code ec;
    if (!fs::is_regular_file(p, ec))
        throw FormatError(p.string(), "not a regular file: expected a safetensors file to read");
    std::ifstream in(p, std::ios::binary);
    const uint64_t size = fs::file_size(p);
    h.add(p.filename().string());
    h.add(size);
    uint64_t headerLen = 0;
    if (!in.read(reinterpret_cast<char*>(&headerLen), 8)) return;
    const uint64_t header = std::min<uint64_t>(headerLen, size - 8);
    std::string buf(static_cast<size_t>(std::min<uint64_t>(header, 100u << 20)), '\0');
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.add(buf);
    const uint64_t dataStart = 8 + header, dataSize = size > dataStart ? size - dataStart : 0;
    constexpr uint64_t kBlock = 4096, kBlocks = 64;
    std::string block(kBlock, '\0');
    for (uint64_t b = 0; b < kBlocks && dataSize > 0; ++b) {
        const uint64_t at = dataStart + (dataSize > kBlock ? (dataSize - kBlock) * b / (kBlocks - 1) : 0);
        in.clear();
        in.seekg(static_cast<std::streamoff>(at));
        in.read(block.data(), static_cast<std::streamsize>(kBlock));
        h.add(block.data(), static_cast<size_t>(in.gcount()));
    }
}

// Whether a JSON integer fits T (nlohmann's get<T> would wrap it, or for a
// float overflow it, which is undefined behaviour).
template <class T>
bool fitsInteger(const json& v) {
    if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
    const int64_t s = v.get<int64_t>();
    if (s < 0) return std::is_signed_v<T> && s >= static_cast<int64_t>(std::numeric_limits<T>::min());
    return static_cast<uint64_t>(s) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
}

template <class T>
T field(const json& j, const char* name, const std::string& source) {
    if (!j.contains(name)) throw FormatError(source, std::string("missing field \"") + name + "\"");
    const json& v = j.at(name);
    auto wrong = [&](const char* why) {
        return FormatError(source, std::string("field \"") + name + "\" " + why + " (" +
                                       v.dump(-1, ' ', false, json::error_handler_t::replace) + ")");
    };
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        if (!v.is_number_integer()) throw wrong("must be a whole number");
        if (!fitsInteger<T>(v)) throw wrong("is out of range");
    }
    try {
        return v.get<T>();
    } catch (const json::exception&) {
        throw wrong("has the wrong type");
    }
}

template <class T>
T optional(const json& j, const char* name, const T& fallback, const std::string& source) {
    return j.contains(name) ? field<T>(j, name, source) : fallback;
}

}  // namespace

const std::vector<std::string>& rankKeys() {
    static const std::vector<std::string> keys{"kl", "top1", "perplexity", "mass", "kv_mean", "kv_peak", "oracle"};
    return keys;
}

namespace {
std::string joinedKeys() {
    std::string out;
    for (const auto& k : rankKeys()) out += (out.empty() ? "" : ", ") + k;
    return out;
}
}  // namespace

json sessionToJson(const SessionFile& s) {
    json j = {{"format", kFormat},
            {"version", SessionFile::kVersion},
            {"model", {{"dir", s.modelDir}, {"fingerprint", s.modelFingerprint}}},
            {"prompt", s.prompt},
            {"policies", s.policies},
            {"budget", s.budget},
            {"budgets", s.budgets},
            {"decode_steps", s.decodeSteps},
            {"teacher_forced", s.teacherForced},
            {"sampling", {{"greedy", s.greedy}, {"temperature", s.temperature}, {"top_p", s.topP}, {"seed", s.seed}}},
            {"view",
             {{"layer", s.view.layer}, {"head", s.view.head}, {"step", s.view.step}, {"colour_scale", s.view.colourScale}}}};
    if (!s.view.budgetRun.empty()) j["view"]["budget_run"] = s.view.budgetRun;
    if (!s.view.rankBy.empty()) j["view"]["rank_by"] = s.view.rankBy;
    if (!s.question.empty()) j["question"] = {{"text", s.question}, {"mode", s.questionMode}};
    if (!s.calibration.empty()) j["calibration"] = s.calibration;
    if (!s.colours.empty()) j["colours"] = s.colours;
    if (!s.scripts.empty()) {
        json scripts = json::array();
        for (const auto& [file, fingerprint] : s.scripts) scripts.push_back({{"file", file}, {"fingerprint", fingerprint}});
        j["scripts"] = scripts;
    }
    return j;
}

SessionFile sessionFromJson(const json& j, const std::string& source) {
    if (!j.is_object()) throw FormatError(source, "not a KVLens session (expected a JSON object)");
    // (j.value() would throw nlohmann's type_error for a "format" that is not a string.)
    if (!j.contains("format") || j["format"] != kFormat)
        throw FormatError(source, "not a KVLens session (\"format\" is not \"kvlens-session\")");
    const int version = field<int>(j, "version", source);
    if (version > SessionFile::kVersion)
        throw FormatError(source, "written by a newer KVLens (session version " + std::to_string(version) +
                                      "); this one reads version " + std::to_string(SessionFile::kVersion) + " — update KVLens");
    if (version < 1) throw FormatError(source, "session version " + std::to_string(version) + " is not valid");
    SessionFile s;
    const json model = field<json>(j, "model", source);
    s.modelDir = optional<std::string>(model, "dir", "", source);
    s.modelFingerprint = optional<std::string>(model, "fingerprint", "", source);
    s.prompt = field<std::string>(j, "prompt", source);
    s.policies = field<std::vector<std::string>>(j, "policies", source);
    s.budget = optional<std::string>(j, "budget", "", source);
    s.budgets = optional<std::string>(j, "budgets", "", source);
    const json question = optional<json>(j, "question", json::object(), source);
    s.question = optional<std::string>(question, "text", "", source);
    s.questionMode = optional<std::string>(question, "mode", s.questionMode, source);
    if (s.questionMode != "aware" && s.questionMode != "agnostic")
        throw FormatError(source, "\"question.mode\" '" + s.questionMode + "' is not aware or agnostic");
    s.calibration = optional<std::string>(j, "calibration", "", source);
    s.decodeSteps = optional<int64_t>(j, "decode_steps", s.decodeSteps, source);
    if (s.decodeSteps < 0 || s.decodeSteps > kMaxDecodeSteps)
        throw FormatError(source, "\"decode_steps\" is " + std::to_string(s.decodeSteps) + ": expected 0 to " +
                                      std::to_string(kMaxDecodeSteps));
    s.teacherForced = optional<bool>(j, "teacher_forced", s.teacherForced, source);
    const json sampling = optional<json>(j, "sampling", json::object(), source);
    s.greedy = optional<bool>(sampling, "greedy", s.greedy, source);
    s.temperature = optional<double>(sampling, "temperature", s.temperature, source);
    s.topP = optional<double>(sampling, "top_p", s.topP, source);
    s.seed = optional<uint64_t>(sampling, "seed", s.seed, source);
    const json view = optional<json>(j, "view", json::object(), source);
    s.view.layer = optional<int64_t>(view, "layer", 0, source);
    s.view.head = optional<int64_t>(view, "head", 0, source);
    s.view.step = optional<int64_t>(view, "step", -1, source);
    s.view.colourScale = optional<std::string>(view, "colour_scale", "power", source);
    s.view.budgetRun = optional<std::string>(view, "budget_run", "", source);
    s.view.rankBy = optional<std::string>(view, "rank_by", "", source);
    if (!s.view.rankBy.empty() && std::find(rankKeys().begin(), rankKeys().end(), s.view.rankBy) == rankKeys().end())
        throw FormatError(source, "\"view.rank_by\" '" + s.view.rankBy + "' is not one of " + joinedKeys());
    // The model's own layer and head counts are checked where the session
    // meets its model (checkSessionView).
    for (const auto& [name, v, least] : {std::tuple{"view.layer", s.view.layer, int64_t{0}},
                                         std::tuple{"view.head", s.view.head, int64_t{0}},
                                         std::tuple{"view.step", s.view.step, int64_t{-1}}})
        if (v < least)
            throw FormatError(source, "\"" + std::string(name) + "\" is " + std::to_string(v) + ": expected " +
                                          std::to_string(least) + " or more");
    if (!s.view.budgetRun.empty() && std::find(s.policies.begin(), s.policies.end(), s.view.budgetRun) == s.policies.end())
        throw FormatError(source, "\"view.budget_run\" '" + s.view.budgetRun +
                                      "' is not one of the session's policies: expected a spec as \"policies\" lists it");
    if (!(s.temperature >= 0) || !(s.topP > 0 && s.topP <= 1))
        throw FormatError(source, "\"sampling\": temperature must be 0 or more and top_p in (0, 1] (got " +
                                      std::to_string(s.temperature) + ", " + std::to_string(s.topP) + ")");
    // Each checked as a number before it converts (a float past int's range would not convert safely).
    for (const json& c : optional<json>(j, "colours", json::array(), source)) {
        if (!c.is_number_integer() || c.get<int64_t>() < 0 || c.get<int64_t>() >= 1000)
            throw FormatError(source, "\"colours\" must give each of the " + std::to_string(s.policies.size()) +
                                          " policies its own colour slot from 0 to 999");
        s.colours.push_back(static_cast<int>(c.get<int64_t>()));
    }
    std::vector<int> sorted = s.colours;
    std::sort(sorted.begin(), sorted.end());
    if (!s.colours.empty() && (s.colours.size() != s.policies.size() ||  // each in 0..999 already
                               std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()))
        throw FormatError(source, "\"colours\" must give each of the " + std::to_string(s.policies.size()) +
                                      " policies its own colour slot from 0 to 999");
    for (const json& script : optional<json>(j, "scripts", json::array(), source)) {
        if (!script.is_object()) throw FormatError(source, "\"scripts\" must hold objects with \"file\" and \"fingerprint\"");
        s.scripts[field<std::string>(script, "file", source)] = optional<std::string>(script, "fingerprint", "", source);
    }
    return s;
}

void saveSession(const fs::path& file, const SessionFile& s) { writeFileAtomically(file, sessionToJson(s).dump(2) + "\n"); }

SessionFile loadSession(const fs::path& file) {
    json j;
    try {
        j = json::parse(readRegularFile(file, 64ull << 20));
    } catch (const json::parse_error& e) {
        throw FormatError(file.string(), jsonErrorText(e.what()));
    }
    return sessionFromJson(j, file.string());
}

namespace {

std::string fingerprintFiles(const fs::path& dir) {
    Fnv1a h;
    addFile(h, dir / "config.json");
    if (fs::exists(dir / "tokenizer.json")) addFile(h, dir / "tokenizer.json");
    std::vector<fs::path> shards;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".safetensors") shards.push_back(e.path());
    std::sort(shards.begin(), shards.end());
    for (const auto& p : shards) addSafetensors(h, p);
    return "fnv1a64:" + h.hex();
}

}  // namespace

std::string scriptFingerprint(const fs::path& file) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) return {};
    Fnv1a h;
    try {
        addFile(h, file);
    } catch (const Error&) {
        return {};  // unreadable: loading it says why
    }
    return "fnv1a64:" + h.hex();
}

std::string scriptsNote(const SessionFile& s) {
    std::string note;
    for (const auto& [file, saved] : s.scripts) {
        const std::string now = scriptFingerprint(file);
        if (saved.empty() || now.empty() || now == saved) continue;  // a missing file fails to load, with its own message
        note += (note.empty() ? "" : "; ") + std::string("the scorer ") + file +
                " changed since this session was saved: its traces will differ";
    }
    return note;
}

std::string modelFingerprint(const fs::path& dir) {
    if (!fs::exists(dir / "config.json")) throw FormatError((dir / "config.json").string(), "missing: not a model directory");
    try {
        return fingerprintFiles(dir);
    } catch (const fs::filesystem_error& e) {
        // The folder changed under us (a file deleted between listing and reading it).
        throw FormatError(dir.string(), std::string("cannot read the model folder: ") + e.what());
    }
}

}  // namespace kvlens
