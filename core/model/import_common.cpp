#include "core/model/import_common.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <cstring>
#include <string>
#include <system_error>

#include "core/error.h"
#include "core/safe_file.h"

namespace kvlens {
namespace fs = std::filesystem;

StagingFolder::StagingFolder(const fs::path& out) : m_out(out) {
    std::error_code ec;
    if (fs::exists(out, ec)) {
        if (!fs::is_directory(out, ec) || !fs::is_empty(out, ec))
            throw ArgumentError(out.string() + " already exists and is not an empty folder; name a new folder for "
                                               "the imported model (nothing was written)");
    }
    const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
    const std::string prefix = "." + out.filename().string() + ".import-";
    // Staging folders of imports into the same OUT_DIR whose process is gone
    // (killed, crashed) hold gigabytes nobody will use: removed.
    for (const auto& entry : fs::directory_iterator(parent, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.compare(0, prefix.size(), prefix) != 0) continue;
        const std::string pid = name.substr(prefix.size());
        if (pid.empty() || pid.size() > 18 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
        const long long id = std::stoll(pid);
        if (id > 0 && id != ::getpid() && (id > INT32_MAX || (::kill(static_cast<pid_t>(id), 0) != 0 && errno == ESRCH)))
            fs::remove_all(entry.path(), ec);
    }
    m_dir = parent / (prefix + std::to_string(::getpid()));
    fs::remove_all(m_dir, ec);
    if (!fs::create_directories(m_dir, ec) || ec)
        throw IoError(out.string() + ": cannot create a folder beside it (" + ec.message() + ")");
}

StagingFolder::~StagingFolder() {
    std::error_code ec;
    if (!m_committed) fs::remove_all(m_dir, ec);
}

void StagingFolder::commit() {
    std::error_code ec;
    if (fs::exists(m_out, ec)) fs::remove(m_out, ec);  // an empty folder (checked above)
    fs::rename(m_dir, m_out, ec);
    if (ec) throw IoError(m_out.string() + ": cannot move the imported model into place (" + ec.message() + ")");
    m_committed = true;
}

std::vector<float> toRotatedHalves(const std::vector<float>& w, int64_t heads, int64_t rows, int64_t cols) {
    const int64_t D = rows / heads;
    std::vector<float> out(w.size());
    for (int64_t h = 0; h < heads; ++h)
        for (int64_t j = 0; j < D / 2; ++j)
            for (int64_t p = 0; p < 2; ++p)
                std::memcpy(&out[static_cast<size_t>((h * D + p * (D / 2) + j) * cols)],
                            &w[static_cast<size_t>((h * D + 2 * j + p) * cols)], static_cast<size_t>(cols) * sizeof(float));
    return out;
}

}  // namespace kvlens
