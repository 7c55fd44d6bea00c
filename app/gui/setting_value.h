#pragma once
// A typed setting over QSettings (qBittorrent's SettingValue<T>): the key and
// the default live in one declaration, and reading converts once.
#include <QSettings>
#include <QString>
#include <QStringList>
#include <QVariant>
#include <utility>

namespace kvlens::gui {

template <class T>
class SettingValue {
public:
    SettingValue(QString key, T defaultValue) : m_key(std::move(key)), m_default(std::move(defaultValue)) {}

    T get() const {
        const QVariant v = QSettings().value(m_key);
        return v.isValid() && v.canConvert<T>() ? v.value<T>() : m_default;
    }
    void set(const T& value) { QSettings().setValue(m_key, QVariant::fromValue(value)); }
    const QString& key() const { return m_key; }

private:
    QString m_key;
    T m_default;
};

// Every persisted setting of the GUI, in one place.
struct Settings {
    SettingValue<QByteArray> geometry{QStringLiteral("window/geometry"), {}};
    SettingValue<QByteArray> windowState{QStringLiteral("window/state"), {}};
    SettingValue<QString> lastModelDir{QStringLiteral("model/lastDirectory"), {}};
    SettingValue<QString> colourScale{QStringLiteral("view/colourScale"), QStringLiteral("power")};
    SettingValue<int> zoom{QStringLiteral("view/zoom"), 100};  // percent of the style's text size
    SettingValue<bool> darkTheme{QStringLiteral("view/darkTheme"), false};
    SettingValue<int> decodeSteps{QStringLiteral("run/decodeSteps"), 16};
    SettingValue<QStringList> recentSessions{QStringLiteral("session/recent"), {}};
    // False while the app runs: still false at the next start means it did
    // not exit cleanly, and the autosave is offered.
    SettingValue<bool> cleanExit{QStringLiteral("session/cleanExit"), true};
    SettingValue<double> exportScale{QStringLiteral("export/pngScale"), 2.0};
    SettingValue<QString> exportFolder{QStringLiteral("export/folder"), {}};
    // Run ▸ Memory budget: "8G"; empty: half the physical memory (core/run/memory_guard.h).
    SettingValue<QString> memoryBudget{QStringLiteral("run/memoryBudget"), {}};
};

}  // namespace kvlens::gui
