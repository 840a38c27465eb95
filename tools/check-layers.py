#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks that no lower layer of src/ calls up.

src/modules.txt lists the modules, lowest layer first. For every file in
src/ this reads its `#include "x.h"` lines and every internal name it uses
(cdl__*, CDL_*: functions, types, macros, enum constants, variables), and
finds the header that declares each name. It fails when

  - a file includes the header of a module above its own, or
  - a file uses a name declared by a module above its own (so the check
    does not depend on which headers happen to include which), or
  - a file uses a name from another module's header without including it.

A module's types live in x_state.h (its state struct and the data it
shares), its functions in x.h. handle.h is the composition (struct coordl):
it includes only state headers; any .c may include it, no header may. A
state header includes only platform.h and lower state headers, so the
types form their own layered floor under the composition.
`--fix-includes` rewrites each file's internal includes to exactly the
headers it uses, in layer order, and its head comment's Calls: line.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")


def strip_comments(text):
    """Comments and string literals blanked, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q:
                j += 2 if text[j] == "\\" else 1
            out.append(q + " " * (j - i - 1) + q)
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def layers():
    """src/modules.txt, read the way the amalgamation reads it."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from amalgamate import modules
    return modules()


DECL_PATTERNS = [
    re.compile(r"^\s*#\s*define\s+(\w+)", re.M),
    re.compile(r"\btypedef\b[^;{}]*?\b(cdl__\w+)\s*;"),
    re.compile(r"\b(?:struct|union|enum)\s+(cdl__\w+)\s*\{"),
    re.compile(r"^\}\s*(cdl__\w+)\s*;", re.M),
    re.compile(r"^CDL_PRIVATE\b[^;{]*?\b(cdl__\w+)\s*[\(\[;]", re.M),
    re.compile(r"^static\s+inline\b[^;{]*?\b(cdl__\w+)\s*\(", re.M),
]


def declared(text):
    names = set()
    for p in DECL_PATTERNS:
        names.update(p.findall(text))
    for body in re.findall(r"\benum\b\s*\w*\s*\{([^}]*)\}", text):
        names.update(re.findall(r"\b(CDL_\w+)\s*(?:=[^,]*)?(?:,|$)", body))
    return names


