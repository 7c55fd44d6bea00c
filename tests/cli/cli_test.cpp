// kvlens-cli end to end on a tiny random model with a WordLevel tokenizer:
// the documented flags work and every bad argument ends in one clear line
// and a non-zero exit code.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/support/test_models.h"
#include "tests/robustness/full_disk.h"

using namespace kvlens;
namespace fs = std::filesystem;

namespace {

struct CliRun {
    int code;
    std::string out, err;
};

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

class CliTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        s_dir = std::make_unique<test::ScratchDir>("cli");
        test::makeRandomModel(Family::Llama, {}, 11, s_dir->path() / "model");
        // A WordLevel tokenizer whose 64 words match the model's vocabulary.
        nlohmann::json vocab;
        vocab["<unk>"] = 0;
        for (int i = 1; i < 64; ++i) vocab["w" + std::to_string(i)] = i;
        nlohmann::json tok = {
            {"version", "1.0"},
            {"added_tokens", {{{"id", 0}, {"content", "<unk>"}, {"single_word", false}, {"lstrip", false},
                               {"rstrip", false}, {"normalized", false}, {"special", true}}}},
            {"normalizer", nullptr},
            {"pre_tokenizer", {{"type", "Whitespace"}}},
            {"post_processor", nullptr},
            {"decoder", nullptr},
            {"model", {{"type", "WordLevel"}, {"vocab", vocab}, {"unk_token", "<unk>"}}}};
        std::ofstream(s_dir->path() / "model" / "tokenizer.json") << tok.dump();
    }
    static void TearDownTestSuite() { s_dir.reset(); }

    static std::string model() { return (s_dir->path() / "model").string(); }

    static CliRun run(const std::string& args) {
        fs::path out = s_dir->path() / "stdout.txt", err = s_dir->path() / "stderr.txt";
        std::string cmd = quote(KVLENS_CLI) + " " + args + " >" + quote(out.string()) + " 2>" + quote(err.string()) + " </dev/null";
        int status = std::system(cmd.c_str());
        return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
    }

    // A failure: non-zero exit, and stderr is one line naming `what`.
    static void expectOneLineError(const std::string& args, const std::string& what) {
        CliRun r = run(args);
        EXPECT_NE(r.code, 0) << args;
        EXPECT_NE(r.err.find(what), std::string::npos) << args << " printed: " << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << " printed: " << r.err;
    }

    static std::unique_ptr<test::ScratchDir> s_dir;
};
std::unique_ptr<test::ScratchDir> CliTest::s_dir;

}  // namespace

TEST_F(CliTest, InfoDescribesTheModel) {
    CliRun r = run("info --model " + quote(model()) + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["family"], "llama");
    EXPECT_EQ(j["layers"], 2);
    EXPECT_EQ(j["kv_heads"], 2);
    EXPECT_EQ(j["query_heads"], 4);
    EXPECT_EQ(j["device"], "cpu");
}

TEST_F(CliTest, GenerateFromIdsIsExactAndReproducible) {
    const std::string args = "generate --model " + quote(model()) + " --prompt-ids 3,1,4,1,5 --steps 6 --json";
    CliRun a = run(args), b = run(args);
    ASSERT_EQ(a.code, 0) << a.err;
    auto j = nlohmann::json::parse(a.out);
    EXPECT_EQ(j["prompt_ids"], nlohmann::json({3, 1, 4, 1, 5})) << "ids are used exactly, no BOS";
    EXPECT_EQ(j["generated_ids"].size(), 6u);
    EXPECT_EQ(j["generated_ids"], nlohmann::json::parse(b.out)["generated_ids"]);
    EXPECT_EQ(j["device"], "cpu/f32");
}

TEST_F(CliTest, SeededSamplingReproduces) {
    const std::string args = "generate --model " + quote(model()) +
                             " --prompt 'w1 w2 w3' --steps 8 --temperature 1.5 --top-p 0.9 --seed 7 --json";
    CliRun a = run(args), b = run(args);
    ASSERT_EQ(a.code, 0) << a.err;
    EXPECT_EQ(nlohmann::json::parse(a.out)["generated_ids"], nlohmann::json::parse(b.out)["generated_ids"]);
}

TEST_F(CliTest, GenerateStreamsTextAndReportsSpeed) {
    CliRun r = run("generate --model " + quote(model()) + " --prompt 'w1 w2 w3' --steps 4");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find('w'), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
}

