#include "app/gui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDesktopServices>
#include <QDockWidget>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QToolButton>
#include <QStatusBar>
#include <QUndoStack>
#include <QUrl>
#include <QVBoxLayout>
#include <set>
#include <filesystem>
#include <utility>

#include "app/gui/examples.h"
#include "app/gui/file_actions.h"
#include "core/error.h"
#include "core/model/device.h"
#include "core/model/config.h"
#include "core/model/llama2c.h"
#include "core/paths.h"
#include "core/io/session_setup.h"
#include "widgets/budget_state.h"
#include "widgets/budget_editor.h"
#include "widgets/comparison_view.h"
#include "widgets/eviction_timeline.h"
#include "widgets/lesson_panel.h"
#include "widgets/memory_view.h"
#include "widgets/metrics_panel.h"
#include "widgets/model_panel.h"
#include "widgets/needle_panel.h"
#include "widgets/sweep_panel.h"
#include "widgets/fidelity_figure.h"
#include "widgets/needle_view.h"
#include "widgets/appearance.h"
#include "widgets/agreement_view.h"
#include "widgets/ranking_view.h"
#include "app/gui/lesson_actions.h"
#include "app/gui/sweep_actions.h"
#include "widgets/policy_list.h"
#include "widgets/prompt_editor.h"
#include "widgets/transport_bar.h"

