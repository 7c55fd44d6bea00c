#pragma once
// Comparing what two Sessions published, as a view shows it: statuses, held
// sets, budgets, token choices exactly; log-probs, KL, retained mass, output
// cosine and the captured attention within a tolerance (0: bit for bit).
#include <memory>
#include <string>
#include <vector>

#include "core/run/session.h"
#include "core/run/trace.h"

namespace kvlens::test {

// start() then `steps` step()s: every Trace published.
std::vector<std::shared_ptr<const Trace>> runAll(Session& s, int steps);
// |a - b| <= tol · max(1, |b|); NaN equals NaN only.
bool close(double a, double b, double tol);
// GoogleTest failures (EXPECT_*) naming `what`, the step, the run and the field.
void expectSameTraces(const std::vector<std::shared_ptr<const Trace>>& got,
                      const std::vector<std::shared_ptr<const Trace>>& want, double tol, const std::string& what);

}  // namespace kvlens::test
