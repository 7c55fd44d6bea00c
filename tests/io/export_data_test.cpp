// Data exports of a real trace: CSV, JSON and NPY read back to the very
// numbers the trace holds; bad selections are refused with a clear message.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/io/export_data.h"
#include "core/io/export_names.h"
#include "core/model/model.h"
#include "core/run/session.h"
#include "tests/support/test_models.h"

using namespace kvlens;
namespace fs = std::filesystem;

namespace {

class ExportDataTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        s_dir = std::make_unique<test::ScratchDir>("export_data");
        test::makeRandomModel(Family::Llama, {}, 21, s_dir->path() / "model");
        auto model = std::shared_ptr<const Model>(Model::load(s_dir->path() / "model"));
        SessionOptions o;
        o.prompt = test::randomTokens(20, 64, 3);
        o.policies = {parsePolicySpec("h2o"), parsePolicySpec("streaming:sinks=2")};
        o.budget = parseBudget("8");
        o.attention = {true, 1, 2};
        Session session(model, o);
        session.start();
        session.step();
        s_trace = session.step();
    }
    static void TearDownTestSuite() {
        s_trace.reset();
        s_dir.reset();
    }
    static std::unique_ptr<test::ScratchDir> s_dir;
    static std::shared_ptr<const Trace> s_trace;
};
std::unique_ptr<test::ScratchDir> ExportDataTest::s_dir;
std::shared_ptr<const Trace> ExportDataTest::s_trace;

// Splits CSV text into rows of fields (quotes removed; the tests' labels hold no commas).
std::vector<std::vector<std::string>> parseCsv(const std::string& text) {
    std::vector<std::vector<std::string>> rows;
    std::stringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("# ", 0) == 0) continue;  // metadata
        std::vector<std::string> fields;
        std::stringstream f(line);
        for (std::string cell; std::getline(f, cell, ',');) {
            if (cell.size() >= 2 && cell.front() == '"') cell = cell.substr(1, cell.size() - 2);
            fields.push_back(cell);
        }
        if (!line.empty() && line.back() == ',') fields.emplace_back();
        rows.push_back(fields);
    }
    return rows;
}

}  // namespace

TEST_F(ExportDataTest, AttentionCsvJsonAndNpyHoldTheTraceNumbers) {
    const Trace& t = *s_trace;
    const AttentionMap& m = t.attention[1];  // h2o
    ASSERT_EQ(m.size, 22);
    const auto rows = parseCsv(exportCsv(t, ExportTable::Attention, {1}));
    ASSERT_EQ(rows.size(), static_cast<size_t>(m.size + 1));
    EXPECT_EQ(rows[0][0], "position");
    // Evicted keys (not held) and keys after the query (causally invisible) are told apart.
    int evicted = 0, after = 0;
    for (int64_t q = 0; q < m.size; ++q) {
        ASSERT_EQ(rows[q + 1].size(), static_cast<size_t>(m.size + 2));
        for (int64_t k = 0; k < m.size; ++k) {
            const std::string& cell = rows[q + 1][k + 2];
            if (k > q) {
                EXPECT_EQ(cell, "-1") << q << "," << k;
                ++after;
            } else if (std::isnan(m.at(q, k))) {
                EXPECT_EQ(cell, "") << q << "," << k;
                ++evicted;
            } else {
                EXPECT_EQ(std::stof(cell), m.at(q, k)) << q << "," << k;
                EXPECT_GE(m.at(q, k), 0.0f);
            }
        }
    }
    EXPECT_GT(evicted, 0) << "h2o at budget 8 evicts";
    EXPECT_EQ(after, m.size * (m.size - 1) / 2);
    // The metadata lines say what was exported and what the cells mean.
    const std::string csv = exportCsv(t, ExportTable::Attention, {1});
    EXPECT_EQ(csv.rfind("# kvlens-export v1 · table attention", 0), 0u) << csv.substr(0, 200);
    EXPECT_NE(csv.find("policy h2o · layer 1 · query head 2"), std::string::npos) << csv.substr(0, 200);
    EXPECT_NE(csv.find("# cells: weight in [0, 1]; -1: the key comes after the query"), std::string::npos);

    const auto j = exportJson(t, ExportTable::Attention, {1});
    EXPECT_EQ(j["policy"], "h2o");
    EXPECT_EQ(j["layer"], 1);
    EXPECT_EQ(j["head"], 2);
    for (int64_t q = 0; q < m.size; ++q)
        for (int64_t k = 0; k < m.size; ++k) {
            const auto& v = j["rows"][q][k + 2];
            if (k > q)
                EXPECT_EQ(v.get<float>(), kAfterQuery);
            else if (std::isnan(m.at(q, k)))
                EXPECT_TRUE(v.is_null());
            else
                EXPECT_EQ(v.get<float>(), m.at(q, k));
        }

    const fs::path npy = s_dir->path() / "attn.npy";
    writeAttentionNpy(npy, t, 1);
    std::vector<int64_t> shape;
    const auto back = readNpy(npy, &shape);
    EXPECT_EQ(shape, (std::vector<int64_t>{22, 22}));
    const std::vector<float> values = m.dense();
    ASSERT_EQ(back.size(), values.size());
    for (size_t i = 0; i < back.size(); ++i) {
        const bool afterQuery = static_cast<int64_t>(i) % m.size > static_cast<int64_t>(i) / m.size;
        if (afterQuery) EXPECT_EQ(back[i], kAfterQuery);
        else EXPECT_TRUE(back[i] == values[i] || (std::isnan(back[i]) && std::isnan(values[i])));
    }
    EXPECT_EQ(fs::file_size(npy) % 64, (22 * 22 * 4) % 64) << "the header pads to 64 bytes";
}

