#include "core/io/export_data.h"

#include "core/safe_file.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/policy/policy_info.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace kvlens {
namespace {

// One table, written as CSV or JSON: cells are strings, numbers or null.
struct Table {
    std::vector<std::string> columns;
    std::vector<json> rows;  // each a JSON array
};

json num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string label(const Trace& t, int64_t pos) {
    return pos < static_cast<int64_t>(t.labels.size()) ? t.labels[static_cast<size_t>(pos)] : std::string();
}

const PolicyTrace& policyOf(const Trace& t, const ExportSelection& s) {
    if (s.policy >= t.policies.size())
        throw ArgumentError("export: policy index " + std::to_string(s.policy) + " outside the trace's " +
                            std::to_string(t.policies.size()) + " runs");
    return t.policies[s.policy];
}

const HeadTrace& headOf(const Trace& t, const ExportSelection& s) {
    const PolicyTrace& p = policyOf(t, s);
    if (s.layer < 0 || s.layer >= static_cast<int64_t>(p.layers.size()))
        throw ArgumentError("export: layer " + std::to_string(s.layer) + " outside [0, " + std::to_string(p.layers.size()) + ")");
    const auto& heads = p.layers[static_cast<size_t>(s.layer)].heads;
    if (s.kvHead < 0 || s.kvHead >= static_cast<int64_t>(heads.size()))
        throw ArgumentError("export: KV head " + std::to_string(s.kvHead) + " outside [0, " + std::to_string(heads.size()) + ")");
    return heads[static_cast<size_t>(s.kvHead)];
}

const AttentionMap& attentionOf(const Trace& t, size_t policy) {
    if (t.attention.empty())
        throw ArgumentError("export: no attention map was captured in this run (choose a layer and head to capture)");
    if (policy >= t.attention.size())
        throw ArgumentError("export: policy index " + std::to_string(policy) + " outside the trace's runs");
    return t.attention[policy];
}

// The map with its two kinds of missing cell told apart (kAfterQuery, NaN).
std::vector<float> attentionCells(const AttentionMap& m) {
    std::vector<float> cells = m.dense();
    for (int64_t q = 0; q < m.size; ++q)
        for (int64_t k = q + 1; k < m.size; ++k) cells[static_cast<size_t>(q * m.size + k)] = kAfterQuery;
    return cells;
}

Table attentionTable(const Trace& t, const ExportSelection& s) {
    const AttentionMap& m = attentionOf(t, s.policy);
    const std::vector<float> cells = attentionCells(m);
    Table tab;
    tab.columns = {"position", "token"};
    for (int64_t k = 0; k < m.size; ++k) tab.columns.push_back(std::to_string(k));
    for (int64_t q = 0; q < m.size; ++q) {
        json row = json::array({q, label(t, q)});
        for (int64_t k = 0; k < m.size; ++k) row.push_back(num(cells[static_cast<size_t>(q * m.size + k)]));
        tab.rows.push_back(std::move(row));
    }
    return tab;
}

constexpr const char* kAttentionCells =
    "weight in [0, 1]; -1: the key comes after the query (causally not visible); empty (CSV), null (JSON), NaN (NPY): "
    "the policy did not hold the key (evicted)";

Table statusTable(const Trace& t, const ExportSelection& s, bool scores) {
    const HeadTrace& h = headOf(t, s);
    Table tab;
    tab.columns = {"position", "token", "status", "held"};
    if (scores) tab.columns.insert(tab.columns.end(), {"score", "rank"});
    for (size_t i = 0; i < h.status.size(); ++i) {
        json row = json::array({i, label(t, static_cast<int64_t>(i)), tokenStatusName(h.status[i]), isHeld(h.status[i]) ? 1 : 0});
        if (scores) {
            row.push_back(num(i < h.score.size() ? h.score[i] : kNoScore));
            row.push_back(i < h.rank.size() && h.rank[i] >= 0 ? json(h.rank[i]) : json(nullptr));
        }
        tab.rows.push_back(std::move(row));
    }
    return tab;
}

Table budgetTable(const Trace& t) {
    Table tab;
    tab.columns = {"policy", "layer", "budget", "kv_head", "held"};
    for (const auto& p : t.policies)
        for (size_t l = 0; l < p.layers.size(); ++l)
            for (size_t h = 0; h < p.layers[l].heads.size(); ++h)
                tab.rows.push_back(json::array({p.label, l, isFullCache(p.id) ? json(nullptr) : json(p.layers[l].budget), h,
                                                p.layers[l].heads[h].held}));
    return tab;
}

Table metricsTable(const Trace& t) {
    Table tab;
    tab.columns = {"policy", "step", "position", "kl", "top1_agrees", "target_logprob", "argmax", "retained_mass", "output_cosine",
                   "kv_bytes_held"};
    for (const auto& p : t.policies)
        for (size_t i = 0; i < p.metrics.size(); ++i) {
            const StepMetrics& m = p.metrics[i];
            tab.rows.push_back(json::array({p.label, i, m.position, num(m.kl), m.top1Agrees ? 1 : 0, num(m.targetLogProb),
                                            m.argmax, num(m.retainedMass), num(m.outputCosine), m.bytesHeld}));
        }
    return tab;
}

Table buildTable(const Trace& t, ExportTable table, const ExportSelection& s) {
    switch (table) {
        case ExportTable::Attention: return attentionTable(t, s);
        case ExportTable::Status: return statusTable(t, s, false);
        case ExportTable::Scores: return statusTable(t, s, true);
        case ExportTable::Budgets: return budgetTable(t);
        case ExportTable::Metrics: return metricsTable(t);
    }
    return {};
}

std::string csvField(const json& v) {
    if (v.is_null()) return "";
    if (v.is_string()) {
        std::string out = "\"";
        for (char c : v.get<std::string>()) out += c == '"' ? std::string("\"\"") : std::string(1, c);
        return out + "\"";
    }
    if (v.is_number_float()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.9g", v.get<double>());
        return buf;
    }
    return v.dump();
}

const char* tableName(ExportTable t) {
    switch (t) {
        case ExportTable::Attention: return "attention";
        case ExportTable::Status: return "status";
        case ExportTable::Scores: return "scores";
        case ExportTable::Budgets: return "budgets";
        case ExportTable::Metrics: return "metrics";
    }
    return "?";
}

}  // namespace