TEST_F(CliTest, TokenizePrintsIds) {
    CliRun r = run("tokenize --tokenizer " + quote(model() + "/tokenizer.json") + " --prompt 'w5 w6 nope' --json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["ids"], nlohmann::json({5, 6, 0}));
}

TEST_F(CliTest, BadArgumentsGiveOneClearLine) {
    const std::string m = " --model " + quote(model());
    expectOneLineError("generate" + m + " --prompt-ids 1,x,3", "'x' is not a token id");
    expectOneLineError("generate" + m + " --prompt-ids 1,999", "outside the vocabulary");
    expectOneLineError("generate" + m + " --prompt-ids 1 --device tpu", "bad device 'tpu'");
    expectOneLineError("generate" + m + " --prompt-ids 1 --dtype f8", "bad dtype 'f8'");
    expectOneLineError("generate" + m + " --prompt-ids 1 --temperature -1", "--temperature must be > 0");
    expectOneLineError("generate" + m + " --prompt-ids 1 --steps -3", "steps");
    expectOneLineError("generate" + m, "give a prompt");
    expectOneLineError("generate --model /nonexistent/model --prompt hi", "/nonexistent/model");
    expectOneLineError("generate" + m + " --prompt-file /nonexistent.txt", "--prompt-file: cannot read");
    expectOneLineError("generate" + m + " --prompt a --prompt-ids 1", "excludes");
    expectOneLineError("info --model " + quote(model()) + " --threads -2", "--threads");
    expectOneLineError("frobnicate", "unknown command 'frobnicate'");
    EXPECT_NE(run("").code, 0);
}

// Budgets outside [1, T] run clamped and say so on stderr; unknown policies
// and parameters are one clear line (SPEC "Reliability").
TEST_F(CliTest, OutOfRangeBudgetsRunWithANoteAndBadPoliciesFail) {
    const std::string base = "compare --model " + quote(model()) + " --prompt-ids 3,1,4,1,5,9,2,6 --steps 2 --policy h2o";
    for (const std::string budget : {"0", "-5", "150%"}) {
        CliRun r = run(base + " --budget=" + budget);
        EXPECT_EQ(r.code, 0) << budget << ": " << r.err;
        EXPECT_NE(r.err.find("kvlens-cli: note: budget " + budget), std::string::npos) << r.err;
        EXPECT_NE(r.out.find("note: budget " + budget), std::string::npos) << "the table shows it too: " << r.out;
    }
    expectOneLineError(base + " --budget 8 --policy nosuch", "nosuch");
    expectOneLineError(base + " --budget 8 --policy h2o:frobs=3", "frobs");
    expectOneLineError(base + " --budget 8 --policy snapkv:window=-4", "window");
}

// compare ranks the runs and says whether they held equal memory; with
// --match-memory each policy's budget is solved for the memory of --budget.
TEST_F(CliTest, CompareRanksRunsAndMatchesMemory) {
    const std::string policies = "compare --model " + quote(model()) +
                                 " --prompt-ids 3,1,4,1,5,9,2,6,5,3,5,8,9,7,9,3,2,3,8,4 --steps 4 --policy window"
                                 " --policy snapkv:window=2";
    const std::string base = policies + " --budget 8";
    CliRun r = run(base);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("not a comparison at matched memory"), std::string::npos) << r.out;
    r = run(base + " --json -");
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_FALSE(j["ranking"]["matched"].get<bool>());
    EXPECT_EQ(j["ranking"]["unequal"], 2);  // 8 and 8 + 2 entries, against their median 9
    EXPECT_GT(j["policies"][2]["summary"]["peak_kv_bytes_held"].get<double>(),
              j["policies"][2]["summary"]["mean_kv_bytes_held"].get<double>());  // it read the whole prompt first

    r = run(base + " --match-memory");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("matched memory: every policy's budget solved"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("compared at matched memory"), std::string::npos) << r.out;
    r = run(base + " --match-memory --json -");
    ASSERT_EQ(r.code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["ranking"]["matched"].get<bool>());
    EXPECT_EQ(j["ranking"]["unequal"], 0);
    EXPECT_EQ(j["matched_memory"]["target_tokens"], 8);
    EXPECT_EQ(j["matched_memory"]["policies"][0]["budget"], "8");
    EXPECT_EQ(j["matched_memory"]["policies"][1]["budget"], "6");  // 6 + mean(0..4) = 8
    EXPECT_EQ(j["policies"][2]["layer_budgets"][0], 6);
    expectOneLineError(policies + " --match-memory --budgets 8,8,8", "not per-layer --budgets");
}

TEST_F(CliTest, NeedleGridWithAUserHaystack) {
    const fs::path hay = s_dir->path() / "haystack.txt";
    std::ofstream(hay) << "w1 w2 w3 w4 . w5 w6 w7 . w8 w9 w10 w11 w12 .\nw13 w14 . w15 w16 w17 w18 .";
    const std::string base = "needle --model " + quote(model()) + " --haystack-file " + quote(hay.string()) +
                             " --needle 'w40 w41 w42 .' --question 'w43 w44' --answer 'w42' --contexts 40,60";
    const std::string depths = " --depths 0,100";
    CliRun r = run(base + depths + " --policy window --budget 16,99 --json - --quiet");
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["format"], "kvlens-needle");
    EXPECT_EQ(j["haystack"], "user");
    ASSERT_EQ(j["cells"].size(), 2u * 2u * (1u + 2u));  // contexts × depths × (full + window at 2 budgets)
    EXPECT_EQ(j["cells"][0]["answers"][0]["expected"], "w42");
    CliRun csv = run(base + depths + " --csv - --quiet");
    ASSERT_EQ(csv.code, 0) << csv.err;
    EXPECT_EQ(csv.out.substr(0, csv.out.find('\n')), "context,depth,policy,budget,exact,overlap,samples,prompt_tokens");
    EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 1 + 4);
    CliRun table = run(base + depths);
    ASSERT_EQ(table.code, 0) << table.err;
    EXPECT_NE(table.out.find("exact match (word overlap)"), std::string::npos) << table.out;

    // --figure: the grid as the GUI draws it (a GUI build), or a one-line refusal.
    const fs::path fig = s_dir->path() / "needle.png";
    CliRun f = run(base + depths + " --policy window --budget 16,99 --quiet --scale 1 --figure " + quote(fig.string()));
    if (f.code != 0 && f.err.find("built without") != std::string::npos) {
        std::printf("needle --figure: this kvlens-cli has no figures (KVLENS_GUI=OFF)\n");
    } else {
        ASSERT_EQ(f.code, 0) << f.err;
        const std::string png = slurp(fig);
        ASSERT_GT(png.size(), 24u);
        EXPECT_EQ(png.substr(1, 3), "PNG");
        const auto width = (static_cast<unsigned char>(png[18]) << 8) | static_cast<unsigned char>(png[19]);
        EXPECT_GE(width, 3 * 200) << "one panel per run: full and window at two budgets";
    }
    expectOneLineError(base + depths + " --figure " + quote((s_dir->path() / "needle.txt").string()), "needle.txt");

    expectOneLineError(base + " --depths 0,150", "--depths: '150' is not a percentage in [0, 100]");
    expectOneLineError(base + depths + " --policy h2o", "needs --budget");
    expectOneLineError("needle --model " + quote(model()) + " --needle x", "a user needle needs all of");
}

