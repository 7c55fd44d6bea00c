#pragma once
// QTEST_MAIN for tests that run the model: like kvlens itself, they first
// make OpenBLAS use this CPU's kernels (core/cpu_tuning.h), so their timings
// are the app's.
#include <QApplication>
#include <QtTest>

#include "core/cpu_tuning.h"

#define KVLENS_GUI_TEST_MAIN(TestClass)                 \
    int main(int argc, char** argv) {                   \
        kvlens::restartWithTunedBlas(argv);             \
        QApplication app(argc, argv);                   \
        app.setAttribute(Qt::AA_Use96Dpi, true);        \
        TestClass tc;                                   \
        QTEST_SET_MAIN_SOURCE_PATH                      \
        return QTest::qExec(&tc, argc, argv);           \
    }
