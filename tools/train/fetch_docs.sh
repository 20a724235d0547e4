#!/bin/sh
# Stage 0c: fetch the documentation packages of tools/train/docs-packages.txt (resumable; downloaded .debs are
# kept) and unpack each into WORK/docs-root/PACKAGE with dpkg-deb -x (never installed).
# Usage: tools/train/fetch_docs.sh [WORKDIR=.train]
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=${1:-$ROOT/.train}
mkdir -p "$W/docs-debs" "$W/docs-root"
cd "$W/docs-debs"
for p in $(grep -v '^#' "$ROOT/tools/train/docs-packages.txt"); do
  if ! ls "${p}"_*.deb >/dev/null 2>&1; then
    apt-get download "$p" >/dev/null 2>&1 || { echo "fetch_docs: $p not downloaded" >&2; continue; }
  fi
  if [ ! -d "$W/docs-root/$p" ]; then
    deb=$(ls "${p}"_*.deb | tail -n 1)
    dpkg-deb -x "$deb" "$W/docs-root/$p.tmp" && mv "$W/docs-root/$p.tmp" "$W/docs-root/$p"
  fi
done
echo "fetch_docs: $(ls *.deb | wc -l) packages in $W/docs-debs, unpacked in $W/docs-root"
