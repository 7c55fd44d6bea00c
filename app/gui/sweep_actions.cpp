#include "app/gui/sweep_actions.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QLabel>
#include <QProcess>
#include <QStandardPaths>
#include <fstream>

#include "app/gui/main_window.h"
#include "core/error.h"
#include "core/json_error.h"
#include "core/study/needle_grid.h"
#include "core/study/needle_io.h"
#include "core/read_file.h"
#include "core/safe_file.h"
#include "widgets/needle_panel.h"
#include "widgets/sweep_panel.h"

namespace kvlens::gui {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

QString statusText(const QString& name, const sweep::SweepStatus& st) {
    QString text = QObject::tr("<b>%1</b>: %2 of %3 cells done (%4 of %5 probes)")
                       .arg(name.toHtmlEscaped())
                       .arg(st.doneCells)
                       .arg(st.cells)
                       .arg(st.doneProbes)
                       .arg(st.probes);
    if (!st.missing.empty()) text += QObject::tr("; %1 probe(s) missing").arg(st.missing.size());
    if (!st.failed.empty())
        text += QObject::tr("; %1 failed, first: %2")
                    .arg(st.failed.size())
                    .arg(QString::fromStdString(st.failed.front().first + ": " + st.failed.front().second).toHtmlEscaped());
    return text;
}

}  // namespace

SweepActions::SweepActions(MainWindow* window, ui::SweepPanel* panel, ui::NeedlePanel* needle)
    : QObject(window), m_window(window), m_panel(panel), m_needle(needle) {
    m_poll.setInterval(300);
    connect(&m_poll, &QTimer::timeout, this, &SweepActions::poll);
}

SweepActions::~SweepActions() {
    if (!m_process) return;
    // SIGTERM: the pool stops its workers after their current probe; what is done stays.
    m_process->disconnect(this);
    m_process->terminate();
    if (!m_process->waitForFinished(10000)) m_process->kill();
}

QString SweepActions::cliPath() {
    const QString env = qEnvironmentVariable("KVLENS_CLI");
    if (!env.isEmpty()) return QFileInfo(env).isExecutable() ? env : QString();
    const QDir here(QCoreApplication::applicationDirPath());
    for (const QString& p : {here.filePath(QStringLiteral("kvlens-cli")), here.filePath(QStringLiteral("../kvlens-cli"))})
        if (QFileInfo(p).isExecutable()) return QFileInfo(p).canonicalFilePath();
    return QStandardPaths::findExecutable(QStringLiteral("kvlens-cli"));
}

QString SweepActions::openSweep(const QString& file) {
    try {
        const fs::path path = file.toStdString();
        json j;
        try {
            j = json::parse(readRegularFile(path));
        } catch (const json::exception& e) {
            throw FormatError(path.string(), jsonErrorText(e.what()));
        }
        const std::string format = j.is_object() ? j.value("format", "") : "";
        sweep::Merged merged;
        std::vector<std::string> models;
        std::vector<std::string> names;
        std::shared_ptr<const eval::NeedleGridResult> grid;
        QString name;
        if (format == "kvlens-sweep") {
            const sweep::SweepSpec spec = sweep::parseSweep(j, path);
            merged = sweep::mergeResults(spec, sweep::readResults(spec));
            models = spec.models;
            for (size_t m = 0; m < models.size(); ++m) names.push_back(sweep::modelName(spec, m));
            for (size_t m = 0; m < models.size() && !grid; ++m)
                if (merged.hasTask(sweep::Task::Needle, m))
                    grid = std::make_shared<const eval::NeedleGridResult>(merged.needleGrid(spec, m));
            name = QString::fromStdString(spec.name);
        } else if (format == "kvlens-sweep-result") {
            merged = sweep::mergedFromJson(j, path.string(), &models);
            names = models;
            const json grids = j.value("needle_grids", json::object());
            for (const auto& m : models)
                if (grids.contains(m)) {
                    grid = std::make_shared<const eval::NeedleGridResult>(needleGridFromJson(grids.at(m)));
                    break;
                }
            name = QString::fromStdString(j.value("name", path.stem().string()));
        } else {
            throw FormatError(path.string(), "neither a sweep file (format kvlens-sweep) nor a merged sweep "
                                             "(kvlens-sweep-result), format \"" + format + "\"");
        }
        std::vector<sweep::FidelityCurve> curves;
        QString curvesOf;
        for (size_t m = 0; m < models.size() && curves.empty(); ++m) {
            curves = sweep::fidelityCurves(merged, m);
            curvesOf = QString::fromStdString(names[m]);
        }
        if (grid) m_needle->setResult(grid);
        m_panel->setCurves(curves, curvesOf + QStringLiteral(" · ") + name);
        m_panel->setProgress(merged.status.doneCells, merged.status.cells);
        m_panel->setStatus(statusText(name, merged.status) +
                           (grid ? tr("; its needle grid is in the Needle dock") : QString()));
        return {};
    } catch (const Error& e) {
        return QString::fromStdString(e.what());
    }
}

