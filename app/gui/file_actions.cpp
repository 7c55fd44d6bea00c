#include "app/gui/file_actions.h"

#include <QAction>
#include <QDateTime>
#include <QDialog>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QMenu>
#include <QMessageBox>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QStatusBar>

#include "app/gui/main_window.h"
#include "widgets/metrics_panel.h"
#include "core/error.h"
#include "core/io/export_names.h"
#include "core/safe_file.h"
#include "core/study/needle_io.h"
#include "core/paths.h"
#include "widgets/comparison_view.h"
#include "widgets/figure.h"
#include "widgets/needle_panel.h"
#include "widgets/needle_view.h"

namespace kvlens::gui {
namespace {

const char* const kTables[] = {"attention", "status", "scores", "budgets", "metrics"};

// A session file as a title: "01-attention-sinks.kvlens.json" -> "attention sinks";
// another name as it is ("mine.kvlens.json").
QString workshopTitle(const QFileInfo& f) {
    QString name = f.fileName();
    static const QRegularExpression numbered(QStringLiteral("^\\d+-(.*)\\.kvlens\\.json$"));
    const QRegularExpressionMatch m = numbered.match(name);
    return m.hasMatch() ? m.captured(1).replace(u'-', u' ') : name;
}

QString modelName(const std::string& dir) { return QDir(QString::fromStdString(dir)).dirName(); }

}  // namespace

FileActions::FileActions(MainWindow* window) : QObject(window), m_window(window) {
    m_autosaveFile = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) +
                     QStringLiteral("/autosave.kvlens.json");
    m_autosave.setSingleShot(true);
    m_autosave.setInterval(kAutosaveDelayMs);
    connect(&m_autosave, &QTimer::timeout, this, [this] { autosaveNow(); });
    connect(window->controller(), &Controller::captureReady, this, &FileActions::acceptCapture);
    connect(window->controller(), &Controller::capturesDone, this, &FileActions::finishCaptures);
}

FileActions::~FileActions() = default;

void FileActions::report(const QString& title, const QString& text) const {
    if (m_report) return m_report(title, text);
    auto* box = new QMessageBox(QMessageBox::Warning, title, text, QMessageBox::Ok, m_window);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();  // not exec(): the window stays live behind it
}

void FileActions::addActions(QMenu* file) {
    auto add = [this, file](const QString& text, const QKeySequence& key, auto slot) {
        QAction* a = file->addAction(text);
        a->setShortcut(key);
        connect(a, &QAction::triggered, this, slot);
        return a;
    };
    add(tr("Open &session…"), QKeySequence(QStringLiteral("Ctrl+Shift+O")), [this] {
        const QString f = QFileDialog::getOpenFileName(m_window, tr("Open session"), defaultFolder(),
                                                       tr("KVLens sessions (*.kvlens.json *.json)"));
        if (!f.isEmpty()) openAsked(f, true);
    });
    m_recentMenu = file->addMenu(tr("Recent sessions"));
    connect(m_recentMenu, &QMenu::aboutToShow, this, &FileActions::rebuildRecent);
    rebuildRecent();
    // The ready sessions of resources/sessions: sinks, a needle kept by SnapKV
    // and lost by StreamingLLM, PyramidKV's layer budgets, GQA grouping.
    m_workshopMenu = file->addMenu(tr("Workshop sessions"));
    const QDir dir(QString::fromStdString(findResource("sessions").string()));
    for (const QFileInfo& f : dir.entryInfoList({QStringLiteral("*.kvlens.json")}, QDir::Files, QDir::Name)) {
        QAction* a = m_workshopMenu->addAction(workshopTitle(f));
        a->setStatusTip(f.absoluteFilePath());
        const QString path = f.absoluteFilePath();
        connect(a, &QAction::triggered, this, [this, path] { openAsked(path, /*remember=*/false); });
    }
    if (m_workshopMenu->isEmpty()) m_workshopMenu->addAction(tr("(none found)"))->setEnabled(false);
    add(tr("&Save session"), QKeySequence::Save, [this] { save(); });
    add(tr("Save session &as…"), QKeySequence::SaveAs, [this] {
        const QString f = QFileDialog::getSaveFileName(m_window, tr("Save session as"),
                                                       m_current.isEmpty() ? defaultFolder() : m_current,
                                                       tr("KVLens sessions (*.kvlens.json)"));
        if (!f.isEmpty()) saveSession(f);
    });
    file->addSeparator();
    // One dialog behind each: it starts on a figure or on data, on the view,
    // every run or every layer × head, and any of them can be changed there.
    add(tr("&Export figure…"), QKeySequence(QStringLiteral("Ctrl+Shift+E")), [this] { chooseExport(ui::ExportScope::View, false); });
    add(tr("Export &data…"), QKeySequence(), [this] { chooseExport(ui::ExportScope::View, true); });
    add(tr("Export &all runs…"), QKeySequence(), [this] { chooseExport(ui::ExportScope::EveryRun, false); });
    add(tr("Export every &layer × head…"), QKeySequence(), [this] { chooseExport(ui::ExportScope::EveryLayerHead, false); });
    add(tr("Export &needle grid…"), QKeySequence(), [this] { chooseExportNeedle(); });
    add(tr("Export &metrics plots…"), QKeySequence(), [this] { chooseExportMetrics(); });
}

