// BudgetEditor: dragging a bar edits one layer's budget (one undo step),
// presets lay the bars out, and undo/redo restore the spec the session gets.
#include <QtTest>
#include <QPainter>
#include <QUndoStack>

#include <QCheckBox>
#include <QSpinBox>

#include "trace_fixtures.h"
#include "widgets/budget_bars.h"
#include "widgets/budget_editor.h"

using namespace kvlens;

namespace {

void drag(ui::BudgetBars* bars, int layer, int64_t to) {
    const QPoint from = bars->pointFor(layer, 64);
    const QPoint target = bars->pointFor(layer, to);
    QTest::mousePress(bars, Qt::LeftButton, {}, from);
    QTest::mouseMove(bars, (from + target) / 2);
    QTest::mouseMove(bars, target);
    QTest::mouseRelease(bars, Qt::LeftButton, {}, target);
}

}  // namespace

class BudgetEditorTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void dragChangesOneLayer() {
        QUndoStack undo;
        ui::BudgetEditor editor(&undo);
        editor.resize(400, 300);
        editor.show();
        editor.setContext(4, 200);
        QVERIFY(QTest::qWaitForWindowExposed(&editor));
        QSignalSpy changed(&editor, &ui::BudgetEditor::budgetChanged);
        QSignalSpy previewed(&editor, &ui::BudgetEditor::budgetPreviewed);
        drag(editor.bars(), 2, 30);
        QCOMPARE(changed.count(), 1);  // one edit per drag
        QVERIFY(previewed.count() >= 2);  // the view follows while dragging
        const auto spec = changed.last().at(0).value<BudgetSpec>();
        QCOMPARE(spec.perLayer.size(), size_t{4});
        QVERIFY2(std::abs(spec.perLayer[2] - 30) <= 2, qPrintable(QString::number(spec.perLayer[2])));
        QCOMPARE(spec.perLayer[0], int64_t{64});
        QCOMPARE(spec.perLayer[3], int64_t{64});
        QCOMPARE(editor.state().preset, ui::BudgetState::Preset::Custom);
        QVERIFY(editor.totalText().contains(QString::number(64 * 3 + spec.perLayer[2])));
        QCOMPARE(undo.count(), 1);

