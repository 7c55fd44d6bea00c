#pragma once
// Typed errors thrown by kvlens_core. Every error names what is at fault
// (a file, a tensor, a JSON field, an argument) so that the CLI and the GUI
// can show one clear sentence. Torch-free: widgets/ and app/ may include it.
#include <stdexcept>
#include <string>

namespace kvlens {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A file exists but its content is wrong: malformed JSON, a truncated
// safetensors file, a header that lies about offsets, a missing field.
class FormatError : public Error {
public:
    FormatError(const std::string& file, const std::string& detail)
        : Error(file + ": " + detail), m_file(file) {}
    const std::string& file() const { return m_file; }

private:
    std::string m_file;
};

// The model directory is readable but the model cannot be built from it:
// unknown model_type, a missing or mis-shaped tensor.
class ModelError : public Error {
public:
    using Error::Error;
};

// Tokenizer definition is unsupported or inconsistent.
class TokenizerError : public Error {
public:
    using Error::Error;
};

// A user-supplied argument is out of range or malformed (CLI flags, budgets,
// device strings, prompt ids).
class ArgumentError : public Error {
public:
    using Error::Error;
};

// An allocation failed (CPU or GPU memory): what was being done and how
// much was asked for. The run is abandoned; the model and the app stay usable.
class MemoryError : public Error {
public:
    using Error::Error;
};

}  // namespace kvlens
