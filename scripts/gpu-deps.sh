#!/usr/bin/env bash
# Prepares .gpu-deps/ (ignored by git) on this Debian 12 machine: the build
# dependencies of core + kvlens-cli + the tests that a GPU image made for
# Python may lack (nlohmann_json, CLI11, PCRE2, utf8proc, GoogleTest), as
# headers, static libraries and CMake configs, so that scripts/gpu-check.sh
# needs nothing the GPU machine does not have. Carry it with the working
# tree (the device tool's `carry: [".gpu-deps"]`); about 5 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
arch=x86_64-linux-gnu
out=.gpu-deps
rm -rf "$out.tmp"
mkdir -p "$out.tmp/include" "$out.tmp/lib/$arch/cmake" "$out.tmp/share/cmake"
cp -r /usr/include/nlohmann /usr/include/CLI /usr/include/gtest /usr/include/gmock "$out.tmp/include/"
cp /usr/include/pcre2.h /usr/include/utf8proc.h "$out.tmp/include/"
cp -r /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11 "$out.tmp/share/cmake/"
cp -r /usr/lib/$arch/cmake/GTest "$out.tmp/lib/$arch/cmake/"
cp /usr/lib/$arch/libgtest.a /usr/lib/$arch/libgtest_main.a /usr/lib/$arch/libgmock.a /usr/lib/$arch/libgmock_main.a \
   /usr/lib/$arch/libpcre2-8.a /usr/lib/$arch/libutf8proc.a "$out.tmp/lib/$arch/"
rm -rf "$out"
mv "$out.tmp" "$out"
du -sh "$out"
