#include "core/cpu_tuning.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cctype>
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

void restartWithTunedBlas(char** argv) {
    if (std::getenv("OPENBLAS_CORETYPE")) return;
    using CoreName = const char* (*)();
    auto coreName = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
    if (!coreName || !coreName()) return;
    std::string core = coreName();
    for (char& c : core) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    // The fallbacks OpenBLAS chooses for CPUs it does not know (pre-AVX cores).
    static const char* const old[] = {"prescott", "core2", "nehalem", "penryn", "dunnington", "atom", "northwood"};
    bool fallback = false;
    for (const char* o : old) fallback = fallback || core == o;
    const char* target = preferredOpenBlasCore();
    if (!fallback || !target) return;
    setenv("OPENBLAS_CORETYPE", target, 1);
    execv("/proc/self/exe", argv);  // only returns on failure: run on with the slow kernels
}

}  // namespace kvlens
