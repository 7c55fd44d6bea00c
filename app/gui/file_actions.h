#pragma once
// The File menu's work: session files (save, open, recent, autosave with a
// restore offer after an unclean exit) and exports (figure, data, export
// all, needle grid). Figures go through widgets/figure.h — the renderer
// kvlens-cli uses — so the GUI and the CLI write the same pixels.
// Messages go through a reporter that tests replace; the default shows a
// non-modal message box, so nothing blocks and nothing is lost.
#include <QObject>
#include <QSizeF>
#include <QString>
#include <QStringList>
#include <QTimer>
#include <functional>
#include <optional>
#include <string>

#include "app/gui/setting_value.h"
#include "core/io/export_data.h"
#include "core/io/session_file.h"
#include "widgets/export_dialog.h"
#include "widgets/figure.h"

class QMenu;

namespace kvlens::gui {

class MainWindow;

class FileActions : public QObject {
    Q_OBJECT
public:
    static constexpr int kAutosaveDelayMs = 3000;
    static constexpr int kMaxRecent = 8;
    using Reporter = std::function<void(const QString& title, const QString& text)>;
    using RestoreDecider = std::function<bool(const QString& autosaveFile)>;
    // Answers the unsaved-changes question: QMessageBox::Save, Discard or Cancel.
    using UnsavedDecider = std::function<int(const QString& documentName)>;

    explicit FileActions(MainWindow* window);
    ~FileActions() override;

    void addActions(QMenu* file);

    // Each reports a failure through the reporter and returns false; opening
    // changes nothing unless the whole session applies.
    bool saveSession(const QString& file);
    // `remember`: the file becomes the one Save writes and joins the recent
    // list (not for the read-only workshop sessions shipped with the app).
    bool openSession(const QString& file, bool remember = true);
    QString currentFile() const { return m_current; }
    QStringList recentSessions() const;

    // The session as a document. Modified when what the window holds (its
    // sessionState(), the shown step aside) differs from what was last
    // opened or saved, or, in a new window, from its start-up state; an
    // autosave restored is unsaved work. The title is "NAME[*] — KVLens"
    // (NAME: the file's, the workshop session's, or "Untitled"), with
    // Qt's modified mark.
    bool isModified() const;
    // A lesson step is in place: the document is the lesson (named `name`),
    // unmodified as it stands; Save asks where.
    void followLesson(const QString& name);
    QString documentName() const { return m_name; }
    void showTitle();
    bool updateModified();  // marks the window; returns isModified()
    // Before the session is replaced or the window closes: asks
    // Save / Discard / Cancel when modified; false when the user cancels (or
    // Save did not save).
    bool maybeSave();
    // Save: to the current file, or where a dialog says; false if not saved.
    bool save();

    // Exports of the shown trace; an empty string on success, otherwise why not.
    // `run`: a policy index of the trace (0 = full); -1: every run in one grid.
    // `size` (points; empty: the figure's own) and `textPt` (0: its own) as
    // the export dialog sets them.
    QString exportFigure(const QString& file, double scale, int run, bool status = false, const QSizeF& size = {},
                         double textPt = 0) const;
    QString exportData(const QString& file, ExportTable table, int run) const;
    // What exportData would write, its first `lines` lines (the dialog's preview).
    QString dataPreview(ExportTable table, int run, const QString& format, int lines = 30) const;
    // Every run at the selected layer/head, one file each (RUN_LLL_HHH.FMT,
    // as kvlens-cli names them) plus grid.FMT for figure formats.
    QString exportAll(const QString& folder, const QString& format, QStringList* written = nullptr,
                      const QSizeF& size = {}, double textPt = 0) const;
    // The export dialog's source for the shown trace (null without one), and
    // the export a dialog's choice asks for: written at once, or (every
    // layer × head) started, its end in exportFinished.
    std::optional<ui::ExportDialog::Source> exportSource() const;
    QString runExport(const ui::ExportChoice& choice);
    QString exportNeedle(const QString& file, double scale) const;
    // The default file name (no extension) the export dialogs offer for run
    // `run` at the selected layer and head: core/io/export_names.h's
    // exportDescriptiveName, e.g. "kvlens-tiny_snapkv_b48_L02_H05_s4".
    QString describedName(int run) const;
    // Run `run` at every layer × query head (allHeads) or every layer at the
    // selected head, at the shown step: the worker re-runs the prompt once
    // per pair (a trace captures one), files are written as they arrive
    // (RUN_LLL_HHH.FMT and grid.FMT); exportFinished says when and how it ended.
    void exportLayersHeads(const QString& folder, const QString& format, int run, bool allHeads,
                           const QSizeF& size = {}, double textPt = 0);

