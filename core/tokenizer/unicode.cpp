#include "core/tokenizer/unicode.h"

#include <array>
#include <cstdlib>
#include <memory>
#include <unordered_map>

#include "core/error.h"

// Unicode normalization and case mapping come from utf8proc (Debian
// libutf8proc-dev, ~400 kB, C, no data files). Alternatives considered:
// ICU is ~35 MB of data and its normalizer works in UTF-16, so every piece
// would be converted twice; a hand-generated composition table would need the
// UCD files at build time and careful maintenance. utf8proc implements
// NFC/NFD/NFKC/NFKD exactly per UAX #15 (Unicode 15 in Debian 12), which is
// what the Rust `unicode-normalization` crate used by HF tokenizers does.
#include <utf8proc.h>

namespace kvlens::tok {

size_t utf8SequenceLength(unsigned char lead)
{
    if (lead < 0x80) return 1;
    if ((lead & 0xE0) == 0xC0) return 2;
    if ((lead & 0xF0) == 0xE0) return 3;
    if ((lead & 0xF8) == 0xF0) return 4;
    return 1;
}

namespace {

// A multi-byte lead byte's sequence length and the allowed range of the
// second byte (Unicode ch. 3, table 3-7); false for bytes that never lead.
struct Utf8Lead {
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
};

bool utf8Lead(unsigned char b0, Utf8Lead* out)
{
    Utf8Lead l;
    if (b0 >= 0xC2 && b0 <= 0xDF) l.len = 2;
    else if (b0 == 0xE0) { l.len = 3; l.lo = 0xA0; }
    else if (b0 >= 0xE1 && b0 <= 0xEC) l.len = 3;
    else if (b0 == 0xED) { l.len = 3; l.hi = 0x9F; }
    else if (b0 >= 0xEE && b0 <= 0xEF) l.len = 3;
    else if (b0 == 0xF0) { l.len = 4; l.lo = 0x90; }
    else if (b0 >= 0xF1 && b0 <= 0xF3) l.len = 4;
    else if (b0 == 0xF4) { l.len = 4; l.hi = 0x8F; }
    else return false;
    *out = l;
    return true;
}

}  // namespace

// Follows the table of well-formed byte sequences in Unicode ch. 3 (D92), so
// overlongs, surrogates and code points above U+10FFFF are rejected.
size_t wellFormedLength(std::string_view s, size_t i)
{
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char b0 = byte(i);
    if (b0 < 0x80) return 1;
    Utf8Lead lead;
    if (!utf8Lead(b0, &lead)) return 0;
    const size_t len = lead.len;
    if (i + 1 >= s.size() || byte(i + 1) < lead.lo || byte(i + 1) > lead.hi) return 0;
    for (size_t k = 2; k < len; ++k) {
        if (i + k >= s.size() || (byte(i + k) & 0xC0) != 0x80) return 0;
    }
    return len;
}

namespace {

// Number of leading bytes of an ill-formed sequence at s[i] that form a
// prefix of some well-formed sequence (the "maximal subpart"), at least 1.
size_t maximalSubpart(std::string_view s, size_t i)
{
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    Utf8Lead lead;
    if (!utf8Lead(byte(i), &lead)) return 1;
    const size_t len = lead.len;
    size_t k = 1;
    if (i + k < s.size() && byte(i + k) >= lead.lo && byte(i + k) <= lead.hi) {
        ++k;
        while (k < len && i + k < s.size() && (byte(i + k) & 0xC0) == 0x80) ++k;
    }
    return k;
}

}  // namespace

size_t findInvalidUtf8(std::string_view s)
{
    size_t i = 0;
    while (i < s.size()) {
        const size_t len = wellFormedLength(s, i);
        if (len == 0) return i;
        i += len;
    }
    return std::string_view::npos;
}

char32_t nextCodePoint(std::string_view s, size_t& i)
{
    const unsigned char b0 = static_cast<unsigned char>(s[i]);
    const size_t len = utf8SequenceLength(b0);
    if (len == 1 || i + len > s.size()) {
        ++i;
        return b0;
    }
    char32_t cp = b0 & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    i += len;
    return cp;
}

void appendUtf8(std::string& out, char32_t cp)
{
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string toUtf8(char32_t cp)
{
    std::string s;
    appendUtf8(s, cp);
    return s;
}

std::string lossyUtf8(std::string_view bytes)
{
    std::string out;
    out.reserve(bytes.size());
    size_t i = 0;
    while (i < bytes.size()) {
        const size_t len = wellFormedLength(bytes, i);
        if (len > 0) {
            out.append(bytes.substr(i, len));
            i += len;
        } else {
            out.append("\xEF\xBF\xBD");  // U+FFFD
            i += maximalSubpart(bytes, i);
        }
    }
    return out;
}

bool isWhiteSpace(char32_t cp)
{
    switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20:
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

bool isNumeric(char32_t cp)
{
    const utf8proc_category_t cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
    return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool isWordChar(char32_t cp)
{
    if (cp == '_' || cp == 0x200C || cp == 0x200D) return true;
    // Other_Alphabetic symbols outside L/M/Nl: circled and squared Latin letters.
    if ((cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) || (cp >= 0x1F150 && cp <= 0x1F169) ||
        (cp >= 0x1F170 && cp <= 0x1F189)) {
        return true;
    }
    const utf8proc_category_t cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
    switch (cat) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return true;
    default:
        return false;
    }
}

bool isPunctuation(char32_t cp)
{
    if (cp < 0x80) return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
                          (cp >= 0x7B && cp <= 0x7E);
    const utf8proc_category_t cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
    return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

namespace {

// Code points below U+0300 are NFC_Quick_Check=Yes and never combine with a
// following code point below U+0300, so text made only of them is already in
// every normal form except the compatibility ones. UTF-8 lead bytes below
// 0xCC encode exactly the code points below U+0300.
bool belowCombiningRange(std::string_view s)
{
    for (char c : s) {
        if (static_cast<unsigned char>(c) >= 0xCC) return false;
    }
    return true;
}

}  // namespace

std::string normalizeUnicode(std::string_view s, NormalForm form)
{
    const bool compat = form == NormalForm::NFKC || form == NormalForm::NFKD;
    if (!compat && belowCombiningRange(s)) return std::string(s);
    int options = UTF8PROC_STABLE;
    options |= (form == NormalForm::NFC || form == NormalForm::NFKC) ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE;
    if (compat) options |= UTF8PROC_COMPAT;
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                            static_cast<utf8proc_ssize_t>(s.size()), &out,
                                            static_cast<utf8proc_option_t>(options));
    std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
    if (n < 0) {
        // Input is validated before normalization, so this is an allocation failure.
        throw TokenizerError(std::string("Unicode normalization failed: ") + utf8proc_errmsg(n));
    }
    return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

std::string lowercase(std::string_view s)
{
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
        const char32_t cp = nextCodePoint(s, i);
        if (cp == 0x130) {
            // The only code point whose full lowercase mapping is two code
            // points (SpecialCasing.txt); utf8proc gives the simple mapping.
            out.append("i\xCC\x87");
        } else {
            appendUtf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
        }
    }
    return out;
}

std::string stripCombiningMarks(std::string_view s)
{
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
        const size_t start = i;
        const char32_t cp = nextCodePoint(s, i);
        const utf8proc_category_t cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
        if (cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME) continue;
        out.append(s.substr(start, i - start));
    }
    return out;
}

namespace {

struct ByteLevelTable {
    std::array<std::string, 256> chars;
    std::unordered_map<char32_t, int> bytes;

    ByteLevelTable()
    {
        // Printable Latin-1 bytes map to themselves; the 68 others are moved
        // to U+0100 upwards in byte order (GPT-2's bytes_to_unicode).
        const auto printable = [](int b) {
            return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        };
        char32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const char32_t cp = printable(b) ? static_cast<char32_t>(b) : next++;
            chars[b] = toUtf8(cp);
            bytes[cp] = b;
        }
    }
};

const ByteLevelTable& byteLevelTable()
{
    static const ByteLevelTable table;
    return table;
}

}  // namespace

const std::string& byteLevelChar(uint8_t byte) { return byteLevelTable().chars[byte]; }

int byteLevelByte(char32_t cp)
{
    const auto& bytes = byteLevelTable().bytes;
    const auto it = bytes.find(cp);
    return it == bytes.end() ? -1 : it->second;
}

}  // namespace kvlens::tok
