// The bad-input suite, part 2 (issue 16): nothing the user has is lost and no
// number lies. One test per class: writes are whole or not at all (a full
// disk, /dev/full), no output replaces an input (by file identity), files
// that are not files are refused instead of waited on, real checkpoints'
// padded vocabularies decode, values that make NaN are refused at load and
// NaN at run time stops the run with a reason, silent acceptance is an error,
// and long contexts are warned about, then refused.
#include <gtest/gtest.h>

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/safe_file.h"
#include "core/model/config.h"
#include "core/model/safetensors.h"
#include "core/paths.h"
#include "core/run/context_limit.h"
#include "core/run/model_handle.h"
#include "core/run/session.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/support/test_models.h"
#include "tests/robustness/bad_input_support.h"
#include "tests/robustness/full_disk.h"

using namespace kvlens;
using namespace kvlens::test;
namespace fs = std::filesystem;

namespace {

// Every entry of `dir` whose name marks an AtomicFile's temporary.
std::vector<std::string> temporaries(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename().string().find(".kvlens-") != std::string::npos) out.push_back(e.path().string());
    return out;
}

}  // namespace

// A write that fails leaves the file that was there byte for byte, no
// temporary beside it, and an IoError naming the file and the reason: on a
// full filesystem (a 64 KiB tmpfs, where this runs as root) and on /dev/full.
TEST(SafeWrites, AFailedWriteKeepsTheOldFile) {
    EXPECT_NE(errorOf([] { writeFileAtomically("/dev/full", "x"); }).find("cannot write /dev/full: No space left"),
              std::string::npos);
    test::FullDisk disk("safe-writes");
    if (!disk.mounted()) GTEST_SKIP() << disk.whyNot();
    const fs::path file = disk.path() / "result.csv";
    spit(file, "the user's data\n");
    disk.fill();
    const std::string what = errorOf([&] { writeFileAtomically(file, std::string(256 * 1024, 'x')); });
    EXPECT_NE(what.find(file.string()), std::string::npos) << what;
    EXPECT_NE(what.find("No space left"), std::string::npos) << what;
    EXPECT_EQ(slurp(file), "the user's data\n");
    EXPECT_TRUE(temporaries(disk.path()).empty());
}

