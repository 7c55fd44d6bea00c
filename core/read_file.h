#pragma once
// Reading a file the user named as an input: only a regular file is read (a
// folder is refused, and so is a FIFO or a device, which would block or never
// end), and no more than `maxBytes` of it. Header-only (std + POSIX) so that
// the tokenizer library, which links nothing of core, uses it too.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/error.h"

namespace kvlens {

inline constexpr uint64_t kMaxInputFileBytes = 1ull << 30;  // 1 GiB: no JSON or text input of ours is near it

// Throws FormatError naming `file` (what is wrong, e.g. "not a regular file (a FIFO)").
inline std::string readRegularFile(const std::filesystem::path& file, uint64_t maxBytes = kMaxInputFileBytes) {
    // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever.
    const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw FormatError(file.string(), std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const mode_t m = st.st_mode;
        ::close(fd);
        const char* kind = S_ISDIR(m) ? "a folder" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) || S_ISBLK(m) ? "a device" : "not a file";
        throw FormatError(file.string(), std::string("not a regular file (") + kind + "): expected a file to read");
    }
    if (static_cast<uint64_t>(st.st_size) > maxBytes) {
        ::close(fd);
        throw FormatError(file.string(), "larger than " + std::to_string(maxBytes >> 20) + " MiB (" +
                                             std::to_string(st.st_size) + " bytes): not an input this reads");
    }
    std::string out(static_cast<size_t>(st.st_size), '\0');
    size_t done = 0;
    while (done < out.size()) {
        const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int err = errno;
            ::close(fd);
            throw FormatError(file.string(), std::string("cannot read: ") + std::strerror(err));
        }
        if (n == 0) break;  // shrank while read
        done += static_cast<size_t>(n);
    }
    ::close(fd);
    out.resize(done);
    return out;
}

}  // namespace kvlens
