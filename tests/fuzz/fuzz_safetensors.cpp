// libFuzzer target: a whole .safetensors file (length prefix, JSON header,
// data section) parsed from memory as SafetensorsFile::open parses a mapping.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "core/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        std::map<std::string, std::string> metadata;
        uint64_t dataOffset = 0;
        const auto tensors = kvlens::SafetensorsFile::parseBytes(data, size, "fuzz.safetensors", &metadata, &dataOffset);
        // What the loader relies on: every tensor lies inside the file and
        // its shape agrees with its byte span.
        for (const auto& t : tensors) {
            if (dataOffset + t.end > size || t.begin > t.end) __builtin_trap();
            if (static_cast<uint64_t>(t.numel()) * kvlens::dtypeSize(t.dtype) != t.end - t.begin) __builtin_trap();
            for (int64_t d : t.shape)
                if (d < 0) __builtin_trap();
        }
    } catch (const kvlens::Error&) {
    }
    return 0;
}
