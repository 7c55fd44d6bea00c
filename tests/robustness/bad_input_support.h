#pragma once
// What both files of the bad-input suite (bad_input_test.cpp,
// user_data_test.cpp) use: the bundled model loaded once, a copy of it to
// break, whole-file reads and writes, and the message of a kvlens::Error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "core/error.h"
#include "core/paths.h"
#include "core/run/model_handle.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/support/test_models.h"

namespace kvlens::test {

// The bundled model, loaded once.
inline std::shared_ptr<const Model> bundled() {
    static std::shared_ptr<const Model> model = loadModel(bundledModelDir(), RunSettings{});
    return model;
}

inline std::shared_ptr<const Tokenizer> bundledTokenizer() {
    static auto tok = std::make_shared<const Tokenizer>(Tokenizer::fromFile(bundledModelDir() / "tokenizer.json"));
    return tok;
}

// A copy of the bundled model to break.
inline std::filesystem::path copyOfBundled(const ScratchDir& dir) {
    const std::filesystem::path out = dir / "model";
    std::filesystem::create_directories(out);
    for (const auto& e : std::filesystem::directory_iterator(bundledModelDir())) std::filesystem::copy_file(e.path(), out / e.path().filename());
    return out;
}

inline std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void spit(const std::filesystem::path& p, const std::string& s) { std::ofstream(p, std::ios::binary | std::ios::trunc) << s; }

// The message of what `f` throws as a kvlens::Error ("" and a failure if
// it throws nothing or something else).
template <class F>
inline std::string errorOf(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    } catch (const std::exception& e) {
        ADD_FAILURE() << "not a kvlens::Error: " << e.what();
        return e.what();
    }
    ADD_FAILURE() << "nothing thrown";
    return "";
}

// What loading a copy of the bundled model says once `from` in its
// config.json reads `to`.
inline std::string loadErrorAfterConfigEdit(const std::string& from, const std::string& to) {
    ScratchDir dir("config");
    const std::filesystem::path model = copyOfBundled(dir);
    std::string cfg = slurp(model / "config.json");
    const size_t at = cfg.find(from);
    if (at == std::string::npos) return "config.json has no " + from;
    spit(model / "config.json", cfg.replace(at, from.size(), to));
    return errorOf([&] { loadModel(model, RunSettings{}); });
}

}  // namespace kvlens::test
