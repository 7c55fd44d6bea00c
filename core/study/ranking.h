#pragma once
// Which run is best, and at what memory (issue 50): one row per run of a
// Trace, ranked by mean KL, with the KV bytes each held over the run, and a
// flag on the runs compared at unequal memory. The CLI's compare table and
// JSON and the GUI's Ranking dock read the same rows. Torch-free.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/run/trace.h"

namespace kvlens {

struct RankedRun {
    size_t run = 0;                  // index in Trace::policies (0: the full cache)
    std::string label;
    double budget = std::nan("");    // mean budget over the layers, entries per KV head (NaN: the full cache)
    double meanKl = std::nan(""), top1 = std::nan(""), perplexity = std::nan(""), retainedMass = std::nan("");
    double meanBytes = std::nan("");  // mean KV bytes held over the run (PolicyTrace::meanBytesHeld)
    uint64_t peakBytes = 0;          // the most it held, prompt read included
    double memoryShare = std::nan("");  // meanBytes as a share of the reference memory (1: equal)
    double oracleAgreement = std::nan("");  // kept-set Jaccard with the hindsight oracle's run, NaN without one
    int rank = 0;                    // 1 = lowest mean KL; 0: not ranked (the full cache, no KL: free-running, a run that stopped)
    bool unequalMemory = false;      // its mean memory is more than the tolerance off the reference
};

struct Ranking {
    std::vector<RankedRun> rows;     // the full cache first, then ranked runs by rank, then the unranked
    bool matched = false;            // the reference is a target the budgets were solved for
    double referenceBytes = std::nan("");  // the target, or else the median of the eviction runs' means
    double tolerance = 0.05;
    int unequal = 0;                 // runs flagged unequalMemory
    // One line on the memory the runs were compared at, e.g. "3 of 7 runs
    // held more than 5% more or less than the median (...): not a comparison at matched memory".
    std::string note;
};

// `targetBytes`: the memory the budgets were matched to (compare
// --match-memory); NaN: none, the runs are compared with the median of their means.
Ranking rankRuns(const Trace& trace, double targetBytes = std::nan(""), double tolerance = 0.05);

}  // namespace kvlens
