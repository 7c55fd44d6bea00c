#include "core/model/gguf.h"


#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include "core/error.h"

// dequantize() equals ggml's reference (and gguf-py's numpy) bit for bit: the
// same float operations in the same order. Whether a compiler fuses
// `q * d + m` into an FMA does not matter: every product that is then added
// to is exact (an 11-bit half significand times integers of at most 11 bits
// in all fits a float's 24).

namespace kvlens {
namespace {

constexpr uint32_t kMaxDims = 4;              // GGML_MAX_DIMS
constexpr uint64_t kDefaultAlignment = 32;    // GGUF_DEFAULT_ALIGNMENT
constexpr int kMaxArrayDepth = 8;             // arrays of arrays of ... deeper than this are not metadata
// All metadata values together (array elements included). The largest
// vocabularies (262144 tokens with their scores and types, or 150000 tokens
// and as many merges) hold under a million; more than this is a corrupt
// count, and each value costs about 100 bytes of memory.
constexpr uint64_t kMaxMetadataValues = uint64_t{1} << 22;
constexpr uint64_t kHeaderBytes = 4 + 4 + 8 + 8;  // magic, version, tensor count, metadata count

struct TypeLayout {
    GgmlType type;
    const char* name;
    int64_t blockElements;
    uint64_t blockBytes;
    bool dequantizable;
};
constexpr TypeLayout kTypes[] = {
    {GgmlType::F32, "F32", 1, 4, true},       {GgmlType::F16, "F16", 1, 2, true},
    {GgmlType::BF16, "BF16", 1, 2, true},     {GgmlType::Q4_0, "Q4_0", 32, 18, true},
    {GgmlType::Q4_1, "Q4_1", 32, 20, true},   {GgmlType::Q5_0, "Q5_0", 32, 22, true},
    {GgmlType::Q5_1, "Q5_1", 32, 24, true},   {GgmlType::Q8_0, "Q8_0", 32, 34, true},
    {GgmlType::Q8_1, "Q8_1", 32, 36, false},  {GgmlType::Q2_K, "Q2_K", 256, 84, true},
    {GgmlType::Q3_K, "Q3_K", 256, 110, true}, {GgmlType::Q4_K, "Q4_K", 256, 144, true},
    {GgmlType::Q5_K, "Q5_K", 256, 176, true}, {GgmlType::Q6_K, "Q6_K", 256, 210, true},
    {GgmlType::Q8_K, "Q8_K", 256, 292, false},
};

const TypeLayout* layoutOf(uint32_t type) {
    for (const auto& t : kTypes)
        if (static_cast<uint32_t>(t.type) == type) return &t;
    return nullptr;
}

std::string typeList(bool dequantizableOnly) {
    std::string out;
    for (const auto& t : kTypes) {
        if (dequantizableOnly && !t.dequantizable) continue;
        if (!out.empty()) out += ", ";
        out += t.name;
    }
    return out;
}

// Smallest encoding of one value of a GGUF value type (an array: its element
// type and count), so that a count can be checked against the bytes left.
uint64_t minValueBytes(GgufValue::Type t) {
    switch (t) {
    case GgufValue::Type::U8: case GgufValue::Type::I8: case GgufValue::Type::Bool: return 1;
    case GgufValue::Type::U16: case GgufValue::Type::I16: return 2;
    case GgufValue::Type::U32: case GgufValue::Type::I32: case GgufValue::Type::F32: return 4;
    case GgufValue::Type::U64: case GgufValue::Type::I64: case GgufValue::Type::F64: return 8;
    case GgufValue::Type::String: return 8;
    case GgufValue::Type::Array: return 12;
    }
    return 1;
}

bool knownValueType(uint32_t t) { return t <= static_cast<uint32_t>(GgufValue::Type::F64); }

// Little-endian reads from a buffer whose bounds are checked before each read.
class Reader {
public:
    Reader(const uint8_t* bytes, uint64_t size, const std::string& file) : m_bytes(bytes), m_size(size), m_file(file) {}

    uint64_t pos() const { return m_pos; }
    uint64_t left() const { return m_size - m_pos; }
    const std::string& file() const { return m_file; }
    // What is being read, for error messages: "metadata key 'general.name'".
    std::string where;

