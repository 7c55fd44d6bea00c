#pragma once
#include <string>

namespace kvlens {

// nlohmann::json's exception text as a sentence: "[json.exception.
// parse_error.101] parse error at line 1, column 2: syntax error while
// parsing object key - invalid literal; last read: '{n'; expected string
// literal" reads "not valid JSON at line 1, column 2: invalid literal in an
// object key, expected string literal (after '{n')"; other JSON errors lose
// their bracketed code ("type must be string, but is number").
// Inline (string work only) so that the tokenizer library, which links
// nothing of core, words its errors the same way.
inline std::string jsonErrorText(const std::string& what) {
    std::string t = what;
    if (t.rfind("[json.exception.", 0) == 0 && t.find("] ") != std::string::npos) t = t.substr(t.find("] ") + 2);
    const std::string at = "parse error at ", syntax = ": syntax error while parsing ", dash = " - ";
    const std::string lastRead = "; last read: ", expected = "; expected ";
    if (t.rfind(at, 0) != 0) return t.rfind("parse error", 0) == 0 ? "not valid JSON: " + t : t;
    const size_t s = t.find(syntax), d = t.find(dash, s == std::string::npos ? 0 : s);
    if (s == std::string::npos || d == std::string::npos) return "not valid JSON at " + t.substr(at.size());
    const std::string where = t.substr(at.size(), s - at.size()), what_ = t.substr(s + syntax.size(), d - s - syntax.size());
    std::string rest = t.substr(d + dash.size()), read, wanted;
    if (const size_t e = rest.find(expected); e != std::string::npos) {
        wanted = rest.substr(e + expected.size());
        rest.resize(e);
    }
    if (const size_t r = rest.find(lastRead); r != std::string::npos) {
        read = rest.substr(r + lastRead.size());
        rest.resize(r);
    }
    std::string out = "not valid JSON at " + where + ": " + rest + " in " + (what_ == "value" ? "a value" : "an " + what_);
    if (!wanted.empty()) out += ", expected " + wanted;
    if (!read.empty()) out += " (after " + read + ")";
    return out;
}

}  // namespace kvlens
