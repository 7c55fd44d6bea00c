#pragma once
// Debian 12's OpenBLAS (0.3.21) does not recognise recent Xeon models nor the
// generic CPU model many virtual machines report, and falls back to its SSE3
// "Prescott" kernels although the CPU has AVX2/AVX-512: every matmul then
// runs 5-6x slower (measured: a training step of kvlens-tiny 4.4 s -> 0.9 s).
// OpenBLAS picks its kernels when it is loaded, before main(), and only
// OPENBLAS_CORETYPE in the environment changes that choice; so when the
// kernels are that old and the CPU is newer, the program runs itself again
// with OPENBLAS_CORETYPE set (SkylakeX with AVX-512, Haswell with AVX2).
// Nothing happens when OPENBLAS_CORETYPE is already set, when the BLAS is
// not OpenBLAS, or when the detection was right.

namespace kvlens {

// Call first in main(); returns only when no restart was needed (or execv failed).
void restartWithTunedBlas(char** argv);

// The OpenBLAS core type this CPU should use ("SkylakeX", "Haswell"), or
// nullptr when the CPU has neither AVX-512 nor AVX2.
const char* preferredOpenBlasCore();

}  // namespace kvlens
