#include "tests/support/scratch_dir.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>

namespace kvlens::test {
namespace fs = std::filesystem;

fs::path ScratchDir::root() {
    if (const char* e = std::getenv("KVLENS_TEST_TMP"); e && *e) return e;
    if (const char* e = std::getenv("KVLENS_TEST_TMP_DEFAULT"); e && *e) return e;
    return fs::temp_directory_path() / "kvlens-test";
}

ScratchDir::ScratchDir(const std::string& name) {
    static std::atomic<int> counter{0};
    m_path = root() / (name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(m_path);
    fs::create_directories(m_path);
}

ScratchDir::~ScratchDir() {
    std::error_code ec;
    fs::remove_all(m_path, ec);
}

}  // namespace kvlens::test
