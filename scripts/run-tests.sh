#!/usr/bin/env bash
# The test command: on a fresh Debian 12 machine it installs the dependencies,
# fetches the reference tokenizers, builds, and runs every test this machine
# can run (CTest; GPU tests skip themselves without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/fetch-tokenizers.sh >/dev/null
scripts/build.sh
cd build
QT_QPA_PLATFORM=offscreen ctest --output-on-failure -j 2 "$@"
