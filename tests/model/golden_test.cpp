// Golden greedy decode of the bundled model kvlens-tiny (llama2.c's test):
// for fixed prompts the generated tokens must be exactly the recorded ones.
// The golden file names the model file it was recorded with (size and
// FNV-1a hash), so a retrained model fails with a message saying so; record
// anew with KVLENS_UPDATE_GOLDEN=1 after checking the new outputs by eye.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/model/model.h"
#include "core/paths.h"
#include "core/run/generate.h"
#include "core/tokenizer/tokenizer.h"

using namespace kvlens;
namespace fs = std::filesystem;

namespace {

const fs::path kGolden = fs::path(KVLENS_TEST_DATA) / "golden" / "kvlens-tiny.json";

std::string fileHash(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    uint64_t h = 1469598103934665603ull;
    char buf[1 << 16];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
        for (std::streamsize i = 0; i < in.gcount(); ++i) h = (h ^ static_cast<unsigned char>(buf[i])) * 1099511628211ull;
        if (!in) break;
    }
    std::ostringstream s;
    s << std::hex << h;
    return s.str();
}

// The prompts a workshop would try first: a needle, an entity, a copy.
const std::vector<std::string> kPrompts = {
    "the code for the red door is 4 8 2 1 . the tired farmer walks slowly near the river . what is the code for the red door ?",
    "mara lives in the north tower . tom buys bread , tea and soap . where does mara live ?",
    "anna buys bread , tea , nuts and soap . in the evening , the cold sailor counts the moon . anna buys bread , tea ,",
};

}  // namespace

TEST(BundledModel, GreedyDecodeMatchesGolden) {
    const fs::path dir = bundledModelDir();
    ASSERT_TRUE(fs::exists(dir / "model.safetensors")) << "no bundled model at " << dir;
    const auto model = Model::load(dir);
    const Tokenizer tok = Tokenizer::fromFile(dir / "tokenizer.json");
    nlohmann::json got = {{"model_bytes", fs::file_size(dir / "model.safetensors")},
                          {"model_fnv1a", fileHash(dir / "model.safetensors")},
                          {"steps", 16},
                          {"cases", nlohmann::json::array()}};
    for (const auto& prompt : kPrompts) {
        std::vector<int64_t> ids;
        for (int32_t id : tok.encode(prompt)) ids.push_back(id);
        GenerateOptions o;
        o.steps = 16;
        const GenerateResult r = generate(*model, ids, o);
        std::vector<int32_t> gen(r.generatedIds.begin(), r.generatedIds.end());
        got["cases"].push_back({{"prompt", prompt}, {"ids", r.generatedIds}, {"text", tok.decode(gen)}});
    }
    if (std::getenv("KVLENS_UPDATE_GOLDEN")) {
        std::ofstream(kGolden) << got.dump(1) << "\n";
        GTEST_SKIP() << "recorded " << kGolden;
    }
    std::ifstream in(kGolden);
    ASSERT_TRUE(in) << "no golden file " << kGolden << " (record it with KVLENS_UPDATE_GOLDEN=1)";
    const nlohmann::json want = nlohmann::json::parse(in);
    ASSERT_EQ(want["model_fnv1a"], got["model_fnv1a"])
        << "the bundled model changed since the golden outputs were recorded: check the new outputs and record them "
           "with KVLENS_UPDATE_GOLDEN=1";
    ASSERT_EQ(want["cases"].size(), got["cases"].size());
    for (size_t i = 0; i < got["cases"].size(); ++i) {
        EXPECT_EQ(want["cases"][i]["prompt"], got["cases"][i]["prompt"]);
        EXPECT_EQ(want["cases"][i]["ids"], got["cases"][i]["ids"])
            << "prompt: " << got["cases"][i]["prompt"] << "\nwant: " << want["cases"][i]["text"]
            << "\ngot:  " << got["cases"][i]["text"];
    }
}
