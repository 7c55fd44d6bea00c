#pragma once
// What the Session prepares, before its runs read the prompt, for the
// policies that plan from more than their cache. Chosen by a trait of the
// policy's info (PolicyInfo::preparation), never by its id:
//  - FutureAttention (the hindsight oracle): the full cache's attention of
//    the last prompt query and the next `horizon` decode queries;
//  - Reconstruction (KVzip): the attention of the model asked to repeat
//    the prompt, chunk by chunk;
//  - CalibrationQueries (Q-Filters): the calibration text's queries.
// Internal to core/run (uses ATen through PolicyRun).
#include <cstdint>
#include <functional>
#include <vector>

#include "core/policy/policy_info.h"

namespace kvlens {

class Model;
class PolicyRun;
struct SessionOptions;

// The decode steps a hindsight oracle reads ahead: its `horizon`, or the
// steps the caller plans, or (planning none) 16.
int64_t futureHorizon(const PolicyConfig& config, int64_t plannedSteps);

// The token every run reads at decode step s (an agnostic question's, then
// the continuation's), -1 where the runs choose.
int64_t forcedToken(const SessionOptions& opt, int64_t s);

// Gives each of `runs` (policy runs the Session computes itself) what its
// preparation asks for; `checkCancel` throws to stop.
void preparePromptScores(const Model& model, const SessionOptions& opt, const std::vector<PolicyRun*>& runs,
                         const std::function<void()>& checkCancel);

}  // namespace kvlens