        undo.undo();
        QVERIFY(editor.spec().perLayer.empty());  // uniform: a token budget again
        QCOMPARE(editor.spec().value, 64.0);
        QCOMPARE(changed.last().at(0).value<BudgetSpec>().perLayer.size(), size_t{0});
        undo.redo();
        QCOMPARE(editor.spec().perLayer, spec.perLayer);
    }

    // B applies as it is typed, like every other control; the keystrokes of
    // one number are one undo step.
    void theBudgetAppliesAsTypedInOneUndoStep() {
        QUndoStack undo;
        ui::BudgetEditor editor(&undo);
        editor.setContext(4, 500);
        editor.show();
        QVERIFY(QTest::qWaitForWindowExposed(&editor));
        QSignalSpy changed(&editor, &ui::BudgetEditor::budgetChanged);
        auto* b = editor.findChild<QSpinBox*>();
        QVERIFY(b);
        b->setFocus();
        b->selectAll();
        QTest::keyClicks(b, QStringLiteral("128"));
        QVERIFY(changed.count() >= 1);
        QCOMPARE(editor.spec().value, 128.0);  // no Enter
        QCOMPARE(undo.count(), 1);
        undo.undo();
        QCOMPARE(editor.spec().value, 64.0);

        // Issue 50 item 8: "25%" typed in B is a quarter of the prompt (as
        // the CLI reads it), not 25 entries; it follows the prompt's length,
        // the arrows step the percent, and a plain number is entries again.
        b->selectAll();
        QTest::keyClicks(b, QStringLiteral("25%"));
        QCOMPARE(editor.spec().kind, BudgetSpec::Kind::Ratio);
        QCOMPARE(editor.spec().text(), std::string("25%"));
        QCOMPARE(changed.last().at(0).value<BudgetSpec>().kind, BudgetSpec::Kind::Ratio);
        QCOMPARE(editor.state().budget, int64_t{125});  // what the bars show: 25% of 500
        QVERIFY2(editor.totalText().contains(QStringLiteral("25% of the prompt = 125")), qPrintable(editor.totalText()));
        editor.setContext(4, 200);  // a shorter prompt: the share follows it
        QCOMPARE(editor.state().budget, int64_t{50});
        QCOMPARE(editor.spec().text(), std::string("25%"));
        QTest::keyClick(b, Qt::Key_Up);
        QCOMPARE(editor.spec().text(), std::string("26%"));
        QCOMPARE(b->text(), QStringLiteral("26%"));
        b->setValue(100);
        QTest::keyClick(b, Qt::Key_Up);  // a share stops at the whole prompt
        QCOMPARE(editor.spec().text(), std::string("100%"));
        b->selectAll();
        QTest::keyClicks(b, QStringLiteral("96"));
        QCOMPARE(editor.spec().kind, BudgetSpec::Kind::Tokens);
        QCOMPARE(editor.spec().value, 96.0);
        QCOMPARE(undo.count(), 1);  // one typed number, one undo step (the redo of 128 is gone)
        undo.undo();
        QCOMPARE(editor.spec().text(), std::string("64"));
        QCOMPARE(b->text(), QStringLiteral("64"));
    }

    // A run that holds other layer budgets than the bars (PyramidKV's own
    // pyramid) is shown per KV head at once, until the user says otherwise.
    void aRunWithItsOwnBudgetsIsShownAsItHoldsThem() {
        QUndoStack undo;
        ui::BudgetEditor editor(&undo);
        editor.setContext(2, 10);
        auto* perHead = editor.findChild<QCheckBox*>();
        QVERIFY(perHead && !perHead->isChecked());
        editor.setTrace(test::makeTrace());  // policy 1 holds 6 per layer; the bars say 10 (64, clamped)
        QVERIFY(perHead->isChecked());
        QTest::mouseClick(perHead, Qt::LeftButton);  // the user clears it
        QVERIFY(!perHead->isChecked());
        editor.setTrace(test::makeTrace());
        QVERIFY(!perHead->isChecked());
    }

    void pyramidPresetDecreasesUpwards() {
        QUndoStack undo;
        ui::BudgetEditor editor(&undo);
        editor.setContext(8, 500);
        ui::BudgetState s = editor.state();
        s.preset = ui::BudgetState::Preset::Pyramid;
        s.budget = 64;
        s.beta = 20;
        s.layout(8, 500);
        editor.edit(s, "pyramid");
        const auto b = editor.spec().perLayer;
        QCOMPARE(b.size(), size_t{8});
        QVERIFY(b.front() > b.back());  // lower layers keep more (PyramidKV)
        for (size_t i = 1; i < b.size(); ++i) QVERIFY(b[i] <= b[i - 1]);
        undo.undo();
        QVERIFY(editor.spec().perLayer.empty());
    }

    void perHeadViewShowsHeldEntries() {
        ui::BudgetBars bars;
        bars.resize(300, 200);
        bars.setBudgets({64, 64});
        bars.setLimit(100);
        const QImage plain = bars.grab().toImage();
        bars.setHeadHeld({{80, 48}, {40, 88}});
        const QImage perHead = bars.grab().toImage();
        QVERIFY(plain != perHead);
        // A layer's value then stands over its own bar, clear of its heads' numbers:
        // three digits fit a column of this width, not the bar beside the heads.
        bars.resize(90, 200);
        bars.setHeadHeld({});
        bars.setBudgets({100, 100});
        QVERIFY(bars.valueFits(0));
        bars.setHeadHeld({{80, 48}, {40, 88}});
        QVERIFY(!bars.valueFits(0));
    }

    // Issue 21 item 15: at 2, 30 and 80 layers no layer label or value is
    // drawn over another, labels fall on round layers, and the hover text
    // gives every layer's exact numbers.
    void deepModelsThinTheirLabels() {
        for (int layers : {2, 30, 80}) {
            ui::BudgetBars bars;
            bars.resize(300, 160);
            std::vector<int64_t> b;
            for (int l = 0; l < layers; ++l) b.push_back(64 + l);
            bars.setBudgets(b);
            bars.setLimit(512);
            const int stride = bars.labelStride();
            const QFontMetrics fm(bars.font());
            const int width = bars.barSlot(1).left() - bars.barSlot(0).left();
            const int label = QFontMetrics([&] {
                                  QFont f = bars.font();
                                  f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.8));
                                  return f;
                              }()).horizontalAdvance(QStringLiteral("L%1").arg(layers - 1));
            QVERIFY2(stride * width >= label, qPrintable(QStringLiteral("%1 layers: stride %2").arg(layers).arg(stride)));
            QVERIFY(stride == 1 || stride == 2 || stride == 5 || stride % 10 == 0);
            if (layers == 2) QCOMPARE(stride, 1);
            if (layers == 80) QVERIFY(stride >= 5);
            for (int l = 0; l < layers; ++l)
                if (bars.valueFits(l))
                    QVERIFY(fm.horizontalAdvance(QString::number(b[static_cast<size_t>(l)])) <= bars.barSlot(l).width() + 2);
            if (layers >= 30) QVERIFY(!bars.valueFits(layers - 1));  // a 3-digit value in a ~3 px column: not drawn
            bars.setHeadHeld(std::vector<std::vector<int64_t>>(static_cast<size_t>(layers), {60, 64, 70}));
            const QString hover = bars.hoverText(bars.barSlot(layers - 1).center());
            QVERIFY2(hover.contains(QStringLiteral("layer %1: budget %2").arg(layers - 1).arg(b.back())), qPrintable(hover));
            QVERIFY(hover.contains(QStringLiteral("60, 64, 70")));
            QVERIFY(bars.hoverText(QPoint(1, 1)).isEmpty());  // the axis, not a bar
            QImage img(bars.size(), QImage::Format_ARGB32);
            QPainter p(&img);
            bars.paint(p, bars.rect());
        }
    }
};

QTEST_MAIN(BudgetEditorTest)
#include "budget_editor_test.moc"
