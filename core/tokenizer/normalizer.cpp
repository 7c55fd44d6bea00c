#include "core/tokenizer/normalizer.h"

#include <vector>

#include "core/tokenizer/config_node.h"
#include "core/tokenizer/pattern.h"
#include "core/tokenizer/unicode.h"

namespace kvlens::tok {
namespace {

class SequenceNormalizer : public Normalizer {
public:
    explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : m_steps(std::move(steps)) {}
    void normalize(std::string& text) const override
    {
        for (const auto& step : m_steps) step->normalize(text);
    }

private:
    std::vector<std::unique_ptr<Normalizer>> m_steps;
};

class UnicodeNormalizer : public Normalizer {
public:
    explicit UnicodeNormalizer(NormalForm form) : m_form(form) {}
    void normalize(std::string& text) const override { text = normalizeUnicode(text, m_form); }

private:
    NormalForm m_form;
};

class LowercaseNormalizer : public Normalizer {
public:
    void normalize(std::string& text) const override { text = lowercase(text); }
};

class StripAccentsNormalizer : public Normalizer {
public:
    void normalize(std::string& text) const override { text = stripCombiningMarks(text); }
};

class StripNormalizer : public Normalizer {
public:
    StripNormalizer(bool left, bool right) : m_left(left), m_right(right) {}
    void normalize(std::string& text) const override
    {
        size_t begin = 0, end = text.size();
        if (m_left) {
            while (begin < text.size()) {
                size_t next = begin;
                if (!isWhiteSpace(nextCodePoint(text, next))) break;
                begin = next;
            }
        }
        if (m_right) {
            // Scan forward, remembering the end of the last non-space character.
            size_t i = begin;
            end = begin;
            while (i < text.size()) {
                if (!isWhiteSpace(nextCodePoint(text, i))) end = i;
            }
        }
        text = text.substr(begin, end - begin);
    }

private:
    bool m_left, m_right;
};

class ReplaceNormalizer : public Normalizer {
public:
    ReplaceNormalizer(Pattern pattern, std::string content)
        : m_pattern(std::move(pattern)), m_content(std::move(content))
    {
    }
    void normalize(std::string& text) const override
    {
        const std::vector<Span> matches = m_pattern.findAll(text);
        if (matches.empty()) return;
        std::string out;
        out.reserve(text.size());
        size_t last = 0;
        for (const Span& m : matches) {
            out.append(text, last, m.start - last);
            out.append(m_content);
            last = m.end;
        }
        out.append(text, last, std::string::npos);
        text = std::move(out);
    }

private:
    Pattern m_pattern;
    std::string m_content;
};

class PrependNormalizer : public Normalizer {
public:
    explicit PrependNormalizer(std::string prefix) : m_prefix(std::move(prefix)) {}
    void normalize(std::string& text) const override
    {
        if (!text.empty()) text.insert(0, m_prefix);
    }

private:
    std::string m_prefix;
};

// Maps every byte to GPT-2's printable byte character, like the ByteLevel
// pre-tokenizer but as a normalizer (some tokenizers put it there).
class ByteLevelNormalizer : public Normalizer {
public:
    void normalize(std::string& text) const override
    {
        std::string out;
        out.reserve(text.size() * 2);
        for (char c : text) out.append(byteLevelChar(static_cast<uint8_t>(c)));
        text = std::move(out);
    }
};

}  // namespace

std::unique_ptr<Normalizer> makeNormalizer(const ConfigNode& node)
{
    if (node.json().is_null()) return nullptr;
    const std::string type = node.type();
    if (type == "Sequence") return std::make_unique<SequenceNormalizer>(sequenceSteps<Normalizer>(node, "normalizers", makeNormalizer));
    if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFC);
    if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFD);
    if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKC);
    if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKD);
    if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
    if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
    if (type == "Strip") {
        return std::make_unique<StripNormalizer>(node.boolOr("strip_left", true), node.boolOr("strip_right", true));
    }
    if (type == "Replace") {
        return std::make_unique<ReplaceNormalizer>(Pattern::fromConfig(node.at("pattern")), node.str("content"));
    }
    if (type == "Prepend") return std::make_unique<PrependNormalizer>(node.str("prepend"));
    if (type == "ByteLevel") return std::make_unique<ByteLevelNormalizer>();
    node.unsupported("normalizer", type);
}

}  // namespace kvlens::tok
