#pragma once
// What every importer (llama2.c, GGUF) shares: the staging folder that
// writes an imported model whole or not at all, and the reordering of Q/K
// rows from interleaved RoPE pairs to Hugging Face's rotated halves.
// Torch-free.
#include <cstdint>
#include <filesystem>
#include <vector>

namespace kvlens {

// A staging folder beside OUT_DIR, renamed into place by commit() and
// removed unless committed. OUT_DIR must not exist or be an empty folder
// (nothing the user has is written over): otherwise ArgumentError, before
// anything is written. IoError when the folder cannot be made or moved. The
// staging folders an earlier import into the same OUT_DIR left behind when
// its process died are removed.
class StagingFolder {
public:
    explicit StagingFolder(const std::filesystem::path& out);
    ~StagingFolder();
    StagingFolder(const StagingFolder&) = delete;
    StagingFolder& operator=(const StagingFolder&) = delete;
    const std::filesystem::path& dir() const { return m_dir; }
    void commit();

private:
    std::filesystem::path m_out, m_dir;
    bool m_committed = false;
};

// llama2.c's export and llama.cpp's converter store each head's Q/K rows
// with RoPE's pairs interleaved ((0,1), (2,3), ...); HF rotates the halves
// (i, i + D/2). Row 2j + p of a head of D rows goes to row p·D/2 + j.
// `w` is rows x cols, row-major; rows = heads x D.
std::vector<float> toRotatedHalves(const std::vector<float>& w, int64_t heads, int64_t rows, int64_t cols);

}  // namespace kvlens
