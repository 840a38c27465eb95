#!/usr/bin/env bash
# Runs README.md's build recipes exactly as printed.
#
# README marks each recipe with an HTML comment (invisible when rendered)
# right before a fenced block:
#   <!-- recipe: NAME -->                 the block's lines are commands
#   <!-- recipe: NAME file=PATH -->       the block is written to PATH
#   <!-- recipe: NAME exe=PATH -->        commands; PATH is what they build
# A recipe is all the blocks of its NAME, in README order: files first
# written, then the commands run with `bash -ex` in a scratch folder laid
# out for its kind (by name):
#   vendored*      coordl.h, coordl.c and app.c (tests/packaging/app.c);
#                  *stb-upstream* also third_party/stb/stb_image.h
#   install        the checkout itself; DESTDIR is the staging root
#   pkgconfig-*, find-package*
#                  app.c; pkg-config and CMake pointed at the staging root
#   subdir*        app.c and coordl/ (a copy of the checkout's files)
#   standalone*    a copy of the checkout's files (its commands test it)
#   readme-loop*   coordl.h, coordl.c and loop_main.c (tests/packaging/):
#                  the recipe writes README's trainer loop to train.c; it
#                  is compiled with them and run over a copy of the
#                  dataset with one file truncated (the loop must go on)
# then the program it built runs one epoch over a small dataset.
#
#   tests/packaging/recipes.sh list              names of README's recipes
#   tests/packaging/recipes.sh show NAME         the script a recipe runs
#   tests/packaging/recipes.sh run NAME... | all
# Env: WORK (scratch root; default build/packaging), ROOT (the staging
# root of `install`; default $WORK/root), CC (exported to the recipes:
# CMake picks it up; `cc` in a recipe is whatever cc is).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
readme=$repo/README.md
WORK=${WORK:-$repo/build/packaging}
# test_s3 (ctest in the standalone recipe's copy) finds the checkout's s3rver
export COORDL_S3RVER=${COORDL_S3RVER:-$repo/build/npm/node_modules/s3rver/bin/s3rver.js}
ROOT=${ROOT:-$WORK/root}
PREFIX_IN_README=/usr/local

# name<TAB>kind(file|cmd)<TAB>arg<TAB>first line number, then the block's
# lines prefixed with "|"
parse() {
    awk '
        match($0, /^<!-- recipe: [A-Za-z0-9_.-]+( (file|exe)=[^ ]+)? -->$/) {
            n = split($0, w, " "); name = w[3]; kind = "cmd"; arg = ""
            if (n == 5) { split(w[4], kv, "="); kind = (kv[1] == "file") ? "file" : "cmd"; arg = kv[2] }
            pending = 1; next
        }
        pending && /^```/ { inblock = 1; pending = 0; printf "@%s\t%s\t%s\t%d\n", name, kind, arg, NR + 1; next }
        pending && !/^[[:space:]]*$/ { printf "README.md:%d: recipe %s: a fenced block must follow its marker\n", NR, name > "/dev/stderr"; exit 1 }
        inblock && /^```/ { inblock = 0; next }
        inblock { print "|" $0 }
    ' "$readme"
}

names() { parse | sed -n 's/^@\([^\t]*\)\t.*/\1/p' | awk '!seen[$0]++'; }

# The script of a recipe: its files as here-documents, then its commands.
script() {
    local want=$1
    parse | awk -v want="$want" -F '\t' '
        /^@/ { name = substr($1, 2); kind = $2; arg = $3; nb++; blk[nb] = ""; bname[nb] = name; bkind[nb] = kind; barg[nb] = arg; next }
        { blk[nb] = blk[nb] substr($0, 2) "\n" }
        END {
            for (i = 1; i <= nb; i++) if (bname[i] == want && bkind[i] == "file") {
                printf "cat > %s <<'"'"'COORDL_RECIPE_EOF'"'"'\n%sCOORDL_RECIPE_EOF\n", barg[i], blk[i]; found = 1 }
            for (i = 1; i <= nb; i++) if (bname[i] == want && bkind[i] == "cmd") { printf "%s", blk[i]; found = 1 }
            if (!found) exit 1
        }'
}

exe_of() {
    parse | awk -v want="$1" -F '\t' '/^@/ && substr($1, 2) == want && $2 == "cmd" && $3 != "" { print $3; exit }'
}

dataset() {
    if [ ! -d "$WORK/data" ]; then
        make -s -C "$repo" build/examples/gen_dataset >/dev/null
        "$repo/build/examples/gen_dataset" --out "$WORK/data" --classes 2 --per-class 6 --seed 5 \
            --min-side 40 --max-side 64 >/dev/null
    fi
}

