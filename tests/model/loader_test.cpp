// Loader error cases: every malformed input gives a typed error that names
// the file (and tensor or field) at fault, never a crash.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/config.h"
#include "core/model/model.h"
#include "core/model/safetensors.h"
#include "tests/support/test_models.h"

using namespace kvlens;
namespace fs = std::filesystem;

namespace {

// An empty folder in this process's scratch folder.
fs::path scratch(const std::string& name) {
    static const kvlens::test::ScratchDir root("loader");
    const fs::path dir = root / name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

void writeBytes(const fs::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary) << bytes;
}

// A safetensors file with an arbitrary header text and `dataBytes` of data.
std::string rawSafetensors(const std::string& header, size_t dataBytes) {
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return out + header + std::string(dataBytes, '\x01');
}

template <class E, class F>
std::string errorOf(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected an exception";
    return "";
}

}  // namespace

TEST(Safetensors, RoundTripsTensors) {
    fs::path f = scratch("roundtrip") / "a.safetensors";
    std::vector<float> a = {1, 2, 3, 4, 5, 6};
    std::vector<uint16_t> b = {0x3c00, 0x4000};  // f16 1.0, 2.0
    writeSafetensors(f, {{"a", DType::F32, {2, 3}, a.data()}, {"b", DType::F16, {2}, b.data()}}, {{"format", "pt"}});
    auto st = SafetensorsFile::open(f);
    ASSERT_EQ(st->tensors().size(), 2u);
    const TensorInfo* ta = st->find("a");
    ASSERT_NE(ta, nullptr);
    EXPECT_EQ(ta->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(std::memcmp(st->data(*ta), a.data(), 24), 0);
    EXPECT_EQ(st->metadata().at("format"), "pt");
}

TEST(Safetensors, TruncatedFileNamesFileAndTensor) {
    fs::path dir = scratch("truncated");
    std::vector<float> a(100, 1.f);
    writeSafetensors(dir / "m.safetensors", {{"model.embed_tokens.weight", DType::F32, {10, 10}, a.data()}});
    auto size = fs::file_size(dir / "m.safetensors");
    fs::resize_file(dir / "m.safetensors", size - 17);
    std::string msg = errorOf<FormatError>([&] { SafetensorsFile::open(dir / "m.safetensors"); });
    EXPECT_NE(msg.find("m.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("model.embed_tokens.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;

    writeBytes(dir / "tiny.safetensors", "abc");
    EXPECT_THROW(SafetensorsFile::open(dir / "tiny.safetensors"), FormatError);
}

TEST(Safetensors, HeaderLengthBeyondFile) {
    fs::path p = scratch("hlen") / "x.safetensors";
    std::string bytes = rawSafetensors("{}", 0);
    bytes[0] = '\xff';
    bytes[1] = '\xff';
    writeBytes(p, bytes);
    std::string msg = errorOf<FormatError>([&] { SafetensorsFile::open(p); });
    EXPECT_NE(msg.find("header length"), std::string::npos) << msg;
}

TEST(Safetensors, HeaderLies) {
    fs::path dir = scratch("lies");
    struct Case {
        const char* header;
        size_t data;
        const char* expect;
    } cases[] = {
        {"not json", 0, "not a JSON object"},
        {R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 16, "need 16"},
        {R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", 8, "truncated"},
        {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 16, "begin > end"},
        {R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8, "unsupported dtype 'Q4'"},
        {R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, "non-negative"},
        {R"({"w":{"dtype":"F32","shape":[2]}})", 8, "data_offsets"},
        {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
         12, "overlap"},
        {R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8, "overflow"},
    };
    int i = 0;
    for (const auto& c : cases) {
        fs::path p = dir / ("case" + std::to_string(i++) + ".safetensors");
        writeBytes(p, rawSafetensors(c.header, c.data));
        std::string msg = errorOf<FormatError>([&] { SafetensorsFile::open(p); });
        EXPECT_NE(msg.find(c.expect), std::string::npos) << "header " << c.header << " gave: " << msg;
        EXPECT_NE(msg.find(p.filename().string()), std::string::npos) << msg;
    }
}

TEST(Config, ParsesLlamaFields) {
    ModelConfig c = parseConfig(R"({"model_type":"llama","vocab_size":32,"hidden_size":16,"intermediate_size":40,
        "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"rms_norm_eps":1e-5,
        "rope_theta":500000.0,"max_position_embeddings":128,"eos_token_id":[1,2],
        "rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,
        "original_max_position_embeddings":8192}})",
                                "config.json");
    EXPECT_EQ(c.family, Family::Llama);
    EXPECT_EQ(c.headDim, 4);
    EXPECT_EQ(c.groupSize(), 2);
    EXPECT_DOUBLE_EQ(c.normEps, 1e-5);
    EXPECT_DOUBLE_EQ(c.ropeTheta, 500000.0);
    EXPECT_EQ(c.ropeScaling.type, RopeScaling::Type::Llama3);
    EXPECT_EQ(c.eosTokenIds, (std::vector<int64_t>{1, 2}));
}

TEST(Config, Qwen3ExplicitHeadDimAndGpt2Names) {
    ModelConfig q = parseConfig(R"({"model_type":"qwen3","vocab_size":32,"hidden_size":16,"intermediate_size":40,
        "num_hidden_layers":1,"num_attention_heads":4,"num_key_value_heads":1,"head_dim":8})",
                                "config.json");
    EXPECT_EQ(q.headDim, 8);
    EXPECT_TRUE(q.qkNorm);
    ModelConfig g = parseConfig(R"({"model_type":"gpt2","vocab_size":50,"n_embd":16,"n_layer":2,"n_head":4,
        "n_positions":64})",
                                "config.json");
    EXPECT_EQ(g.family, Family::Gpt2);
    EXPECT_EQ(g.intermediateSize, 64);
    EXPECT_TRUE(g.tieEmbeddings);
}

