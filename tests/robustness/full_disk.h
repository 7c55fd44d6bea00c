#pragma once
// A small filesystem that can be filled: a 64 KiB tmpfs mounted on a scratch
// folder (root only; CI runs as root). Where mounting is not allowed (not
// root, a container without CAP_SYS_ADMIN) mounted() is false and whyNot()
// says why, for GTEST_SKIP.
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "tests/support/test_models.h"

namespace kvlens::test {

class FullDisk {
public:
    explicit FullDisk(const std::string& name) : m_dir(name) {
        if (::mount("tmpfs", m_dir.path().c_str(), "tmpfs", 0, "size=64k") == 0)
            m_mounted = true;
        else
            m_why = std::string("cannot mount a small tmpfs to fill (") + std::strerror(errno) +
                    "): the full-disk case needs root";
    }
    ~FullDisk() {
        if (m_mounted) ::umount2(m_dir.path().c_str(), MNT_DETACH);
    }
    FullDisk(const FullDisk&) = delete;
    FullDisk& operator=(const FullDisk&) = delete;

    bool mounted() const { return m_mounted; }
    const std::string& whyNot() const { return m_why; }
    const std::filesystem::path& path() const { return m_dir.path(); }
    // Writes a filler file until the filesystem is full.
    void fill() const {
        std::ofstream out(m_dir.path() / "filler", std::ios::binary);
        const std::string block(4096, 'f');
        for (int i = 0; i < 64 && out; ++i) out.write(block.data(), static_cast<std::streamsize>(block.size())), out.flush();
    }

private:
    ScratchDir m_dir;
    bool m_mounted = false;
    std::string m_why;
};

}  // namespace kvlens::test
