#include "core/model/safetensors.h"

#include "core/safe_file.h"


#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kvlens {
namespace {

using json = nlohmann::json;

// The first key the top-level object names twice, empty when none: a SAX
// pass, linear in the header (nlohmann's parser callback walks the object
// at every key, which took minutes for 300 k tensors).
class TopLevelKeys : public nlohmann::json_sax<json> {
public:
    std::string repeated;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return ++m_depth, true; }
    bool end_object() override { return --m_depth, true; }
    bool start_array(std::size_t) override { return ++m_depth, true; }
    bool end_array() override { return --m_depth, true; }
    bool key(string_t& k) override {
        if (m_depth == 1 && !m_seen.insert(k).second) repeated = k;
        return repeated.empty();  // stop at the first
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

private:
    int m_depth = 0;
    std::set<std::string> m_seen;
};

std::string firstRepeatedKey(const std::string& text) {
    TopLevelKeys keys;
    json::sax_parse(text, &keys);
    return keys.repeated;
}

// A header larger than this is not a model header but a corrupt length field.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct DTypeName {
    DType dtype;
    const char* name;
    size_t size;
};
constexpr DTypeName kDTypes[] = {
    {DType::F64, "F64", 8}, {DType::F32, "F32", 4}, {DType::F16, "F16", 2}, {DType::BF16, "BF16", 2},
    {DType::I64, "I64", 8}, {DType::I32, "I32", 4}, {DType::I16, "I16", 2}, {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},   {DType::Bool, "BOOL", 1},
};

DType parseDType(const std::string& s, const std::string& file, const std::string& tensor) {
    for (const auto& d : kDTypes)
        if (s == d.name) return d.dtype;
    throw FormatError(file, "tensor '" + tensor + "': unsupported dtype '" + s + "'");
}

TensorInfo parseEntry(const std::string& name, const json& e, uint64_t dataSize, const std::string& file) {
    auto bad = [&](const std::string& why) { return FormatError(file, "tensor '" + name + "': " + why); };
    if (!e.is_object()) throw bad("header entry is not an object");
    if (!e.contains("dtype") || !e["dtype"].is_string()) throw bad("missing dtype");
    if (!e.contains("shape") || !e["shape"].is_array()) throw bad("missing shape");
    if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
        throw bad("data_offsets must be [begin, end]");
    TensorInfo t;
    t.name = name;
    t.dtype = parseDType(e["dtype"].get<std::string>(), file, name);
    uint64_t numel = 1;
    for (const auto& d : e["shape"]) {
        if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
            throw bad("shape entries must be non-negative integers");
        uint64_t v = d.get<uint64_t>();
        if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / 16 / v) throw bad("shape overflows");
        numel *= v;
        t.shape.push_back(static_cast<int64_t>(v));
    }
    for (const auto& o : e["data_offsets"])
        if (!o.is_number_unsigned() && !(o.is_number_integer() && o.get<int64_t>() >= 0))
            throw bad("data_offsets must be non-negative integers");
    t.begin = e["data_offsets"][0].get<uint64_t>();
    t.end = e["data_offsets"][1].get<uint64_t>();
    if (t.begin > t.end) throw bad("data_offsets begin > end");
    if (t.end > dataSize)
        throw bad("data ends at byte " + std::to_string(t.end) + " but the file holds only " +
                  std::to_string(dataSize) + " data bytes (truncated file?)");
    if (t.end - t.begin != numel * dtypeSize(t.dtype))
        throw bad("data_offsets span " + std::to_string(t.end - t.begin) + " bytes but shape and dtype need " +
                  std::to_string(numel * dtypeSize(t.dtype)));
    return t;
}

}  // namespace

const char* dtypeName(DType d) {
    for (const auto& e : kDTypes)
        if (e.dtype == d) return e.name;
    return "?";
}

size_t dtypeSize(DType d) {
    for (const auto& e : kDTypes)
        if (e.dtype == d) return e.size;
    return 0;
}

