// The registry and the `--policy id:k=v,...` parser against POLICIES.md.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>

#include "core/error.h"
#include "core/policy/factory.h"
#include "core/policy/policy_info.h"

using namespace kvlens;

namespace {

// The message of the ArgumentError `spec` throws ("" if none).
std::string errorOf(const std::string& spec) {
    try {
        parsePolicySpec(spec);
    } catch (const ArgumentError& e) {
        return e.what();
    }
    return "";
}

const ParamSpec& param(const std::string& id, const std::string& name) {
    for (const auto& p : findPolicy(id).params)
        if (p.name == name) return p;
    throw std::runtime_error(id + " lacks " + name);
}

}  // namespace

TEST(Registry, HasEveryPolicyOfPoliciesMd) {
    // The ids of POLICIES.md's table ("| `id` | name | rule | schedule |"), read in place.
    std::ifstream spec(KVLENS_SHARED "/POLICIES.md");
    ASSERT_TRUE(spec) << KVLENS_SHARED "/POLICIES.md is missing";
    std::set<std::string> specIds;
    const std::regex row(R"(^\| `([a-z0-9_]+)` \|)");
    for (std::string line; std::getline(spec, line);) {
        std::smatch m;
        if (std::regex_search(line, m, row)) specIds.insert(m[1]);
    }
    ASSERT_GE(specIds.size(), 10u) << "POLICIES.md's table of policies was not found";
    std::set<std::string> ids;
    for (const auto& info : policyRegistry()) ids.insert(info.id);
    for (const auto& id : specIds) EXPECT_EQ(ids.count(id), 1u) << id << " (POLICIES.md) is not registered";
    EXPECT_TRUE(policyRegistry().front().fullCache);
    EXPECT_EQ(fullCachePolicy().id, "full");
}

TEST(Registry, EveryPolicyHasAMakerAndEveryMakerAPolicy) {
    // The registry's table (infos) and the policy files (makers) name the same ids.
    std::set<std::string> infos;
    for (const auto& info : policyRegistry()) infos.insert(info.id);
    const std::vector<std::string> made = policyMakerIds();
    EXPECT_EQ(infos, std::set<std::string>(made.begin(), made.end()));
    for (const auto& info : policyRegistry()) {
        if (info.sessionScored) continue;  // needs the Session's scores to plan, not to be made
        EXPECT_NE(makePolicy(parsePolicySpec(info.id)), nullptr) << info.id;
    }
}

TEST(Registry, RegisteringRefusesTakenIdsAndASecondReference) {
    EXPECT_THROW(registerPolicyInfo(makePolicyInfo("snapkv", "again", "-", "-", Schedule::PrefillOnce, false, false)),
                 ArgumentError);
    EXPECT_THROW(registerPolicyInfo(makePolicyInfo("bad id", "x", "-", "-", Schedule::PrefillOnce, false, false)),
                 ArgumentError);
    PolicyInfo second = makePolicyInfo("full2", "x", "-", "-", Schedule::PrefillOnce, false, false);
    second.fullCache = true;
    EXPECT_THROW(registerPolicyInfo(second), ArgumentError);
    EXPECT_TRUE(isFullCache(fullCacheConfig()));
    EXPECT_FALSE(isFullCache(parsePolicySpec("test_vnorm")));
    EXPECT_TRUE(adaptiveHeads(parsePolicySpec("adakv")));
    EXPECT_FALSE(adaptiveHeads(parsePolicySpec("adakv:heads=uniform")));
    EXPECT_TRUE(adaptiveHeads(parsePolicySpec("snapkv:heads=adaptive")));
}

TEST(Registry, ParametersAndDefaultsFollowPoliciesMd) {
    // (id, parameter, default) exactly as the "Parameter names" section lists them.
    const std::vector<std::tuple<std::string, std::string, std::string>> table = {
        {"streaming", "sinks", "4"}, {"streaming", "rerotate", "false"}, {"random", "seed", "0"},
        {"random", "window", "0"},   {"lru", "tau", "1"},                {"lfu", "tau", "1"},
        {"h2o", "recent", "B/2"},    {"snapkv", "window", "32"},        {"snapkv", "kernel", "7"},
        {"snapkv", "pool", "max"},   {"pyramidkv", "beta", "20"},        {"pyramidkv", "alloc", "pyramid"},
        {"adakv", "alpha", "0.2"},   {"adakv", "heads", "adaptive"},     {"andpro", "sinks", "4"},
        {"andpro", "chunk", "1"},    {"andpro", "heads", "adaptive"},    {"andpro", "alpha", "0"},
        {"andpro", "window", "32"},  {"knorm", "skip_layers", "0,1"},    {"snapkv", "alloc", "uniform"},
        {"h2o", "heads", "uniform"},
    };
    for (const auto& [id, name, def] : table) EXPECT_EQ(param(id, name).defaultValue, def) << id << "." << name;
    for (const auto& info : policyRegistry())
        for (const char* common : {"schedule", "n", "gqa", "alloc", "beta", "heads", "alpha"})
            EXPECT_NO_THROW(param(info.id, common)) << info.id << " lacks " << common;
    EXPECT_EQ(findPolicy("snapkv").defaultSchedule, Schedule::PrefillOnce);
    EXPECT_EQ(findPolicy("knorm").defaultSchedule, Schedule::PrefillOnce);
    // POLICIES.md's prefill_then_step is what the H2O (real drop) and TOVA
    // reference implementations run: their default here (issue 17).
    EXPECT_EQ(findPolicy("h2o").defaultSchedule, Schedule::PrefillThenStep);
    EXPECT_EQ(findPolicy("tova").defaultSchedule, Schedule::PrefillThenStep);
    EXPECT_EQ(parsePolicySpec("h2o:schedule=every_step").schedule, Schedule::EveryStep);
    EXPECT_EQ(parsePolicySpec("snapkv").schedule, Schedule::PrefillOnce);
    EXPECT_EQ(parsePolicySpec("lru").schedule, Schedule::EveryStep);
}