TEST_F(CliTest, ExportWritesDataTablesAndRefusesWhatItCannot) {
    const std::string base = "export --model " + quote(model()) + " --prompt-ids 3,1,4,1,5,9,2,6,5,3,5,8 --policy h2o --budget 6 --steps 2";
    const fs::path csv = s_dir->path() / "attn.csv", json = s_dir->path() / "scores.json", npy = s_dir->path() / "attn.npy";
    CliRun r = run(base + " --layer 1 --head 2 --out " + quote(csv.string()));
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string all = slurp(csv);
    EXPECT_EQ(all.rfind("# kvlens-export v1 · table attention", 0), 0u) << all.substr(0, 200);
    const std::string text = all.substr(all.find("\nposition") + 1);  // after the two metadata lines
    EXPECT_EQ(std::count(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(all.size() - text.size()), '\n'), 2);
    EXPECT_EQ(text.substr(0, text.find('\n')), "position,token,0,1,2,3,4,5,6,7,8,9,10,11,12,13");
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1 + 14);  // 12 prompt tokens + 2 steps
    r = run(base + " --table scores --kv-head 1 --out " + quote(json.string()));
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(slurp(json));
    EXPECT_EQ(j["policy"], "h2o");
    EXPECT_EQ(j["kv_head"], 1);
    EXPECT_EQ(j["rows"].size(), 14u);
    r = run(base + " --out " + quote(npy.string()));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(slurp(npy).substr(1, 5), "NUMPY");

    expectOneLineError(base + " --out " + quote((s_dir->path() / "x.txt").string()), "unknown extension '.txt'");
    expectOneLineError(base + " --show snapkv --out " + quote(csv.string()), "--show: no run 'snapkv' (runs: full, h2o)");
    expectOneLineError(base + " --table heat --out " + quote(csv.string()), "unknown export table 'heat'");
    expectOneLineError(base + " --layer 5 --out " + quote(csv.string()), "attention capture layer 5 outside");
    expectOneLineError("export --model " + quote(model()) + " --out " + quote(csv.string()), "give a prompt");
    expectOneLineError("export --session " + quote((s_dir->path() / "none.json").string()) + " --out " + quote(csv.string()),
                       "none.json: cannot open");
    // A session's view is checked against the model that runs it (it reached
    // the capture as a raw index before).
    const fs::path deep = s_dir->path() / "deep.kvlens.json";
    std::ofstream(deep) << nlohmann::json{{"format", "kvlens-session"}, {"version", 1}, {"model", {{"dir", model()}}},
                                          {"prompt", "w1 w2 w3"}, {"policies", {"h2o"}}, {"budget", "3"},
                                          {"view", {{"layer", 99}}}}
                               .dump();
    expectOneLineError("export --session " + quote(deep.string()) + " --out " + quote(csv.string()),
                       "the session's \"view.layer\" is 99: the model has 2 layers");
    // The memory budget is read as a size, or refused naming the option.
    expectOneLineError(base + " --memory-budget lots --out " + quote(csv.string()),
                       "--memory-budget: 'lots' is not a memory size");
    EXPECT_EQ(run(base + " --memory-budget 1G --out " + quote(csv.string())).code, 0);
}

TEST_F(CliTest, ExportFiguresAndExportAll) {
    const std::string base = "export --model " + quote(model()) + " --prompt-ids 3,1,4,1,5,9,2,6,5,3,5,8 --policy h2o --budget 6 --steps 2";
    const fs::path png = s_dir->path() / "fig.png", svg = s_dir->path() / "fig.svg", pdf = s_dir->path() / "fig.pdf";
    CliRun r = run(base + " --layer 1 --head 2 --scale 1 --out " + quote(png.string()));
    if (r.code != 0 && r.err.find("built without") != std::string::npos)
        GTEST_SKIP() << "this kvlens-cli has no figures (KVLENS_GUI=OFF): " << r.err;
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string bytes = slurp(png);
    ASSERT_GT(bytes.size(), 24u);
    EXPECT_EQ(bytes.substr(1, 3), "PNG");
    auto be32 = [&](size_t at) {
        uint32_t v = 0;
        for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(bytes[at + i]);
        return v;
    };
    EXPECT_GT(be32(16), 300u);  // IHDR width and height, in pixels at scale 1
    EXPECT_GT(be32(20), 300u);
    r = run(base + " --layer 1 --head 2 --colour-scale log --out " + quote(svg.string()));
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string s = slurp(svg);
    EXPECT_NE(s.find("<svg"), std::string::npos);
    EXPECT_NE(s.find("h2o"), std::string::npos);
    EXPECT_NE(s.find("log scale"), std::string::npos);
    r = run(base + " --table status --out " + quote(pdf.string()));
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string p = slurp(pdf);
    EXPECT_EQ(p.substr(0, 5), "%PDF-");
    EXPECT_NE(p.find("/Type /Page"), std::string::npos);

    // Export all: every run × query head of layer 1, one file each plus the grid.
    const fs::path dir = s_dir->path() / "all";
    r = run(base + " --layer 1 --all-policies --all-heads --format svg --out " + quote(dir.string()));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(fs::exists(dir / "full_L01_H00.svg"));
    EXPECT_TRUE(fs::exists(dir / "h2o_L01_H01.svg"));
    EXPECT_TRUE(fs::exists(dir / "grid.svg"));
    const auto files = std::distance(fs::directory_iterator(dir), fs::directory_iterator());
    EXPECT_EQ(files, std::count(r.out.begin(), r.out.end(), '\n'));  // it lists what it wrote
    EXPECT_EQ((files - 1) % 2, 0);                                    // full and h2o for each head

    expectOneLineError(base + " --all-layers --format bmp --out " + quote(dir.string()), "--format: 'bmp'");
    expectOneLineError(base + " --table budgets --out " + quote(png.string()), "a figure shows --table attention or status");
    expectOneLineError(base + " --colour-scale sqrt --out " + quote(png.string()), "--colour-scale: 'sqrt'");
}

