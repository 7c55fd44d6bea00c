#pragma once
// Writes that never lose what the user has: every file KVLens writes goes to
// a temporary file in the same directory, is flushed, synced and checked, and
// only then renamed over the target. A failed write (full disk, /dev/full, a
// read-only folder) throws an IoError naming the file and leaves the old file
// as it was. Torch-free and Qt-free (kvlens_base): core, the CLI and the GUI
// write through it (Qt writers too, through widgets/save_file.h).
//
// OutputGuard holds one command's inputs and outputs by file identity
// (device + inode, so a symlink or a hard link is the same file): an output
// that is one of the inputs, lies in a model folder being read, or repeats
// another output is refused before anything is written.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace kvlens {

// A file could not be written (or a write would destroy something).
class IoError : public Error {
public:
    using Error::Error;
};

class AtomicFile {
public:
    // Creates the temporary file beside `target` (a symlink target is
    // written through the link). Throws IoError naming `target`.
    explicit AtomicFile(std::filesystem::path target);
    ~AtomicFile();  // removes the temporary file unless committed
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(const void* data, size_t bytes);
    void write(std::string_view text) { write(text.data(), text.size()); }
    // Syncs, closes and renames into place; throws IoError on any failure.
    void commit();
    const std::filesystem::path& target() const { return m_target; }

private:
    std::filesystem::path m_target, m_tmp;
    int m_fd = -1;
    bool m_committed = false;
};

// The whole of `bytes` into `file`, atomically (AtomicFile).
void writeFileAtomically(const std::filesystem::path& file, std::string_view bytes);

// Flushes stdout; throws IoError when anything written to it was lost
// (stdout on a full disk, /dev/full, a closed pipe).
void checkStdout();

class OutputGuard {
public:
    // A file the command reads (ignored when it does not exist).
    void input(const std::filesystem::path& file);
    // A model folder the command reads: every file in it is an input, and no
    // output may be written inside it.
    void inputFolder(const std::filesystem::path& dir);
    // Refuses (ArgumentError naming `flag` and the file) an output that is an
    // input, lies in an input folder, or is the target of an earlier output.
    // "-" (stdout) is never refused. Returns `file`.
    const std::filesystem::path& output(const std::filesystem::path& file, const std::string& flag);

private:
    struct Identity {
        uint64_t device = 0, inode = 0;
        bool operator==(const Identity& o) const { return device == o.device && inode == o.inode; }
    };
    struct Entry {
        std::filesystem::path path;  // as given, for messages
        std::filesystem::path resolved;  // weakly canonical
        bool known = false;              // the file exists: identity is set
        Identity id;
        std::string flag;
    };
    std::vector<Entry> m_inputs, m_folders, m_outputs;
    static Entry entry(const std::filesystem::path& file, const std::string& flag);
};

}  // namespace kvlens
