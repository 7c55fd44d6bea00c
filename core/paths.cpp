#include "core/paths.h"

#include <unistd.h>

#include <cstdlib>

#include "core/error.h"

namespace kvlens {
namespace fs = std::filesystem;

std::vector<fs::path> resourceSearchPath() {
    std::vector<fs::path> out;
    if (const char* env = std::getenv("KVLENS_RESOURCES"); env && *env) out.emplace_back(env);
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) out.push_back(exe.parent_path().parent_path() / "share" / "kvlens");
    out.emplace_back(KVLENS_INSTALLED_RESOURCES);
    out.emplace_back(KVLENS_SOURCE_RESOURCES);
    return out;
}

fs::path findResource(const fs::path& relative) {
    std::string searched;
    for (const auto& dir : resourceSearchPath()) {
        std::error_code ec;
        if (fs::exists(dir / relative, ec)) return dir / relative;
        searched += (searched.empty() ? "" : ", ") + (dir / relative).string();
    }
    throw Error("resource '" + relative.string() + "' not found (searched: " + searched +
                "; set KVLENS_RESOURCES to the folder holding it)");
}

fs::path bundledModelDir() { return findResource("models/kvlens-tiny"); }

fs::path findDocument(const std::string& name) {
    std::string searched;
    for (const auto& dir : resourceSearchPath()) {
        // <prefix>/share/kvlens -> <prefix>/share/doc/kvlens; <source>/resources -> <source>/docs.
        for (const fs::path& docs : {dir.parent_path() / "doc" / "kvlens", dir.parent_path() / "docs"}) {
            std::error_code ec;
            if (fs::exists(docs / name, ec)) return docs / name;
            searched += (searched.empty() ? "" : ", ") + (docs / name).string();
        }
    }
    throw Error("document '" + name + "' not found (searched: " + searched + ")");
}

}  // namespace kvlens
