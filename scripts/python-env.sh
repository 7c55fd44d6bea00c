#!/usr/bin/env bash
# The virtual environment of the tests' Python reference tools (Hugging Face
# transformers and tokenizers, gguf, llama-cpp-python, torch): exactly the
# pinned versions of tests/python/requirements.txt, on Debian's python3,
# under ${KVLENS_CACHE_DIR:-~/.cache/kvlens}/venv/<hash of that file>, never
# in the repository. Python is for tests and references only; the product
# never runs it.
#
# Idempotent: a complete environment is only reported. Downloads and the
# llama-cpp-python wheel built from source are cached (pip's cache under the
# same folder), so a second machine state rebuilds nothing it has.
# Prints the environment's python on stdout; --where prints it without
# creating anything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
req="$root/tests/python/requirements.txt"
cache="${KVLENS_CACHE_DIR:-$HOME/.cache/kvlens}"
hash=$(sha256sum "$req" | cut -c1-12)
venv="$cache/venv/$hash"
py="$venv/bin/python"
if [[ "${1:-}" == "--where" ]]; then echo "$py"; exit 0; fi
if [[ -f "$venv/.complete" ]]; then echo "$py"; exit 0; fi

base=/usr/bin/python3  # Debian's (python3-venv), not whatever is first on PATH
[[ -x $base ]] || { echo "python-env: $base is missing (apt-get install python3-venv)" >&2; exit 1; }
echo "python-env: creating $venv (pinned tools of tests/python/requirements.txt)" >&2
rm -rf "$venv"
mkdir -p "$cache/venv"
# Environments of earlier requirements are of no further use (several GB each).
for old in "$cache"/venv/*/; do
  [[ -f $old/.complete && "${old%/}" != "$venv" ]] && rm -rf "$old"
done
"$base" -m venv "$venv"
export PIP_CACHE_DIR="$cache/pip" PIP_DISABLE_PIP_VERSION_CHECK=1
# llama.cpp built for any x86-64 (the wheel is cached and may meet another CPU),
# without its examples, tests, servers and multimodal library (llama-cpp-python
# loads that one only for image chats): the tests use its tokenizer only.
export CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DLLAVA_BUILD=OFF"
export CMAKE_BUILD_PARALLEL_LEVEL="${KVLENS_JOBS:-2}"
"$py" -m pip install -q --no-deps -r "$req" >&2
"$py" -c "import torch, transformers, tokenizers, gguf, llama_cpp" >&2
touch "$venv/.complete"
echo "$py"
