#include "core/run/context_limit.h"

namespace kvlens {

ContextCheck checkContextLength(int64_t tokens, int64_t maxPositions, bool learnedPositions, bool allowLong) {
    ContextCheck c;
    if (maxPositions <= 0 || tokens <= maxPositions) return c;
    const std::string n = std::to_string(tokens), max = std::to_string(maxPositions);
    if (learnedPositions) {
        c.level = ContextCheck::Level::Refuse;
        c.message = "the run needs " + n + " positions but the model has learned positions for " + max +
                    " only (max_position_embeddings): shorten the prompt or the decode steps";
        return c;
    }
    const bool hard = tokens > kHardContextFactor * maxPositions && !allowLong;
    c.level = hard ? ContextCheck::Level::Refuse : ContextCheck::Level::Warn;
    c.message = "the run reaches " + n + " tokens, past the " + max +
                " the model was trained for (max_position_embeddings): " +
                (hard ? "refused beyond " + std::to_string(kHardContextFactor) +
                            "x that; shorten the prompt or insist (--allow-long-context)"
                      : "its outputs there are extrapolation");
    return c;
}

}  // namespace kvlens
