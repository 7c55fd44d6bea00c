#!/usr/bin/env bash
# Installs the KVLens .deb with apt, checks it from /usr/bin with the source
# tree out of the way, then removes it again. Needs root (CI runs as root).
#   scripts/check-package.sh [path/to/kvlens_*.deb]
# Default: the newest kvlens_*.deb in ${KVLENS_BUILD_DIR:-build}.
# Checks: the files are where Debian wants them; kvlens-cli info finds the
# bundled model in /usr/share/kvlens (not in the source tree); a short
# kvlens-cli generate; the .desktop and AppStream files validate (when
# desktop-file-validate / appstreamcli are installed); kvlens starts under
# Xvfb (or the offscreen platform), runs the bundled example and saves a
# screenshot. KVLENS_KEEP_PACKAGE=1 leaves the package installed.
# Prints one line per check and "package check: PASS" or "package check: FAIL".
set -uo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
deb="${1:-$(ls -t "${KVLENS_BUILD_DIR:-build}"/kvlens_*.deb 2>/dev/null | head -1)}"
if [[ -z "$deb" || ! -f "$deb" ]]; then
  echo "check-package: no .deb (run scripts/package.sh first)"; echo "package check: FAIL"; exit 1
fi
deb=$(realpath "$deb")
sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
work=$(mktemp -d /tmp/kvlens-pkgcheck.XXXXXX)
failed=0
ok()   { echo "  ok    $*"; }
fail() { echo "  FAIL  $*"; failed=1; }

