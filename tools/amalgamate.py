#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generates coordl.c, the single file users vendor, from the modules in src/.

The layer order is src/modules.txt: one module per line, lowest first. The
output is, in that order: platform.h, every module's state header
(x_state.h: its types), handle.h (the composition, struct coordl), every
module's function header (x.h), then every module's .c; each internal
`#include "x.h"` of a src/ file is dropped (its text is already above), so
the result is one translation unit in which CDL_PRIVATE is `static`.
Deterministic: the same src/ gives the same bytes.

    tools/amalgamate.py             write coordl.c
    tools/amalgamate.py --check     exit 1 if coordl.c differs from src/
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
OUT = os.path.join(ROOT, "coordl.c")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def modules():
    names = []
    with open(os.path.join(SRC, "modules.txt")) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                names.append(line.split()[0])
    return names


def emit(path, out, emitted):
    """Appends one src/ file, dropping its internal includes (each must
    already be in the output: a file includes only what lies below it)."""
    rel = os.path.relpath(path, ROOT)
    out.append(f"/* ---- {rel} " + "-" * max(0, 66 - len(rel)) + " */")
    with open(path) as f:
        for line in f:
            m = INCLUDE.match(line)
            if m and os.path.exists(os.path.join(SRC, m.group(1))):
                if m.group(1) not in emitted:
                    sys.exit(f"amalgamate: {rel} includes {m.group(1)}, which is not below it in src/modules.txt")
                continue
            out.append(line.rstrip("\n"))
    emitted.add(os.path.basename(path))


def build():
    names = modules()
    out = [
        "/* SPDX-License-Identifier: MIT */",
        "/*",
        " * coordl.c - an embedded, in-process data loader for C training engines.",
        " *",
        " * GENERATED FILE: do not edit. It is the amalgamation of the modules in",
        " * src/ (tools/amalgamate.py, `make amalgamation`), in the layer order of",
        " * src/modules.txt; CI fails when it differs from them. Edit src/ and",
        " * regenerate. See coordl.h for the API and docs/DESIGN.md for the design.",
        " *",
        " * Modules, lowest layer first (each calls only the ones above it here):",
    ]
    with open(os.path.join(SRC, "modules.txt")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                out.append(" *   " + line.rstrip())
    out += [" */", "#define CDL_PRIVATE static /* internal across modules, private to this file */", ""]
    emitted = set()
    emit(os.path.join(SRC, "platform.h"), out, emitted)
    for n in names:
        h = os.path.join(SRC, n + "_state.h")
        if os.path.exists(h):
            emit(h, out, emitted)
    emit(os.path.join(SRC, "handle.h"), out, emitted)
    for n in names:
        h = os.path.join(SRC, n + ".h")
        if n != "platform" and os.path.exists(h):
            emit(h, out, emitted)
    for n in names:
        c = os.path.join(SRC, n + ".c")
        if os.path.exists(c):
            emit(c, out, emitted)
    return "\n".join(out) + "\n"


def main():
    text = build()
    if "--check" in sys.argv[1:]:
        with open(OUT) as f:
            if f.read() != text:
                sys.exit("amalgamate: coordl.c differs from src/: run `make amalgamation` (never edit coordl.c by hand)")
        print("amalgamate: coordl.c matches src/")
        return
    with open(OUT, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
