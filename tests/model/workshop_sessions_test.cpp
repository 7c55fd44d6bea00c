// The workshop sessions shipped in resources/sessions open and run on the
// bundled model, and each shows what its name promises (so a retrained
// model that no longer shows it fails here, not in front of a class).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "core/io/session_file.h"
#include "core/model/model.h"
#include "core/paths.h"
#include "core/run/generate.h"
#include "core/run/session.h"
#include "core/io/session_setup.h"
#include "core/tokenizer/tokenizer.h"

namespace kvlens {
namespace {
namespace fs = std::filesystem;

struct Opened {
    SessionFile file;
    std::shared_ptr<const Trace> trace;
};

Opened run(const std::string& name) {
    const fs::path path = findResource("sessions") / (name + ".kvlens.json");
    Opened o{loadSession(path), nullptr};
    const fs::path dir = sessionModelDir(o.file);
    auto tok = std::make_shared<const Tokenizer>(Tokenizer::fromFile(dir / "tokenizer.json"));
    std::shared_ptr<const Model> model(Model::load(dir));
    Session s(model, sessionOptionsFrom(o.file, tok));
    o.trace = s.start();
    for (int64_t i = 0; i < o.file.decodeSteps; ++i) o.trace = s.step();
    return o;
}

// The run of the session's policy `spec` (runs follow the file's order after "full").
const PolicyTrace& policy(const Opened& o, const std::string& spec) {
    for (size_t i = 0; i < o.file.policies.size(); ++i)
        if (o.file.policies[i] == spec) return o.trace->policies.at(i + 1);
    throw std::runtime_error("the session has no policy " + spec);
}

// Positions of the prompt's first occurrence of `word`.
int64_t positionOf(const Trace& t, const std::string& word) {
    for (size_t i = 0; i < t.labels.size(); ++i)
        if (t.labels[i] == word || t.labels[i] == " " + word || t.labels[i] == "▁" + word) return int64_t(i);
    return -1;
}

bool held(const PolicyTrace& p, int64_t layer, int64_t kvHead, int64_t pos) {
    return p.layers[layer].heads[kvHead].status[pos] != TokenStatus::Evicted;
}

TEST(WorkshopSessions, EveryShippedSessionRuns) {
    int count = 0;
    for (const auto& e : fs::directory_iterator(findResource("sessions"))) {
        const std::string file = e.path().filename().string();
        ASSERT_TRUE(file.size() > 12 && file.substr(file.size() - 12) == ".kvlens.json") << file;
        const Opened o = run(file.substr(0, file.size() - 12));
        EXPECT_EQ(o.trace->policies.size(), o.file.policies.size() + 1) << file;
        EXPECT_EQ(o.file.modelDir, "") << file << ": workshop sessions use the bundled model";
        EXPECT_EQ(o.file.modelFingerprint, "") << file << ": and do not pin its weights";
        ++count;
    }
    EXPECT_GE(count, 4);
}

TEST(WorkshopSessions, SinksKeptByStreamingNotByWindow) {
    const Opened o = run("01-attention-sinks");
    const PolicyTrace &window = policy(o, "window"), &streaming = policy(o, "streaming:sinks=4");
    for (size_t l = 0; l < window.layers.size(); ++l)
        for (size_t h = 0; h < window.layers[l].heads.size(); ++h)
            for (int64_t pos = 0; pos < 4; ++pos) {
                EXPECT_FALSE(held(window, l, h, pos));
                EXPECT_TRUE(held(streaming, l, h, pos));
            }
}

TEST(WorkshopSessions, NeedlePhraseKeptBySnapKvLostByStreaming) {
    const Opened o = run("02-needle-snapkv-vs-streaming");
    const int64_t red = positionOf(*o.trace, "red"), door = positionOf(*o.trace, "door");
    ASSERT_GE(red, 4);
    ASSERT_EQ(door, red + 1);
    const PolicyTrace &snap = policy(o, "snapkv"), &streaming = policy(o, "streaming");
    // The session's view: its layer, and the KV head its query head reads.
    const int64_t layer = o.file.view.layer,
                  kvHead = o.file.view.head / (o.trace->numHeads / o.trace->numKvHeads);
    EXPECT_TRUE(held(snap, layer, kvHead, red) && held(snap, layer, kvHead, door))
        << "SnapKV no longer keeps 'red door' in the session's view: re-check the session with this model";
    EXPECT_FALSE(held(streaming, layer, kvHead, red) || held(streaming, layer, kvHead, door));

    // And what the class sees when each answers on its own: the full cache
    // and SnapKV give the code, StreamingLLM at the same budget does not.
    const fs::path dir = sessionModelDir(o.file);
    const auto model = Model::load(dir);
    const Tokenizer tok = Tokenizer::fromFile(dir / "tokenizer.json");
    std::vector<int64_t> ids;
    for (int32_t id : tok.encode(o.file.prompt)) ids.push_back(id);
    auto answer = [&](const std::string& spec) {
        GenerateOptions g;
        g.steps = 4;
        g.policy = parsePolicySpec(spec);
        g.budget = parseBudget(o.file.budget);
        const GenerateResult r = generate(*model, ids, g);
        return tok.decode(std::vector<int32_t>(r.generatedIds.begin(), r.generatedIds.end()));
    };
    EXPECT_EQ(answer("full"), "4 8 2 1");
    EXPECT_EQ(answer("snapkv"), "4 8 2 1");
    EXPECT_NE(answer("streaming"), "4 8 2 1");
}

TEST(WorkshopSessions, PyramidBudgetsShrinkWithDepth) {
    const Opened o = run("03-pyramidkv-layer-budgets");
    const PolicyTrace &snap = policy(o, "snapkv"), &pyramid = policy(o, "pyramidkv");
    for (size_t l = 1; l < pyramid.layers.size(); ++l) {
        EXPECT_LT(pyramid.layers[l].budget, pyramid.layers[l - 1].budget) << "layer " << l;
        EXPECT_EQ(snap.layers[l].budget, snap.layers[0].budget);
    }
}

TEST(WorkshopSessions, GroupReductionChangesWhatIsKept) {
    const Opened o = run("04-gqa-grouping");
    const PolicyTrace &mean = policy(o, "h2o:gqa=mean"), &max = policy(o, "h2o:gqa=max");
    int differ = 0;
    for (size_t l = 0; l < mean.layers.size(); ++l)
        for (size_t h = 0; h < mean.layers[l].heads.size(); ++h)
            differ += mean.layers[l].heads[h].status != max.layers[l].heads[h].status;
    EXPECT_GT(differ, 0) << "mean and max reductions keep the same tokens everywhere";
}

}  // namespace
}  // namespace kvlens