ExportTable parseExportTable(const std::string& name) {
    for (ExportTable t : {ExportTable::Attention, ExportTable::Status, ExportTable::Scores, ExportTable::Budgets, ExportTable::Metrics})
        if (name == tableName(t)) return t;
    throw ArgumentError("unknown export table '" + name + "' (attention, status, scores, budgets, metrics)");
}

std::string exportCsv(const Trace& trace, ExportTable table, const ExportSelection& sel) {
    const Table tab = buildTable(trace, table, sel);
    std::ostringstream out;
    // The metadata exportJson gives as fields, as comment lines.
    const json meta = exportJson(trace, table, sel);
    out << "# kvlens-export v1 · table " << tableName(table) << " · model " << trace.numLayers << " layers, "
        << trace.numHeads << " heads, " << trace.numKvHeads << " KV heads · step " << trace.step << " · prompt "
        << trace.promptLength << " tokens";
    if (meta.contains("policy")) out << " · policy " << meta["policy"].get<std::string>();
    if (meta.contains("layer")) out << " · layer " << meta["layer"].get<int64_t>();
    if (meta.contains("head")) out << " · query head " << meta["head"].get<int64_t>();
    if (meta.contains("kv_head")) out << " · KV head " << meta["kv_head"].get<int64_t>();
    out << "\n";
    if (table == ExportTable::Attention) out << "# cells: " << kAttentionCells << "\n";
    else out << "# empty: not computed (NaN)\n";
    for (size_t c = 0; c < tab.columns.size(); ++c) out << (c ? "," : "") << tab.columns[c];
    out << "\n";
    for (const auto& row : tab.rows) {
        for (size_t c = 0; c < row.size(); ++c) out << (c ? "," : "") << csvField(row[c]);
        out << "\n";
    }
    return out.str();
}

