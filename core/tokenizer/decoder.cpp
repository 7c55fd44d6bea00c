#include "core/tokenizer/decoder.h"

#include "core/tokenizer/config_node.h"
#include "core/tokenizer/pattern.h"
#include "core/tokenizer/unicode.h"

namespace kvlens::tok {
namespace {

class SequenceDecoder : public Decoder {
public:
    explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : m_steps(std::move(steps)) {}
    void decodeChain(std::vector<std::string>& tokens) const override
    {
        for (const auto& step : m_steps) step->decodeChain(tokens);
    }
    bool isByteLevel() const override { return any([](const Decoder& d) { return d.isByteLevel(); }); }
    bool isByteFallback() const override { return any([](const Decoder& d) { return d.isByteFallback(); }); }
    std::string spaceMarker() const override
    {
        for (const auto& step : m_steps) {
            if (!step->spaceMarker().empty()) return step->spaceMarker();
        }
        return {};
    }

private:
    template <class F>
    bool any(F f) const
    {
        for (const auto& step : m_steps) {
            if (f(*step)) return true;
        }
        return false;
    }
    std::vector<std::unique_ptr<Decoder>> m_steps;
};

// Concatenates everything, maps GPT-2 byte characters back to bytes and
// decodes them lossily; a token with a character outside the byte table
// (an added token with a space, say) contributes its raw UTF-8.
class ByteLevelDecoder : public Decoder {
public:
    void decodeChain(std::vector<std::string>& tokens) const override
    {
        std::string bytes;
        for (const std::string& token : tokens) {
            std::string mapped;
            mapped.reserve(token.size());
            bool allMapped = true;
            size_t i = 0;
            while (i < token.size() && allMapped) {
                const int b = byteLevelByte(nextCodePoint(token, i));
                if (b < 0) allMapped = false;
                else mapped.push_back(static_cast<char>(b));
            }
            bytes += allMapped ? mapped : token;
        }
        tokens.assign(1, lossyUtf8(bytes));
    }
    bool isByteLevel() const override { return true; }
};

class ReplaceDecoder : public Decoder {
public:
    ReplaceDecoder(Pattern pattern, std::string literal, std::string content)
        : m_pattern(std::move(pattern)), m_literal(std::move(literal)), m_content(std::move(content))
    {
    }
    void decodeChain(std::vector<std::string>& tokens) const override
    {
        for (std::string& token : tokens) {
            const std::vector<Span> matches = m_pattern.findAll(token);
            if (matches.empty()) continue;
            std::string out;
            size_t last = 0;
            for (const Span& m : matches) {
                out.append(token, last, m.start - last);
                out.append(m_content);
                last = m.end;
            }
            out.append(token, last, std::string::npos);
            token = std::move(out);
        }
    }
    std::string spaceMarker() const override { return m_content == " " ? m_literal : std::string(); }

private:
    Pattern m_pattern;
    std::string m_literal;  // the String pattern, "" for a regex
    std::string m_content;
};

// Runs of "<0xNN>" tokens become the text they encode; an invalid run gives
// one U+FFFD per byte, as HF does (not the lossy per-subpart rule).
class ByteFallbackDecoder : public Decoder {
public:
    void decodeChain(std::vector<std::string>& tokens) const override
    {
        std::vector<std::string> out;
        out.reserve(tokens.size());
        std::string pending;
        const auto flush = [&] {
            if (pending.empty()) return;
            if (findInvalidUtf8(pending) == std::string::npos) {
                out.push_back(pending);
            } else {
                for (size_t i = 0; i < pending.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
            }
            pending.clear();
        };
        for (std::string& token : tokens) {
            int byte = parseByteToken(token);
            if (byte >= 0) {
                pending.push_back(static_cast<char>(byte));
            } else {
                flush();
                out.push_back(std::move(token));
            }
        }
        flush();
        tokens = std::move(out);
    }
    bool isByteFallback() const override { return true; }

    static int parseByteToken(const std::string& token)
    {
        if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
        const auto hex = [](char c) {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            return -1;
        };
        const int hi = hex(token[3]), lo = hex(token[4]);
        return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
    }
};

class FuseDecoder : public Decoder {
public:
    void decodeChain(std::vector<std::string>& tokens) const override
    {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
    }
};

// Removes up to `start` leading and `stop` trailing copies of one character
// from every token.
class StripDecoder : public Decoder {
public:
    StripDecoder(char32_t content, size_t start, size_t stop) : m_content(content), m_start(start), m_stop(stop) {}
    void decodeChain(std::vector<std::string>& tokens) const override
    {
        for (std::string& token : tokens) {
            std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, code point)
            size_t i = 0;
            while (i < token.size()) {
                const size_t at = i;
                chars.emplace_back(at, nextCodePoint(token, i));
            }
            size_t first = 0, last = chars.size();
            while (first < m_start && first < chars.size() && chars[first].second == m_content) ++first;
            for (size_t k = 0; k < m_stop && last > first && chars[last - 1].second == m_content; ++k) --last;
            const size_t begin = first < chars.size() ? chars[first].first : token.size();
            const size_t end = last < chars.size() ? chars[last].first : token.size();
            token = token.substr(begin, end - begin);
        }
    }

private:
    char32_t m_content;
    size_t m_start, m_stop;
};

class MetaspaceDecoder : public Decoder {
public:
    MetaspaceDecoder(std::string replacement, bool stripFirst)
        : m_replacement(std::move(replacement)), m_stripFirst(stripFirst)
    {
    }
    void decodeChain(std::vector<std::string>& tokens) const override
    {
        for (size_t t = 0; t < tokens.size(); ++t) {
            // HF drops every replacement character of the first token, not
            // only the leading one.
            const std::string with = t == 0 && m_stripFirst ? std::string() : std::string(" ");
            std::string out;
            size_t pos = 0, found;
            while ((found = tokens[t].find(m_replacement, pos)) != std::string::npos) {
                out.append(tokens[t], pos, found - pos);
                out += with;
                pos = found + m_replacement.size();
            }
            out.append(tokens[t], pos, std::string::npos);
            tokens[t] = std::move(out);
        }
    }
    std::string spaceMarker() const override { return m_replacement; }

private:
    std::string m_replacement;
    bool m_stripFirst;
};

char32_t singleChar(const ConfigNode& node, const char* key)
{
    const std::string s = node.str(key);
    size_t i = 0;
    if (s.empty()) node.at(key).malformed("expected a single character");
    const char32_t cp = nextCodePoint(s, i);
    if (i != s.size()) node.at(key).malformed("expected a single character");
    return cp;
}

size_t count(const ConfigNode& node, const char* key)
{
    const int64_t n = node.integerOr(key, 0);
    if (n < 0) node.at(key).malformed("expected a non-negative integer");
    return static_cast<size_t>(n);
}

std::unique_ptr<Decoder> makeMetaspaceDecoder(const ConfigNode& node)
{
    bool stripFirst = true;
    if (node.has("prepend_scheme")) stripFirst = node.str("prepend_scheme") != "never";
    else if (node.has("add_prefix_space")) stripFirst = node.boolOr("add_prefix_space", true);
    return std::make_unique<MetaspaceDecoder>(toUtf8(singleChar(node, "replacement")), stripFirst);
}

}  // namespace

std::unique_ptr<Decoder> makeDecoder(const ConfigNode& node)
{
    if (node.json().is_null()) return nullptr;
    const std::string type = node.type();
    if (type == "Sequence") return std::make_unique<SequenceDecoder>(sequenceSteps<Decoder>(node, "decoders", makeDecoder));
    if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
    if (type == "Replace") {
        const ConfigNode pattern = node.at("pattern");
        return std::make_unique<ReplaceDecoder>(Pattern::fromConfig(pattern), pattern.strOr("String", ""),
                                                node.str("content"));
    }
    if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
    if (type == "Fuse") return std::make_unique<FuseDecoder>();
    if (type == "Strip") {
        return std::make_unique<StripDecoder>(singleChar(node, "content"), count(node, "start"), count(node, "stop"));
    }
    if (type == "Metaspace") return makeMetaspaceDecoder(node);
    node.unsupported("decoder", type);
}

}  // namespace kvlens::tok
