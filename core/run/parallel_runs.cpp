#include "core/run/parallel_runs.h"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/cpu_tuning.h"

namespace kvlens {

namespace {

// The pool a worker thread runs its jobs in (runInParallel), for widenIfAlone.
struct Pool {
    std::atomic<size_t> busy{0};  // workers that have not yet run out of jobs
    int intraOp = 1, blas = 1;    // the threads the caller had
};
thread_local Pool* tPool = nullptr;
thread_local bool tWidened = false;

}  // namespace

void widenIfAlone() {
    if (!tPool || tWidened || tPool->busy.load(std::memory_order_acquire) != 1) return;
    at::set_num_threads(tPool->intraOp);
    setBlasThreads(tPool->blas);
    tWidened = true;
}

void runInParallel(size_t jobs, size_t workers, const std::function<void(size_t, const std::atomic<bool>&)>& run,
                   const std::vector<size_t>& order) {
    std::atomic<bool> stop{false};
    const auto job = [&](size_t i) { return order.empty() ? i : order.at(i); };
    if (workers <= 1 || jobs <= 1) {
        for (size_t i = 0; i < jobs; ++i) run(job(i), stop);
        return;
    }
    // Each worker runs its ops on one thread: with OpenMP every thread that
    // enters a parallel region brings its own team, so W workers at the
    // default would spin W x N threads on N cores.
    Pool pool;
    pool.busy = std::min(workers, jobs);
    pool.intraOp = at::get_num_threads();
    pool.blas = blasThreads();
    at::set_num_threads(1);
    setBlasThreads(1);  // OpenBLAS's pool is shared by every thread: each job multiplies on its own
    std::atomic<size_t> next{0};
    std::exception_ptr error;
    std::mutex errorMutex;
    const bool gradEnabled = at::GradMode::is_enabled(), inference = c10::InferenceMode::is_enabled();
    auto work = [&] {
        at::AutoGradMode gradMode(gradEnabled);  // grad and inference mode are thread-local
        c10::InferenceMode inferenceMode(inference);
        at::set_num_threads(1);                  // this thread's OpenMP team size
        tPool = &pool;
        tWidened = false;
        struct Leave {
            Pool& pool;
            ~Leave() {
                pool.busy.fetch_sub(1, std::memory_order_acq_rel);
                tPool = nullptr;
            }
        } leave{pool};
        for (size_t i = next++; i < jobs && !stop.load(); i = next++) {
            try {
                run(job(i), stop);
            } catch (...) {
                std::lock_guard<std::mutex> lock(errorMutex);
                if (!error) error = std::current_exception();
                stop = true;
            }
        }
    };
    std::vector<std::thread> threads;
    for (size_t w = 1; w < std::min(workers, jobs); ++w) threads.emplace_back(work);
    work();
    for (auto& t : threads) t.join();
    at::set_num_threads(pool.intraOp);
    setBlasThreads(pool.blas);
    if (error) std::rethrow_exception(error);
}

}  // namespace kvlens