TEST_F(CliTest, BenchReportsRatiosPolicyTimeMemoryAndTargets) {
    CliRun r = run("bench --model " + quote(model()) + " --context 40 --steps 4 --policy h2o --policy snapkv --budget 25% --json");
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_GT(j["peak_rss_kib"].get<long>(), 0);
    ASSERT_EQ(j["rows"].size(), 4u);  // 2 policies x (budget = context, 25 %)
    for (const auto& row : j["rows"]) {
        EXPECT_GT(row["step_ratio"].get<double>(), 0.0);
        EXPECT_GE(row["policy_ms_per_step"].get<double>(), 0.0);
        EXPECT_FALSE(row["target"].get<std::string>().empty()) << row.dump();
        EXPECT_GT(row["full_prefill_tok_s"].get<double>(), 0.0) << row.dump();
        EXPECT_GT(row["full_decode_tok_s"].get<double>(), 0.0) << row.dump();
        EXPECT_LE(row["step_ratio_q1"].get<double>(), row["step_ratio"].get<double>()) << row.dump();
        EXPECT_GE(row["step_ratio_q3"].get<double>(), row["step_ratio"].get<double>()) << row.dump();
    }
    EXPECT_GT(j["rows"][0]["policy_ms_per_step"].get<double>(), 0.0) << "h2o observes and plans every step";
    EXPECT_EQ(j["rows"][2]["policy_ms_per_step"].get<double>(), 0.0) << "snapkv does nothing after the prompt";
    // snapkv's overhead row compresses (at budget = context it would have
    // nothing to do), and its verdict is the work it did on the prompt.
    EXPECT_EQ(j["rows"][0]["budget"], "= context");
    EXPECT_EQ(j["rows"][2]["budget"], "50%");
    EXPECT_GT(j["rows"][2]["policy_prompt_work_ms"].get<double>(), 0.0);
    EXPECT_NE(j["rows"][2]["target"].get<std::string>().find("prompt work"), std::string::npos);
    // 25 % of the 40-token prompt, of the 46 tokens read (4 timed + 2 warm-up steps)
    EXPECT_NEAR(j["rows"][1]["kv_bytes_share"].get<double>(), 10.0 / 46.0, 1e-9);
    expectOneLineError("bench --synthetic gpt5 --context 8", "--synthetic: unknown shape 'gpt5'");
    // A count past what a machine can use is refused before it starts threads (issue 50).
    expectOneLineError("bench --threads 100000 --context 8 --steps 1", "--threads: expected a whole number from 0 to");
    expectOneLineError("generate --threads 100000 --prompt-ids 1,2 --steps 1", "--threads: expected a whole number from 0 to");
}

// Numbers are checked as typed, before anything runs: a count past its bound
// (99999999999999999999 saturated to 2^63-1, and prompt + steps overflowed
// past the context check: the run went on forever) and reals that are not
// finite are one line naming the option and the range (issue 50).
TEST_F(CliTest, NumbersPastTheirBoundsAreRefusedAsTyped) {
    const std::string m = " --model " + quote(model()), huge = "99999999999999999999";
    const std::string steps = "--steps: expected a whole number from 0 to 1000000, got '" + huge + "'";
    expectOneLineError("generate" + m + " --prompt-ids 1,2 --steps " + huge, steps);
    expectOneLineError("compare" + m + " --prompt-ids 1,2 --policy h2o --budget 2 --steps 9223372036854775807",
                       "--steps: expected a whole number from 0 to 1000000");
    expectOneLineError("export" + m + " --prompt-ids 1,2 --table metrics --out x.csv --steps " + huge, steps);
    expectOneLineError("needle" + m + " --contexts 32 --max-new-tokens " + huge, "--max-new-tokens: expected a whole number");
    expectOneLineError("bench --context 8 --steps " + huge, "--steps: expected a whole number from 1 to 1000000");
    expectOneLineError("export" + m + " --prompt-ids 1,2 --out x.csv --layer " + huge, "--layer: expected a whole number");
    expectOneLineError("generate" + m + " --prompt-ids 1,2 --temperature nan", "--temperature: expected a finite number, got 'nan'");
    expectOneLineError("generate" + m + " --prompt-ids 1,2 --temperature 1 --top-p inf", "--top-p: expected a finite number");
    expectOneLineError("export" + m + " --prompt-ids 1,2 --out x.png --scale nan", "--scale: expected a finite number");
    expectOneLineError("train --out never --lr nan", "--lr: expected a finite number, got 'nan'");
    expectOneLineError("train --out never --steps " + huge, "--steps: expected a whole number from 0 to 1000000000");
    expectOneLineError("memory" + m + " --contexts 64,x", "--contexts: 'x' is not a context length");
    expectOneLineError("memory" + m + " --prompt hi --what-if-kv-heads 0", "--what-if-kv-heads: expected a whole number from 1");
    EXPECT_FALSE(fs::exists("never")) << "a refused train made its folder";
}

