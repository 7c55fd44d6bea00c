#pragma once
// How far past the context a model was trained for (max_position_embeddings)
// a run may go. Past it a model still runs (RoPE extrapolates; StreamingLLM
// is built for it) but its outputs are no longer what it was trained to
// give: the user is warned. Past kHardContextFactor times it, a run is
// refused unless the user insists (kvlens-cli --allow-long-context, the
// GUI's confirmation): a pasted megabyte would otherwise run for minutes.
// Torch-free (kvlens_base).
#include <cstdint>
#include <string>

namespace kvlens {

constexpr int64_t kHardContextFactor = 4;

// The most decode steps a run may ask for (CLI --steps, a session's
// "decode_steps", a lesson's, a sweep's): far past any model's context, and
// small enough that prompt + steps cannot overflow the length checks.
constexpr int64_t kMaxDecodeSteps = 1000000;

struct ContextCheck {
    enum class Level { Ok, Warn, Refuse } level = Level::Ok;
    std::string message;  // one sentence; empty when Ok
};

// `tokens`: what the run will hold at its end (prompt + decode steps).
// `learnedPositions`: the model cannot go past maxPositions at all (GPT-2).
// With `allowLong`, Refuse becomes Warn (except for learned positions).
ContextCheck checkContextLength(int64_t tokens, int64_t maxPositions, bool learnedPositions, bool allowLong);

}  // namespace kvlens
