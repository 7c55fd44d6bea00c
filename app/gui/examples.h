#pragma once
// The example prompts shipped in resources/examples (plain text, one file
// each, written in the bundled model's vocabulary).
#include <QList>
#include <QString>

namespace kvlens::gui {

struct Example {
    QString name;  // file name without .txt
    QString text;
};

// Sorted by name; empty when the folder cannot be found.
QList<Example> loadExamples();
// The example the app opens with.
inline const char* defaultExampleName() { return "needle-red-door"; }

}  // namespace kvlens::gui
