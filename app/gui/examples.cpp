#include "app/gui/examples.h"

#include <QDir>
#include <QFile>

#include "core/error.h"
#include "core/paths.h"

namespace kvlens::gui {

QList<Example> loadExamples() {
    QList<Example> out;
    QString dir;
    try {
        dir = QString::fromStdString(findResource("examples").string());
    } catch (const Error&) {
        return out;
    }
    const QStringList files = QDir(dir).entryList({QStringLiteral("*.txt")}, QDir::Files, QDir::Name);
    for (const QString& f : files) {
        QFile file(QDir(dir).filePath(f));
        if (!file.open(QIODevice::ReadOnly | QIODevice::Text)) continue;
        out.push_back({f.chopped(4), QString::fromUtf8(file.readAll()).trimmed()});
    }
    return out;
}

}  // namespace kvlens::gui
