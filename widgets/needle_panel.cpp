#include "widgets/needle_panel.h"

#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include "core/error.h"
#include "widgets/needle_view.h"

namespace kvlens::ui {
namespace {

std::vector<double> numbers(const QLineEdit* edit, const char* field) {
    std::vector<double> out;
    for (const QString& part : edit->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        bool ok = false;
        const double v = part.trimmed().toDouble(&ok);
        if (!ok) throw ArgumentError(std::string(field) + ": '" + part.trimmed().toStdString() + "' is not a number");
        out.push_back(v);
    }
    if (out.empty()) throw ArgumentError(std::string(field) + ": give at least one value");
    return out;
}

}  // namespace

NeedlePanel::NeedlePanel(QWidget* parent)
    : QWidget(parent),
      m_contexts(new QLineEdit(QStringLiteral("128,256"), this)),
      m_depths(new QLineEdit(QStringLiteral("0,50,100"), this)),
      m_budgets(new QLineEdit(QStringLiteral("32"), this)),
      m_samples(new QSpinBox(this)),
      m_needle(new QLineEdit(this)),
      m_question(new QLineEdit(this)),
      m_answer(new QLineEdit(this)),
      m_metric(new QComboBox(this)),
      m_run(new QPushButton(tr("Run grid"), this)),
      m_cancel(new QPushButton(tr("Cancel"), this)),
      m_progress(new QProgressBar(this)),
      m_message(new QLabel(this)),
      m_view(new NeedleView(this)) {
    m_contexts->setToolTip(tr("Context lengths in tokens, e.g. 256,512,1024"));
    m_depths->setToolTip(tr("Where the needle sits, in percent of the haystack (0: first, 100: last)"));
    m_budgets->setToolTip(tr("Budgets every policy of the Policies list runs at: N tokens or R%"));
    m_samples->setRange(1, 100);
    m_samples->setToolTip(tr("Probes per cell (different keys and codes)"));
    m_needle->setPlaceholderText(tr("bundled model: generated"));
    m_question->setPlaceholderText(tr("bundled model: generated"));
    m_answer->setPlaceholderText(tr("bundled model: generated"));
    m_needle->setToolTip(tr("Other models: the needle sentence, hidden in the prompt text (repeated to fill)"));
    m_metric->addItems({tr("exact match"), tr("word overlap")});
    auto* form = new QFormLayout;
    form->addRow(tr("contexts"), m_contexts);
    form->addRow(tr("depths %"), m_depths);
    form->addRow(tr("budgets"), m_budgets);
    form->addRow(tr("samples"), m_samples);
    form->addRow(tr("needle"), m_needle);
    form->addRow(tr("question"), m_question);
    form->addRow(tr("answer"), m_answer);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_run);
    buttons->addWidget(m_cancel);
    buttons->addWidget(m_metric);
    m_message->setWordWrap(true);
    m_cancel->setEnabled(false);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(form);
    layout->addLayout(buttons);
    layout->addWidget(m_progress);
    layout->addWidget(m_message);
    layout->addWidget(m_view, 1);
    connect(m_run, &QPushButton::clicked, this, &NeedlePanel::runRequested);
    connect(m_cancel, &QPushButton::clicked, this, &NeedlePanel::cancelRequested);
    connect(m_metric, qOverload<int>(&QComboBox::currentIndexChanged), this, [this](int i) {
        m_view->setMetric(i == 0 ? NeedleView::Metric::Exact : NeedleView::Metric::Overlap);
    });
}

eval::NeedleGridOptions NeedlePanel::options(const std::string& haystack) const {
    eval::NeedleGridOptions o;
    o.contexts.clear();
    for (double c : numbers(m_contexts, "contexts")) o.contexts.push_back(static_cast<int64_t>(c));
    o.depths.clear();
    for (double d : numbers(m_depths, "depths")) o.depths.push_back(d / 100.0);
    for (const QString& b : m_budgets->text().split(QLatin1Char(','), Qt::SkipEmptyParts))
        o.budgets.push_back(parseBudget(b.trimmed().toStdString()));
    o.samples = m_samples->value();
    const bool user = !m_needle->text().trimmed().isEmpty() || !m_question->text().trimmed().isEmpty() ||
                      !m_answer->text().trimmed().isEmpty();
    if (user)
        o.user = eval::UserNeedle{haystack, m_needle->text().trimmed().toStdString(),
                                  m_question->text().trimmed().toStdString(), m_answer->text().trimmed().toStdString()};
    return o;
}

void NeedlePanel::setRunning(bool running) {
    m_run->setEnabled(!running);
    m_cancel->setEnabled(running);
    if (running) {
        m_progress->setValue(0);
        m_message->clear();
    }
}

void NeedlePanel::setProgress(int64_t done, int64_t total) {
    m_progress->setRange(0, static_cast<int>(total));
    m_progress->setValue(static_cast<int>(done));
    // A probe (one context × depth) scores every run at once: counted in probes.
    m_progress->setFormat(tr("probe %v of %m"));
}

void NeedlePanel::setResult(std::shared_ptr<const eval::NeedleGridResult> result) { m_view->setResult(std::move(result)); }

void NeedlePanel::setMessage(const QString& message) { m_message->setText(message); }

}  // namespace kvlens::ui
