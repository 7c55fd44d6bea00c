#include "core/model/llama2c.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <system_error>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io/safe_file.h"
#include "core/model/config.h"
#include "core/model/safetensors.h"

namespace kvlens {
namespace fs = std::filesystem;

namespace {

constexpr int kHeaderInts = 7;
const char* const kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

std::string name(const fs::path& p) { return p.string(); }

std::ifstream openBinary(const fs::path& file, uint64_t* size) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) throw FormatError(name(file), "not a file (expected a llama2.c file)");
    *size = fs::file_size(file, ec);
    std::ifstream in(file, std::ios::binary);
    if (!in || ec) throw FormatError(name(file), "cannot be read");
    return in;
}

// The f32 tensors of a llama2.c v0 checkpoint, in file order, as the HF
// names and shapes they become (before wq/wk are permuted).
struct Slab {
    std::string what;             // llama2.c's name, for messages
    int64_t layers;               // 0: one tensor; else stacked per layer
    std::vector<int64_t> shape;   // of one tensor
    std::string hfName;           // with {} for the layer index; empty: skipped
};

std::vector<Slab> slabs(const Llama2cHeader& h) {
    const int64_t E = h.dim, F = h.hiddenDim, L = h.layers, V = std::abs(int64_t(h.vocabSize));
    const int64_t kv = int64_t(h.dim) / h.heads * h.kvHeads, half = int64_t(h.dim) / h.heads / 2;
    std::vector<Slab> s = {
        {"token_embedding_table", 0, {V, E}, "model.embed_tokens.weight"},
        {"rms_att_weight", L, {E}, "model.layers.{}.input_layernorm.weight"},
        {"wq", L, {E, E}, "model.layers.{}.self_attn.q_proj.weight"},
        {"wk", L, {kv, E}, "model.layers.{}.self_attn.k_proj.weight"},
        {"wv", L, {kv, E}, "model.layers.{}.self_attn.v_proj.weight"},
        {"wo", L, {E, E}, "model.layers.{}.self_attn.o_proj.weight"},
        {"rms_ffn_weight", L, {E}, "model.layers.{}.post_attention_layernorm.weight"},
        {"w1", L, {F, E}, "model.layers.{}.mlp.gate_proj.weight"},
        {"w2", L, {E, F}, "model.layers.{}.mlp.down_proj.weight"},
        {"w3", L, {F, E}, "model.layers.{}.mlp.up_proj.weight"},
        {"rms_final_weight", 0, {E}, "model.norm.weight"},
        {"freq_cis_real", 0, {h.seqLen, half}, ""},
        {"freq_cis_imag", 0, {h.seqLen, half}, ""},
    };
    if (!h.tiedClassifier) s.push_back({"wcls", 0, {V, E}, "lm_head.weight"});
    return s;
}

int64_t numel(const std::vector<int64_t>& shape) {
    return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

// llama2.c rotates the pairs (0,1), (2,3), ... of each head; HF rotates
// the halves (i, i + D/2). Row 2j + p of a head goes to row p·D/2 + j.
std::vector<float> toRotatedHalves(const std::vector<float>& w, int64_t heads, int64_t rows, int64_t cols) {
    const int64_t D = rows / heads;
    std::vector<float> out(w.size());
    for (int64_t h = 0; h < heads; ++h)
        for (int64_t j = 0; j < D / 2; ++j)
            for (int64_t p = 0; p < 2; ++p)
                std::memcpy(&out[static_cast<size_t>((h * D + p * (D / 2) + j) * cols)],
                            &w[static_cast<size_t>((h * D + 2 * j + p) * cols)], static_cast<size_t>(cols) * sizeof(float));
    return out;
}

std::string replaceAll(std::string s, const std::string& from, const std::string& to) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
    return s;
}

bool isBytePiece(const std::string& s) {
    return s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' && std::isxdigit(static_cast<unsigned char>(s[3])) &&
           std::isxdigit(static_cast<unsigned char>(s[4]));
}

size_t utf8Length(unsigned char lead) {
    if (lead < 0x80) return 1;
    if ((lead >> 5) == 0x6) return 2;
    if ((lead >> 4) == 0xE) return 3;
    if ((lead >> 3) == 0x1E) return 4;
    return 1;
}

