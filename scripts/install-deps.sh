#!/usr/bin/env bash
# Installs KVLens's build and test dependencies from Debian 12 packages.
# Idempotent: does nothing (and needs no network) when all are present.
# Usage: scripts/install-deps.sh [--app] [--no-gui]
#   --app     only what building and running the programs needs (setup-and-run),
#             not the test tools (GoogleTest, clang, Slurm, Python, ...)
#   --no-gui  no Qt: core + kvlens-cli only
set -euo pipefail

app_only=0 gui=1
for arg in "$@"; do
  case "$arg" in
    --app) app_only=1 ;;
    --no-gui) gui=0 ;;
    *) echo "install-deps: unknown argument '$arg' (expected --app or --no-gui)" >&2; exit 2 ;;
  esac
done

packages=(cmake ninja-build g++ pkg-config libtorch-dev nlohmann-json3-dev libpcre2-dev
          libcli11-dev libutf8proc-dev libopenblas0-pthread)
if [[ $app_only -eq 0 ]]; then
  packages+=(libgtest-dev
             python3-venv  # the tests' Python reference tools (scripts/python-env.sh)
             universal-ctags  # tests/guards/house_rules.py measures functions with it
             python3-torch  # compiles the example TorchScript scorers (resources/plugins) in the tests
             clang libclang-rt-14-dev llvm  # ASan/UBSan + libFuzzer build (build-asan), symbolized reports
             slurmctld slurmd slurm-client munge)  # the Slurm sweep back end's test cluster (tests/sweep/slurm_test.sh)
fi
if [[ $gui -eq 1 ]]; then
  packages+=(qt6-base-dev qt6-svg-dev libqcustomplot-dev)
  [[ $app_only -eq 0 ]] && packages+=(xvfb xauth desktop-file-utils appstream)  # the last two: scripts/check-package.sh
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
echo "Installing: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