// A commit replaces the file whole, keeps its mode, writes through a symlink
// (the link stays a link) and leaves no temporary.
TEST(SafeWrites, CommitReplacesWholeThroughLinksKeepingTheMode) {
    test::ScratchDir dir("atomic");
    const fs::path file = dir / "data.json", link = dir / "link.json";
    spit(file, "old");
    ::chmod(file.c_str(), 0640);
    fs::create_symlink(file, link);
    writeFileAtomically(link, "new content");
    EXPECT_TRUE(fs::is_symlink(link));
    EXPECT_EQ(slurp(file), "new content");
    struct stat st {};
    ASSERT_EQ(::stat(file.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0640u);
    {
        AtomicFile abandoned(file);  // never committed: the old file stays
        abandoned.write("half");
    }
    EXPECT_EQ(slurp(file), "new content");
    EXPECT_TRUE(temporaries(dir.path()).empty());
    EXPECT_NE(errorOf([&] { writeFileAtomically(dir.path(), "x"); }).find("it is a folder"), std::string::npos);
    EXPECT_NE(errorOf([&] { writeFileAtomically(dir / "no/such/folder.txt", "x"); }).find("does not exist"),
              std::string::npos);
}

// Outputs are compared with inputs by identity: the same file through
// another spelling, a symlink or a hard link is refused, so is a file in a
// model folder being read and a second output to one file.
TEST(SafeWrites, NoOutputReplacesAnInput) {
    test::ScratchDir dir("guard");
    const fs::path session = dir / "s.kvlens.json", model = dir / "model";
    spit(session, "{}");
    fs::create_directories(model);
    spit(model / "config.json", "{}");
    fs::create_symlink(session, dir / "alias.json");
    fs::create_hard_link(session, dir / "hard.json");
    OutputGuard guard;
    guard.input(session);
    guard.inputFolder(model);
    for (const fs::path& same : {session, dir / "." / "s.kvlens.json", dir / "alias.json", dir / "hard.json"})
        EXPECT_NE(errorOf([&] { guard.output(same, "--out"); }).find("this command reads that file"), std::string::npos)
            << same;
    EXPECT_NE(errorOf([&] { guard.output(model / "config.json", "--out"); }).find("this command reads"),
              std::string::npos);
    EXPECT_NE(errorOf([&] { guard.output(model / "new.png", "--out"); }).find("inside the model folder"),
              std::string::npos);
    EXPECT_NE(errorOf([&] { guard.output(model, "--out"); }).find("inside the model folder"), std::string::npos);
    guard.output(dir / "a.json", "--json");
    EXPECT_NE(errorOf([&] { guard.output(dir / "x" / ".." / "a.json", "--csv"); }).find("the same file as --json"),
              std::string::npos);
    guard.output("-", "--json");
    guard.output("-", "--csv");  // stdout is not a file the guard owns
    guard.output(dir / "b.csv", "--csv");
}

// A FIFO (or a device, or a folder) where a model file belongs is refused at
// once: reading it would block forever (or never end).
TEST(SafeWrites, FilesThatAreNotFilesAreRefusedNotWaitedOn) {
    test::ScratchDir dir("fifo");
    for (const char* name : {"config.json", "tokenizer.json", "model.safetensors"}) {
        const fs::path model = copyOfBundled(dir);
        fs::remove(model / name);
        ASSERT_EQ(::mkfifo((model / name).c_str(), 0600), 0);
        const auto t0 = std::chrono::steady_clock::now();
        const std::string what = std::string(name) == "tokenizer.json"
                                     ? errorOf([&] { Tokenizer::fromFile(model / name); })
                                     : errorOf([&] { loadModel(model, RunSettings{}); });
        EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
        EXPECT_NE(what.find(name), std::string::npos) << what;
        EXPECT_NE(what.find("FIFO"), std::string::npos) << what;
        fs::remove_all(model);
    }
    // A shard named by the index.
    const fs::path model = copyOfBundled(dir);
    fs::rename(model / "model.safetensors", model / "model-00001-of-00001.safetensors");
    nlohmann::json index{{"weight_map", {{"model.embed_tokens.weight", "model-00002-of-00002.safetensors"}}}};
    spit(model / "model.safetensors.index.json", index.dump());
    ASSERT_EQ(::mkfifo((model / "model-00002-of-00002.safetensors").c_str(), 0600), 0);
    EXPECT_NE(errorOf([&] { loadModel(model, RunSettings{}); }).find("not a regular file"), std::string::npos);
    EXPECT_NE(errorOf([&] { Tokenizer::fromFile(dir.path()); }).find("a folder"), std::string::npos);
}

// A shard index with 200,000 entries is read in linear time.
TEST(SafeWrites, LargeShardIndexIsLinear) {
    nlohmann::json map;
    for (int i = 0; i < 200000; ++i) map["t" + std::to_string(i)] = "model-" + std::to_string(i) + ".safetensors";
    const std::string text = nlohmann::json{{"weight_map", map}}.dump();
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(parseSafetensorsIndex(text, "index.json").size(), 200000u);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

// A safetensors header with 300,000 tensors is read in linear time: with
// nlohmann's parser callback (the duplicate-name check) it took over 300 s
// on this machine (issue 50); now it takes about a second.
TEST(SafeWrites, LargeSafetensorsHeaderIsLinear) {
    std::string header = "{";
    for (int i = 0; i < 300000; ++i)
        header += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" +
                  std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]}";
    header += "}";
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(SafetensorsFile::parseHeader(header, 4 * 300000, "x.safetensors", nullptr).size(), 300000u);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
    // The duplicate check still finds a name given twice, however far apart.
    header.back() = ',';
    header += "\"t7\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}";
    const std::string what = errorOf([&] { SafetensorsFile::parseHeader(header, 4 * 300000, "x.safetensors", nullptr); });
    EXPECT_NE(what.find("names tensor 't7' twice"), std::string::npos) << what;
}

// Real checkpoints pad their vocabulary (the bundled model: 320 rows, 319
// tokens): a padding id decodes and labels as <unused:ID> and a run that
// reads or predicts one goes on.
TEST(PaddedVocabulary, PaddingIdsDecodeAndNeverAbortARun) {
    const auto tok = std::make_shared<const Tokenizer>(Tokenizer::fromFile(bundledModelDir() / "tokenizer.json"));
    ASSERT_LT(tok->vocabSize(), bundled()->config().vocabSize);
    const int32_t pad = static_cast<int32_t>(bundled()->config().vocabSize) - 1;
    EXPECT_EQ(tok->decode({pad}), "<unused:" + std::to_string(pad) + ">");
    EXPECT_EQ(tok->decode({pad}, /*skipSpecialTokens=*/true), "<unused:" + std::to_string(pad) + ">");
    EXPECT_EQ(tok->tokenLabel(pad), "<unused:" + std::to_string(pad) + ">");
    EXPECT_NE(errorOf([&] { tok->decode({-1}); }).find("negative"), std::string::npos);
    SessionOptions so;
    so.prompt = {2, pad, 5, pad};
    so.policies = {parsePolicySpec("h2o")};
    so.budget = parseBudget("3");
    so.tokenizer = tok;
    so.continuation = {pad, 7};
    Session s(bundled(), so);
    auto t = s.start();
    EXPECT_EQ(t->labels[1], "<unused:" + std::to_string(pad) + ">");
    t = s.step();
    t = s.step();
    EXPECT_EQ(t->tokens[4], pad);
    EXPECT_EQ(t->labels[4], "<unused:" + std::to_string(pad) + ">");
}

