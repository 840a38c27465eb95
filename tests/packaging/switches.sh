#!/usr/bin/env bash
# The vendoring switches, each alone and all together (make test-switches,
# CI): the library, the examples and the tests built with the switch and
# -Werror, then the tests that do not need the part it removes run
# (tests/test_switches.c checks the removed part answers
# COORDL_ERR_UNSUPPORTED naming its switch). COORDL_NO_HWLOC alone is make
# test's second pass, so it is not repeated here. Also:
#   - the headers coordl.c includes with the minimal set (no hwloc, no stb,
#     no MPI, no curl, no liburing): only the C library's and libjpeg's (`cc -c coordl.c` needs
#     nothing else);
#   - COORDL_STB_UPSTREAM: stb_image.h found as "stb_image.h" in an
#     upstream-layout folder (made here from Debian's copy), not at
#     <stb/stb_image.h>; the decoder tests run with it;
#   - gcc and clang: tokens and stb are built with clang, the others with
#     $CC, and the all-together set with both.
# Env: CC (default cc), SETS (names to run; default all of them),
# SWITCH_SMOKE and SWITCH_FULL (what a switch alone runs: below).
set -euo pipefail
cd "$(dirname "$0")/../.."
CC=${CC:-cc}
ALL="-DCOORDL_NO_HWLOC -DCOORDL_NO_AUDIO -DCOORDL_NO_TOKENS -DCOORDL_NO_ANALYZER -DCOORDL_NO_STB -DCOORDL_NO_REMOTE -DCOORDL_NO_URING"
declare -A FLAGS=(
    [audio]="-DCOORDL_NO_AUDIO"
    [tokens]="-DCOORDL_NO_TOKENS"
    [analyzer]="-DCOORDL_NO_ANALYZER"
    [stb]="-DCOORDL_NO_STB"
    [remote]="-DCOORDL_NO_REMOTE"
    [uring]="-DCOORDL_NO_URING"
    [all]="$ALL"
    [all-clang]="$ALL"
    [stb-upstream]="-DCOORDL_STB_UPSTREAM"
)
# What uses each part, in a test or example source (switch-uses.txt, which
# CMakeLists.txt reads too). A source that names the switch itself
# (#ifdef COORDL_NO_...) handles it and always runs.
declare -A USES=()
while read -r sw re; do
    case $sw in '#'* | '') continue ;; esac
    USES[$sw]=$re
done <tests/packaging/switch-uses.txt
SETS=${SETS-audio tokens analyzer stb remote uring all all-clang stb-upstream}
# what a switch alone runs besides the tests that name it (SWITCH_FULL=1:
# every runnable test, as the all-together sets do)
SWITCH_SMOKE=${SWITCH_SMOKE-test_switches test_api test_config test_bad_input test_prep test_determinism test_golden_batches test_tokens test_tar test_io}
fail=0

# the subset of sources (tests/test_*.c or examples/*.c) a set can run
runnable() { # flags, then sources
    local flags=$1; shift
    local src sw keep
    for src in "$@"; do
        keep=1
        for sw in $flags; do
            sw=${sw#-D}
            [ -n "${USES[$sw]:-}" ] || continue
            if grep -Eq "${USES[$sw]}" "$src" && ! grep -q "$sw" "$src"; then
                echo "switches: $(basename "$src" .c) not run: it uses what $sw removes" >&2
                keep=0
                break
            fi
        done
        [ $keep -eq 1 ] && echo "$src"
    done
    return 0
}

# 1. `cc -c coordl.c` with the minimal set, where the only headers are the
# C library's, the kernel's, the compiler's and libjpeg's: a mirror of
# /usr/include without hwloc, stb, MPI or cmocka, and -nostdinc.
sysinc=$PWD/build-sw-sysinc
rm -rf "$sysinc"
mkdir -p "$sysinc/usr-include"
mirror() { # the entries of folder $1 into $2, leaving out what the switches remove
    local e
    for e in "$1"/*; do
        case ${e##*/} in
        hwloc* | stb | mpi* | openmpi* | mpich* | cmocka* | curl | liburing*) ;;
        *) ln -s "$e" "$2/${e##*/}" ;;
        esac
    done
}
mirror /usr/include "$sysinc/usr-include"
multiarch=$($CC -print-multiarch 2>/dev/null || true)
if [ -n "$multiarch" ] && [ -d "/usr/include/$multiarch" ]; then
    rm "$sysinc/usr-include/$multiarch"
    mkdir "$sysinc/usr-include/$multiarch"
    mirror "/usr/include/$multiarch" "$sysinc/usr-include/$multiarch"