QString FileActions::defaultFolder() const {
    const QString f = m_settings.exportFolder.get();
    return f.isEmpty() ? QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation) : f;
}

// ---- sessions ----

bool FileActions::saveSession(const QString& file) {
    try {
        kvlens::saveSession(file.toStdString(), m_window->sessionState());
    } catch (const std::exception& e) {
        report(tr("Cannot save the session"), QString::fromStdString(e.what()));
        return false;
    }
    m_current = file;
    addRecent(file);
    setDocument(QFileInfo(file).fileName(), true);
    m_window->statusBar()->showMessage(tr("Saved %1").arg(file), 5000);
    return true;
}

bool FileActions::save() {
    if (!m_current.isEmpty()) return saveSession(m_current);
    const QString f = QFileDialog::getSaveFileName(m_window, tr("Save session"),
                                                   defaultFolder() + QStringLiteral("/session.kvlens.json"),
                                                   tr("KVLens sessions (*.kvlens.json)"));
    return !f.isEmpty() && saveSession(f);
}

void FileActions::openAsked(const QString& file, bool remember) {
    if (maybeSave()) openSession(file, remember);
}

// ---- the document: name, modified mark, unsaved changes ----

std::string FileActions::document() const {
    SessionFile s = m_window->sessionState();
    s.view.step = -1;  // where the transport stands is not an edit
    return sessionToJson(s).dump();
}

void FileActions::setDocument(const QString& name, bool saved) {
    m_name = name;
    // Restored from the autosave: unsaved work, whatever it is compared with.
    m_baseline = saved ? document() : std::string();
    showTitle();
    m_window->setWindowModified(!saved);
}

void FileActions::followLesson(const QString& name) {
    m_current.clear();
    setDocument(name, true);
}

void FileActions::showTitle() { m_window->setWindowTitle(tr("%1[*] — KVLens").arg(m_name)); }

bool FileActions::isModified() const { return m_baseline && *m_baseline != document(); }

bool FileActions::updateModified() {
    const std::string now = document();  // one serialisation per edit
    if (!m_baseline) m_baseline = now;   // a window that was never started: as it is now
    const bool modified = *m_baseline != now;
    m_window->setWindowModified(modified);
    return modified;
}

bool FileActions::maybeSave() {
    if (!updateModified()) return true;
    int answer = QMessageBox::Cancel;
    if (m_unsaved) {
        answer = m_unsaved(m_name);
    } else {
        answer = QMessageBox::question(m_window, tr("Unsaved changes"),
                                       tr("The session \"%1\" has changes that are not saved. Save them?").arg(m_name),
                                       QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, QMessageBox::Save);
    }
    if (answer == QMessageBox::Save) return save();
    return answer == QMessageBox::Discard;
}

bool FileActions::openSession(const QString& file, bool remember) {
    SessionFile s;
    try {
        s = loadSession(file.toStdString());
    } catch (const std::exception& e) {
        report(tr("Cannot open the session"), QString::fromStdString(e.what()));
        return false;
    }
    const QString error = m_window->applySession(s);
    if (!error.isEmpty()) {
        report(tr("Cannot open the session"), tr("%1: %2").arg(file, error));
        return false;
    }
    const bool restored = file == m_autosaveFile;
    if (remember && !restored) {
        m_current = file;
        addRecent(file);
    } else {
        m_current.clear();  // Save asks where: the shipped file is read-only, the autosave is not the user's
    }
    setDocument(restored ? tr("Untitled") : remember ? QFileInfo(file).fileName() : workshopTitle(QFileInfo(file)),
                !restored);
    return true;
}

