#!/usr/bin/env bash
# Renders the hicolor PNG sizes of the KVLens icon from kvlens.svg (needs
# rsvg-convert from librsvg2-bin). The PNGs are committed; rerun this after
# editing the SVG.
set -euo pipefail
cd "$(dirname "$0")"
for s in 16 22 24 32 48 64 128 256; do
  rsvg-convert -w "$s" -h "$s" kvlens.svg -o "kvlens-${s}.png"
done
