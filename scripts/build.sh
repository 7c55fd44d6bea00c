#!/usr/bin/env bash
# Configures and builds KVLens into ./build (at most 2 parallel jobs: LibTorch
# translation units need ~1 GB of RAM each). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j "${KVLENS_JOBS:-2}"
