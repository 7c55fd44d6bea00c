#pragma once
// Controls for one policy's parameters, built from the registry's ParamSpecs
// (spin boxes with the spec's range, check boxes, choices, text for lists and
// budget-relative defaults like h2o's "B/2"). An edit yields a validated
// PolicyConfig. A value the registry refuses is marked where it is typed
// (as it is typed, for text), with the reason beside the field; the policy
// keeps its last valid value and the form says so above the fields.
#include <QWidget>
#include <functional>
#include <vector>

#include "core/policy/policy_info.h"
#include "widgets/widget_types.h"

class QFormLayout;
class QLabel;

namespace kvlens::ui {

class ParamForm : public QWidget {
    Q_OBJECT
public:
    explicit ParamForm(QWidget* parent = nullptr);

    void setPolicy(const PolicyConfig& config);  // rebuilds the controls
    void clear();
    // The widget editing `name` (tests drive it), null if none.
    QWidget* control(const QString& name) const;
    QString errorText() const;
    // The reason shown beside the field of `name` (empty when it is valid).
    QString fieldError(const QString& name) const;
    // The label of the config the controls currently show.
    const std::string& shownLabel() const { return m_shownLabel; }

Q_SIGNALS:
    void edited(const kvlens::PolicyConfig& config);

private:
    struct Row;
    QWidget* makeControl(const ParamSpec& spec, const std::string& value);
    // Checks one field's value alone (as the CLI would parse it); marks it.
    bool validate(Row& row);
    void commit();

    QFormLayout* m_form;
    QLabel* m_title;
    QLabel* m_error;
    std::string m_id;
    std::string m_shownLabel;
    struct Row {
        std::string name;
        QWidget* widget;
        std::function<std::string()> read;
        QLabel* error = nullptr;  // beside the field, hidden while it is valid
    };
    std::vector<Row> m_rows;
};

}  // namespace kvlens::ui
