#pragma once
// Running a sweep's probes on a model (core/sweep/sweep.h says what a probe
// and a shard are). Needle probes run as `kvlens-cli needle` runs one grid
// point; fidelity probes read a window of the sweep's text teacher-forced
// and take each run's KL, top-1, perplexity and retained mass against the
// full cache.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/sweep/sweep.h"

namespace kvlens {
class Model;
class Tokenizer;
}  // namespace kvlens

namespace kvlens::sweep {

struct LoadedModel {
    std::shared_ptr<const Model> model;
    std::shared_ptr<const Tokenizer> tokenizer;
    // The fidelity text in this model's tokens (without special tokens):
    // runShard encodes it once per model; runProbe encodes it when empty.
    std::shared_ptr<const std::vector<int64_t>> textTokens;
};
// Loads model `index` of the sweep (throws a kvlens::Error saying why not).
using ModelLoader = std::function<LoadedModel(size_t index)>;
// The loader the CLI uses: Model::load(dir, spec.run) and the folder's tokenizer.json.
ModelLoader folderLoader(const SweepSpec& spec);

// One probe: its cells, or a failed result naming the reason. Session's
// Cancelled passes through when `cancel` is raised.
ProbeResult runProbe(const SweepSpec& spec, const Probe& probe, const LoadedModel& model,
                     const std::atomic<bool>* cancel = nullptr);

struct ShardReport {
    int64_t pending = 0;  // probes the shard had to run when it started
    int64_t done = 0, failed = 0;
    bool cancelled = false;
    std::string firstFailure;  // "needle|bundled|512|0.5|1: <reason>"
};
// Called before each probe (index among the pending ones, their count, the key).
using ShardProgress = std::function<void(int64_t index, int64_t pending, const std::string& key)>;

// Runs the shard's probes that have no current result, appending each one's
// result to the shard's file as it finishes; stops between (or inside)
// probes when `cancel` is raised, the probe in flight not written.
ShardReport runShard(const SweepSpec& spec, const Shard& shard, const ModelLoader& load,
                     const ShardProgress& progress = {}, const std::atomic<bool>* cancel = nullptr);

}  // namespace kvlens::sweep