copy_checkout() { # the checkout's tracked files (as in the working tree) into $1
    mkdir -p "$1"
    (cd "$repo" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$1")
}

run_one() {
    local name=$1 dir=$WORK/$1 exe
    local body
    body=$(script "$name") || { echo "recipes: README.md has no recipe '$name'"; return 1; }
    exe=$(exe_of "$name"); exe=${exe:-app}
    echo "=== recipe $name (README.md, as printed):"
    printf '%s\n' "$body" | sed 's/^/    /'
    rm -rf "$dir"
    mkdir -p "$dir"
    local -a env=(CC="${CC:-cc}")
    case $name in
    vendored*)
        cp "$repo/coordl.h" "$repo/coordl.c" "$dir/"
        cp "$repo/tests/packaging/app.c" "$dir/app.c"
        case $name in *stb-upstream*) # an upstream stb checkout's layout (from Debian's copy)
            mkdir -p "$dir/third_party/stb"
            cp /usr/include/stb/stb_image.h "$dir/third_party/stb/stb_image.h" ;;
        esac ;;
    install)
        dir=$repo
        env+=(DESTDIR="$ROOT") ;;
    pkgconfig-* | find-package*)
        [ -f "$ROOT$PREFIX_IN_README/include/coordl.h" ] || { echo "recipes: run the 'install' recipe first"; return 1; }
        cp "$repo/tests/packaging/app.c" "$dir/app.c"
        env+=(PKG_CONFIG_PATH="$ROOT$PREFIX_IN_README/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$ROOT"
              CMAKE_PREFIX_PATH="$ROOT$PREFIX_IN_README") ;;
    subdir*)
        cp "$repo/tests/packaging/app.c" "$dir/app.c"
        copy_checkout "$dir/coordl" ;;
    standalone*)
        copy_checkout "$dir" ;;
    readme-loop*)
        cp "$repo/coordl.h" "$repo/coordl.c" "$repo/tests/packaging/loop_main.c" "$dir/" ;;
    *)
        echo "recipes: no setup for a recipe named '$name' (tests/packaging/recipes.sh)"; return 1 ;;
    esac
    (cd "$dir" && printf '%s\n' "$body" | env "${env[@]}" bash -ex) || { echo "recipes: $name: its commands failed"; return 1; }
    case $name in install | standalone*) return 0 ;; esac
    dataset
    case $name in readme-loop*)
        (cd "$dir" && ${CC:-cc} -O2 -I. train.c loop_main.c coordl.c -o app -ljpeg -lhwloc -lcurl -luring -lpthread -lm) ||
            { echo "recipes: $name: README's loop does not compile"; return 1; }
        cp -r "$WORK/data" "$dir/data"
        local victim
        victim=$(find "$dir/data" -type f -name '*.jpg' | sort | head -1)
        head -c 200 "$victim" > "$victim.cut" && mv "$victim.cut" "$victim"
        (cd "$dir" && ./app "$dir/data") || { echo "recipes: $name: README's loop stopped on a damaged file"; return 1; }
        return 0 ;;
    esac
    (cd "$dir" && env LD_LIBRARY_PATH="$ROOT$PREFIX_IN_README/lib" "./$exe" "$WORK/data") ||
        { echo "recipes: $name: the program it built failed"; return 1; }
    case $name in
    pkgconfig-static)
        if readelf -d "$dir/$exe" | grep -q 'NEEDED.*libcoordl'; then
            echo "recipes: $name: the program needs libcoordl.so; it should have libcoordl.a inside"; return 1
        fi ;;
    pkgconfig-shared | find-package)
        if ! readelf -d "$dir/$exe" | grep -q 'NEEDED.*libcoordl\.so\.0\]'; then
            echo "recipes: $name: the program does not load libcoordl.so.0"; return 1
        fi ;;
    esac
}

cmd=${1:-}
shift || true
case $cmd in
list) names ;;
show) script "$1" ;;
run)
    [ $# -gt 0 ] || { echo "usage: recipes.sh run NAME... | all"; exit 2; }
    if [ "$1" = all ]; then set -- $(names); fi
    mkdir -p "$WORK"
    fail=0
    for n in "$@"; do run_one "$n" || fail=1; done
    [ $fail -eq 0 ] || { echo "recipes: FAILED"; exit 1; }
    echo "recipes: passed: $*" ;;
*) echo "usage: recipes.sh list | show NAME | run NAME... | all"; exit 2 ;;
esac
