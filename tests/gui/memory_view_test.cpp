// The KV memory view (widgets/memory_view.h): the table at the prompt's
// length and the plot's lines, for SmolLM2-135M's shape in bf16 (numbers
// worked out by hand: GQA 2 * 30 layers * 3 KV heads * 64 * 2 bytes =
// 22.5 KiB a token).
#include <QTableWidget>
#include <QtTest>

#include "widgets/memory_view.h"
#include "widgets/qcustomplot_include.h"

using kvlens::ui::MemoryView;

class MemoryViewTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void tablesAndPlotsEveryDesign() {
        MemoryView v;
        v.resize(700, 600);
        QCOMPARE(v.table()->rowCount(), 0);  // no model yet
        v.setShape({30, 9, 3, 64, 2});
        v.setContext(2048);
        QCOMPARE(v.table()->rowCount(), 6);
        QCOMPARE(v.table()->columnCount(), 4);  // design, per token, at 2048, who shares what
        QCOMPARE(v.plot()->graphCount(), 6);
        v.setBudget(kvlens::parseBudget("25%"));
        QCOMPARE(v.table()->columnCount(), 5);
        QCOMPARE(v.plot()->graphCount(), 12);  // each design alone and with the budget
        QCOMPARE(v.table()->item(1, 0)->text(), QStringLiteral("GQA (3 KV heads) *"));
        QCOMPARE(v.table()->item(1, 1)->text(), QStringLiteral("22.5 KiB"));
        QCOMPARE(v.table()->item(1, 2)->text(), QStringLiteral("45.0 MiB"));   // 23040 B * 2048
        QCOMPARE(v.table()->item(1, 3)->text(), QStringLiteral("11.2 MiB"));   // 23040 B * 512 = 11.25 MiB
        QCOMPARE(v.table()->item(0, 1)->text(), QStringLiteral("67.5 KiB"));   // MHA: 9 heads
        QCOMPARE(v.table()->item(2, 1)->text(), QStringLiteral("7.5 KiB"));    // MQA: 1 head
        QCOMPARE(v.table()->item(3, 1)->text(), QStringLiteral("11.2 KiB"));   // CLA k=2: 15 layers (11.25 KiB)
        // The plot's GQA line at 131072 tokens: 23040 * 131072 B = 2880 MiB.
        const QCPGraph* gqa = v.plot()->graph(2);
        QCOMPARE(gqa->name(), QStringLiteral("GQA (3 KV heads) *"));
        QCOMPARE(gqa->data()->at(gqa->data()->size() - 1)->value, 2880.0);
        if (qEnvironmentVariableIsSet("KVLENS_SCREENSHOT_DIR"))
            v.grab().save(qEnvironmentVariable("KVLENS_SCREENSHOT_DIR") + QStringLiteral("/memory-view.png"));
    }
};

QTEST_MAIN(MemoryViewTest)
#include "memory_view_test.moc"
