#pragma once
// UTF-8 and Unicode helpers shared by the tokenizer stages. Strings are UTF-8
// std::string throughout; code points are char32_t.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvlens::tok {

// Byte offset of the first byte that does not start a well-formed UTF-8
// sequence (overlongs, surrogates and > U+10FFFF rejected), or npos.
size_t findInvalidUtf8(std::string_view s);

// Length of the well-formed UTF-8 sequence at s[i], 0 if ill-formed there.
size_t wellFormedLength(std::string_view s, size_t i);

// Decodes the code point starting at s[i] (s must be valid UTF-8) and moves i
// past it.
char32_t nextCodePoint(std::string_view s, size_t& i);
// Byte length of the UTF-8 sequence whose lead byte is `lead` (1 for stray bytes).
size_t utf8SequenceLength(unsigned char lead);
void appendUtf8(std::string& out, char32_t cp);
std::string toUtf8(char32_t cp);

// Rust's String::from_utf8_lossy: each maximal invalid subpart becomes one U+FFFD.
std::string lossyUtf8(std::string_view bytes);

// Unicode White_Space, i.e. Rust's char::is_whitespace and regex `\s`.
bool isWhiteSpace(char32_t cp);

// Rust's char::is_numeric (Nd, Nl, No) and the Punctuation pre-tokenizer's
// test (ASCII punctuation or any P* category).
bool isNumeric(char32_t cp);
// The Rust regex crate's Unicode \w: Alphabetic, marks, Nd, Pc, joiners
// (added tokens with single_word look at the characters around a match).
bool isWordChar(char32_t cp);
bool isPunctuation(char32_t cp);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string normalizeUnicode(std::string_view s, NormalForm form);
// Per-character full lowercase mapping (Rust char::to_lowercase).
std::string lowercase(std::string_view s);
// Removes combining marks (Mn, Mc, Me), as the StripAccents normalizer does.
std::string stripCombiningMarks(std::string_view s);

// GPT-2's reversible byte <-> printable character table: every byte maps to a
// code point that is not whitespace or a control character.
const std::string& byteLevelChar(uint8_t byte);  // UTF-8 of the mapped code point
int byteLevelByte(char32_t cp);                  // -1 when cp is not in the table

}  // namespace kvlens::tok
