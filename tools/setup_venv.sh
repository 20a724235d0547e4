#!/bin/sh
# Creates tools/.venv (if missing) and installs tools/requirements.txt into it. Idempotent.
# Usage: tools/setup_venv.sh && tools/.venv/bin/python tools/make_fixtures.py
#        tools/setup_venv.sh --mutate: tools/.venv-mutate with tools/requirements-mutate.txt
#        (the mutant generator of tools/mutate.sh --generated; small, no torch)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
venv="$here/.venv"
req="$here/requirements.txt"
case ${1:-} in
    --mutate) venv="$here/.venv-mutate"; req="$here/requirements-mutate.txt" ;;
    '') ;;
    *) echo "usage: $0 [--mutate]" >&2; exit 2 ;;
esac
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
# Skip pip when every pinned requirement is already installed at its exact version.
if "$venv/bin/python" - "$req" <<'PY'
import sys
from importlib.metadata import version, PackageNotFoundError
ok = True
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    name, want = line.split("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        have = None
    if have is None or have.split("+")[0] != want.split("+")[0]:
        ok = False
sys.exit(0 if ok else 1)
PY
then
    exit 0
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -r "$req"
