#!/usr/bin/env bash
# Installs the Debian packages coordl needs, if missing (and, for `all`,
# s3rver from the npm registry into build/npm: test_s3 and the benchmark
# start it).
#   tools/install-deps.sh [all]    what building and testing need (CI, make test)
#   tools/install-deps.sh demo     only what `make demo` needs: a C compiler
#                                  and make, libjpeg, stb, hwloc (no clang,
#                                  cmake, MPI or cmocka)
#   tools/install-deps.sh --print [all|demo]   the package list, nothing installed
# Run as root (CI and `make deps`/`make demo` do); as another user it prints
# the command to run. EXTRA_PKGS adds packages to either list.
set -euo pipefail
print=0
if [ "${1:-}" = --print ]; then print=1; shift; fi
profile=${1:-all}
DEMO_PKGS="build-essential libjpeg62-turbo-dev libstb-dev libhwloc-dev libcurl4-openssl-dev liburing-dev"
case $profile in
demo) PKGS="$DEMO_PKGS" ;;
all)  PKGS="$DEMO_PKGS python3 clang libclang-rt-14-dev cmake pkg-config libcmocka-dev libxml2-utils openmpi-bin libopenmpi-dev libcurl4-openssl-dev liburing-dev nginx nodejs python3-botocore"
      # Debian's nodejs comes without npm (another nodejs may bring its own)
      command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm" ;;
*) echo "install-deps.sh: unknown profile '$profile' (all or demo)" >&2; exit 2 ;;
esac
PKGS="$PKGS ${EXTRA_PKGS:-}"
if [ $print = 1 ]; then echo $PKGS; exit 0; fi
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# s3rver (the npm registry's S3-compatible server test_s3 and bench/run.sh
# remote start) into build/npm of this checkout: never at library build time
S3RVER_VERSION=3.7.1
install_s3rver() {
  [ "$profile" = all ] || return 0
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/build/npm"
  if [ -f "$dir/node_modules/s3rver/package.json" ] &&
     grep -q "\"version\": \"$S3RVER_VERSION\"" "$dir/node_modules/s3rver/package.json"; then
    return 0
  fi
  echo "installing s3rver@$S3RVER_VERSION into $dir (npm)"
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "s3rver@$S3RVER_VERSION"
}
if [ -z "$missing" ]; then install_s3rver; exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "coordl needs:$missing" >&2
  echo "run: sudo apt-get install -y$missing" >&2
  exit 1
fi
echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq $missing
install_s3rver