    [[noreturn]] void fail(const std::string& detail) const { throw FormatError(m_file, where + ": " + detail); }

    void need(uint64_t n, const char* field) const {
        if (n > left())
            fail("truncated: " + std::string(field) + " needs " + std::to_string(n) + " bytes at byte " +
                 std::to_string(m_pos) + " but the file ends at byte " + std::to_string(m_size));
    }
    uint64_t uint(unsigned n, const char* field) {
        need(n, field);
        uint64_t v = 0;
        for (unsigned i = 0; i < n; ++i) v |= static_cast<uint64_t>(m_bytes[m_pos + i]) << (8 * i);
        m_pos += n;
        return v;
    }
    uint32_t u32(const char* field) { return static_cast<uint32_t>(uint(4, field)); }
    uint64_t u64(const char* field) { return uint(8, field); }
    std::string string(const char* field) {
        const uint64_t start = m_pos;
        const uint64_t n = u64(field);
        if (n > left())
            fail(std::string(field) + " at byte " + std::to_string(start) + " has length " + std::to_string(n) +
                 " but only " + std::to_string(left()) + " bytes are left in the file");
        std::string s(reinterpret_cast<const char*>(m_bytes + m_pos), static_cast<size_t>(n));
        m_pos += n;
        return s;
    }

private:
    const uint8_t* m_bytes;
    uint64_t m_size;
    uint64_t m_pos = 0;
    const std::string& m_file;
};

template <typename To, typename From>
To bitCast(From f) {
    static_assert(sizeof(To) == sizeof(From), "bitCast sizes");
    To t;
    std::memcpy(&t, &f, sizeof t);
    return t;
}

void readValue(Reader& r, GgufValue::Type type, GgufValue& v, int depth, uint64_t& valueCount) {
    v.type = type;
    switch (type) {
    case GgufValue::Type::U8: v.u = r.uint(1, "the uint8 value"); break;
    case GgufValue::Type::I8: v.i = static_cast<int8_t>(r.uint(1, "the int8 value")); break;
    case GgufValue::Type::U16: v.u = r.uint(2, "the uint16 value"); break;
    case GgufValue::Type::I16: v.i = static_cast<int16_t>(r.uint(2, "the int16 value")); break;
    case GgufValue::Type::U32: v.u = r.uint(4, "the uint32 value"); break;
    case GgufValue::Type::I32: v.i = static_cast<int32_t>(r.uint(4, "the int32 value")); break;
    case GgufValue::Type::U64: v.u = r.uint(8, "the uint64 value"); break;
    case GgufValue::Type::I64: v.i = static_cast<int64_t>(r.uint(8, "the int64 value")); break;
    case GgufValue::Type::F32: v.f = bitCast<float>(r.u32("the float32 value")); break;
    case GgufValue::Type::F64: v.f = bitCast<double>(r.u64("the float64 value")); break;
    case GgufValue::Type::Bool: v.u = r.uint(1, "the bool value") != 0 ? 1 : 0; break;
    case GgufValue::Type::String: v.s = r.string("the string value"); break;
    case GgufValue::Type::Array: {
        const uint32_t et = r.u32("the array's element type");
        if (!knownValueType(et))
            r.fail("array of unknown value type " + std::to_string(et) + ": expected a type id from 0 to 12");
        v.elementType = static_cast<GgufValue::Type>(et);
        if (v.elementType == GgufValue::Type::Array && depth + 1 >= kMaxArrayDepth)
            r.fail("arrays nested more than " + std::to_string(kMaxArrayDepth) + " deep: expected at most " +
                   std::to_string(kMaxArrayDepth) + " levels");
        const uint64_t countAt = r.pos();
        const uint64_t count = r.u64("the array's element count");
        const uint64_t minBytes = minValueBytes(v.elementType);
        if (count > r.left() / minBytes)
            r.fail("the array at byte " + std::to_string(countAt) + " declares " + std::to_string(count) + " " +
                   ggufValueTypeName(v.elementType) + " elements (at least " + std::to_string(minBytes) +
                   " bytes each) but only " + std::to_string(r.left()) + " bytes are left in the file");
        if (count > kMaxMetadataValues - valueCount)
            r.fail("the array declares " + std::to_string(count) + " elements, more than the " +
                   std::to_string(kMaxMetadataValues) + " metadata values a GGUF file may hold in all");
        valueCount += count;
        v.elements.resize(static_cast<size_t>(count));
        for (auto& e : v.elements) readValue(r, v.elementType, e, depth + 1, valueCount);
        break;
    }
    }
}

}  // namespace

std::string ggmlTypeName(uint32_t type) {
    if (const TypeLayout* t = layoutOf(type)) return t->name;
    return "type " + std::to_string(type);
}

bool ggmlBlockLayout(uint32_t type, int64_t* blockElements, uint64_t* blockBytes) {
    const TypeLayout* t = layoutOf(type);
    if (!t) return false;
    if (blockElements) *blockElements = t->blockElements;
    if (blockBytes) *blockBytes = t->blockBytes;
    return true;
}

const char* ggufValueTypeName(GgufValue::Type t) {
    switch (t) {
    case GgufValue::Type::U8: return "uint8";
    case GgufValue::Type::I8: return "int8";
    case GgufValue::Type::U16: return "uint16";
    case GgufValue::Type::I16: return "int16";
    case GgufValue::Type::U32: return "uint32";
    case GgufValue::Type::I32: return "int32";
    case GgufValue::Type::F32: return "float32";
    case GgufValue::Type::Bool: return "bool";
    case GgufValue::Type::String: return "string";
    case GgufValue::Type::Array: return "array";
    case GgufValue::Type::U64: return "uint64";
    case GgufValue::Type::I64: return "int64";
    case GgufValue::Type::F64: return "float64";
    }
    return "unknown type";
}

std::string ggufValueDescription(const GgufValue& v) {
    if (v.type == GgufValue::Type::Array) return std::string("an array of ") + ggufValueTypeName(v.elementType);
    const char* n = ggufValueTypeName(v.type);
    return (n[0] == 'i' || n[0] == 'a' ? "an " : "a ") + std::string(n);
}

bool GgufValue::isInteger() const {
    switch (type) {
    case Type::U8: case Type::I8: case Type::U16: case Type::I16:
    case Type::U32: case Type::I32: case Type::U64: case Type::I64: return true;
    default: return false;
    }
}

int64_t GgufTensorInfo::numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
}

