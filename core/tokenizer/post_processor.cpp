#include "core/tokenizer/post_processor.h"

#include <climits>
#include <string>

#include "core/tokenizer/config_node.h"

namespace kvlens::tok {
namespace {

// TemplateProcessing's "single" template, resolved to ids. BertProcessing
// and RobertaProcessing are the fixed template [cls] $A [sep].
class TemplateProcessor : public PostProcessor {
public:
    TemplateProcessor(std::vector<int32_t> before, std::vector<int32_t> after)
        : m_before(std::move(before)), m_after(std::move(after))
    {
    }
    void process(std::vector<int32_t>& ids, bool addSpecialTokens) const override
    {
        if (!addSpecialTokens) return;
        ids.insert(ids.begin(), m_before.begin(), m_before.end());
        ids.insert(ids.end(), m_after.begin(), m_after.end());
    }
    std::optional<int32_t> bosId() const override
    {
        return m_before.empty() ? std::nullopt : std::optional<int32_t>(m_before.front());
    }
    std::optional<int32_t> eosId() const override
    {
        return m_after.empty() ? std::nullopt : std::optional<int32_t>(m_after.back());
    }

private:
    std::vector<int32_t> m_before;  // ids placed before sequence A
    std::vector<int32_t> m_after;   // ids placed after it
};

// Offsets-only processors (ByteLevel) change no id.
class IdentityProcessor : public PostProcessor {
public:
    void process(std::vector<int32_t>&, bool) const override {}
};

class SequenceProcessor : public PostProcessor {
public:
    explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps) : m_steps(std::move(steps)) {}
    void process(std::vector<int32_t>& ids, bool addSpecialTokens) const override
    {
        for (const auto& step : m_steps) step->process(ids, addSpecialTokens);
    }
    std::optional<int32_t> bosId() const override
    {
        for (const auto& step : m_steps) {
            if (auto id = step->bosId()) return id;
        }
        return std::nullopt;
    }
    std::optional<int32_t> eosId() const override
    {
        for (const auto& step : m_steps) {
            if (auto id = step->eosId()) return id;
        }
        return std::nullopt;
    }

private:
    std::vector<std::unique_ptr<PostProcessor>> m_steps;
};

int32_t toId(const ConfigNode& node)
{
    if (!node.json().is_number_integer() || node.json().get<int64_t>() < 0 || node.json().get<int64_t>() > INT32_MAX) {
        node.malformed("expected a token id");
    }
    return static_cast<int32_t>(node.json().get<int64_t>());
}

std::unique_ptr<PostProcessor> makeTemplate(const ConfigNode& node)
{
    const ConfigNode single = node.at("single");
    const ConfigNode specials = node.has("special_tokens") ? node.at("special_tokens") : node;
    std::vector<int32_t> before, after;
    bool seenSequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
        const ConfigNode item = single.at(i);
        if (item.has("Sequence")) {
            // "B" only appears in pair templates; a single sequence is always A.
            if (item.at("Sequence").str("id") == "A") seenSequence = true;
            continue;
        }
        const std::string name = item.at("SpecialToken").str("id");
        if (!specials.has(name.c_str())) {
            item.malformed("special token '" + name + "' is not listed in special_tokens");
        }
        const ConfigNode ids = specials.at(name.c_str()).at("ids");
        for (size_t k = 0; k < ids.size(); ++k) (seenSequence ? after : before).push_back(toId(ids.at(k)));
    }
    return std::make_unique<TemplateProcessor>(std::move(before), std::move(after));
}

std::unique_ptr<PostProcessor> makeClsSep(const ConfigNode& node)
{
    // "cls": ["<s>", 0], "sep": ["</s>", 2]
    const ConfigNode cls = node.at("cls"), sep = node.at("sep");
    return std::make_unique<TemplateProcessor>(std::vector<int32_t>{toId(cls.at(size_t{1}))},
                                               std::vector<int32_t>{toId(sep.at(size_t{1}))});
}

}  // namespace

std::unique_ptr<PostProcessor> makePostProcessor(const ConfigNode& node)
{
    if (node.json().is_null()) return nullptr;
    const std::string type = node.type();
    if (type == "Sequence") return std::make_unique<SequenceProcessor>(sequenceSteps<PostProcessor>(node, "processors", makePostProcessor));
    if (type == "TemplateProcessing") return makeTemplate(node);
    if (type == "BertProcessing" || type == "RobertaProcessing") return makeClsSep(node);
    if (type == "ByteLevel") return std::make_unique<IdentityProcessor>();
    node.unsupported("post-processor", type);
}

}  // namespace kvlens::tok
