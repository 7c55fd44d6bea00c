// libFuzzer target: tokenizer.json. A definition that loads is then used:
// a few fixed texts are encoded and decoded again, every id labelled.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const char* const kTexts[] = {"", "Hello world", " The code for the red door is 4821.\n",
                                         "caf\xc3\xa9 \xe2\x96\x81 <s> \xf0\x9f\x99\x82"};
    try {
        const auto tok =
            kvlens::Tokenizer::fromJson(std::string(reinterpret_cast<const char*>(data), size), "fuzz/tokenizer.json");
        for (const char* text : kTexts) {
            const auto ids = tok.encode(text);
            for (int32_t id : ids)
                if (id < 0 || id >= tok.vocabSize()) __builtin_trap();
            (void)tok.decode(ids);
            (void)tok.decode(ids, /*skipSpecialTokens=*/true);
            for (int32_t id : ids) (void)tok.tokenLabel(id);
        }
    } catch (const kvlens::Error&) {
    }
    return 0;
}
