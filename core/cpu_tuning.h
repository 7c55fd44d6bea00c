#pragma once
// Debian 12's OpenBLAS (0.3.21) does not recognise recent Xeon models nor the
// generic CPU model many virtual machines report, and falls back to its SSE3
// "Prescott" kernels although the CPU has AVX2/AVX-512: every matmul then
// runs 5-6x slower (measured: a training step of kvlens-tiny 4.4 s -> 0.9 s).
// OpenBLAS picks its kernels when it is loaded, before main(), and only
// OPENBLAS_CORETYPE in the environment changes that choice; so when the
// kernels are that old and the CPU is newer, the program runs itself again
// with OPENBLAS_CORETYPE set (SkylakeX with AVX-512, Haswell with AVX2).
// Nothing happens for OpenBLAS when OPENBLAS_CORETYPE is already set, when
// the BLAS is not OpenBLAS, or when the detection was right.
//
// The same restart sets OMP_WAIT_POLICY=PASSIVE (unless OMP_WAIT_POLICY or
// GOMP_SPINCOUNT is set): LibTorch's OpenMP threads otherwise spin between
// parallel regions, and whenever another process wants a core the spinning
// threads and the working ones take turns by whole scheduler slices. Measured
// on this 2-core machine with another job running (`kvlens-cli bench
// --context 2000 --policy window --threads 2`): a decode step 31.7 ms with
// the default policy, 1.9-3.1 ms passive. libgomp reads the variable when it
// is loaded, hence the restart. Where the kernel gives transparent huge
// pages on request, the restart also sets GLIBC_TUNABLES=glibc.malloc.hugetlb=1
// (unless GLIBC_TUNABLES is set, or KVLENS_MALLOC=default). KVLENS_TUNED
// marks the restarted process with what it changed ("blas", "omp", "thp",
// comma-separated).

namespace kvlens {

// Call first in main(); returns only when no restart was needed (or execv failed).
// The name is historical: it tunes OpenBLAS's kernels and OpenMP's waiting.
void restartWithTunedBlas(char** argv);
// glibc malloc settings that keep a decode step's buffers in the heap
// (cpu_tuning.cpp says why); restartWithTunedBlas() applies them first.
void tuneAllocator();

// OpenBLAS built with pthreads (Debian's libopenblas0-pthread) keeps a
// thread pool of its own, sized by OPENBLAS_NUM_THREADS (default: every
// core), which at::set_num_threads() does not reach: "--threads 1" still ran
// every large product on two threads, and two Session runs in parallel each
// handed their products to the same pool. These read and set that pool's
// size; blasThreads() is -1 (and setBlasThreads does nothing) when the BLAS
// is not OpenBLAS.
int blasThreads();
void setBlasThreads(int threads);

// The OpenBLAS core type this CPU should use ("SkylakeX", "Haswell"), or
// nullptr when the CPU has neither AVX-512 nor AVX2.
const char* preferredOpenBlasCore();

}  // namespace kvlens