    // Autosave: after every edit (debounced), atomically, to autosaveFile().
    // Never while the restore offer waits: the file is what it offers, so
    // nothing writes it until the user has answered (autosaveNow() is false).
    QString autosaveFile() const { return m_autosaveFile; }
    void setAutosaveFile(const QString& file) { m_autosaveFile = file; }
    void setAutosaveDelay(int ms) { m_autosave.setInterval(ms); }
    void scheduleAutosave();
    bool autosaveNow();
    // At start: offers the autosave when the last run did not exit cleanly
    // (returns true when it was restored at once); then marks this run unclean.
    // Without a RestoreDecider the question is a non-modal box and the offer
    // stays pending until it is answered (answerRestore()).
    bool startup();
    bool restorePending() const { return m_restorePending; }
    // Yes: opens the autosave as it was; No: autosave resumes with the
    // session as it is now. Nothing when no offer is pending.
    void answerRestore(bool restore);
    // A clean exit, unless the offer was never answered: then the autosave
    // is offered again at the next start.
    void markCleanExit();

    void setReporter(Reporter r) { m_report = std::move(r); }
    void setRestoreDecider(RestoreDecider d) { m_restore = std::move(d); }
    void setUnsavedDecider(UnsavedDecider d) { m_unsaved = std::move(d); }

Q_SIGNALS:
    void autosaved(const QString& file);
    void exportFinished(const QString& error, const QStringList& files);

private:
    ui::FigureView figureView(int run) const;
    void report(const QString& title, const QString& text) const;
    void addRecent(const QString& file);
    void rebuildRecent();
    // The export dialog, starting on `scope` and a figure or data format.
    void chooseExport(ui::ExportScope scope, bool data);
    struct FigureJob {
        QSizeF size;  // points
        ui::FigurePainter paint;
        QString title;
    };
    FigureJob figureJob(int run, bool status) const;  // of the shown trace, which must exist
    ExportSelection dataSelection(int run) const;     // the run at the selected layer and KV head
    void chooseExportNeedle();
    void chooseExportMetrics();
    QString defaultFolder() const;
    std::string document() const;                  // the window's session as compared
    void setDocument(const QString& name, bool saved);  // after open / save / restore
    void openAsked(const QString& file, bool remember);  // a menu's open: maybeSave() first

    void acceptCapture(quint64 id, qint64 layer, qint64 head, const std::shared_ptr<const Trace>& trace);
    void finishCaptures(quint64 id, const QString& error);

    struct Captures {
        quint64 id = 0;
        QString folder, format, error;
        int run = 0, columns = 0;
        QSizeF size;
        double textPt = 0;
        std::vector<ui::FigureView> panels;
        QStringList written;
    };
    Captures m_capture;
    MainWindow* m_window;
    Settings m_settings;
    QTimer m_autosave;
    QString m_autosaveFile, m_current;
    QString m_name = tr("Untitled");
    std::optional<std::string> m_baseline;  // the document as opened/saved; none before startup()
    bool m_restorePending = false;
    QMenu* m_recentMenu = nullptr;
    QMenu* m_workshopMenu = nullptr;
    Reporter m_report;
    RestoreDecider m_restore;
    UnsavedDecider m_unsaved;
};

}  // namespace kvlens::gui
