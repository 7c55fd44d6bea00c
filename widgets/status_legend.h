#pragma once
// The token-status colour key shown above the comparison columns.
#include <QWidget>

namespace kvlens::ui {

class StatusLegend : public QWidget {
    Q_OBJECT
public:
    explicit StatusLegend(QWidget* parent = nullptr);
    // Returns the height used; items wrap onto more lines in narrow areas.
    int paint(QPainter& p, const QRect& area) const;
    bool hasHeightForWidth() const override { return true; }
    int heightForWidth(int width) const override;
    QSize sizeHint() const override;

protected:
    void paintEvent(QPaintEvent*) override;
};

}  // namespace kvlens::ui