// No command writes over a file it reads (by identity, not by name), into a
// model folder it reads, or twice to one path; train never replaces a model.
TEST_F(CliTest, NoCommandWritesOverItsInputs) {
    const fs::path session = s_dir->path() / "keep.kvlens.json", prompt = s_dir->path() / "keep-prompt.txt";
    const std::string m = " --model " + quote(model());
    ASSERT_EQ(run("export" + m + " --prompt-ids 3,1,4,1,5 --policy h2o --budget 3 --out " + quote((s_dir->path() / "x.csv").string())).code, 0);
    std::ofstream(prompt) << "w1 w2 w3 w4";
    nlohmann::json s = {{"format", "kvlens-session"}, {"version", 1}, {"model", {{"dir", model()}}},
                        {"prompt", "w1 w2 w3 w4 w5"}, {"policies", {"h2o"}}, {"budget", "3"}};
    std::ofstream(session) << s.dump(2);
    const std::string sessionBytes = slurp(session), promptBytes = slurp(prompt), config = slurp(model() + "/config.json");
    fs::create_symlink(session, s_dir->path() / "alias.kvlens.json");
    expectOneLineError("export --session " + quote(session.string()) + " --out " + quote(session.string()),
                       "this command reads that file");
    expectOneLineError("export --session " + quote(session.string()) + " --out " +
                           quote((s_dir->path() / "alias.kvlens.json").string()),
                       "this command reads that file");
    expectOneLineError("export" + m + " --prompt-file " + quote(prompt.string()) + " --policy h2o --budget 3 --out " +
                           quote(prompt.string()),
                       "this command reads that file");
    expectOneLineError("export" + m + " --prompt-ids 3,1,4 --policy h2o --budget 3 --out " + quote(model() + "/config.json"),
                       "this command reads that file");
    expectOneLineError("compare" + m + " --prompt-ids 3,1,4 --policy h2o --budget 3 --json " + quote(model() + "/trace.json"),
                       "inside the model folder");
    const std::string twice = quote((s_dir->path() / "grid.out").string());
    expectOneLineError("needle" + m + " --contexts 32 --depths 50 --json " + twice + " --csv " + twice,
                       "the same file as --json");
    expectOneLineError("train --out " + quote(model()) + " --steps 1", "already holds a model (config.json)");
    // --model with --session runs that model (it was ignored), and the guard
    // protects the model that runs, reached through a symlinked folder too.
    const fs::path other = s_dir->path() / "other-model", link = s_dir->path() / "other-link";
    fs::copy(model(), other, fs::copy_options::recursive);
    fs::create_directory_symlink(other, link);
    const std::string otherConfig = slurp(other / "config.json");
    expectOneLineError("export --model " + quote(link.string()) + " --session " + quote(session.string()) + " --out " +
                           quote((link / "config.json").string()),
                       "this command reads that file");
    EXPECT_EQ(slurp(other / "config.json"), otherConfig);
    CliRun onOther = run("export --model " + quote(other.string()) + " --session " + quote(session.string()) +
                         " --out " + quote((s_dir->path() / "other.csv").string()));
    EXPECT_EQ(onOther.code, 0) << onOther.err;
    EXPECT_NE(onOther.err.find("running the session on --model " + other.string()), std::string::npos) << onOther.err;
    EXPECT_EQ(slurp(session), sessionBytes);
    EXPECT_EQ(slurp(prompt), promptBytes);
    EXPECT_EQ(slurp(model() + "/config.json"), config);
    EXPECT_FALSE(fs::exists(model() + "/trace.json"));
}

// A write that fails is a non-zero exit naming the file, stdout included:
// /dev/full as an output file (through a link with the right extension) and
// as stdout.
TEST_F(CliTest, WriteErrorsAreErrors) {
    const std::string m = " --model " + quote(model());
    const fs::path full = s_dir->path() / "full.csv";
    fs::create_symlink("/dev/full", full);
    expectOneLineError("export" + m + " --prompt-ids 3,1,4,1,5 --policy h2o --budget 3 --out " + quote(full.string()),
                       "cannot write /dev/full: No space left on device");
    expectOneLineError("compare" + m + " --prompt-ids 3,1,4 --policy h2o --budget 3 --json /dev/full", "cannot write /dev/full");
    expectOneLineError("needle" + m + " --contexts 32 --depths 50 --quiet --csv /dev/full", "cannot write /dev/full");
    for (const std::string args : {"info" + m, "tokenize" + m + " --prompt 'w1 w2'", "compare" + m + " --prompt-ids 3,1,4 --policy h2o --budget 3 --json -"}) {
        const fs::path err = s_dir->path() / "stderr.txt";
        const int status = std::system((quote(KVLENS_CLI) + " " + args + " >/dev/full 2>" + quote(err.string())).c_str());
        EXPECT_NE(WEXITSTATUS(status), 0) << args;
        EXPECT_NE(slurp(err).find("cannot write to standard output"), std::string::npos) << args << ": " << slurp(err);
    }
}

// On a full filesystem every format the CLI writes fails with a sentence and
// leaves the file that was there, whole (needs root to mount a small tmpfs).
TEST_F(CliTest, AFullDiskKeepsTheOldFile) {
    test::FullDisk disk("cli-full");
    if (!disk.mounted()) GTEST_SKIP() << disk.whyNot();
    std::vector<std::pair<fs::path, std::string>> files;
    for (const char* ext : {"csv", "json", "npy", "png", "svg", "pdf"}) {
        const fs::path f = disk.path() / (std::string("old.") + ext);
        std::ofstream(f) << "the user's " << ext << "\n";
        files.emplace_back(f, slurp(f));
    }
    disk.fill();
    for (const auto& [file, bytes] : files) {
        const CliRun r = run("export --model " + quote(model()) + " --prompt-ids 3,1,4,1,5,9,2,6 --policy h2o --budget 3 --out " +
                             quote(file.string()));
        EXPECT_NE(r.code, 0) << file;
        EXPECT_NE(r.err.find(file.string()), std::string::npos) << r.err;
        EXPECT_EQ(slurp(file), bytes) << file;
    }
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(disk.path()))
        if (e.path().filename().string().find(".kvlens-") != std::string::npos) left.push_back(e.path().string());
    EXPECT_TRUE(left.empty()) << left.front();
}