std::vector<int64_t> GgufTensorInfo::shape() const { return std::vector<int64_t>(dims.rbegin(), dims.rend()); }

namespace {

// One tensor info of the header (name, dimensions, type, offset), checked:
// unique name, at most kMaxDims dimensions, a known type whose blocks divide
// the first dimension, element and byte counts within 64 bits.
GgufTensorInfo readTensorInfo(Reader& r, uint64_t t, std::set<std::string>& names) {
    GgufTensorInfo info;
    r.where = "tensor info " + std::to_string(t);
    info.name = r.string("the tensor name");
    r.where = "tensor '" + info.name + "'";
    if (!names.insert(info.name).second) r.fail("the name appears twice: expected each tensor once");
    const uint32_t nDims = r.u32("the dimension count");
    if (nDims > kMaxDims)
        r.fail("has " + std::to_string(nDims) + " dimensions: expected at most " + std::to_string(kMaxDims));
    uint64_t numel = 1;
    bool overflow = false;
    for (uint32_t d = 0; d < nDims; ++d) {
        const uint64_t n = r.u64("a dimension");
        if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            r.fail("dimension " + std::to_string(d) + " is " + std::to_string(n) + ": expected at most 2^63-1");
        if (n != 0 && numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / n) overflow = true;
        else numel *= n;
        info.dims.push_back(static_cast<int64_t>(n));
    }
    if (overflow) {
        std::string dims;
        for (int64_t d : info.dims) dims += (dims.empty() ? "" : " x ") + std::to_string(d);
        r.fail("the dimensions " + dims + " overflow a 64-bit element count");
    }
    info.type = r.u32("the ggml type");
    info.offset = r.u64("the data offset");
    const TypeLayout* layout = layoutOf(info.type);
    if (!layout)
        r.fail("unknown ggml " + ggmlTypeName(info.type) + ": expected one of " + typeList(false));
    const int64_t ne0 = info.dims.empty() ? 1 : info.dims[0];
    if (ne0 % layout->blockElements != 0)
        r.fail("the first dimension " + std::to_string(ne0) + " is not a multiple of the " + layout->name +
               " block size " + std::to_string(layout->blockElements));
    // numel is a whole number of blocks (ne0 is); the blocks' bytes must fit in 64 bits.
    const uint64_t blocks = numel / static_cast<uint64_t>(layout->blockElements);
    if (blocks > std::numeric_limits<uint64_t>::max() / layout->blockBytes)
        r.fail(std::to_string(numel) + " elements of " + layout->name + " overflow a 64-bit byte count");
    info.bytes = blocks * layout->blockBytes;
    return info;
}

// The data section: the alignment (general.alignment or 32), where the data
// starts, and every tensor's bytes inside the file, aligned and disjoint.
void placeTensors(GgufContents& c, uint64_t headerEnd, uint64_t size, const std::string& file) {
    auto align = c.metadata.find("general.alignment");
    if (align != c.metadata.end()) {
        const GgufValue& a = align->second;
        if (a.type != GgufValue::Type::U32)
            throw FormatError(file, "metadata key 'general.alignment' is " + ggufValueDescription(a) +
                                        ": expected a uint32 power of two");
        if (a.u == 0 || (a.u & (a.u - 1)) != 0)
            throw FormatError(file, "metadata key 'general.alignment' is " + std::to_string(a.u) +
                                        ": expected a power of two");
        c.alignment = a.u;
    } else {
        c.alignment = kDefaultAlignment;
    }
    // headerEnd <= size, and a mapped buffer is far below 2^64 - 2^31.
    c.dataOffset = (headerEnd + (c.alignment - 1)) / c.alignment * c.alignment;
    const uint64_t dataSize = size > c.dataOffset ? size - c.dataOffset : 0;

    for (const auto& t : c.tensors) {
        const std::string where = "tensor '" + t.name + "'";
        if (t.offset % c.alignment != 0)
            throw FormatError(file, where + ": data offset " + std::to_string(t.offset) +
                                        " is not a multiple of the alignment " + std::to_string(c.alignment));
        if (t.bytes > dataSize || t.offset > dataSize - t.bytes)
            throw FormatError(file, where + ": its " + std::to_string(t.bytes) + " bytes at data offset " +
                                        std::to_string(t.offset) + " (the data section starts at byte " +
                                        std::to_string(c.dataOffset) + ") run past the end of the file (" +
                                        std::to_string(size) + " bytes; truncated?)");
    }
    std::vector<const GgufTensorInfo*> byOffset;
    for (const auto& t : c.tensors)
        if (t.bytes > 0) byOffset.push_back(&t);
    std::sort(byOffset.begin(), byOffset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < byOffset.size(); ++i)
        if (byOffset[i]->offset < byOffset[i - 1]->offset + byOffset[i - 1]->bytes)
            throw FormatError(file, "tensors '" + byOffset[i - 1]->name + "' (data offset " +
                                        std::to_string(byOffset[i - 1]->offset) + ", " +
                                        std::to_string(byOffset[i - 1]->bytes) + " bytes) and '" +
                                        byOffset[i]->name + "' (data offset " + std::to_string(byOffset[i]->offset) +
                                        ") overlap: expected disjoint byte ranges");
}

}  // namespace