std::string configText(const Llama2cHeader& h) {
    const nlohmann::json j = {
        {"architectures", {"LlamaForCausalLM"}},
        {"model_type", "llama"},
        {"vocab_size", std::abs(h.vocabSize)},
        {"hidden_size", h.dim},
        {"intermediate_size", h.hiddenDim},
        {"num_hidden_layers", h.layers},
        {"num_attention_heads", h.heads},
        {"num_key_value_heads", h.kvHeads},
        {"head_dim", h.dim / h.heads},
        {"max_position_embeddings", h.seqLen},
        {"rms_norm_eps", 1e-5},
        {"rope_theta", 10000.0},
        {"rope_scaling", nullptr},
        {"hidden_act", "silu"},
        {"attention_bias", false},
        {"mlp_bias", false},
        {"tie_word_embeddings", h.tiedClassifier},
        {"bos_token_id", 1},
        {"eos_token_id", 2},
        {"torch_dtype", "float32"},
        {"kvlens_imported_from", "llama2.c"},
    };
    return j.dump(2) + "\n";
}

// A staging folder beside the output, removed unless committed.
class Staging {
public:
    explicit Staging(const fs::path& out) : m_out(out) {
        std::error_code ec;
        if (fs::exists(out, ec)) {
            if (!fs::is_directory(out, ec) || !fs::is_empty(out, ec))
                throw ArgumentError(name(out) + " already exists and is not an empty folder; name a new folder for "
                                                "the imported model (nothing was written)");
        }
        const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
        m_dir = parent / ("." + out.filename().string() + ".import-" + std::to_string(::getpid()));
        fs::remove_all(m_dir, ec);
        if (!fs::create_directories(m_dir, ec) || ec)
            throw IoError(name(out) + ": cannot create a folder beside it (" + ec.message() + ")");
    }
    ~Staging() {
        std::error_code ec;
        if (!m_committed) fs::remove_all(m_dir, ec);
    }
    const fs::path& dir() const { return m_dir; }
    void commit() {
        std::error_code ec;
        if (fs::exists(m_out, ec)) fs::remove(m_out, ec);  // an empty folder (checked above)
        fs::rename(m_dir, m_out, ec);
        if (ec) throw IoError(name(m_out) + ": cannot move the imported model into place (" + ec.message() + ")");
        m_committed = true;
    }

private:
    fs::path m_out, m_dir;
    bool m_committed = false;
};

}  // namespace

Llama2cHeader readLlama2cHeader(const fs::path& model) {
    uint64_t size = 0;
    std::ifstream in = openBinary(model, &size);
    int32_t v[kHeaderInts];
    if (size < sizeof v || !in.read(reinterpret_cast<char*>(v), sizeof v))
        throw FormatError(name(model), "too short for a llama2.c header (7 int32: dim, hidden_dim, n_layers, n_heads, "
                                       "n_kv_heads, vocab_size, seq_len)");
    Llama2cHeader h{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[5] > 0};
    const char* names[kHeaderInts] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    for (int i = 0; i < kHeaderInts; ++i) {
        const int64_t x = i == 5 ? std::abs(int64_t(v[i])) : v[i];
        if (x <= 0 || x > (1 << 24))
            throw FormatError(name(model), std::string("header field ") + names[i] + " is " + std::to_string(v[i]) +
                                               " (expected a positive size; is this a llama2.c model file?)");
    }
    if (h.dim % h.heads != 0 || (h.dim / h.heads) % 2 != 0 || h.heads % h.kvHeads != 0)
        throw FormatError(name(model), "header: dim " + std::to_string(h.dim) + " with " + std::to_string(h.heads) +
                                           " heads and " + std::to_string(h.kvHeads) +
                                           " kv heads (expected dim = heads x an even head size, heads a multiple of kv heads)");
    int64_t floats = 0;
    for (const Slab& s : slabs(h)) floats += numel(s.shape) * std::max<int64_t>(1, s.layers);
    const uint64_t want = sizeof v + static_cast<uint64_t>(floats) * sizeof(float);
    if (size != want)
        throw FormatError(name(model), "has " + std::to_string(size) + " bytes; a llama2.c v0 model of this header (" +
                                           std::to_string(h.layers) + " layers, dim " + std::to_string(h.dim) +
                                           (h.tiedClassifier ? ", tied classifier" : ", own classifier") + ") has " +
                                           std::to_string(want) + (size < want ? " (truncated?)" : ""));
    return h;
}

