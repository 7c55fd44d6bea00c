#pragma once
// The metrics dock: next-token KL and running top-1 agreement over decode
// steps, retained attention mass per layer, KV memory held against the full
// cache (QCustomPlot), and each policy's output with where it departs from
// the full cache marked.
#include <QStringList>
#include <QWidget>
#include <functional>
#include <memory>

#include "core/run/trace.h"

class QCustomPlot;
class QTextBrowser;

namespace kvlens::ui {

class MetricsPanel : public QWidget {
    Q_OBJECT
public:
    explicit MetricsPanel(QWidget* parent = nullptr);

    // Readable text of a token id (the model's tokenizer); "#id" when unset.
    // The text of a sequence of token ids, one piece per id (the tokenizer's
    // decodePieces); without one, "#ID " each.
    using TokenPieces = std::function<QStringList(const std::vector<int64_t>& ids)>;
    void setTokenPieces(TokenPieces pieces);
    void setTrace(std::shared_ptr<const Trace> trace);
    QCustomPlot* klPlot() const { return m_kl; }
    QCustomPlot* agreementPlot() const { return m_agree; }
    QCustomPlot* massPlot() const { return m_mass; }
    // Why a plot is empty (free-running), "" when it has its lines.
    static QString plotNote(const QCustomPlot* plot);
    QCustomPlot* memoryPlot() const { return m_memory; }
    QString outputHtml() const;

    // Writes one plot as PNG (at `scale` device pixels per point), SVG or PDF
    // (vector), chosen by the file's extension, at the plot's size (at least
    // 480 x 360 points), through saveThrough() (widgets/save_file.h: a failed
    // write leaves the old file as it was). Returns an empty string, or why
    // it could not.
    static QString exportPlot(QCustomPlot* plot, const QString& file, double scale = 2.0);
    // The four plots into `folder` as kl, agreement, mass and memory.<format>;
    // the written paths go to `written`.
    QString exportPlots(const QString& folder, const QString& format, double scale, QStringList* written = nullptr) const;

protected:
    void resizeEvent(QResizeEvent* e) override;
    void changeEvent(QEvent* e) override;

private:
    // Each plot's title on one line where it fits its plot, else on two (at
    // presenter sizes the long ones were cut at both ends).
    void fitTitles();
    void plotSteps(std::shared_ptr<const Trace> t);
    void plotMass(const Trace& t);
    void plotMemory(const Trace& t);
    void showOutputs(const Trace& t);
    QStringList tokenPieces(const std::vector<int64_t>& ids) const;

    QCustomPlot* m_kl;
    QCustomPlot* m_agree;
    QCustomPlot* m_mass;
    QCustomPlot* m_memory;
    QTextBrowser* m_outputs;
    TokenPieces m_tokenPieces;
};

}  // namespace kvlens::ui
