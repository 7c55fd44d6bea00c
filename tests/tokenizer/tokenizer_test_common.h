#pragma once
// What both tokenizer test files use: the tokenizer, JSON, and the folder
// of fixtures and reference ids (tests/data/tokenizer).
#include <cstdint>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tokenizer/tokenizer.h"

using kvlens::Tokenizer;
using nlohmann::json;
using Ids = std::vector<int32_t>;
namespace fs = std::filesystem;

inline const fs::path kData = KVLENS_TOKENIZER_DATA;
