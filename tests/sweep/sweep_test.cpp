// Sweeps (core/sweep): the sweep file's checks, probes and shards, results
// written whole and read back, resuming, stale and failed probes, and on the
// bundled model: the same cells, bit for bit, however the sweep is sharded.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <set>

#include "core/error.h"
#include "core/paths.h"
#include "core/study/needle_grid.h"
#include "core/sweep/sweep.h"
#include "core/sweep/sweep_run.h"
#include "tests/support/scratch_dir.h"

using namespace kvlens;
using namespace kvlens::sweep;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

json baseSweep() {
    return json{{"format", "kvlens-sweep"},
                {"version", 1},
                {"task", "both"},
                {"policies", {"streaming", "h2o"}},
                {"budgets", {"25%", "48"}},
                {"contexts", {64, 96}},
                {"depths", {0, 50, 100}},
                {"seeds", {1, 2}},
                {"fidelity", {{"text_file", "text.txt"}, {"steps", 6}}}};
}

// The bundled model's own kind of text, long enough for every context.
std::string storyText() {
    std::string t;
    for (int i = 0; i < 60; ++i)
        t += "once upon a time there was a little girl named lily . she liked to play in the park with her dog . ";
    return t;
}

class SweepTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir = std::make_unique<test::ScratchDir>("sweep");
        std::ofstream(dir->path() / "text.txt") << storyText();
    }
    SweepSpec spec(const json& j, const std::string& name = "s.json") const {
        std::ofstream(dir->path() / name) << j.dump();
        return readSweepFile(dir->path() / name);
    }
    std::string error(const json& j) const {
        try {
            spec(j);
        } catch (const FormatError& e) {
            return e.what();
        }
        return "(accepted)";
    }
    std::unique_ptr<test::ScratchDir> dir;
};

TEST_F(SweepTest, TheFileIsCheckedFieldByField) {
    json j = baseSweep();
    j["colour"] = "red";
    EXPECT_NE(error(j).find("unknown field \"colour\""), std::string::npos) << error(j);
    j = baseSweep();
    j["task"] = "chat";
    EXPECT_NE(error(j).find("\"task\" is \"chat\""), std::string::npos) << error(j);
    j = baseSweep();
    j.erase("contexts");
    EXPECT_NE(error(j).find("\"contexts\" is missing"), std::string::npos) << error(j);
    j = baseSweep();
    j["depths"] = {0, 150};
    EXPECT_NE(error(j).find("\"depths\": 150"), std::string::npos) << error(j);
    j = baseSweep();
    j["seeds"] = {1, 1};
    EXPECT_NE(error(j).find("\"seeds\" lists 1 twice"), std::string::npos) << error(j);
    // The same value spelled differently would run the same cells twice (issue 50).
    for (const auto& [axis, values, named] :
         std::vector<std::tuple<std::string, json, std::string>>{{"budgets", {"25%", "25.0%"}, "25%"},
                                                                 {"policies", {"snapkv", "snapkv:window=32"}, "snapkv"},
                                                                 {"depths", {50, 50.0}, "50"},
                                                                 {"models", {"bundled", "bundled"}, ""}}) {
        j = baseSweep();
        j[axis] = values;
        EXPECT_NE(error(j).find("\"" + axis + "\" lists " + named), std::string::npos) << axis << ": " << error(j);
        EXPECT_NE(error(j).find("twice"), std::string::npos) << axis << ": " << error(j);
    }
    j = baseSweep();
    j["fidelity"]["steps"] = 99999999;
    EXPECT_NE(error(j).find("\"fidelity.steps\" is 99999999: expected 1 to 1000000"), std::string::npos) << error(j);
    j = baseSweep();
    j["policies"] = {"nosuchpolicy"};
    EXPECT_NE(error(j).find("\"policies\""), std::string::npos) << error(j);
    j = baseSweep();
    j.erase("budgets");
    EXPECT_NE(error(j).find("\"budgets\" is missing"), std::string::npos) << error(j);
    j = baseSweep();
    j["fidelity"]["text_file"] = "absent.txt";
    EXPECT_NE(error(j).find("absent.txt"), std::string::npos) << error(j);
    j = baseSweep();
    j["version"] = 2;
    EXPECT_NE(error(j).find("version"), std::string::npos) << error(j);
    j = baseSweep();
    j["run"] = {{"threads", 100000}};  // a hundred thousand threads that ignored SIGTERM (issue 50)
    EXPECT_NE(error(j).find("\"run.threads\" is 100000: expected 0 (LibTorch's default) to"), std::string::npos)
        << error(j);
    j = baseSweep();
    j["contexts"] = "64";
    EXPECT_NE(error(j).find("\"contexts\" is \"64\", not the expected type"), std::string::npos) << error(j);
    // Every message names the file.
    EXPECT_NE(error(j).find("s.json"), std::string::npos);
}

