#pragma once
// Types that cross the worker thread by queued signal.
#include <QMetaType>
#include <memory>
#include <vector>

#include "core/study/needle_grid.h"
#include "core/policy/budget.h"
#include "core/policy/policy_info.h"
#include "core/run/model_handle.h"
#include "core/run/trace.h"
#include "core/tokenizer/tokenizer.h"
#include "widgets/widget_types.h"

Q_DECLARE_METATYPE(std::shared_ptr<const kvlens::Trace>)
Q_DECLARE_METATYPE(std::shared_ptr<const kvlens::Tokenizer>)
Q_DECLARE_METATYPE(kvlens::ModelSummary)
Q_DECLARE_METATYPE(std::shared_ptr<const kvlens::eval::NeedleGridResult>)
Q_DECLARE_METATYPE(kvlens::RunSettings)

namespace kvlens::gui {
// Registers the types above; call once before the worker thread starts.
void registerMetaTypes();
}  // namespace kvlens::gui