GgufContents GgufFile::parse(const uint8_t* bytes, uint64_t size, const std::string& file) {
    Reader r(bytes, size, file);
    r.where = "the header";
    if (size < 4) throw FormatError(file, "truncated: shorter than the 4-byte GGUF magic");
    if (std::memcmp(bytes, "GGUF", 4) != 0) {
        static const char hex[] = "0123456789abcdef";
        std::string seen;
        for (int i = 0; i < 4; ++i) {
            if (i) seen += ' ';
            seen += hex[bytes[i] >> 4];
            seen += hex[bytes[i] & 15];
        }
        throw FormatError(file, "not a GGUF file: the first 4 bytes are " + seen +
                                    ", expected the magic 'GGUF' (47 47 55 46)");
    }
    r.uint(4, "the magic");
    GgufContents c;
    c.version = r.u32("the version");
    if (c.version == 1)
        throw FormatError(file, "GGUF version 1 (the 2023 draft with 32-bit counts) is not supported: "
                                "expected version 2 or 3");
    if (c.version == 0x02000000u || c.version == 0x03000000u)
        throw FormatError(file, "big-endian GGUF files are not supported: expected a little-endian version 2 or 3");
    if (c.version != 2 && c.version != 3)
        throw FormatError(file, "unsupported GGUF version " + std::to_string(c.version) + ": expected version 2 or 3");
    const uint64_t tensorCount = r.u64("the tensor count");
    const uint64_t kvCount = r.u64("the metadata count");
    // A key/value pair is at least a key length (8), a value type (4) and 1 byte of value.
    if (kvCount > r.left() / 13)
        throw FormatError(file, "the header declares " + std::to_string(kvCount) +
                                    " metadata entries (at least 13 bytes each) but only " + std::to_string(r.left()) +
                                    " bytes follow the header");

    uint64_t valueCount = 0;
    for (uint64_t k = 0; k < kvCount; ++k) {
        r.where = "metadata entry " + std::to_string(k);
        std::string key = r.string("the key");
        r.where = "metadata key '" + key + "'";
        const uint32_t type = r.u32("the value type");
        if (!knownValueType(type))
            r.fail("unknown value type " + std::to_string(type) + ": expected a type id from 0 to 12");
        if (c.metadata.count(key)) r.fail("the key appears twice: expected each key once");
        if (++valueCount > kMaxMetadataValues)
            r.fail("more than " + std::to_string(kMaxMetadataValues) + " metadata values in all");
        GgufValue v;
        readValue(r, static_cast<GgufValue::Type>(type), v, 0, valueCount);
        c.metadata.emplace(std::move(key), std::move(v));
    }

    r.where = "the header";
    // A tensor info is at least a name length (8), n_dims (4), a type (4) and an offset (8).
    if (tensorCount > r.left() / 24)
        throw FormatError(file, "the header declares " + std::to_string(tensorCount) +
                                    " tensors (at least 24 bytes of tensor info each) but only " +
                                    std::to_string(r.left()) + " bytes follow the metadata");
    std::set<std::string> names;
    c.tensors.reserve(static_cast<size_t>(tensorCount));
    for (uint64_t t = 0; t < tensorCount; ++t) c.tensors.push_back(readTensorInfo(r, t, names));
    const uint64_t headerEnd = r.pos();

    placeTensors(c, headerEnd, size, file);
    return c;
}

