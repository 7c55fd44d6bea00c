#pragma once
// What the files of PolicyRun share (policy_run.cpp: set-up, forward, trim
// and record; policy_run_prompt.cpp: the prompt read, alone or shared;
// policy_run_steps.cpp: decode steps and steps read ahead;
// policy_run_trace.cpp: what a Trace shows of the run). Internal to core/run.
#include <chrono>
#include <cstdint>
#include <vector>

namespace kvlens::policy_run_detail {

// Adds the scope's duration to a counter (the policy's share of a step).
class ScopeTimer {
public:
    explicit ScopeTimer(double& total) : m_total(total), m_start(std::chrono::steady_clock::now()) {}
    ~ScopeTimer() { m_total += std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count(); }

private:
    double& m_total;
    std::chrono::steady_clock::time_point m_start;
};

// The rank of every scored entry of a plan's row as the selection orders
// them (higher score first, ties to the more recent token, which is the
// later entry); -1 where the score is NaN. One sort: O(n log n).
std::vector<int32_t> ranksOfRow(const float* row, int64_t n);

}  // namespace kvlens::policy_run_detail
