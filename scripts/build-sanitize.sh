#!/usr/bin/env bash
# Configures and builds the reliability build into ./build-asan: clang with
# ASan + UBSan, no GUI, the unit tests of KVLENS_SANITIZE_TESTS and the
# libFuzzer targets of tests/fuzz (docs/reliability.md). Extra arguments go to
# cmake. `ctest` in build-asan runs them (labels asan and fuzz);
# scripts/run-tests.sh runs them in the same CTest invocation as build/.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DKVLENS_GUI=OFF -DKVLENS_SANITIZE=ON -DKVLENS_FUZZ=ON "$@" >/dev/null
cmake --build build-asan -j "${KVLENS_JOBS:-2}" --target kvlens_sanitized kvlens_fuzzers