def main():
    order = layers()
    rank = {m: i for i, m in enumerate(order)}
    rank["handle"] = len(order)

    def module(name):
        """cache.c, cache.h, cache_state.h -> cache"""
        base = name.rsplit(".", 1)[0]
        return base[: -len("_state")] if base.endswith("_state") else base
    files = sorted(f for f in os.listdir(SRC) if f.endswith((".c", ".h")))
    raw = {f: open(os.path.join(SRC, f)).read() for f in files}
    text = {f: strip_comments(raw[f]) for f in files}
    owner = {}  # name -> header declaring it
    for f in files:
        if f.endswith(".h"):
            for n in declared(text[f]):
                owner.setdefault(n, f)
    errors = []
    fix = "--fix-includes" in sys.argv[1:]
    for f in files:
        mod = module(f)
        is_state = f.endswith("_state.h")
        if mod not in rank:
            errors.append(f"src/{f}: module '{mod}' is not in src/modules.txt")
            continue
        incs = re.findall(r'^\s*#\s*include\s+"([^"]+)"', raw[f], re.M)
        body = re.sub(r"\bstruct\s+cdl__\w+\s*\*", "struct_ptr *", text[f])
        own = declared(text[f])
        need = set()
        for n in set(re.findall(r"\b(?:cdl__\w+|CDL_\w+)\b", body)):
            h = owner.get(n)
            if not h or h == f or n in own:
                continue
            hm = module(h)
            if hm == mod:
                if not (is_state and not h.endswith("_state.h")):
                    need.add(h)
                continue
            if is_state and not h.endswith("_state.h") and hm != "platform":
                errors.append(f"src/{f} uses {n}, declared by {h}: a state header may use only types of state headers")
            if f == "handle.h" and not h.endswith("_state.h") and hm != "platform":
                errors.append(f"src/handle.h uses {n}, declared by {h}: the composition may use only state headers")
            if rank[hm] > rank[mod] and not (hm == "handle" and f.endswith(".c")) and f != "handle.h" \
                    and not (f.endswith(".c") and h.endswith("_state.h")):
                errors.append(f"src/{f} (layer {rank[mod]}, {mod}) uses {n}, declared by {h} (layer {rank[hm]}): a lower layer may not call up")
            need.add(h)
        if f.endswith(".c") and os.path.exists(os.path.join(SRC, mod + ".h")):
            need.add(mod + ".h")
        if f == mod + ".h" and os.path.exists(os.path.join(SRC, mod + "_state.h")):
            need.add(mod + "_state.h")
        if f.endswith(".c") and re.search(r"\b(?:L|M)->|->L->", body):
            need.add("handle.h")
        for i in incs:
            if not os.path.exists(os.path.join(SRC, i)):
                continue
            im = module(i)
            if im == "handle" and f.endswith(".h"):
                errors.append(f"src/{f}: a header may not include handle.h (the composition sits above every module)")
            elif im != "handle" and rank.get(im, 99) > rank[mod]:
                errors.append(f"src/{f} (layer {rank[mod]}) includes {i} (layer {rank.get(im)}): a lower layer may not include a higher one")
        if f.endswith(".c"):
            m = re.search(r"\* Calls:(.*?)\(lower", raw[f], re.S)
            said = set(re.findall(r"\w+", re.sub(r"\n\s*\*", " ", m.group(1)))) - {"none"} if m else None
            calls = {module(h) for h in need if not h.endswith("_state.h")} - {"platform", "handle", mod}
            if fix and said is not None and said != calls:
                path = os.path.join(SRC, f)
                body_text = open(path).read()
                names = ", ".join(x for x in order if x in calls) or "none"
                words = (names + " (lower layers only: src/modules.txt; tools/check-layers.py checks this line).").split()
                lines, cur = [], " * Calls:"
                for w in words:
                    if len(cur) + 1 + len(w) > 76:
                        lines.append(cur)
                        cur = " *       "
                    cur += " " + w
                lines.append(cur)
                body_text = re.sub(r" \* Calls:.*?line\)\.", "\n".join(lines), body_text, count=1, flags=re.S)
                open(path, "w").write(body_text)
                said = calls
            if said is None:
                errors.append(f"src/{f}: its head comment has no 'Calls:' line naming the modules it calls")
            elif said != calls:
                errors.append(f"src/{f}: head comment says Calls: {', '.join(sorted(said)) or 'none'}; it uses {', '.join(sorted(calls)) or 'none'}")
        if mod != "platform":
            need.add("platform.h")
        need.discard(f)
        want = sorted(need, key=lambda h: (h != "platform.h", h != mod + "_state.h", h != mod + ".h",
                                           h == "handle.h", rank.get(module(h), 99), h))
        have = [i for i in incs if os.path.exists(os.path.join(SRC, i))]
        if fix and have != want:
            path = os.path.join(SRC, f)
            lines = open(path).read().split("\n")
            kept, first = [], None
            for ln in lines:
                m = re.match(r'^\s*#\s*include\s+"([^"]+)"', ln)
                if m and os.path.exists(os.path.join(SRC, m.group(1))):
                    if first is None:
                        first = len(kept)
                    continue
                kept.append(ln)
            if first is None:
                first = 2 if f.endswith(".h") else 0
                while first < len(kept) and (kept[first].startswith(("/*", " *", "//")) or kept[first].startswith("#ifndef CDL_") or kept[first].startswith("#define CDL_")):
                    first += 1
            kept[first:first] = [f'#include "{h}"' for h in want]
            open(path, "w").write("\n".join(kept))
        elif not fix:
            missing = [h for h in want if h not in have]
            if missing:
                errors.append(f"src/{f}: uses names from {', '.join(missing)} without including it")
    for e in errors:
        print("check-layers:", e)
    if errors:
        sys.exit(1)
    print(f"check-layers: {len(files)} files in {len(order)} layers, no call up, every include in place")


if __name__ == "__main__":
    main()