std::unique_ptr<GgufFile> GgufFile::open(const std::filesystem::path& path) {
    const std::string file = path.string();
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->m_path = file;
    f->m_map = MappedFile(file, "a GGUF file", kHeaderBytes, "the " + std::to_string(kHeaderBytes) + "-byte GGUF header");
    f->m_bytes = f->m_map.bytes();
    f->m_contents = parse(f->m_bytes, f->m_map.size(), file);
    return f;
}

GgufFile::~GgufFile() = default;

const GgufTensorInfo* GgufFile::find(const std::string& name) const {
    for (const auto& t : m_contents.tensors)
        if (t.name == name) return &t;
    return nullptr;
}

const GgufValue* GgufFile::value(const std::string& key) const {
    auto it = m_contents.metadata.find(key);
    return it == m_contents.metadata.end() ? nullptr : &it->second;
}

namespace {

const GgufValue& required(const GgufFile& f, const std::string& key, const char* expected) {
    const GgufValue* v = f.value(key);
    if (!v) throw FormatError(f.path(), "metadata key '" + key + "' is missing: expected " + expected);
    return *v;
}

[[noreturn]] void wrongType(const GgufFile& f, const std::string& key, const GgufValue& v, const char* expected) {
    throw FormatError(f.path(), "metadata key '" + key + "' is " + ggufValueDescription(v) + ": expected " + expected);
}

bool isIntegerType(GgufValue::Type t) {
    GgufValue v;
    v.type = t;
    return v.isInteger();
}

double asNumber(const GgufValue& v) {
    switch (v.type) {
    case GgufValue::Type::U8: case GgufValue::Type::U16: case GgufValue::Type::U32: case GgufValue::Type::U64:
        return static_cast<double>(v.u);
    case GgufValue::Type::F32: case GgufValue::Type::F64: return v.f;
    default: return static_cast<double>(v.i);
    }
}

}  // namespace

