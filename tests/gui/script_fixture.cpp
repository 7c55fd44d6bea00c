#include "script_fixture.h"

#include <torch/csrc/jit/api/module.h>

namespace kvlens::test {

void writeScorer(const std::string& file, const std::string& expression) {
    torch::jit::Module m("Scorer");
    m.define("def forward(self, keys: Tensor, values: Tensor, queries: Tensor, attention: Tensor, "
             "positions: Tensor) -> Tensor:\n    return " + expression + "\n");
    m.save(file);
}

}  // namespace kvlens::test
