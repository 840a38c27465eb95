/*
 * fuzz_group.c - a coordinated group's shared object as a joining member
 * finds it in /dev/shm: bytes another process (a crashed run, another
 * build, or anyone who could write the object) left there. It runs #11's
 * cdl__group_validate, the pure check cdl__group_open makes before it
 * trusts anything in a mapped object (layout first, then, under the lock,
 * contents), on an exact-size copy, so ASan sees any read outside it.
 * Input: 8 parameter bytes, then
 *   - raw mode (bit 0 of byte 0 clear): the object itself;
 *   - built mode: 5-byte patches (a 32-bit little-endian offset, taken
 *     modulo the size, and a byte) applied to a valid object laid out for
 *     the parameters exactly as cdl__group_create lays it out
 *     (cdl__group_want, cdl__stream_init, cdl__ring_layout).
 * Oracles: an unpatched object made as the creator makes it is accepted;
 * contents accepted implies layout accepted; and whatever is accepted is
 * walked the way the member code uses it (every slot's data, labels, ids,
 * targets and row marks, every present cache entry's bytes, the pending
 * assignment), reading each byte it would touch.
 *
 * Parameters: 0 bit 0 built mode; 1 prefetch_batches 1 + b % 6; 2
 * batch_size 1 + b % 6; 3 cache_bytes (b % 4) x 4096; 4-5 items
 * 1 + v % 512; 6 world 1 + b % 3, rank b / 3 % world; 7 out 1 + b % 6,
 * bit 7 tokens (seq_len 1 + b % 6).
 */
#include "../../coordl.c"
#include "fuzz_common.h"

#define FZ_PARAMS 8

/* Reads every byte of [p, p + n): what the member code would touch. */
static volatile uint8_t fz_sink;
static void fz_touch(const uint8_t *p, uint64_t n)
{
    uint8_t x = 0;
    for (uint64_t i = 0; i < n; i++)
        x ^= p[i];
    fz_sink = x;
}