// Inputs that are not text, prompts past the context, padded vocabularies.
TEST_F(CliTest, InputsTheModelCannotTakeAreNamed) {
    const std::string m = " --model " + quote(model());
    expectOneLineError("generate" + m + " --prompt-file " + quote(s_dir->path().string()), "is a folder");
    expectOneLineError("generate" + m + " --prompt-file /dev/zero", "longer than 64 MiB");
    std::string ids = "1";
    for (int i = 1; i < 4 * 128 + 1; ++i) ids += ",1";
    expectOneLineError("generate" + m + " --prompt-ids " + ids + " --steps 1", "--allow-long-context");
    CliRun r = run("generate" + m + " --prompt-ids " + ids + " --steps 1 --allow-long-context --json");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("warning: the run reaches 514 tokens, past the 128"), std::string::npos) << r.err;
    // The bundled model: 320 embedding rows for 319 tokens. The padding id is
    // read, shown and never aborts generate or compare.
    r = run("generate --prompt-ids 2,319,5 --steps 3 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    r = run("compare --prompt-ids 2,319,5 --policy h2o --budget 2 --steps 2 --json -");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["labels"][1], "<unused:319>");
    expectOneLineError("generate --prompt-ids 2,320", "outside the vocabulary");
    expectOneLineError("compare --prompt-ids 2,320 --policy h2o --budget 2", "outside the vocabulary");
}

// kvlens-cli import llama2c on the real stories260K (../shared/data, read in
// place): the folder it writes is a model every command opens; bad input is
// one line naming the file, and nothing is left behind.
TEST_F(CliTest, ImportLlama2cWritesAModelTheOtherCommandsOpen) {
    const fs::path data = KVLENS_SHARED_DATA;
    if (!fs::exists(data / "stories260K" / "stories260K.bin")) GTEST_SKIP() << "no test data at " << data;
    const std::string bin = quote((data / "stories260K" / "stories260K.bin").string()),
                      tok = quote((data / "stories260K" / "tok512.bin").string());
    const fs::path out = s_dir->path() / "stories260K";
    CliRun r = run("import llama2c " + bin + " " + tok + " " + quote(out.string()));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("260032 parameters, 5 layers"), std::string::npos) << r.out;
    r = run("generate --model " + quote(out.string()) + " --prompt-ids 1 --steps 12 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["text"].get<std::string>().rfind("Once upon a time", 0), 0u) << r.out;
    // Again into the same folder: refused, the model there untouched.
    const auto before = fs::last_write_time(out / "model.safetensors");
    expectOneLineError("import llama2c " + bin + " " + tok + " " + quote(out.string()), "not an empty folder");
    EXPECT_EQ(fs::last_write_time(out / "model.safetensors"), before);
    expectOneLineError("import llama2c " + tok + " " + tok + " " + quote((s_dir->path() / "nope").string()), "tok512.bin");
    EXPECT_FALSE(fs::exists(s_dir->path() / "nope"));
}

// kvlens-cli import gguf: a malformed file gets one sentence naming it and
// what is wrong, and nothing is written; the real SmolLM2 GGUF imports once,
// and a second import into the same folder is refused.
TEST_F(CliTest, ImportGgufSaysWhatIsWrongAndWritesNothing) {
    auto write = [&](const std::string& name, const std::string& bytes) {
        const fs::path f = s_dir->path() / name;
        std::ofstream(f, std::ios::binary) << bytes;
        return f;
    };
    auto u32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
    auto u64 = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
    auto str = [&](const std::string& t) { return u64(t.size()) + t; };
    const fs::path out = s_dir->path() / "imported";
    const fs::path notGguf = write("not.gguf", "GGML and something else entirely");
    expectOneLineError("import gguf " + quote(notGguf.string()) + " " + quote(out.string()), "not.gguf");
    // A well-formed GGUF v3 of an architecture the import does not know, no tensors.
    const fs::path phi = write("phi3.gguf", "GGUF" + u32(3) + u64(0) + u64(1) + str("general.architecture") + u32(8) + str("phi3"));
    expectOneLineError("import gguf " + quote(phi.string()) + " " + quote(out.string()), "general.architecture is 'phi3'");
    // The real file cut short: the reader names where it ends.
    const fs::path real = KVLENS_SMOLLM2_GGUF;
    if (fs::exists(real)) {
        std::ifstream in(real, std::ios::binary);
        std::string head(1 << 16, '\0');
        in.read(head.data(), static_cast<std::streamsize>(head.size()));
        expectOneLineError("import gguf " + quote(write("cut.gguf", head).string()) + " " + quote(out.string()), "cut.gguf");
    }
    EXPECT_FALSE(fs::exists(out));
    if (!fs::exists(real)) GTEST_SKIP() << real << " is missing (scripts/fetch-smollm2.sh)";
    // What an import killed mid-way left: removed by the next import into the same folder.
    const fs::path stale = s_dir->path() / ".imported.import-4999999999";
    fs::create_directories(stale);
    write(".imported.import-4999999999/model.safetensors", "half a model");
    CliRun r = run("import gguf --quiet " + quote(real.string()) + " " + quote(out.string()));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(fs::exists(stale));
    EXPECT_NE(r.out.find("134515008 parameters, 30 layers"), std::string::npos) << r.out;
    const auto before = fs::last_write_time(out / "model.safetensors");
    expectOneLineError("import gguf " + quote(real.string()) + " " + quote(out.string()), "not an empty folder");
    EXPECT_EQ(fs::last_write_time(out / "model.safetensors"), before);
    fs::remove_all(out);
}

