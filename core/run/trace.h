#pragma once
// Trace: an immutable, torch-free snapshot of a Session after a step — what
// every policy holds, why, what it costs, and how far its output drifts from
// the full cache. Widgets and exports read Traces only.
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/policy/token_status.h"

namespace kvlens {


constexpr float kNoScore = std::numeric_limits<float>::quiet_NaN();

struct HeadTrace {
    // Indexed by token position 0 .. Trace::tokens.size()-1.
    std::vector<TokenStatus> status;
    std::vector<float> score;    // the score of the latest decision (kNoScore where a rule decided or none did)
    std::vector<int32_t> rank;   // 0 = best among scored entries; -1 where unscored
    float cutoff = kNoScore;     // lowest score still kept by score in the latest decision
    int64_t held = 0;            // entries in the cache
};

struct LayerTrace {
    int64_t budget = 0;                 // entries per KV head this layer may hold
    std::vector<HeadTrace> heads;       // [Hkv]
    std::vector<float> retainedMass;    // [Hq] share of the full cache's attention (latest query) on held tokens
    std::vector<float> outputCosine;    // [Hq] cos(attention output, full cache's) for the latest query
};

struct StepMetrics {
    int64_t position = 0;       // position of the token whose successor was predicted
    double kl = 0;              // KL(p_full ‖ p_policy), nats
    bool top1Agrees = true;
    double targetLogProb = 0;   // log p_policy(token actually read next); NaN at the last step
    int64_t argmax = 0;         // the policy's most likely next token
    double retainedMass = 1;    // mean over layers and query heads (teacher-forced only)
    double outputCosine = 1;    // mean over layers and query heads (teacher-forced only)
    uint64_t bytesHeld = 0;     // KV bytes the run's cache held when it made this prediction
};

struct PolicyTrace {
    std::string id;              // "full", "snapkv", ...
    std::string label;           // "snapkv:window=16"
    std::string schedule;        // every_step | prefill_once | every_n(N)
    bool rerotate = false;       // keys re-rotated to cache positions (StreamingLLM's position shift)
    std::string budgetNote;      // e.g. a clamp, empty when none
    std::string failure;         // why this run stopped (non-finite logits), empty while it runs; its metrics end there
    std::vector<LayerTrace> layers;
    uint64_t bytesHeld = 0;      // KV bytes this policy's cache holds
    uint64_t bytesAllocated = 0; // KV tensor bytes actually allocated
    uint64_t promptPeakBytes = 0; // the most KV bytes its cache held while it read the prompt (a
                                  // prefill_once policy: the whole prompt, before it compressed)
    std::vector<int64_t> generated;   // tokens this run produced (free-running) or read (teacher-forced)
    std::vector<StepMetrics> metrics; // one per prediction since the prompt ended
    int64_t divergedAt = -1;     // first generated index differing from full (free-running), -1 if none
    double perplexity() const;   // exp(mean −targetLogProb) over metrics with a target
    double meanKl() const;
    double top1Agreement() const;
    double meanRetainedMass() const;
    double meanOutputCosine() const;
    // KV bytes held over the run: the mean over its predictions (NaN
    // without any), and the peak, prompt read included.
    double meanBytesHeld() const;
    uint64_t peakBytesHeld() const;
};

// Attention rows of one (layer, query head) for one policy: row r is the
// query at position r, column c the key at position c (NaN: not in that
// query's cache — evicted or not yet seen).
// The captured head's attention of one run, query by query: row q holds
// query q's weight on keys 0..q, kNoScore where the run did not hold the key
// (and for every key after q). A row never changes once written, so the
// Traces of successive steps share their rows: a decode step adds one row
// per run instead of copying size² values (a 2048-token map is 16 MiB, and
// the GUI keeps the Trace of every step).
struct AttentionMap {
    using Row = std::shared_ptr<const std::vector<float>>;
    int64_t layer = 0, head = 0;
    int64_t size = 0;       // rows = columns = tokens
    std::vector<Row> rows;  // [size]; a null or short row reads kNoScore past its end
    float at(int64_t q, int64_t k) const {
        const Row& r = rows[static_cast<size_t>(q)];
        return r && k < static_cast<int64_t>(r->size()) ? (*r)[static_cast<size_t>(k)] : kNoScore;
    }
    std::vector<float> dense() const;  // [size × size], row-major
    // From a dense [size × size] row-major matrix (tests, files).
    static AttentionMap fromDense(int64_t layer, int64_t head, int64_t size, const std::vector<float>& values);
};

// Kept-set agreement of two runs at a Trace's step: the Jaccard overlap
// |A ∩ B| / |A ∪ B| of the token positions each holds in one layer × KV
// head (NaN when neither holds any), and its mean over every layer and KV
// head. A run that stopped (failure) still has the sets it held last.
double keptJaccard(const PolicyTrace& a, const PolicyTrace& b, int64_t layer, int64_t kvHead);
double keptJaccardMean(const PolicyTrace& a, const PolicyTrace& b);

struct Trace {
    int64_t step = 0;            // decode steps done (0: the prompt has been read)
    int64_t promptLength = 0;
    std::vector<int64_t> tokens; // the sequence read so far (full run's in free-running mode)
    std::vector<std::string> labels;  // readable token text, for axes and strips
    int64_t numLayers = 0, numHeads = 0, numKvHeads = 0;
    bool teacherForced = true;
    int64_t slidingWindow = 0;   // the model's own attention window (config.json sliding_window): keys
                                 // older than this many positions are invisible to every run; 0: none
    std::vector<PolicyTrace> policies;      // [0] is always "full"
    std::vector<AttentionMap> attention;    // per policy, where capture was requested (same order)
};

}  // namespace kvlens
