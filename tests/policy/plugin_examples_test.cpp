// The example scorers shipped in resources/plugins (docs/plugins.md),
// compiled here with Debian's python3-torch exactly as a user would
// (`python3 keydiff.py out.pt`) and loaded through the registry: the scripted
// KeyDiff keeps what the built-in KeyDiff keeps, trim for trim; the
// focused-attention scorer weights each window query by 1 - H/log(n).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/policy/policy_info.h"
#include "fixtures.h"

using namespace kvlens;
using namespace kvlens::test;
namespace fs = std::filesystem;

namespace {

// resources/plugins/NAME.py compiled to a .pt in a scratch folder (once per name).
std::string compiled(const std::string& name) {
    const fs::path dir = fs::path(KVLENS_TEST_TMP) / "plugins";
    fs::create_directories(dir);
    const fs::path out = dir / (name + ".pt");
    const fs::path source = fs::path(KVLENS_PLUGIN_DIR) / (name + ".py");
    if (!fs::exists(out)) {
        const std::string cmd = std::string("'") + KVLENS_PYTHON3 + "' '" + source.string() + "' '" + out.string() + "'";
        const int rc = std::system(cmd.c_str());
        EXPECT_EQ(rc, 0) << cmd << " failed: the example needs Python 3 with PyTorch (Debian: python3-torch)";
    }
    return out.string();
}

}  // namespace

// The first example of docs/plugins.md, as a reader copies it: it compiles
// with Debian's torch (its norm(dim=...) did not script under 1.13; issue 50)
// and scores each key by minus its L2 norm.
TEST(PluginExamples, TheDocsFirstExampleCompilesAndScoresKeyNorms) {
    std::ifstream doc(fs::path(KVLENS_PLUGIN_DIR) / "../../docs/plugins.md");
    std::stringstream text;
    text << doc.rdbuf();
    const std::string md = text.str(), open = "```python\n";
    const size_t begin = md.find(open), end = md.find("```", begin + open.size());
    ASSERT_NE(begin, std::string::npos) << "docs/plugins.md has no python example";
    const fs::path dir = fs::path(KVLENS_TEST_TMP) / "docs-example";
    fs::create_directories(dir);
    std::ofstream(dir / "example.py") << md.substr(begin + open.size(), end - begin - open.size());
    const std::string cmd = "cd '" + dir.string() + "' && '" + KVLENS_PYTHON3 + "' example.py";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const std::string file = (dir / "lownorm.pt").string();
    torch::jit::Module m = torch::jit::load(file);
    const at::Tensor keys = at::tensor({3.f, 4.f, 0.f, 1.f, 1.f, 1.f}).view({1, 3, 2});
    const at::Tensor got = m.forward({keys, keys, at::zeros({1, 0, 2}), at::zeros({1, 0, 3}), at::arange(3).view({1, 3})})
                               .toTensor();
    EXPECT_TRUE(at::allclose(got, at::tensor({-5.f, -1.f, -std::sqrt(2.f)}).view({1, 3}))) << got;
    EXPECT_EQ(parsePolicySpec("script:" + file).id, "script-lownorm");
}

TEST(PluginExamples, ScriptedKeyDiffKeepsWhatKeyDiffKeeps) {
    const std::string file = compiled("keydiff");
    ASSERT_TRUE(fs::exists(file));
    EXPECT_EQ(parsePolicySpec("script:" + file + ":window=0").id, "script-keydiff");
    expectSameKeeps("keydiff", "script:" + file + ":window=0", 4, 2, 10);   // GQA, 2 KV heads
    expectSameKeeps("keydiff", "script:" + file + ":window=0", 2, 2, 6);    // MHA, a small budget
    expectSameKeeps("keydiff:heads=adaptive,alpha=0.2", "script:" + file + ":window=0,heads=adaptive,alpha=0.2", 4, 2,
                    10);  // heads of different lengths: padding must not move the anchor
}

TEST(PluginExamples, FocusedAttentionWeightsEachQueryByItsFocus) {
    const std::string file = compiled("attention_entropy");
    ASSERT_TRUE(fs::exists(file));
    torch::jit::Module m = torch::jit::load(file);
    // One query head, two window queries over 4 keys: the first spreads its
    // attention evenly (focus 0), the second puts 0.7 on key 2.
    const at::Tensor attention = at::tensor({0.25f, 0.25f, 0.25f, 0.25f, 0.1f, 0.1f, 0.7f, 0.1f}).view({1, 2, 4});
    const at::Tensor keys = at::zeros({1, 4, 2}), queries = at::zeros({1, 2, 2});
    const at::Tensor positions = at::arange(4, at::kLong).view({1, 4});
    const at::Tensor got = m.forward({keys, keys, queries, attention, positions}).toTensor();
    ASSERT_EQ(got.sizes(), (at::IntArrayRef{1, 4}));
    const double h = -(3 * 0.1 * std::log(0.1) + 0.7 * std::log(0.7));
    const double focus = 1 - h / std::log(4.0);
    for (int64_t j = 0; j < 4; ++j) {
        const double a = j == 2 ? 0.7 : 0.1;
        EXPECT_NEAR(got[0][j].item<double>(), a * focus, 1e-6) << "key " << j;
    }
    // Without window queries (window=0) it scores nothing and the engine keeps the most recent.
    const at::Tensor none = m.forward({keys, keys, at::zeros({1, 0, 2}), at::zeros({1, 0, 4}), positions}).toTensor();
    EXPECT_EQ(none.sizes(), (at::IntArrayRef{1, 4}));
    // Loaded as a policy it runs with the engine's window and GQA reduction.
    const std::string id = parsePolicySpec("script:" + file).id;
    EXPECT_EQ(id, "script-attention_entropy");
    Driver d(policy("script:" + file + ":window=4"), 4, 2, 8, 10, 3);
    d.step(20);
    for (int i = 0; i < 10; ++i) {
        const Plan p = d.step(1);
        for (const auto& head : p.keep) EXPECT_EQ(head.size(), 10u);
    }
}
