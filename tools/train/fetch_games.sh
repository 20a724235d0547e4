#!/bin/sh
# Stage 1e: fetch the game packages of a package list (tools/train/games-packages.txt unless LIST is given) into
# WORKDIR/DEBDIR (games-debs unless given); resumable: downloaded .debs are kept; never installed.
# tools/train/dialogue.py reads their German catalogues.
# Usage: tools/train/fetch_games.sh [WORKDIR=.train] [LIST=tools/train/games-packages.txt] [DEBDIR=games-debs]
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=${1:-$ROOT/.train}
LIST=${2:-$ROOT/tools/train/games-packages.txt}
LIST=$(cd "$(dirname "$LIST")" && pwd)/$(basename "$LIST")
D=${3:-games-debs}
mkdir -p "$W/$D"
cd "$W/$D"
for p in $(grep -v '^#' "$LIST"); do
  if ls "${p}"_*.deb >/dev/null 2>&1; then continue; fi
  apt-get download "$p" >/dev/null 2>&1 || echo "fetch_games: $p not downloaded" >&2
done
echo "fetch_games: $(ls *.deb | wc -l) packages in $W/$D"
