#!/usr/bin/env bash
# Configures and builds KVLens into ./build (at most 2 parallel jobs: LibTorch
# translation units need ~1 GB of RAM each). `--app` first builds only the
# programs (kvlens, kvlens-cli) and configures no tests: what setup-and-run
# needs; without it the test tree is configured and built too. Other
# arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
tests=ON
if [[ "${1:-}" == --app ]]; then
  shift
  tests=OFF
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVLENS_TESTS=$tests "$@" >/dev/null
cmake --build build -j "${KVLENS_JOBS:-2}"