TEST_F(SweepTest, ProbesCellsAndShards) {
    const SweepSpec s = spec(baseSweep());
    EXPECT_EQ(s.output, dir->path() / "s.sweep");
    const auto all = probes(s);
    // needle: 2 contexts x 3 depths x 2 seeds; fidelity: 2 contexts x 2 seeds.
    ASSERT_EQ(all.size(), 12u + 4u);
    EXPECT_EQ(all.front().key(s), "needle|bundled|64|0|1");
    EXPECT_EQ(all.back().key(s), "fidelity|bundled|96|2");
    const auto cells = probeCells(s);
    ASSERT_EQ(cells.size(), 5u);  // full + 2 policies x 2 budgets
    EXPECT_EQ(cells[0], std::make_pair(std::string("full"), std::string("-")));
    EXPECT_EQ(cells[1], std::make_pair(std::string("streaming"), std::string("25%")));
    EXPECT_EQ(cellCount(s), 80);
    std::set<std::string> keys;
    for (const auto& p : all) keys.insert(p.key(s));
    EXPECT_EQ(keys.size(), all.size());
    // Shards partition the probes, sizes within one, each with its share of both contexts.
    for (int n : {1, 3, 5, 16, 40}) {
        std::vector<int> owner(all.size(), -1);
        for (int i = 0; i < n; ++i) {
            const auto mine = shardProbes(all.size(), {i, n});
            EXPECT_LE(mine.size(), all.size() / n + 1);
            EXPECT_GE(mine.size(), all.size() / n);
            for (size_t p : mine) {
                ASSERT_LT(p, all.size());
                EXPECT_EQ(owner[p], -1) << "probe " << p << " in two shards";
                owner[p] = i;
            }
        }
        EXPECT_EQ(std::count(owner.begin(), owner.end(), -1), 0);
    }
    for (int i = 0; i < 2; ++i) {
        std::set<int64_t> contexts;
        for (size_t p : shardProbes(all.size(), {i, 2})) contexts.insert(all[p].context);
        EXPECT_EQ(contexts.size(), 2u);
    }
    EXPECT_EQ(parseShard("2/4").index, 2);
    EXPECT_EQ(parseShard("2/4").count, 4);
    for (const char* bad : {"4/4", "-1/4", "1", "a/b", "1/0", "1/2x"}) EXPECT_THROW(parseShard(bad), ArgumentError) << bad;
}

TEST_F(SweepTest, ResultsAreWrittenWholeAndReadBackWithNanAsNull) {
    const SweepSpec s = spec(baseSweep());
    ProbeResult r;
    r.probe = probes(s).back();  // fidelity
    r.key = r.probe.key(s);
    r.fingerprint = s.fingerprint;
    CellResult c;
    c.policy = "h2o";
    c.budget = "48";
    c.promptTokens = 96;
    c.budgetTokens = 48;
    c.kl = 0.25;
    c.top1 = 0.5;
    c.perplexity = std::nan("");
    c.retainedMass = 0.75;
    c.outputCosine = 0.9;
    for (const auto& [policy, budget] : probeCells(s)) {  // a done probe holds every cell of the plan
        c.policy = policy;
        c.budget = budget;
        r.cells.push_back(c);
    }
    appendResult(s, {0, 1}, r);
    ProbeResult failed = r;
    failed.probe = probes(s).front();
    failed.key = failed.probe.key(s);
    failed.failed = true;
    failed.error = "out of memory";
    failed.cells.clear();
    appendResult(s, {0, 1}, failed);
    // Each line is one whole probe; nothing else is left beside the file.
    std::ifstream in(shardFile(s, {0, 1}));
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) {
        ++lines;
        EXPECT_TRUE(json::accept(line)) << line;
        if (lines == 1) EXPECT_NE(line.find("\"perplexity\":null"), std::string::npos) << line;
    }
    EXPECT_EQ(lines, 2);
    size_t files = 0;
    for (const auto& e : fs::directory_iterator(s.output / "results")) files += e.is_regular_file();
    EXPECT_EQ(files, 1u);
    const auto back = readResults(s);
    ASSERT_EQ(back.size(), 2u);
    EXPECT_EQ(back[0].key, r.key);
    EXPECT_TRUE(std::isnan(back[0].cells[0].perplexity));
    EXPECT_DOUBLE_EQ(back[0].cells[0].kl, 0.25);
    EXPECT_TRUE(back[1].failed);
    const SweepStatus st = sweepStatus(s, back);
    EXPECT_EQ(st.doneProbes, 1);
    ASSERT_EQ(st.failed.size(), 1u);
    EXPECT_EQ(st.failed[0].second, "out of memory");
    EXPECT_EQ(st.missing.size(), probes(s).size() - 1);
    // A merged CSV leaves the NaN empty, never a number.
    const std::string csv = mergeResults(s, back).toCsv(s);
    EXPECT_NE(csv.find(",0.25,0.5,,0.75,"), std::string::npos) << csv;
    EXPECT_EQ(csv.find("nan"), std::string::npos);
    // A damaged results file is named with its line.
    std::ofstream(shardFile(s, {1, 2})) << "{not json\n";
    try {
        readResults(s);
        ADD_FAILURE() << "a damaged results file was read";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("shard-0001-of-0002.jsonl line 1"), std::string::npos) << e.what();
    }
    // A forged line is refused, not merged: metrics where no run can put
    // them, or a key whose fields name another probe.
    const json good = toJson(r, s);
    auto refused = [&](json forged, const std::string& why) {
        std::ofstream(shardFile(s, {1, 2})) << forged.dump() << "\n";
        try {
            readResults(s);
            ADD_FAILURE() << "a forged result was read: " << forged.dump();
        } catch (const FormatError& e) {
            EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
        }
    };
    json forged = good;
    forged["cells"][0]["top1"] = 7;
    refused(forged, "a cell's \"top1\" is 7: expected 0 to 1");
    forged = good;
    forged["cells"][0]["kl"] = -3;
    refused(forged, "a cell's \"kl\" is -3");
    forged = good;
    forged["cells"][0]["prompt_tokens"] = -1;
    refused(forged, "\"prompt_tokens\" is negative");
    forged = good;
    forged["context"] = good["context"].get<int64_t>() * 2;
    refused(forged, "but its fields are those of");
    std::ofstream(shardFile(s, {1, 2})) << good.dump() << "\n";  // the same line, as written: read
    EXPECT_EQ(readResults(s).size(), 3u);
}