json exportJson(const Trace& trace, ExportTable table, const ExportSelection& sel) {
    const Table tab = buildTable(trace, table, sel);
    json j = {{"format", "kvlens-export"},
              {"version", 1},
              {"table", tableName(table)},
              {"step", trace.step},
              {"prompt_length", trace.promptLength},
              {"model", {{"layers", trace.numLayers}, {"heads", trace.numHeads}, {"kv_heads", trace.numKvHeads}}},
              {"columns", tab.columns},
              {"rows", tab.rows}};
    if (table != ExportTable::Budgets && table != ExportTable::Metrics) {
        j["policy"] = policyOf(trace, sel).label;
        if (table == ExportTable::Attention) {
            const AttentionMap& m = attentionOf(trace, sel.policy);
            j["layer"] = m.layer;
            j["head"] = m.head;
            j["cells"] = kAttentionCells;
            j["after_query"] = kAfterQuery;
        } else {
            j["layer"] = sel.layer;
            j["kv_head"] = sel.kvHead;
        }
    }
    return j;
}

void writeNpy(const fs::path& file, const std::vector<float>& data, const std::vector<int64_t>& shape) {
    int64_t count = 1;
    std::string dims;
    for (int64_t d : shape) {
        count *= d;
        dims += std::to_string(d) + ",";
    }
    if (shape.size() > 1) dims.pop_back();  // (3,) for one dimension, (3,4) otherwise
    if (count != static_cast<int64_t>(data.size())) throw ArgumentError("writeNpy: shape does not match the data");
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
    // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
    const size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    AtomicFile out(file);
    const uint16_t len = static_cast<uint16_t>(header.size());
    const char lenBytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
    out.write("\x93NUMPY\x01\x00", 8);
    out.write(lenBytes, 2);
    out.write(header);
    out.write(data.data(), data.size() * sizeof(float));
    out.commit();
}

std::vector<float> readNpy(const fs::path& file, std::vector<int64_t>* shape) {
    std::ifstream in(file, std::ios::binary);
    char magic[10];
    if (!in.read(magic, 10) || std::memcmp(magic, "\x93NUMPY", 6) != 0 || magic[6] != 1)
        throw FormatError(file.string(), "not an NPY 1.0 file");
    const size_t len = static_cast<unsigned char>(magic[8]) | (static_cast<size_t>(static_cast<unsigned char>(magic[9])) << 8);
    std::string header(len, '\0');
    if (!in.read(header.data(), static_cast<std::streamsize>(len))) throw FormatError(file.string(), "truncated NPY header");
    if (header.find("'<f4'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos)
        throw FormatError(file.string(), "only little-endian float32 in C order is read");
    const size_t open = header.find('(', header.find("'shape'")), close = header.find(')', open);
    if (open == std::string::npos || close == std::string::npos) throw FormatError(file.string(), "NPY header has no shape");
    std::vector<int64_t> dims;
    int64_t count = 1;
    std::stringstream ss(header.substr(open + 1, close - open - 1));
    for (std::string d; std::getline(ss, d, ',');)
        if (d.find_first_not_of(' ') != std::string::npos) {
            dims.push_back(std::stoll(d));
            count *= dims.back();
        }
    std::vector<float> data(static_cast<size_t>(count));
    if (!in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(float))))
        throw FormatError(file.string(), "NPY data shorter than its shape");
    if (shape) *shape = dims;
    return data;
}

void writeAttentionNpy(const fs::path& file, const Trace& trace, size_t policy) {
    const AttentionMap& m = attentionOf(trace, policy);
    writeNpy(file, attentionCells(m), {m.size, m.size});
}

}  // namespace kvlens
