#pragma once
// Reading the fields of a JSON file the user wrote (sweeps, lessons): each
// field named by its path ("steps[2].question.answer") when it is missing,
// of the wrong type, or not one the format knows. Errors are ArgumentError;
// the reader adds the file's name. Torch-free, header-only.
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kvlens {

// Field `name` of object `j` (at `path`, "" or "a.b."), or `fallback` when
// absent; absent and `required`: an error.
template <class T>
T jsonField(const nlohmann::json& j, const std::string& path, const std::string& name, const T& fallback,
            bool required = false) {
    const auto it = j.find(name);
    if (it == j.end()) {
        if (required) throw ArgumentError("\"" + path + name + "\" is missing");
        return fallback;
    }
    try {
        return it->get<T>();
    } catch (const nlohmann::json::exception&) {
        throw ArgumentError("\"" + path + name + "\" is " + it->dump() + ", not the expected type");
    }
}

// `j` must be an object holding only the fields `known`.
inline void checkFields(const nlohmann::json& j, const std::string& path, std::initializer_list<const char*> known) {
    if (!j.is_object())
        throw ArgumentError("\"" + (path.empty() ? std::string("(top)") : path.substr(0, path.size() - 1)) +
                            "\" is " + j.dump() + ", expected an object");
    for (const auto& item : j.items()) {
        bool ok = false;
        for (const char* k : known) ok = ok || item.key() == k;
        if (!ok) throw ArgumentError("unknown field \"" + path + item.key() + "\"");
    }
}

}  // namespace kvlens
