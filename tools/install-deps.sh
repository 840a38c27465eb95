#!/usr/bin/env bash
# Installs the Debian packages coordl builds and tests with, if missing.
# Run as root (CI and `make deps` do); as another user it prints the command.
set -euo pipefail
PKGS="build-essential python3 clang libclang-rt-14-dev cmake pkg-config libjpeg62-turbo-dev libstb-dev libhwloc-dev libcmocka-dev libxml2-utils openmpi-bin libopenmpi-dev ${EXTRA_PKGS:-}"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "coordl needs:$missing" >&2
  echo "run: sudo apt-get install -y$missing" >&2
  exit 1
fi
echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq $missing
