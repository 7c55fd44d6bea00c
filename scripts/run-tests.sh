#!/usr/bin/env bash
# The test command: on a fresh Debian 12 machine it installs the dependencies,
# fetches the reference tokenizers, builds, and runs every test this machine
# can run (CTest; GPU tests skip themselves without a GPU). As root (CI) it
# also builds the .deb, installs it, smoke-checks it from /usr/bin and removes
# it (scripts/package.sh, scripts/check-package.sh; KVLENS_SKIP_PACKAGE=1
# skips that); its result comes first, CTest's summary stays last.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/fetch-tokenizers.sh >/dev/null
scripts/build.sh
package_rc=0
if [[ $(id -u) -eq 0 && -z "${KVLENS_SKIP_PACKAGE:-}" ]]; then
  if deb=$(scripts/package.sh); then
    scripts/check-package.sh "$deb" || package_rc=1
  else
    echo "package check: FAIL (scripts/package.sh did not build the .deb)"; package_rc=1
  fi
fi
cd build
ctest_rc=0
QT_QPA_PLATFORM=offscreen ctest --output-on-failure -j 2 "$@" || ctest_rc=$?
[[ $ctest_rc -ne 0 ]] && exit $ctest_rc
exit $package_rc
