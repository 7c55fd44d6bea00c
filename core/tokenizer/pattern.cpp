#include "core/tokenizer/pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "core/tokenizer/config_node.h"
#include "core/tokenizer/unicode.h"

namespace kvlens::tok {

struct Regex::Code {
    pcre2_code* code = nullptr;
    ~Code() { pcre2_code_free(code); }
};

namespace {

std::string pcre2Message(int error)
{
    PCRE2_UCHAR buffer[256];
    pcre2_get_error_message(error, buffer, sizeof buffer);
    return reinterpret_cast<const char*>(buffer);
}

// The default 32 KiB JIT stack is enough for the tokenizer patterns on
// ordinary text; a pathological input (a megabyte of one character class)
// gets one retry with a large stack rather than an error.
struct JitStackRetry {
    pcre2_match_context* context = nullptr;
    pcre2_jit_stack* stack = nullptr;
    ~JitStackRetry()
    {
        pcre2_jit_stack_free(stack);
        pcre2_match_context_free(context);
    }
    pcre2_match_context* get()
    {
        if (!context) {
            context = pcre2_match_context_create(nullptr);
            stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
            if (!context || !stack) throw TokenizerError("out of memory for the regex JIT stack");
            pcre2_jit_stack_assign(context, nullptr, stack);
        }
        return context;
    }
};

}  // namespace

Regex::Regex(const std::string& pattern, const ConfigNode& where)
    : Regex(pattern, where.file() + ": " + where.path())
{
}

Regex::Regex(const std::string& pattern, const std::string& where)
{
    int error = 0;
    PCRE2_SIZE offset = 0;
    // UCP makes \s, \w, \d and POSIX classes Unicode-aware, as in Oniguruma.
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (!code) {
        throw TokenizerError(where + ": unsupported regex '" + pattern + "' (" + pcre2Message(error) +
                             " at offset " + std::to_string(offset) + ")");
    }
    auto owned = std::make_shared<Code>();
    owned->code = code;
    // JIT is an optimisation only: without it (e.g. an architecture PCRE2's
    // JIT does not support) the interpreter gives the same matches.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    m_code = std::move(owned);
}

std::vector<Span> Regex::findAll(std::string_view text) const
{
    std::vector<Span> out;
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
        pcre2_match_data_create_from_pattern(m_code->code, nullptr), &pcre2_match_data_free);
    if (!data) throw TokenizerError("out of memory for regex match data");
    JitStackRetry retry;
    pcre2_match_context* context = nullptr;
    const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t searchFrom = 0;
    bool haveLast = false;
    size_t lastMatchEnd = 0;
    while (searchFrom <= text.size()) {
        // Text is validated UTF-8 before it reaches any pattern.
        const int rc = pcre2_match(m_code->code, subject, text.size(), searchFrom, PCRE2_NO_UTF_CHECK,
                                   data.get(), context);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !context) {
            context = retry.get();
            continue;
        }
        if (rc < 0) throw TokenizerError("regex matching failed: " + pcre2Message(rc));
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
        const size_t start = ovector[0], end = ovector[1];
        if (start == end && haveLast && end == lastMatchEnd) {
            // onig's find_iter: no empty match right after the previous one.
            if (searchFrom >= text.size()) break;
            searchFrom += utf8SequenceLength(static_cast<unsigned char>(text[searchFrom]));
            continue;
        }
        out.push_back({start, end});
        haveLast = true;
        lastMatchEnd = end;
        searchFrom = end;
    }
    return out;
}

Pattern Pattern::fromConfig(const ConfigNode& node)
{
    if (node.has("String")) return literal(node.str("String"));
    if (node.has("Regex")) return regex(Regex(node.str("Regex"), node.at("Regex")));
    node.malformed("expected a pattern {\"String\": ...} or {\"Regex\": ...}");
}

Pattern Pattern::literal(std::string text)
{
    Pattern p;
    p.m_literal = std::move(text);
    return p;
}

Pattern Pattern::regex(Regex re)
{
    Pattern p;
    p.m_regex = std::make_shared<const Regex>(std::move(re));
    return p;
}

std::vector<Span> Pattern::findAll(std::string_view text) const
{
    if (m_regex) return m_regex->findAll(text);
    std::vector<Span> out;
    // An empty literal would match between every character in HF; no real
    // tokenizer uses one, so it matches nothing here.
    if (m_literal.empty()) return out;
    size_t pos = text.find(m_literal);
    while (pos != std::string_view::npos) {
        out.push_back({pos, pos + m_literal.size()});
        pos = text.find(m_literal, pos + m_literal.size());
    }
    return out;
}

std::vector<MarkedSpan> Pattern::findMarked(std::string_view text, bool invert) const
{
    if (text.empty()) return {{0, 0, invert}};
    return markSpans(text, findAll(text), invert);
}

std::vector<MarkedSpan> markSpans(std::string_view text, const std::vector<Span>& matches, bool invert)
{
    if (text.empty()) return {{0, 0, invert}};
    std::vector<MarkedSpan> out;
    out.reserve(matches.size() * 2 + 1);
    size_t prev = 0;
    for (const Span& m : matches) {
        if (prev != m.start) out.push_back({prev, m.start, invert});
        out.push_back({m.start, m.end, !invert});
        prev = m.end;
    }
    if (prev != text.size()) out.push_back({prev, text.size(), invert});
    return out;
}

}  // namespace kvlens::tok
