#pragma once
// Where KVLens finds its resources (bundled model, examples): $KVLENS_RESOURCES,
// then <exe>/../share/kvlens (an installed or relocated package), then the
// install prefix, then the source tree it was built from.
#include <filesystem>
#include <string>
#include <vector>

namespace kvlens {

std::vector<std::filesystem::path> resourceSearchPath();
// The first search-path entry that holds `relative`; throws Error listing the
// places searched when none does.
std::filesystem::path findResource(const std::filesystem::path& relative);
std::filesystem::path bundledModelDir();  // findResource("models/kvlens-tiny")
// A page of the project's documentation (docs/ in the source tree,
// <prefix>/share/doc/kvlens installed), e.g. "policies.md": beside each
// resource folder of the search path; throws Error when none holds it.
std::filesystem::path findDocument(const std::string& name);

}  // namespace kvlens
