#include "core/run/parallel_runs.h"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kvlens {

void runInParallel(size_t jobs, size_t workers, const std::function<void(size_t, const std::atomic<bool>&)>& run) {
    std::atomic<bool> stop{false};
    if (workers <= 1 || jobs <= 1) {
        for (size_t i = 0; i < jobs; ++i) run(i, stop);
        return;
    }
    // Each worker runs its ops on one thread: with OpenMP every thread that
    // enters a parallel region brings its own team, so W workers at the
    // default would spin W x N threads on N cores.
    const int intraOp = at::get_num_threads();
    at::set_num_threads(1);
    std::atomic<size_t> next{0};
    std::exception_ptr error;
    std::mutex errorMutex;
    const bool gradEnabled = at::GradMode::is_enabled();
    auto work = [&] {
        at::AutoGradMode gradMode(gradEnabled);  // grad mode is thread-local
        at::set_num_threads(1);                  // this thread's OpenMP team size
        for (size_t i = next++; i < jobs && !stop.load(); i = next++) {
            try {
                run(i, stop);
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
    at::set_num_threads(intraOp);
    if (error) std::rethrow_exception(error);
}

}  // namespace kvlens
