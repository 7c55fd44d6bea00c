#!/usr/bin/env bash
# Remakes the pictures the docs show of the real model, SmolLM2-135M-Instruct:
# the README's main screenshot (docs/screenshots/main-window.png, the GUI under
# Xvfb) and docs/figures/smollm2-sinks.png (kvlens-cli export), both from one
# session: the lighthouse text, a window and StreamingLLM (4 sinks) at a
# 64-token budget, layer 20, head 0. Needs a build (scripts/build.sh).
# Usage: scripts/smollm2-figures.sh [IMPORTED_MODEL_DIR]   (default build/SmolLM2-135M-Instruct)
set -euo pipefail
cd "$(dirname "$0")/.."
model=$(realpath -m "${1:-build/SmolLM2-135M-Instruct}")
if [[ ! -f $model/model.safetensors ]]; then
  build/app/kvlens-cli import gguf "$(scripts/fetch-smollm2.sh)" "$model"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
session=$tmp/smollm2-sinks.kvlens.json
python3 - "$model" "$session" resources/examples/lighthouse.txt <<'PY'
import json, sys
model, out, text = sys.argv[1:]
json.dump({"format": "kvlens-session", "version": 1, "model": {"dir": model, "fingerprint": ""},
           "prompt": open(text).read().strip(), "policies": ["window", "streaming:sinks=4"],
           "budget": "64", "budgets": "", "decode_steps": 8, "teacher_forced": True,
           "sampling": {"greedy": True, "temperature": 1.0, "top_p": 1.0, "seed": 0},
           "view": {"layer": 20, "head": 0, "step": -1, "colour_scale": "power"}}, open(out, "w"), indent=2)
PY
xvfb-run -a -s "-screen 0 1600x1000x24" build/app/gui/kvlens --model "$model" --open "$session" \
  --screenshot docs/screenshots/main-window.png
build/app/kvlens-cli export --session "$session" --show streaming --out docs/figures/smollm2-sinks.png
build/app/kvlens-cli export --session "$session" --show window --out docs/figures/smollm2-window.png