QStringList FileActions::recentSessions() const { return m_settings.recentSessions.get(); }

void FileActions::addRecent(const QString& file) {
    QStringList list = recentSessions();
    const QString abs = QFileInfo(file).absoluteFilePath();
    list.removeAll(abs);
    list.prepend(abs);
    while (list.size() > kMaxRecent) list.removeLast();
    m_settings.recentSessions.set(list);
    m_settings.exportFolder.set(QFileInfo(abs).absolutePath());
}

void FileActions::rebuildRecent() {
    if (!m_recentMenu) return;
    m_recentMenu->clear();
    const QStringList list = recentSessions();
    for (const QString& f : list) {
        QAction* a = m_recentMenu->addAction(QFileInfo(f).fileName());
        a->setToolTip(f);
        a->setStatusTip(f);
        connect(a, &QAction::triggered, this, [this, f] { openAsked(f, true); });
    }
    if (list.isEmpty()) m_recentMenu->addAction(tr("(none)"))->setEnabled(false);
}

// ---- autosave ----

void FileActions::scheduleAutosave() {
    updateModified();
    if (!m_restorePending) m_autosave.start();
}

bool FileActions::autosaveNow() {
    m_autosave.stop();
    if (m_restorePending) return false;  // the file is what the open question offers
    try {
        QDir().mkpath(QFileInfo(m_autosaveFile).absolutePath());
        kvlens::saveSession(m_autosaveFile.toStdString(), m_window->sessionState());
    } catch (const std::exception& e) {
        m_window->statusBar()->showMessage(tr("Autosave failed: %1").arg(QString::fromStdString(e.what())), 10000);
        return false;
    }
    Q_EMIT autosaved(m_autosaveFile);
    return true;
}

bool FileActions::startup() {
    setDocument(tr("Untitled"), true);  // the new window's state is the unmodified one
    const bool offer = !m_settings.cleanExit.get() && QFileInfo::exists(m_autosaveFile);
    m_settings.cleanExit.set(false);
    if (!offer) return false;
    if (m_restore) return m_restore(m_autosaveFile) && openSession(m_autosaveFile);
    // Non-modal: the app is usable while the question waits, and its edits
    // and the start-up run are not autosaved over what it offers.
    m_restorePending = true;
    m_autosave.stop();
    auto* box = new QMessageBox(QMessageBox::Question, tr("Restore the last session?"),
                                tr("KVLens did not exit cleanly last time. Restore the prompt, policies, budgets and "
                                   "view it autosaved?"),
                                QMessageBox::Yes | QMessageBox::No, m_window);
    box->setAttribute(Qt::WA_DeleteOnClose);
    connect(box, &QMessageBox::finished, this, [this, box] { answerRestore(box->result() == QMessageBox::Yes); });
    box->open();
    return false;
}

