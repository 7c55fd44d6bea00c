// libFuzzer target: session files (versioned JSON). A session that loads
// saves back to JSON and loads again to the same content.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io/session_file.h"
#include "core/policy/budget.h"
#include "core/policy/policy_info.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return 0;
    try {
        const kvlens::SessionFile s = kvlens::sessionFromJson(j, "fuzz.kvlens");
        // What opening it in the GUI parses next (app/gui/main_window.cpp).
        try {
            for (const auto& p : s.policies) (void)kvlens::parsePolicySpec(p);
            if (!s.budgets.empty()) (void)kvlens::parseLayerBudgets(s.budgets);
            if (!s.budget.empty()) (void)kvlens::parseBudget(s.budget);
        } catch (const kvlens::ArgumentError&) {
        }
        const nlohmann::json again = kvlens::sessionToJson(s);
        (void)again.dump();  // what saveSession writes
        const kvlens::SessionFile t = kvlens::sessionFromJson(again, "fuzz.kvlens (saved)");
        if (t.prompt != s.prompt || t.policies != s.policies || t.budget != s.budget) __builtin_trap();
    } catch (const kvlens::Error&) {
    }
    return 0;
}
