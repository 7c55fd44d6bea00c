#include "core/io/session_setup.h"

#include "core/error.h"
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

SessionOptions sessionOptionsFrom(const SessionFile& file, std::shared_ptr<const Tokenizer> tokenizer) {
    if (!tokenizer) throw ArgumentError("a session needs the model's tokenizer.json to encode its prompt");
    SessionOptions o;
    for (int32_t id : tokenizer->encode(file.prompt)) o.prompt.push_back(id);
    for (const auto& p : file.policies) o.policies.push_back(parsePolicySpec(p));
    if (!file.budgets.empty())
        o.budget = parseLayerBudgets(file.budgets);
    else if (!file.budget.empty())
        o.budget = parseBudget(file.budget);
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