void FileActions::answerRestore(bool restore) {
    if (!m_restorePending) return;
    m_restorePending = false;
    if (!restore) return scheduleAutosave();
    if (openSession(m_autosaveFile)) return;  // its run autosaves what it restored
    // Not restorable here (its model is missing, ...; reported): kept beside,
    // never autosaved over.
    const QString kept = QFileInfo(m_autosaveFile).dir().filePath(
        QStringLiteral("unrestored-%1.kvlens.json").arg(QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss"))));
    if (!QFile::rename(m_autosaveFile, kept)) {
        m_restorePending = true;  // autosave stays off; the next start offers it again
        return;
    }
    m_window->statusBar()->showMessage(tr("The autosave that could not be restored is kept as %1").arg(kept), 15000);
    scheduleAutosave();
}

void FileActions::markCleanExit() {
    if (m_restorePending) return;  // unanswered: the autosave, untouched, is offered again
    if (m_autosave.isActive()) autosaveNow();
    m_settings.cleanExit.set(true);
}

// ---- exports ----

ui::FigureView FileActions::figureView(int run) const {
    ui::FigureView v;
    v.trace = m_window->controller()->shownTrace();
    v.policy = run;
    v.layer = m_window->comparison()->selectedLayer();
    v.head = m_window->comparison()->selectedHead();
    v.scale = m_window->comparison()->colourScale();
    v.model = modelName(m_window->controller()->model().directory);
    return v;
}

QString FileActions::describedName(int run) const {
    const ui::FigureView v = figureView(std::max(0, run));
    if (!v.trace) return QStringLiteral("kvlens");
    return QString::fromStdString(exportDescriptiveName(v.model.toStdString(), *v.trace, static_cast<size_t>(std::max(0, run)),
                                                        v.layer, v.head));
}

FileActions::FigureJob FileActions::figureJob(int run, bool status) const {
    const ui::FigureView v = figureView(std::max(0, run));
    if (status)
        return {ui::statusFigureSize(v), [v](QPainter& p, const QRectF& a) { ui::paintStatusFigure(p, a, v); },
                ui::figureTitle(v)};
    if (run >= 0)
        return {ui::attentionFigureSize(v), [v](QPainter& p, const QRectF& a) { ui::paintAttentionFigure(p, a, v); },
                ui::figureTitle(v)};
    std::vector<ui::FigureView> panels;
    for (int i = 0; i < static_cast<int>(v.trace->policies.size()); ++i) {
        panels.push_back(v);
        panels.back().policy = i;
    }
    const QString title = tr("%1 · step %2 · layer %3 · head %4").arg(v.model).arg(v.trace->step).arg(v.layer).arg(v.head);
    const int n = static_cast<int>(panels.size());
    return {ui::gridFigureSize(n, n),
            [panels, n, title](QPainter& p, const QRectF& a) { ui::paintGridFigure(p, a, panels, n, title); }, title};
}

QString FileActions::exportFigure(const QString& file, double scale, int run, bool status, const QSizeF& size,
                                  double textPt) const {
    const auto trace = m_window->controller()->shownTrace();
    if (!trace) return tr("nothing to export yet: no run has finished");
    if (run >= static_cast<int>(trace->policies.size())) return tr("no run %1 in the trace").arg(run);
    const FigureJob job = figureJob(run, status);
    return ui::writeFigure(file, size.isEmpty() ? job.size : size, scale, ui::withTextSize(job.paint, textPt), job.title);
}

namespace {

// What a data export of `table` writes as text (CSV or JSON), or throws.
std::string dataText(const Trace& t, ExportTable table, const ExportSelection& sel, const QString& suffix) {
    if (suffix == QLatin1String("csv")) return exportCsv(t, table, sel);
    return exportJson(t, table, sel).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

ExportSelection FileActions::dataSelection(int run) const {
    const auto trace = m_window->controller()->shownTrace();
    const int64_t group = trace->numHeads / std::max<int64_t>(1, trace->numKvHeads);
    return {static_cast<size_t>(std::max(0, run)), m_window->comparison()->selectedLayer(),
            m_window->comparison()->selectedHead() / std::max<int64_t>(1, group)};
}

QString FileActions::exportData(const QString& file, ExportTable table, int run) const {
    const auto trace = m_window->controller()->shownTrace();
    if (!trace) return tr("nothing to export yet: no run has finished");
    const QString suffix = QFileInfo(file).suffix().toLower();
    const ExportSelection sel = dataSelection(run);
    try {
        if (suffix == QLatin1String("npy")) {
            if (table != ExportTable::Attention) return tr("an .npy file holds the attention matrix");
            writeAttentionNpy(file.toStdString(), *trace, sel.policy);
            return {};
        }
        if (suffix != QLatin1String("csv") && suffix != QLatin1String("json"))
            return tr("%1: data is .csv, .json or .npy").arg(file);
        writeFileAtomically(file.toStdString(), dataText(*trace, table, sel, suffix));
    } catch (const std::exception& e) {
        return QString::fromStdString(e.what());
    }
    return {};
}

QString FileActions::dataPreview(ExportTable table, int run, const QString& format, int lines) const {
    const auto trace = m_window->controller()->shownTrace();
    if (!trace) return tr("nothing to export yet: no run has finished");
    const QString suffix = format.toLower();
    if (suffix == QLatin1String("npy")) {
        if (table != ExportTable::Attention) return tr("an .npy file holds the attention matrix: choose “attention”");
        const auto n = trace->attention.size() > static_cast<size_t>(std::max(0, run))
                           ? trace->attention[static_cast<size_t>(std::max(0, run))].size
                           : 0;
        return tr("NumPy .npy: the captured attention matrix, %1 × %1 float32 (queries × keys);\n"
                  "NaN where the run did not hold the key, -1 after the query (causal)")
            .arg(n);
    }
    try {
        const QString text = QString::fromStdString(dataText(*trace, table, dataSelection(run), suffix));
        QStringList all = text.split(QLatin1Char('\n'));
        const bool more = all.size() > lines;
        if (more) all = all.mid(0, lines);
        return all.join(QLatin1Char('\n')) + (more ? tr("\n… (%1 lines in all)").arg(text.count(QLatin1Char('\n'))) : QString());
    } catch (const std::exception& e) {
        return QString::fromStdString(e.what());
    }
}

QString FileActions::exportAll(const QString& folder, const QString& format, QStringList* written, const QSizeF& size,
                               double textPt) const {
    const auto trace = m_window->controller()->shownTrace();
    if (!trace) return tr("nothing to export yet: no run has finished");
    if (!QDir().mkpath(folder)) return tr("cannot create the folder %1").arg(folder);
    const QString fmt = format.startsWith(QLatin1Char('.')) ? format.mid(1).toLower() : format.toLower();
    const std::string ext = "." + fmt.toStdString();
    const bool figure = ui::isFigureFile(QStringLiteral("x.") + fmt);
    const double scale = m_settings.exportScale.get();
    const auto names = exportRunNames(*trace);
    const int64_t layer = m_window->comparison()->selectedLayer(), head = m_window->comparison()->selectedHead();
    for (int r = 0; r < static_cast<int>(trace->policies.size()); ++r) {
        const QString file = QDir(folder).filePath(
            QString::fromStdString(exportFileName(names[static_cast<size_t>(r)], layer, head, ext)));
        const QString error =
            figure ? exportFigure(file, scale, r, false, size, textPt) : exportData(file, ExportTable::Attention, r);
        if (!error.isEmpty()) return error;
        if (written) *written << file;
    }
    if (!figure) return {};
    const QString grid = QDir(folder).filePath(QStringLiteral("grid.") + fmt);
    const QString error = exportFigure(grid, scale, -1, false, {}, textPt);  // the grid keeps its own size
    if (error.isEmpty() && written) *written << grid;
    return error;
}

QString FileActions::exportNeedle(const QString& file, double scale) const {
    const ui::NeedleView* view = m_window->needlePanel()->view();
    if (view->panelCount() == 0 || !view->result()) return tr("no needle grid yet: run one in the Needle dock");
    // The grid's data (kvlens-needle JSON, CSV), as `kvlens-cli needle` writes it.
    const QString suffix = QFileInfo(file).suffix().toLower();
    if (suffix == QLatin1String("json") || suffix == QLatin1String("csv")) {
        try {
            writeFileAtomically(file.toStdString(), suffix == QLatin1String("csv")
                                                        ? needleGridToCsv(*view->result())
                                                        : needleGridToJson(*view->result()).dump(1) + "\n");
        } catch (const std::exception& e) {
            return QString::fromStdString(e.what());
        }
        return {};
    }
    return ui::writeNeedleFigure(file, *view, scale, modelName(m_window->controller()->model().directory));
}

void FileActions::exportLayersHeads(const QString& folder, const QString& format, int run, bool allHeads,
                                    const QSizeF& size, double textPt) {
    const auto trace = m_window->controller()->shownTrace();
    if (!trace) return Q_EMIT exportFinished(tr("nothing to export yet: no run has finished"), {});
    if (run < 0 || run >= static_cast<int>(trace->policies.size()))
        return Q_EMIT exportFinished(tr("no run %1 in the trace").arg(run), {});
    if (!QDir().mkpath(folder)) return Q_EMIT exportFinished(tr("cannot create the folder %1").arg(folder), {});
    std::vector<std::pair<int64_t, int64_t>> pairs;
    for (int64_t l = 0; l < trace->numLayers; ++l) {
        if (!allHeads) pairs.emplace_back(l, m_window->comparison()->selectedHead());
        for (int64_t h = 0; allHeads && h < trace->numHeads; ++h) pairs.emplace_back(l, h);
    }
    m_capture = Captures{};
    m_capture.folder = folder;
    m_capture.format = format.startsWith(QLatin1Char('.')) ? format.mid(1).toLower() : format.toLower();
    m_capture.run = run;
    m_capture.size = size;
    m_capture.textPt = textPt;
    m_capture.columns = allHeads ? static_cast<int>(trace->numHeads) : static_cast<int>(trace->numLayers);
    m_capture.id = m_window->controller()->runCaptures(pairs, m_window->controller()->shownStep());
}

void FileActions::acceptCapture(quint64 id, qint64 layer, qint64 head, const std::shared_ptr<const Trace>& trace) {
    if (id != m_capture.id || !m_capture.error.isEmpty()) return;
    ui::FigureView v = figureView(m_capture.run);
    v.trace = trace;
    v.layer = layer;
    v.head = head;
    const std::string ext = "." + m_capture.format.toStdString();
    const QString file = QDir(m_capture.folder).filePath(QString::fromStdString(
        exportFileName(exportRunNames(*trace)[static_cast<size_t>(m_capture.run)], layer, head, ext)));
    QString error;
    if (ui::isFigureFile(file)) {
        error = ui::writeFigure(file, m_capture.size.isEmpty() ? ui::attentionFigureSize(v) : m_capture.size,
                                m_settings.exportScale.get(),
                                ui::withTextSize([&v](QPainter& p, const QRectF& a) { ui::paintAttentionFigure(p, a, v); },
                                                 m_capture.textPt),
                                ui::figureTitle(v));
    } else {
        try {
            if (m_capture.format == QLatin1String("npy")) {
                writeAttentionNpy(file.toStdString(), *trace, static_cast<size_t>(m_capture.run));
            } else {
                const ExportSelection sel{static_cast<size_t>(m_capture.run), layer, 0};
                const std::string text = m_capture.format == QLatin1String("csv")
                                             ? exportCsv(*trace, ExportTable::Attention, sel)
                                             : exportJson(*trace, ExportTable::Attention, sel).dump(1) + "\n";
                writeFileAtomically(file.toStdString(), text);
            }
        } catch (const std::exception& e) {
            error = QString::fromStdString(e.what());
        }
    }
    if (!error.isEmpty()) m_capture.error = error;
    m_capture.written << file;
    m_capture.panels.push_back(v);
}

void FileActions::finishCaptures(quint64 id, const QString& error) {
    if (id != m_capture.id) return;
    Captures c = std::move(m_capture);
    m_capture = Captures{};
    if (c.error.isEmpty()) c.error = error;
    if (c.error.isEmpty() && ui::isFigureFile(QStringLiteral("x.") + c.format) && !c.panels.empty()) {
        const ui::FigureView& v = c.panels.front();
        const QString grid = QDir(c.folder).filePath(QStringLiteral("grid.") + c.format);
        const QString title = tr("%1 · %2 · step %3")
                                  .arg(v.model, QString::fromStdString(v.trace->policies[static_cast<size_t>(c.run)].label))
                                  .arg(v.trace->step);
        c.error = ui::writeFigure(grid, ui::gridFigureSize(static_cast<int>(c.panels.size()), c.columns),
                                  m_settings.exportScale.get(),
                                  ui::withTextSize([&](QPainter& p, const QRectF& a) {
                                      ui::paintGridFigure(p, a, c.panels, c.columns, title);
                                  }, c.textPt),
                                  title);
        if (c.error.isEmpty()) c.written << grid;
    }
    if (!c.error.isEmpty()) report(tr("Cannot export"), c.error);
    else m_window->statusBar()->showMessage(tr("Wrote %1 files into %2").arg(c.written.size()).arg(c.folder), 5000);
    Q_EMIT exportFinished(c.error, c.written);
}

std::optional<ui::ExportDialog::Source> FileActions::exportSource() const {
    const auto trace = m_window->controller()->shownTrace();
    if (!trace) return std::nullopt;
    ui::ExportDialog::Source s;
    for (const auto& p : trace->policies) s.runs << QString::fromStdString(p.label);
    for (const char* name : kTables) s.tables << QString::fromLatin1(name);
    s.folder = defaultFolder();
    s.naturalSize = [this](int run, int content) { return figureJob(run, content == 1).size; };
    s.paint = [this](QPainter& p, const QRectF& a, int run, int content) { figureJob(run, content == 1).paint(p, a); };
    s.dataPreview = [this](int run, int table, const QString& format) {
        return dataPreview(parseExportTable(kTables[std::clamp(table, 0, static_cast<int>(std::size(kTables)) - 1)]), run,
                           format);
    };
    s.defaultName = [this](int run, int content, bool figure) {
        const QString base = describedName(run);
        if (figure) return content == 1 ? base + QStringLiteral("_status") : base;
        return base + QLatin1Char('_') + QString::fromLatin1(kTables[std::clamp(content, 0, static_cast<int>(std::size(kTables)) - 1)]);
    };
    return s;
}

QString FileActions::runExport(const ui::ExportChoice& c) {
    if (c.path.isEmpty()) return tr("no file or folder to export to");
    if (c.isFigure()) m_settings.exportScale.set(c.pngScale());
    QString error;
    switch (c.scope) {
        case ui::ExportScope::View:
            error = c.isFigure() ? exportFigure(c.path, c.pngScale(), c.run, c.content == 1, c.size, c.textPt)
                                 : exportData(c.path, parseExportTable(kTables[std::clamp(c.content, 0, 4)]), c.run);
            if (error.isEmpty()) {
                m_settings.exportFolder.set(QFileInfo(c.path).absolutePath());
                m_window->statusBar()->showMessage(tr("Wrote %1").arg(c.path), 5000);
            }
            return error;
        case ui::ExportScope::EveryRun: {
            QStringList written;
            error = exportAll(c.path, c.format, &written, c.size, c.textPt);
            if (error.isEmpty())
                m_window->statusBar()->showMessage(tr("Wrote %1 files into %2").arg(written.size()).arg(c.path), 5000);
            return error;
        }
        case ui::ExportScope::EveryLayerHead:
            m_window->statusBar()->showMessage(tr("Running every layer × head…"));
            exportLayersHeads(c.path, c.format, std::max(0, c.run), true, c.size, c.textPt);
            return {};
    }
    return {};
}

void FileActions::chooseExport(ui::ExportScope scope, bool data) {
    std::optional<ui::ExportDialog::Source> source = exportSource();
    if (!source) return report(tr("Export"), tr("Nothing to export yet: no run has finished."));
    ui::ExportChoice initial;
    initial.scope = scope;
    initial.format = data ? QStringLiteral("csv") : QStringLiteral("png");
    initial.run = source->runs.size() > 1 ? 1 : 0;
    initial.dpi = m_settings.exportScale.get() * 72.0;
    ui::ExportDialog dialog(std::move(*source), initial, m_window);
    if (dialog.exec() != QDialog::Accepted) return;
    const QString error = runExport(dialog.choice());
    if (!error.isEmpty()) report(tr("Cannot export"), error);
}

void FileActions::chooseExportNeedle() {
    const QString f = QFileDialog::getSaveFileName(m_window, tr("Export needle grid"), defaultFolder() + QStringLiteral("/needle.png"),
                                                   tr("PNG image (*.png);;SVG vector image (*.svg);;PDF document (*.pdf);;JSON (*.json);;CSV (*.csv)"));
    if (f.isEmpty()) return;
    const QString error = exportNeedle(f, m_settings.exportScale.get());
    if (!error.isEmpty()) return report(tr("Cannot export the needle grid"), error);
    m_window->statusBar()->showMessage(tr("Wrote %1").arg(f), 5000);
}

void FileActions::chooseExportMetrics() {
    bool ok = false;
    const QString format = QInputDialog::getItem(m_window, tr("Export metrics plots"), tr("format"),
                                                 {QStringLiteral("png"), QStringLiteral("svg"), QStringLiteral("pdf")}, 0,
                                                 false, &ok);
    if (!ok) return;
    const QString folder = QFileDialog::getExistingDirectory(m_window, tr("Export metrics plots into"), defaultFolder());
    if (folder.isEmpty()) return;
    QStringList written;
    const QString error = m_window->metrics()->exportPlots(folder, format, m_settings.exportScale.get(), &written);
    if (!error.isEmpty()) return report(tr("Cannot export the metrics plots"), error);
    m_window->statusBar()->showMessage(tr("Wrote %1 plots into %2").arg(written.size()).arg(folder), 5000);
}

}  // namespace kvlens::gui
