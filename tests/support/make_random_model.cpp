// make_random_model DIR [layers hidden heads kv_heads intermediate vocab max_positions]
// Writes a random Llama-family model directory (config.json +
// model.safetensors) of the given size: a stand-in for timing runs
// (kvlens-cli bench) where no trained model of that shape exists.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/support/test_models.h"

int main(int argc, char** argv) {
    if (argc != 2 && argc != 9) {
        std::fprintf(stderr, "usage: make_random_model DIR [layers hidden heads kv_heads intermediate vocab max_positions]\n");
        return 2;
    }
    kvlens::test::ModelOptions o;
    if (argc == 9) {
        o.numLayers = std::atoll(argv[2]);
        o.hiddenSize = std::atoll(argv[3]);
        o.numHeads = std::atoll(argv[4]);
        o.numKvHeads = std::atoll(argv[5]);
        o.intermediateSize = std::atoll(argv[6]);
        o.vocabSize = std::atoll(argv[7]);
        o.maxPositions = std::atoll(argv[8]);
    }
    kvlens::test::makeRandomModel(kvlens::Family::Llama, o, 1, argv[1]);
    std::printf("%s\n", argv[1]);
    return 0;
}
