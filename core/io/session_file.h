#pragma once
// Session files: what a user set up, saved as versioned JSON (format
// "kvlens-session", version 1) so that opening it reproduces the same traces:
// the model directory and a fingerprint of its files, the prompt, the
// policies with their parameters, the budgets, decoding, and the view.
// Torch-free (kvlens_base). docs/file-formats.md documents the format.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvlens {

struct SessionFile {
    static constexpr int kVersion = 1;

    std::string modelDir;          // as the user chose it; empty: the bundled model
    std::string modelFingerprint;  // modelFingerprint(dir) when saved; empty: not checked
    std::string prompt;            // text, encoded with the model's tokenizer
    std::string question;          // a question about the prompt; empty: none
    std::string questionMode = "agnostic";  // aware | agnostic (SessionOptions::QuestionMode)
    std::string calibration;       // Q-Filters' calibration text (SessionOptions::calibration); empty: the prompt
    std::vector<std::string> policies;  // "snapkv:window=16" (the registry's spec syntax;
                                        // a TorchScript scorer as "script:FILE.pt:...")
    // Each TorchScript scorer's file → scriptFingerprint() when saved (opening
    // says when one changed since).
    std::map<std::string, std::string> scripts;
    // Each policy's colour slot in the GUI (widgets/palette.h), one per
    // policy and distinct, so that a run keeps its colour when reopened;
    // empty: given afresh.
    std::vector<int> colours;
    std::string budget;            // "64" or "25%"; empty when budgets is used
    std::string budgets;           // per-layer "64,48,32", empty when budget is used
    int64_t decodeSteps = 16;
    bool teacherForced = true;
    bool greedy = true;
    double temperature = 1.0;
    double topP = 1.0;
    uint64_t seed = 0;
    struct View {
        int64_t layer = 0, head = 0;  // query head
        int64_t step = -1;            // decode step shown; -1: the last
        std::string colourScale = "power";  // linear | log | power
        // The run the Budget dock shows per KV head (a policy spec as
        // `policies` lists it); empty: the dock chooses.
        std::string budgetRun;
        // The Ranking dock's order: one of rankKeys() ("kl", "top1", ...);
        // empty: by rank (mean KL).
        std::string rankBy;
    } view;
};

// What view.rank_by may name: kl, top1, perplexity, mass, kv_mean, kv_peak, oracle.
const std::vector<std::string>& rankKeys();

nlohmann::json sessionToJson(const SessionFile& s);
// Throws FormatError naming `source` and the field at fault; a file from a
// newer KVLens says which version wrote it.
SessionFile sessionFromJson(const nlohmann::json& j, const std::string& source = "session");

// Written to FILE.tmp and renamed over FILE, so a crash mid-write never
// leaves a half file where the last good one was.
void saveSession(const std::filesystem::path& file, const SessionFile& s);
// Throws FormatError (unreadable, not JSON, bad fields, newer version).
SessionFile loadSession(const std::filesystem::path& file);

// A cheap content fingerprint of a model directory: FNV-1a 64 over
// config.json, tokenizer.json, and each *.safetensors file's size, header and
// 64 evenly spaced 4 KiB blocks of its data (so a retrained checkpoint of the
// same shapes differs) — not the gigabytes of weights.
// "fnv1a64:<16 hex digits>". Throws FormatError when config.json is missing.
std::string modelFingerprint(const std::filesystem::path& modelDir);
// FNV-1a 64 over a TorchScript scorer's bytes: "fnv1a64:<16 hex digits>";
// empty when the file cannot be read.
std::string scriptFingerprint(const std::filesystem::path& file);
// What opening `s` should say about its scorers: each one whose file changed
// since it was saved, or empty.
std::string scriptsNote(const SessionFile& s);

}  // namespace kvlens