static void fz_walk(const uint8_t *b, uint64_t size, int contents)
{
    cdl__group_header h;
    memcpy(&h, b, sizeof h);
    FZ_CHECK(h.total_bytes == size, "accepted a header of %llu bytes for %llu", (unsigned long long)h.total_bytes,
             (unsigned long long)size);
    FZ_CHECK(h.ring_off <= size && h.nslots * h.slot_stride <= size - h.ring_off, "ring outside");
    FZ_CHECK(h.slots_off + h.nslots * sizeof(cdl__slot) <= size, "slots outside");
    FZ_CHECK(h.rows_off + h.nslots * h.rows_cap * sizeof(uint32_t) <= size, "row marks outside");
    FZ_CHECK(h.stream_off + sizeof(cdl__stream) <= size, "stream outside");
    fz_touch(b + h.stream_off, sizeof(cdl__stream));
    fz_touch(b + h.rows_off, h.nslots * h.rows_cap * sizeof(uint32_t));
    if (!contents)
        return;
    const uint8_t *ring = b + h.ring_off;
    const uint64_t ring_bytes = size - h.ring_off;
    for (uint64_t s = 0; s < h.nslots; s++) {
        cdl__slot sl;
        memcpy(&sl, b + h.slots_off + s * sizeof sl, sizeof sl);
        if (sl.state == CDL_SLOT_FREE)
            continue;
        /* a READY or FILLING slot's n rows, as coordl_next hands them out */
        FZ_CHECK(sl.data_off <= ring_bytes && (uint64_t)sl.n * sl.row_bytes <= ring_bytes - sl.data_off, "data");
        FZ_CHECK(sl.labels_off <= ring_bytes && (uint64_t)sl.n * 4 <= ring_bytes - sl.labels_off, "labels");
        FZ_CHECK(sl.ids_off <= ring_bytes && (uint64_t)sl.n * 8 <= ring_bytes - sl.ids_off, "ids");
        fz_touch(ring + sl.data_off, (uint64_t)sl.n * sl.row_bytes);
        fz_touch(ring + sl.labels_off, (uint64_t)sl.n * 4);
        fz_touch(ring + sl.ids_off, (uint64_t)sl.n * 8);
        if (h.target_row_bytes) {
            FZ_CHECK(sl.targets_off <= ring_bytes && (uint64_t)sl.n * h.target_row_bytes <= ring_bytes - sl.targets_off,
                     "targets");
            fz_touch(ring + sl.targets_off, (uint64_t)sl.n * h.target_row_bytes);
        }
        FZ_CHECK(sl.n <= h.rows_cap, "%u rows in a slot of %llu", sl.n, (unsigned long long)h.rows_cap);
    }
    cdl__stream S;
    memcpy(&S, b + h.stream_off, sizeof S);
    FZ_CHECK(S.assign.slot <= h.nslots, "pending assignment of slot %u", S.assign.slot);
    for (uint64_t i = 0; h.cache_bytes && i < h.num_items; i++) {
        cdl__cache_entry ce;
        memcpy(&ce, b + h.entries_off + i * sizeof ce, sizeof ce);
        if (atomic_load(&ce.state) != CDL_CE_PRESENT)
            continue;
        FZ_CHECK(ce.off <= h.cache_bytes && ce.len <= h.cache_bytes - ce.off, "cache entry %llu", (unsigned long long)i);
        fz_touch(b + h.slab_off + ce.off, ce.len);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_bytes in = {data, size};
    uint8_t p[FZ_PARAMS];
    fz_params(&in, p, FZ_PARAMS);
    uint8_t *obj = NULL;
    uint64_t bytes = 0;
    int pristine = 0;
    coordl *L = NULL;
    if (p[0] & 1) {
        coordl_config cfg = fz_config();
        cfg.group = "fuzz";
        cfg.prefetch_batches = 1u + p[1] % 6u;
        cfg.batch_size = 1u + p[2] % 6u;
        cfg.cache_bytes = (uint64_t)(p[3] % 4) * 4096u;
        cfg.world = 1 + p[6] % 3;
        cfg.rank = p[6] / 3 % cfg.world;
        cfg.out_w = cfg.out_h = 1u + p[7] % 6u;
        if (p[7] & 128) {
            cfg.pipeline = COORDL_PIPE_TOKENS;
            cfg.seq_len = 1u + p[7] % 6u;
        }
        if (cdl__validate(&cfg) != COORDL_OK)
            return 0;
        L = fz_loader(&cfg);
        L->index.num_items = 1u + (uint64_t)(p[4] | p[5] << 8) % 512u;
        if ((uint64_t)cfg.world > L->index.num_items || cdl__open_geometry(L) != COORDL_OK) {
            fz_loader_free(L);
            return 0;
        }
        cdl__group_header want;
        cdl__group_want(L, &want);
        bytes = want.total_bytes;
        uint8_t *made = calloc(1, bytes);
        FZ_CHECK(made != NULL, "out of memory for %llu bytes", (unsigned long long)bytes);
        memcpy(made, &want, sizeof want);
        cdl__group_attach(L, (cdl__group_header *)(void *)made);
        FZ_CHECK(cdl__stream_init(L->S, 1) == COORDL_OK, "stream init");
        cdl__ring_layout(L);
        pristine = in.n < 5;
        for (size_t k = 0; k + 5 <= in.n; k += 5) {
            uint32_t off;
            memcpy(&off, in.p + k, 4);
            made[off % bytes] = in.p[k + 4];
        }
        obj = malloc(bytes); /* exact size, off the creator's (page-rounded) block */
        FZ_CHECK(obj != NULL, "out of memory");
        memcpy(obj, made, bytes);
        /* the object is a copy: nothing of L points into it any more */
        L->S = NULL;
        L->ring.slots = NULL;
        L->ring.row_state = NULL;
        L->cache.entries = NULL;
        memset(&L->cache.arena, 0, sizeof L->cache.arena);
        memset(&L->ring.arena, 0, sizeof L->ring.arena);
        free(made);
    } else {
        bytes = in.n;
        obj = malloc(bytes ? bytes : 1);
        FZ_CHECK(obj != NULL, "out of memory");
        if (bytes)
            memcpy(obj, in.p, bytes);
    }
    char why[256];
    const int layout = cdl__group_validate(obj, bytes, 0, why, sizeof why);
    const int contents = cdl__group_validate(obj, bytes, 1, why, sizeof why);
    if (pristine)
        FZ_CHECK(layout && contents, "the creator's own object is refused: %s", why);
    FZ_CHECK(!contents || layout, "contents accepted, layout refused");
    if (layout)
        fz_walk(obj, bytes, contents);
    free(obj);
    if (L)
        fz_loader_free(L);
    return 0;
}
