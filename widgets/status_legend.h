#pragma once
// The token-status colour key shown above the comparison columns.
#include <QWidget>

namespace kvlens::ui {

class StatusLegend : public QWidget {
    Q_OBJECT
public:
    explicit StatusLegend(QWidget* parent = nullptr);
    void paint(QPainter& p, const QRect& area) const;
    QSize sizeHint() const override;

protected:
    void paintEvent(QPaintEvent*) override;
};

}  // namespace kvlens::ui
