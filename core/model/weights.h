#pragma once
// WeightStore: the tensors of an HF model directory (model.safetensors or a
// sharded model.safetensors.index.json), converted on request to the run
// dtype and device with their shapes checked. Internal to core (uses ATen).
#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model/safetensors.h"

namespace kvlens {

class WeightStore {
public:
    // Throws FormatError when no weights file exists or one is malformed.
    static WeightStore open(const std::filesystem::path& modelDir);

    bool has(const std::string& name) const { return m_index.count(name) != 0; }
    std::vector<std::string> names() const;
    // The tensor `name`, checked against `shape`, as `dtype` on `device`.
    // Throws ModelError naming the file and tensor when missing or mis-shaped.
    at::Tensor get(const std::string& name, const std::vector<int64_t>& shape, at::ScalarType dtype,
                   at::Device device) const;
    const std::vector<std::string>& files() const { return m_fileNames; }

private:
    struct Entry {
        const SafetensorsFile* file;
        const TensorInfo* info;
    };
    std::vector<std::shared_ptr<SafetensorsFile>> m_files;
    std::vector<std::string> m_fileNames;
    std::map<std::string, Entry> m_index;
};

at::ScalarType toScalarType(DType d);

}  // namespace kvlens
