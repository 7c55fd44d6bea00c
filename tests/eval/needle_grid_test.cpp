// The needle grid on a tiny random model with the bundled vocabulary: the
// grid's shape, that a policy whose budget covers the prompt answers exactly
// as the full cache, JSON/CSV round trips, and the argument errors.
#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "core/study/needle_grid.h"
#include "core/eval/vocabulary.h"
#include "core/study/needle_io.h"
#include "core/policy/budget.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/support/test_models.h"

using namespace kvlens;

namespace {

class NeedleGridTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        s_dir = std::make_unique<test::ScratchDir>("needle_grid");
        test::ModelOptions mo;
        mo.vocabSize = static_cast<int64_t>(eval::Vocabulary::bundled().size());
        mo.maxPositions = 512;
        test::makeRandomModel(Family::Llama, mo, 5, s_dir->path() / "model");
        eval::Vocabulary::bundled().writeTokenizerJson(s_dir->path() / "model" / "tokenizer.json");
        s_model = std::shared_ptr<const Model>(Model::load(s_dir->path() / "model"));
        s_tok = std::make_shared<const Tokenizer>(Tokenizer::fromFile(s_dir->path() / "model" / "tokenizer.json"));
    }
    static void TearDownTestSuite() {
        s_model.reset();
        s_dir.reset();
    }
    static eval::NeedleGridOptions options() {
        eval::NeedleGridOptions o;
        o.contexts = {64, 96};
        o.depths = {0, 0.5, 1};
        o.policies = {parsePolicySpec("streaming"), parsePolicySpec("h2o")};
        o.budgets = {parseBudget("16"), parseBudget("200")};
        o.samples = 2;
        return o;
    }
    static std::unique_ptr<test::ScratchDir> s_dir;
    static std::shared_ptr<const Model> s_model;
    static std::shared_ptr<const Tokenizer> s_tok;
};
std::unique_ptr<test::ScratchDir> NeedleGridTest::s_dir;
std::shared_ptr<const Model> NeedleGridTest::s_model;
std::shared_ptr<const Tokenizer> NeedleGridTest::s_tok;

const eval::NeedleCell& cellOf(const eval::NeedleGridResult& g, int64_t context, double depth,
                               const std::string& policy, const std::string& budget) {
    for (const auto& c : g.cells)
        if (c.context == context && c.depth == depth && c.policy == policy && c.budget == budget) return c;
    throw std::runtime_error("no cell " + policy + " " + budget);
}

TEST_F(NeedleGridTest, GridShapeAnswersAndUncompressedPoliciesMatchFull) {
    int64_t calls = 0, lastTotal = 0;
    const auto grid = eval::runNeedleGrid(s_model, s_tok, options(), [&](int64_t done, int64_t total) {
        ++calls;
        EXPECT_EQ(done, calls);
        lastTotal = total;
    });
    EXPECT_EQ(calls, 6);
    EXPECT_EQ(lastTotal, 6);
    ASSERT_EQ(grid.cells.size(), 6u * (1 + 2 * 2));
    std::set<std::string> expected;
    for (const auto& c : grid.cells) {
        ASSERT_EQ(c.answers.size(), 2u);
        EXPECT_EQ(c.promptTokens, c.context + 1);  // + <bos>
        for (const auto& a : c.answers) {
            EXPECT_FALSE(a.answer.empty());
            EXPECT_GE(a.overlap, 0.0);
            EXPECT_LE(a.overlap, 1.0);
            EXPECT_EQ(a.exact, eval::exactMatch(a.answer, a.expected));
            expected.insert(a.expected);
        }
    }
    EXPECT_EQ(expected.size(), 2u);  // one needle per seed across the whole grid
    // A budget above the prompt evicts nothing: the same greedy answers as full.
    for (int64_t ctx : {64, 96})
        for (double d : {0.0, 0.5, 1.0}) {
            const auto& full = cellOf(grid, ctx, d, "full", "-");
            for (const std::string p : {"streaming", "h2o"}) {
                const auto& same = cellOf(grid, ctx, d, p, "200");
                for (size_t s = 0; s < full.answers.size(); ++s)
                    EXPECT_EQ(same.answers[s].answer, full.answers[s].answer) << p << " ctx " << ctx << " depth " << d;
            }
        }
}

TEST_F(NeedleGridTest, JsonAndCsvRoundTrip) {
    auto o = options();
    o.contexts = {64};
    o.depths = {0.25};
    o.policies.resize(1);
    o.budgets.resize(1);
    const auto grid = eval::runNeedleGrid(s_model, s_tok, o);
    const auto back = needleGridFromJson(needleGridToJson(grid));
    ASSERT_EQ(back.cells.size(), grid.cells.size());
    for (size_t i = 0; i < grid.cells.size(); ++i) {
        EXPECT_EQ(back.cells[i].policy, grid.cells[i].policy);
        EXPECT_EQ(back.cells[i].exact, grid.cells[i].exact);
        EXPECT_EQ(back.cells[i].overlap, grid.cells[i].overlap);
        ASSERT_EQ(back.cells[i].answers.size(), grid.cells[i].answers.size());
        EXPECT_EQ(back.cells[i].answers[0].answer, grid.cells[i].answers[0].answer);
    }
    const std::string csv = needleGridToCsv(grid);
    EXPECT_EQ(csv.substr(0, csv.find('\n')), "context,depth,policy,budget,exact,overlap,samples,prompt_tokens");
    EXPECT_NE(csv.find("\n64,0.25,\"streaming\",\"16\","), std::string::npos) << csv;

    auto j = needleGridToJson(grid);
    j["version"] = 2;
    EXPECT_THROW(needleGridFromJson(j), FormatError);
    j = needleGridToJson(grid);
    j["cells"][0].erase("exact");
    EXPECT_THROW(needleGridFromJson(j), FormatError);
}

TEST_F(NeedleGridTest, BadGridsAreRefused) {
    auto o = options();
    o.depths = {1.5};
    EXPECT_THROW(eval::runNeedleGrid(s_model, s_tok, o), ArgumentError);
    o = options();
    o.budgets.clear();
    EXPECT_THROW(eval::runNeedleGrid(s_model, s_tok, o), ArgumentError);
    o = options();
    o.contexts = {10};  // cannot hold the needle and the question
    EXPECT_THROW(eval::runNeedleGrid(s_model, s_tok, o), ArgumentError);
    o = options();
    o.contexts.clear();
    EXPECT_THROW(eval::runNeedleGrid(s_model, s_tok, o), ArgumentError);
    EXPECT_THROW(eval::runNeedleGrid(s_model, nullptr, options()), ArgumentError);
}

}  // namespace
