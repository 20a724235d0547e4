#!/bin/sh
# Installs the Debian packages that building and testing transformerd need,
# when they are missing. Idempotent; runs apt-get only when something lacks.
# Used by `make test`, `make run` and the Dockerfile. With --with-browser
# (`make test`) also what only tests need: the web page's browser test's
# chromium, chromium-driver and python3-selenium, and the XLIFF schemas the
# catalogs test validates against (php-symfony-translation ships OASIS's
# XSDs), and haproxy for the cluster test (tests/cluster.py). The images do
# without them.
set -eu

PKGS="build-essential cmake pkg-config libjansson-dev libopenblas-dev check libsubunit-dev libmicrohttpd-dev libxml2-dev libexttextcat-dev libicu-dev zlib1g-dev libzip-dev libgettextpo-dev gettext libcmark-dev prometheus curl python3-yaml python3-venv"
[ "${1:-}" = "--with-browser" ] && PKGS="$PKGS chromium chromium-driver python3-selenium php-symfony-translation haproxy"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

echo "bootstrap: installing$missing" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "bootstrap: need root (or sudo) to install:$missing" >&2; exit 1; }
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
