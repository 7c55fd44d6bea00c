#include "widgets/memory_view.h"

#include "widgets/appearance.h"

#include <QHeaderView>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include <cmath>

#include "widgets/palette.h"
#include "widgets/qcustomplot_include.h"

namespace kvlens::ui {

MemoryView::MemoryView(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    m_caption = new QLabel(this);
    m_caption->setWordWrap(true);
    layout->addWidget(m_caption);
    m_plot = new QCustomPlot(this);
    m_plot->setMinimumSize(200, 180);
    QFont small = font();
    small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.85));
    for (QCPAxis* a : {m_plot->xAxis, m_plot->yAxis}) {
        a->setScaleType(QCPAxis::stLogarithmic);
        QSharedPointer<QCPAxisTickerLog> ticker(new QCPAxisTickerLog);
        ticker->setLogBase(a == m_plot->xAxis ? 2 : 10);
        a->setTicker(ticker);
        a->setTickLabelFont(small);
        a->setLabelFont(small);
    }
    m_plot->xAxis->setNumberFormat(QStringLiteral("g"));
    m_plot->xAxis->setLabel(tr("context length (tokens)"));
    m_plot->yAxis->setLabel(tr("KV cache (MiB)"));
    m_plot->yAxis->setNumberFormat(QStringLiteral("gb"));
    m_plot->legend->setVisible(true);
    m_plot->legend->setFont(small);
    m_plot->legend->setRowSpacing(-3);
    // Under the axes: inside them it covered the curves in presenter mode.
    legendBelowAxes(m_plot, 2);
    m_plot->legend->setIconSize(14, 8);
    m_plot->legend->setIconTextPadding(3);
    stylePlot(m_plot);  // the current zoom and theme
    layout->addWidget(m_plot, 3);
    m_table = new QTableWidget(this);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->verticalHeader()->setVisible(false);
    m_table->horizontalHeader()->setStretchLastSection(true);
    layout->addWidget(m_table, 2);
    // What sharing costs a model not trained for it: its KV heads merged,
    // or runs of layers reading one layer's K/V.
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(tr("What-if:"), this));
    m_whatIfKind = new QComboBox(this);
    m_whatIfKind->addItem(tr("merge the KV heads to"), MergeHeads);
    m_whatIfKind->addItem(tr("layers share KV, every"), ShareLayers);
    m_whatIfKind->setToolTip(tr("Merge: mean-pool the K/V projections of each group of KV heads (the GQA/MQA conversion "
                                "before uptraining). Share: every k consecutive layers read the K/V their first layer "
                                "computes (CLA), the others' K/V projections unused"));
    row->addWidget(m_whatIfKind);
    m_whatIfHeads = new QSpinBox(this);
    m_whatIfHeads->setRange(1, 1);
    row->addWidget(m_whatIfHeads);
    m_whatIfRun = new QPushButton(tr("Run on the prompt"), this);
    m_whatIfRun->setToolTip(tr("Compares the changed model's predictions with the model as trained, teacher-forced over "
                               "the prompt, and both models' needle scores with the full cache"));
    row->addWidget(m_whatIfRun);
    row->addStretch(1);
    layout->addLayout(row);
    m_whatIfResult = new QLabel(this);
    m_whatIfResult->setWordWrap(true);
    m_whatIfResult->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_whatIfResult);
    connect(m_whatIfRun, &QPushButton::clicked, this, [this] {
        m_whatIfResult->setText(tr("Computing…"));
        Q_EMIT whatIfRequested(m_whatIfKind->currentData().toInt(), m_whatIfHeads->value());
    });
    connect(m_whatIfKind, &QComboBox::currentIndexChanged, this, [this] { setWhatIfRange(); });
    refresh();
}

QString MemoryView::whatIfText() const { return m_whatIfResult->text(); }

void MemoryView::showWhatIf(const QString& text, bool ok) {
    m_whatIfResult->setText(ok ? text : tr("What-if not run: %1").arg(text));
}

// Merge: 1 .. the model's KV heads, from 1 (MQA); share: 1 .. its layers, from 2.
void MemoryView::setWhatIfRange() {
    const bool merge = m_whatIfKind->currentData().toInt() == MergeHeads;
    m_whatIfHeads->setRange(1, static_cast<int>(std::max<int64_t>(1, merge ? m_shape.kvHeads : m_shape.layers)));
    m_whatIfHeads->setValue(merge ? 1 : 2);
}

std::vector<int64_t> MemoryView::plotContexts() {
    std::vector<int64_t> c;
    for (int64_t t = 128; t <= 131072; t *= 2) c.push_back(t);
    return c;
}

void MemoryView::setShape(const KvShape& shape) {
    m_shape = shape;
    setWhatIfRange();
    m_whatIfResult->clear();
    m_hasShape = shape.layers > 0 && shape.heads > 0 && shape.kvHeads > 0;
    refresh();
}

void MemoryView::setBudget(const BudgetSpec& budget) {
    m_budget = budget;
    refresh();
}

void MemoryView::setContext(int64_t tokens) {
    m_context = std::max<int64_t>(1, tokens);
    refresh();
}