// kvlens-cli memory reads config.json (2 layers, 4 query heads, 2 KV heads of 8).
TEST_F(CliTest, MemoryTablesTheKvSharingDesigns) {
    CliRun r = run("memory --model " + quote(model()) + " --contexts 10,100 --budget 20 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["designs"][1]["id"], "gqa");
    EXPECT_EQ(j["designs"][1]["bytes_per_token"], 256);  // 2 * 2 layers * 2 KV heads * 8 * 4 bytes
    EXPECT_EQ(j["designs"][1]["full_bytes"], nlohmann::json({2560, 25600}));
    EXPECT_EQ(j["designs"][1]["budget_bytes"], nlohmann::json({2560, 5120}));  // min(context, 20) tokens
    EXPECT_EQ(j["designs"][0]["bytes_per_token"], 512);  // MHA: 4 heads
    r = run("memory --model " + quote(model()));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("CLA k=2"), std::string::npos) << r.out;
    // The what-if: the model's 2 KV heads merged to 1, on a prompt of ids.
    r = run("memory --model " + quote(model()) + " --what-if-kv-heads 1 --prompt-ids 1,2,3,4,5 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json w = nlohmann::json::parse(r.out)["what_if"];
    EXPECT_EQ(w["positions"], 5);
    EXPECT_GT(w["mean_kl"].get<double>(), 0.0);
    EXPECT_EQ(w["kind"], "merge_kv_heads");
    // A model without a tokenizer runs no needle probes: their scores are null, not numbers.
    EXPECT_EQ(w["needle"]["probes"], 0);
    EXPECT_TRUE(w["needle"]["exact_what_if"].is_null());
    // Layers sharing KV (CLA) on the bundled model, with its needle probes.
    r = run("memory --what-if-share-layers 3 --prompt-ids 2,17,42,99,5,23 --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json cla = nlohmann::json::parse(r.out)["what_if"];
    EXPECT_EQ(cla["kind"], "share_layers");
    EXPECT_EQ(cla["description"], "every 3 layers read the first one's K/V (CLA-style, 1 of 3 layers compute K/V)");
    EXPECT_GT(cla["mean_kl"].get<double>(), 0.0);
    EXPECT_EQ(cla["needle"]["probes"], 6);  // 256 tokens x 3 depths x 2 seeds
    EXPECT_EQ(cla["needle"]["exact_model"], 1.0);
    EXPECT_LT(cla["needle"]["exact_what_if"].get<double>(), 1.0);
    expectOneLineError("memory --model " + quote(model()) + " --what-if-share-layers 3 --prompt-ids 1", "groups of 1 to 2");
    expectOneLineError("memory --what-if-share-layers 2 --what-if-kv-heads 1 --prompt-ids 1", "excludes");
    expectOneLineError("memory --model " + quote(model()) + " --what-if-kv-heads 1", "needs a prompt");
    expectOneLineError("memory --model " + quote(model()) + " --what-if-kv-heads 3 --prompt-ids 1", "divisor");
    expectOneLineError("memory --model " + quote(model()) + " --dtype f8", "--dtype must be");
    expectOneLineError("memory --model " + quote(model()) + " --contexts 0", "--contexts");
}

// kvlens-cli sweep on the bundled model: plan, a shard by hand, status, the
// local pool, merge; a pool stopped by Ctrl+C (SIGINT) keeps what it
// finished, and its rerun gives the cells a one-process run gives.
TEST_F(CliTest, SweepPlanRunStatusMergeAndAStoppedPool) {
    auto sweepFile = [&](const std::string& name, const std::string& contexts) {
        const fs::path f = s_dir->path() / (name + ".json");
        std::ofstream(f) << R"({"format": "kvlens-sweep", "version": 1, "task": "needle",
            "policies": ["streaming", "h2o"], "budgets": ["25%"], "contexts": )"
                         << contexts << R"(, "depths": [0, 50, 100, 25], "seeds": [1, 2], "shards": 2})";
        return f;
    };
    const fs::path small = sweepFile("small", "[64]");
    CliRun r = run("sweep plan " + quote(small.string()));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("8 probes x 3 cells = 24 cells, 2 shard(s)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("shard 1/2: 4 probes (12 cells), 4 to run"), std::string::npos) << r.out;
    r = run("sweep run " + quote(small.string()) + " --shard 1/2 --quiet");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("the sweep has 12 of 24 cells"), std::string::npos) << r.out;
    r = run("sweep status " + quote(small.string()));
    EXPECT_NE(r.out.find("12 of 24 cells done (4 of 8 probes); 4 probes missing, 0 failed"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("missing needle|bundled|64|0|1"), std::string::npos) << r.out;
    r = run("sweep submit " + quote(small.string()) + " --slurm --dry-run --partition gpu --gres gpu:1");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("#SBATCH --array=0\n"), std::string::npos) << r.out;  // shard 1 is done
    EXPECT_NE(r.out.find("#SBATCH --gres='gpu:1'"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--shard \"$SLURM_ARRAY_TASK_ID/2\""), std::string::npos) << r.out;
    // Nothing from a shared sweep file or an option becomes a line of the
    // Slurm script: a line break would end a directive or the comment and
    // run the rest as a command on the cluster (issue 50).
    r = run("sweep submit " + quote(small.string()) + " --slurm --dry-run --partition " + quote("gpu\nrm -rf /tmp/x"));
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_NE(r.err.find("--partition holds a control character"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("rm -rf"), std::string::npos) << r.out;
    r = run("sweep submit " + quote(small.string()) + " --slurm --dry-run --sbatch-arg=" + quote("--x=1\rtouch /tmp/y"));
    EXPECT_NE(r.err.find("--sbatch-arg holds a control character"), std::string::npos) << r.err;
    std::ofstream(s_dir->path() / "inject.json")
        << R"({"format": "kvlens-sweep", "version": 1, "name": "x\ntouch /tmp/kvlens-injected", "contexts": [64],)"
        << R"( "policies": ["h2o"], "budgets": ["25%"]})";
    expectOneLineError("sweep submit " + quote((s_dir->path() / "inject.json").string()) + " --slurm --dry-run",
                       "inject.json: \"name\" holds a control character");
    EXPECT_FALSE(fs::exists(s_dir->path() / "inject.sweep" / "slurm" / "sweep.sbatch"));
    // Merging early writes what is there and says what is missing.
    r = run("sweep merge " + quote(small.string()));
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("12 of 24 cells missing"), std::string::npos) << r.err;
    r = run("sweep run " + quote(small.string()) + " --workers 2 --quiet");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto merged = nlohmann::json::parse(slurp(s_dir->path() / "small.sweep" / "merged.json"));
    EXPECT_EQ(merged["format"], "kvlens-sweep-result");
    EXPECT_EQ(merged["cells"].size(), 24u);
    EXPECT_TRUE(merged["complete"].get<bool>());
    EXPECT_EQ(merged["needle_grids"]["bundled"]["format"], "kvlens-needle");
    expectOneLineError("sweep submit " + quote(small.string()), "needs a back end: --slurm");
    expectOneLineError("sweep run " + quote(small.string()) + " --shard 2/2", "--shard: '2/2' is not I/N");
    std::ofstream(s_dir->path() / "bad.json") << R"({"format": "kvlens-sweep", "version": 1, "contexts": [64], "policies": ["h2o"], "budgets": ["x"]})";
    expectOneLineError("sweep plan " + quote((s_dir->path() / "bad.json").string()), "bad.json: \"budgets\"");

    // Ctrl+C: SIGINT to the pool once a probe is written.
    const fs::path big = sweepFile("big", "[160, 192, 224, 256]");
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        const std::string f = big.string(), log = (s_dir->path() / "pool.err").string();
        freopen(log.c_str(), "w", stderr);
        freopen("/dev/null", "w", stdout);
        execl(KVLENS_CLI, KVLENS_CLI, "sweep", "run", f.c_str(), "--workers", "2", "--quiet", static_cast<char*>(nullptr));
        _exit(127);
    }
    const fs::path results = s_dir->path() / "big.sweep" / "results";
    for (int i = 0; i < 600 && !(fs::exists(results) && !fs::is_empty(results)); ++i) usleep(50000);
    kill(pid, SIGINT);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 130) << slurp(s_dir->path() / "pool.err");
    EXPECT_NE(slurp(s_dir->path() / "pool.err").find("stopped;"), std::string::npos);
    r = run("sweep status " + quote(big.string()));
    EXPECT_EQ(r.out.find("96 of 96 cells"), std::string::npos) << "the pool was not stopped: " << r.out;
    r = run("sweep run " + quote(big.string()) + " --workers 2 --quiet");
    ASSERT_EQ(r.code, 0) << r.err;
    // The same sweep in one process, from nothing: the same cells.
    std::string text = slurp(big);
    text.insert(text.find('{') + 1, R"("output": "big-one.sweep", )");
    std::ofstream(s_dir->path() / "big-one.json") << text;
    r = run("sweep run " + quote((s_dir->path() / "big-one.json").string()) + " --quiet");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(slurp(s_dir->path() / "big.sweep" / "merged.csv"), slurp(s_dir->path() / "big-one.sweep" / "merged.csv"));
}

