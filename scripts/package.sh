#!/usr/bin/env bash
# Builds the Debian package kvlens_<version>_<arch>.deb from an existing build
# directory (default: build/, as scripts/build.sh makes it; KVLENS_BUILD_DIR
# overrides): brings the installed targets up to date, then runs cpack -G DEB
# there. Prints the path of the .deb on stdout; cpack's log goes to
# <build>/cpack.log.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${KVLENS_BUILD_DIR:-build}"
if [[ ! -f "$dir/CMakeCache.txt" ]]; then
  echo "package: $dir is not a configured build directory; build first (scripts/build.sh)" >&2
  exit 1
fi
targets=(kvlens-cli kvlens_man)
if grep -q '^KVLENS_GUI:BOOL=ON' "$dir/CMakeCache.txt"; then
  targets+=(kvlens)
else
  echo "package: $dir is configured with KVLENS_GUI=OFF; the package will hold kvlens-cli only" >&2
fi
# (Re-runs CMake first when a CMakeLists.txt changed, which writes CPackConfig.cmake.)
if ! cmake --build "$dir" -j "${KVLENS_JOBS:-2}" --target "${targets[@]}" >"$dir/package-build.log" 2>&1; then
  tail -30 "$dir/package-build.log" >&2
  echo "package: the build failed" >&2
  exit 1
fi
rm -f "$dir"/kvlens_*.deb
if ! (cd "$dir" && cpack -G DEB) >"$dir/cpack.log" 2>&1; then
  cat "$dir/cpack.log" >&2
  echo "package: cpack failed" >&2
  exit 1
fi
deb=$(ls "$dir"/kvlens_*.deb)
realpath "$deb"
