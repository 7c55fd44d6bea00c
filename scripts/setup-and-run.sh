#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install the dependencies, build,
# and run KVLens on the bundled model: the GUI (kvlens) when there is a
# display, otherwise a short kvlens-cli demo. Extra arguments go to the
# program that runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --app
scripts/build.sh --app
if [[ -x build/app/gui/kvlens && ( -n "${DISPLAY:-}" || -n "${WAYLAND_DISPLAY:-}" ) ]]; then
  exec build/app/gui/kvlens "$@"
fi
if [[ -x build/app/gui/kvlens ]]; then
  echo "No display (DISPLAY/WAYLAND_DISPLAY unset): running the command-line demo instead of the GUI." >&2
fi
exec build/app/kvlens-cli compare --prompt-file resources/examples/needle-red-door.txt \
    --policy streaming --policy h2o --policy snapkv --budget 64 --steps 8 "$@"