cleanup() {
  if [[ -z "${KVLENS_KEEP_PACKAGE:-}" ]]; then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get purge -y -qq kvlens >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "check-package: $(basename "$deb") ($(du -h "$deb" | cut -f1))"
# apt reads the local file as user _apt; a copy in /tmp keeps it from warning.
cp "$deb" "$work/" && chmod 644 "$work/$(basename "$deb")" && chmod 755 "$work"
if DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
     "$work/$(basename "$deb")" >"$work/apt.log" 2>&1; then
  ok "apt-get install"
else
  tail -20 "$work/apt.log"; fail "apt-get install"; echo "package check: FAIL"; exit 1
fi

for f in /usr/bin/kvlens-cli /usr/share/kvlens/models/kvlens-tiny/config.json \
         /usr/share/kvlens/models/kvlens-tiny/model.safetensors \
         /usr/share/kvlens/models/kvlens-tiny/tokenizer.json /usr/share/kvlens/examples \
         /usr/share/kvlens/lessons/01-attention-sinks.kvlens-lesson.json \
         /usr/share/man/man1/kvlens-cli.1.gz; do
  [[ -e "$f" ]] || fail "missing $f"
done
gui=0
if dpkg -L kvlens | grep -qx /usr/bin/kvlens; then
  gui=1
  for f in /usr/share/applications/kvlens.desktop /usr/share/metainfo/io.github.kvlens.kvlens.metainfo.xml \
           /usr/share/icons/hicolor/scalable/apps/kvlens.svg /usr/share/icons/hicolor/48x48/apps/kvlens.png \
           /usr/share/icons/hicolor/256x256/apps/kvlens.png /usr/share/man/man1/kvlens.1.gz; do
    [[ -e "$f" ]] || fail "missing $f"
  done
fi
[[ $failed -eq 0 ]] && ok "files in place ($(dpkg -L kvlens | wc -l) paths)"

# Run from a directory outside the source tree, without KVLENS_RESOURCES, and
# where a mount namespace is allowed (root) with an empty tmpfs over the source
# tree, so that nothing can come from there.
cd "$work"
unset KVLENS_RESOURCES
# A home of its own: no settings, recent files or autosaves of the user's are
# read or written.
mkdir -m 700 "$work/home" "$work/xdg"
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" XDG_DATA_HOME="$work/home/.local/share" \
       XDG_CACHE_HOME="$work/home/.cache" XDG_RUNTIME_DIR="$work/xdg"
hide=()
where="source tree present"
if unshare -m sh -c 'mount -t tmpfs kvlens-hidden "$0"' "$src" 2>/dev/null; then
  hide=(unshare -m sh -c 'mount -t tmpfs kvlens-hidden "$0" && exec "$@"' "$src")
  where="source tree hidden"
fi
if "${hide[@]}" /usr/bin/kvlens-cli info >"$work/info.txt" 2>&1 &&
   grep -q '^model_dir: /usr/share/kvlens/models/kvlens-tiny$' "$work/info.txt"; then
  ok "kvlens-cli info ($where): $(grep '^model_dir:' "$work/info.txt")"
else
  cat "$work/info.txt"; fail "kvlens-cli info does not use /usr/share/kvlens/models/kvlens-tiny"
fi
if "${hide[@]}" /usr/bin/kvlens-cli generate --steps 8 --threads 2 --prompt 'the code for the red door is' \
     >"$work/generate.txt" 2>&1; then
  ok "kvlens-cli generate: $(tr '\n' ' ' < "$work/generate.txt" | cut -c1-120)"
else
  cat "$work/generate.txt"; fail "kvlens-cli generate"
fi
if [[ $gui -eq 1 ]]; then  # a GUI build's kvlens-cli renders figures offscreen
  if "${hide[@]}" /usr/bin/kvlens-cli export --prompt 'the code for the red door is 4821. the code for the red door is' \
       --policy h2o --budget 8 --out "$work/heatmap.png" >"$work/export.txt" 2>&1 && [[ -s "$work/heatmap.png" ]]; then
    ok "kvlens-cli export: a $(du -h "$work/heatmap.png" | cut -f1) PNG heatmap"
  else
    cat "$work/export.txt"; fail "kvlens-cli export --out heatmap.png"
  fi
fi
pages=(kvlens-cli.1.gz)
dpkg -L kvlens | grep -qx /usr/bin/kvlens && pages+=(kvlens.1.gz)
for page in "${pages[@]}"; do
  man_ok=1
  zcat "/usr/share/man/man1/$page" 2>/dev/null | grep -q '^\.TH KVLENS' || man_ok=0
  if command -v groff >/dev/null; then
    [[ -z "$(zcat "/usr/share/man/man1/$page" 2>/dev/null | groff -man -ww -z 2>&1)" ]] || man_ok=0
  fi
  [[ $man_ok -eq 1 ]] && ok "man page $page" || fail "man page $page"
done

if [[ $gui -eq 1 ]]; then
  if command -v desktop-file-validate >/dev/null; then
    out=$(desktop-file-validate /usr/share/applications/kvlens.desktop 2>&1) && [[ -z "$out" ]] \
      && ok "desktop-file-validate" || { echo "$out"; fail "desktop-file-validate"; }
  fi
  if command -v appstreamcli >/dev/null; then
    appstreamcli validate --no-net /usr/share/metainfo/io.github.kvlens.kvlens.metainfo.xml >"$work/as.txt" 2>&1 \
      && ok "appstreamcli validate" || { cat "$work/as.txt"; fail "appstreamcli validate"; }
  fi
  # kvlens loads the bundled model, runs an example, saves the window, quits.
  shot="$work/kvlens.png"
  if command -v xvfb-run >/dev/null; then
    launch=(xvfb-run -a -s "-screen 0 1600x1000x24")
  else
    launch=(env QT_QPA_PLATFORM=offscreen)
  fi
  start=$(date +%s)
  if timeout 150 "${hide[@]}" "${launch[@]}" /usr/bin/kvlens --screenshot "$shot" \
       >"$work/gui.txt" 2>&1 && [[ -s "$shot" ]] && ! grep -qiE 'error|critical|fatal|abort' "$work/gui.txt"; then
    ok "kvlens started (${launch[0]}, $where), ran the example and saved a $(du -h "$shot" | cut -f1) screenshot in $(( $(date +%s) - start )) s"
    [[ -n "${KVLENS_SCREENSHOT:-}" ]] && cp "$shot" "$KVLENS_SCREENSHOT"
  else
    cat "$work/gui.txt"; fail "kvlens did not start and save its window"
  fi
else
  echo "  skip  kvlens (this package has no GUI)"
fi
cd "$src"

if [[ $failed -eq 0 ]]; then echo "package check: PASS"; else echo "package check: FAIL"; fi
exit $failed
