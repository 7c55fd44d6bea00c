#include "core/model/weights.h"

#include <ATen/ATen.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/read_file.h"

namespace kvlens {
namespace fs = std::filesystem;

at::ScalarType toScalarType(DType d) {
    switch (d) {
        case DType::F64: return at::kDouble;
        case DType::F32: return at::kFloat;
        case DType::F16: return at::kHalf;
        case DType::BF16: return at::kBFloat16;
        case DType::I64: return at::kLong;
        case DType::I32: return at::kInt;
        case DType::I16: return at::kShort;
        case DType::I8: return at::kChar;
        case DType::U8: return at::kByte;
        case DType::Bool: return at::kBool;
    }
    return at::kFloat;
}

namespace {

std::vector<std::string> shardsFromIndex(const fs::path& indexPath) {
    return parseSafetensorsIndex(readRegularFile(indexPath), indexPath.string());
}

std::string shapeString(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

}  // namespace

WeightStore WeightStore::open(const fs::path& dir) {
    WeightStore ws;
    std::vector<std::string> shards;
    if (fs::exists(dir / "model.safetensors")) {
        shards = {"model.safetensors"};
    } else if (fs::exists(dir / "model.safetensors.index.json")) {
        shards = shardsFromIndex(dir / "model.safetensors.index.json");
    } else {
        throw FormatError(dir.string(), "no model.safetensors or model.safetensors.index.json in the model directory");
    }
    for (const auto& s : shards) {
        auto file = std::shared_ptr<SafetensorsFile>(SafetensorsFile::open(dir / s));
        for (const auto& t : file->tensors()) {
            if (ws.m_index.count(t.name))
                throw FormatError(file->path(), "tensor '" + t.name + "' also appears in " +
                                                    ws.m_index[t.name].file->path());
            ws.m_index[t.name] = Entry{file.get(), &t};
        }
        ws.m_fileNames.push_back(file->path());
        ws.m_files.push_back(std::move(file));
    }
    return ws;
}

std::vector<std::string> WeightStore::names() const {
    std::vector<std::string> out;
    for (const auto& [n, e] : m_index) out.push_back(n);
    return out;
}

at::Tensor WeightStore::get(const std::string& name, const std::vector<int64_t>& shape, at::ScalarType dtype,
                            at::Device device) const {
    auto it = m_index.find(name);
    if (it == m_index.end())
        throw ModelError("missing tensor '" + name + "' (model files: " +
                         (m_fileNames.empty() ? std::string("none") : m_fileNames.front()) +
                         (m_fileNames.size() > 1 ? " …" : "") + ")");
    const auto& [file, info] = it->second;
    if (info->shape != shape)
        throw ModelError(file->path() + ": tensor '" + name + "' has shape " + shapeString(info->shape) +
                         ", expected " + shapeString(shape) + " from config.json");
    if (info->dtype != DType::F32 && info->dtype != DType::F16 && info->dtype != DType::BF16 &&
        info->dtype != DType::F64)
        throw ModelError(file->path() + ": tensor '" + name + "' has dtype " + dtypeName(info->dtype) +
                         "; weights must be F32, F16, BF16 or F64");
    // from_blob wraps the read-only mapping; the copy below owns its memory.
    at::Tensor raw = at::from_blob(const_cast<uint8_t*>(file->data(*info)), info->shape,
                                   at::TensorOptions().dtype(toScalarType(info->dtype)));
    return raw.to(device, dtype, /*non_blocking=*/false, /*copy=*/true).contiguous();
}

}  // namespace kvlens