QString SweepActions::startSweep(const QString& folder) {
    if (m_process) return tr("a sweep is already running");
    const QString cli = cliPath();
    if (cli.isEmpty()) return tr("kvlens-cli was not found beside kvlens or on PATH (set KVLENS_CLI)");
    try {
        const SessionFile state = m_window->sessionState();
        const eval::NeedleGridOptions grid = m_needle->options(state.prompt);
        const fs::path dir = folder.toStdString();
        std::vector<std::string> policies;
        for (const auto& p : state.policies)
            if (!isFullCache(parsePolicySpec(p))) policies.push_back(p);
        if (policies.empty()) throw ArgumentError("add a policy to the Policies list: a sweep compares policies");
        if (grid.budgets.empty()) throw ArgumentError("budgets: give the Needle dock at least one budget");
        json budgets = json::array();
        for (const auto& b : grid.budgets) budgets.push_back(b.text());
        json depths = json::array();
        for (double d : grid.depths) depths.push_back(d * 100);
        json seeds = json::array();
        for (int64_t s = 0; s < grid.samples; ++s) seeds.push_back(grid.seed + static_cast<uint64_t>(s));
        const auto tasks = m_panel->tasks();
        json j{{"format", "kvlens-sweep"},
               {"version", 1},
               {"name", dir.filename().string()},
               {"output", "."},
               {"models", {state.modelDir.empty() ? std::string("bundled") : fs::absolute(state.modelDir).string()}},
               {"task", tasks == ui::SweepPanel::Tasks::Needle ? "needle"
                        : tasks == ui::SweepPanel::Tasks::Fidelity ? "fidelity" : "both"},
               {"policies", policies},
               {"budgets", budgets},
               {"contexts", grid.contexts},
               {"depths", depths},
               {"seeds", seeds},
               {"run", {{"threads", 1}}},
               {"shards", m_panel->workers()}};
        std::vector<std::pair<fs::path, std::string>> texts;
        if (grid.user) {
            j["needle"] = {{"haystack_file", "haystack.txt"}, {"needle", grid.user->needle},
                           {"question", grid.user->question}, {"answer", grid.user->answer}};
            texts.emplace_back(dir / "haystack.txt", grid.user->haystack);
        }
        if (tasks != ui::SweepPanel::Tasks::Needle) {
            j["fidelity"] = {{"text_file", "prompt.txt"}, {"steps", state.decodeSteps}};
            texts.emplace_back(dir / "prompt.txt", state.prompt);
        }
        const fs::path file = dir / "sweep.json";
        const std::string text = j.dump(2) + "\n";
        std::error_code ec;
        fs::create_directories(dir, ec);
        if (ec) throw IoError("cannot create " + dir.string() + ": " + ec.message());
        // Never over another sweep: the same one (and its texts) resumes.
        auto sameOrAbsent = [](const fs::path& f, const std::string& content) {
            return !fs::exists(f) || readRegularFile(f) == content;
        };
        bool same = sameOrAbsent(file, text);
        for (const auto& [f, t] : texts) same = same && sameOrAbsent(f, t);
        if (!same)
            throw ArgumentError(dir.string() + " holds another sweep (its sweep.json or texts differ): choose an empty "
                                               "folder, or the same settings to continue it");
        for (const auto& [f, t] : texts) writeFileAtomically(f, t);
        writeFileAtomically(file, text);
        m_spec = sweep::readSweepFile(file);  // checks what was written, as the CLI will
        m_file = QString::fromStdString(file.string());
    } catch (const Error& e) {
        return QString::fromStdString(e.what());
    }
    m_stderr.clear();
    m_process = new QProcess(this);
    m_process->setProcessChannelMode(QProcess::SeparateChannels);
    m_process->setStandardOutputFile(QProcess::nullDevice());
    connect(m_process, &QProcess::readyReadStandardError, this, [this] { m_stderr += m_process->readAllStandardError(); });
    connect(m_process, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
        done(status == QProcess::NormalExit ? code : 128);
    });
    connect(m_process, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
        if (e == QProcess::FailedToStart) done(127);
    });
    m_process->start(cli, {QStringLiteral("sweep"), QStringLiteral("run"), m_file, QStringLiteral("--workers"),
                           QString::number(m_panel->workers()), QStringLiteral("--quiet")});
    m_panel->setRunning(true);
    m_panel->setStatus(tr("running %1 with %2 worker(s)…").arg(m_file.toHtmlEscaped()).arg(m_panel->workers()));
    poll();
    m_poll.start();
    return {};
}

void SweepActions::cancel() {
    if (m_process) m_process->terminate();  // SIGTERM: the pool stops cleanly (exit 130)
}

void SweepActions::poll() {
    if (!m_spec) return;
    try {
        const auto st = sweep::sweepStatus(*m_spec, sweep::readResults(*m_spec));
        m_panel->setProgress(st.doneCells, st.cells);
    } catch (const Error&) {  // a results file being renamed into place: the next poll
    }
}

void SweepActions::done(int exitCode) {
    if (!m_process) return;
    m_poll.stop();
    poll();
    m_process->deleteLater();
    m_process = nullptr;
    m_panel->setRunning(false);
    const QString opened = openSweep(m_file);
    QString message;
    if (exitCode == 130) message = tr("cancelled; what was done is kept: Run as sweep on the same folder continues");
    else if (exitCode == 127) message = tr("kvlens-cli could not be started");
    else if (exitCode != 0) {
        const QList<QByteArray> lines = m_stderr.trimmed().split('\n');
        message = lines.isEmpty() ? tr("kvlens-cli ended with %1").arg(exitCode) : QString::fromUtf8(lines.last()).trimmed();
    }
    if (!opened.isEmpty()) message += (message.isEmpty() ? QString() : QStringLiteral("; ")) + opened;
    if (!message.isEmpty()) m_panel->setStatus(m_panel->status()->text() + QStringLiteral("<br>") + message.toHtmlEscaped());
    m_spec.reset();
    Q_EMIT finished(exitCode, message);
}

}  // namespace kvlens::gui
