// Session files: round trip, the errors a user sees for a corrupted or newer
// file or a missing model, the model fingerprint, and save -> open -> the
// same traces.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <tuple>

#include "core/error.h"
#include "core/eval/vocabulary.h"
#include "core/io/session_file.h"
#include "core/io/trace_json.h"
#include "core/model/model.h"
#include "core/io/session_setup.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/support/test_models.h"

using namespace kvlens;
namespace fs = std::filesystem;

namespace {

SessionFile example(const fs::path& modelDir) {
    SessionFile s;
    s.modelDir = modelDir.string();
    s.modelFingerprint = modelFingerprint(modelDir);
    s.prompt = "the code for the red door is 4 8 2 1 . the tired farmer walks slowly near the river . what is the code for the red door ?";
    s.policies = {"h2o", "snapkv:window=4", "streaming:sinks=2"};
    s.budget = "12";
    s.decodeSteps = 3;
    s.view = {1, 3, 2, "log"};
    return s;
}

template <class F>
std::string formatError(F&& f) {
    try {
        f();
    } catch (const FormatError& e) {
        return e.what();
    }
    return "(no FormatError)";
}

class SessionFileTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        s_dir = std::make_unique<test::ScratchDir>("session_file");
        test::ModelOptions mo;
        mo.vocabSize = static_cast<int64_t>(eval::Vocabulary::bundled().size());
        test::makeRandomModel(Family::Llama, mo, 9, s_dir->path() / "model");
        eval::Vocabulary::bundled().writeTokenizerJson(s_dir->path() / "model" / "tokenizer.json");
    }
    static void TearDownTestSuite() { s_dir.reset(); }
    static fs::path model() { return s_dir->path() / "model"; }
    static std::unique_ptr<test::ScratchDir> s_dir;
};
std::unique_ptr<test::ScratchDir> SessionFileTest::s_dir;

// The traces a session file produces, as JSON (every status, score, metric).
nlohmann::json runSession(const SessionFile& f) {
    const fs::path dir = sessionModelDir(f);
    auto tok = std::make_shared<const Tokenizer>(Tokenizer::fromFile(dir / "tokenizer.json"));
    auto model = std::shared_ptr<const Model>(Model::load(dir));
    const SessionOptions o = sessionOptionsFrom(f, tok);
    Session session(model, o);
    auto trace = session.start();
    for (int64_t i = 0; i < o.plannedSteps; ++i) trace = session.step();
    return traceToJson(*trace);
}

}  // namespace

TEST_F(SessionFileTest, RoundTripKeepsEveryField) {
    const SessionFile s = example(model());
    const SessionFile back = sessionFromJson(sessionToJson(s));
    EXPECT_EQ(sessionToJson(back), sessionToJson(s));
    EXPECT_EQ(back.policies, s.policies);
    EXPECT_EQ(back.view.colourScale, "log");
    EXPECT_EQ(back.view.head, 3);
    // The GUI's colour slots travel with the policies; none: the key is left out.
    SessionFile coloured = s;
    coloured.colours.clear();
    for (size_t i = 0; i < s.policies.size(); ++i) coloured.colours.push_back(static_cast<int>(7 - i));
    EXPECT_EQ(sessionFromJson(sessionToJson(coloured)).colours, coloured.colours);
    EXPECT_FALSE(sessionToJson(s).contains("colours") && s.colours.empty());
    auto j = sessionToJson(coloured);
    j["colours"].push_back(9);  // one more than the policies
    EXPECT_NE(formatError([&] { sessionFromJson(j); }).find("\"colours\" must give each of the"), std::string::npos);
    j = sessionToJson(coloured);
    j["colours"][0] = j["colours"][1];  // two policies sharing a colour
    EXPECT_NE(formatError([&] { sessionFromJson(j); }).find("its own colour slot"), std::string::npos);
    j["colours"] = nlohmann::json::array({1e30, 2.0, 3.0});  // a float past int's range is refused, not converted
    EXPECT_NE(formatError([&] { sessionFromJson(j); }).find("its own colour slot"), std::string::npos);
    j["colours"] = "red";
    EXPECT_NE(formatError([&] { sessionFromJson(j); }).find("\"colours\""), std::string::npos);
    // The run the Budget dock shows travels too, and must be one of the policies.
    SessionFile shown = s;
    shown.view.budgetRun = s.policies.back();
    EXPECT_EQ(sessionFromJson(sessionToJson(shown)).view.budgetRun, s.policies.back());
    EXPECT_FALSE(sessionToJson(s)["view"].contains("budget_run"));
    j = sessionToJson(shown);
    j["view"]["budget_run"] = "tova";
    EXPECT_NE(formatError([&] { sessionFromJson(j); }).find("\"view.budget_run\" 'tova' is not one of the session's policies"),
              std::string::npos);
    shown.view.rankBy = "top1";
    EXPECT_EQ(sessionFromJson(sessionToJson(shown)).view.rankBy, "top1");
    j = sessionToJson(shown);
    j["view"]["rank_by"] = "best";
    EXPECT_NE(formatError([&] { sessionFromJson(j); }).find("\"view.rank_by\" 'best' is not one of kl, top1"),
              std::string::npos);
}

