#include "app/gui/worker.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <QCryptographicHash>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QStandardPaths>
#include <algorithm>
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "core/model/config.h"
#include "core/model/gguf_import.h"
#include "core/model/model.h"
#include "core/run/session.h"
#include "core/study/match_memory.h"
#include "core/study/what_if.h"

namespace kvlens::gui {

void registerMetaTypes() {
    qRegisterMetaType<std::shared_ptr<const Trace>>();
    qRegisterMetaType<std::shared_ptr<const Tokenizer>>();
    qRegisterMetaType<ModelSummary>();
    qRegisterMetaType<std::shared_ptr<const eval::NeedleGridResult>>();
    qRegisterMetaType<BudgetSpec>();
    qRegisterMetaType<RunSettings>();
}

namespace {

// A .gguf opens through a model folder imported once per file content:
// ~/.cache/kvlens/imported/gguf<importer version>-<first 16 hex digits of its
// SHA-256>. The version changes when the import would write something else,
// so a folder an older import wrote is not reused.
constexpr int kGgufImportVersion = 1;

std::filesystem::path importedGguf(const std::filesystem::path& gguf, const std::function<void(int, const QString&)>& progress) {
    QFile file(QString::fromStdString(gguf.string()));
    if (!file.open(QIODevice::ReadOnly)) throw FormatError(gguf.string(), "cannot be read");
    progress(2, QObject::tr("hashing the GGUF"));
    QCryptographicHash hash(QCryptographicHash::Sha256);
    if (!hash.addData(&file)) throw FormatError(gguf.string(), "cannot be read to the end");
    const QString root = QStandardPaths::writableLocation(QStandardPaths::GenericCacheLocation) + QStringLiteral("/kvlens/imported");
    const std::filesystem::path dir = (root + QStringLiteral("/gguf%1-").arg(kGgufImportVersion) +
                                       QString::fromLatin1(hash.result().toHex().left(16)))
                                          .toStdString();
    if (std::filesystem::exists(dir / "model.safetensors")) return dir;
    QDir().mkpath(root);
    GgufImportOptions options;
    options.progress = [&](int64_t done, int64_t total, const std::string&) {
        progress(5 + static_cast<int>(60 * done / std::max<int64_t>(1, total)), QObject::tr("importing the GGUF (once)"));
        return true;
    };
    try {
        importGguf(gguf, dir, options);
    } catch (const Error&) {
        // Another KVLens imported the same file meanwhile: its folder is complete (renamed into place whole).
        if (std::filesystem::exists(dir / "model.safetensors")) return dir;
        throw;
    }
    return dir;
}

}  // namespace

Worker::Worker(QObject* parent) : QObject(parent) {}
Worker::~Worker() = default;

void Worker::load(quint64 id, const QString& dir, const RunSettings& settings) {
    std::filesystem::path path = dir.toStdString();
    try {
        if (path.extension() == ".gguf" && std::filesystem::is_regular_file(path))
            path = importedGguf(path, [&](int percent, const QString& stage) { Q_EMIT loadProgress(id, percent, stage); });
        // Model::load reads config and weights in one call; the stages are
        // what the panel can honestly report.
        Q_EMIT loadProgress(id, 10, tr("reading weights"));
        auto model = loadModel(path, settings);
        const ModelConfig config = loadConfig(path / "config.json");  // what loadModel read: the context limit
        Q_EMIT loadProgress(id, 80, tr("reading tokenizer"));
        std::shared_ptr<const Tokenizer> tokenizer;
        if (std::filesystem::exists(path / "tokenizer.json"))
            tokenizer = std::make_shared<const Tokenizer>(Tokenizer::fromFile(path / "tokenizer.json"));
        else
            throw ModelError(path.string() + ": no tokenizer.json (the GUI needs it to read prompts)");
        // Only a complete load replaces the model in use.
        m_session.reset();
        m_model = std::move(model);
        m_tokenizer = tokenizer;
        Q_EMIT modelLoaded(id, summarizeModel(*m_model), m_tokenizer, config.maxPositions,
                           config.family == Family::Gpt2);
    } catch (const std::exception& e) {
        Q_EMIT loadFailed(id, QString::fromStdString(e.what()));
    }
}

void Worker::run(const RunRequest& r) {
    if (r.cancel && r.cancel->load()) return;  // superseded while queued
    if (!m_model || !m_tokenizer) {
        Q_EMIT runFailed(r.id, tr("no model is loaded"));
        return;
    }
    QElapsedTimer timer;
    timer.start();
    try {
        // The interactive refresh: the new Session takes over from the
        // previous one whatever the edit left valid (core/run/session.h).
        SessionOptions options = optionsFor(r);
        options.refreshable = true;
        const int steps = static_cast<int>(options.plannedSteps);
        if (r.matchMemory) options = matchBudgets(r, std::move(options), steps);
        auto session = std::make_unique<Session>(m_model, std::move(options), std::move(m_session));
        session->setCancelFlag(r.cancel.get());
        // Called from the Session's reporting thread: the signal is queued.
        session->setProgressCallback([this, id = r.id](const std::vector<RunProgress>& runs) {
            if (runs.empty()) return;  // every run was taken over: nothing to read
            int64_t done = 0, total = 0;
            QStringList parts;
            for (const RunProgress& p : runs) {
                done += p.done;
                total += p.total;
                parts << tr("%1 %2/%3").arg(QString::fromStdString(p.label)).arg(p.done).arg(p.total);
            }
            const int percent = total > 0 ? static_cast<int>(100 * done / total) : 100;
            Q_EMIT runProgress(id, percent, tr("Reading the prompt: %1").arg(parts.join(QStringLiteral(" · "))));
        });
        m_session = std::move(session);
        Q_EMIT runMemoryNote(r.id, QString::fromStdString(m_session->memoryNote()));
        Q_EMIT traceReady(r.id, m_session->start());
        Q_EMIT runReused(r.id, QString::fromStdString(m_session->reuse().text()));
        const double promptMs = static_cast<double>(timer.nsecsElapsed()) / 1e6;
        for (int s = 0; s < steps; ++s) {
            Q_EMIT runProgress(r.id, 100 * s / steps, tr("Decode step %1 of %2").arg(s + 1).arg(steps));
            Q_EMIT traceReady(r.id, m_session->step());
        }
        Q_EMIT runFinished(r.id, promptMs, static_cast<double>(timer.nsecsElapsed()) / 1e6);
    } catch (const Cancelled&) {
        // A newer request superseded this one; it is already queued (and
        // takes over what this Session finished).
    } catch (const std::exception& e) {
        m_session.reset();
        Q_EMIT runFailed(r.id, QString::fromStdString(e.what()));
    }
}

SessionOptions Worker::matchBudgets(const RunRequest& r, SessionOptions options, int steps) {
    const auto progress = [this, id = r.id](const std::string& line) {
        Q_EMIT runProgress(id, 0, tr("Matching memory: %1").arg(QString::fromStdString(line)));
    };
    const MemoryMatching m = matchMemory(m_model, options, steps, progress, r.cancel.get());
    QStringList lines;
    for (const MemoryMatch& p : m.policies)
        lines << tr("%1: budget %2, %3% of the target%4")
                     .arg(QString::fromStdString(p.label), QString::fromStdString(p.budget.text()))
                     .arg(100.0 * p.meanBytes / m.targetBytes, 0, 'f', 1)
                     .arg(p.note.empty() ? QString() : QStringLiteral(" (%1)").arg(QString::fromStdString(p.note)));
    Q_EMIT runMatched(r.id, m.targetBytes,
                      tr("Matched to the memory of %1 entries per KV head: ").arg(m.targetTokens) +
                          lines.join(QStringLiteral("; ")));
    return withMatchedBudgets(std::move(options), m);
}

void Worker::releaseSession() {
    m_session.reset();
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

int Worker::stepsFor(const RunRequest& r, const SessionOptions& so) {
    // An agnostic question is read first: the decode steps asked for follow it.
    return r.decodeSteps + static_cast<int>(questionSteps(so));
}

SessionOptions Worker::optionsFor(const RunRequest& r) const {
    SessionOptions so;
    for (int32_t t : m_tokenizer->encode(r.prompt.toStdString(), true)) so.prompt.push_back(t);
    so.policies = r.policies;
    so.budget = r.budget;
    so.tokenizer = m_tokenizer;
    so.teacherForced = r.teacherForced;
    so.memoryBudget = r.memoryBudget;
    so.attention = {true, r.layer, r.head};
    const QString question = r.question.trimmed();
    if (!question.isEmpty())
        for (int32_t t : m_tokenizer->encode(question.toStdString(), false)) so.question.push_back(t);
    so.questionMode = r.questionAware ? SessionOptions::QuestionMode::Aware : SessionOptions::QuestionMode::Agnostic;
    if (!r.calibration.isEmpty())
        for (int32_t t : m_tokenizer->encode(r.calibration.toStdString(), true)) so.calibration.push_back(t);
    so.plannedSteps = stepsFor(r, so);
    return so;
}

void Worker::runCaptures(quint64 id, const RunRequest& r, int steps, const std::vector<std::pair<int64_t, int64_t>>& pairs) {
    if (!m_model || !m_tokenizer) {
        Q_EMIT capturesDone(id, tr("no model is loaded"));
        return;
    }
    try {
        for (const auto& [layer, head] : pairs) {
            SessionOptions so = optionsFor(r);
            so.attention = {true, layer, head};
            Session session(m_model, so);
            std::shared_ptr<const Trace> trace = session.start();
            for (int s = 0; s < steps; ++s) trace = session.step();
            Q_EMIT captureReady(id, layer, head, trace);
        }
        Q_EMIT capturesDone(id, QString());
    } catch (const std::exception& e) {
        Q_EMIT capturesDone(id, QString::fromStdString(e.what()));
    }
}

void Worker::runNeedle(quint64 id, const eval::NeedleGridOptions& options, std::shared_ptr<std::atomic<bool>> cancel) {
    if (cancel && cancel->load()) {
        Q_EMIT needleFailed(id, QString());  // cancelled while queued: still say so
        return;
    }
    if (!m_model || !m_tokenizer) {
        Q_EMIT needleFailed(id, tr("no model is loaded"));
        return;
    }
    try {
        auto progress = [this, id](int64_t done, int64_t total) { Q_EMIT needleProgress(id, done, total); };
        auto result = eval::runNeedleGrid(m_model, m_tokenizer, options, progress, cancel.get());
        Q_EMIT needleReady(id, std::make_shared<const eval::NeedleGridResult>(std::move(result)));
    } catch (const Cancelled&) {
        Q_EMIT needleFailed(id, QString());
    } catch (const std::exception& e) {
        Q_EMIT needleFailed(id, QString::fromStdString(e.what()));
    }
}

void Worker::runWhatIf(quint64 id, const QString& prompt, const KvWhatIf& whatIf) {
    if (!m_model || !m_tokenizer) {
        Q_EMIT whatIfDone(id, tr("no model is loaded"), false);
        return;
    }
    try {
        std::vector<int64_t> ids;
        for (int32_t t : m_tokenizer->encode(prompt.toStdString(), true)) ids.push_back(t);
        const WhatIfReport r = kvlens::runWhatIf(m_model, m_tokenizer, whatIf, ids);
        Q_EMIT whatIfDone(id, QString::fromStdString(r.text(m_model->config())), true);
    } catch (const std::exception& e) {
        Q_EMIT whatIfDone(id, QString::fromStdString(e.what()), false);
    }
}

}  // namespace kvlens::gui