std::vector<Llama2cPiece> readLlama2cTokenizer(const fs::path& tokenizer, int64_t vocabSize) {
    uint64_t size = 0;
    std::ifstream in = openBinary(tokenizer, &size);
    int32_t maxLen = 0;
    if (!in.read(reinterpret_cast<char*>(&maxLen), sizeof maxLen) || maxLen <= 0 || maxLen > 4096)
        throw FormatError(name(tokenizer), "does not start with a max_token_length (is this a llama2.c tokenizer.bin?)");
    std::vector<Llama2cPiece> pieces(static_cast<size_t>(vocabSize));
    for (int64_t id = 0; id < vocabSize; ++id) {
        Llama2cPiece& p = pieces[static_cast<size_t>(id)];
        int32_t len = 0;
        if (!in.read(reinterpret_cast<char*>(&p.score), sizeof p.score) || !in.read(reinterpret_cast<char*>(&len), sizeof len))
            throw FormatError(name(tokenizer), "ends at piece " + std::to_string(id) + " of the " + std::to_string(vocabSize) +
                                                   " the model's vocab_size needs (truncated, or another model's tokenizer?)");
        if (len < 0 || len > maxLen)
            throw FormatError(name(tokenizer), "piece " + std::to_string(id) + " has length " + std::to_string(len) +
                                                   " (expected 0 to max_token_length " + std::to_string(maxLen) + ")");
        p.text.resize(static_cast<size_t>(len));
        if (len > 0 && !in.read(p.text.data(), len))
            throw FormatError(name(tokenizer), "ends inside piece " + std::to_string(id) + " (truncated)");
    }
    if (in.peek() != std::char_traits<char>::eof())
        throw FormatError(name(tokenizer), "has more than the " + std::to_string(vocabSize) +
                                               " pieces the model's vocab_size says (another model's tokenizer?)");
    return pieces;
}

