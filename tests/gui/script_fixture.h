#pragma once
// TorchScript scorer files for the GUI tests, written through LibTorch in a
// translation unit of their own (torch headers stay out of Qt's).
#include <string>

namespace kvlens::test {

// Saves a scorer module whose forward returns `expression` (TorchScript over
// keys, values, queries, attention, positions) as FILE.
void writeScorer(const std::string& file, const std::string& expression);

}  // namespace kvlens::test
