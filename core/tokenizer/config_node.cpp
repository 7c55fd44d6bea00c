#include "core/tokenizer/config_node.h"

#include "core/error.h"

namespace kvlens::tok {

ConfigNode::ConfigNode(const nlohmann::json& json, std::string path, const std::string& file)
    : m_json(json), m_path(std::move(path)), m_file(file)
{
}

std::string ConfigNode::childPath(const std::string& key) const
{
    return m_path.empty() ? key : m_path + "." + key;
}

bool ConfigNode::has(const char* key) const
{
    if (!m_json.is_object()) return false;
    const auto it = m_json.find(key);
    return it != m_json.end() && !it->is_null();
}

ConfigNode ConfigNode::at(const char* key) const
{
    if (!m_json.is_object()) malformed("expected an object");
    const auto it = m_json.find(key);
    if (it == m_json.end() || it->is_null()) throw FormatError(m_file, "missing field '" + childPath(key) + "'");
    return ConfigNode(*it, childPath(key), m_file);
}

ConfigNode ConfigNode::at(size_t index) const
{
    if (!m_json.is_array() || index >= m_json.size()) {
        malformed("expected an array with an element " + std::to_string(index));
    }
    return ConfigNode(m_json[index], m_path + "[" + std::to_string(index) + "]", m_file);
}

size_t ConfigNode::size() const
{
    if (!m_json.is_array()) malformed("expected an array");
    return m_json.size();
}

std::string ConfigNode::asString() const
{
    if (!m_json.is_string()) malformed("expected a string");
    return m_json.get<std::string>();
}

std::string ConfigNode::str(const char* key) const { return at(key).asString(); }

std::string ConfigNode::strOr(const char* key, const std::string& fallback) const
{
    return has(key) ? str(key) : fallback;
}

bool ConfigNode::boolOr(const char* key, bool fallback) const
{
    if (!has(key)) return fallback;
    const ConfigNode node = at(key);
    if (!node.m_json.is_boolean()) node.malformed("expected true or false");
    return node.m_json.get<bool>();
}

int64_t ConfigNode::integer(const char* key) const
{
    const ConfigNode node = at(key);
    if (!node.m_json.is_number_integer()) node.malformed("expected an integer");
    return node.m_json.get<int64_t>();
}

int64_t ConfigNode::integerOr(const char* key, int64_t fallback) const
{
    return has(key) ? integer(key) : fallback;
}

void ConfigNode::malformed(const std::string& detail) const
{
    throw FormatError(m_file, (m_path.empty() ? std::string("top level") : m_path) + ": " + detail);
}

void ConfigNode::unsupported(const std::string& kind, const std::string& name) const
{
    throw TokenizerError(m_file + ": unsupported " + kind + " '" + name + "' at " +
                         (m_path.empty() ? std::string("top level") : m_path));
}

}  // namespace kvlens::tok
