#pragma once
// A scratch folder for the files a test writes (torch-free; every test
// executable may link it through kvlens_test_files).
#include <filesystem>
#include <string>

namespace kvlens::test {

// A scratch folder: $KVLENS_TEST_TMP (or the
// KVLENS_TEST_TMP macro of the test executable) / <name>-<pid>-<n>, created
// empty and removed on destruction.
class ScratchDir {
public:
    explicit ScratchDir(const std::string& name);
    ~ScratchDir();
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    const std::filesystem::path& path() const { return m_path; }
    std::filesystem::path operator/(const std::string& sub) const { return m_path / sub; }

    static std::filesystem::path root();

private:
    std::filesystem::path m_path;
};

}  // namespace kvlens::test
