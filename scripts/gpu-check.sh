#!/usr/bin/env bash
# One GPU check (issue 18), on a machine with an NVIDIA GPU and a PyTorch
# install: builds core + kvlens-cli + the gpu tests with KVLENS_GUI=OFF
# against that PyTorch's LibTorch, runs the tests labelled gpu, then the
# bench table at the SmolLM2-135M and Qwen2.5-0.5B shapes (random weights)
# in bf16 on cuda, and prints one summary: tests passed, decode tokens/s,
# eviction overhead, memory. Sized to finish within 8 minutes on 16 cores.
#
#   scripts/gpu-check.sh            # summary on stdout, logs in build-gpu/check/
#   OUT=/some/dir scripts/gpu-check.sh   # logs and summary.txt there too
#
# Needs: python3 with torch (CUDA build), cmake, ninja, a C++17 compiler, and
# the CUDA toolkit torch's CMake config asks for (nvcc). The C/C++ libraries
# a Python image may lack come from .gpu-deps/ when present
# (scripts/gpu-deps.sh makes it on a Debian 12 machine; carry it along).
# Environment: PYTHON (python3), JOBS (nproc), KVLENS_GPU_CONTEXT (2048),
# KVLENS_GPU_STEPS (32).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
py=${PYTHON:-python3}
jobs=${JOBS:-$(nproc)}
context=${KVLENS_GPU_CONTEXT:-2048}
steps=${KVLENS_GPU_STEPS:-32}
build=$root/build-gpu
logs=${OUT:-$build/check}
mkdir -p "$logs"
t0=$SECONDS
say() { printf '[gpu-check %3ds] %s\n' $((SECONDS - t0)) "$*"; }
fail() { say "FAILED: $*"; exit 1; }

torch_prefix=$("$py" -c 'import torch; print(torch.utils.cmake_prefix_path)') || fail "$py cannot import torch"
"$py" - <<'PY' | tee "$logs/torch.txt"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(),
      "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-",
      "cxx11abi", torch._C._GLIBCXX_USE_CXX11_ABI)
PY
abi=$("$py" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
[ "$abi" = 1 ] || say "note: this torch uses the old C++ ABI; the GoogleTest of .gpu-deps will not link with it"

prefix=$torch_prefix
[ -d "$root/.gpu-deps" ] && prefix="$prefix;$root/.gpu-deps"
cuda_root=()
if ! command -v nvcc > /dev/null; then
    for d in /usr/local/cuda /opt/cuda; do [ -x "$d/bin/nvcc" ] && cuda_root=(-DCUDAToolkit_ROOT="$d" -DCUDA_TOOLKIT_ROOT_DIR="$d") && break; done
fi
say "configuring against $torch_prefix"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVLENS_GUI=OFF -DKVLENS_CUDA=ON \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CUDA_ARCHITECTURES=native "${cuda_root[@]}" > "$logs/configure.log" 2>&1 ||
    { tail -30 "$logs/configure.log"; fail "cmake configure (log: $logs/configure.log)"; }
say "building kvlens-cli and gpu_test with $jobs jobs"
ninja -C "$build" -j"$jobs" kvlens-cli gpu_test > "$logs/build.log" 2>&1 ||
    { grep -m 20 -B2 -A6 "error" "$logs/build.log"; fail "build (log: $logs/build.log)"; }

say "tests labelled gpu"
ctest --test-dir "$build" -L gpu --output-on-failure > "$logs/ctest.log" 2>&1
ctest_rc=$?
tests_line=$(grep -E "tests passed|tests failed" "$logs/ctest.log" | tail -1)
skipped=$(grep -c "(Skipped)" "$logs/ctest.log")
grep -E "^\[ cuda" "$logs/ctest.log"

cli=$build/app/kvlens-cli
for shape in smollm2-135m qwen2.5-0.5b; do
    say "bench $shape bf16 on cuda, context $context, $steps steps"
    "$cli" bench --synthetic "$shape" --device cuda --dtype bf16 --context "$context" --steps "$steps" \
        --policy streaming --policy h2o --policy tova --policy snapkv --policy pyramidkv --budget 25% --json \
        > "$logs/bench-$shape.json" 2> "$logs/bench-$shape.err" || { tail -5 "$logs/bench-$shape.err"; say "bench $shape failed"; }
done

"$py" - "$logs" "$tests_line" "$skipped" <<'PY' | tee "$logs/summary.txt"
import json, os, statistics, sys
logs, tests, skipped = sys.argv[1], sys.argv[2], sys.argv[3]
print("== KVLens GPU check ==")
print(open(os.path.join(logs, "torch.txt")).read().strip())
print("gpu tests:", tests or "no CTest summary (see ctest.log)", f"({skipped} skipped)")
for shape in ("smollm2-135m", "qwen2.5-0.5b"):
    path = os.path.join(logs, f"bench-{shape}.json")
    try:
        b = json.load(open(path))
    except Exception as e:
        print(f"{shape}: no bench result ({e})")
        continue
    rows = b["rows"]
    decode = statistics.median(r["full_decode_tok_s"] for r in rows)
    prefill = statistics.median(r["full_prefill_tok_s"] for r in rows)
    mem = b.get("device_memory") or {}
    gib = lambda k: f"{mem[k] / 2**30:.2f} GiB" if k in mem else "n/a"
    print(f"{shape} ({b['device']}, context {b['context']}): full cache decode {decode:.0f} tok/s, "
          f"prefill {prefill:.0f} tok/s; device memory peak {gib('peak_allocated')}, reserved {gib('reserved')}")
    for r in rows:
        print(f"  {r['policy']:<12} {r['schedule']:<17} {r['budget']:<9} step {r['policy_step_ms']:.2f} ms "
              f"vs full {r['full_step_ms']:.2f} ms: {r['step_ratio']:.2f}x, in policy {r['policy_ms_per_step']:.3f} ms, "
              f"KV {100 * r.get('kv_bytes_share', 1):.0f}%")
PY
say "done in $((SECONDS - t0)) s"
[ "$ctest_rc" = 0 ] || exit 1