namespace kvlens::gui {
namespace {

QStringList deviceChoices() {
    QStringList out{QStringLiteral("auto"), QStringLiteral("cpu")};
    for (int i = 0; i < cudaDeviceCount(); ++i) out << QStringLiteral("cuda:%1").arg(i);
    return out;
}

}  // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent),
      m_undo(new QUndoStack(this)),
      m_controller(new Controller(this)),
      m_comparison(new ui::ComparisonView(this)),
      m_budget(new ui::BudgetEditor(m_undo, this)),
      m_policies(new ui::PolicyList(m_undo, this)),
      m_model(new ui::ModelPanel(this)),
      m_metrics(new ui::MetricsPanel(this)),
      m_transport(new ui::TransportBar(this)),
      m_timeline(new ui::EvictionTimeline(this)),
      m_prompt(new ui::PromptEditor(this)),
      m_needle(new ui::NeedlePanel(this)),
      m_memory(new ui::MemoryView(this)),
      m_agreement(new ui::AgreementView(this)),
      m_ranking(new ui::RankingView(this)),
      m_sweep(new ui::SweepPanel(this)),
      m_lessonPanel(new ui::LessonPanel(this)),
      m_scale(new QComboBox(this)),
      m_timelinePolicy(new QComboBox(this)),
      m_selection(new QLabel(this)),
      m_error(new QLabel(this)),
      m_notice(new QLabel(this)),
      m_busy(new QProgressBar(this)),
      m_cancelRun(new QToolButton(this)),
      m_modelLabel(new QLabel(this)),
      m_files(new FileActions(this)),
      m_sweeps(new SweepActions(this, m_sweep, m_needle)) {
    m_files->showTitle();
    setCentralWidget(buildCentral());
    buildDocks();
    buildActions();
    connectController();
    connectNeedle();
    connectSweep();
    ui::applyAppearance({m_settings.zoom.get(), m_settings.darkTheme.get()});
    m_busy->setRange(0, 0);
    m_busy->setMaximumWidth(160);
    m_busy->hide();
    m_cancelRun->setText(tr("Cancel"));
    m_cancelRun->setToolTip(tr("Stop this run; the views keep the last results"));
    m_cancelRun->hide();
    statusBar()->addPermanentWidget(m_busy);
    statusBar()->addPermanentWidget(m_cancelRun);
    statusBar()->addPermanentWidget(m_modelLabel);
    fitToScreen();
    restoreGeometry(m_settings.geometry.get());
    m_restoredLayout = restoreState(m_settings.windowState.get());
}

// A window that goes away (closed, or destroyed by its owner) exited
// cleanly; a crash or a kill never gets here, so the autosave is offered.
MainWindow::~MainWindow() { m_files->markCleanExit(); }

void MainWindow::buildActions() {
    auto add = [this](QMenu* menu, const QString& text, const QKeySequence& key, auto slot) {
        QAction* a = menu->addAction(text);
        a->setShortcut(key);
        connect(a, &QAction::triggered, this, slot);
        return a;
    };
    QMenu* file = menuBar()->addMenu(tr("&File"));
    add(file, tr("&Open model…"), QKeySequence::Open, [this] { m_model->chooseDirectory(); });
    add(file, tr("Open &GGUF model…"), QKeySequence(), [this] {
        const QString gguf = QFileDialog::getOpenFileName(this, tr("A llama.cpp model (imported once, then opened)"),
                                                          QString(), tr("GGUF models (*.gguf);;All files (*)"));
        if (gguf.isEmpty()) return;
        m_model->setDirectory(gguf);
        m_model->reload();
    });
    add(file, tr("&Import llama2.c model…"), QKeySequence(), [this] {
        const QString model = QFileDialog::getOpenFileName(this, tr("llama2.c model (e.g. stories15M.bin)"), QString(),
                                                           tr("llama2.c checkpoints (*.bin);;All files (*)"));
        if (model.isEmpty()) return;
        const QString tokenizer = QFileDialog::getOpenFileName(
            this, tr("Its tokenizer (tokenizer.bin, or tok512.bin for stories260K)"), QFileInfo(model).absolutePath(),
            tr("llama2.c tokenizers (*.bin);;All files (*)"));
        if (tokenizer.isEmpty()) return;
        const QString out = QFileDialog::getSaveFileName(
            this, tr("New folder for the imported model"),
            QFileInfo(model).absolutePath() + QStringLiteral("/") + QFileInfo(model).completeBaseName(), QString(), nullptr,
            QFileDialog::ShowDirsOnly | QFileDialog::DontConfirmOverwrite);
        if (out.isEmpty()) return;
        const QString error = importLlama2c(model, tokenizer, out);
        if (!error.isEmpty()) QMessageBox::warning(this, tr("Import llama2.c model"), error);
    });
    m_files->addActions(file);
    add(file, tr("Open s&weep…"), QKeySequence(), [this] { openSweepAsked(); });
    file->addSeparator();
    // The app always starts on the bundled model (a known state for
    // workshops); the last model the user opened is one click away.
    add(file, tr("Open &last model"), QKeySequence(), [this] {
        const QString dir = m_settings.lastModelDir.get();
        if (dir.isEmpty()) return;
        m_model->setDirectory(dir);
        m_model->reload();
    });
    file->addSeparator();
    add(file, tr("&Quit"), QKeySequence::Quit, [this] { close(); });

    QMenu* edit = menuBar()->addMenu(tr("&Edit"));
    QAction* undo = m_undo->createUndoAction(this, tr("&Undo"));
    undo->setShortcut(QKeySequence(QStringLiteral("Ctrl+Z")));
    QAction* redo = m_undo->createRedoAction(this, tr("&Redo"));
    redo->setShortcuts({QKeySequence(QStringLiteral("Ctrl+Shift+Z")), QKeySequence(QStringLiteral("Ctrl+Y"))});
    edit->addAction(undo);
    edit->addAction(redo);

    QMenu* run = menuBar()->addMenu(tr("&Run"));
    add(run, tr("Play / pause"), QKeySequence(Qt::Key_Space), [this] { m_transport->togglePlay(); });
    add(run, tr("Previous step"), QKeySequence(Qt::Key_Left), [this] { m_transport->stepBy(-1); });
    add(run, tr("Next step"), QKeySequence(Qt::Key_Right), [this] { m_transport->stepBy(1); });
    add(run, tr("Run again"), QKeySequence(Qt::Key_F5), [this] { m_controller->runNow(); });
    run->addSeparator();
    add(run, tr("Calibrate Q-Filters on a text file…"), QKeySequence(), [this] { chooseCalibration(); });
    add(run, tr("Calibrate Q-Filters on the prompt"), QKeySequence(), [this] {
        m_controller->setCalibration(QString());
        statusBar()->showMessage(tr("Q-Filters learns its filters from the prompt"), 6000);
    });
    add(run, tr("Memory budget…"), QKeySequence(), [this] { chooseMemoryBudget(); });

    QMenu* view = menuBar()->addMenu(tr("&View"));
    for (QDockWidget* d : findChildren<QDockWidget*>()) view->addAction(d->toggleViewAction());
    view->addSeparator();
    QAction* zoomIn = add(view, tr("Zoom &in"), QKeySequence::ZoomIn,
                          [this] { setZoom(ui::nextZoom(ui::currentAppearance().zoom, +1)); });
    zoomIn->setShortcuts({QKeySequence::ZoomIn, QKeySequence(QStringLiteral("Ctrl+="))});
    add(view, tr("Zoom &out"), QKeySequence::ZoomOut, [this] { setZoom(ui::nextZoom(ui::currentAppearance().zoom, -1)); });
    add(view, tr("&Actual size"), QKeySequence(QStringLiteral("Ctrl+0")), [this] { setZoom(100); });
    QAction* dark = add(view, tr("&Dark theme"), QKeySequence(), [this](bool on) { setDarkTheme(on); });
    dark->setObjectName(QStringLiteral("darkTheme"));
    dark->setCheckable(true);
    dark->setChecked(m_settings.darkTheme.get());
    view->addSeparator();
    add(view, tr("&Reset layout"), QKeySequence(), [this] {
        for (QDockWidget* d : findChildren<QDockWidget*>()) d->show();
        applyDefaultLayout();
    });

    m_lessons->addMenu(menuBar()->addMenu(tr("&Lessons")));

    // The project's own reference (docs/, installed in /usr/share/doc/kvlens).
    QMenu* help = menuBar()->addMenu(tr("&Help"));
    auto openDocument = [this](const std::string& name, bool folder) {
        try {
            const std::filesystem::path page = findDocument(name);
            QDesktopServices::openUrl(QUrl::fromLocalFile(QString::fromStdString((folder ? page.parent_path() : page).string())));
        } catch (const std::exception& e) {
            QMessageBox::warning(this, tr("Documentation"), QString::fromStdString(e.what()));
        }
    };
    add(help, tr("&Policies reference"), QKeySequence::HelpContents, [openDocument] { openDocument("policies.md", false); });
    add(help, tr("&Documentation folder"), QKeySequence(), [openDocument] { openDocument("policies.md", true); });
    help->addSeparator();
    auto show = [this](const QString& title, const QString& html) {
        auto* box = new QMessageBox(QMessageBox::NoIcon, title, html, QMessageBox::Close, this);
        box->setTextFormat(Qt::RichText);
        box->setAttribute(Qt::WA_DeleteOnClose);
        box->open();  // non-modal: the window stays live behind it
    };
    add(help, tr("&What am I looking at?"), QKeySequence(), [this, show] { show(tr("What am I looking at?"), guideText()); });
    add(help, tr("&Keyboard shortcuts"), QKeySequence(), [this, show] { show(tr("Keyboard shortcuts"), shortcutsText()); });
    add(help, tr("&About KVLens"), QKeySequence(), [this, show] { show(tr("About KVLens"), aboutText()); });
}

QString MainWindow::importLlama2c(const QString& model, const QString& tokenizer, const QString& outDir) {
    QApplication::setOverrideCursor(Qt::WaitCursor);
    statusBar()->showMessage(tr("Importing %1…").arg(QFileInfo(model).fileName()));
    QString error;
    try {
        const ImportReport r =
            kvlens::importLlama2c(model.toStdString(), tokenizer.toStdString(), outDir.toStdString());
        statusBar()->showMessage(tr("Imported %1 (%2 parameters) into %3")
                                     .arg(QFileInfo(model).fileName())
                                     .arg(r.parameters)
                                     .arg(outDir),
                                 8000);
    } catch (const std::exception& e) {
        error = QString::fromStdString(e.what());
        statusBar()->showMessage(tr("Import failed: %1").arg(error), 8000);
    }
    QApplication::restoreOverrideCursor();
    if (!error.isEmpty()) return error;
    m_model->setDirectory(outDir);
    m_model->reload();
    return {};
}

void MainWindow::connectController() {
    Controller* c = m_controller;
    connect(m_prompt, &ui::PromptEditor::textEdited, c, &Controller::setPrompt);
    connect(m_prompt, &ui::PromptEditor::questionEdited, c, &Controller::setQuestion);
    connect(m_policies, &ui::PolicyList::policiesChanged, c, &Controller::setPolicies);
    connect(m_budget, &ui::BudgetEditor::budgetChanged, c, &Controller::setBudget);
    connect(m_budget, &ui::BudgetEditor::budgetChanged, m_memory, &ui::MemoryView::setBudget);
    connect(m_memory, &ui::MemoryView::whatIfRequested, c, &Controller::runWhatIf);
    connect(c, &Controller::whatIfDone, m_memory, &ui::MemoryView::showWhatIf);
    connect(m_budget, &ui::BudgetEditor::budgetPreviewed, c, &Controller::setBudget);
    connect(m_comparison, &ui::ComparisonView::selectionChanged, this, [this](int64_t l, int64_t h) {
        m_controller->setSelection(l, h);
        updateTimelineSelection();
        m_agreement->setSelection(l, h);
    });
    // A cell of the agreement matrix rings the tokens one policy keeps and the other evicts.
    connect(m_agreement, &ui::AgreementView::tokensPicked, this, [this](const std::vector<int64_t>& positions) {
        ui::Highlight h;
        h.tokens = positions;
        m_comparison->setHighlight(h);
    });
    connect(m_ranking, &ui::RankingView::matchMemoryToggled, c, &Controller::setMatchMemory);
    connect(c, &Controller::memoryMatched, m_ranking, [this](double, const QString& text) { m_ranking->setMatchText(text); });
    connect(c, &Controller::runIssued, m_ranking, [this] {
        if (!m_controller->matchMemory()) m_ranking->setMatchText(QString());
    });
    connect(m_transport, &ui::TransportBar::stepChanged, c, &Controller::setShownStep);
    connect(m_transport, &ui::TransportBar::decodeStepsChanged, this, [this](int n) {
        m_settings.decodeSteps.set(n);
        m_controller->setDecodeSteps(n);
    });
    connect(m_transport, &ui::TransportBar::freeRunningChanged, this,
            [this](bool free) { m_controller->setTeacherForced(!free); });
    connect(m_timeline, &ui::EvictionTimeline::stepSelected, c, &Controller::setShownStep);
    connect(m_timelinePolicy, qOverload<int>(&QComboBox::activated), this, [this] { updateTimelineSelection(); });
    connect(m_scale, &QComboBox::currentTextChanged, this, [this](const QString& name) {
        m_settings.colourScale.set(name);
        m_comparison->setColourScale(ui::colourScaleFromName(name));
        m_files->scheduleAutosave();
    });
    connect(m_model, &ui::ModelPanel::loadRequested, c, &Controller::loadModel);

    connect(c, &Controller::modelLoading, this, [this](int percent, const QString& stage) {
        m_model->setProgress(percent, stage);
        statusBar()->showMessage(tr("Loading the model: %1 (%2%)").arg(stage).arg(percent));
    });
    connect(c, &Controller::modelLoaded, this, &MainWindow::showModel);
    connect(c, &Controller::modelFailed, this, &MainWindow::showModelFailure);
    connect(c, &Controller::traceShown, this, &MainWindow::showTrace);
    connect(c, &Controller::historyChanged, this, [this](int n) {
        m_comparison->setStale({});  // a trace of the current run
        m_traceModel = m_controller->model().directory;
        m_transport->setAvailable(n);
        m_timeline->setHistory(m_controller->history());
    });
    connect(c, &Controller::runFinished, this, [this](quint64, double p, double t) {
        if (m_pendingStep >= 0) m_controller->setShownStep(std::exchange(m_pendingStep, -1));
        showRunStats(p, t);
    });
    // Every edit issues a run: autosave a few seconds after the last one.
    connect(c, &Controller::runIssued, m_files, &FileActions::scheduleAutosave);
    connect(c, &Controller::runFailed, this, [this](const QString& message) {
        m_error->setText(tr("The last edit could not run: %1").arg(message));
        m_error->show();
        markStale(tr("Previous run: the last edit could not run, so these columns are from before it."));
    });
    connect(c, &Controller::busyChanged, this, [this](bool busy) {
        m_busy->setRange(0, 0);  // indeterminate until the run says how far it is
        m_busy->setVisible(busy);
        m_busy->setToolTip(QString());
        // Only a run can be cancelled here (a model load cannot).
        m_cancelRun->setVisible(busy && m_controller->currentRunId() != 0);
    });
    connect(c, &Controller::runIssued, this, [this] {
        m_busy->setRange(0, 0);  // a new run: indeterminate until it reports
        m_cancelRun->setVisible(true);
    });
    connect(c, &Controller::runProgress, this, [this](int percent, const QString& text) {
        m_busy->setRange(0, 100);
        m_busy->setValue(percent);
        m_busy->setToolTip(text);
        statusBar()->showMessage(text);
    });
    connect(m_cancelRun, &QToolButton::clicked, c, &Controller::cancelRun);
    connect(c, &Controller::runCancelled, this, [this] {
        statusBar()->showMessage(tr("Cancelled: the views show the last results"), 10000);
        markStale(tr("Previous run: the run was cancelled, so these columns are the last finished run, not the "
                     "current settings (edit anything to run again)."));
    });
    connect(c, &Controller::promptCounted, m_prompt, [this](int tokens) { m_prompt->setTokenCount(tokens); });
    connect(c, &Controller::promptCounted, m_memory, [this](int tokens) { m_memory->setContext(tokens); });
    connect(c, &Controller::contextChecked, this, [this](const QString& warning) {
        m_contextWarning = warning.isEmpty() ? QString() : tr("Past the model's context: %1").arg(warning);
        showNotice();
    });
    connect(c, &Controller::memoryNoted, this, [this](const QString& note) {
        m_memoryWarning = note.isEmpty() ? QString() : tr("To stay within memory: %1.").arg(note);
        showNotice();
    });
    c->setLongContextDecider([this](const QString& message) {
        QMessageBox box(QMessageBox::Warning, tr("Run past the model's context?"), message,
                        QMessageBox::Yes | QMessageBox::No, this);
        box.setInformativeText(tr("Yes runs it anyway: it may take long, and the model's outputs there are "
                                  "extrapolation."));
        box.setDefaultButton(QMessageBox::No);
        return box.exec() == QMessageBox::Yes;
    });
}

void MainWindow::showModel(const ModelSummary& s) {
    m_model->setSummary(s);
    // The element size the run uses, from the summary's own KV formula.
    const uint64_t perElement = kvBytesPerToken(s.layers, s.kvHeads, s.headDim, 1);
    m_memory->setShape({s.layers, s.heads, s.kvHeads, s.headDim, perElement ? s.kvBytesPerToken / perElement : 4});
    m_settings.lastModelDir.set(QString::fromStdString(s.directory));
    auto tok = m_controller->tokenizer();
    m_metrics->setTokenPieces([tok](const std::vector<int64_t>& ids) {
        QStringList out;
        if (!tok) {
            for (int64_t id : ids) out << QStringLiteral("#%1 ").arg(id);
            return out;
        }
        const std::vector<int32_t> narrow(ids.begin(), ids.end());
        for (const std::string& piece : tok->decodePieces(narrow)) out << QString::fromStdString(piece);
        return out;
    });
    m_modelText = tr("%1 · %2 · %3/%4")
                      .arg(QFileInfo(QString::fromStdString(s.directory)).fileName(),
                           QString::fromStdString(s.family), QString::fromStdString(s.device),
                           QString::fromStdString(s.dtype));
    m_modelLabel->setText(m_modelText);
    m_modelLabel->setToolTip(QString());
    if (m_controller->shownTrace() && m_traceModel != s.directory)
        markStale(tr("Other model: these columns are from %1; %2 has not finished a run yet.")
                      .arg(QFileInfo(QString::fromStdString(m_traceModel)).fileName(),
                           QFileInfo(QString::fromStdString(s.directory)).fileName()));
    statusBar()->showMessage(tr("Loaded %1").arg(QString::fromStdString(s.directory)), 5000);
}

void MainWindow::markStale(const QString& why) {
    if (m_controller->shownTrace()) m_comparison->setStale(why);  // nothing shown: nothing to mark
}

void MainWindow::showModelFailure(const QString& message) {
    // The worker keeps the model it had, if any: the views and runs stay on it.
    const QString inUse =
        m_controller->modelReady() ? QString::fromStdString(m_controller->model().directory) : QString();
    m_model->setFailed(message, inUse);
    statusBar()->showMessage(inUse.isEmpty() ? tr("The model did not load; no model is in use")
                                             : tr("The model did not load; still using %1").arg(inUse));
    auto* box = new QMessageBox(QMessageBox::Critical, tr("Cannot load the model"), message, QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();  // not exec(): the window stays live behind it
}

QString MainWindow::contextNotice() const { return m_notice->text(); }

void MainWindow::showNotice() {
    QStringList parts;
    for (const QString& p : {m_contextWarning, m_memoryWarning})
        if (!p.isEmpty()) parts << p;
    m_notice->setText(parts.join(QLatin1Char(' ')));
    m_notice->setVisible(!parts.isEmpty());
}

void MainWindow::setZoom(int percent) {
    ui::Appearance a = ui::currentAppearance();
    a.zoom = std::clamp(percent, ui::kMinZoom, ui::kMaxZoom);
    ui::applyAppearance(a);
    m_settings.zoom.set(a.zoom);
    statusBar()->showMessage(tr("zoom %1 %").arg(a.zoom), 2000);
}

bool MainWindow::presenter() const { return ui::currentAppearance().presenter; }

void MainWindow::setPresenter(bool on) {
    if (on == presenter()) return;
    if (on) m_beforePresenter = saveState();
    ui::Appearance a = ui::currentAppearance();
    a.presenter = on;
    ui::applyAppearance(a);
    if (on) {
        for (const char* name : {"timeline", "model", "policies", "needle", "memory", "sweep", "agreement", "ranking"})
            if (auto* d = findChild<QDockWidget*>(QString::fromLatin1(name))) d->hide();
    } else if (!m_beforePresenter.isEmpty()) {
        restoreState(m_beforePresenter);
    }
    if (!m_controller->history().empty()) showTrace(m_controller->shownTrace(), m_controller->shownStep());
    Q_EMIT presenterChanged(on);
}

void MainWindow::setDarkTheme(bool dark) {
    ui::Appearance a = ui::currentAppearance();
    a.dark = dark;
    ui::applyAppearance(a);
    m_settings.darkTheme.set(dark);
    if (auto* action = findChild<QAction*>(QStringLiteral("darkTheme"))) action->setChecked(dark);
    // The full cache's colour follows the theme: draw the shown trace again.
    if (!m_controller->history().empty()) showTrace(m_controller->shownTrace(), m_controller->shownStep());
}

QString MainWindow::openSweep(const QString& file) {
    const QString error = m_sweeps->openSweep(file);
    if (!error.isEmpty()) m_sweep->setStatus(error.toHtmlEscaped());
    // The dock with something to show: the fidelity curves, else the needle grid.
    const bool curves = error.isEmpty() && !m_sweep->view()->curves().empty();
    const bool grid = error.isEmpty() && m_needle->view()->result();
    if (auto* d = findChild<QDockWidget*>(!curves && grid ? QStringLiteral("needle") : QStringLiteral("sweep"))) d->raise();
    return error;
}

void MainWindow::openSweepAsked() {
    const QString f = QFileDialog::getOpenFileName(this, tr("Open sweep"), QString(),
                                                   tr("Sweep files and merged sweeps (*.json);;All files (*)"));
    if (!f.isEmpty()) openSweep(f);
}

void MainWindow::connectSweep() {
    connect(m_sweep, &ui::SweepPanel::openRequested, this, &MainWindow::openSweepAsked);
    connect(m_sweep, &ui::SweepPanel::runRequested, this, [this] {
        const QString folder = QFileDialog::getExistingDirectory(this, tr("Folder for the sweep (empty, or one to continue)"));
        if (folder.isEmpty()) return;
        const QString error = m_sweeps->startSweep(folder);
        if (!error.isEmpty()) m_sweep->setStatus(error.toHtmlEscaped());
    });
    connect(m_sweep, &ui::SweepPanel::cancelRequested, m_sweeps, &SweepActions::cancel);
}

void MainWindow::connectNeedle() {
    connect(m_needle, &ui::NeedlePanel::runRequested, this, [this] {
        try {
            m_controller->runNeedle(m_needle->options(m_prompt->text().toStdString()));
            m_needle->setRunning(true);
        } catch (const Error& e) {
            m_needle->setMessage(QString::fromStdString(e.what()));
        }
    });
    connect(m_needle, &ui::NeedlePanel::cancelRequested, m_controller, &Controller::cancelNeedle);
    connect(m_controller, &Controller::needleProgress, m_needle, &ui::NeedlePanel::setProgress);
    connect(m_controller, &Controller::needleReady, this,
            [this](const std::shared_ptr<const eval::NeedleGridResult>& r) {
                m_needle->setRunning(false);
                m_needle->setResult(r);
                std::set<std::pair<int64_t, double>> probes;
                for (const auto& c : r->cells) probes.insert({c.context, c.depth});
                // The same unit as the progress bar's probes, and what each holds.
                m_needle->setMessage(tr("%1 probes (context × depth), %2 cells (each probe × run and budget)")
                                         .arg(probes.size())
                                         .arg(r->cells.size()));
            });
    connect(m_controller, &Controller::needleFailed, this, [this](const QString& message) {
        m_needle->setRunning(false);
        m_needle->setMessage(message.isEmpty() ? tr("cancelled") : message);
    });
}

void MainWindow::start(const QString& modelDir, const QString& prompt) {
    if (!m_restoredLayout) applyDefaultLayout();
    m_model->setDevices(deviceChoices());
    m_model->setStartDirectory(m_settings.lastModelDir.get());
    const int steps = m_settings.decodeSteps.get();
    m_transport->setDecodeSteps(steps);
    m_controller->setDecodeSteps(steps);
    m_scale->setCurrentText(m_settings.colourScale.get());
    m_comparison->setColourScale(ui::colourScaleFromName(m_scale->currentText()));
    if (const QString bad = setMemoryBudget(m_settings.memoryBudget.get()); !bad.isEmpty())
        statusBar()->showMessage(tr("The saved memory budget is not used: %1").arg(bad), 10000);

    QStringList names, texts;
    QString initial;
    for (const Example& e : loadExamples()) {
        names << e.name;
        texts << e.text;
        if (e.name == QLatin1String(defaultExampleName()) || initial.isEmpty()) initial = e.text;
    }
    m_prompt->setExamples(names, texts);
    m_prompt->selectExample(QLatin1String(defaultExampleName()));
    m_prompt->setText(!prompt.isEmpty()   ? prompt
                      : initial.isEmpty() ? QStringLiteral("the code for the red door is 4 8 2 1 .")
                                          : initial);
    m_policies->setPolicies({parsePolicySpec("streaming"), parsePolicySpec("h2o"), parsePolicySpec("snapkv")});
    m_policies->select(0);  // its parameters show, so the form is discoverable
    m_controller->setPolicies(m_policies->policies());
    m_controller->setBudget(m_budget->spec());
    m_memory->setBudget(m_budget->spec());
    QString dir = modelDir;
    if (dir.isEmpty()) {
        try {
            dir = QString::fromStdString(bundledModelDir().string());
        } catch (const Error& e) {
            Q_EMIT m_controller->modelFailed(QString::fromStdString(e.what()));  // as a failed load: shown, and --screenshot quits
            return;
        }
    }
    m_model->setDirectory(dir);
    m_controller->loadModel(dir, m_model->settings());
    m_files->startup();
}

void MainWindow::showTrace(const std::shared_ptr<const Trace>& trace, int step) {
    // The views of a long run need memory too (a heatmap's pyramid per
    // column): when it runs out, say so and keep the window up.
    try {
        showTraceViews(trace, step);
    } catch (const std::bad_alloc&) {
        m_error->setText(tr("Out of memory while drawing step %1: shorten the prompt or run fewer policies.").arg(step));
        m_error->show();
    }
}

void MainWindow::showTraceViews(const std::shared_ptr<const Trace>& trace, int step) {
    m_error->hide();
    m_comparison->setTrace(trace);
    m_metrics->setTrace(trace);
    m_agreement->setSelection(m_comparison->selectedLayer(), m_comparison->selectedHead());
    m_agreement->setTrace(trace);
    m_ranking->setTrace(trace, m_controller->matchTarget());
    m_budget->setContext(trace->numLayers, trace->promptLength);
    m_budget->setTrace(trace);
    m_transport->setStep(step);
    m_timeline->setCurrentStep(step);
    // The counter under the prompt and the line over the columns count the
    // same tokens: the prompt's, the question's when it ends the prompt
    // (query-aware), then those read since.
    const int64_t counted = m_controller->promptTokens();
    if (counted > 0 && counted <= trace->promptLength)
        m_prompt->setTokenCount(static_cast<int>(counted), static_cast<int>(trace->promptLength - counted));
    m_model->setSlidingWindow(trace->slidingWindow);
    m_modelLabel->setText(trace->slidingWindow > 0 ? tr("%1 · sliding window %2").arg(m_modelText).arg(trace->slidingWindow)
                                                   : m_modelText);
    m_modelLabel->setToolTip(m_model->slidingWindowText());
    updateTimelinePolicies(*trace);
    const int64_t group = trace->numHeads / std::max<int64_t>(1, trace->numKvHeads);
    m_selection->setText(tr("layer %1 · query head %2 (KV head %3) · step %4 · %5 prompt + %6 read since")
                             .arg(m_comparison->selectedLayer())
                             .arg(m_comparison->selectedHead())
                             .arg(m_comparison->selectedHead() / group)
                             .arg(trace->step)
                             .arg(trace->promptLength)
                             .arg(static_cast<int64_t>(trace->tokens.size()) - trace->promptLength));
}

void MainWindow::updateTimelinePolicies(const Trace& trace) {
    QStringList labels;
    for (const auto& p : trace.policies) labels << QString::fromStdString(p.label);
    QStringList current;
    for (int i = 0; i < m_timelinePolicy->count(); ++i) current << m_timelinePolicy->itemText(i);
    if (labels == current) return;
    const int keep = std::clamp(m_timelinePolicy->currentIndex() < 0 ? 1 : m_timelinePolicy->currentIndex(), 0,
                                static_cast<int>(labels.size()) - 1);
    m_timelinePolicy->clear();
    m_timelinePolicy->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    m_timelinePolicy->addItems(labels);
    m_timelinePolicy->setCurrentIndex(keep);
    updateTimelineSelection();
}

void MainWindow::updateTimelineSelection() {
    const auto trace = m_controller->shownTrace();
    const int64_t group = trace ? trace->numHeads / std::max<int64_t>(1, trace->numKvHeads) : 1;
    m_timeline->setSelection(std::max(0, m_timelinePolicy->currentIndex()), m_comparison->selectedLayer(),
                             m_comparison->selectedHead() / group);
}

void MainWindow::showRunStats(double promptMs, double totalMs) {
    const auto t = m_controller->shownTrace();
    if (!t) return;
    QString text = tr("full + %1 policies · %2 prompt tokens · prompt read in %3 ms · %4 decode steps in %5 ms")
                       .arg(t->policies.size() - 1)
                       .arg(t->promptLength)
                       .arg(promptMs, 0, 'f', 0)
                       .arg(m_controller->history().size() - 1)
                       .arg(totalMs, 0, 'f', 0);
    if (!m_controller->reuse().isEmpty()) text += tr(" · %1").arg(m_controller->reuse());
    statusBar()->showMessage(text);
}

SessionFile MainWindow::sessionState() const {
    SessionFile s = m_sessionExtras;
    std::string dir = m_controller->modelReady() ? m_controller->model().directory : m_model->directory().toStdString();
    std::error_code ec;
    try {
        // The bundled model is saved as "" so the session opens on any install.
        if (!dir.empty() && std::filesystem::equivalent(dir, bundledModelDir(), ec)) dir.clear();
    } catch (const Error&) {
    }
    s.modelDir = dir;
    try {
        const std::string key = dir.empty() ? bundledModelDir().string() : dir;
        if (key != m_fingerprintDir) {
            m_fingerprint = modelFingerprint(key);
            m_fingerprintDir = key;
        }
        s.modelFingerprint = m_fingerprint;
    } catch (const Error&) {
        s.modelFingerprint.clear();  // no config.json: nothing to check against later
    }
    s.prompt = m_prompt->text().toStdString();
    s.question = m_prompt->question().toStdString();
    s.questionMode = m_prompt->questionAware() ? "aware" : "agnostic";
    s.calibration = m_controller->calibration().toStdString();
    s.policies.clear();
    s.scripts.clear();
    s.colours = m_policies->colourSlots();
    for (const PolicyConfig& p : m_policies->policies()) {
        s.policies.push_back(p.spec());
        const std::string& file = findPolicy(p.id).file;
        if (!file.empty()) s.scripts[file] = scriptFingerprint(file);
    }
    const BudgetSpec b = m_budget->spec();
    s.budget = b.perLayer.empty() ? b.text() : std::string();
    s.budgets = b.perLayer.empty() ? std::string() : b.text();
    s.decodeSteps = m_transport->decodeSteps();
    s.teacherForced = !m_transport->freeRunning();
    s.view.layer = m_comparison->selectedLayer();
    s.view.head = m_comparison->selectedHead();
    const int last = static_cast<int>(m_controller->history().size()) - 1;
    s.view.step = m_controller->shownStep() >= last ? -1 : m_controller->shownStep();
    s.view.colourScale = ui::colourScaleName(m_comparison->colourScale()).toStdString();
    // The Budget dock's run when one was chosen (by the user or a session).
    s.view.budgetRun.clear();
    for (const PolicyConfig& p : m_policies->policies())
        if (QString::fromStdString(p.label()) == m_budget->chosenRun()) s.view.budgetRun = p.spec();
    s.view.rankBy = m_ranking->sortKey().toStdString();
    return s;
}

QString MainWindow::applySession(const SessionFile& s) {
    std::filesystem::path dir;
    std::vector<PolicyConfig> policies;
    BudgetSpec budget = m_budget->spec();
    std::string note;
    try {
        dir = sessionModelDir(s);
        checkSessionView(s, loadConfig(dir / "config.json"));
        for (const auto& spec : s.policies) policies.push_back(parsePolicySpec(spec));
        if (auto saved = sessionBudget(s)) budget = std::move(*saved);
        if (s.view.colourScale != "linear" && s.view.colourScale != "log" && s.view.colourScale != "power")
            throw ArgumentError("view.colour_scale '" + s.view.colourScale + "' is not linear, log or power");
        note = fingerprintNote(s, dir);
        // A budget above 100% runs clamped; the editor shows the clamped
        // value, the status bar says why (zero or less is refused).
        if (!budget.note.empty()) note = budget.note + (note.empty() ? "" : "; " + note);
    } catch (const std::exception& e) {
        return QString::fromStdString(e.what());
    }
    m_sessionExtras = s;
    m_prompt->setText(QString::fromStdString(s.prompt));  // emits textEdited: the controller follows
    m_prompt->setQuestion(QString::fromStdString(s.question), s.questionMode == "aware");
    m_controller->setCalibration(QString::fromStdString(s.calibration));
    m_policies->setPolicies(policies, s.colours);
    m_controller->setPolicies(policies);
    ui::BudgetState state = m_budget->state();
    if (!budget.perLayer.empty()) {
        state.preset = ui::BudgetState::Preset::Custom;
        state.perLayer = budget.perLayer;
        state.percent = 0;
    } else {
        state.preset = ui::BudgetState::Preset::Uniform;
        const bool ratio = budget.kind == BudgetSpec::Kind::Ratio;
        state.percent = ratio ? budget.value : 0;
        if (!ratio) state.budget = static_cast<int64_t>(budget.value);
    }
    m_budget->edit(state, tr("open session"));
    m_transport->setDecodeSteps(static_cast<int>(s.decodeSteps));
    m_controller->setDecodeSteps(static_cast<int>(s.decodeSteps));
    m_transport->setFreeRunning(!s.teacherForced);
    m_controller->setTeacherForced(s.teacherForced);
    m_scale->setCurrentText(QString::fromStdString(s.view.colourScale));
    applyView(s.view);
    m_pendingStep = static_cast<int>(s.view.step);
    if (!note.empty()) statusBar()->showMessage(QString::fromStdString(note), 15000);
    std::error_code ec;
    const std::string current = m_controller->model().directory;
    if (!m_controller->modelReady() || current.empty() || !std::filesystem::equivalent(dir, current, ec)) {
        m_model->setDirectory(QString::fromStdString(dir.string()));
        m_controller->loadModel(QString::fromStdString(dir.string()), m_model->settings());
    } else {
        m_controller->runNow();
    }
    return {};
}

void MainWindow::applyView(const SessionFile::View& view) {
    m_comparison->setSelection(view.layer, view.head);
    m_controller->setSelection(view.layer, view.head);
    // The spec was checked against the session's policies when it was read.
    m_budget->showRun(view.budgetRun.empty() ? QString()
                                             : QString::fromStdString(parsePolicySpec(view.budgetRun).label()));
    m_ranking->sortBy(QString::fromStdString(view.rankBy));
}

void MainWindow::closeEvent(QCloseEvent* e) {
    if (!m_files->maybeSave()) {
        e->ignore();
        return;
    }
    m_settings.geometry.set(saveGeometry());
    m_settings.windowState.set(saveState());
    QMainWindow::closeEvent(e);
}

}  // namespace kvlens::gui
