#!/usr/bin/env bash
# The test command: on a fresh Debian 12 machine it installs the dependencies,
# makes the tests' Python reference environment (scripts/python-env.sh),
# fetches SmolLM2-135M-Instruct (scripts/fetch-smollm2.sh), builds, and runs every test this machine
# can run (CTest; GPU tests skip themselves without a GPU). As root (CI) it
# also builds the .deb, installs it, smoke-checks it from /usr/bin and removes
# it (scripts/package.sh, scripts/check-package.sh; KVLENS_SKIP_PACKAGE=1
# skips that); its result comes first, CTest's summary stays last.
# It also builds build-asan (scripts/build-sanitize.sh: ASan + UBSan unit
# tests, CI-sized libFuzzer runs) and runs those tests in the same CTest
# invocation as build/'s (KVLENS_SKIP_SANITIZE=1 skips them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/python-env.sh >/dev/null
scripts/fetch-smollm2.sh >/dev/null
scripts/build.sh
ctest_dir=build
if [[ -z "${KVLENS_SKIP_SANITIZE:-}" ]]; then
  scripts/build-sanitize.sh
  # One CTest run over both trees, so that one summary counts every test.
  ctest_dir=build-ci
  mkdir -p "$ctest_dir"
  printf 'subdirs("%s")\nsubdirs("%s")\n' "$PWD/build" "$PWD/build-asan" > "$ctest_dir/CTestTestfile.cmake"
fi
package_rc=0
if [[ $(id -u) -eq 0 && -z "${KVLENS_SKIP_PACKAGE:-}" ]]; then
  if deb=$(scripts/package.sh); then
    scripts/check-package.sh "$deb" || package_rc=1
  else
    echo "package check: FAIL (scripts/package.sh did not build the .deb)"; package_rc=1
  fi
fi
cd "$ctest_dir"
ctest_rc=0
QT_QPA_PLATFORM=offscreen ctest --output-on-failure -j 2 "$@" || ctest_rc=$?
[[ $ctest_rc -ne 0 ]] && exit $ctest_rc
exit $package_rc