TEST_F(SessionFileTest, SaveThenOpenGivesTheSameTraces) {
    const fs::path file = s_dir->path() / "a.kvlens.json";
    const SessionFile s = example(model());
    saveSession(file, s);
    EXPECT_FALSE(fs::exists(file.string() + ".tmp"));
    const SessionFile opened = loadSession(file);
    const auto first = runSession(s), second = runSession(opened);
    EXPECT_EQ(first, second);
    ASSERT_EQ(first["policies"].size(), 4u) << "full + three policies";
    EXPECT_EQ(fingerprintNote(opened, model()), "");
}

TEST_F(SessionFileTest, QuestionAndCalibrationTravelWithTheSession) {
    SessionFile s = example(model());
    s.policies = {"snapkv:window=4", "qfilter"};
    s.question = "what is the code for the red door ?";
    s.questionMode = "agnostic";
    s.calibration = "the tired farmer walks slowly near the river .";
    const fs::path file = s_dir->path() / "question.kvlens.json";
    saveSession(file, s);
    const SessionFile opened = loadSession(file);
    EXPECT_EQ(opened.question, s.question);
    EXPECT_EQ(opened.questionMode, "agnostic");
    EXPECT_EQ(opened.calibration, s.calibration);
    auto tok = std::make_shared<const Tokenizer>(Tokenizer::fromFile(model() / "tokenizer.json"));
    const SessionOptions o = sessionOptionsFrom(opened, tok);
    EXPECT_EQ(o.question.size(), tok->encode(s.question, false).size());
    EXPECT_FALSE(o.calibration.empty());
    EXPECT_EQ(o.plannedSteps, s.decodeSteps + static_cast<int64_t>(o.question.size())) << "the answer's steps follow the question";
    EXPECT_EQ(runSession(opened), runSession(s));
    // Without them the file reads as before (no keys written).
    const nlohmann::json plain = sessionToJson(example(model()));
    EXPECT_FALSE(plain.contains("question"));
    EXPECT_FALSE(plain.contains("calibration"));
    auto j = sessionToJson(s);
    j["question"]["mode"] = "sideways";
    EXPECT_NE(formatError([&] { sessionFromJson(j); }).find("\"question.mode\" 'sideways' is not aware or agnostic"),
              std::string::npos);
}

TEST_F(SessionFileTest, CorruptedFutureAndIncompleteFilesSayWhatIsWrong) {
    const fs::path file = s_dir->path() / "bad.kvlens.json";
    std::ofstream(file) << sessionToJson(example(model())).dump().substr(0, 40);
    EXPECT_NE(formatError([&] { loadSession(file); }).find("not valid JSON"), std::string::npos);
    // A sentence, not the parser's own text (issue 50's low bucket).
    std::ofstream(file, std::ios::trunc) << "{not json";
    EXPECT_EQ(formatError([&] { loadSession(file); }),
              file.string() + ": not valid JSON at line 1, column 3: invalid literal in an object key, expected string "
                              "literal (after '{no')");

    auto j = sessionToJson(example(model()));
    j["version"] = 7;
    EXPECT_NE(formatError([&] { sessionFromJson(j); }).find("written by a newer KVLens (session version 7)"),
              std::string::npos);
    j = sessionToJson(example(model()));
    j.erase("prompt");
    EXPECT_NE(formatError([&] { sessionFromJson(j); }).find("missing field \"prompt\""), std::string::npos);
    j = sessionToJson(example(model()));
    j["policies"] = "h2o";
    EXPECT_NE(formatError([&] { sessionFromJson(j); }).find("field \"policies\" has the wrong type"), std::string::npos);
    EXPECT_NE(formatError([&] { sessionFromJson(nlohmann::json::array()); }).find("not a KVLens session"), std::string::npos);
    EXPECT_NE(formatError([&] { loadSession(s_dir->path() / "missing.json"); }).find("cannot open"), std::string::npos);

    SessionFile gone = example(model());
    gone.modelDir = (s_dir->path() / "deleted-model").string();
    EXPECT_THROW(sessionModelDir(gone), ArgumentError);
    SessionFile badPolicy = example(model());
    badPolicy.policies = {"nosuchpolicy"};
    auto tok = std::make_shared<const Tokenizer>(Tokenizer::fromFile(model() / "tokenizer.json"));
    EXPECT_THROW(sessionOptionsFrom(badPolicy, tok), ArgumentError);
}

