// libFuzzer target: a whole GGUF file (header, metadata, tensor infos, data)
// parsed from memory as GgufFile::open parses a mapping, then every small
// tensor of a type dequantize() supports turned into floats.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/model/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const kvlens::GgufContents c = kvlens::GgufFile::parse(data, size, "fuzz.gguf");
        // What the loader relies on: the data section starts aligned, every
        // tensor lies inside the file, its byte count matches its dims, and
        // dequantize() reads only those bytes.
        if (c.alignment == 0 || (c.alignment & (c.alignment - 1)) != 0 || c.dataOffset % c.alignment != 0)
            __builtin_trap();
        std::vector<float> out;
        for (const auto& t : c.tensors) {
            if (t.dims.size() > 4) __builtin_trap();
            for (int64_t d : t.dims)
                if (d < 0) __builtin_trap();
            if (t.offset % c.alignment != 0) __builtin_trap();
            if (c.dataOffset > size && t.bytes > 0) __builtin_trap();
            if (t.bytes > 0 && (t.offset > size - c.dataOffset || t.bytes > size - c.dataOffset - t.offset))
                __builtin_trap();
            int64_t blockElements = 0;
            uint64_t blockBytes = 0;
            if (!kvlens::ggmlBlockLayout(t.type, &blockElements, &blockBytes)) __builtin_trap();
            const int64_t numel = t.numel();
            if (numel % blockElements != 0 || static_cast<uint64_t>(numel / blockElements) * blockBytes != t.bytes)
                __builtin_trap();
            if (numel > (int64_t{1} << 16) || t.bytes == 0) continue;
            out.assign(static_cast<size_t>(numel), 0.0f);
            try {
                kvlens::dequantize(t.type, data + c.dataOffset + t.offset, numel, out.data(), t.name);
            } catch (const kvlens::FormatError&) {
                // Q8_1 and Q8_K parse but are not dequantised.
                if (t.type != static_cast<uint32_t>(kvlens::GgmlType::Q8_1) &&
                    t.type != static_cast<uint32_t>(kvlens::GgmlType::Q8_K))
                    __builtin_trap();
            }
        }
    } catch (const kvlens::Error&) {
    }
    return 0;
}
