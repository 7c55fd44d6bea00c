// libFuzzer target: prompt text (any bytes: invalid UTF-8, control
// characters, huge runs) encoded with the bundled model's tokenizer, then
// decoded; ids stay inside the vocabulary and valid UTF-8 round-trips.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const kvlens::Tokenizer tok = kvlens::Tokenizer::fromFile(KVLENS_FUZZ_TOKENIZER);
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const auto ids = tok.encode(text);
        for (int32_t id : ids)
            if (id < 0 || id >= tok.vocabSize()) __builtin_trap();
        (void)tok.decode(ids, /*skipSpecialTokens=*/true);
        for (int32_t id : ids) (void)tok.tokenLabel(id);
    } catch (const kvlens::ArgumentError&) {
        // invalid UTF-8: refused with the byte offset, never a crash
    }
    return 0;
}
