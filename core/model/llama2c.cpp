#include "core/model/llama2c.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <system_error>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/safe_file.h"
#include "core/model/config.h"
#include "core/model/gguf_tokenizer.h"
#include "core/model/import_common.h"
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

std::string replaceAll(std::string s, const std::string& from, const std::string& to) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
    return s;
}

bool isBytePiece(const std::string& s) {
    return s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' && std::isxdigit(static_cast<unsigned char>(s[3])) &&
           std::isxdigit(static_cast<unsigned char>(s[4]));
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
    SentencePieceVocab vocab;
    for (size_t id = 0; id < pieces.size(); ++id) {
        const std::string& text = pieces[id].text;
        if (id >= 3 && id < 259 && !isBytePiece(text))
            throw FormatError(file, "piece " + std::to_string(id) + " is '" + text + "' (expected the byte piece <0x" + [&] {
                                        char b[3];
                                        std::snprintf(b, sizeof b, "%02X", unsigned(id - 3));
                                        return std::string(b);
                                    }() + ">)");
        vocab.pieces.push_back(id < 3 ? special[id] : isBytePiece(text) ? text : replaceAll(text, " ", kSpace));
        vocab.scores.push_back(pieces[id].score);
        vocab.mergeable.push_back(id >= 3);  // run.c looks up merged pieces among the others only
    }
    vocab.added = {{0, true}, {1, true}, {2, true}};
    vocab.unk = 0;
    vocab.bos = 1;  // run.c starts every prompt with <s>
    return sentencePieceTokenizerJson(vocab);
}

ImportReport importLlama2c(const fs::path& model, const fs::path& tokenizer, const fs::path& outDir) {
    OutputGuard guard;
    guard.input(model);
    guard.input(tokenizer);
    guard.output(outDir / "model.safetensors", "OUT_DIR");
    ImportReport report;
    const Llama2cHeader h = readLlama2cHeader(model);
    StagingFolder staging(outDir);  // refuses an OUT_DIR in use before anything is read
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