void MemoryView::refresh() {
    m_plot->clearGraphs();
    m_plot->clearItems();
    m_table->clear();
    if (!m_hasShape) {
        m_caption->setText(tr("No model loaded."));
        m_table->setRowCount(0);
        m_plot->replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    const bool perLayer = !m_budget.perLayer.empty();
    BudgetSpec budget = m_budget;
    if (perLayer) {  // the mean of the per-layer budgets, as tokens
        double sum = 0;
        for (int64_t b : m_budget.perLayer) sum += double(b);
        budget = BudgetSpec{};
        budget.value = std::round(sum / double(m_budget.perLayer.size()));
    }
    const bool withBudget = budget.value > 0;
    m_caption->setText(
        tr("KV memory of this model's shape (%1 layers, %2 query / %3 KV heads of %4, %5 bytes an element) under the "
           "KV-sharing designs%6. * marks the design the model was trained with; a model not trained to share K/V "
           "degrades when made to.")
            .arg(m_shape.layers)
            .arg(m_shape.heads)
            .arg(m_shape.kvHeads)
            .arg(m_shape.headDim)
            .arg(m_shape.elementBytes)
            .arg(withBudget ? tr(", alone (solid) and with the eviction budget %1%2 (dashed)")
                                  .arg(QString::fromStdString(m_budget.text()))
                                  .arg(perLayer ? tr(", mean per layer") : QString())
                            : QString()));
    const std::vector<int64_t> xs = plotContexts();
    const auto rows = kvMemoryTable(m_shape, xs, withBudget, budget);
    const std::vector<QColor>& colours = policyPalette();
    double lo = 1e300, hi = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
        const QColor colour = colours[i % colours.size()];
        QVector<double> x, full, held;
        for (size_t j = 0; j < xs.size(); ++j) {
            x << double(xs[j]);
            full << double(rows[i].fullBytes[j]) / (1024.0 * 1024.0);
            if (withBudget) held << double(rows[i].budgetBytes[j]) / (1024.0 * 1024.0);
        }
        QCPGraph* g = m_plot->addGraph();
        // Designs that store the same bytes draw one line: the legend says so.
        QString same;
        for (size_t k = 0; k < i && same.isEmpty(); ++k)
            if (rows[k].design.bytesPerToken(m_shape) == rows[i].design.bytesPerToken(m_shape))
                same = tr(" (= %1)").arg(QString::fromStdString(rows[k].design.id).toUpper());
        g->setName(QString::fromStdString(rows[i].design.name) + (rows[i].design.isModel ? QStringLiteral(" *") : QString()) +
                   same);
        g->setPen(seriesPen(colour, rows[i].design.isModel ? 2.5 : 1.5));
        g->setData(x, full, true);
        for (double v : full) lo = std::min(lo, v), hi = std::max(hi, v);
        if (withBudget) {
            QCPGraph* b = m_plot->addGraph();
            b->setPen(seriesPen(colour, 1.2, Qt::DashLine));
            b->setData(x, held, true);
            b->removeFromLegend();
            for (double v : held) lo = std::min(lo, v);
        }
    }
    m_plot->xAxis->setRange(double(xs.front()), double(xs.back()));
    m_plot->yAxis->setRange(lo * 0.7, hi * 1.5);
    auto* now = new QCPItemStraightLine(m_plot);
    now->point1->setCoords(double(m_context), 1);
    now->point2->setCoords(double(m_context), 2);
    now->setPen(QPen(Qt::gray, 1.5, Qt::DotLine));
    auto* label = new QCPItemText(m_plot);
    label->position->setTypeX(QCPItemPosition::ptPlotCoords);
    label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    label->position->setCoords(double(m_context), 0.98);
    label->setPositionAlignment(Qt::AlignBottom | Qt::AlignLeft);
    label->setText(tr(" prompt: %1").arg(m_context));
    label->setColor(Qt::darkGray);
    m_plot->replot(QCustomPlot::rpQueuedReplot);

    // The table at the prompt's length.
    const auto at = kvMemoryTable(m_shape, {m_context}, withBudget, budget);
    QStringList headers{tr("design"), tr("per token"), tr("%1 tokens").arg(m_context)};
    if (withBudget) headers << tr("with budget %1").arg(QString::fromStdString(m_budget.text()));
    headers << tr("who shares what");
    m_table->setColumnCount(headers.size());
    m_table->setHorizontalHeaderLabels(headers);
    m_table->setRowCount(static_cast<int>(at.size()));
    for (int r = 0; r < static_cast<int>(at.size()); ++r) {
        const KvMemoryRow& row = at[static_cast<size_t>(r)];
        int c = 0;
        auto cell = [&](const QString& text) { m_table->setItem(r, c++, new QTableWidgetItem(text)); };
        cell(QString::fromStdString(row.design.name) + (row.design.isModel ? QStringLiteral(" *") : QString()));
        cell(QString::fromStdString(formatBytes(row.design.bytesPerToken(m_shape))));
        cell(QString::fromStdString(formatBytes(row.fullBytes[0])));
        if (withBudget) cell(QString::fromStdString(formatBytes(row.budgetBytes[0])));
        cell(QString::fromStdString(row.design.explanation));
    }
    m_table->resizeColumnsToContents();
}

}  // namespace kvlens::ui
