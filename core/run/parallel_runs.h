#pragma once
// Runs independent jobs (the policy runs of a Session reading a prompt or a
// token) on up to `workers` threads, the calling thread included. Each
// worker thread sets autograd and inference mode as the caller has them.
// Jobs start in `order` (a permutation of 0..jobs-1; empty: 0, 1, ...):
// give the longest first, so that the short ones fill in beside them. The first exception
// thrown by a job is rethrown here after every worker has stopped; once a
// job has failed, jobs not yet started are skipped and `stopRequested`
// (give it to the jobs' cancel checks) turns true. While workers > 1 each
// thread runs its ATen ops single-threaded (restored afterwards): the jobs
// themselves are the parallelism, until only one job is left running: its
// thread takes the threads the others freed when it calls widenIfAlone()
// (between pieces of work: a Session's cancel checks do). Internal to core.
#include <atomic>
#include <cstddef>
#include <functional>
#include <vector>

namespace kvlens {

void runInParallel(size_t jobs, size_t workers, const std::function<void(size_t job, const std::atomic<bool>& stopRequested)>& run,
                   const std::vector<size_t>& order = {});

// In a job of runInParallel: when every other worker has run out of jobs,
// this thread's ATen ops and BLAS get the caller's thread counts again (once;
// restored when runInParallel returns). Elsewhere it does nothing.
void widenIfAlone();

}  // namespace kvlens