// Values that make every activation NaN are refused at load, naming the field.
TEST(NumbersThatLie, ConfigValuesThatMakeNaNAreRefused) {
    const std::string base = slurp(bundledModelDir() / "config.json");
    for (const auto& [from, to, field] :
         {std::tuple{"\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": -1", "rms_norm_eps"},
          std::tuple{"\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 0", "rms_norm_eps"},
          std::tuple{"\"rope_theta\": 10000.0", "\"rope_theta\": 0", "rope_theta"},
          std::tuple{"\"rope_theta\": 10000.0", "\"rope_theta\": -5", "rope_theta"}}) {
        std::string cfg = base;
        const size_t at = cfg.find(from);
        ASSERT_NE(at, std::string::npos) << from;
        cfg.replace(at, std::strlen(from), to);
        const std::string what = errorOf([&] { parseConfig(cfg, "config.json"); });
        EXPECT_NE(what.find(field), std::string::npos) << what;
        EXPECT_NE(what.find("positive finite"), std::string::npos) << what;
    }
}

// NaN weights: the run stops with a sentence saying the logits are not
// finite (no "KL nan" beside "top-1 100 %"), and the model still loads.
TEST(NumbersThatLie, NonFiniteLogitsStopTheRunWithAReason) {
    test::ScratchDir dir("nan");
    const fs::path model = copyOfBundled(dir);
    std::string bytes = slurp(model / "model.safetensors");
    uint64_t dataOffset = 0;
    const auto tensors = SafetensorsFile::parseBytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                                     "model.safetensors", nullptr, &dataOffset);
    for (const auto& t : tensors)
        if (t.name == "model.norm.weight")
            for (uint64_t b = t.begin; b < t.end; b += 4) {
                const float nan = std::nanf("");
                std::memcpy(bytes.data() + dataOffset + b, &nan, 4);
            }
    spit(model / "model.safetensors", bytes);
    const auto m = loadModel(model, RunSettings{});
    SessionOptions so;
    so.prompt = {2, 10, 11, 12};
    so.policies = {parsePolicySpec("h2o")};
    so.budget = parseBudget("3");
    Session s(m, so);
    const std::string what = errorOf([&] { s.start(); });
    EXPECT_NE(what.find("full cache's logits after position 3 are not finite"), std::string::npos) << what;
}

// What HF would do differently, or not at all, is an error here.
TEST(NumbersThatLie, SilentAcceptanceIsAnError) {
    {   // Untied without a head: HF would start from a random lm_head.
        const std::string what = loadErrorAfterConfigEdit("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false");
        EXPECT_NE(what.find("lm_head.weight"), std::string::npos) << what;
        EXPECT_NE(what.find("config.json"), std::string::npos) << what;
    }
    {   // Fewer layers in the config than in the weights: none is dropped silently.
        const std::string what = loadErrorAfterConfigEdit("\"num_hidden_layers\": 3", "\"num_hidden_layers\": 2");
        EXPECT_NE(what.find("num_hidden_layers is 2 but the weights hold 3 layers"), std::string::npos) << what;
    }
    {   // A tensor named twice in one header: JSON would keep the last.
        const std::string header =
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
        const std::string what = errorOf([&] { SafetensorsFile::parseHeader(header, 8, "x.safetensors", nullptr); });
        EXPECT_NE(what.find("names tensor 'a' twice"), std::string::npos) << what;
    }
}

// Past the trained context: a warning; past 4x: refused unless insisted on;
// learned positions (GPT-2) cannot go past at all.
TEST(NumbersThatLie, LongContextsAreWarnedAboutThenRefused) {
    using L = ContextCheck::Level;
    EXPECT_EQ(checkContextLength(2048, 2048, false, false).level, L::Ok);
    const ContextCheck warn = checkContextLength(2049, 2048, false, false);
    EXPECT_EQ(warn.level, L::Warn);
    EXPECT_NE(warn.message.find("2049 tokens, past the 2048"), std::string::npos) << warn.message;
    EXPECT_EQ(checkContextLength(4 * 2048, 2048, false, false).level, L::Warn);
    const ContextCheck refuse = checkContextLength(4 * 2048 + 1, 2048, false, false);
    EXPECT_EQ(refuse.level, L::Refuse);
    EXPECT_NE(refuse.message.find("--allow-long-context"), std::string::npos) << refuse.message;
    EXPECT_EQ(checkContextLength(1 << 20, 2048, false, true).level, L::Warn);
    EXPECT_EQ(checkContextLength(1025, 1024, true, true).level, L::Refuse);
}
