#!/usr/bin/python3
"""Where the time of a coordl profile goes, by stage.

    perf report -i PERF.DATA --stdio --no-children --sort dso,sym -g none \
        | /usr/bin/python3 bench/perf_split.py [LIBJPEG.so]

Reads perf report's lines ("  4.20%  dso  [.] symbol", a symbol-less
address inside the DSO printed as 0x...; record with -e cpu-clock) and sums them into
stages: Huffman decoding, IDCT / upsampling / colour conversion and the rest
of libjpeg, coordl's resampling and normalizing store, coordl's splice and
rewrite code, the C library, the kernel, other.

libjpeg-turbo as Debian ships it exports only its API: the static functions
that do the work (decode_mcu, the SIMD IDCT, upsampling and colour
conversion) have no symbols. Its samples are classed by address, against the
exported symbols around them: the entropy decoder (jdhuff.c, jdphuff.c,
jdarith.c) lies between jinit_inverse_dct and jpeg_read_icc_profile (jdhuff),
around jinit_phuff_decoder and jinit_arith_decoder; the SIMD code (IDCT,
upsampling, colour conversion, all in one object) after the last C symbol.
The boundaries are read from the library with `nm -D -n`, so they follow the
build installed; the split is printed with the boundaries it used.
"""
import subprocess
import sys
from collections import defaultdict

LIBJPEG = sys.argv[1] if len(sys.argv) > 1 else "/usr/lib/x86_64-linux-gnu/libjpeg.so.62"

RESAMPLE = ("cdl__resample", "cdl__hpass", "cdl__vpass", "cdl__u8_to_f32", "cdl__store_row",
            "cdl__finish_row", "cdl__axis", "cdl__scale_bias", "cdl__tables_for", "cdl__color_jitter",
            "cdl__rotate_row")
RANDOM_ACCESS = ("cdl__jpeg_splice", "cdl__jpeg_walk", "cdl__jpeg_rewrite", "cdl__rst_", "cdl__cache_")


def exported(lib):
    out = subprocess.run(["nm", "-D", "-n", "--defined-only", lib], capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        p = line.split()
        if len(p) >= 3 and p[1] in "Tt":
            syms.append((int(p[0], 16), p[2].split("@")[0]))
    return sorted(syms)


def libjpeg_ranges(lib):
    syms = exported(lib)
    addr = {name: a for a, name in syms}
    after = lambda name: min((a for a, n in syms if a > addr[name]), default=None)
    ranges = []
    # jdhuff.c: its static functions sit between the previous module's last
    # exported symbol (jinit_inverse_dct, jddctmgr.c) and its own
    # jinit_huff_decoder; jdphuff/jdarith: up to their jinit_* symbol.
    if "jinit_inverse_dct" in addr and "jinit_huff_decoder" in addr:
        ranges.append(("huffman", addr["jinit_inverse_dct"] + 1, after("jinit_huff_decoder")))
    for init in ("jinit_phuff_decoder", "jinit_arith_decoder"):
        if init in addr:
            prev = max((a for a, n in syms if a < addr[init]), default=addr[init])
            ranges.append(("huffman", prev + 1, after(init) or addr[init] + 1))
    last_c = syms[-1][0] if syms else 0
    ranges.append(("idct_colour_simd", last_c + 1, 1 << 62))
    return ranges


def main():
    ranges = libjpeg_ranges(LIBJPEG)
    stage = defaultdict(float)
    total = 0.0
    for line in sys.stdin:
        p = line.split()
        if len(p) < 4 or not p[0].endswith("%") or p[2] not in ("[.]", "[k]"):
            continue
        pct = float(p[0][:-1])
        dso, sym = p[1], p[3]
        total += pct
        if p[2] == "[k]" or "kernel" in dso:
            stage["kernel"] += pct
        elif "libjpeg" in dso:
            name = "libjpeg_other"
            if sym.startswith(("jpeg_fill_bit_buffer", "jpeg_huff_decode")):
                name = "huffman"
            elif sym.startswith("0x"):
                off = int(sym, 16)
                for nm, lo, hi in ranges:
                    if lo <= off < hi:
                        name = nm
                        break
            elif sym.startswith("jpeg_idct") or sym.startswith("jinit_"):
                name = "idct_colour_simd"
            stage[name] += pct
        elif dso.startswith(("libc", "libm", "ld-linux")):
            stage["libc"] += pct
        elif sym.startswith(RESAMPLE):
            stage["resample"] += pct
        elif sym.startswith(RANDOM_ACCESS):
            stage["splice_rewrite"] += pct
        elif sym.startswith("cdl__") or sym.startswith("coordl"):
            stage["coordl_other"] += pct
        else:
            stage["other"] += pct
    if not total:
        print("perf_split: no samples read", file=sys.stderr)
        return 1
    names = [("huffman", "libjpeg Huffman decoding (jdhuff/jdphuff/jdarith)"),
             ("idct_colour_simd", "libjpeg IDCT, upsampling, colour conversion (SIMD)"),
             ("libjpeg_other", "libjpeg other (headers, buffers, C paths)"),
             ("resample", "coordl resample + normalizing store"),
             ("splice_rewrite", "coordl splice / rewrite / cache"),
             ("coordl_other", "coordl other"), ("libc", "libc (memcpy, memchr, malloc)"),
             ("kernel", "kernel"), ("other", "other")]
    for key, label in names:
        if stage.get(key):
            print(f"  {label:<52} {100.0 * stage[key] / total:5.1f}%")
    print("  (libjpeg classed by address: "
          + ", ".join(f"{n} {lo:#x}-{hi:#x}" for n, lo, hi in ranges if hi < 1 << 60)
          + f", SIMD from {ranges[-1][1]:#x})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