std::string GgufFile::string(const std::string& key) const {
    const GgufValue& v = required(*this, key, "a string");
    if (v.type != GgufValue::Type::String) wrongType(*this, key, v, "a string");
    return v.s;
}

int64_t GgufFile::integer(const std::string& key) const {
    const GgufValue& v = required(*this, key, "an integer");
    if (!v.isInteger()) wrongType(*this, key, v, "an integer");
    switch (v.type) {
    case GgufValue::Type::U8: case GgufValue::Type::U16: case GgufValue::Type::U32: case GgufValue::Type::U64:
        if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            throw FormatError(m_path, "metadata key '" + key + "' is " + std::to_string(v.u) +
                                          ": expected an integer below 2^63");
        return static_cast<int64_t>(v.u);
    default: return v.i;
    }
}

double GgufFile::number(const std::string& key) const {
    const GgufValue& v = required(*this, key, "a number");
    if (!v.isInteger() && !v.isFloat()) wrongType(*this, key, v, "a number");
    return asNumber(v);
}

std::vector<std::string> GgufFile::strings(const std::string& key) const {
    const GgufValue& v = required(*this, key, "an array of strings");
    if (v.type != GgufValue::Type::Array || v.elementType != GgufValue::Type::String)
        wrongType(*this, key, v, "an array of strings");
    std::vector<std::string> out;
    out.reserve(v.elements.size());
    for (const auto& e : v.elements) out.push_back(e.s);
    return out;
}

std::vector<double> GgufFile::numbers(const std::string& key) const {
    const GgufValue& v = required(*this, key, "an array of numbers");
    if (v.type != GgufValue::Type::Array ||
        !(isIntegerType(v.elementType) || v.elementType == GgufValue::Type::F32 ||
          v.elementType == GgufValue::Type::F64))
        wrongType(*this, key, v, "an array of numbers");
    std::vector<double> out;
    out.reserve(v.elements.size());
    for (const auto& e : v.elements) out.push_back(asNumber(e));
    return out;
}

// ---- dequantisation -------------------------------------------------------

float halfToFloat(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    uint32_t bits;
    if (exponent == 0x1f) {
        // Infinity, or NaN with its payload bits kept as they are, as numpy
        // (gguf-py, which the tests compare against) converts them. ggml's
        // F16C and software paths instead set the quiet bit of a signalling NaN;
        // only a NaN's payload could differ, never a number.
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent == 0) {
        if (mantissa == 0) {
            bits = sign;  // +-0
        } else {
            // Subnormal: mantissa x 2^-24, normalised into a float.
            int e = -14;
            while (!(mantissa & 0x400u)) {
                mantissa <<= 1;
                --e;
            }
            bits = sign | (static_cast<uint32_t>(e + 127) << 23) | ((mantissa & 0x3ffu) << 13);
        }
    } else {
        bits = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
    }
    return bitCast<float>(bits);
}

float bf16ToFloat(uint16_t b) { return bitCast<float>(static_cast<uint32_t>(b) << 16); }

namespace {

inline uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline float f16At(const uint8_t* p) { return halfToFloat(le16(p)); }

// ggml's block layouts (ggml-common.h). Each function turns `blocks` blocks
// at `x` into floats at `y`, with the same operations in the same order as
// ggml-quants.c's dequantize_row_*.

inline uint32_t le32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
           (static_cast<uint32_t>(p[3]) << 24);
}