TEST_F(ExportDataTest, StatusScoresBudgetsAndMetricsTables) {
    const Trace& t = *s_trace;
    const HeadTrace& h = t.policies[1].layers[0].heads[1];
    const auto status = parseCsv(exportCsv(t, ExportTable::Scores, {1, 0, 1}));
    ASSERT_EQ(status.size(), h.status.size() + 1);
    EXPECT_EQ(status[0], (std::vector<std::string>{"position", "token", "status", "held", "score", "rank"}));
    int held = 0;
    for (size_t i = 0; i < h.status.size(); ++i) {
        EXPECT_EQ(status[i + 1][2], tokenStatusName(h.status[i]));
        held += status[i + 1][3] == "1" ? 1 : 0;
        if (!std::isnan(h.score[i])) EXPECT_EQ(std::stof(status[i + 1][4]), h.score[i]);
    }
    EXPECT_EQ(held, h.held);

    const auto budgets = parseCsv(exportCsv(t, ExportTable::Budgets));
    EXPECT_EQ(budgets.size(), 1 + 3u * 2 * 2);  // runs × layers × KV heads
    const auto metrics = exportJson(t, ExportTable::Metrics);
    EXPECT_EQ(metrics["rows"].size(), 3u * 3);  // runs × predictions (prompt end + 2 steps)
    EXPECT_EQ(metrics["rows"][3][0], "h2o");
    EXPECT_EQ(metrics["rows"][3][3].get<double>(), t.policies[1].metrics[0].kl);
}

TEST_F(ExportDataTest, BadSelectionsAreRefused) {
    const Trace& t = *s_trace;
    EXPECT_THROW(exportCsv(t, ExportTable::Status, {5}), ArgumentError);
    EXPECT_THROW(exportCsv(t, ExportTable::Status, {1, 9}), ArgumentError);
    EXPECT_THROW(exportCsv(t, ExportTable::Scores, {1, 0, 2}), ArgumentError);
    Trace noMaps = t;
    noMaps.attention.clear();
    EXPECT_THROW(exportCsv(noMaps, ExportTable::Attention), ArgumentError);
    EXPECT_THROW(parseExportTable("heatmap"), ArgumentError);
    EXPECT_EQ(parseExportTable("metrics"), ExportTable::Metrics);
    const fs::path bad = s_dir->path() / "bad.npy";
    std::ofstream(bad) << "not numpy";
    EXPECT_THROW(readNpy(bad, nullptr), FormatError);
}

// Issue 21 item 13: default export names say what a file shows.
TEST_F(ExportDataTest, DescriptiveNamesSayModelRunBudgetLayerHeadAndStep) {
    const Trace& t = *s_trace;
    EXPECT_EQ(exportDescriptiveName("kvlens-tiny", t, 1, 1, 2), "kvlens-tiny_h2o_b8_L01_H02_s2");
    EXPECT_EQ(exportDescriptiveName("kvlens-tiny", t, 2, 0, 11), "kvlens-tiny_streaming-sinks-2_b8_L00_H11_s2");
    EXPECT_EQ(exportDescriptiveName("my model/v2", t, 0, 1, 0), "my-model-v2_full_L01_H00_s2");  // no budget for full
}
