#pragma once
// Runs independent jobs (the policy runs of a Session reading a prompt or a
// token) on up to `workers` threads, the calling thread included. Each
// worker thread disables autograd as the caller does. The first exception
// thrown by a job is rethrown here after every worker has stopped; once a
// job has failed, jobs not yet started are skipped and `stopRequested`
// (give it to the jobs' cancel checks) turns true. While workers > 1 each
// thread runs its ATen ops single-threaded (restored afterwards): the jobs
// themselves are the parallelism. Internal to core.
#include <atomic>
#include <cstddef>
#include <functional>

namespace kvlens {

void runInParallel(size_t jobs, size_t workers, const std::function<void(size_t job, const std::atomic<bool>& stopRequested)>& run);

}  // namespace kvlens