// Q4_0, Q4_1, Q5_0, Q5_1: 32 elements a block; an f16 scale d, then (the _1
// types) an f16 minimum m, then (Q5) 32 fifth bits, then 16 bytes of low
// nibbles (element j) and high nibbles (element j + 16). The _0 types are
// centred (q - 8, q - 16) and scaled; the _1 types are q x d + m.
template <bool kMin, bool kFifthBit>
void rowQ4Q5(const uint8_t* x, int64_t blocks, float* y) {
    constexpr int kBytes = 2 + (kMin ? 2 : 0) + (kFifthBit ? 4 : 0) + 16;
    constexpr int kCentre = kMin ? 0 : kFifthBit ? 16 : 8;
    for (int64_t b = 0; b < blocks; ++b, x += kBytes, y += 32) {
        const float d = f16At(x);
        const float m = kMin ? f16At(x + 2) : 0.0f;
        const uint32_t qh = kFifthBit ? le32(x + (kMin ? 4 : 2)) : 0;  // bit j: the fifth bit of element j
        const uint8_t* qs = x + kBytes - 16;
        for (int j = 0; j < 16; ++j) {
            const int lo = static_cast<int>((qs[j] & 0x0f) | (((qh >> j) & 1u) << 4)) - kCentre;
            const int hi = static_cast<int>((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - kCentre;
            if (kMin) {
                y[j] = static_cast<float>(lo) * d + m;
                y[j + 16] = static_cast<float>(hi) * d + m;
            } else {
                y[j] = static_cast<float>(lo) * d;
                y[j + 16] = static_cast<float>(hi) * d;
            }
        }
    }
}

void rowQ8_0(const uint8_t* x, int64_t blocks, float* y) {
    for (int64_t b = 0; b < blocks; ++b, x += 34, y += 32) {
        const float d = f16At(x);
        for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(x[2 + j])) * d;
    }
}

// Q2_K: scales[16] (low nibble scale, high nibble min), qs[64] (2 bits each), d, dmin.
void rowQ2_K(const uint8_t* x, int64_t blocks, float* y) {
    for (int64_t b = 0; b < blocks; ++b, x += 84) {
        const uint8_t* scales = x;
        const uint8_t* q = x + 16;
        const float d = f16At(x + 80);
        const float dmin = f16At(x + 82);
        int is = 0;
        for (int half = 0; half < 2; ++half, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; ++part) {
                    const uint8_t sc = scales[is++];
                    const float dl = d * static_cast<float>(sc & 0x0f);
                    const float ml = dmin * static_cast<float>(sc >> 4);
                    for (int l = 0; l < 16; ++l)
                        *y++ = dl * static_cast<float>((q[part * 16 + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

// Q3_K: hmask[32] (the third bit, inverted), qs[64] (low 2 bits), 16 6-bit
// scales packed in 12 bytes, d.
void rowQ3_K(const uint8_t* x, int64_t blocks, float* y) {
    for (int64_t b = 0; b < blocks; ++b, x += 110) {
        const uint8_t* hm = x;
        const uint8_t* q = x + 32;
        const uint8_t* packed = x + 96;
        const float dAll = f16At(x + 108);
        int scales[16];
        for (int s = 0; s < 16; ++s) {
            const int low = s < 8 ? (packed[s] & 0x0f) : (packed[s - 8] >> 4);
            const int high = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
            scales[s] = (low | (high << 4)) - 32;
        }
        int is = 0;
        unsigned mask = 1;
        for (int half = 0; half < 2; ++half, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, mask <<= 1) {
                for (int part = 0; part < 2; ++part) {
                    const float dl = dAll * static_cast<float>(scales[is++]);
                    for (int l = 0; l < 16; ++l) {
                        const int i = part * 16 + l;
                        const int v = ((q[i] >> shift) & 3) - ((hm[i] & mask) ? 0 : 4);
                        *y++ = dl * static_cast<float>(v);
                    }
                }
            }
        }
    }
}

// The K-quants' 8 6-bit scales and 8 6-bit mins packed in 12 bytes
// (ggml's get_scale_min_k4).
inline void scaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// Q4_K and Q5_K: 256 elements a block in 8 groups of 32, f16 d and dmin,
// 12 bytes of packed 6-bit scales and mins, then (Q5_K) 32 bytes of fifth
// bits (bit 2i and 2i + 1 of byte l: elements l of groups 2i and 2i + 1),
// then 128 bytes of nibbles (low: group 2i, high: group 2i + 1).
template <bool kFifthBit>
void rowQ45K(const uint8_t* x, int64_t blocks, float* y) {
    constexpr int kBytes = kFifthBit ? 176 : 144;
    for (int64_t b = 0; b < blocks; ++b, x += kBytes) {
        const float d = f16At(x);
        const float dmin = f16At(x + 2);
        const uint8_t* scales = x + 4;
        const uint8_t* qh = x + 16;
        const uint8_t* ql = x + kBytes - 128;
        unsigned u1 = 1, u2 = 2;
        for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
            uint8_t sc, m;
            scaleMinK4(is, scales, &sc, &m);
            const float d1 = d * static_cast<float>(sc);
            const float m1 = dmin * static_cast<float>(m);
            scaleMinK4(is + 1, scales, &sc, &m);
            const float d2 = d * static_cast<float>(sc);
            const float m2 = dmin * static_cast<float>(m);
            for (int l = 0; l < 32; ++l)
                *y++ = d1 * static_cast<float>((ql[l] & 0x0f) + (kFifthBit && (qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l)
                *y++ = d2 * static_cast<float>((ql[l] >> 4) + (kFifthBit && (qh[l] & u2) ? 16 : 0)) - m2;
        }
    }
}

// Q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16], d.
void rowQ6_K(const uint8_t* x, int64_t blocks, float* y) {
    for (int64_t b = 0; b < blocks; ++b, x += 210) {
        const uint8_t* ql = x;
        const uint8_t* qh = x + 128;
        const int8_t* sc = reinterpret_cast<const int8_t*>(x + 192);
        const float d = f16At(x + 208);
        for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
                y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
                y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
                y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
            }
        }
    }
}

}  // namespace

void dequantize(uint32_t type, const uint8_t* src, int64_t numel, float* out, const std::string& what) {
    const TypeLayout* layout = layoutOf(type);
    if (!layout || !layout->dequantizable)
        throw FormatError(what, "cannot dequantise ggml type " + ggmlTypeName(type) + ": expected one of " +
                                    typeList(true));
    if (numel < 0 || numel % layout->blockElements != 0)
        throw FormatError(what, std::to_string(numel) + " elements of " + layout->name +
                                    " is not a whole number of blocks of " + std::to_string(layout->blockElements));
    const int64_t blocks = numel / layout->blockElements;
    switch (layout->type) {
    case GgmlType::F32: std::memcpy(out, src, static_cast<size_t>(numel) * 4); break;
    case GgmlType::F16:
        for (int64_t i = 0; i < numel; ++i) out[i] = halfToFloat(le16(src + 2 * i));
        break;
    case GgmlType::BF16:
        for (int64_t i = 0; i < numel; ++i) out[i] = bf16ToFloat(le16(src + 2 * i));
        break;
    case GgmlType::Q4_0: rowQ4Q5<false, false>(src, blocks, out); break;
    case GgmlType::Q4_1: rowQ4Q5<true, false>(src, blocks, out); break;
    case GgmlType::Q5_0: rowQ4Q5<false, true>(src, blocks, out); break;
    case GgmlType::Q5_1: rowQ4Q5<true, true>(src, blocks, out); break;
    case GgmlType::Q8_0: rowQ8_0(src, blocks, out); break;
    case GgmlType::Q2_K: rowQ2_K(src, blocks, out); break;
    case GgmlType::Q3_K: rowQ3_K(src, blocks, out); break;
    case GgmlType::Q4_K: rowQ45K<false>(src, blocks, out); break;
    case GgmlType::Q5_K: rowQ45K<true>(src, blocks, out); break;
    case GgmlType::Q6_K: rowQ6_K(src, blocks, out); break;
    default:
        throw FormatError(what, "cannot dequantise ggml type " + ggmlTypeName(type) + ": expected one of " +
                                    typeList(true));
    }
}

}  // namespace kvlens