TEST_F(SweepTest, ShardingDoesNotChangeACellAndRerunsSkipDoneProbes) {
    json j = baseSweep();
    j["output"] = "one";
    const SweepSpec one = spec(j, "one.json");
    j["output"] = "three";
    const SweepSpec three = spec(j, "three.json");
    ASSERT_EQ(one.fingerprint, three.fingerprint);  // the output folder does not change a result

    const ShardReport whole = runShard(one, {0, 1}, folderLoader(one));
    EXPECT_EQ(whole.pending, 16);
    EXPECT_EQ(whole.done, 16) << whole.firstFailure;
    EXPECT_EQ(whole.failed, 0) << whole.firstFailure;
    for (int i = 0; i < 3; ++i) EXPECT_EQ(runShard(three, {i, 3}, folderLoader(three)).failed, 0);

    const Merged a = mergeResults(one, readResults(one));
    const Merged b = mergeResults(three, readResults(three));
    EXPECT_TRUE(a.status.complete());
    EXPECT_TRUE(b.status.complete());
    ASSERT_EQ(a.cells.size(), 80u);
    EXPECT_EQ(a.toJson(one)["cells"], b.toJson(three)["cells"]);
    EXPECT_EQ(a.toCsv(one), b.toCsv(three));

    // The full cache answers its own needle; a budget covering the whole
    // prompt would too, and the metrics are real numbers in range.
    int fullExact = 0, fidelity = 0;
    for (const auto& mc : a.cells) {
        if (mc.probe.task == Task::Needle && mc.cell.policy == "full") fullExact += mc.cell.exact == 1.0;
        if (mc.probe.task == Task::Fidelity && mc.cell.policy != "full") {
            ++fidelity;
            EXPECT_GE(mc.cell.kl, 0);
            EXPECT_GE(mc.cell.top1, 0);
            EXPECT_LE(mc.cell.top1, 1);
            EXPECT_GT(mc.cell.retainedMass, 0);
            EXPECT_LE(mc.cell.retainedMass, 1 + 1e-9);
            EXPECT_EQ(mc.cell.promptTokens, mc.probe.context);
            EXPECT_LT(mc.cell.budgetTokens, static_cast<double>(mc.probe.context));
        }
    }
    EXPECT_GE(fullExact, 10);  // the bundled model reads its needles (12 probes)
    EXPECT_EQ(fidelity, 16);
    const auto grid = a.needleGrid(one, 0);
    EXPECT_EQ(grid.cells.size(), 2u * 3u * 5u);
    for (const auto& c : grid.cells) EXPECT_EQ(c.answers.size(), 2u);  // seeds averaged
    const auto curves = fidelityCurves(a, 0);
    ASSERT_EQ(curves.size(), 2u);
    EXPECT_EQ(curves[0].x.size(), 2u);  // two budgets
    EXPECT_LT(curves[0].x[0], curves[0].x[1]);

    // Rerunning finds nothing to do.
    EXPECT_EQ(runShard(one, {0, 1}, folderLoader(one)).pending, 0);
    EXPECT_TRUE(shardsWithWork(three, 3, readResults(three)).empty());
}

