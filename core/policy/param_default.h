#pragma once
// Whether a config's parameter is still at its registered default, as the
// policy's label leaves it out (Session's query-aware rule replaces a
// default window only). Kept out of policy_info.h, which most files include.
#include <string>

namespace kvlens {

struct PolicyConfig;

// False when the policy has no such parameter.
bool atDefault(const PolicyConfig& config, const std::string& param);

}  // namespace kvlens
