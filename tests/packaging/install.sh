#!/usr/bin/env bash
# make install / make uninstall into a staging root, checked file by file:
# the exact set of files and links, the soname, that the shared library
# exports the public API and nothing else (every function coordl.h declares,
# and every function the 0.3.0 header declared: binaries built against it
# call those), the pkg-config values, the CMake version check, and that
# uninstall leaves nothing behind. Then `cmake --install` of a standalone
# CMake build must install the same files with the same contents.
#   tests/packaging/install.sh          (WORK: scratch root, default build/packaging)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
WORK=${WORK:-$repo/build/packaging}
root=$WORK/install-check
prefix=/opt/coordl-test # not the default: the files must follow PREFIX
rm -rf "$root"
mkdir -p "$root"
version=$(sed -n 's/^#define COORDL_VERSION "\(.*\)"/\1/p' coordl.h)
fail=0
bad() { echo "install check: $*"; fail=1; }

make -s install DESTDIR="$root" PREFIX="$prefix" >/dev/null

# 1. exactly these files and links
expected=$(printf '%s\n' \
    "bin/coordl-analyze f" \
    "bin/coordl-index f" \
    "include/coordl.h f" \
    "lib/cmake/coordl/coordlConfig.cmake f" \
    "lib/cmake/coordl/coordlConfigVersion.cmake f" \
    "lib/libcoordl.a f" \
    "lib/libcoordl.so l libcoordl.so.0" \
    "lib/libcoordl.so.0 l libcoordl.so.$version" \
    "lib/libcoordl.so.$version f" \
    "lib/pkgconfig/coordl.pc f" | sort)
actual=$(cd "$root$prefix" && find . \( -type f -o -type l \) -printf '%P %y %l\n' | sed 's/ $//' | sort)
if [ "$expected" != "$actual" ]; then
    bad "installed files differ from the expected set"; diff <(echo "$expected") <(echo "$actual") || true
fi
[ "$(stat -c %a "$root$prefix/include/coordl.h")" = 644 ] || bad "coordl.h is not mode 644"
cmp -s coordl.h "$root$prefix/include/coordl.h" || bad "the installed coordl.h is not the checkout's"

# 2. the shared library: soname, and exports = the public API
so=$root$prefix/lib/libcoordl.so.$version
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libcoordl.so.0 ] || bad "soname is '$soname', not libcoordl.so.0"
exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ { print $3 }' | sort -u)
others=$(echo "$exported" | grep -v '^coordl_' || true)
[ -z "$others" ] && echo "install check: libcoordl.so exports only coordl_* ($(echo "$exported" | wc -l) symbols)" ||
    bad "libcoordl.so exports internals: $(echo $others)"
declared() { # the functions a header declares with COORDL_API
    tr '\n' ' ' <"$1" | grep -o 'COORDL_API [a-z0-9_ *]*[ *]coordl_[a-z0-9_]*(' |
        sed 's/.*[ *]\(coordl_[a-z0-9_]*\)($/\1/' | sort -u
}
for h in coordl.h tests/abi/coordl-0.3.0.h; do
    missing=$(comm -23 <(declared "$h") <(echo "$exported"))
    n=$(declared "$h" | wc -l)
    [ "$n" -gt 20 ] || bad "found only $n declarations in $h: the parser is broken"
    [ -z "$missing" ] && echo "install check: all $n functions $h declares are exported" ||
        bad "$h declares functions libcoordl.so does not export: $(echo $missing)"
done

# 3. pkg-config, as a trainer sees it from the staging root
export PKG_CONFIG_PATH=$root$prefix/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root
[ "$(pkg-config --modversion coordl)" = "$version" ] || bad "pkg-config --modversion is not $version"
libs=$(pkg-config --static --libs coordl | xargs)
want="-L$root$prefix/lib -lcoordl -ljpeg -lhwloc -lcurl -luring -lpthread -lm"
[ "$libs" = "$want" ] || bad "pkg-config --static --libs: '$libs', expected '$want'"
[ "$(pkg-config --cflags coordl | xargs)" = "-I$root$prefix/include" ] || bad "pkg-config --cflags is wrong"
grep -qx "prefix=$prefix" "$root$prefix/lib/pkgconfig/coordl.pc" || bad "coordl.pc does not say prefix=$prefix"

