#pragma once
// File names of an "export all" (kvlens-cli export --all-… and the GUI's
// Export all): RUN_LLL_HHH.EXT with the run's policy id ("snapkv", or
// "snapkv-2" for a second run of the same policy), so scripts can find them.
#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include "core/run/trace.h"

namespace kvlens {

inline std::vector<std::string> exportRunNames(const Trace& t) {
    std::vector<std::string> names;
    for (const auto& p : t.policies) {
        int same = 0;
        for (const auto& n : names) same += n == p.id || n.rfind(p.id + "-", 0) == 0;
        names.push_back(same == 0 ? p.id : p.id + "-" + std::to_string(same + 1));
    }
    return names;
}

// "snapkv_L02_H05.png"
inline std::string exportFileName(const std::string& run, int64_t layer, int64_t head, const std::string& ext) {
    auto two = [](int64_t v) { return (v < 10 ? "0" : "") + std::to_string(v); };
    return run + "_L" + two(layer) + "_H" + two(head) + ext;
}

// A figure's or table's default file name, saying what it shows:
// "kvlens-tiny_snapkv-window-16_b48_L02_H05_s4" — model, the run's label
// (characters a file name should not hold turned into '-'), its mean layer
// budget (none for the full cache), layer, query head, decode step.
inline std::string exportDescriptiveName(const std::string& model, const Trace& t, size_t run, int64_t layer,
                                         int64_t head) {
    auto clean = [](std::string s) {
        for (char& c : s)
            if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '-';
        return s;
    };
    auto two = [](int64_t v) { return (v < 10 ? "0" : "") + std::to_string(v); };
    std::string name = clean(model.empty() ? std::string("kvlens") : model);
    if (run < t.policies.size()) {
        const PolicyTrace& p = t.policies[run];
        name += "_" + clean(p.label.empty() ? p.id : p.label);
        if (run > 0 && !p.layers.empty()) {
            double sum = 0;
            for (const auto& l : p.layers) sum += static_cast<double>(l.budget);
            name += "_b" + std::to_string(static_cast<int64_t>(sum / static_cast<double>(p.layers.size()) + 0.5));
        }
    }
    return name + "_L" + two(layer) + "_H" + two(head) + "_s" + std::to_string(t.step);
}

}  // namespace kvlens
