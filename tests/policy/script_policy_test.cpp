// TorchScript scorers (docs/plugins.md): modules written here in TorchScript
// (torch::jit::Module::define, as torch.jit.script compiles a Python class)
// and saved to a file, then loaded through the registry's "script:FILE.pt"
// spec. A scorer that computes what a built-in policy scores keeps exactly
// what that policy keeps, step by step; bad files and bad scorers give one
// sentence naming the file.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/policy/policy_info.h"
#include "fixtures.h"

using namespace kvlens;
using namespace kvlens::test;
namespace fs = std::filesystem;

namespace {

// A scorer module whose forward's body is `body` (TorchScript), saved as DIR/NAME.
std::string saveScorer(const fs::path& dir, const std::string& name, const std::string& body) {
    torch::jit::Module m("Scorer");
    m.define("def forward(self, keys: Tensor, values: Tensor, queries: Tensor, attention: Tensor, "
             "positions: Tensor) -> Tensor:\n" +
             body + "\n");
    const fs::path file = dir / name;
    m.save(file.string());
    return file.string();
}

class ScriptPolicyTest : public ::testing::Test {
protected:
    void SetUp() override {
        m_dir = fs::temp_directory_path() / ("kvlens-script-" + std::to_string(::getpid()) + "-" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(m_dir);
    }
    void TearDown() override { fs::remove_all(m_dir); }
    fs::path m_dir;
};

std::string errorOf(const std::string& spec) {
    try {
        parsePolicySpec(spec);
    } catch (const std::exception& e) {
        return e.what();
    }
    return {};
}

}  // namespace

TEST_F(ScriptPolicyTest, AKeyNormScorerKeepsWhatKnormKeeps) {
    const std::string file = saveScorer(m_dir, "mynorm.pt", "    return -(keys * keys).sum(-1).sqrt()");
    const PolicyConfig c = parsePolicySpec("script:" + file + ":window=0");
    EXPECT_EQ(c.id, "script-mynorm");
    EXPECT_EQ(findPolicy(c.id).file, fs::absolute(file).lexically_normal().string());
    EXPECT_EQ(c.label(), "script-mynorm:window=0");
    expectSameKeeps("knorm:skip_layers=99", "script:" + file + ":window=0", 4, 2, 10);
    // The id parses on its own once loaded, and the same file is the same policy.
    EXPECT_EQ(parsePolicySpec("script-mynorm").id, "script-mynorm");
    EXPECT_EQ(parsePolicySpec("script:" + file).id, "script-mynorm");
}

// Per-query-head scores from the window's attention, reduced over the GQA
// group by the engine: SnapKV's rule without pooling, so SnapKV with
// kernel 1 keeps the same (window, queries and attention reach the module).
TEST_F(ScriptPolicyTest, WindowAttentionScoresComposeLikeSnapKv) {
    const std::string file = saveScorer(m_dir, "snap.pt", "    return attention.sum(1)");
    for (const char* gqa : {"mean", "max"}) {
        const std::string opts = std::string("window=4,gqa=") + gqa;
        expectSameKeeps("snapkv:kernel=1," + opts, "script:" + file + ":" + opts, 4, 2, 12);
    }
    // Sinks come from the engine too.
    Driver d(policy("script:" + file + ":window=2,sinks=3"), 2, 1, 8, 8, 5);
    for (int step = 0; step < 30; ++step) d.step(1);
    const auto& pos = d.cache().positions(0, 0);
    EXPECT_EQ(std::vector<int64_t>(pos.begin(), pos.begin() + 3), (std::vector<int64_t>{0, 1, 2}));
    EXPECT_EQ(pos.back(), 29);
}

// Positions arrive per entry (padding -1): a scorer keeping the oldest is a
// sink-only cache.
TEST_F(ScriptPolicyTest, PositionsReachTheScorer) {
    const std::string file = saveScorer(m_dir, "oldest.pt", "    return -positions.float()");
    Driver d(policy("script:" + file + ":window=0"), 2, 1, 8, 6, 3);
    for (int step = 0; step < 20; ++step) d.step(1);
    EXPECT_EQ(d.cache().positions(0, 0), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST_F(ScriptPolicyTest, BadFilesAndBadScorersSayWhy) {
    EXPECT_NE(errorOf("script:" + (m_dir / "missing.pt").string()).find("no such file"), std::string::npos);
    const fs::path text = m_dir / "notes.pt";
    std::ofstream(text) << "not a module\n";
    const std::string notModule = errorOf("script:" + text.string());
    EXPECT_NE(notModule.find("is not a TorchScript module"), std::string::npos) << notModule;
    EXPECT_EQ(notModule.find("frame #"), std::string::npos) << "a C++ backtrace: " << notModule;
    const std::string flat = saveScorer(m_dir, "flat.pt", "    return keys.sum(-1).sum(0)");
    const std::string shape = errorOf("script:" + flat);
    EXPECT_NE(shape.find("expected [1, 3]"), std::string::npos) << shape;
    EXPECT_NE(shape.find(flat), std::string::npos) << shape;
    const std::string nan = saveScorer(m_dir, "nan.pt", "    return keys.sum(-1) * float('nan')");
    EXPECT_NE(errorOf("script:" + nan).find("NaN or infinite"), std::string::npos);
    const std::string ints = saveScorer(m_dir, "ints.pt", "    return positions");
    EXPECT_NE(errorOf("script:" + ints).find("floating-point"), std::string::npos) << errorOf("script:" + ints);
    const std::string fails = saveScorer(m_dir, "fails.pt", "    return keys @ values");
    const std::string failed = errorOf("script:" + fails);
    EXPECT_NE(failed.find("forward failed"), std::string::npos) << failed;
    // The cause, not TorchScript's first line only (issue 50), on one line.
    EXPECT_NE(failed.find("Error: "), std::string::npos) << failed;
    EXPECT_EQ(failed.find("The following operation failed"), std::string::npos) << failed;
    EXPECT_EQ(failed.find('\n'), std::string::npos) << failed;
    // Nothing of them was registered; a parameter it lacks is named.
    for (const auto& info : policyRegistry()) EXPECT_EQ(info.id.find("script-flat"), std::string::npos);
    const std::string good = saveScorer(m_dir, "good.pt", "    return keys.sum(-1)");
    EXPECT_NE(errorOf("script:" + good + ":kernel=3").find("no parameter 'kernel'"), std::string::npos);
}

// Issue 50: a learned scorer (an nn.Linear over the keys, as torch.jit.script
// saves one) was refused by a probe at head_dim 4; the probe now tries the
// head_dims real models have, with and without requires_grad.
TEST_F(ScriptPolicyTest, ALearnedScorerLoads) {
    for (const bool grad : {false, true}) {
        torch::jit::Module m("Learned");
        m.register_parameter("weight", at::linspace(-1, 1, 64).reshape({64, 1}).requires_grad_(grad), false);
        m.define("def forward(self, keys: Tensor, values: Tensor, queries: Tensor, attention: Tensor, "
                 "positions: Tensor) -> Tensor:\n    return (keys @ self.weight).squeeze(-1)\n");
        const fs::path file = m_dir / (grad ? "learned-grad.pt" : "learned.pt");
        m.save(file.string());
        EXPECT_EQ(errorOf("script:" + file.string()), "") << "requires_grad " << grad;
    }
}

TEST_F(ScriptPolicyTest, AnotherFileOfTheSameNameGetsItsOwnId) {
    fs::create_directories(m_dir / "a");
    fs::create_directories(m_dir / "b");
    const std::string a = saveScorer(m_dir / "a", "same.pt", "    return keys.sum(-1)");
    const std::string b = saveScorer(m_dir / "b", "same.pt", "    return -keys.sum(-1)");
    const std::string ida = parsePolicySpec("script:" + a).id, idb = parsePolicySpec("script:" + b).id;
    EXPECT_NE(ida, idb);
    EXPECT_EQ(idb.rfind(ida, 0), 0u) << idb;  // "script-same" and "script-same-2"
}