TEST(Config, BadInputNamesTheFieldAndFile) {
    struct Case {
        const char* json;
        const char* expect;
    } cases[] = {
        {"{not json", "not valid JSON"},
        {"[1,2]", "JSON object"},
        {R"({"vocab_size":3})", "missing field 'model_type'"},
        {R"({"model_type":"mamba"})", "unsupported model_type 'mamba'"},
        {R"({"model_type":"llama","vocab_size":"many"})", "'vocab_size' must be an integer"},
        {R"({"model_type":"llama","vocab_size":32,"hidden_size":16,"intermediate_size":40,"num_hidden_layers":1,
            "num_attention_heads":4,"num_key_value_heads":3})",
         "not a multiple"},
        {R"({"model_type":"llama","vocab_size":32,"hidden_size":16,"intermediate_size":40,"num_hidden_layers":1,
            "num_attention_heads":4,"rope_scaling":{"rope_type":"yarn","factor":2.0}})",
         "unsupported rope_scaling type 'yarn'"},
        {R"({"model_type":"llama","vocab_size":32,"hidden_size":16,"intermediate_size":40,"num_hidden_layers":0,
            "num_attention_heads":4})",
         "num_hidden_layers must be positive"},
    };
    for (const auto& c : cases) {
        std::string msg;
        try {
            parseConfig(c.json, "/models/x/config.json");
            ADD_FAILURE() << "accepted: " << c.json;
        } catch (const Error& e) {
            msg = e.what();
        }
        EXPECT_NE(msg.find(c.expect), std::string::npos) << c.json << " gave: " << msg;
        EXPECT_NE(msg.find("/models/x/config.json"), std::string::npos) << msg;
    }
}

TEST(Config, MissingFileIsAFormatError) {
    EXPECT_THROW(loadConfig(scratch("nofile") / "config.json"), FormatError);
}

// ---- whole model directories -------------------------------------------

namespace {

using kvlens::test::makeRandomModel;
using kvlens::test::ModelOptions;
using kvlens::test::ScratchDir;

std::string loadError(const fs::path& dir) {
    try {
        Model::load(dir);
    } catch (const Error& e) {
        return e.what();
    }
    ADD_FAILURE() << "loaded " << dir;
    return "";
}

// Rewrites model.safetensors with one tensor changed by `edit` (or dropped
// when edit returns false).
void rewriteWeights(const fs::path& dir, const std::function<bool(TensorBlob&)>& edit) {
    auto st = SafetensorsFile::open(dir / "model.safetensors");
    std::vector<TensorBlob> blobs;
    for (const auto& t : st->tensors()) {
        TensorBlob b{t.name, t.dtype, t.shape, st->data(t)};
        if (edit(b)) blobs.push_back(b);
    }
    fs::path tmp = dir / "rewritten.safetensors";
    writeSafetensors(tmp, blobs);
    st.reset();
    fs::rename(tmp, dir / "model.safetensors");
}

}  // namespace

TEST(ModelLoad, MissingTensorIsNamed) {
    ScratchDir d("missing-tensor");
    makeRandomModel(Family::Llama, {}, 1, d.path());
    rewriteWeights(d.path(), [](TensorBlob& b) { return b.name != "model.layers.1.mlp.up_proj.weight"; });
    std::string msg = loadError(d.path());
    EXPECT_NE(msg.find("missing tensor 'model.layers.1.mlp.up_proj.weight'"), std::string::npos) << msg;
}

