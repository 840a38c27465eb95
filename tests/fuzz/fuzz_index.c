/*
 * fuzz_index.c - the saved index's loader (indexfile.c: cdl__ix_check,
 * then cdl__ix_adopt). Input: one parameter byte, then the index file.
 * Parameter bits: 1 writes the right checksum into the file first and 2
 * the right length (so the fuzzer reaches the structural checks past
 * them), 4 checks it as an audio index. The source it must record is
 * "/fz/source" (gen_seeds writes seeds for it).
 * Oracles: a file the checks pass adopts into a loader, and then every
 * item's path lies inside the image and is NUL-terminated there, its
 * shard and label are in range, and the sizes add up to dataset_bytes; a
 * file they refuse says why.
 */
#include "../../coordl.c"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_bytes in = {data, size};
    uint8_t param;
    fz_params(&in, &param, 1);
    cdl__u8 *p = malloc(in.n ? in.n : 1);
    if (!p)
        return 0;
    if (in.n)
        memcpy(p, in.p, in.n);
    const size_t n = in.n;
    if ((param & 2) && n >= CDL_IX_HEADER)
        cdl__ix_put64(p + CDL_IXH_LEN, n);
    if ((param & 1) && n >= CDL_IX_HEADER)
        cdl__ix_put64(p + CDL_IXH_SUM, cdl__ix_checksum(p, n));
    char why[256] = "";
    const int verdict = cdl__ix_check(p, n, "/fz/source", (param & 4) != 0, why, sizeof why);
    if (verdict) {
        FZ_CHECK(verdict == CDL_IX_FOREIGN || verdict == CDL_IX_CORRUPT, "verdict %d", verdict);
        FZ_CHECK(why[0] != '\0', "a refused file without a reason");
        free(p);
        return 0;
    }
    coordl_config cfg = fz_config();
    coordl *L = fz_loader(&cfg);
    coordl_status rc = cdl__ix_adopt(L, p, n, 0);
    FZ_CHECK(rc == COORDL_OK, "adopt failed: %s", cdl__open_errmsg);
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < L->index.num_items; i++) {
        const char *path = cdl__item_path(L, i);
        FZ_CHECK(path >= (const char *)p && path < (const char *)p + n, "item %llu's path outside the image",
                 (unsigned long long)i);
        FZ_CHECK(memchr(path, 0, (size_t)((const char *)p + n - path)) != NULL, "unterminated path");
        FZ_CHECK(L->index.tar_refs[i].shard < L->index.ntar_shards, "shard out of range");
        FZ_CHECK(cdl__item_label(L, i) >= 0 && (uint32_t)cdl__item_label(L, i) < L->index.num_classes, "label");
        bytes += cdl__item_bytes(L, i);
    }
    FZ_CHECK(bytes == L->index.dataset_bytes, "dataset_bytes");
    for (size_t s = 0; s < L->index.ntar_shards; s++)
        FZ_CHECK(L->index.tar_shards[s] < L->index.strings_len, "shard path offset");
    fz_loader_free(L); /* frees the image (L owns it) */
    return 0;
}
