#!/usr/bin/env bash
# A CI-sized libFuzzer run (tests/fuzz/CMakeLists.txt registers one per
# target): a fixed number of executions from a fixed seed, starting from the
# committed seed corpus. New inputs go to a scratch corpus in the build tree
# (emptied first, so every run does the same work), never into the source
# tree; a crashing input is kept as <build>/tests/fuzz/artifacts/<target>-crash-*.
# Usage: run-fuzzer.sh FUZZER SEED_CORPUS_DIR RUNS
set -euo pipefail
fuzzer=$1 seeds=$2 runs=$3
name=$(basename "$fuzzer")
here=$(dirname "$fuzzer")
work="$here/work/$name"
rm -rf "$work"
mkdir -p "$work" "$here/artifacts"
dict=$(dirname "$0")/dict/$name.dict
extra=()
[[ -f $dict ]] && extra+=(-dict="$dict")
exec "$fuzzer" "$work" "$seeds" "${extra[@]}" -runs="$runs" -seed=1 -timeout=20 -rss_limit_mb=3072 \
  -print_final_stats=1 -print_funcs=0 -artifact_prefix="$here/artifacts/$name-"
