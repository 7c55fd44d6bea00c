#pragma once
// The main window: prompt, model, policies and budget on the left, the
// comparison view with its transport in the middle, metrics on the right,
// the eviction timeline below. It wires widgets to the Controller and keeps
// the undo stack shared by budget and policy edits.
#include <QMainWindow>
#include <memory>

#include "app/gui/controller.h"
#include "app/gui/setting_value.h"
#include "core/io/session_file.h"

class QUndoStack;
class QComboBox;
class QLabel;
class QProgressBar;
class QToolButton;

namespace kvlens::ui {
class ComparisonView;
class BudgetEditor;
class PolicyList;
class ModelPanel;
class MetricsPanel;
class TransportBar;
class EvictionTimeline;
class PromptEditor;
class NeedlePanel;
class MemoryView;
class AgreementView;
class RankingView;
class SweepPanel;
class LessonPanel;
}  // namespace kvlens::ui

namespace kvlens::gui {

class FileActions;
class SweepActions;
class LessonActions;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    // Loads the model (the bundled one when `modelDir` is empty) and runs the
    // default example (or `prompt` when given) with full + streaming, h2o and snapkv.
    void start(const QString& modelDir, const QString& prompt = QString());

    Controller* controller() const { return m_controller; }
    ui::ComparisonView* comparison() const { return m_comparison; }
    ui::BudgetEditor* budgetEditor() const { return m_budget; }
    ui::PolicyList* policyList() const { return m_policies; }
    ui::ModelPanel* modelPanel() const { return m_model; }
    ui::MetricsPanel* metrics() const { return m_metrics; }
    ui::TransportBar* transport() const { return m_transport; }
    ui::EvictionTimeline* timeline() const { return m_timeline; }
    ui::PromptEditor* promptEditor() const { return m_prompt; }
    ui::NeedlePanel* needlePanel() const { return m_needle; }
    ui::MemoryView* memoryView() const { return m_memory; }
    ui::AgreementView* agreementView() const { return m_agreement; }
    ui::RankingView* rankingView() const { return m_ranking; }
    ui::SweepPanel* sweepPanel() const { return m_sweep; }
    SweepActions* sweeps() const { return m_sweeps; }
    ui::LessonPanel* lessonPanel() const { return m_lessonPanel; }
    LessonActions* lessons() const { return m_lessons; }
    // View → Zoom in / out / Actual size (Ctrl+= Ctrl+− Ctrl+0) and Dark theme:
    // applied to every panel and plot at once and kept for the next start.
    void setZoom(int percent);
    void setDarkTheme(bool dark);
    // Presenter mode (Lessons menu, the lesson dock's toggle): large text,
    // thick lines, the high-contrast palette (ui::Appearance::presenter) and
    // fewer panels — the timeline, model, policies, needle, memory and sweep
    // docks hide (a lesson step shows the ones it names); leaving it puts
    // the docks back as they were. Not kept in settings: a window starts
    // at the desk, not in front of a room.
    void setPresenter(bool on);
    bool presenter() const;
    // Opens a sweep (SweepActions::openSweep) and brings the Sweep dock to the
    // front; the reason on failure, shown in the dock too.
    QString openSweep(const QString& file);
    FileActions* files() const { return m_files; }
    QString contextNotice() const;  // the shown warning about the run's length, empty when none
    // The Help menu's pages (rich text): every menu shortcut, a short guide
    // to the panels, versions of KVLens, Qt, LibTorch and the model.
    QString shortcutsText() const;
    QString guideText() const;
    QString aboutText() const;

    // What a session file holds: model, prompt, policies, budgets, decoding, view.
    SessionFile sessionState() const;
    // Puts a session's state in place and runs it (loading its model when it
    // names another). Checks everything first: on an error nothing changes
    // and the reason is returned; empty on success.
    QString applySession(const SessionFile& session);
    // The view part of a session on the runs shown: the heatmap's layer and
    // head, the run the Budget dock shows per KV head, the Ranking dock's order.
    void applyView(const SessionFile::View& view);
    // Run ▸ Calibrate Q-Filters on a text file…: a dialog, then the controller.
    void chooseCalibration();
    // Run ▸ Memory budget…: "8G", or empty for half the physical memory; the
    // reason when `text` is not a size (nothing changes then).
    void chooseMemoryBudget();
    QString setMemoryBudget(const QString& text);
    // File > Import llama2.c model...: converts MODEL.bin + TOKENIZER.bin into
    // the new folder outDir (core/model/llama2c.h) and opens it. Returns the
    // reason on failure (nothing is written then), empty on success.
    QString importLlama2c(const QString& model, const QString& tokenizer, const QString& outDir);

Q_SIGNALS:
    void presenterChanged(bool on);

protected:
    void closeEvent(QCloseEvent* e) override;

private:
    QWidget* buildCentral();
    // main_window_layout.cpp
    void buildDocks();
    void applyDefaultLayout();
    void fitToScreen();
    void buildActions();
    void connectController();
    // The model panel, memory view, token pieces and status line follow a
    // loaded model, or say why it did not load.
    void showModel(const ModelSummary& s);
    void showModelFailure(const QString& message);
    // Marks the columns as not the current settings' run (when any are shown).
    void markStale(const QString& why);
    void connectNeedle();
    void connectSweep();
    void openSweepAsked();
    void showTrace(const std::shared_ptr<const Trace>& trace, int step);
    void showTraceViews(const std::shared_ptr<const Trace>& trace, int step);
    void updateTimelinePolicies(const Trace& trace);
    void updateTimelineSelection();
    void showRunStats(double promptMs, double totalMs);

    Settings m_settings;
    QUndoStack* m_undo;
    Controller* m_controller;
    ui::ComparisonView* m_comparison;
    ui::BudgetEditor* m_budget;
    ui::PolicyList* m_policies;
    ui::ModelPanel* m_model;
    ui::MetricsPanel* m_metrics;
    ui::TransportBar* m_transport;
    ui::EvictionTimeline* m_timeline;
    ui::PromptEditor* m_prompt;
    ui::NeedlePanel* m_needle;
    ui::MemoryView* m_memory;
    ui::AgreementView* m_agreement;
    ui::RankingView* m_ranking;
    ui::SweepPanel* m_sweep;
    ui::LessonPanel* m_lessonPanel;
    QComboBox* m_scale;
    QComboBox* m_timelinePolicy;
    QLabel* m_selection;
    QLabel* m_error;
    QLabel* m_notice;  // a run past the model's context, what the memory guard dropped (warnings; it runs)
    QString m_contextWarning, m_memoryWarning;
    void showNotice();
    QProgressBar* m_busy;
    QToolButton* m_cancelRun;
    QLabel* m_modelLabel;
    QString m_modelText;  // m_modelLabel's text without the sliding window
    std::string m_traceModel;  // the model directory of the run the columns show
    bool m_restoredLayout = false;
    FileActions* m_files;
    SweepActions* m_sweeps;
    LessonActions* m_lessons = nullptr;
    QByteArray m_beforePresenter;  // the dock layout presenter mode replaced
    SessionFile m_sessionExtras;  // sampling fields the GUI does not edit, kept from the last opened session
    int m_pendingStep = -1;       // the step an opened session shows, once its run finishes
    mutable std::string m_fingerprintDir, m_fingerprint;  // modelFingerprint() of the loaded model, cached
};

}  // namespace kvlens::gui
