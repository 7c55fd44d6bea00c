#include "widgets/budget_editor.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QUndoStack>
#include <QVBoxLayout>

#include <functional>

#include "core/policy/policy_info.h"
#include "widgets/budget_bars.h"
#include "widgets/value_command.h"

namespace kvlens::ui {
namespace {

using Preset = BudgetState::Preset;

// An adaptive allocator gives KV heads different budgets: those are the
// policies the per-head view is for.
bool adaptive(const PolicyTrace& p) { return adaptiveHeads(parsePolicySpec(p.label)); }

// Undo merge ids of the typed fields.
constexpr int kTypedBudget = 1, kTypedBeta = 2;

}  // namespace

// B: entries ("64") or a share of the prompt ("25%"), as the CLI's --budget
// reads them. Whatever is typed reaches `typed` as soon as it reads as a
// budget (the value, and whether it is a percent); the arrows step the same
// kind of number.
class BudgetSpin : public QSpinBox {
public:
    explicit BudgetSpin(QWidget* parent) : QSpinBox(parent) {
        setRange(1, 1000000);
        connect(lineEdit(), &QLineEdit::textEdited, this, [this](const QString& t) {
            int v = 0;
            bool pct = false;
            if (!read(t, &v, &pct) || v < 1 || v > (pct ? 100 : maximum())) return;
            percent = pct;
            if (typed) typed(v, pct);
        });
        connect(this, qOverload<int>(&QSpinBox::valueChanged), this, [this](int v) {
            if (percent && v > 100) return setValue(100);  // the arrows stop at all of the prompt
            if (typed) typed(v, percent);
        });
    }
    // Shows `v` as entries or a percent, without a signal; while B is being
    // typed, text that already reads so stays as the user has it.
    void display(int v, bool pct) {
        if (hasFocus() && pct == percent && v == value()) return;
        const QSignalBlocker block(this);
        percent = pct;
        setValue(v);
        lineEdit()->setText(textFromValue(v));
    }
    bool percent = false;
    std::function<void(int, bool)> typed;

protected:
    static bool read(QString t, int* v, bool* pct) {
        t = t.trimmed();
        *pct = t.endsWith(QLatin1Char('%'));
        if (*pct) t.chop(1);
        bool ok = false;
        *v = t.trimmed().toInt(&ok);
        return ok;
    }
    QValidator::State validate(QString& input, int&) const override {
        const QString t = input.trimmed();
        if (t.isEmpty() || t == QLatin1String("%")) return QValidator::Intermediate;
        int v = 0;
        bool pct = false;
        if (!read(t, &v, &pct)) return QValidator::Invalid;
        if (v > (pct ? 100 : maximum())) return QValidator::Invalid;
        return v < 1 ? QValidator::Intermediate : QValidator::Acceptable;
    }
    int valueFromText(const QString& text) const override {
        int v = 0;
        bool pct = false;
        return read(text, &v, &pct) ? v : value();
    }
    QString textFromValue(int v) const override { return QString::number(v) + (percent ? QStringLiteral("%") : QString()); }
};

BudgetEditor::BudgetEditor(QUndoStack* undo, QWidget* parent)
    : QWidget(parent),
      m_undo(undo),
      m_preset(new QComboBox(this)),
      m_budget(new BudgetSpin(this)),
      m_beta(new QDoubleSpinBox(this)),
      m_total(new QLabel(this)),
      m_bars(new BudgetBars(this)),
      m_perHead(new QCheckBox(tr("per KV head of"), this)),
      m_headPolicy(new QComboBox(this)) {
    m_preset->addItems({tr("uniform"), tr("pyramid (β)"), tr("custom")});
    m_budget->setValue(static_cast<int>(m_state.budget));
    // Applies as typed, as the prompt and the parameters do (the controller
    // debounces the runs; the keystrokes of one number are one undo step).
    m_budget->setToolTip(tr("Average cache budget per layer and KV head, in tokens (sinks and window included); "
                            "\"25%\" keeps a quarter of the prompt, whatever its length"));
    m_beta->setRange(1, 1000);
    m_beta->setValue(m_state.beta);
    m_beta->setToolTip(tr("PyramidKV's β: the top layer keeps about b/β"));
    m_total->setWordWrap(true);
    auto* top = new QHBoxLayout;
    top->addWidget(m_preset);
    top->addWidget(new QLabel(tr("B"), this));
    top->addWidget(m_budget);
    top->addWidget(new QLabel(tr("β"), this));
    top->addWidget(m_beta);
    auto* headRow = new QHBoxLayout;
    headRow->addWidget(m_perHead);
    headRow->addWidget(m_headPolicy, 1);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(top);
    layout->addWidget(m_bars, 1);
    layout->addWidget(m_total);
    layout->addLayout(headRow);

    connect(m_preset, qOverload<int>(&QComboBox::activated), this, [this](int i) {
        BudgetState s = m_state;
        s.preset = static_cast<Preset>(i);
        s.layout(m_layers, m_promptLength);
        edit(s, tr("Budget preset"));
    });
    m_budget->typed = [this](int v, bool percent) {
        BudgetState s = m_state;
        s.percent = percent ? v : 0;
        if (!percent) s.budget = v;
        if (s.preset == Preset::Custom) s.preset = Preset::Uniform;  // a new average re-lays the bars
        s.layout(m_layers, m_promptLength);
        edit(s, tr("Budget"), kTypedBudget);
    };
    connect(m_beta, qOverload<double>(&QDoubleSpinBox::valueChanged), this, [this](double v) {
        BudgetState s = m_state;
        s.beta = v;
        s.layout(m_layers, m_promptLength);
        edit(s, tr("Pyramid β"), kTypedBeta);
    });
    connect(m_bars, &BudgetBars::edited, this, [this](const std::vector<int64_t>& perLayer) {
        BudgetState s = m_state;
        s.preset = Preset::Custom;
        s.percent = 0;  // the bars are entries
        s.perLayer = perLayer;
        edit(s, tr("Drag layer budget"));
    });
    connect(m_bars, &BudgetBars::dragged, this, [this](const std::vector<int64_t>& perLayer) {
        BudgetState s = m_state;
        s.preset = Preset::Custom;
        s.perLayer = perLayer;
        Q_EMIT budgetPreviewed(s.spec());
    });
    connect(m_perHead, &QCheckBox::toggled, this, &BudgetEditor::updateHeadView);
    connect(m_perHead, &QCheckBox::clicked, this, [this] { m_perHeadChosen = true; });
    connect(m_headPolicy, qOverload<int>(&QComboBox::activated), this, [this] {
        m_chosenRun = m_headPolicy->currentText();
        updateHeadView();
    });
    syncControls();
}

void BudgetEditor::edit(const BudgetState& next, const QString& what, int mergeId) {
    if (next == m_state) {
        syncControls();  // e.g. a drag that ended where it started
        return;
    }
    m_undo->push(new ValueCommand<BudgetState>(what, m_state, next, [this](const BudgetState& s) { apply(s); }, mergeId));
}

void BudgetEditor::apply(const BudgetState& s) {
    m_state = s;
    m_state.layout(m_layers, m_promptLength);
    syncControls();
    Q_EMIT budgetChanged(m_state.spec());
}

void BudgetEditor::setContext(int64_t numLayers, int64_t promptLength) {
    if (numLayers == m_layers && promptLength == m_promptLength) return;
    m_layers = numLayers;
    m_promptLength = std::max<int64_t>(1, promptLength);
    const BudgetSpec before = m_state.spec();
    m_state.layout(m_layers, m_promptLength);
    m_bars->setLimit(m_promptLength);
    syncControls();
    const BudgetSpec after = m_state.spec();
    // Pyramid budgets depend on the prompt length; the session must follow.
    if (before.perLayer != after.perLayer) Q_EMIT budgetChanged(after);
}

QString BudgetEditor::totalText() const {
    const int64_t n = static_cast<int64_t>(m_state.perLayer.size());
    const QString share = m_state.percent > 0 && m_state.preset != Preset::Custom
                              ? tr("B %1 of the prompt = %2; ").arg(m_state.bText()).arg(m_state.budget)
                              : QString();
    return tr("%1total %2 entries per KV head over %3 layers (mean %4; prompt %5 tokens)")
        .arg(share)
        .arg(m_state.total())
        .arg(n)
        .arg(n ? static_cast<double>(m_state.total()) / static_cast<double>(n) : 0.0, 0, 'f', 1)
        .arg(m_promptLength);
}

void BudgetEditor::syncControls() {
    const QSignalBlocker b1(m_preset), b3(m_beta);
    m_preset->setCurrentIndex(static_cast<int>(m_state.preset));
    const bool percent = m_state.percent > 0 && m_state.preset != Preset::Custom;
    m_budget->display(static_cast<int>(std::lround(percent ? m_state.percent : static_cast<double>(m_state.budget))), percent);
    m_beta->setValue(m_state.beta);
    m_beta->setEnabled(m_state.preset == Preset::Pyramid);
    m_bars->setBudgets(m_state.perLayer);
    m_total->setText(totalText());
}

void BudgetEditor::setTrace(std::shared_ptr<const Trace> trace) {
    m_trace = std::move(trace);
    const QString current = m_chosenRun.isEmpty() ? m_headPolicy->currentText() : m_chosenRun;
    const QSignalBlocker block(m_headPolicy);
    m_headPolicy->clear();
    int preferred = -1;
    for (size_t i = 1; m_trace && i < m_trace->policies.size(); ++i) {
        m_headPolicy->addItem(QString::fromStdString(m_trace->policies[i].label), static_cast<int>(i));
        if (preferred < 0 && (adaptive(m_trace->policies[i]) || ownLayerBudgets(m_trace->policies[i])))
            preferred = static_cast<int>(i) - 1;
    }
    const int keep = m_headPolicy->findText(current);
    m_headPolicy->setCurrentIndex(keep >= 0 ? keep : std::max(0, preferred));
    // A policy that holds other budgets than the bars say (PyramidKV's own
    // pyramid, Ada-KV's heads) is shown as it holds them, until the user
    // chooses otherwise.
    if (!m_perHeadChosen && preferred >= 0) {
        const QSignalBlocker blockCheck(m_perHead);
        m_perHead->setChecked(true);
    }
    updateHeadView();
}

void BudgetEditor::showRun(const QString& label) {
    m_chosenRun = label;
    if (!label.isEmpty()) {
        const QSignalBlocker block(m_perHead);
        m_perHead->setChecked(true);
    }
    setTrace(m_trace);
}

QString BudgetEditor::shownRun() const { return m_perHead->isChecked() ? m_headPolicy->currentText() : QString(); }

bool BudgetEditor::ownLayerBudgets(const PolicyTrace& p) const {
    for (size_t l = 0; l < p.layers.size() && l < m_state.perLayer.size(); ++l)
        if (std::min(p.layers[l].budget, m_promptLength) != std::min(m_state.perLayer[l], m_promptLength)) return true;
    return false;
}

void BudgetEditor::updateHeadView() {
    std::vector<std::vector<int64_t>> held;
    const int policy = m_headPolicy->currentData().toInt();
    if (m_perHead->isChecked() && m_trace && policy > 0 && policy < static_cast<int>(m_trace->policies.size()))
        for (const LayerTrace& l : m_trace->policies[static_cast<size_t>(policy)].layers) {
            held.emplace_back();
            for (const HeadTrace& h : l.heads) held.back().push_back(h.held);
        }
    m_bars->setHeadHeld(std::move(held));
}

}  // namespace kvlens::ui
