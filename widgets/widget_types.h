#pragma once
// Core value types carried by widget signals (and QSignalSpy in tests).
#include <QMetaType>
#include <vector>

#include "core/policy/budget.h"
#include "core/policy/policy_info.h"

Q_DECLARE_METATYPE(kvlens::BudgetSpec)
Q_DECLARE_METATYPE(kvlens::PolicyConfig)
Q_DECLARE_METATYPE(std::vector<kvlens::PolicyConfig>)
