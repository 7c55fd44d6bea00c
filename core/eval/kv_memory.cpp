#include "core/eval/kv_memory.h"

#include <algorithm>
#include <cstdio>

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

}  // namespace kvlens
