#include "widgets/export_dialog.h"

#include <QComboBox>
#include <QDir>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPainter>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QVBoxLayout>
#include <QtMath>
#include <algorithm>

#include "widgets/figure.h"

namespace kvlens::ui {
namespace {

const QStringList kFigureFormats{QStringLiteral("png"), QStringLiteral("svg"), QStringLiteral("pdf")};
const QStringList kDataFormats{QStringLiteral("csv"), QStringLiteral("json"), QStringLiteral("npy")};
constexpr QSize kPreviewBox(380, 320);
constexpr double kMmPerPt = 25.4 / 72.0;

}  // namespace

bool ExportChoice::isFigure() const { return kFigureFormats.contains(format); }

ExportDialog::ExportDialog(Source source, const ExportChoice& initial, QWidget* parent)
    : QDialog(parent),
      m_source(std::move(source)),
      m_scope(new QComboBox(this)),
      m_format(new QComboBox(this)),
      m_run(new QComboBox(this)),
      m_content(new QComboBox(this)),
      m_unit(new QComboBox(this)),
      m_width(new QDoubleSpinBox(this)),
      m_height(new QDoubleSpinBox(this)),
      m_text(new QDoubleSpinBox(this)),
      m_dpi(new QDoubleSpinBox(this)),
      m_path(new QLineEdit(this)),
      m_preview(new QLabel(this)),
      m_dataPreview(new QPlainTextEdit(this)),
      m_figureRows(new QWidget(this)),
      m_outputSize(new QLabel(this)) {
    setWindowTitle(tr("Export"));
    m_updating = true;
    m_scope->addItems({tr("the shown view (one file)"), tr("every run (a file each, and a grid)"),
                       tr("every layer × head of one run (runs them)")});
    m_format->addItems(kFigureFormats + kDataFormats);
    m_unit->addItems({QStringLiteral("mm"), QStringLiteral("px")});
    m_width->setRange(1, 20000);
    m_height->setRange(1, 20000);
    m_text->setRange(3, 36);
    m_text->setDecimals(1);
    m_text->setSingleStep(0.5);
    m_text->setSuffix(QStringLiteral(" pt"));
    m_text->setToolTip(tr("Axis and tick text; titles keep their proportion"));
    m_dpi->setRange(36, 1200);
    m_dpi->setDecimals(0);
    m_dpi->setSingleStep(72);
    m_dpi->setSuffix(QStringLiteral(" dpi"));
    m_dpi->setToolTip(tr("PNG pixels per inch (144 = 2 pixels per point); SVG and PDF are vector"));

    auto* sizeRow = new QHBoxLayout;
    sizeRow->setContentsMargins(0, 0, 0, 0);
    sizeRow->addWidget(m_width);
    sizeRow->addWidget(new QLabel(QStringLiteral("×"), this));
    sizeRow->addWidget(m_height);
    sizeRow->addWidget(m_unit);
    auto* figureForm = new QFormLayout(m_figureRows);
    figureForm->setContentsMargins(0, 0, 0, 0);
    figureForm->addRow(tr("size"), sizeRow);
    figureForm->addRow(tr("text size"), m_text);
    figureForm->addRow(tr("PNG resolution"), m_dpi);
    figureForm->addRow(QString(), m_outputSize);

    m_path->setMinimumWidth(280);
    auto* browse = new QPushButton(tr("Browse…"), this);
    auto* pathRow = new QHBoxLayout;
    pathRow->addWidget(m_path, 1);
    pathRow->addWidget(browse);

    auto* form = new QFormLayout;
    form->addRow(tr("export"), m_scope);
    form->addRow(tr("run"), m_run);
    form->addRow(tr("what"), m_content);
    form->addRow(tr("format"), m_format);
    form->addRow(m_figureRows);
    form->addRow(tr("to"), pathRow);

    m_preview->setFixedSize(kPreviewBox);
    m_preview->setAlignment(Qt::AlignCenter);
    m_preview->setFrameShape(QFrame::StyledPanel);
    m_dataPreview->setReadOnly(true);
    m_dataPreview->setFixedSize(kPreviewBox);
    m_dataPreview->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_dataPreview->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    auto* previewColumn = new QVBoxLayout;
    previewColumn->addWidget(new QLabel(tr("preview"), this));
    previewColumn->addWidget(m_preview);
    previewColumn->addWidget(m_dataPreview);
    previewColumn->addStretch(1);

    auto* top = new QHBoxLayout;
    top->addLayout(form, 1);
    top->addLayout(previewColumn);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Export"));
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(buttons);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(browse, &QPushButton::clicked, this, &ExportDialog::browse);

    m_scope->setCurrentIndex(static_cast<int>(initial.scope));
    m_format->setCurrentText(initial.format);
    m_dpi->setValue(initial.dpi);
    m_text->setValue(initial.textPt > 0 ? initial.textPt : kFigureTextPt);
    m_updating = false;
    formatChanged();  // fills run and content
    m_run->setCurrentIndex(initial.run < 0 ? m_run->count() - 1 : std::clamp(initial.run, 0, m_run->count() - 1));
    m_content->setCurrentIndex(std::clamp(initial.content, 0, m_content->count() - 1));
    whatChanged();
    if (!initial.size.isEmpty()) {
        m_sizePt = initial.size;  // for the run and content whatChanged() set
        showSize();
        updatePreview();
    }

    connect(m_scope, &QComboBox::currentIndexChanged, this, [this] { formatChanged(); });
    connect(m_format, &QComboBox::currentIndexChanged, this, [this] { formatChanged(); });
    connect(m_run, &QComboBox::currentIndexChanged, this, [this] { whatChanged(); });
    connect(m_content, &QComboBox::currentIndexChanged, this, [this] { whatChanged(); });
    connect(m_unit, &QComboBox::currentIndexChanged, this, [this] { unitChanged(); });
    connect(m_width, &QDoubleSpinBox::valueChanged, this, [this] { sizeEdited(); });
    connect(m_height, &QDoubleSpinBox::valueChanged, this, [this] { sizeEdited(); });
    connect(m_text, &QDoubleSpinBox::valueChanged, this, [this] { updatePreview(); });
    connect(m_dpi, &QDoubleSpinBox::valueChanged, this, [this] {
        if (m_unit->currentText() == QLatin1String("px")) showSize();  // the same points, other pixels
        updatePreview();
    });
    connect(m_path, &QLineEdit::textEdited, this, [this] { m_pathEdited = true; });
}

ExportChoice ExportDialog::choice() const {
    ExportChoice c;
    c.scope = static_cast<ExportScope>(m_scope->currentIndex());
    c.format = m_format->currentText();
    const bool grid = c.isFigure() && c.scope == ExportScope::View && m_run->currentIndex() == m_source.runs.size();
    c.run = grid ? -1 : m_run->currentIndex();
    c.content = m_content->currentIndex();
    c.size = m_sizePt;
    c.textPt = m_text->value();
    c.dpi = m_dpi->value();
    c.path = m_path->text();
    return c;
}

// The run and content lists follow the scope and the kind of format: a grid
// of every run and the token-status figure are figures of the shown view;
// several files are always the attention (figure or matrix).
void ExportDialog::formatChanged() {
    if (m_updating) return;
    m_updating = true;
    const ExportChoice c = choice();
    const bool figure = c.isFigure();
    const int run = m_run->currentIndex(), content = m_content->currentIndex();
    m_run->clear();
    m_run->addItems(m_source.runs);
    if (figure && c.scope == ExportScope::View) m_run->addItem(tr("every run (one grid)"));
    m_run->setCurrentIndex(std::clamp(run < 0 ? 1 : run, 0, std::max(0, m_run->count() - 1)));
    m_run->setEnabled(c.scope != ExportScope::EveryRun);
    m_content->clear();
    if (figure)
        m_content->addItems({tr("attention heatmap"), tr("token status (every run)")});
    else
        m_content->addItems(m_source.tables);
    m_content->setCurrentIndex(c.scope == ExportScope::View ? std::clamp(content, 0, m_content->count() - 1) : 0);
    m_content->setEnabled(c.scope == ExportScope::View);
    m_figureRows->setEnabled(figure);
    m_preview->setVisible(figure);
    m_dataPreview->setVisible(!figure);
    m_updating = false;
    whatChanged();
}

void ExportDialog::whatChanged() {
    if (m_updating) return;
    const ExportChoice c = choice();
    // Another figure gets its own size; another format keeps the chosen one.
    if (c.isFigure() && m_source.naturalSize && (m_sizePt.isEmpty() || m_sizeOf != qMakePair(c.run, c.content))) {
        m_sizePt = m_source.naturalSize(c.run, c.content);
        m_sizeOf = qMakePair(c.run, c.content);
        showSize();
    }
    updatePath();
    updatePreview();
}

double ExportDialog::toPoints(double value) const {
    return m_unit->currentText() == QLatin1String("mm") ? value / kMmPerPt : value * 72.0 / m_dpi->value();
}

double ExportDialog::fromPoints(double pt) const {
    return m_unit->currentText() == QLatin1String("mm") ? pt * kMmPerPt : pt * m_dpi->value() / 72.0;
}

void ExportDialog::unitChanged() {
    showSize();
}

void ExportDialog::showSize() {
    const bool mm = m_unit->currentText() == QLatin1String("mm");
    const bool was = m_updating;
    m_updating = true;
    for (QDoubleSpinBox* b : {m_width, m_height}) {
        b->setDecimals(mm ? 1 : 0);
        b->setSingleStep(mm ? 5 : 50);
    }
    m_width->setValue(fromPoints(m_sizePt.width()));
    m_height->setValue(fromPoints(m_sizePt.height()));
    m_updating = was;
}

void ExportDialog::sizeEdited() {
    if (m_updating) return;
    m_sizePt = QSizeF(toPoints(m_width->value()), toPoints(m_height->value()));
    updatePreview();
}

void ExportDialog::updatePath() {
    const ExportChoice c = choice();
    if (m_pathEdited) {
        if (c.scope == ExportScope::View) {  // keep the name, follow the format
            const QFileInfo f(m_path->text());
            m_path->setText(f.dir().filePath(f.completeBaseName() + QLatin1Char('.') + c.format));
        }
        return;
    }
    QString name = m_source.defaultName ? m_source.defaultName(c.run, c.content, c.isFigure()) : QStringLiteral("kvlens");
    if (c.scope == ExportScope::View) name += QLatin1Char('.') + c.format;
    else name += c.scope == ExportScope::EveryRun ? QStringLiteral("_runs") : QStringLiteral("_layers_heads");
    m_path->setText(QDir(m_source.folder).filePath(name));
}

void ExportDialog::updatePreview() {
    if (m_updating) return;
    const ExportChoice c = choice();
    if (!c.isFigure()) {
        m_dataPreview->setPlainText(m_source.dataPreview ? m_source.dataPreview(c.run, c.content, c.format) : QString());
        return;
    }
    if (m_sizePt.isEmpty()) return;
    m_outputSize->setText(tr("%1 × %2 mm · PNG %3 × %4 px")
                              .arg(m_sizePt.width() * kMmPerPt, 0, 'f', 1)
                              .arg(m_sizePt.height() * kMmPerPt, 0, 'f', 1)
                              .arg(qCeil(m_sizePt.width() * c.pngScale()))
                              .arg(qCeil(m_sizePt.height() * c.pngScale())));
    if (!m_source.paint) return;
    const double k = std::min({kPreviewBox.width() / m_sizePt.width(), kPreviewBox.height() / m_sizePt.height(), 3.0});
    QImage img(std::max(1, qRound(m_sizePt.width() * k)), std::max(1, qRound(m_sizePt.height() * k)), QImage::Format_RGB32);
    img.fill(Qt::white);
    QPainter p(&img);
    p.scale(k, k);
    const int run = c.run, content = c.content;
    const auto paint = m_source.paint;
    withTextSize([&](QPainter& q, const QRectF& a) { paint(q, a, run, content); }, c.textPt)(p, QRectF(QPointF(0, 0), m_sizePt));
    p.end();
    m_preview->setPixmap(QPixmap::fromImage(img));
}

QImage ExportDialog::previewImage() const { return m_preview->pixmap().toImage(); }

QString ExportDialog::previewText() const { return m_dataPreview->toPlainText(); }

void ExportDialog::browse() {
    const ExportChoice c = choice();
    if (c.scope != ExportScope::View) {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Export into"), m_source.folder);
        if (dir.isEmpty()) return;
        m_path->setText(QDir(dir).filePath(QFileInfo(m_path->text()).fileName()));
        m_pathEdited = true;
        return;
    }
    const QString filter = c.isFigure() ? tr("Figures (*.png *.svg *.pdf)") : tr("Data (*.csv *.json *.npy)");
    const QString f = QFileDialog::getSaveFileName(this, tr("Export to"), m_path->text(), filter);
    if (f.isEmpty()) return;
    m_pathEdited = true;
    const QString suffix = QFileInfo(f).suffix().toLower();
    m_path->setText(f);
    if (m_format->findText(suffix) >= 0 && suffix != c.format) m_format->setCurrentText(suffix);
}

}  // namespace kvlens::ui
