#include "widgets/save_file.h"

#include <exception>
#include <memory>

#include "core/safe_file.h"

namespace kvlens::ui {
namespace {

// A write-only QIODevice onto a kvlens::AtomicFile: every byte goes through
// a checked POSIX write, and the first failure is kept (the painter and
// image writers above it do not all look at write counts).
//
// Not QSaveFile: in Qt 6.4 it commits a truncated file when the disk fills
// up part way — QFileDevice reports a short write as a smaller count without
// an error, and QSaveFile::commit() ignores a failed flush and sync.
class AtomicDevice : public QIODevice {
public:
    explicit AtomicDevice(AtomicFile& file) : m_file(file) { open(QIODevice::WriteOnly | QIODevice::Unbuffered); }
    const QString& failure() const { return m_failure; }

protected:
    qint64 readData(char*, qint64) override { return -1; }
    qint64 writeData(const char* data, qint64 len) override {
        if (!m_failure.isEmpty()) return -1;
        try {
            m_file.write(data, static_cast<size_t>(len));
        } catch (const std::exception& e) {
            m_failure = QString::fromStdString(e.what());
            return -1;
        }
        return len;
    }

private:
    AtomicFile& m_file;
    QString m_failure;
};

}  // namespace

QString saveThrough(const QString& file, const DeviceWriter& write) {
    try {
        AtomicFile target(file.toStdString());  // a device or a pipe is written directly
        AtomicDevice out(target);
        const QString why = write(out);
        if (!out.failure().isEmpty()) return out.failure();
        if (!why.isEmpty()) return QStringLiteral("cannot write %1: %2").arg(file, why);
        target.commit();
    } catch (const std::exception& e) {  // IoError: "cannot write FILE: reason"; the old file is as it was
        return QString::fromStdString(e.what());
    }
    return {};
}

}  // namespace kvlens::ui