fi
ccinc=$($CC -print-file-name=include)
# shellcheck disable=SC2086
if $CC -std=c11 -Wall -Wextra -Wpedantic -Werror -nostdinc -isystem "$ccinc" \
        ${multiarch:+-isystem "$sysinc/usr-include/$multiarch"} -isystem "$sysinc/usr-include" \
        $ALL -c coordl.c -o "$sysinc/coordl.o" 2>"$sysinc/cc.log"; then
    echo "switches: cc -c coordl.c with $ALL builds with no hwloc, stb, MPI or cmocka header present"
else
    echo "switches: cc -c coordl.c with $ALL needs more than libjpeg's headers:"; head -5 "$sysinc/cc.log"; fail=1
fi

for set in $SETS; do
    flags=${FLAGS[$set]}
    build=build-sw-$set
    cc=$CC
    extra=""
    hwloc=-lhwloc
    case $flags in *COORDL_NO_HWLOC*) hwloc= ;; esac
    case $set in
    # both compilers: each set is built by one of them, all together by both
    tokens | stb | all-clang) cc=clang ;;
    stb-upstream)
        # an upstream checkout's layout: stb_image.h at the top of a folder
        mkdir -p "$build/stb-upstream"
        cp /usr/include/stb/stb_image.h "$build/stb-upstream/stb_image.h"
        extra="-I$PWD/$build/stb-upstream"
        if ! $CC -M -std=c11 $flags $extra coordl.c | grep -q "$build/stb-upstream/stb_image.h" ||
             $CC -M -std=c11 $flags $extra coordl.c | grep -q "stb/stb_image.h"; then
            echo "switches: COORDL_STB_UPSTREAM did not take stb_image.h from the upstream folder"; fail=1
        fi ;;
    esac
    tests=$(runnable "$flags" $(ls tests/test_*.c | grep -v test_util.c) | sed "s|^tests/\(.*\)\.c$|$build/tests/\1|")
    # the fuzz harnesses' seed and regression replays, by the same rule
    # (fuzz_wav's oracle refuses COORDL_ERR_UNSUPPORTED, as it should)
    fuzz=$(runnable "$flags" tests/fuzz/fuzz_*.c | sed 's|^tests/fuzz/\(.*\)\.c$|\1|')
    checks=$(runnable "$flags" examples/llm_tokens.c examples/ggml_loop.c examples/darknet_train.c |
        sed 's|^examples/\(.*\)\.c$|\1|')
    case $set in
    all | all-clang | stb-upstream) ;;
    *) # a switch alone: every test, example and fuzz target is built with it
       # (-Werror), and a smoke subset runs: the tests that handle the
       # switch themselves (#ifdef) and the core ones (SWITCH_SMOKE). The
       # whole runnable suite runs in the all-together sets: each single
       # set running it too cost CI about 11 minutes of its 45.
       if [ "${SWITCH_FULL:-0}" != 1 ]; then
           sw=${flags#-D}
           tests=$(for t in $tests; do src=tests/${t##*/}.c
               if grep -q "$sw" "$src" || [[ " $SWITCH_SMOKE " == *" ${t##*/} "* ]]; then echo "$t"; fi; done)
       fi ;;
    esac
    if [ "$set" = stb-upstream ]; then # the decoders, and the switches' own check
        tests=$(printf '%s\n' $tests | grep -E 'test_(decode|switches|bad_input)$' || true)
        checks=""
        fuzz=fuzz_image
    fi
    echo "=== switches: $set ($flags, $cc): $(echo $tests | wc -w) test programs, example checks: $(echo ${checks:-none}), fuzz replays: $(echo ${fuzz:-none})"
    start=$(date +%s)
    mkdir -p "$build"
    if ! make -s -j2 BUILD="$build" CC="$cc" EXTRA_CFLAGS="$flags $extra -Werror" HWLOC_LIB="$hwloc" \
            TESTS="$(echo $tests)" EXAMPLE_CHECKS="$(echo $checks)" FUZZ_TARGETS="$(echo $fuzz)" run-tests >"$build/switches.log" 2>&1; then
        echo "switches: $set FAILED (log: $build/switches.log):"; grep -E "FAIL|error|warning|ERROR" "$build/switches.log" | head -20
        fail=1
    else
        grep -E '^built with' "$build/switches.log" | sort -u || true
        echo "switches: $set passed in $(( $(date +%s) - start )) s"
    fi
done
[ $fail -eq 0 ] || { echo "switches: FAILED"; exit 1; }
echo "switches: all sets passed"