// Inputs tests/fuzz/fuzz_session found (kept in its seed corpus too): a
// "format" that is not a string escaped as nlohmann::type_error (a crash in
// the GUI's open path), numbers too large for their field were converted
// with undefined behaviour (UBSan), and out-of-range integers wrapped.
TEST_F(SessionFileTest, FuzzerFindingsAreFormatErrors) {
    using nlohmann::json;
    EXPECT_NE(formatError([] { sessionFromJson(json::parse(R"({"format": 99999999999})")); }).find("not a KVLens session"),
              std::string::npos);
    const json good = sessionToJson(example(model()));
    for (const auto& [path, value, says] : std::vector<std::tuple<json::json_pointer, json, std::string>>{
             {json::json_pointer("/version"), 1e300, "\"version\" must be a whole number"},
             {json::json_pointer("/version"), 4294967297ull, "\"version\" is out of range"},
             {json::json_pointer("/decode_steps"), -1e300, "\"decode_steps\" must be a whole number"},
             {json::json_pointer("/sampling/seed"), -1, "\"seed\" is out of range"},
             {json::json_pointer("/view/layer"), 18446744073709551615ull, "\"layer\" is out of range"}}) {
        json j = good;
        j[path] = value;
        EXPECT_NE(formatError([&] { sessionFromJson(j); }).find(says), std::string::npos) << path.to_string();
    }
}

TEST_F(SessionFileTest, FingerprintFollowsTheWeights) {
    const fs::path copy = s_dir->path() / "model-copy";
    fs::create_directories(copy);
    for (const auto& e : fs::directory_iterator(model())) fs::copy_file(e.path(), copy / e.path().filename());
    EXPECT_EQ(modelFingerprint(copy), modelFingerprint(model()));
    EXPECT_EQ(modelFingerprint(copy).rfind("fnv1a64:", 0), 0u);
    {
        // Change one byte of the last weight block (same shapes, new weights).
        std::fstream f(copy / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(-3, std::ios::end);
        f.put('\x7f');
    }
    EXPECT_NE(modelFingerprint(copy), modelFingerprint(model()));
    SessionFile s = example(model());
    EXPECT_NE(fingerprintNote(s, copy).find("changed since this session was saved"), std::string::npos);
    EXPECT_THROW(modelFingerprint(s_dir->path()), FormatError);
    // A FIFO as config.json (or a weights file) is refused at once: reading
    // it waited forever, and the GUI with it (issue 50).
    const fs::path fifo = s_dir->path() / "fifo-model";
    fs::create_directories(fifo);
    ASSERT_EQ(::mkfifo((fifo / "config.json").c_str(), 0600), 0);
    EXPECT_NE(formatError([&] { modelFingerprint(fifo); }).find("not a regular file (a FIFO)"), std::string::npos);
    fs::remove(fifo / "config.json");
    fs::copy_file(copy / "config.json", fifo / "config.json");
    ASSERT_EQ(::mkfifo((fifo / "model.safetensors").c_str(), 0600), 0);
    EXPECT_NE(formatError([&] { modelFingerprint(fifo); }).find("not a regular file"), std::string::npos);
}

// TorchScript scorers are saved by file with a fingerprint of their bytes;
// opening says which changed since (a file that is gone fails on its own
// when its policy loads). Sessions without scorers have no "scripts".
TEST_F(SessionFileTest, ScorerFilesAreFingerprinted) {
    const fs::path scorer = s_dir->path() / "mine.pt";
    std::ofstream(scorer, std::ios::binary) << "first bytes";
    SessionFile s = example(model());
    EXPECT_FALSE(sessionToJson(s).contains("scripts"));
    s.policies.push_back("script:" + scorer.string() + ":window=4");
    s.scripts[scorer.string()] = scriptFingerprint(scorer);
    EXPECT_EQ(s.scripts[scorer.string()].rfind("fnv1a64:", 0), 0u);
    const SessionFile back = sessionFromJson(sessionToJson(s));
    EXPECT_EQ(back.scripts, s.scripts);
    EXPECT_EQ(back.policies.back(), "script:" + scorer.string() + ":window=4");
    EXPECT_EQ(scriptsNote(back), "");
    std::ofstream(scorer, std::ios::binary) << "other bytes";
    EXPECT_NE(scriptsNote(back).find("mine.pt changed since this session was saved"), std::string::npos);
    EXPECT_NE(fingerprintNote(back, model()).find("mine.pt changed"), std::string::npos);
    EXPECT_EQ(scriptFingerprint(s_dir->path() / "missing.pt"), "");
    nlohmann::json bad = sessionToJson(s);
    bad["scripts"] = nlohmann::json::array({"mine.pt"});
    EXPECT_NE(formatError([&] { sessionFromJson(bad, "x.json"); }).find("\"scripts\""), std::string::npos);
}
