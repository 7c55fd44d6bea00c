#include "core/eval/kv_memory.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <regex>

#include "core/error.h"

namespace kvlens {

std::vector<KvDesign> kvDesigns(const KvShape& s) {
    const int64_t L = s.layers, Hq = s.heads, Hkv = s.kvHeads;
    auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
    std::vector<KvDesign> d;
    d.push_back({"mha", "MHA", "every query head has its own K/V head", L, Hq, Hkv == Hq});
    if (Hkv != Hq && Hkv != 1)
        d.push_back({"gqa", "GQA (" + std::to_string(Hkv) + " KV heads)",
                     "each group of " + std::to_string(Hq / Hkv) + " query heads shares one K/V head (the model's own)",
                     L, Hkv, true});
    d.push_back({"mqa", "MQA", "all query heads of a layer share one K/V head", L, 1, Hkv == 1 && Hq > 1});
    if (Hq == 1) d.pop_back();  // one head: MQA is MHA
    for (int64_t k : {2, 3})
        if (L >= k)
            d.push_back({"cla" + std::to_string(k), "CLA k=" + std::to_string(k) + " (with the model's KV heads)",
                         "every " + std::to_string(k) + " consecutive layers read the K/V of the first of them",
                         ceilDiv(L, k), Hkv, false});
    if (L >= 2)
        d.push_back({"yoco", "YOCO (with the model's KV heads)",
                     "the second half of the layers reads the K/V of the first half", ceilDiv(L, 2), Hkv, false});
    return d;
}

std::vector<KvMemoryRow> kvMemoryTable(const KvShape& shape, const std::vector<int64_t>& contexts, bool withBudget,
                                       const BudgetSpec& budget) {
    std::vector<KvMemoryRow> rows;
    for (const KvDesign& d : kvDesigns(shape)) {
        KvMemoryRow r{d, {}, {}};
        const uint64_t perToken = d.bytesPerToken(shape);
        for (int64_t T : contexts) {
            r.fullBytes.push_back(perToken * static_cast<uint64_t>(T));
            if (withBudget)
                r.budgetBytes.push_back(perToken * static_cast<uint64_t>(std::min(T, resolveBudget(budget, T))));
        }
        rows.push_back(std::move(r));
    }
    return rows;
}

std::string formatBytes(uint64_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
    char buf[32];
    if (u == 0)
        std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
    else
        std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
    return buf;
}

uint64_t parseMemorySize(const std::string& text, const std::string& what) {
    static const std::regex pattern(R"(\s*([0-9]+(\.[0-9]+)?)\s*(([KMGT])(i?B)?)?\s*)", std::regex::icase);
    constexpr double kLeast = 64.0 * (1 << 20), kMost = 1024.0 * 1024 * 1024 * 1024 * 1024;
    std::smatch m;
    const auto refuse = [&] {
        return ArgumentError(what + ": '" + text +
                             "' is not a memory size from 64M to 1P: expected a number with K, M, G or T (8G, 512M), or bytes");
    };
    if (text.size() > 64 || !std::regex_match(text, m, pattern)) throw refuse();
    double bytes = std::stod(m[1].str());
    if (m[4].matched)  // K, M, G, T: 1024^1 .. 1024^4
        bytes *= std::pow(1024.0, 1 + static_cast<double>(std::string("KMGT").find(
                                          static_cast<char>(std::toupper(static_cast<unsigned char>(m[4].str()[0]))))));
    if (!(bytes >= kLeast && bytes <= kMost)) throw refuse();
    return static_cast<uint64_t>(bytes);
}

}  // namespace kvlens
