#include "core/io/session_setup.h"

#include <tuple>

#include "core/error.h"
#include "core/model/config.h"
#include "core/paths.h"
#include "core/tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace kvlens {

fs::path sessionModelDir(const SessionFile& file) {
    const fs::path dir = file.modelDir.empty() ? bundledModelDir() : fs::path(file.modelDir);
    if (!fs::is_directory(dir))
        throw ArgumentError("the session's model folder " + dir.string() + " does not exist (moved or deleted?)");
    return dir;
}

std::string fingerprintNote(const SessionFile& file, const fs::path& modelDir) {
    std::string note;
    if (!file.modelFingerprint.empty()) {
        const std::string now = modelFingerprint(modelDir);
        if (now != file.modelFingerprint)
            note = "the model in " + modelDir.string() + " changed since this session was saved (" +
                   file.modelFingerprint + ", now " + now + "): its traces will differ";
    }
    const std::string scripts = scriptsNote(file);
    if (!scripts.empty()) note += (note.empty() ? "" : "; ") + scripts;
    return note;
}

std::optional<BudgetSpec> sessionBudget(const SessionFile& file) {
    const bool layers = !file.budgets.empty();
    if (!layers && file.budget.empty()) return std::nullopt;
    const std::string field = layers ? "budgets" : "budget", text = layers ? file.budgets : file.budget;
    try {
        BudgetSpec spec = layers ? parseLayerBudgets(text) : parseBudget(text);
        if (spec.raised)
            throw ArgumentError("'" + text + "' holds a budget of zero or less: expected " +
                                (layers ? "whole numbers of at least 1, one per layer" : "tokens (64) or a percentage above 0 (25%)"));
        return spec;
    } catch (const ArgumentError& e) {
        throw ArgumentError("the session's \"" + field + "\": " + e.what());
    }
}

void checkSessionView(const SessionFile& file, const ModelConfig& config) {
    for (const auto& [name, v, n, what] : {std::tuple{"view.layer", file.view.layer, config.numLayers, "layers"},
                                           std::tuple{"view.head", file.view.head, config.numHeads, "query heads"}})
        if (v >= n)
            throw ArgumentError("the session's \"" + std::string(name) + "\" is " + std::to_string(v) + ": the model has " +
                                std::to_string(n) + " " + what + ", 0 to " + std::to_string(n - 1));
}

SessionOptions sessionOptionsFrom(const SessionFile& file, std::shared_ptr<const Tokenizer> tokenizer) {
    if (!tokenizer) throw ArgumentError("a session needs the model's tokenizer.json to encode its prompt");
    SessionOptions o;
    for (int32_t id : tokenizer->encode(file.prompt)) o.prompt.push_back(id);
    for (const auto& p : file.policies) o.policies.push_back(parsePolicySpec(p));
    if (auto budget = sessionBudget(file)) o.budget = std::move(*budget);
    o.teacherForced = file.teacherForced;
    o.sampling.greedy = file.greedy;
    o.sampling.temperature = file.temperature;
    o.sampling.topP = file.topP;
    o.sampling.seed = file.seed;
    o.tokenizer = std::move(tokenizer);
    o.attention = {true, file.view.layer, file.view.head};
    // Trimmed, as the GUI's field is read.
    const auto first = file.question.find_first_not_of(" \t\r\n"), last = file.question.find_last_not_of(" \t\r\n");
    if (first != std::string::npos)
        for (int32_t id : o.tokenizer->encode(file.question.substr(first, last - first + 1), false)) o.question.push_back(id);
    o.questionMode = parseQuestionMode(file.questionMode);
    if (!file.calibration.empty())
        for (int32_t id : o.tokenizer->encode(file.calibration)) o.calibration.push_back(id);
    o.plannedSteps = file.decodeSteps + questionSteps(o);
    return o;
}

}  // namespace kvlens
