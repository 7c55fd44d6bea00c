#pragma once
// From a session file to a running Session's options, and back: the one
// place where the GUI's "Open session", `kvlens-cli export --session` and the
// tests turn what a user saved into what the engine runs. Torch-free header.
#include <filesystem>
#include <memory>
#include <string>

#include "core/io/session_file.h"
#include "core/run/session.h"

namespace kvlens {

class Tokenizer;

// The model directory a session names (the bundled model when it names none).
// Throws ArgumentError when the folder does not exist.
std::filesystem::path sessionModelDir(const SessionFile& file);

// A note for the user when the model's files or a TorchScript scorer's file
// changed since the session was saved (the traces will differ), empty otherwise.
std::string fingerprintNote(const SessionFile& file, const std::filesystem::path& modelDir);

// The Session options a file describes: the prompt encoded with `tokenizer`,
// policies parsed from the registry, the budget, decoding and the captured
// attention of the view's layer/head. Throws ArgumentError naming the bad
// policy, budget or capture.
SessionOptions sessionOptionsFrom(const SessionFile& file, std::shared_ptr<const Tokenizer> tokenizer);

}  // namespace kvlens