# 4. CMake: the version file refuses what this coordl cannot promise
mkdir -p "$WORK/version-check"
for req in "0.3 1" "$version 1" "0.99 0" "1.0 0"; do
    set -- $req
    printf 'cmake_minimum_required(VERSION 3.13)\nproject(v C)\nfind_package(coordl %s CONFIG)\nmessage(STATUS "coordl_FOUND=${coordl_FOUND}")\n' "$1" \
        >"$WORK/version-check/CMakeLists.txt"
    found=$(cmake -S "$WORK/version-check" -B "$WORK/version-check/b" -DCMAKE_PREFIX_PATH="$root$prefix" 2>/dev/null |
        sed -n 's/^-- coordl_FOUND=//p')
    rm -rf "$WORK/version-check/b"
    [ "${found:-0}" = "$2" ] || bad "find_package(coordl $1) found='$found', expected $2"
done

# 5. the tool runs
"$root$prefix/bin/coordl-analyze" --help >/dev/null || bad "coordl-analyze --help failed"
"$root$prefix/bin/coordl-index" --help >/dev/null || bad "coordl-index --help failed"

# 6. uninstall leaves no file or link
make -s uninstall DESTDIR="$root" PREFIX="$prefix" >/dev/null
left=$(find "$root" \( -type f -o -type l \) -printf '%P\n')
[ -z "$left" ] || bad "make uninstall left: $(echo $left)"
[ ! -d "$root$prefix/lib/cmake/coordl" ] || bad "make uninstall left lib/cmake/coordl"

# 7. CMake's install rules: the same files, the same generated contents
croot=$WORK/install-check-cmake
rm -rf "$croot" "$WORK/cmake-install-build"
cmake -S . -B "$WORK/cmake-install-build" -DCOORDL_BUILD_TESTS=OFF -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
cmake --build "$WORK/cmake-install-build" -j2 >/dev/null
DESTDIR=$croot cmake --install "$WORK/cmake-install-build" >/dev/null
cactual=$(cd "$croot$prefix" && find . \( -type f -o -type l \) -printf '%P %y %l\n' | sed 's/ $//' | sort)
if [ "$expected" != "$cactual" ]; then
    bad "cmake --install installs other files than make install"; diff <(echo "$expected") <(echo "$cactual") || true
fi
make -s install DESTDIR="$root" PREFIX="$prefix" >/dev/null
for f in include/coordl.h lib/pkgconfig/coordl.pc lib/cmake/coordl/coordlConfig.cmake lib/cmake/coordl/coordlConfigVersion.cmake; do
    cmp -s "$root$prefix/$f" "$croot$prefix/$f" || { bad "$f differs between make install and cmake --install";
        diff "$root$prefix/$f" "$croot$prefix/$f" || true; }
done
csoname=$(readelf -d "$croot$prefix/lib/libcoordl.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$csoname" = libcoordl.so.0 ] || bad "the CMake-built soname is '$csoname'"
cexported=$(nm -D --defined-only "$croot$prefix/lib/libcoordl.so.$version" | awk '$2 ~ /^[TDBRVW]$/ { print $3 }' | sort -u)
[ "$cexported" = "$exported" ] || bad "the CMake-built libcoordl.so exports other symbols than the Makefile's"
make -s uninstall DESTDIR="$root" PREFIX="$prefix" >/dev/null

[ $fail -eq 0 ] || { echo "install check: FAILED"; exit 1; }
echo "install check: passed (make install/uninstall and cmake --install, PREFIX=$prefix, DESTDIR staging root)"
