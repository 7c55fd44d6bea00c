#!/usr/bin/env bash
# CTest fixture smollm2: imports the GGUF afresh (kvlens-cli import gguf).
# Usage: import_smollm2.sh KVLENS_CLI GGUF OUT_DIR
set -euo pipefail
cli=$1 gguf=$2 out=$3
[[ -f $gguf ]] || { echo "$gguf is missing: scripts/fetch-smollm2.sh fetches it (the README's test command runs it)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$(dirname "$out")"
"$cli" import gguf --quiet "$gguf" "$out"