std::string llama2cTokenizerJson(const std::vector<Llama2cPiece>& pieces, const std::string& file) {
    if (pieces.size() < 259)
        throw FormatError(file, "has " + std::to_string(pieces.size()) +
                                    " pieces; a llama2.c vocabulary has <unk>, <s>, </s> and the 256 byte pieces first");
    const char* special[3] = {"<unk>", "<s>", "</s>"};
    std::vector<std::string> text(pieces.size());
    nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
    std::unordered_map<std::string, int64_t> idOf;
    for (size_t id = 0; id < pieces.size(); ++id) {
        text[id] = id < 3 ? special[id] : isBytePiece(pieces[id].text) ? pieces[id].text : replaceAll(pieces[id].text, " ", kSpace);
        if (id >= 3 && id < 259 && !isBytePiece(pieces[id].text))
            throw FormatError(file, "piece " + std::to_string(id) + " is '" + pieces[id].text +
                                        "' (expected the byte piece <0x" + [&] {
                                            char b[3];
                                            std::snprintf(b, sizeof b, "%02X", unsigned(id - 3));
                                            return std::string(b);
                                        }() + ">)");
        if (idOf.emplace(text[id], static_cast<int64_t>(id)).second) vocab[text[id]] = id;
    }
    // Every split of a piece into two pieces is a merge; llama2.c merges the
    // pair whose merged piece scores highest, so that is the rank order
    // (ties: the lower id first).
    std::vector<size_t> order;
    for (size_t id = 3; id < pieces.size(); ++id) order.push_back(id);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pieces[a].score > pieces[b].score; });
    nlohmann::ordered_json merges = nlohmann::ordered_json::array();
    for (size_t id : order) {
        const std::string& s = text[id];
        if (idOf.at(s) != static_cast<int64_t>(id)) continue;  // a repeated piece: the first id is the one looked up
        for (size_t at = utf8Length(static_cast<unsigned char>(s[0])); at < s.size();
             at += utf8Length(static_cast<unsigned char>(s[at]))) {
            const std::string left = s.substr(0, at), right = s.substr(at);
            const auto l = idOf.find(left), r = idOf.find(right);
            if (l == idOf.end() || r == idOf.end() || l->second < 3 || r->second < 3) continue;
            merges.push_back(left + " " + right);
        }
    }
    auto specialToken = [&](int id) {
        return nlohmann::ordered_json{{"id", id},          {"content", special[id]}, {"single_word", false},
                                      {"lstrip", false},   {"rstrip", false},        {"normalized", false},
                                      {"special", true}};
    };
    nlohmann::ordered_json j;
    j["version"] = "1.0";
    j["truncation"] = nullptr;
    j["padding"] = nullptr;
    j["added_tokens"] = {specialToken(0), specialToken(1), specialToken(2)};
    j["normalizer"] = {{"type", "Sequence"},
                       {"normalizers",
                        {{{"type", "Prepend"}, {"prepend", kSpace}},
                         {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}}}}};
    j["pre_tokenizer"] = nullptr;
    j["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"SpecialToken", {{"id", "<s>"}, {"type_id", 1}}}},
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
    j["decoder"] = {{"type", "Sequence"},
                    {"decoders",
                     {{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}},
                      {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
    j["model"] = {{"type", "BPE"},        {"dropout", nullptr},      {"unk_token", "<unk>"},
                  {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                  {"fuse_unk", true},     {"byte_fallback", true},   {"vocab", vocab},
                  {"merges", merges}};
    return j.dump(1) + "\n";
}

ImportReport importLlama2c(const fs::path& model, const fs::path& tokenizer, const fs::path& outDir) {
    OutputGuard guard;
    guard.input(model);
    guard.input(tokenizer);
    guard.output(outDir / "model.safetensors", "OUT_DIR");
    ImportReport report;
    const Llama2cHeader h = readLlama2cHeader(model);
    Staging staging(outDir);  // refuses an OUT_DIR in use before anything is read
    report.header = h;
    const std::vector<Llama2cPiece> pieces = readLlama2cTokenizer(tokenizer, std::abs(int64_t(h.vocabSize)));
    const std::string tokenizerJson = llama2cTokenizerJson(pieces, name(tokenizer));
    const std::string config = configText(h);
    parseConfig(config, "the imported config.json");  // our own output must load

    uint64_t size = 0;
    std::ifstream in = openBinary(model, &size);
    in.seekg(kHeaderInts * sizeof(int32_t));
    std::vector<std::vector<float>> data;  // owned by the blobs below
    std::vector<TensorBlob> blobs;
    std::vector<std::pair<std::string, std::vector<int64_t>>> names;
    for (const Slab& s : slabs(h)) {
        const int64_t n = numel(s.shape);
        for (int64_t l = 0; l < std::max<int64_t>(1, s.layers); ++l) {
            std::vector<float> v(static_cast<size_t>(n));
            if (!in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(float))))
                throw FormatError(name(model), "ends inside " + s.what + " (truncated)");
            if (s.hfName.empty()) continue;
            if (s.what == "wq") v = toRotatedHalves(v, h.heads, s.shape[0], s.shape[1]);
            if (s.what == "wk") v = toRotatedHalves(v, h.kvHeads, s.shape[0], s.shape[1]);
            report.parameters += n;
            data.push_back(std::move(v));
            names.push_back({s.layers ? replaceAll(s.hfName, "{}", std::to_string(l)) : s.hfName, s.shape});
        }
    }
    for (size_t i = 0; i < data.size(); ++i) blobs.push_back({names[i].first, DType::F32, names[i].second, data[i].data()});

    writeSafetensors(staging.dir() / "model.safetensors", blobs, {{"format", "pt"}});
    writeFileAtomically(staging.dir() / "config.json", config);
    writeFileAtomically(staging.dir() / "tokenizer.json", tokenizerJson);
    staging.commit();
    return report;
}

}  // namespace kvlens
