// libFuzzer target: model.safetensors.index.json (the shard list of a
// sharded model). Shard names must never leave the model directory.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const auto shards =
            kvlens::parseSafetensorsIndex(std::string(reinterpret_cast<const char*>(data), size), "fuzz.index.json");
        for (const auto& s : shards)
            if (s.empty() || s == ".." || s.find('/') != std::string::npos) __builtin_trap();
    } catch (const kvlens::Error&) {
    }
    return 0;
}
