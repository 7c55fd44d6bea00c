// The GGUF reader (core/model/gguf.h): small files built in memory parse to
// what was written (v2 and v3, every metadata value type, arrays, alignment);
// every malformation is a FormatError whose message names what is wrong; the
// dequantisers give the values worked out by hand from ggml's block layouts.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/model/gguf.h"

using namespace kvlens;
namespace fs = std::filesystem;

namespace {

// Little-endian GGUF fields appended to a byte string.
struct Writer {
    std::string s;
    Writer& le(uint64_t v, int n) {
        for (int i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
        return *this;
    }
    Writer& u8(uint8_t v) { return le(v, 1); }
    Writer& u16(uint16_t v) { return le(v, 2); }
    Writer& u32(uint32_t v) { return le(v, 4); }
    Writer& u64(uint64_t v) { return le(v, 8); }
    Writer& f32(float v) {
        uint32_t b;
        std::memcpy(&b, &v, 4);
        return u32(b);
    }
    Writer& f64(double v) {
        uint64_t b;
        std::memcpy(&b, &v, 8);
        return u64(b);
    }
    Writer& str(const std::string& v) {
        u64(v.size());
        s += v;
        return *this;
    }
};

using VT = GgufValue::Type;

// One serialised key/value pair: key, value type, value bytes.
std::string kv(const std::string& key, VT type, const std::string& value) {
    Writer w;
    w.str(key).u32(static_cast<uint32_t>(type));
    return w.s + value;
}
std::string kvU32(const std::string& key, uint32_t v) { return kv(key, VT::U32, Writer().u32(v).s); }
std::string kvStr(const std::string& key, const std::string& v) { return kv(key, VT::String, Writer().str(v).s); }
// An array value: element type, count, then the elements' bytes.
std::string arrayValue(VT element, uint64_t count, const std::string& elements) {
    return Writer().u32(static_cast<uint32_t>(element)).u64(count).s + elements;
}

struct TensorSpec {
    std::string name;
    std::vector<uint64_t> dims;  // ggml order
    uint32_t type;
    uint64_t offset;
};

struct FileSpec {
    uint32_t version = 3;
    std::vector<std::string> kvs;
    std::vector<TensorSpec> tensors;
    uint64_t alignment = 32;  // padding before the data (general.alignment goes in kvs)
    std::string data;