TEST_F(SweepTest, AStoppedShardKeepsWhatItFinishedAndAFailedProbeIsNamed) {
    json j = baseSweep();
    j["task"] = "needle";
    j["contexts"] = {64};
    SweepSpec s = spec(j);
    std::atomic<bool> stop{false};
    const ShardReport r = runShard(
        s, {0, 1}, folderLoader(s), [&](int64_t i, int64_t, const std::string&) { stop = i >= 2; }, &stop);
    EXPECT_TRUE(r.cancelled);
    EXPECT_EQ(r.done, 2);
    EXPECT_EQ(readResults(s).size(), 2u);  // the probe in flight is not written
    const ShardReport rest = runShard(s, {0, 1}, folderLoader(s));
    EXPECT_EQ(rest.pending, 4);
    EXPECT_EQ(rest.done, 4);
    EXPECT_TRUE(sweepStatus(s, readResults(s)).complete());

    // Other settings: the results are stale and run again.
    j["needle"] = {{"max_new_tokens", 3}};
    const SweepSpec changed = spec(j);
    EXPECT_NE(changed.fingerprint, s.fingerprint);
    const SweepStatus st = sweepStatus(changed, readResults(changed));
    EXPECT_EQ(st.doneProbes, 0);
    EXPECT_EQ(st.stale, 6);

    // A policy or a budget added to the finished file: its results lack the
    // new cells, so no probe counts as done and each runs again (issue 50).
    json more = j;
    more.erase("needle");  // the settings the results were written under
    more["policies"].push_back("tova");
    const SweepSpec added = spec(more);
    EXPECT_EQ(added.fingerprint, s.fingerprint) << "the same settings: only the cells differ";
    const SweepStatus moreSt = sweepStatus(added, readResults(added));
    EXPECT_FALSE(moreSt.complete());
    EXPECT_EQ(moreSt.doneProbes, 0);
    EXPECT_EQ(moreSt.stale, 6);
    EXPECT_EQ(runShard(added, {0, 1}, folderLoader(added)).pending, 6);
    EXPECT_TRUE(sweepStatus(added, readResults(added)).complete());
    // A policy removed: every cell it asks for is still there.
    more["policies"] = {"h2o"};
    EXPECT_TRUE(sweepStatus(spec(more), readResults(spec(more))).complete());
    // The model's files change a result: a copy of the bundled model, then one of its files rewritten.
    const fs::path model = dir->path() / "model";
    fs::copy(bundledModelDir(), model, fs::copy_options::recursive);
    json own = j;
    own["models"] = {"model"};
    const std::string before = spec(own).fingerprint;
    std::ofstream(model / "config.json", std::ios::app) << "\n";
    EXPECT_NE(spec(own).fingerprint, before) << "the fingerprint must cover the model's files";

    // A fidelity window longer than the text: each such probe fails with the reason, the others run.
    std::ofstream(dir->path() / "short.txt") << "once upon a time there was a girl . ";
    json f = baseSweep();
    f["task"] = "fidelity";
    f["output"] = "short";
    f["fidelity"]["text_file"] = "short.txt";
    const SweepSpec shortText = spec(f, "short.json");
    const ShardReport failed = runShard(shortText, {0, 1}, folderLoader(shortText));
    EXPECT_EQ(failed.failed, 4);
    EXPECT_NE(failed.firstFailure.find("short.txt has"), std::string::npos) << failed.firstFailure;
    const SweepStatus fs = sweepStatus(shortText, readResults(shortText));
    EXPECT_EQ(fs.failed.size(), 4u);
    EXPECT_EQ(mergeResults(shortText, readResults(shortText)).cells.size(), 0u);  // nothing invented
    // A model that does not load fails its probes with the folder named.
    json m = baseSweep();
    m["models"] = {"no-such-model"};
    m["output"] = "nomodel";
    const SweepSpec noModel = spec(m, "nomodel.json");
    const ShardReport r2 = runShard(noModel, {0, 4}, folderLoader(noModel));
    EXPECT_EQ(r2.done, 0);
    EXPECT_EQ(r2.failed, 4);
    EXPECT_NE(r2.firstFailure.find("no-such-model"), std::string::npos) << r2.firstFailure;
}

}  // namespace
