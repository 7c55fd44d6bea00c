#pragma once
// qcustomplot.h uses the `signals` and `foreach` keywords, which
// QT_NO_KEYWORDS (needed because ATen uses `slots` as an identifier) turns
// off; map them to Q_SIGNALS / Q_FOREACH for this header only.
#ifdef QT_NO_KEYWORDS
#define signals Q_SIGNALS
#define foreach Q_FOREACH
#include <qcustomplot.h>
#undef foreach
#undef signals
#else
#include <qcustomplot.h>
#endif
