#include "core/cpu_tuning.h"

#include <dlfcn.h>
#include <malloc.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <string>

namespace kvlens {

const char* preferredOpenBlasCore() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return nullptr;
}

int blasThreads() {
    using Get = int (*)();
    static const auto get = reinterpret_cast<Get>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    return get ? get() : -1;
}

void setBlasThreads(int threads) {
    using Set = void (*)(int);
    static const auto set = reinterpret_cast<Set>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    if (set && threads > 0) set(threads);
}

namespace {

// True when OpenBLAS runs its pre-AVX fallback kernels on a CPU that has AVX2
// or AVX-512 (and sets `target` to the core type to ask for).
bool blasNeedsCoreType(const char** target) {
    if (std::getenv("OPENBLAS_CORETYPE")) return false;
    using CoreName = const char* (*)();
    auto coreName = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
    if (!coreName || !coreName()) return false;
    std::string core = coreName();
    for (char& c : core) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    // The fallbacks OpenBLAS chooses for CPUs it does not know (pre-AVX cores).
    static const char* const old[] = {"prescott", "core2", "nehalem", "penryn", "dunnington", "atom", "northwood"};
    bool fallback = false;
    for (const char* o : old) fallback = fallback || core == o;
    *target = preferredOpenBlasCore();
    return fallback && *target;
}

// True when the kernel gives transparent huge pages only where a program
// asks (madvise mode, the default of most distributions).
bool hugePagesOnRequest() {
    FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return false;
    char line[128] = {};
    const bool read = std::fgets(line, sizeof line, f) != nullptr;
    std::fclose(f);
    return read && std::strstr(line, "[madvise]") != nullptr;
}

}  // namespace

void tuneAllocator() {
    // glibc hands freed blocks above its mmap threshold (dynamic, from 128
    // KiB) back to the kernel and trims the heap's top above 128 KiB, so a
    // decode step's tensors of a real-size model (logits, MLP activations,
    // the cache's growth) were mapped and faulted in afresh every step:
    // bench --quick at 1 thread took 4.5 M minor page faults and 9 s of
    // system time. Below 32 MiB (glibc's largest threshold on 64-bit)
    // blocks now come from the heap and go back to it, which is trimmed only
    // when 1 GiB lies free at its top. KVLENS_MALLOC=default keeps glibc's.
    if (const char* m = std::getenv("KVLENS_MALLOC"); m && std::string(m) == "default") return;
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
    mallopt(M_TOP_PAD, 16 * 1024 * 1024);
}

void restartWithTunedBlas(char** argv) {
    tuneAllocator();  // in every process, the restarted one too
    if (std::getenv("KVLENS_TUNED")) return;  // this process is the restarted one
    const char* target = nullptr;
    const bool blas = blasNeedsCoreType(&target);
    const bool waitPolicy = !std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT") &&
                            dlsym(RTLD_DEFAULT, "omp_get_max_threads");
    // glibc asks for transparent huge pages for its heap and its mapped
    // blocks (the weights, a step's buffers) when this tunable is set at
    // start-up: one page fault per 2 MiB instead of per 4 KiB, fewer TLB
    // misses while the weights stream through. Measured with a model of
    // SmolLM2-135M's shape read from disk (`compare`, full + streaming, h2o,
    // snapkv at 25 %, 512-token prompt, 16 steps, 2 threads, three runs each,
    // alternating): wall 6.22-6.36 s -> 5.25-5.45 s, minor faults 264 K -> 50 K.
    const char* malloc = std::getenv("KVLENS_MALLOC");
    const bool hugePages = !std::getenv("GLIBC_TUNABLES") && !(malloc && std::string(malloc) == "default") &&
                           hugePagesOnRequest();
    if (!blas && !waitPolicy && !hugePages) return;
    std::string changed;
    auto mark = [&](const char* what) { changed += (changed.empty() ? "" : ",") + std::string(what); };
    if (blas) setenv("OPENBLAS_CORETYPE", target, 1), mark("blas");
    if (waitPolicy) setenv("OMP_WAIT_POLICY", "PASSIVE", 1), mark("omp");
    if (hugePages) setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1), mark("thp");
    setenv("KVLENS_TUNED", changed.c_str(), 1);  // what was changed
    execv("/proc/self/exe", argv);  // only returns on failure: run on untuned
}

}  // namespace kvlens
