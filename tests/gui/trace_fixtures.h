#pragma once
// Hand-built Traces for widget tests: every value is chosen here, so a test
// can say exactly which colour a cell must have.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/study/needle_grid.h"
#include "core/run/trace.h"

namespace kvlens::test {

// 2 layers, 8 query heads over 2 KV heads, `tokens` tokens (prompt = all but
// the last two); policy 0 "full" holds every token, policy 1 "h2o" has, in
// every layer and KV head, the statuses statusPattern() repeated. Attention
// maps (layer 1, head 5) are causal; policy 1's map has column 3 evicted for
// every query after position 4.
std::shared_ptr<Trace> makeTrace(int tokens = 12);
// sink, window, kept by score, evicted, held, unseen (then repeated).
TokenStatus statusPattern(int position);

// A needle grid of the bundled model ("kvlens-tiny"): full and streaming
// (budget 32) at every context × depth. Full always answers exactly;
// streaming misses a needle at depth < 0.5 in a context over 128 tokens
// (exact 0, overlap 0.25) and answers exactly elsewhere.
std::shared_ptr<eval::NeedleGridResult> makeNeedleGrid(const std::vector<int64_t>& contexts,
                                                       const std::vector<double>& depths);

}  // namespace kvlens::test