int64_t TensorInfo::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::vector<TensorInfo> SafetensorsFile::parseHeader(const std::string& header, uint64_t dataSize,
                                                     const std::string& file,
                                                     std::map<std::string, std::string>* metadata) {
    json j = json::parse(header, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) throw FormatError(file, "safetensors header is not a JSON object");
    // JSON keeps the last of two equal keys; a header naming a tensor twice is lying about one of them.
    const std::string duplicate = firstRepeatedKey(header);
    if (!duplicate.empty()) throw FormatError(file, "the header names tensor '" + duplicate + "' twice");
    std::vector<TensorInfo> out;
    for (auto it = j.begin(); it != j.end(); ++it) {
        if (it.key() == "__metadata__") {
            if (!metadata || !it.value().is_object()) continue;
            for (auto m = it.value().begin(); m != it.value().end(); ++m)
                if (m.value().is_string()) (*metadata)[m.key()] = m.value().get<std::string>();
            continue;
        }
        out.push_back(parseEntry(it.key(), it.value(), dataSize, file));
    }
    // Tensors must not share bytes: a header that overlaps them is lying.
    std::vector<const TensorInfo*> byOffset;
    for (const auto& t : out) byOffset.push_back(&t);
    std::sort(byOffset.begin(), byOffset.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
    for (size_t i = 1; i < byOffset.size(); ++i)
        if (byOffset[i]->begin < byOffset[i - 1]->end && byOffset[i]->begin != byOffset[i]->end)
            throw FormatError(file, "tensors '" + byOffset[i - 1]->name + "' and '" + byOffset[i]->name +
                                        "' overlap in the data section");
    return out;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
    const std::string file = path.string();
    std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
    f->m_path = file;
    f->m_map = MappedFile(file, "a safetensors file", 8, "the 8-byte header length");
    uint64_t dataOffset = 0;
    f->m_tensors = parseBytes(f->m_map.bytes(), f->m_map.size(), file, &f->m_metadata, &dataOffset);
    f->m_data = f->m_map.bytes() + dataOffset;
    return f;
}

std::vector<TensorInfo> SafetensorsFile::parseBytes(const uint8_t* bytes, uint64_t size, const std::string& file,
                                                    std::map<std::string, std::string>* metadata,
                                                    uint64_t* dataOffset) {
    if (size < 8) throw FormatError(file, "truncated: shorter than the 8-byte header length");
    uint64_t headerLen = 0;
    for (int i = 7; i >= 0; --i) headerLen = (headerLen << 8) | bytes[i];  // little-endian u64
    if (headerLen > kMaxHeaderBytes || headerLen > size - 8)
        throw FormatError(file, "header length " + std::to_string(headerLen) + " exceeds the file size " +
                                    std::to_string(size) + " (truncated or not a safetensors file)");
    std::string header(reinterpret_cast<const char*>(bytes + 8), headerLen);
    *dataOffset = 8 + headerLen;
    return parseHeader(header, size - 8 - headerLen, file, metadata);
}

std::vector<std::string> parseSafetensorsIndex(const std::string& jsonText, const std::string& file) {
    auto j = json::parse(jsonText, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw FormatError(file, "not valid JSON");
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
        throw FormatError(file, "missing object 'weight_map'");
    std::vector<std::string> shards;
    std::set<std::string> seen;
    for (const auto& [name, entry] : j["weight_map"].items()) {
        if (!entry.is_string()) throw FormatError(file, "weight_map['" + name + "'] is not a file name");
        std::string f = entry.get<std::string>();
        if (f.empty() || f.find('/') != std::string::npos || f == "..")
            throw FormatError(file, "weight_map['" + name + "'] names '" + f + "', not a file in the model directory");
        if (seen.insert(f).second) shards.push_back(f);
    }
    return shards;
}

SafetensorsFile::~SafetensorsFile() = default;

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
    for (const auto& t : m_tensors)
        if (t.name == name) return &t;
    return nullptr;
}

void writeSafetensors(const std::filesystem::path& path, const std::vector<TensorBlob>& tensors,
                      const std::map<std::string, std::string>& metadata) {
    json header = json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const auto& t : tensors) {
        int64_t numel = 1;
        for (int64_t d : t.shape) numel *= d;
        const uint64_t bytes = static_cast<uint64_t>(numel) * dtypeSize(t.dtype);
        header[t.name] = {{"dtype", dtypeName(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string h = header.dump();
    while ((h.size() + 8) % 8 != 0) h.push_back(' ');  // align the data section, as the reference writer does
    AtomicFile out(path);
    const uint64_t n = h.size();
    char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    out.write(length, 8);
    out.write(h);
    for (const auto& t : tensors) {
        int64_t numel = 1;
        for (int64_t d : t.shape) numel *= d;
        out.write(t.data, static_cast<size_t>(numel) * dtypeSize(t.dtype));
    }
    out.commit();
}

}  // namespace kvlens
