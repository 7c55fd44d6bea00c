#include "tests/support/trace_compare.h"

#include <iomanip>
#include <gtest/gtest.h>

#include <cmath>

namespace kvlens::test {

std::vector<std::shared_ptr<const Trace>> runAll(Session& s, int steps) {
    std::vector<std::shared_ptr<const Trace>> out{s.start()};
    for (int i = 0; i < steps; ++i) out.push_back(s.step());
    return out;
}

bool close(double a, double b, double tol) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return std::abs(a - b) <= tol * std::max(1.0, std::abs(b));
}

// Everything a view shows: exact (tol 0) or within tol.
void expectSameTraces(const std::vector<std::shared_ptr<const Trace>>& got,
                      const std::vector<std::shared_ptr<const Trace>>& want, double tol, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t s = 0; s < got.size(); ++s) {
        const Trace &g = *got[s], &w = *want[s];
        const std::string at = what + ", step " + std::to_string(s);
        EXPECT_EQ(g.step, w.step) << at;
        EXPECT_EQ(g.tokens, w.tokens) << at;
        EXPECT_EQ(g.labels, w.labels) << at;
        ASSERT_EQ(g.policies.size(), w.policies.size()) << at;
        ASSERT_EQ(g.attention.size(), w.attention.size()) << at;
        for (size_t r = 0; r < g.policies.size(); ++r) {
            const PolicyTrace &gp = g.policies[r], &wp = w.policies[r];
            const std::string run = at + ", " + wp.label;
            EXPECT_EQ(gp.label, wp.label) << run;
            EXPECT_EQ(gp.schedule, wp.schedule) << run;
            EXPECT_EQ(gp.generated, wp.generated) << run;
            EXPECT_EQ(gp.divergedAt, wp.divergedAt) << run;
            EXPECT_EQ(gp.bytesHeld, wp.bytesHeld) << run;
            EXPECT_EQ(gp.peakBytesHeld(), wp.peakBytesHeld()) << run;
            ASSERT_EQ(gp.layers.size(), wp.layers.size()) << run;
            for (size_t l = 0; l < gp.layers.size(); ++l) {
                EXPECT_EQ(gp.layers[l].budget, wp.layers[l].budget) << run;
                for (size_t h = 0; h < gp.layers[l].heads.size(); ++h) {
                    EXPECT_EQ(gp.layers[l].heads[h].status, wp.layers[l].heads[h].status) << run << " layer " << l;
                    EXPECT_EQ(gp.layers[l].heads[h].held, wp.layers[l].heads[h].held) << run << " layer " << l;
                }
                for (size_t h = 0; h < gp.layers[l].retainedMass.size(); ++h)
                    EXPECT_TRUE(close(gp.layers[l].retainedMass[h], wp.layers[l].retainedMass[h], tol)) << run;
            }
            ASSERT_EQ(gp.metrics.size(), wp.metrics.size()) << run;
            for (size_t i = 0; i < gp.metrics.size(); ++i) {
                const StepMetrics &a = gp.metrics[i], &b = wp.metrics[i];
                EXPECT_EQ(a.argmax, b.argmax) << run;
                EXPECT_EQ(a.bytesHeld, b.bytesHeld) << run;
                EXPECT_TRUE(close(a.kl, b.kl, tol)) << run << " kl " << a.kl << " vs " << b.kl;
                EXPECT_TRUE(close(a.targetLogProb, b.targetLogProb, tol)) << run;
                EXPECT_TRUE(close(a.retainedMass, b.retainedMass, tol)) << run;
                EXPECT_TRUE(close(a.outputCosine, b.outputCosine, tol)) << run << " cos " << std::setprecision(17) << a.outputCosine << " vs " << b.outputCosine;
            }
            const std::vector<float> ga = g.attention[r].dense(), wa = w.attention[r].dense();
            ASSERT_EQ(ga.size(), wa.size()) << run;
            for (size_t i = 0; i < ga.size(); ++i)
                if (!close(ga[i], wa[i], tol)) {
                    ADD_FAILURE() << run << ": attention value " << i << " " << ga[i] << " vs " << wa[i];
                    break;
                }
        }
    }
}

}  // namespace kvlens::test
