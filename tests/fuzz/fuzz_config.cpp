// libFuzzer target: config.json. A config that parses must describe shapes
// the model builder can allocate from (no zero or negative dimensions).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const auto c = kvlens::parseConfig(std::string(reinterpret_cast<const char*>(data), size), "fuzz/config.json");
        if (c.numHeads < 1 || c.numKvHeads < 1 || c.numHeads % c.numKvHeads != 0) __builtin_trap();
        if (c.hiddenSize < 1 || c.numLayers < 1 || c.vocabSize < 1 || c.headDim < 1) __builtin_trap();
        (void)c.groupSize();
    } catch (const kvlens::Error&) {
    }
    return 0;
}
