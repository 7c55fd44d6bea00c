#include "core/safe_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>

namespace kvlens {
namespace fs = std::filesystem;

namespace {

std::string reason(int err) { return std::strerror(err); }

[[noreturn]] void fail(const fs::path& file, int err) {
    throw IoError("cannot write " + file.string() + ": " + reason(err));
}

// A name no other writer uses: ".NAME.kvlens-XXXXXXXX" beside the target.
fs::path temporaryName(const fs::path& target, uint64_t salt) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    char suffix[24];
    std::snprintf(suffix, sizeof suffix, "%08llx", static_cast<unsigned long long>((rng() ^ salt) & 0xffffffffULL));
    return target.parent_path() / ("." + target.filename().string() + ".kvlens-" + suffix);
}

}  // namespace

AtomicFile::AtomicFile(fs::path target) : m_target(std::move(target)) {
    std::error_code ec;
    if (m_target.empty()) throw IoError("cannot write: no file name given");
    if (fs::is_symlink(m_target, ec) && fs::exists(m_target, ec)) m_target = fs::canonical(m_target, ec);
    const fs::file_status st = fs::status(m_target, ec);
    if (fs::is_directory(st)) throw IoError("cannot write " + m_target.string() + ": it is a folder");
    if (fs::exists(st) && !fs::is_regular_file(st)) {
        // A device or a pipe the user named (/dev/stdout, a FIFO): written
        // directly, every write checked. Never replaced by a rename.
        m_fd = ::open(m_target.c_str(), O_WRONLY | O_CLOEXEC);
        if (m_fd < 0) fail(m_target, errno);
        return;
    }
    if (m_target.filename().empty()) throw IoError("cannot write " + m_target.string() + ": not a file name");
    const fs::path dir = m_target.parent_path().empty() ? fs::path(".") : m_target.parent_path();
    if (!fs::is_directory(dir, ec))
        throw IoError("cannot write " + m_target.string() + ": the folder " + dir.string() + " does not exist");
    for (uint64_t attempt = 0; attempt < 64 && m_fd < 0; ++attempt) {
        m_tmp = temporaryName(m_target, attempt);
        // 0666 less the umask, as a plain open would create it.
        m_fd = ::open(m_tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (m_fd < 0 && errno != EEXIST) {
            const int err = errno;
            m_tmp.clear();
            fail(m_target, err);
        }
    }
    if (m_fd < 0) throw IoError("cannot write " + m_target.string() + ": no free temporary name beside it");
    struct stat old {};
    if (::stat(m_target.c_str(), &old) == 0) (void)::fchmod(m_fd, old.st_mode & 07777);  // keep the file's mode
}

AtomicFile::~AtomicFile() {
    if (m_fd >= 0) ::close(m_fd);
    if (!m_committed && !m_tmp.empty()) ::unlink(m_tmp.c_str());
}

void AtomicFile::write(const void* data, size_t bytes) {
    if (m_fd < 0) throw IoError("cannot write " + m_target.string() + ": the file is closed");
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
        const ssize_t n = ::write(m_fd, p, bytes);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail(m_target, errno);
        }
        p += n;
        bytes -= static_cast<size_t>(n);
    }
}

void AtomicFile::commit() {
    if (m_committed) return;
    if (m_fd < 0) throw IoError("cannot write " + m_target.string() + ": the file is closed");
    const bool direct = m_tmp.empty();
    // Devices and pipes cannot be synced (EINVAL); regular files must be.
    if (::fsync(m_fd) != 0 && !(direct && (errno == EINVAL || errno == EROFS || errno == ENOTSUP)))
        fail(m_target, errno);
    const int fd = m_fd;
    m_fd = -1;
    if (::close(fd) != 0 && errno != EINTR) fail(m_target, errno);
    if (!direct) {
        if (::rename(m_tmp.c_str(), m_target.c_str()) != 0) fail(m_target, errno);
        // The rename itself survives a crash once the folder is synced (best effort).
        const fs::path dir = m_target.parent_path().empty() ? fs::path(".") : m_target.parent_path();
        const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)::fsync(dfd);
            ::close(dfd);
        }
    }
    m_committed = true;
}

void writeFileAtomically(const fs::path& file, std::string_view bytes) {
    AtomicFile out(file);
    out.write(bytes);
    out.commit();
}

void checkStdout() {
    std::cout.flush();
    errno = 0;
    const bool flushed = std::fflush(stdout) == 0;
    const int err = errno;
    if (flushed && !std::ferror(stdout) && std::cout.good()) return;
    std::clearerr(stdout);  // report once
    throw IoError(std::string("cannot write to standard output") + (err ? ": " + reason(err) : " (output lost)"));
}

OutputGuard::Entry OutputGuard::entry(const fs::path& file, const std::string& flag) {
    Entry e;
    e.path = file;
    e.flag = flag;
    std::error_code ec;
    e.resolved = fs::weakly_canonical(fs::absolute(file, ec), ec);
    if (ec) e.resolved = fs::absolute(file, ec).lexically_normal();
    struct stat st {};
    if (::stat(file.c_str(), &st) == 0) {
        e.known = true;
        e.id = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
    }
    return e;
}

void OutputGuard::input(const fs::path& file) {
    if (file.empty() || file == "-") return;
    Entry e = entry(file, "");
    if (e.known) m_inputs.push_back(std::move(e));
}

void OutputGuard::inputFolder(const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return input(dir);
    m_folders.push_back(entry(dir, ""));
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->is_regular_file(ec)) input(it->path());
}

const fs::path& OutputGuard::output(const fs::path& file, const std::string& flag) {
    if (file == "-") return file;
    Entry e = entry(file, flag);
    const std::string what = flag.empty() ? file.string() : flag + " " + file.string();
    auto same = [&](const Entry& o) { return (e.known && o.known && e.id == o.id) || e.resolved == o.resolved; };
    for (const Entry& in : m_inputs)
        if (same(in))
            throw ArgumentError(what + ": this command reads that file (" + in.path.string() +
                                "); writing it would destroy it: choose another output");
    for (const Entry& dir : m_folders) {
        const auto rel = e.resolved.lexically_relative(dir.resolved);
        if (!rel.empty() && *rel.begin() != "..")
            throw ArgumentError(what + ": inside the model folder " + dir.path.string() +
                                ", which this command reads: write outside it");
    }
    for (const Entry& out : m_outputs)
        if (same(out))
            throw ArgumentError(what + ": the same file as " + (out.flag.empty() ? out.path.string() : out.flag + " " + out.path.string()) +
                                "; give each output its own file");
    m_outputs.push_back(std::move(e));
    return file;
}

}  // namespace kvlens
