#pragma once
// File names of an "export all" (kvlens-cli export --all-… and the GUI's
// Export all): RUN_LLL_HHH.EXT with the run's policy id ("snapkv", or
// "snapkv-2" for a second run of the same policy), so scripts can find them.
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

}  // namespace kvlens
