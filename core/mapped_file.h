#pragma once
// A whole file mapped read-only (the model readers: safetensors, GGUF).
// Header-only, torch-free: the fuzzers and torch-free tests compile the
// readers in directly.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.h"

namespace kvlens {

class MappedFile {
public:
    MappedFile() = default;
    // Maps `file`; FormatError naming it when it cannot be opened, is not a
    // regular file (a FIFO is refused, not waited on), or is shorter than
    // `minSize` bytes (`tooShort` says what it should hold). `expected`
    // names the format ("a GGUF file").
    MappedFile(const std::string& file, const std::string& expected, uint64_t minSize, const std::string& tooShort) {
        const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) throw FormatError(file, std::string("cannot open: ") + std::strerror(errno));
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            ::close(fd);
            throw FormatError(file, "not a regular file (a FIFO, device or folder): expected " + expected);
        }
        m_size = static_cast<uint64_t>(st.st_size);
        if (m_size < minSize) {
            ::close(fd);
            throw FormatError(file, "truncated: shorter than " + tooShort);
        }
        void* map = ::mmap(nullptr, m_size, PROT_READ, MAP_PRIVATE, fd, 0);
        const int mapErrno = errno;
        ::close(fd);
        if (map == MAP_FAILED) throw FormatError(file, std::string("cannot map: ") + std::strerror(mapErrno));
        m_map = map;
    }
    ~MappedFile() {
        if (m_map) ::munmap(m_map, m_size);
    }
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    MappedFile(MappedFile&& o) noexcept : m_map(o.m_map), m_size(o.m_size) { o.m_map = nullptr; }
    MappedFile& operator=(MappedFile&& o) noexcept {
        std::swap(m_map, o.m_map);
        std::swap(m_size, o.m_size);
        return *this;
    }

    const uint8_t* bytes() const { return static_cast<const uint8_t*>(m_map); }
    uint64_t size() const { return m_size; }

private:
    void* m_map = nullptr;
    uint64_t m_size = 0;
};

}  // namespace kvlens
