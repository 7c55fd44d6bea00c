#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install the dependencies, build,
# and run KVLens on the bundled model. Extra arguments go to kvlens-cli generate.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
if [[ ! -f resources/models/kvlens-tiny/config.json ]]; then
  echo "The bundled model resources/models/kvlens-tiny is not in this checkout yet." >&2
  echo "Run a model of your own: build/app/kvlens-cli generate --model /path/to/hf-model --prompt 'Hello'" >&2
  exit 1
fi
exec build/app/kvlens-cli generate --prompt "${KVLENS_PROMPT:-The code for the red door is 4821. The code for the red door is}" --steps 24 "$@"
