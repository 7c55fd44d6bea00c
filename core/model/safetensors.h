#pragma once
// Safetensors reader (memory-mapped, header fully validated before any tensor
// is touched) and writer. Torch-free: the conversion to tensors lives in
// weights.cpp.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"

namespace kvlens {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, Bool };

const char* dtypeName(DType d);
size_t dtypeSize(DType d);

struct TensorInfo {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    uint64_t begin = 0;  // byte offsets into the data section
    uint64_t end = 0;
    int64_t numel() const;
};

class SafetensorsFile {
public:
    // Throws FormatError naming the file (and tensor) when the file is
    // truncated, the header is not JSON, or an entry lies about its size or
    // offsets.
    static std::unique_ptr<SafetensorsFile> open(const std::filesystem::path& path);
    ~SafetensorsFile();
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    const std::string& path() const { return m_path; }
    const std::vector<TensorInfo>& tensors() const { return m_tensors; }
    const TensorInfo* find(const std::string& name) const;
    const std::map<std::string, std::string>& metadata() const { return m_metadata; }
    // Start of a tensor's bytes (valid while this object lives).
    const uint8_t* data(const TensorInfo& t) const { return m_data + t.begin; }

    // Parses a header held in memory. dataSize is the number of bytes that
    // follow the header.
    static std::vector<TensorInfo> parseHeader(const std::string& header, uint64_t dataSize,
                                               const std::string& file,
                                               std::map<std::string, std::string>* metadata);
    // Parses a whole file held in memory (length prefix, header, data bounds;
    // used by open() and by the fuzzer). *dataOffset receives where the data
    // section starts.
    static std::vector<TensorInfo> parseBytes(const uint8_t* bytes, uint64_t size, const std::string& file,
                                              std::map<std::string, std::string>* metadata,
                                              uint64_t* dataOffset);

private:
    SafetensorsFile() = default;
    std::string m_path;
    std::vector<TensorInfo> m_tensors;
    std::map<std::string, std::string> m_metadata;
    MappedFile m_map;
    const uint8_t* m_data = nullptr;
};

// The shard file names of a model.safetensors.index.json (its "weight_map"
// values, first appearance order). Throws FormatError naming `file` when the
// text is not JSON, has no weight_map, or names a path outside the directory.
std::vector<std::string> parseSafetensorsIndex(const std::string& jsonText, const std::string& file);

struct TensorBlob {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    const void* data = nullptr;  // numel * dtypeSize bytes
};

// Writes tensors in the order given (the format stores them sorted by offset).
void writeSafetensors(const std::filesystem::path& path, const std::vector<TensorBlob>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace kvlens
