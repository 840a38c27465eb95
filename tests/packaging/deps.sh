#!/usr/bin/env bash
# The dependency step of each Makefile target installs what it needs and no
# more: `make demo` asks for the demo's packages only (no clang, cmake, MPI
# or cmocka), while `make deps` (make test, CI's .ci/run) still asks for
# every tool the suite uses. Reads the lists; installs nothing.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
fail=0
demo=" $(bash tools/install-deps.sh --print demo) "
all=" $(bash tools/install-deps.sh --print all) "
for p in build-essential libjpeg62-turbo-dev libstb-dev libhwloc-dev; do
    case $demo in *" $p "*) ;; *) echo "deps: make demo's list lacks $p: $demo"; fail=1 ;; esac
done
for p in clang cmake openmpi-bin libopenmpi-dev libcmocka-dev libclang-rt-14-dev; do
    case $demo in *" $p "*) echo "deps: make demo's list installs $p, which the demo does not need"; fail=1 ;; esac
    case $all in *" $p "*) ;; *) echo "deps: the full list (make test, CI) lacks $p"; fail=1 ;; esac
done
# make demo runs the demo's step, not the full one
plan=$(make -n demo BUILD=build-deps-check 2>/dev/null | grep install-deps.sh || true)
case $plan in *"install-deps.sh demo"*) ;; *) echo "deps: make demo runs '$plan', not 'install-deps.sh demo'"; fail=1 ;; esac
grep -q '^bash tools/install-deps.sh$' .ci/run || { echo "deps: .ci/run does not install the full list"; fail=1; }
[ $fail = 0 ] && echo "deps: make demo installs only what it needs; make deps and CI everything"
exit $fail
