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
    // What the chip at `pos` means (its tooltip), "" between chips.
    QString explanationAt(const QPoint& pos) const;

protected:
    void paintEvent(QPaintEvent*) override;
    bool event(QEvent* e) override;
};

}  // namespace kvlens::ui
