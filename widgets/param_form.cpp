#include "widgets/param_form.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QStringList>
#include <QVBoxLayout>
#include <algorithm>
#include <climits>

#include "core/error.h"

namespace kvlens::ui {
namespace {

bool isInteger(const std::string& s) {
    return !s.empty() && s.find_first_not_of("-0123456789") == std::string::npos;
}

int clampInt(double v) { return static_cast<int>(std::clamp(v, static_cast<double>(INT_MIN), static_cast<double>(INT_MAX))); }

}  // namespace

ParamForm::ParamForm(QWidget* parent)
    : QWidget(parent), m_form(new QFormLayout), m_title(new QLabel(this)), m_error(new QLabel(this)) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    m_title->setWordWrap(true);
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("color: #B03000"));
    m_error->hide();
    layout->addWidget(m_title);
    layout->addWidget(m_error);  // above the fields: seen without scrolling
    layout->addLayout(m_form);
    layout->addStretch(1);
}

void ParamForm::clear() {
    while (m_form->rowCount() > 0) m_form->removeRow(0);
    m_rows.clear();
    m_title->clear();
    m_error->hide();
}

QWidget* ParamForm::makeControl(const ParamSpec& spec, const std::string& value) {
    using Type = ParamSpec::Type;
    Row row{spec.name, nullptr, {}};
    if (spec.type == Type::Int && isInteger(value)) {
        auto* w = new QSpinBox(this);
        w->setRange(clampInt(spec.min), clampInt(spec.max));
        w->setValue(std::stoi(value));
        w->setKeyboardTracking(false);
        connect(w, qOverload<int>(&QSpinBox::valueChanged), this, &ParamForm::commit);
        row = {spec.name, w, [w] { return std::to_string(w->value()); }};
    } else if (spec.type == Type::Real) {
        auto* w = new QDoubleSpinBox(this);
        w->setDecimals(3);
        w->setRange(spec.min, spec.max);
        w->setValue(std::stod(value));
        w->setKeyboardTracking(false);
        connect(w, qOverload<double>(&QDoubleSpinBox::valueChanged), this, &ParamForm::commit);
        row = {spec.name, w, [w] { return QString::number(w->value(), 'g', 10).toStdString(); }};
    } else if (spec.type == Type::Bool) {
        auto* w = new QCheckBox(this);
        w->setChecked(value == "true");
        connect(w, &QCheckBox::toggled, this, &ParamForm::commit);
        row = {spec.name, w, [w] { return std::string(w->isChecked() ? "true" : "false"); }};
    } else if (spec.type == Type::Choice) {
        auto* w = new QComboBox(this);
        for (const auto& c : spec.choices) w->addItem(QString::fromStdString(c));
        w->setCurrentText(QString::fromStdString(value));
        connect(w, qOverload<int>(&QComboBox::activated), this, &ParamForm::commit);
        row = {spec.name, w, [w] { return w->currentText().toStdString(); }};
    } else {  // IntList, or an Int whose value is budget-relative ("B/2")
        auto* w = new QLineEdit(QString::fromStdString(value), this);
        connect(w, &QLineEdit::editingFinished, this, &ParamForm::commit);
        // Checked as typed: the mark and the reason appear before Enter.
        const std::string name = spec.name;
        connect(w, &QLineEdit::textEdited, this, [this, name] {
            for (Row& r : m_rows)
                if (r.name == name) validate(r);
        });
        row = {spec.name, w, [w] { return w->text().trimmed().toStdString(); }};
    }
    // The registry's help may name the default already ("(default B/2)").
    const bool namesDefault = spec.help.find("default") != std::string::npos;
    row.widget->setToolTip(QString::fromStdString(namesDefault ? spec.help : spec.help + " (default " + spec.defaultValue + ")"));
    row.widget->setObjectName(QString::fromStdString("param_" + spec.name));
    row.error = new QLabel(this);
    row.error->setWordWrap(true);
    row.error->setStyleSheet(QStringLiteral("color: #B03000"));
    row.error->hide();
    m_rows.push_back(row);
    return row.widget;
}

bool ParamForm::validate(Row& row) {
    QString reason;
    try {
        parsePolicySpec(m_id + ":" + row.name + "=" + row.read());
    } catch (const Error& e) {
        reason = QString::fromStdString(e.what());
    }
    // A red frame on the field (its own object name: no child inherits it).
    row.widget->setStyleSheet(reason.isEmpty() ? QString()
                                               : QStringLiteral("#%1 { border: 2px solid #B03000; }")
                                                     .arg(row.widget->objectName()));
    row.error->setText(reason);
    row.error->setVisible(!reason.isEmpty());
    return reason.isEmpty();
}

void ParamForm::setPolicy(const PolicyConfig& config) {
    clear();
    m_id = config.id;
    m_shownLabel = config.label();
    const PolicyInfo& info = findPolicy(config.id);
    m_title->setText(QStringLiteral("<b>%1</b> — %2<br/><small>%3</small>")
                         .arg(QString::fromStdString(info.name), QString::fromStdString(info.summary).toHtmlEscaped(),
                              QString::fromStdString(info.reference).toHtmlEscaped()));
    for (const ParamSpec& spec : info.params) {
        const std::string value = config.has(spec.name) ? config.text(spec.name) : spec.defaultValue;
        // The field with its reason under it, when it has one.
        auto* cell = new QWidget(this);
        auto* box = new QVBoxLayout(cell);
        box->setContentsMargins(0, 0, 0, 0);
        box->setSpacing(1);
        box->addWidget(makeControl(spec, value));
        box->addWidget(m_rows.back().error);
        m_form->addRow(QString::fromStdString(spec.name), cell);
    }
}

QString ParamForm::fieldError(const QString& name) const {
    for (const Row& r : m_rows)
        if (QString::fromStdString(r.name) == name) return r.error->isHidden() ? QString() : r.error->text();
    return {};
}

QWidget* ParamForm::control(const QString& name) const {
    for (const Row& r : m_rows)
        if (QString::fromStdString(r.name) == name) return r.widget;
    return nullptr;
}

QString ParamForm::errorText() const { return m_error->isHidden() ? QString() : m_error->text(); }

// Builds "id:k=v,..." from the parameters that differ from their defaults and
// lets the registry's parser validate it, so the GUI accepts exactly what
// the CLI accepts.
void ParamForm::commit() {
    QStringList invalid;
    for (Row& r : m_rows)
        if (!validate(r)) invalid << QString::fromStdString(r.name);
    if (!invalid.isEmpty()) {
        m_error->setText(tr("Not applied: %1 %2 not valid (marked below); the policy runs with its last valid "
                            "values.")
                             .arg(invalid.join(QStringLiteral(", ")), invalid.size() == 1 ? tr("is") : tr("are")));
        m_error->show();
        return;
    }
    const PolicyInfo& info = findPolicy(m_id);
    std::string spec = m_id, sep = ":";
    for (const Row& r : m_rows) {
        const auto it = std::find_if(info.params.begin(), info.params.end(),
                                     [&](const ParamSpec& p) { return p.name == r.name; });
        const std::string v = r.read();
        if (it != info.params.end() && v == it->defaultValue) continue;
        spec += sep + r.name + "=" + v;
        sep = ",";
    }
    try {
        const PolicyConfig config = parsePolicySpec(spec);
        m_error->hide();
        m_shownLabel = config.label();
        Q_EMIT edited(config);
    } catch (const Error& e) {
        m_error->setText(QString::fromStdString(e.what()));
        m_error->show();
    }
}

}  // namespace kvlens::ui
