// PolicyList and ParamForm: add/remove from the registry, parameter controls
// built from ParamSpecs, validation through the registry, undo/redo.
#include <QtTest>
#include <QComboBox>
#include <QLineEdit>
#include <QListWidget>
#include <QSpinBox>
#include <QUndoStack>

#include "widgets/palette.h"
#include "widgets/param_form.h"
#include "widgets/policy_list.h"

using namespace kvlens;

class PolicyListTest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void addConfigureRemoveUndo() {
        QUndoStack undo;
        ui::PolicyList list(&undo);
        list.setPolicies({parsePolicySpec("streaming")});
        QSignalSpy changed(&list, &ui::PolicyList::policiesChanged);
        list.addPolicy("snapkv");
        QCOMPARE(list.policies().size(), size_t{2});
        QCOMPARE(changed.count(), 1);
        QCOMPARE(list.list()->currentRow(), 1);  // the new policy is selected, its form shown

        auto* window = qobject_cast<QSpinBox*>(list.form()->control("window"));
        QVERIFY(window);
        QCOMPARE(window->value(), 32);
        window->setValue(16);
        QCOMPARE(list.policies()[1].label(), std::string("snapkv:window=16"));
        QCOMPARE(changed.last().at(0).value<std::vector<PolicyConfig>>()[1].getInt("window"), int64_t{16});

        auto* pool = qobject_cast<QComboBox*>(list.form()->control("pool"));
        QVERIFY(pool);
        QCOMPARE(pool->count(), 2);  // max | avg, from the registry

        undo.undo();
        QCOMPARE(list.policies()[1].label(), std::string("snapkv"));
        QTRY_COMPARE(qobject_cast<QSpinBox*>(list.form()->control("window"))->value(), 32);  // the form follows
        undo.undo();
        QCOMPARE(list.policies().size(), size_t{1});
        undo.redo();
        QCOMPARE(list.policies().size(), size_t{2});

        list.select(0);
        list.removeSelected();
        QCOMPARE(list.policies().size(), size_t{1});
        QCOMPARE(list.policies()[0].id, std::string("snapkv"));
    }

    // Issue 50: a policy keeps its colour slot for its life: through a
    // parameter edit (its label changes), another's removal, undo and redo;
    // a new one takes the lowest free slot, so no two share a colour.
    void colourSlotsFollowThePolicyNotItsLabel() {
        QUndoStack undo;
        ui::PolicyList list(&undo);
        list.setPolicies({parsePolicySpec("streaming"), parsePolicySpec("h2o"), parsePolicySpec("snapkv")});
        QCOMPARE(list.colourSlots(), (std::vector<int>{0, 1, 2}));
        const QColor snapkv = ui::slotColour(2);
        list.select(2);
        qobject_cast<QSpinBox*>(list.form()->control("window"))->setValue(16);
        QCOMPARE(list.policies()[2].label(), std::string("snapkv:window=16"));
        QCOMPARE(list.colourSlots(), (std::vector<int>{0, 1, 2}));
        QCOMPARE(ui::policyColour("snapkv:window=16"), snapkv);
        QCOMPARE(list.list()->item(2)->foreground().color(), snapkv);
        list.select(0);
        list.removeSelected();
        QCOMPARE(list.colourSlots(), (std::vector<int>{1, 2}));
        QCOMPARE(list.list()->item(1)->foreground().color(), snapkv);
        list.addPolicy("tova");
        QCOMPARE(list.colourSlots(), (std::vector<int>{1, 2, 0}));  // the lowest free slot
        list.addPolicy("h2o");
        QCOMPARE(list.colourSlots(), (std::vector<int>{1, 2, 0, 3}));
        undo.undo();
        undo.undo();
        undo.undo();
        QCOMPARE(list.colourSlots(), (std::vector<int>{0, 1, 2}));
        // A run of a trace with the list's runs takes its slot by position
        // (a question-aware run's label differs from the list's).
        Trace t;
        t.policies.resize(4);
        t.policies[3].label = "snapkv:window=5";
        QCOMPARE(ui::runColour(t, 3), snapkv);
        // Slots saved in a session come back; slots that are not one per policy and distinct are given afresh.
        list.setPolicies({parsePolicySpec("h2o"), parsePolicySpec("tova")}, {5, 2});
        QCOMPARE(list.colourSlots(), (std::vector<int>{5, 2}));
        list.setPolicies({parsePolicySpec("h2o"), parsePolicySpec("tova")}, {2, 2});
        QCOMPARE(list.colourSlots(), (std::vector<int>{0, 1}));
    }

    void invalidValuesAreRejectedWithAReason() {
        QUndoStack undo;
        ui::PolicyList list(&undo);
        list.setPolicies({parsePolicySpec("knorm")});
        list.select(0);
        QSignalSpy changed(&list, &ui::PolicyList::policiesChanged);
        auto* layers = qobject_cast<QLineEdit*>(list.form()->control("skip_layers"));
        QVERIFY(layers);
        layers->setText("0,x");
        Q_EMIT layers->editingFinished();
        QCOMPARE(changed.count(), 0);
        QVERIFY(!list.form()->errorText().isEmpty());
        layers->setText("0");
        Q_EMIT layers->editingFinished();
        QCOMPARE(changed.count(), 1);
        QVERIFY(list.form()->errorText().isEmpty());
    }

    // A wrong value is marked where it is typed, with the reason beside the
    // field, before it is committed; the policy keeps its last valid value
    // and the form says so above its fields.
    void aWrongValueIsMarkedAsItIsTyped() {
        QUndoStack undo;
        ui::PolicyList list(&undo);
        list.setPolicies({parsePolicySpec("h2o")});
        list.select(0);
        QSignalSpy changed(&list, &ui::PolicyList::policiesChanged);
        auto* recent = qobject_cast<QLineEdit*>(list.form()->control("recent"));
        QVERIFY(recent);
        QCOMPARE(recent->toolTip().count(QStringLiteral("default B/2")), 1);
        recent->selectAll();
        QTest::keyClicks(recent, QStringLiteral("abc"));
        QVERIFY(list.form()->fieldError("recent").contains(QLatin1String("recent")));
        QVERIFY(recent->styleSheet().contains(QLatin1String("border")));
        QVERIFY(list.form()->errorText().isEmpty());  // not committed yet
        Q_EMIT recent->editingFinished();
        QCOMPARE(changed.count(), 0);
        QVERIFY(list.form()->errorText().contains(QLatin1String("recent")));
        QCOMPARE(list.policies()[0].label(), std::string("h2o"));
        recent->selectAll();
        QTest::keyClicks(recent, QStringLiteral("8"));
        QVERIFY(list.form()->fieldError("recent").isEmpty());
        QVERIFY(recent->styleSheet().isEmpty());
        Q_EMIT recent->editingFinished();
        QCOMPARE(changed.count(), 1);
        QVERIFY(list.form()->errorText().isEmpty());
        QCOMPARE(list.policies()[0].label(), std::string("h2o:recent=8"));
    }
};

QTEST_MAIN(PolicyListTest)
#include "policy_list_test.moc"
