#!/bin/sh
# Stage 1e: fetch the game packages of tools/train/games-packages.txt (resumable; downloaded .debs are kept;
# never installed). tools/train/dialogue.py reads their German catalogues.
# Usage: tools/train/fetch_games.sh [WORKDIR=.train]
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=${1:-$ROOT/.train}
mkdir -p "$W/games-debs"
cd "$W/games-debs"
for p in $(grep -v '^#' "$ROOT/tools/train/games-packages.txt"); do
  if ls "${p}"_*.deb >/dev/null 2>&1; then continue; fi
  apt-get download "$p" >/dev/null 2>&1 || echo "fetch_games: $p not downloaded" >&2
done
echo "fetch_games: $(ls *.deb | wc -l) packages in $W/games-debs"
