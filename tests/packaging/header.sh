#!/usr/bin/env bash
# coordl.h compiles, warning-free (-Werror), as C99, C11 and C++ (11, 17)
# under gcc and clang, and a program built from each links with libcoordl.a
# and runs (tests/packaging/header_use.c). Env: BUILD (default build), LIBS.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
LIBS=${LIBS:--ljpeg -lhwloc -lcurl -luring -lpthread -lm}
out=$BUILD/packaging/header
mkdir -p "$out"
warn="-Wall -Wextra -Wpedantic -Wshadow -Werror"
fail=0
for combo in "gcc c c99" "gcc c c11" "clang c c99" "clang c c11" \
             "g++ c++ c++11" "g++ c++ c++17" "clang++ c++ c++11" "clang++ c++ c++17"; do
    set -- $combo
    exe=$out/$1-$3
    echo "== header: $combo"
    # shellcheck disable=SC2086
    if $1 -x "$2" -std="$3" $warn -I. -c tests/packaging/header_use.c -o "$exe.o" &&
       $1 "$exe.o" "$BUILD/libcoordl.a" $LIBS -o "$exe" && "$exe"; then :; else
        echo "header: FAILED: $combo"; fail=1
    fi
done
[ $fail -eq 0 ] || exit 1
echo "header: coordl.h is C99, C11 and C++11/17 clean under gcc and clang"