    // Bytes up to the end of the tensor infos (no padding).
    std::string header() const {
        Writer w;
        w.s = "GGUF";
        w.u32(version).u64(tensors.size()).u64(kvs.size());
        for (const auto& k : kvs) w.s += k;
        for (const auto& t : tensors) {
            w.str(t.name).u32(static_cast<uint32_t>(t.dims.size()));
            for (uint64_t d : t.dims) w.u64(d);
            w.u32(t.type).u64(t.offset);
        }
        return w.s;
    }
    std::string build() const {
        std::string s = header();
        while (s.size() % alignment != 0) s.push_back('\0');
        return s + data;
    }
};

GgufContents parseBytes(const std::string& bytes) {
    return GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "t.gguf");
}

// The message of the FormatError that parsing `bytes` throws, or "" when it parses.
std::string parseError(const std::string& bytes) {
    try {
        parseBytes(bytes);
    } catch (const FormatError& e) {
        EXPECT_EQ(e.file(), "t.gguf");
        return e.what();
    }
    return "";
}

void expectError(const std::string& bytes, std::initializer_list<const char*> parts) {
    const std::string msg = parseError(bytes);
    ASSERT_FALSE(msg.empty()) << "parsed without an error";
    EXPECT_EQ(msg.rfind("t.gguf: ", 0), 0u) << msg;
    for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

uint32_t typeId(GgmlType t) { return static_cast<uint32_t>(t); }

std::string floats(std::initializer_list<float> v) {
    Writer w;
    for (float f : v) w.f32(f);
    return w.s;
}

// A Q4_0 block: d as a half, then 16 bytes of nibbles.
std::string q4_0Block(uint16_t d, const std::vector<uint8_t>& qs) {
    Writer w;
    w.u16(d);
    for (uint8_t b : qs) w.u8(b);
    return w.s;
}

// A file with one key per value type, arrays (strings, int32, nested, empty),
// alignment 64, an F32 [2, 3] tensor and a Q4_0 [2, 32] tensor.
FileSpec everyValueType(uint32_t version) {
    FileSpec f;
    f.version = version;
    f.alignment = 64;
    f.kvs = {
        kvU32("general.alignment", 64),
        kv("v.u8", VT::U8, Writer().u8(200).s),
        kv("v.i8", VT::I8, Writer().u8(0x80).s),
        kv("v.u16", VT::U16, Writer().u16(65535).s),
        kv("v.i16", VT::I16, Writer().u16(0xfffe).s),
        kvU32("v.u32", 4000000000u),
        kv("v.i32", VT::I32, Writer().u32(static_cast<uint32_t>(-7)).s),
        kv("v.f32", VT::F32, Writer().f32(0.1f).s),
        kv("v.bool", VT::Bool, Writer().u8(1).s),
        kvStr("general.name", "tiny \xe2\x9c\x93"),
        kv("v.u64", VT::U64, Writer().u64(0xffffffffffffffffull).s),
        kv("v.i64", VT::I64, Writer().u64(static_cast<uint64_t>(-5000000000ll)).s),
        kv("v.f64", VT::F64, Writer().f64(-2.5e-300).s),
        kv("tokens", VT::Array, arrayValue(VT::String, 3, Writer().str("a").str("").str("<s>").s)),
        kv("ids", VT::Array, arrayValue(VT::I32, 2, Writer().u32(1).u32(static_cast<uint32_t>(-2)).s)),
        kv("scores", VT::Array, arrayValue(VT::F32, 2, Writer().f32(1.5f).f32(-0.25f).s)),
        kv("nested", VT::Array,
           arrayValue(VT::Array, 2, arrayValue(VT::U8, 2, "\x01\x02") + arrayValue(VT::U8, 0, ""))),
        kv("empty", VT::Array, arrayValue(VT::String, 0, "")),
    };
    f.tensors = {
        {"a", {3, 2}, typeId(GgmlType::F32), 0},
        {"b", {32, 2}, typeId(GgmlType::Q4_0), 64},
    };
    f.data = floats({1, 2, 3, 4, 5, 6});
    f.data.resize(64, '\0');
    f.data += q4_0Block(0x3c00, std::vector<uint8_t>(16, 0x98)) + q4_0Block(0xbc00, std::vector<uint8_t>(16, 0x0f));
    return f;
}

// A minimal valid file: one key, one F32 [4] tensor.
FileSpec minimal() {
    FileSpec f;
    f.kvs = {kvStr("general.architecture", "llama")};
    f.tensors = {{"w", {4}, typeId(GgmlType::F32), 0}};
    f.data = floats({1, 2, 3, 4});
    return f;
}

fs::path scratchFile(const std::string& name) {
#ifdef KVLENS_TEST_TMP
    fs::path root = KVLENS_TEST_TMP;
#else
    fs::path root = fs::temp_directory_path();
#endif
    if (const char* env = std::getenv("KVLENS_TEST_TMP")) root = env;
    const fs::path dir = root / ("gguf_reader_test-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    return dir / name;
}

uint32_t bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

std::vector<float> dequant(GgmlType type, const std::string& bytes, int64_t numel) {
    std::vector<float> out(static_cast<size_t>(numel));
    dequantize(typeId(type), reinterpret_cast<const uint8_t*>(bytes.data()), numel, out.data(), "t");
    return out;
}

}  // namespace

// ---- valid files ------------------------------------------------------------

TEST(GgufReader, ParsesEveryValueTypeArraysAndAlignment) {
    for (uint32_t version : {3u, 2u}) {
        SCOPED_TRACE("version " + std::to_string(version));
        const FileSpec spec = everyValueType(version);
        const std::string bytes = spec.build();
        const GgufContents c = parseBytes(bytes);
        EXPECT_EQ(c.version, version);
        EXPECT_EQ(c.alignment, 64u);
        EXPECT_EQ(c.dataOffset % 64, 0u);
        EXPECT_EQ(c.dataOffset, (spec.header().size() + 63) / 64 * 64);
        ASSERT_EQ(c.metadata.size(), spec.kvs.size());
        const auto& m = c.metadata;
        EXPECT_EQ(m.at("v.u8").type, VT::U8);
        EXPECT_EQ(m.at("v.u8").u, 200u);
        EXPECT_EQ(m.at("v.i8").i, -128);
        EXPECT_EQ(m.at("v.u16").u, 65535u);
        EXPECT_EQ(m.at("v.i16").i, -2);
        EXPECT_EQ(m.at("v.u32").u, 4000000000u);
        EXPECT_EQ(m.at("v.i32").i, -7);
        EXPECT_EQ(m.at("v.f32").f, static_cast<double>(0.1f));
        EXPECT_EQ(m.at("v.bool").type, VT::Bool);
        EXPECT_EQ(m.at("v.bool").u, 1u);
        EXPECT_EQ(m.at("general.name").s, "tiny \xe2\x9c\x93");
        EXPECT_EQ(m.at("v.u64").u, 0xffffffffffffffffull);
        EXPECT_EQ(m.at("v.i64").i, -5000000000ll);
        EXPECT_EQ(m.at("v.f64").f, -2.5e-300);
        EXPECT_TRUE(m.at("v.i64").isInteger());
        EXPECT_FALSE(m.at("v.bool").isInteger());
        EXPECT_TRUE(m.at("v.f32").isFloat());

        const GgufValue& tokens = m.at("tokens");
        EXPECT_EQ(tokens.type, VT::Array);
        EXPECT_EQ(tokens.elementType, VT::String);
        ASSERT_EQ(tokens.elements.size(), 3u);
        EXPECT_EQ(tokens.elements[0].s, "a");
        EXPECT_EQ(tokens.elements[1].s, "");
        EXPECT_EQ(tokens.elements[2].s, "<s>");
        EXPECT_EQ(m.at("ids").elements[1].i, -2);
        EXPECT_EQ(m.at("scores").elements[1].f, -0.25);
        const GgufValue& nested = m.at("nested");
        EXPECT_EQ(nested.elementType, VT::Array);
        ASSERT_EQ(nested.elements.size(), 2u);
        EXPECT_EQ(nested.elements[0].elementType, VT::U8);
        ASSERT_EQ(nested.elements[0].elements.size(), 2u);
        EXPECT_EQ(nested.elements[0].elements[1].u, 2u);
        EXPECT_TRUE(nested.elements[1].elements.empty());
        EXPECT_TRUE(m.at("empty").elements.empty());

        ASSERT_EQ(c.tensors.size(), 2u);
        const GgufTensorInfo& a = c.tensors[0];
        EXPECT_EQ(a.name, "a");
        EXPECT_EQ(a.dims, (std::vector<int64_t>{3, 2}));
        EXPECT_EQ(a.shape(), (std::vector<int64_t>{2, 3}));
        EXPECT_EQ(a.numel(), 6);
        EXPECT_EQ(a.bytes, 24u);
        const GgufTensorInfo& b = c.tensors[1];
        EXPECT_EQ(b.shape(), (std::vector<int64_t>{2, 32}));
        EXPECT_EQ(b.type, typeId(GgmlType::Q4_0));
        EXPECT_EQ(b.offset, 64u);
        EXPECT_EQ(b.bytes, 36u);

        std::vector<float> out(64);
        const auto* base = reinterpret_cast<const uint8_t*>(bytes.data());
        dequantize(b.type, base + c.dataOffset + b.offset, 64, out.data(), "b");
        EXPECT_EQ(out[0], 0.0f);    // 0x98: low nibble 8 -> (8 - 8) x 1
        EXPECT_EQ(out[16], 1.0f);   // high nibble 9 -> (9 - 8) x 1
        EXPECT_EQ(out[32], -7.0f);  // 0x0f: (15 - 8) x -1
        EXPECT_EQ(out[63], 8.0f);   // (0 - 8) x -1
    }
}

TEST(GgufReader, DefaultAlignmentIs32AndTensorsMayBeEmptyOrAbsent) {
    FileSpec f;
    f.kvs = {kvStr("k", "v")};
    const GgufContents none = parseBytes(f.build());
    EXPECT_EQ(none.alignment, 32u);
    EXPECT_TRUE(none.tensors.empty());

    FileSpec g = minimal();
    g.tensors.push_back({"scalar", {}, typeId(GgmlType::F32), 32});
    g.tensors.push_back({"nothing", {0, 7}, typeId(GgmlType::F32), 0});
    g.data.resize(32, '\0');
    g.data += floats({9});
    const GgufContents c = parseBytes(g.build());
    EXPECT_EQ(c.alignment, 32u);
    EXPECT_EQ(c.dataOffset % 32, 0u);
    EXPECT_EQ(c.tensors[1].numel(), 1);
    EXPECT_TRUE(c.tensors[1].shape().empty());
    EXPECT_EQ(c.tensors[2].numel(), 0);
    EXPECT_EQ(c.tensors[2].bytes, 0u);
}

TEST(GgufReader, AcceptsEveryKnownTypeEvenThoseNotDequantised) {
    FileSpec f;
    f.tensors = {{"q81", {32}, typeId(GgmlType::Q8_1), 0}, {"q8k", {256}, typeId(GgmlType::Q8_K), 64}};
    f.data = std::string(64 + 292, '\0');
    const GgufContents c = parseBytes(f.build());
    EXPECT_EQ(c.tensors[0].bytes, 36u);
    EXPECT_EQ(c.tensors[1].bytes, 292u);
}

TEST(GgufReader, TypeNamesAndLayouts) {
    struct Row {
        GgmlType type;
        const char* name;
        int64_t elements;
        uint64_t bytes;
    };
    const Row rows[] = {
        {GgmlType::F32, "F32", 1, 4},       {GgmlType::F16, "F16", 1, 2},       {GgmlType::BF16, "BF16", 1, 2},
        {GgmlType::Q4_0, "Q4_0", 32, 18},   {GgmlType::Q4_1, "Q4_1", 32, 20},   {GgmlType::Q5_0, "Q5_0", 32, 22},
        {GgmlType::Q5_1, "Q5_1", 32, 24},   {GgmlType::Q8_0, "Q8_0", 32, 34},   {GgmlType::Q8_1, "Q8_1", 32, 36},
        {GgmlType::Q2_K, "Q2_K", 256, 84},  {GgmlType::Q3_K, "Q3_K", 256, 110}, {GgmlType::Q4_K, "Q4_K", 256, 144},
        {GgmlType::Q5_K, "Q5_K", 256, 176}, {GgmlType::Q6_K, "Q6_K", 256, 210}, {GgmlType::Q8_K, "Q8_K", 256, 292},
    };
    for (const Row& r : rows) {
        EXPECT_EQ(ggmlTypeName(typeId(r.type)), r.name);
        int64_t e = 0;
        uint64_t b = 0;
        ASSERT_TRUE(ggmlBlockLayout(typeId(r.type), &e, &b)) << r.name;
        EXPECT_EQ(e, r.elements) << r.name;
        EXPECT_EQ(b, r.bytes) << r.name;
    }
    EXPECT_EQ(ggmlTypeName(23), "type 23");
    EXPECT_FALSE(ggmlBlockLayout(23, nullptr, nullptr));
    EXPECT_STREQ(ggufValueTypeName(VT::F64), "float64");
}

// ---- malformed files ----------------------------------------------------------

TEST(GgufReader, RefusesBadMagicAndVersions) {
    expectError("", {"shorter than the 4-byte GGUF magic"});
    std::string bytes = minimal().build();
    bytes[0] = 'g';
    expectError(bytes, {"not a GGUF file", "67 47 55 46", "'GGUF'"});
    for (uint32_t v : {1u, 4u, 0u, 0x03000000u}) {
        FileSpec f = minimal();
        f.version = v;
        if (v == 1) expectError(f.build(), {"version 1", "expected version 2 or 3"});
        else if (v == 0x03000000u) expectError(f.build(), {"big-endian"});
        else expectError(f.build(), {("version " + std::to_string(v)).c_str(), "expected version 2 or 3"});
    }
    expectError(minimal().build().substr(0, 12), {"the header", "truncated", "the tensor count"});
}

TEST(GgufReader, RefusesTruncationAnywhere) {
    // Every proper prefix of a valid file is refused with a FormatError.
    const std::string bytes = everyValueType(3).build();
    for (size_t n = 0; n < bytes.size(); ++n) {
        const std::string msg = parseError(bytes.substr(0, n));
        EXPECT_FALSE(msg.empty()) << "a prefix of " << n << " bytes parsed";
    }
}

TEST(GgufReader, RefusesTruncationInMetadata) {
    FileSpec f;
    f.kvs = {kvU32("a", 1), kv("k", VT::U64, Writer().u64(7).s)};
    const std::string bytes = f.build();
    // Cut 3 bytes into k's uint64 value.
    const size_t cut = 24 + kvU32("a", 1).size() + kv("k", VT::U64, "").size() + 3;
    expectError(bytes.substr(0, cut), {"metadata key 'k'", "truncated", "uint64 value needs 8 bytes"});
}

TEST(GgufReader, RefusesTruncationInTensorInfos) {
    FileSpec f;
    f.tensors = {{"a", {4, 1}, typeId(GgmlType::F32), 0}, {"b", {4, 1}, typeId(GgmlType::F32), 32}};
    const std::string header = f.header();
    const size_t oneInfo = 8 + 1 + 4 + 16 + 4 + 8;
    // Cut 3 bytes into b's first dimension.
    const size_t cut = 24 + oneInfo + 8 + 1 + 4 + 3;
    ASSERT_LT(cut, header.size());
    expectError(header.substr(0, cut), {"tensor 'b'", "truncated", "a dimension needs 8 bytes"});
}

TEST(GgufReader, RefusesTruncationInData) {
    const std::string bytes = minimal().build();
    expectError(bytes.substr(0, bytes.size() - 1),
                {"tensor 'w'", "16 bytes at data offset 0", "past the end", "truncated"});
}

TEST(GgufReader, RefusesStringLengthPastTheEnd) {
    FileSpec f;
    f.kvs = {kv("name", VT::String, Writer().u64(1000).s + "abc")};
    expectError(f.build(), {"metadata key 'name'", "has length 1000", "bytes are left"});
    FileSpec g;
    g.kvs = {Writer().u64(1ull << 62).s + std::string(20, 'k')};
    expectError(g.build(), {"metadata entry 0", "the key", "has length 4611686018427387904"});
    FileSpec t;
    t.tensors = {{std::string(8, 'x'), {4}, 0, 0}};
    std::string bytes = t.build();
    bytes[24] = static_cast<char>(200);  // the name's length
    expectError(bytes, {"tensor info 0", "the tensor name", "has length 200"});
}

TEST(GgufReader, RefusesArrayCountPastTheEnd) {
    FileSpec f;
    f.kvs = {kv("ids", VT::Array, arrayValue(VT::U32, 1000000, Writer().u32(1).s))};
    expectError(f.build(), {"metadata key 'ids'", "declares 1000000 uint32 elements", "bytes are left"});
    FileSpec g;
    g.kvs = {kv("huge", VT::Array, arrayValue(VT::String, 0xffffffffffffffffull, std::string(64, '\0')))};
    expectError(g.build(), {"metadata key 'huge'", "18446744073709551615 string elements"});
}

TEST(GgufReader, RefusesUnknownValueTypes) {
    FileSpec f;
    f.kvs = {kv("odd", static_cast<VT>(13), Writer().u64(0).s)};
    expectError(f.build(), {"metadata key 'odd'", "unknown value type 13"});
    FileSpec g;
    g.kvs = {kv("arr", VT::Array, arrayValue(static_cast<VT>(99), 1, Writer().u64(0).s))};
    expectError(g.build(), {"metadata key 'arr'", "array of unknown value type 99"});
}

TEST(GgufReader, RefusesArraysNestedTooDeep) {
    std::string value = arrayValue(VT::U8, 0, "");
    for (int i = 0; i < 20; ++i) value = arrayValue(VT::Array, 1, value);
    FileSpec f;
    f.kvs = {kv("deep", VT::Array, value)};
    expectError(f.build(), {"metadata key 'deep'", "nested more than"});
}

TEST(GgufReader, RefusesMoreMetadataValuesThanAnyModelHolds) {
    // 2^22 + 1 uint8 elements: the bytes are there, but no model's metadata
    // holds that many values (each costs ~100 bytes once parsed).
    const uint64_t n = (uint64_t{1} << 22) + 1;
    FileSpec f;
    f.kvs = {kv("blob", VT::Array, arrayValue(VT::U8, n, std::string(n, '\0')))};
    expectError(f.build(), {"metadata key 'blob'", "4194305 elements", "4194304 metadata values"});
}

TEST(GgufReader, RefusesLyingCounts) {
    std::string bytes = minimal().build();
    Writer w;
    w.u64(1ull << 40);
    bytes.replace(16, 8, w.s);  // the metadata count
    expectError(bytes, {"1099511627776 metadata entries"});
    bytes = minimal().build();
    bytes.replace(8, 8, w.s);  // the tensor count
    expectError(bytes, {"1099511627776 tensors"});
}

TEST(GgufReader, RefusesUnknownTensorType) {
    FileSpec f = minimal();
    f.tensors[0].type = 23;
    expectError(f.build(), {"tensor 'w'", "unknown ggml type 23", "Q4_K"});
}

TEST(GgufReader, RefusesDuplicates) {
    FileSpec f = minimal();
    f.kvs.push_back(kvStr("general.architecture", "gpt2"));
    expectError(f.build(), {"metadata key 'general.architecture'", "appears twice"});
    FileSpec g = minimal();
    g.tensors.push_back({"w", {4}, typeId(GgmlType::F32), 32});
    g.data.resize(48, '\0');
    expectError(g.build(), {"tensor 'w'", "appears twice"});
}

TEST(GgufReader, RefusesMisalignedOverlappingAndOutOfFileTensors) {
    FileSpec f = minimal();
    f.tensors[0].offset = 16;
    f.data.resize(64, '\0');
    expectError(f.build(), {"tensor 'w'", "data offset 16", "not a multiple of the alignment 32"});

    FileSpec g = minimal();
    g.tensors.push_back({"v", {16}, typeId(GgmlType::F32), 0});
    g.data.resize(64, '\0');
    expectError(g.build(), {"tensors '", "'w'", "'v'", "overlap"});
    g.tensors[1].offset = 32;  // w is 16 bytes at 0, v 64 bytes at 32: they touch nothing but v runs past the end
    expectError(g.build(), {"tensor 'v'", "past the end"});
    g.data.resize(96, '\0');
    EXPECT_EQ(parseError(g.build()), "");

    FileSpec h = minimal();
    h.tensors[0].offset = 1ull << 63;
    expectError(h.build(), {"tensor 'w'", "data offset 9223372036854775808", "past the end"});
}

TEST(GgufReader, RefusesBadAlignment) {
    for (uint32_t a : {48u, 0u}) {
        FileSpec f = minimal();
        f.kvs.push_back(kvU32("general.alignment", a));
        expectError(f.build(), {"'general.alignment'", ("is " + std::to_string(a)).c_str(), "power of two"});
    }
    FileSpec f = minimal();
    f.kvs.push_back(kv("general.alignment", VT::U64, Writer().u64(64).s));
    expectError(f.build(), {"'general.alignment' is a uint64", "expected a uint32"});
}

TEST(GgufReader, RefusesBadDimensions) {
    FileSpec f = minimal();
    f.tensors[0].dims = {1ull << 32, 1ull << 32};
    expectError(f.build(), {"tensor 'w'", "4294967296 x 4294967296", "overflow"});
    f.tensors[0].dims = {1ull << 63};
    expectError(f.build(), {"tensor 'w'", "dimension 0 is 9223372036854775808"});
    f.tensors[0].dims = {1ull << 62};  // 2^62 floats: 2^64 bytes
    expectError(f.build(), {"tensor 'w'", "overflow a 64-bit byte count"});
    f.tensors[0].dims = {1, 1, 1, 1, 4};
    expectError(f.build(), {"tensor 'w'", "has 5 dimensions", "at most 4"});
    f.tensors[0].dims = {16, 2};
    f.tensors[0].type = typeId(GgmlType::Q4_0);
    expectError(f.build(), {"tensor 'w'", "first dimension 16", "Q4_0 block size 32"});
}

// ---- GgufFile: open and the typed getters -------------------------------------

TEST(GgufReader, OpensAFileAndReadsTypedMetadata) {
    const fs::path path = scratchFile("every.gguf");
    {
        const std::string bytes = everyValueType(3).build();
        std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    auto f = GgufFile::open(path);
    EXPECT_EQ(f->path(), path.string());
    EXPECT_EQ(f->string("general.name"), "tiny \xe2\x9c\x93");
    EXPECT_EQ(f->integer("v.i8"), -128);
    EXPECT_EQ(f->integer("v.u32"), 4000000000ll);
    EXPECT_EQ(f->number("v.f32"), static_cast<double>(0.1f));
    EXPECT_EQ(f->number("v.i16"), -2.0);
    EXPECT_EQ(f->strings("tokens"), (std::vector<std::string>{"a", "", "<s>"}));
    EXPECT_EQ(f->numbers("scores"), (std::vector<double>{1.5, -0.25}));
    EXPECT_EQ(f->numbers("ids"), (std::vector<double>{1, -2}));
    EXPECT_TRUE(f->strings("empty").empty());
    EXPECT_EQ(f->value("absent"), nullptr);
    ASSERT_NE(f->value("v.bool"), nullptr);
    ASSERT_NE(f->find("b"), nullptr);
    EXPECT_EQ(f->find("c"), nullptr);
    const GgufTensorInfo& a = *f->find("a");
    float first;
    std::memcpy(&first, f->data(a), 4);
    EXPECT_EQ(first, 1.0f);

    auto message = [](auto&& fn) {
        try {
            fn();
        } catch (const FormatError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_NE(message([&] { f->string("absent"); }).find("metadata key 'absent' is missing: expected a string"),
              std::string::npos);
    EXPECT_NE(message([&] { f->integer("general.name"); }).find("'general.name' is a string: expected an integer"),
              std::string::npos);
    EXPECT_NE(message([&] { f->integer("v.u64"); }).find("below 2^63"), std::string::npos);
    EXPECT_NE(message([&] { f->number("v.bool"); }).find("'v.bool' is a bool: expected a number"), std::string::npos);
    EXPECT_NE(message([&] { f->strings("ids"); }).find("'ids' is an array of int32: expected an array of strings"),
              std::string::npos);
    EXPECT_NE(message([&] { f->numbers("tokens"); }).find("expected an array of numbers"), std::string::npos);
    EXPECT_NE(message([&] { f->string("tokens"); }).find(path.string()), std::string::npos);

    EXPECT_THROW(GgufFile::open(path.parent_path() / "missing.gguf"), FormatError);
    EXPECT_THROW(GgufFile::open(path.parent_path()), FormatError);
    const fs::path shortFile = scratchFile("short.gguf");
    std::ofstream(shortFile, std::ios::binary) << "GGUF";
    EXPECT_THROW(GgufFile::open(shortFile), FormatError);
    fs::remove_all(path.parent_path());
}

// ---- dequantisation, worked out by hand ---------------------------------------

TEST(GgufDequantize, Q4_0) {
    // d = 0.5 (half 0x3800); byte j holds element j (low nibble) and j + 16 (high).
    std::vector<uint8_t> qs(16);
    for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    const auto y = dequant(GgmlType::Q4_0, q4_0Block(0x3800, qs) + q4_0Block(0x0000, qs), 64);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;
        EXPECT_EQ(y[j + 16], (7 - j) * 0.5f) << j;
        EXPECT_EQ(y[32 + j], 0.0f);
    }
    EXPECT_EQ(y[0], -4.0f);
    EXPECT_EQ(y[15], 3.5f);
    EXPECT_EQ(y[16], 3.5f);
    EXPECT_EQ(y[31], -4.0f);
    EXPECT_TRUE(std::signbit(y[32]));  // (0 - 8) x +0 = -0
}

TEST(GgufDequantize, Q4_1) {
    // d = 0.25 (0x3400), m = -1 (0xbc00): element = nibble x 0.25 - 1.
    Writer w;
    w.u16(0x3400).u16(0xbc00);
    for (int j = 0; j < 16; ++j) w.u8(static_cast<uint8_t>(j | ((15 - j) << 4)));
    const auto y = dequant(GgmlType::Q4_1, w.s, 32);
    EXPECT_EQ(y[0], -1.0f);
    EXPECT_EQ(y[4], 0.0f);
    EXPECT_EQ(y[15], 2.75f);
    EXPECT_EQ(y[16], 2.75f);
    EXPECT_EQ(y[31], -1.0f);
    for (int j = 0; j < 16; ++j) EXPECT_EQ(y[j], j * 0.25f - 1.0f);
}

TEST(GgufDequantize, Q8_0) {
    // d = 2 (0x4000); int8 quants.
    Writer w;
    w.u16(0x4000);
    const int8_t q[32] = {-128, -1, 0, 1, 127, 5, -5, 64};
    for (int8_t v : q) w.u8(static_cast<uint8_t>(v));
    const auto y = dequant(GgmlType::Q8_0, w.s, 32);
    const float expected[8] = {-256, -2, 0, 2, 254, 10, -10, 128};
    for (int j = 0; j < 8; ++j) EXPECT_EQ(y[j], expected[j]) << j;
    for (int j = 8; j < 32; ++j) EXPECT_EQ(y[j], 0.0f);
}

TEST(GgufDequantize, Q4_K) {
    // d = 1 (0x3c00), dmin = 0.5 (0x3800). Sub-block s (32 elements) has
    // scale sc[s] and min m[s], 6 bits each, packed by hand:
    //   bytes 0-3: sc[0..3] | (sc[4..7] >> 4) << 6
    //   bytes 4-7: m[0..3]  | (m[4..7] >> 4) << 6
    //   bytes 8-11: (sc[4..7] & 15) | (m[4..7] & 15) << 4
    const int sc[8] = {1, 2, 3, 4, 17, 33, 49, 63};
    const int m[8] = {0, 1, 2, 3, 16, 5, 34, 63};
    const uint8_t packed[12] = {0x41, 0x82, 0xc3, 0xc4, 0x40, 0x01, 0x82, 0xc3, 0x01, 0x51, 0x21, 0xff};
    Writer w;
    w.u16(0x3c00).u16(0x3800);
    for (uint8_t b : packed) w.u8(b);
    // 4 chunks of 32 bytes: sub-block 2c in the low nibbles, 2c + 1 in the high.
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) w.u8(static_cast<uint8_t>(((l + c) & 15) | (((15 - l) & 15) << 4)));
    ASSERT_EQ(w.s.size(), 144u);
    const auto y = dequant(GgmlType::Q4_K, w.s, 256);
    for (int s = 0; s < 8; ++s)
        for (int l = 0; l < 32; ++l) {
            const int c = s / 2;
            const int q = s % 2 == 0 ? ((l + c) & 15) : ((15 - l) & 15);
            EXPECT_EQ(y[s * 32 + l], static_cast<float>(sc[s] * q) - 0.5f * static_cast<float>(m[s])) << s << " " << l;
        }
    EXPECT_EQ(y[0], 0.0f);      // sc 1, q 0, m 0
    EXPECT_EQ(y[32], 29.5f);    // sc 2 x q 15 - 0.5 x m 1
    EXPECT_EQ(y[128], 26.0f);   // sub-block 4: sc 17 x q (0 + 2) - 0.5 x 16
    EXPECT_EQ(y[224], 913.5f);  // sub-block 7: sc 63 x q 15 - 0.5 x 63
    EXPECT_EQ(y[255], -31.5f);  // sub-block 7: q 0
}

TEST(GgufDequantize, F16SubnormalsInfinitiesAndNaN) {
    const uint16_t h[] = {0x0001, 0x03ff, 0x8001, 0x0400, 0x7bff, 0x7c00,
                          0xfc00, 0x7e00, 0x3c00, 0xc000, 0x8000, 0x3555};
    Writer w;
    for (uint16_t v : h) w.u16(v);
    const auto y = dequant(GgmlType::F16, w.s, 12);
    EXPECT_EQ(y[0], std::ldexp(1.0f, -24));
    EXPECT_EQ(y[1], std::ldexp(1023.0f, -24));
    EXPECT_EQ(y[2], -std::ldexp(1.0f, -24));
    EXPECT_EQ(y[3], std::ldexp(1.0f, -14));
    EXPECT_EQ(y[4], 65504.0f);
    EXPECT_EQ(y[5], std::numeric_limits<float>::infinity());
    EXPECT_EQ(y[6], -std::numeric_limits<float>::infinity());
    EXPECT_TRUE(std::isnan(y[7]));
    EXPECT_EQ(bits(y[7]), 0x7fc00000u);
    EXPECT_EQ(y[8], 1.0f);
    EXPECT_EQ(y[9], -2.0f);
    EXPECT_EQ(bits(y[10]), 0x80000000u);
    EXPECT_EQ(y[11], 0x1.554p-2f);
    EXPECT_EQ(halfToFloat(0x0200), std::ldexp(1.0f, -15));
}

TEST(GgufDequantize, BF16) {
    const uint16_t b[] = {0x3f80, 0xc040, 0x7f80, 0x0001, 0x7fc1, 0x8000};
    Writer w;
    for (uint16_t v : b) w.u16(v);
    const auto y = dequant(GgmlType::BF16, w.s, 6);
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], -3.0f);
    EXPECT_EQ(y[2], std::numeric_limits<float>::infinity());
    EXPECT_EQ(y[3], std::ldexp(1.0f, -133));
    EXPECT_EQ(bits(y[4]), 0x7fc10000u);
    EXPECT_EQ(bits(y[5]), 0x80000000u);
    EXPECT_EQ(bf16ToFloat(0x4049), 3.140625f);
}

TEST(GgufDequantize, F32IsACopy) {
    const auto y = dequant(GgmlType::F32, floats({1.5f, -0.0f, 3e38f}), 3);
    EXPECT_EQ(y, (std::vector<float>{1.5f, -0.0f, 3e38f}));
}

TEST(GgufDequantize, RefusesUnsupportedTypesAndPartialBlocks) {
    std::vector<float> out(256);
    const std::vector<uint8_t> src(512, 0);
    try {
        dequantize(typeId(GgmlType::Q8_1), src.data(), 32, out.data(), "blk.0.w");
        ADD_FAILURE() << "Q8_1 dequantised";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("blk.0.w: cannot dequantise ggml type Q8_1"), std::string::npos)
            << e.what();
    }
    try {
        dequantize(23, src.data(), 32, out.data(), "x");
        ADD_FAILURE() << "type 23 dequantised";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("type 23"), std::string::npos) << e.what();
    }
    try {
        dequantize(typeId(GgmlType::Q4_K), src.data(), 100, out.data(), "x");
        ADD_FAILURE() << "a partial block dequantised";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("not a whole number of blocks of 256"), std::string::npos) << e.what();
    }
}
