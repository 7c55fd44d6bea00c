#pragma once
// Out-of-memory as a clear error: LibTorch reports a failed allocation as a
// c10::Error (CPU allocator) or c10::OutOfMemoryError (CUDA), std::vector as
// std::bad_alloc. Torch-free header.
#include <string>

namespace kvlens {

// Call from a catch (...) block: rethrows the exception in flight, a failed
// allocation turned into MemoryError naming `doing` ("reading a prompt of
// 200000 tokens") and the bytes asked for; anything else unchanged. A CUDA
// out-of-memory also gives the caching allocator's unused blocks back, so
// that the app goes on with a smaller request.
[[noreturn]] void rethrowAllocationFailure(const std::string& doing);

}  // namespace kvlens