TEST(Registry, ParsesSpecs) {
    const PolicyConfig c = parsePolicySpec("snapkv:window=16,pool=avg");
    EXPECT_EQ(c.id, "snapkv");
    EXPECT_EQ(c.getInt("window"), 16);
    EXPECT_EQ(c.text("pool"), "avg");
    EXPECT_EQ(c.getInt("kernel"), 7);  // untouched default
    const PolicyConfig e = parsePolicySpec("h2o:schedule=every_n,n=4,gqa=max,recent=10");
    EXPECT_EQ(e.schedule, Schedule::EveryN);
    EXPECT_EQ(e.everyN, 4);
    EXPECT_EQ(e.gqa, GqaReduce::Max);
    EXPECT_EQ(e.getInt("recent"), 10);
    EXPECT_EQ(parsePolicySpec("knorm:skip_layers=0,1,5").getIntList("skip_layers"), (std::vector<int64_t>{0, 1, 5}));
    EXPECT_TRUE(parsePolicySpec("streaming:rerotate=true").getBool("rerotate"));
    EXPECT_DOUBLE_EQ(parsePolicySpec("adakv:alpha=0.5").getReal("alpha"), 0.5);
}

TEST(Registry, ErrorsNameTheOffender) {
    std::string m = errorOf("snapkvv");
    EXPECT_NE(m.find("snapkvv"), std::string::npos) << m;
    EXPECT_NE(m.find("andpro"), std::string::npos) << m;  // lists the known ids
    m = errorOf("snapkv:windw=3");
    EXPECT_NE(m.find("windw"), std::string::npos) << m;
    EXPECT_NE(m.find("kernel"), std::string::npos) << m;  // lists the valid parameters
    m = errorOf("snapkv:window=-3");
    EXPECT_NE(m.find("window=-3"), std::string::npos) << m;
    EXPECT_NE(m.find("[1, "), std::string::npos) << m;  // and the range
    m = errorOf("adakv:alpha=1.5");
    EXPECT_NE(m.find("alpha=1.5"), std::string::npos) << m;
    EXPECT_NE(m.find("[0, 1]"), std::string::npos) << m;
    m = errorOf("snapkv:pool=median");
    EXPECT_NE(m.find("median"), std::string::npos) << m;
    EXPECT_NE(m.find("max, avg"), std::string::npos) << m;
    m = errorOf("h2o:schedule=sometimes");
    EXPECT_NE(m.find("sometimes"), std::string::npos) << m;
    EXPECT_NE(m.find("every_step"), std::string::npos) << m;
    m = errorOf("snapkv:window=abc");
    EXPECT_NE(m.find("window=abc"), std::string::npos) << m;
    m = errorOf("streaming:rerotate=maybe");
    EXPECT_NE(m.find("maybe"), std::string::npos) << m;
    m = errorOf("knorm:skip_layers=0,x");
    EXPECT_NE(m.find("'x'"), std::string::npos) << m;
    EXPECT_NE(errorOf("snapkv:window=4,window=5").find("twice"), std::string::npos);
    EXPECT_EQ(errorOf("snapkv:window=16"), "");
}

TEST(Registry, LabelRoundTrips) {
    EXPECT_EQ(parsePolicySpec("snapkv").label(), "snapkv");
    EXPECT_EQ(parsePolicySpec("snapkv:pool=avg,window=16").label(), "snapkv:window=16,pool=avg");
    // A value equal to its default is not part of the label.
    EXPECT_EQ(parsePolicySpec("snapkv:window=32").label(), "snapkv");
    for (const std::string spec :
         {"snapkv:window=16,pool=avg", "knorm:skip_layers=0,3,4", "adakv:alpha=0.125,gqa=sum", "h2o:recent=7",
          "streaming:sinks=2,rerotate=true", "random:seed=42,window=8,schedule=every_n,n=3", "tova",
          "pyramidkv:beta=12.5,alloc=uniform", "andpro:chunk=4,heads=uniform", "lfu:tau=0.5"}) {
        const PolicyConfig a = parsePolicySpec(spec);
        const PolicyConfig b = parsePolicySpec(a.label());
        EXPECT_EQ(a.values, b.values) << spec << " -> " << a.label();
        EXPECT_EQ(b.label(), a.label());
        EXPECT_EQ(a.schedule, b.schedule);
        EXPECT_EQ(a.everyN, b.everyN);
        EXPECT_EQ(a.gqa, b.gqa);
    }
}
