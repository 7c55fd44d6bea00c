#pragma once
// The one way the Qt side writes a file (figures, metrics plots, the GUI's
// --screenshot): nothing the user has is ever lost. Qt's writers (QImage,
// QPdfWriter, QSvgGenerator) write onto a QIODevice that streams into
// kvlens::AtomicFile (core/safe_file.h, the writer core and the CLI use):
// a temporary file beside the target, renamed over it only once every byte
// was written and synced. A failed write leaves the old file as it was and
// says why.
#include <QIODevice>
#include <QString>
#include <functional>

namespace kvlens::ui {

// Writes the content onto `out` (open for writing). Returns an empty string,
// or why it could not produce the content ("cannot encode the PNG").
using DeviceWriter = std::function<QString(QIODevice& out)>;

// `file` through `write`. Returns an empty string on success, otherwise one
// sentence: "cannot write FILE: reason" (a write error's reason, e.g. "No
// space left on device", wins over the writer's). A device or a pipe the
// user named (/dev/stdout, /dev/full) is written directly, every write
// checked, and never replaced by a rename.
QString saveThrough(const QString& file, const DeviceWriter& write);

}  // namespace kvlens::ui
