#include "core/study/needle_io.h"

#include <cstdio>
#include <sstream>

#include "core/error.h"

namespace kvlens {

using nlohmann::json;

json needleGridToJson(const eval::NeedleGridResult& g) {
    json cells = json::array();
    for (const auto& c : g.cells) {
        json answers = json::array();
        for (const auto& a : c.answers)
            answers.push_back({{"seed", a.seed}, {"answer", a.answer}, {"expected", a.expected}, {"exact", a.exact},
                               {"overlap", a.overlap}});
        cells.push_back({{"context", c.context}, {"depth", c.depth}, {"policy", c.policy}, {"budget", c.budget},
                         {"exact", c.exact}, {"overlap", c.overlap}, {"prompt_tokens", c.promptTokens},
                         {"answers", answers}});
    }
    json policies = json::array();
    for (const auto& p : g.options.policies) policies.push_back(p.label());
    json budgets = json::array();
    for (const auto& b : g.options.budgets) budgets.push_back(b.text());
    return {{"format", "kvlens-needle"},
            {"version", 1},
            {"model", g.model},
            {"haystack", g.options.user ? "user" : "bundled"},
            {"contexts", g.options.contexts},
            {"depths", g.options.depths},
            {"policies", policies},
            {"budgets", budgets},
            {"samples", g.options.samples},
            {"seed", g.options.seed},
            {"cells", cells}};
}

eval::NeedleGridResult needleGridFromJson(const json& j) {
    const std::string what = "needle grid JSON";
    try {
        if (j.value("format", "") != "kvlens-needle") throw FormatError(what, "\"format\" is not \"kvlens-needle\"");
        if (j.at("version").get<int>() != 1)
            throw FormatError(what, "version " + j.at("version").dump() + " is not supported (this KVLens reads 1)");
        eval::NeedleGridResult g;
        g.model = j.value("model", "");
        g.options.contexts = j.at("contexts").get<std::vector<int64_t>>();
        g.options.depths = j.at("depths").get<std::vector<double>>();
        g.options.samples = j.at("samples").get<int64_t>();
        g.options.seed = j.at("seed").get<uint64_t>();
        for (const auto& c : j.at("cells")) {
            eval::NeedleCell cell{c.at("context").get<int64_t>(), c.at("depth").get<double>(),
                                  c.at("policy").get<std::string>(), c.at("budget").get<std::string>(),
                                  c.at("exact").get<double>(), c.at("overlap").get<double>(),
                                  c.value("prompt_tokens", int64_t{0})};
            for (const auto& a : c.value("answers", json::array()))
                cell.answers.push_back({a.at("seed").get<uint64_t>(), a.at("answer").get<std::string>(),
                                        a.at("expected").get<std::string>(), a.at("exact").get<bool>(),
                                        a.at("overlap").get<double>()});
            g.cells.push_back(std::move(cell));
        }
        return g;
    } catch (const json::exception& e) {
        throw FormatError(what, e.what());
    }
}

std::string needleGridToCsv(const eval::NeedleGridResult& g) {
    std::ostringstream out;
    out << "context,depth,policy,budget,exact,overlap,samples,prompt_tokens\n";
    for (const auto& c : g.cells) {
        char nums[128];
        std::snprintf(nums, sizeof nums, "%.17g,%.17g,%zu,%lld", c.exact, c.overlap, c.answers.size(),
                      static_cast<long long>(c.promptTokens));
        // Labels hold ':' ',' '=' (snapkv:window=16,pool=5): always quote them.
        out << c.context << ',' << c.depth << ",\"" << c.policy << "\",\"" << c.budget << "\"," << nums << "\n";
    }
    return out.str();
}

}  // namespace kvlens