TEST(ModelLoad, MisShapedTensorNamesFileTensorAndShapes) {
    ScratchDir d("wrong-shape");
    makeRandomModel(Family::Qwen2, {}, 2, d.path());
    rewriteWeights(d.path(), [](TensorBlob& b) {
        if (b.name == "model.layers.0.self_attn.k_proj.bias") b.shape = {b.shape[0] / 2, 2};
        return true;
    });
    std::string msg = loadError(d.path());
    EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'model.layers.0.self_attn.k_proj.bias' has shape"), std::string::npos) << msg;
}

TEST(ModelLoad, TruncatedWeightsAndMissingFiles) {
    ScratchDir d("truncated-model");
    makeRandomModel(Family::Llama, {}, 3, d.path());
    fs::resize_file(d / "model.safetensors", fs::file_size(d / "model.safetensors") / 2);
    EXPECT_NE(loadError(d.path()).find("truncated"), std::string::npos);
    fs::remove(d / "model.safetensors");
    EXPECT_NE(loadError(d.path()).find("no model.safetensors"), std::string::npos);
    EXPECT_NE(loadError(d / "nowhere").find("not a model directory"), std::string::npos);
    fs::remove(d / "config.json");
    EXPECT_NE(loadError(d.path()).find("config.json"), std::string::npos);
}

TEST(ModelLoad, UnknownModelTypeIsAModelError) {
    ScratchDir d("unknown-type");
    makeRandomModel(Family::Llama, {}, 4, d.path());
    std::ofstream(d / "config.json") << R"({"model_type":"falcon","vocab_size":64})";
    EXPECT_THROW(Model::load(d.path()), ModelError);
}

TEST(ModelLoad, ShardedIndexLoadsTheSameModel) {
    ScratchDir d("sharded");
    auto tm = makeRandomModel(Family::Llama, {}, 5, d.path());
    auto whole = Model::load(d.path());
    std::vector<int64_t> tokens = {1, 5, 9, 13};
    KvCache c1 = whole->newCache();
    at::Tensor expected = whole->forward(tokens, c1).logits;
    whole.reset();

    // Split the tensors over two shards with an index, as HF does.
    auto st = SafetensorsFile::open(d / "model.safetensors");
    std::vector<TensorBlob> a, b;
    nlohmann::json map;
    for (const auto& t : st->tensors()) {
        bool first = t.name.find("layers.1.") == std::string::npos;
        (first ? a : b).push_back({t.name, t.dtype, t.shape, st->data(t)});
        map[t.name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    writeSafetensors(d / "model-00001-of-00002.safetensors", a);
    writeSafetensors(d / "model-00002-of-00002.safetensors", b);
    st.reset();
    fs::remove(d / "model.safetensors");
    std::ofstream(d / "model.safetensors.index.json") << nlohmann::json{{"weight_map", map}}.dump();
    auto sharded = Model::load(d.path());
    KvCache c2 = sharded->newCache();
    EXPECT_TRUE(at::equal(sharded->forward(tokens, c2).logits, expected));

    // An index that names a shard outside the folder, or a missing shard.
    std::ofstream(d / "model.safetensors.index.json") << R"({"weight_map":{"x":"../evil.safetensors"}})";
    EXPECT_NE(loadError(d.path()).find("not a file in the model directory"), std::string::npos);
    fs::remove(d / "model-00002-of-00002.safetensors");
    std::ofstream(d / "model.safetensors.index.json") << nlohmann::json{{"weight_map", map}}.dump();
    EXPECT_NE(loadError(d.path()).find("model-00002-of-00002.safetensors"), std::string::npos);
}

TEST(ModelLoad, BadDeviceAndDtypeAreArgumentErrors) {
    ScratchDir d("device");
    makeRandomModel(Family::Llama, {}, 6, d.path());
    EXPECT_THROW(Model::load(d.path(), RunSettings{"tpu", "auto", 0}), ArgumentError);
    EXPECT_THROW(Model::load(d.path(), RunSettings{"cpu", "f8", 0}), ArgumentError);
    EXPECT_THROW(Model::load(d.path(), RunSettings{"cuda:x", "auto", 0}), ArgumentError);
    if (!cudaAvailable()) EXPECT_THROW(Model::load(d.path(), RunSettings{"cuda", "auto", 0}), ArgumentError);
}
