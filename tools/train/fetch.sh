#!/bin/sh
# Stage 0: fetch the raw data (resumable; already-downloaded .debs are kept).
#   - DDTP package-description indexes Translation-en / Translation-de (apt-get update with the languages set)
#   - German .mo catalogues of PACKAGES (apt-get download; the packages are never installed)
# Usage: tools/train/fetch.sh [WORKDIR=.train]
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=${1:-$ROOT/.train}
mkdir -p "$W/debs"
apt-get -c "$ROOT/tools/train/apt-languages.conf" update >/dev/null
cd "$W/debs"
for p in $(grep -v '^#' "$ROOT/tools/train/packages.txt"); do
  if ls "${p}"_*.deb >/dev/null 2>&1; then continue; fi
  apt-get download "$p" >/dev/null 2>&1 || echo "fetch: $p not downloaded" >&2
done
echo "fetch: $(ls *.deb | wc -l) packages in $W/debs"
