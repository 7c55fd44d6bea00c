#pragma once
// GGUF files (llama.cpp's model format), read in place. Torch-free.
//
// A GGUF file is: magic "GGUF", a uint32 version (2 or 3), the tensor count
// and metadata count (uint64), the metadata key/value pairs, the tensor
// infos (name, dims in ggml order, ggml type, offset), padding to the
// alignment (metadata "general.alignment", default 32), then the tensor data.
// Every field is validated before any tensor is touched; a malformed file
// throws FormatError naming the file and what is wrong (the key, the tensor,
// the offset) and what was expected.
//
// dequantize() turns the blocks of the common ggml types into f32 exactly as
// ggml's reference dequantisers do (ggml-quants.c: dequantize_row_*).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"

namespace kvlens {

// ggml's type ids (ggml.h: enum ggml_type). Only those named here are
// dequantised; a tensor of another type is refused by name.
enum class GgmlType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, BF16 = 30,
};

// "Q4_K", "F16", ...; "type 23" for an id not in the enum.
std::string ggmlTypeName(uint32_t type);
// Elements per block and bytes per block; false for a type we cannot read.
bool ggmlBlockLayout(uint32_t type, int64_t* blockElements, uint64_t* blockBytes);

// A metadata value (GGUF value types 0-12). Arrays hold their elements as
// values of the array's element type (nested arrays allowed).
struct GgufValue {
    enum class Type : uint32_t {
        U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
        String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
    };
    Type type = Type::U32;
    uint64_t u = 0;     // U8..U64, Bool
    int64_t i = 0;      // I8..I64
    double f = 0;       // F32, F64
    std::string s;      // String
    Type elementType = Type::U8;        // Array
    std::vector<GgufValue> elements;    // Array

    bool isInteger() const;
    bool isFloat() const { return type == Type::F32 || type == Type::F64; }
};

const char* ggufValueTypeName(GgufValue::Type t);
// "a uint32", "an array of string": for error messages.
std::string ggufValueDescription(const GgufValue& v);

struct GgufTensorInfo {
    std::string name;
    std::vector<int64_t> dims;  // ggml order: dims[0] varies fastest
    uint32_t type = 0;          // GgmlType
    uint64_t offset = 0;        // from the start of the data section
    uint64_t bytes = 0;         // numel / block elements x block bytes
    int64_t numel() const;
    // Row-major shape (dims reversed), as safetensors and torch store it.
    std::vector<int64_t> shape() const;
};

struct GgufContents {
    uint32_t version = 0;
    uint64_t alignment = 32;
    std::map<std::string, GgufValue> metadata;
    std::vector<GgufTensorInfo> tensors;  // file order
    uint64_t dataOffset = 0;              // start of the data section in the file
};

class GgufFile {
public:
    // Maps the file and parses it (parse()). Throws FormatError naming the
    // file.
    static std::unique_ptr<GgufFile> open(const std::filesystem::path& path);
    ~GgufFile();
    GgufFile(const GgufFile&) = delete;
    GgufFile& operator=(const GgufFile&) = delete;

    // Parses a whole file held in memory: header, metadata, tensor infos,
    // alignment, and checks that every tensor's bytes lie inside the data
    // section, are aligned, and do not overlap. Used by open() and by the
    // fuzzer. Throws FormatError naming `file`.
    static GgufContents parse(const uint8_t* bytes, uint64_t size, const std::string& file);

    const std::string& path() const { return m_path; }
    const GgufContents& contents() const { return m_contents; }
    const std::map<std::string, GgufValue>& metadata() const { return m_contents.metadata; }
    const std::vector<GgufTensorInfo>& tensors() const { return m_contents.tensors; }
    const GgufTensorInfo* find(const std::string& name) const;
    const GgufValue* value(const std::string& key) const;  // nullptr when absent
    // Start of a tensor's bytes (valid while this object lives).
    const uint8_t* data(const GgufTensorInfo& t) const { return m_bytes + m_contents.dataOffset + t.offset; }

    // Typed metadata: each throws FormatError naming the file, the key and
    // the type expected when the key is absent or of another type.
    std::string string(const std::string& key) const;
    int64_t integer(const std::string& key) const;   // any integer type
    double number(const std::string& key) const;     // any integer or float type
    std::vector<std::string> strings(const std::string& key) const;  // array of strings
    std::vector<double> numbers(const std::string& key) const;       // array of numbers

private:
    GgufFile() = default;
    std::string m_path;
    GgufContents m_contents;
    MappedFile m_map;
    const uint8_t* m_bytes = nullptr;
};

// Dequantises `numel` elements (a whole number of blocks) of ggml type
// `type` at `src` into `out`, exactly as ggml's dequantize_row_* do.
// Throws FormatError naming `what` for a type that is not supported or a
// numel that is not a whole number of blocks.
void dequantize(uint32_t type, const uint8_t* src, int64_t numel, float* out, const std::string& what);

// IEEE half and bfloat16 to float, as ggml converts them. (A signalling NaN
// half keeps its bits, as numpy and gguf-py convert it; ggml sets its quiet bit.)
float halfToFloat(uint16_t h);
float bf16ToFloat(uint16_t b);

}  // namespace kvlens
