#pragma once
// From a session file to a running Session's options, and back: the one
// place where the GUI's "Open session", `kvlens-cli export --session` and the
// tests turn what a user saved into what the engine runs. Torch-free header.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "core/io/session_file.h"
#include "core/run/session.h"

namespace kvlens {

class Tokenizer;
struct ModelConfig;

// The model directory a session names (the bundled model when it names none).
// Throws ArgumentError when the folder does not exist.
std::filesystem::path sessionModelDir(const SessionFile& file);

// A note for the user when the model's files or a TorchScript scorer's file
// changed since the session was saved (the traces will differ), empty otherwise.
std::string fingerprintNote(const SessionFile& file, const std::filesystem::path& modelDir);

// The budget a session asks for ("budgets" before "budget"), nullopt when it
// names none. Unlike a typed budget, a saved one is refused, not clamped,
// when it is zero or negative: "-5" in a file is a mistake to name, not a
// wish for B = 1. Throws ArgumentError naming the field.
std::optional<BudgetSpec> sessionBudget(const SessionFile& file);

// Throws ArgumentError when the session's view names a layer or query head
// the model does not have ("view.layer 99: the model has 3 layers, 0 to 2").
void checkSessionView(const SessionFile& file, const ModelConfig& config);

// The Session options a file describes: the prompt encoded with `tokenizer`,
// policies parsed from the registry, the budget, decoding and the captured
// attention of the view's layer/head. Throws ArgumentError naming the bad
// policy, budget or capture.
SessionOptions sessionOptionsFrom(const SessionFile& file, std::shared_ptr<const Tokenizer> tokenizer);

}  // namespace kvlens