// Issue 50: a TorchScript scorer that never returns kept `sweep run` past
// Ctrl+C (it stops after the probe in progress, which never ends). The
// first SIGINT still waits for the probe; a second stops at once, exit 130.
TEST_F(CliTest, ASecondCtrlCStopsAScorerThatNeverReturns) {
    const fs::path pt = s_dir->path() / "loop.pt", maker = s_dir->path() / "loop.py";
    // Runs on the load-time probe's 3 entries, loops on a real prompt.
    std::ofstream(maker) << "import sys, torch\n"
                            "class Loop(torch.nn.Module):\n"
                            "    def forward(self, keys, values, queries, attention, positions):\n"
                            "        n = keys.size(1)\n"
                            "        while n > 3:\n"
                            "            n = n + 1\n"
                            "        return keys.sum(-1)\n"
                            "torch.jit.script(Loop()).save(sys.argv[1])\n";
    if (std::system(("/usr/bin/python3 " + quote(maker.string()) + " " + quote(pt.string()) + " 2>/dev/null").c_str()) != 0)
        GTEST_SKIP() << "no python3 with torch to compile the scorer";
    const fs::path sweep = s_dir->path() / "loop.json";
    std::ofstream(sweep) << R"({"format": "kvlens-sweep", "version": 1, "task": "needle", "contexts": [64],)"
                         << R"( "depths": [50], "seeds": [1], "budgets": ["25%"], "policies": ["script:)" << pt.string()
                         << R"("]})";
    const fs::path log = s_dir->path() / "loop.err";
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        freopen(log.c_str(), "w", stderr);
        freopen("/dev/null", "w", stdout);
        const std::string f = sweep.string();
        execl(KVLENS_CLI, KVLENS_CLI, "sweep", "run", f.c_str(), "--quiet", static_cast<char*>(nullptr));
        _exit(127);
    }
    auto exited = [&](int ms, int* status) {
        for (int i = 0; i < ms / 50; ++i) {
            if (waitpid(pid, status, WNOHANG) == pid) return true;
            usleep(50000);
        }
        return false;
    };
    int status = 0;
    ASSERT_FALSE(exited(6000, &status)) << "the scorer returned: " << slurp(log);  // loading, then looping
    kill(pid, SIGINT);
    EXPECT_FALSE(exited(1000, &status)) << "the first Ctrl+C waits for the probe in progress";
    kill(pid, SIGINT);
    const bool stopped = exited(10000, &status);
    if (!stopped) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    ASSERT_TRUE(stopped) << "a second Ctrl+C did not stop it: " << slurp(log);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 130);
    EXPECT_NE(slurp(log).find("stopped at once (a second signal)"), std::string::npos) << slurp(log);
}
