#pragma once
// The one export dialog: what (run, figure or table), where (one file, or a
// folder of a file per run or per layer × head), the format, and for figures
// the size in mm or px, the text size and the PNG resolution — with a
// preview drawn by the same painter as the file (a figure) or the file's
// first lines (data). It only chooses; its Source draws and names, and the
// caller writes (app/gui/file_actions).
#include <QDialog>
#include <QPair>
#include <QSizeF>
#include <QStringList>
#include <functional>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPainter;
class QPlainTextEdit;
class QRectF;

namespace kvlens::ui {

enum class ExportScope { View, EveryRun, EveryLayerHead };

struct ExportChoice {
    ExportScope scope = ExportScope::View;
    QString format = QStringLiteral("png");  // png svg pdf | csv json npy
    int run = 1;                             // -1: every run in one grid (a figure of the view)
    int content = 0;                         // figure: 0 attention heatmap, 1 token status; data: a table
    QSizeF size;                             // points; empty: the figure's own size
    double textPt = 0;                       // 0: the figure's own (kFigureTextPt)
    double dpi = 144;                        // PNG pixels per inch
    QString path;                            // a file (View) or a folder
    bool isFigure() const;
    double pngScale() const { return dpi / 72.0; }
};

class ExportDialog : public QDialog {
    Q_OBJECT
public:
    struct Source {
        QStringList runs;    // run labels, full first
        QStringList tables;  // data tables
        QString folder;      // where files go by default
        std::function<QSizeF(int run, int content)> naturalSize;                        // points
        std::function<void(QPainter&, const QRectF&, int run, int content)> paint;      // at any size
        std::function<QString(int run, int table, const QString& format)> dataPreview;  // the file's first lines
        std::function<QString(int run, int content, bool figure)> defaultName;          // no extension
    };
    ExportDialog(Source source, const ExportChoice& initial, QWidget* parent = nullptr);

    ExportChoice choice() const;
    // The preview as drawn now (tests).
    QImage previewImage() const;
    QString previewText() const;
    // Its controls, for tests that drive it.
    QComboBox* scopeBox() const { return m_scope; }
    QComboBox* formatBox() const { return m_format; }
    QComboBox* runBox() const { return m_run; }
    QComboBox* contentBox() const { return m_content; }
    QComboBox* unitBox() const { return m_unit; }
    QDoubleSpinBox* widthBox() const { return m_width; }
    QDoubleSpinBox* heightBox() const { return m_height; }
    QDoubleSpinBox* textBox() const { return m_text; }
    QDoubleSpinBox* dpiBox() const { return m_dpi; }
    QLineEdit* pathEdit() const { return m_path; }

private:
    void formatChanged();
    void whatChanged();  // another run or content: its figure's own size, a new default name
    void unitChanged();
    void sizeEdited();
    void showSize();
    void updatePath();
    void updatePreview();
    void browse();
    double toPoints(double value) const;
    double fromPoints(double pt) const;

    Source m_source;
    QComboBox *m_scope, *m_format, *m_run, *m_content, *m_unit;
    QDoubleSpinBox *m_width, *m_height, *m_text, *m_dpi;
    QLineEdit* m_path;
    QLabel* m_preview;
    QPlainTextEdit* m_dataPreview;
    QWidget* m_figureRows;
    QLabel* m_outputSize;  // the size in mm and PNG pixels
    QSizeF m_sizePt;
    QPair<int, int> m_sizeOf{-2, -2};  // the (run, content) m_sizePt was chosen for
    bool m_pathEdited = false;
    bool m_updating = false;
};

}  // namespace kvlens::ui
