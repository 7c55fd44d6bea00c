#pragma once
// Read-only view of one object in tokenizer.json that knows its JSON path, so
// every missing field or unsupported component is reported as
// "<file>: <path>: <what>" (FormatError for malformed content, TokenizerError
// for valid but unsupported content).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvlens::tok {

class ConfigNode {
public:
    ConfigNode(const nlohmann::json& json, std::string path, const std::string& file);

    const nlohmann::json& json() const { return m_json; }
    const std::string& path() const { return m_path; }
    const std::string& file() const { return m_file; }

    // Present and not null.
    bool has(const char* key) const;
    // Required member; FormatError when missing or null.
    ConfigNode at(const char* key) const;
    ConfigNode at(size_t index) const;
    size_t size() const;  // array length; FormatError when not an array

    std::string str(const char* key) const;
    std::string strOr(const char* key, const std::string& fallback) const;
    bool boolOr(const char* key, bool fallback) const;
    int64_t integer(const char* key) const;
    int64_t integerOr(const char* key, int64_t fallback) const;
    // The string value of this node itself.
    std::string asString() const;
    // The "type" member, required.
    std::string type() const { return str("type"); }

    [[noreturn]] void malformed(const std::string& detail) const;
    // `kind` is e.g. "pre-tokenizer": "unsupported pre-tokenizer 'X' at <path>".
    [[noreturn]] void unsupported(const std::string& kind, const std::string& name) const;

private:
    std::string childPath(const std::string& key) const;

    const nlohmann::json& m_json;
    std::string m_path;
    const std::string& m_file;
};

// The steps of a "Sequence" component (normalizer, pre-tokenizer,
// post-processor, decoder): each element of node[key] built by `make`, in
// order; a step that builds to nothing (a null entry) is left out.
template <typename Step, typename Make>
std::vector<std::unique_ptr<Step>> sequenceSteps(const ConfigNode& node, const char* key, Make make)
{
    const ConfigNode list = node.at(key);
    std::vector<std::unique_ptr<Step>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
        if (auto step = make(list.at(i))) steps.push_back(std::move(step));
    }
    return steps;
}

}  // namespace kvlens::tok
