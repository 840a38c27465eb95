/* SPDX-License-Identifier: MIT */
/*
 * group.c - the coordinated group.
 *
 * Sibling processes that open with the same `group` share one stream:
 * a POSIX shm object holds a header (layout version and geometry, the
 * config fields that change batch content), the stream block (robust
 * process-shared mutex, members), the slots, the row marks, the MinIO
 * cache (entries and slab) and the ring. Every member's workers claim
 * rows from it, so each batch is prepared once; every member consumes
 * every batch; a slot is reused when all live members released it.
 * A member is (index, generation). Its liveness is a robust mutex its
 * member thread holds for its whole life (the kernel hands it over as
 * EOWNERDEAD when the process dies, in any PID namespace) and a
 * heartbeat that thread refreshes; that thread is also the one place
 * where members that died or fell silent are dropped. The object is
 * created with O_EXCL, mode 0600; an existing one is used only if it
 * belongs to this user and cdl__group_validate accepts its bytes.
 *
 * Owns:  L->member: this process's identity in the stream, its shm mapping
 *        and its member thread (heartbeats, liveness, dropping the dead);
 *        the layout and validation of the shm object
 * Lock:  the stream's lock for membership changes; each member's liveness
 *        mutex (robust, held for its life); member.mu for the member
 *        thread's stop flag
 * Calls: status, arena, lock, indexfile, cache, stream (lower layers only:
 *        src/modules.txt; tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "group.h"
#include "status.h"
#include "arena.h"
#include "lock.h"
#include "lock_state.h"
#include "cache.h"
#include "cache_state.h"
#include "stream.h"
#include "indexfile.h"
#include "handle.h"

#define CDL_GROUP_MAGIC 0x636f6f72646c4731ull /* "coordlG1" */
#define CDL_GROUP_VERSION 7 /* 3: cache entries hold room and JPEG rewrites;
                               4: a holder found dead is flagged, and dropped
                               by the member threads;
                               5: cache readers recorded per member, one
                               owner per rewrite;
                               6: slots hold box counts (object detection);
                               7: the stream counts its free slots (its
                                  fields after inflight moved) */
#define CDL_GROUP_FIELDS 64
#define CDL_GROUP_MAX_SLOTS 1024 /* prefetch_batches' bound */

typedef struct cdl__group_field {
    char name[24];
    uint64_t value;
} cdl__group_field;

typedef struct cdl__group_header {
    uint64_t magic;
    uint32_t version;
    _Atomic uint32_t ready;   /* set last by the creator                  */
    _Atomic uint32_t retired; /* unlinked (stale or last member gone): set
                                 and unlinked under the object's lock, so
                                 two processes never both unlink a name   */
    uint32_t nfields;
    uint32_t timeout_ms;      /* group_timeout_ms: one value for the group
                                 (the creator's), outside the compared
                                 geometry: a member with another one
                                 adopts it                                 */
    uint64_t total_bytes;
    cdl__group_field fields[CDL_GROUP_FIELDS];
    /* geometry: what the parts below were sized from, and the sizes of
     * this build's structures (a build with another layout is refused) */
    uint64_t nslots, rows_cap, num_items, cache_bytes;
    uint64_t slot_stride, slot_data_cap, row_bytes, target_row_bytes;
    uint64_t stream_bytes, slot_bytes, entry_bytes;
    uint64_t stream_off, slots_off, rows_off, entries_off, slab_off, ring_off;
} cdl__group_header;

static uint64_t cdl__hash_bytes(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t cdl__float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Every setting that changes what a batch holds or how the shared memory
 * is laid out, by name, so a mismatch can say which. */
static uint32_t cdl__group_fields(const coordl *L, cdl__group_field *f) {
    const coordl_config *c = &L->cfg;
    uint32_t n = 0;
    /* more fields than the header holds would be a layout change: the
     * test suite's groups fail on the bound (never a write past it) */
#define CDL_F(nm, v) do { if (n < CDL_GROUP_FIELDS) { snprintf(f[n].name, sizeof f[n].name, "%s", nm); \
                              f[n].value = (uint64_t)(v); } n++; } while (0)
    CDL_F("source", cdl__hash_bytes(c->source, strlen(c->source)));
    CDL_F("pipeline", c->pipeline); CDL_F("batch_size", c->batch_size); CDL_F("drop_last", c->drop_last);
    CDL_F("shuffle", c->shuffle); CDL_F("seed", c->seed); CDL_F("out_w", c->out_w); CDL_F("out_h", c->out_h);
    CDL_F("layout", c->layout);
    for (int i = 0; i < 3; i++) { CDL_F(i == 0 ? "mean[0]" : i == 1 ? "mean[1]" : "mean[2]", cdl__float_bits(c->mean[i])); }
    for (int i = 0; i < 3; i++) { CDL_F(i == 0 ? "std[0]" : i == 1 ? "std[1]" : "std[2]", cdl__float_bits(c->std[i])); }
    CDL_F("scale_min", cdl__float_bits(c->scale_min)); CDL_F("scale_max", cdl__float_bits(c->scale_max));
    CDL_F("ratio_min", cdl__float_bits(c->ratio_min)); CDL_F("ratio_max", cdl__float_bits(c->ratio_max));
    CDL_F("flip", c->flip); CDL_F("hue", cdl__float_bits(c->hue)); CDL_F("saturation", cdl__float_bits(c->saturation));
    CDL_F("exposure", cdl__float_bits(c->exposure)); CDL_F("rotate_deg", cdl__float_bits(c->rotate_deg));
    CDL_F("aspect", cdl__float_bits(c->aspect)); CDL_F("max_out_w", c->max_out_w); CDL_F("max_out_h", c->max_out_h);
    CDL_F("max_batch_size", c->max_batch_size); CDL_F("seq_len", c->seq_len); CDL_F("audio_samples", c->audio_samples);
    CDL_F("audio_rate", c->audio_rate); CDL_F("cache_bytes", c->cache_bytes); CDL_F("cache_policy", c->cache_policy);
    CDL_F("prefetch_batches", c->prefetch_batches); CDL_F("rank", c->rank); CDL_F("world", c->world);
    CDL_F("on_bad_sample", c->on_bad_sample); CDL_F("max_pixels", c->max_pixels);
    CDL_F("max_item_bytes", c->max_item_bytes); CDL_F("group_size", c->group_size);
    CDL_F("max_decode_bytes", c->max_decode_bytes); CDL_F("max_audio_samples", c->max_audio_samples);
    CDL_F("token_order", c->token_order); CDL_F("train_crop", c->train_crop);
    CDL_F("min_crop", c->min_crop); CDL_F("max_crop", c->max_crop);
    CDL_F("jpeg_random_access", c->jpeg_random_access); /* decides the cache's room */
    CDL_F("channels", c->channels); /* resolved: 0 was made 3 */
    CDL_F("dataset items", L->index.num_items); CDL_F("dataset bytes", L->index.dataset_bytes);
    /* object detection: the settings, and the boxes every member read */
    CDL_F("labels", c->labels); CDL_F("max_boxes", c->max_boxes); CDL_F("jitter", cdl__float_bits(c->jitter));
    CDL_F("place_scale_min", cdl__float_bits(c->place_scale_min));
    CDL_F("place_scale_max", cdl__float_bits(c->place_scale_max));
    CDL_F("num_classes", c->num_classes); CDL_F("box labels", L->index.boxes.hash);
    CDL_F("ssd_expand", cdl__float_bits(c->ssd_expand));
    /* resolved (0 was made 8); the other orders ignore it */
    CDL_F("shuffle_window_shards", c->shuffle == COORDL_SHUFFLE_SHARD_WINDOW ? c->shuffle_window_shards : 0);
#undef CDL_F
    return n;
}

/* The object this member would create: header, geometry and the parts'
 * offsets, from the config (the same for every member, since the fields
 * that decide them are compared). */
static void cdl__group_want(const coordl *L, cdl__group_header *h);

/* A group's cache lives in /dev/shm: a budget the file system cannot hold
 * beside the ring would fail the open (or, worse, the tmpfs later). Cut it
 * to what /dev/shm's size leaves after the ring and the tables, and say
 * so. The size, not the free space, decides: it is the same for every
 * member of the machine, so every member cuts the compared cache_bytes
 * alike (whether the object then fits the free space is checked when it
 * is created). */
static void cdl__group_fit_shm(coordl *L, cdl__group_header *want) {
    struct statvfs vs;
    if (L->cfg.cache_bytes == 0 || statvfs("/dev/shm", &vs) != 0) return;
    const uint64_t shm = (uint64_t)vs.f_blocks * vs.f_frsize;
    if (shm == 0 || want->total_bytes <= shm) return;
    const uint64_t rest = want->total_bytes - L->cfg.cache_bytes; /* ring, tables, their rounding */
    const uint64_t page = cdl__page_size();
    const uint64_t fits = shm > rest + page ? (shm - rest - page) / page * page : 0;
    cdl__log(L, COORDL_LOG_WARN, "group %s: cache_bytes %llu does not fit /dev/shm (%llu bytes) beside the ring "
             "and tables (%llu); using %llu (coordl_get_stats reports cache_bytes_budget)", L->cfg.group,
             (unsigned long long)L->cfg.cache_bytes, (unsigned long long)shm, (unsigned long long)rest,
             (unsigned long long)fits);
    L->cfg.cache_bytes = fits;
    L->stats.st.cache_bytes_budget = fits;
    cdl__group_want(L, want);
}

static void cdl__group_want(const coordl *L, cdl__group_header *h) {
    const size_t page = cdl__page_size();
    size_t data, labels, ids;
    memset(h, 0, sizeof *h);
    h->magic = CDL_GROUP_MAGIC;
    h->version = CDL_GROUP_VERSION;
    h->nfields = cdl__group_fields(L, h->fields);
    h->timeout_ms = (uint32_t)L->cfg.group_timeout_ms;
    h->nslots = L->ring.nslots;
    h->rows_cap = L->geom.slot_rows_cap;
    h->num_items = L->index.num_items;
    h->cache_bytes = L->cfg.cache_bytes;
    h->slot_stride = cdl__ring_slot_bytes(L, L->geom.slot_rows_cap, L->geom.slot_data_cap, &data, &labels, &ids);
    h->slot_data_cap = L->geom.slot_data_cap;
    h->row_bytes = L->geom.row_bytes;
    h->target_row_bytes = L->geom.target_row_bytes;
    h->stream_bytes = sizeof(cdl__stream);
    h->slot_bytes = sizeof(cdl__slot);
    h->entry_bytes = sizeof(cdl__cache_entry);
    uint64_t at = cdl__round_up(sizeof *h, 64);
    h->stream_off = at;
    at = cdl__round_up(at + sizeof(cdl__stream), 64);
    h->slots_off = at;
    at = cdl__round_up(at + L->ring.nslots * sizeof(cdl__slot), 64);
    h->rows_off = at;
    at = cdl__round_up(at + (uint64_t)L->ring.nslots * L->geom.slot_rows_cap * sizeof(uint32_t), 64);
    h->entries_off = at;
    at = cdl__round_up(at + (L->cfg.cache_bytes ? L->index.num_items * sizeof(cdl__cache_entry) : 0), page);
    h->slab_off = at;
    at = cdl__round_up(at + L->cfg.cache_bytes, page);
    h->ring_off = at;
    at = cdl__round_up(at + h->slot_stride * L->ring.nslots, page);
    h->total_bytes = at;
}

/* --- validation of a mapped object ------------------------------------- */

/* [off, off + count x each) lies in [*end, size), aligned, with no
 * overflow; *end moves past it (the parts are in order, disjoint). */
static int cdl__group_region_ok(uint64_t off, uint64_t count, uint64_t each, uint64_t align, uint64_t size,
                                uint64_t *end) {
    uint64_t len;
    if (__builtin_mul_overflow(count, each, &len)) return 0;
    if (off % align != 0 || off < *end || off > size || len > size - off) return 0;
    *end = off + len;
    return 1;
}

static int cdl__group_field_value(const cdl__group_header *h, const char *name, uint64_t *v) {
    for (uint32_t i = 0; i < h->nfields && i < CDL_GROUP_FIELDS; i++)
        if (strcmp(h->fields[i].name, name) == 0) { *v = h->fields[i].value; return 1; }
    return 0;
}

/* Whether the slots hold box counts (labels = COORDL_LABELS_BOXES). */
static int cdl__group_box_rows(const cdl__group_header *h) {
    uint64_t v = 0;
    return cdl__group_field_value(h, "labels", &v) && v == COORDL_LABELS_BOXES;
}

static int cdl__cstr_ok(const char *s, size_t cap) { return memchr(s, '\0', cap) != NULL; }

/* The layout part: header, geometry and every part of the object. */
static int cdl__group_validate_layout(const cdl__group_header *h, uint64_t size, char *why, size_t cap) {
#define CDL_REJECT(...) do { snprintf(why, cap, __VA_ARGS__); return 0; } while (0)
    if (h->magic != CDL_GROUP_MAGIC) CDL_REJECT("not a coordl group object (bad magic)");
    if (h->version != CDL_GROUP_VERSION)
        CDL_REJECT("layout version %u, this library uses %u", h->version, CDL_GROUP_VERSION);
    if (h->total_bytes != size)
        CDL_REJECT("the header says %llu bytes, the object has %llu", (unsigned long long)h->total_bytes,
                   (unsigned long long)size);
    if (h->nfields > CDL_GROUP_FIELDS) CDL_REJECT("%u config fields (at most %d)", h->nfields, CDL_GROUP_FIELDS);
    for (uint32_t i = 0; i < h->nfields; i++)
        if (!cdl__cstr_ok(h->fields[i].name, sizeof h->fields[i].name)) CDL_REJECT("config field %u has no name", i);
    if (h->stream_bytes != sizeof(cdl__stream) || h->slot_bytes != sizeof(cdl__slot) ||
        h->entry_bytes != sizeof(cdl__cache_entry))
        CDL_REJECT("made by a build with other structure sizes");
    if (h->nslots < 1 || h->nslots > CDL_GROUP_MAX_SLOTS) CDL_REJECT("%llu slots", (unsigned long long)h->nslots);
    if (h->rows_cap < 1 || h->rows_cap > UINT32_MAX) CDL_REJECT("%llu rows per slot", (unsigned long long)h->rows_cap);
    uint64_t rows_bytes, targets_bytes, need;
    if (__builtin_mul_overflow(h->row_bytes, h->rows_cap, &rows_bytes) || rows_bytes > h->slot_data_cap)
        CDL_REJECT("rows of %llu bytes do not fit a slot's %llu data bytes", (unsigned long long)h->row_bytes,
                   (unsigned long long)h->slot_data_cap);
    if (__builtin_mul_overflow(h->target_row_bytes, h->rows_cap, &targets_bytes) ||
        __builtin_add_overflow(h->slot_data_cap, targets_bytes, &need) ||
        __builtin_add_overflow(need, h->rows_cap * (sizeof(int32_t) + sizeof(uint64_t)), &need) ||
        __builtin_add_overflow(need, cdl__group_box_rows(h) ? h->rows_cap * sizeof(uint32_t) : 0, &need) ||
        h->slot_stride < need)
        CDL_REJECT("a ring slot of %llu bytes cannot hold its rows", (unsigned long long)h->slot_stride);
    if (h->timeout_ms < 1 || h->timeout_ms > 3600000) CDL_REJECT("group_timeout_ms of %u ms", h->timeout_ms);
    uint64_t end = sizeof *h;
    if (!cdl__group_region_ok(h->stream_off, 1, sizeof(cdl__stream), 64, size, &end)) CDL_REJECT("stream block outside the object");
    if (!cdl__group_region_ok(h->slots_off, h->nslots, sizeof(cdl__slot), 64, size, &end)) CDL_REJECT("slots outside the object");
    if (!cdl__group_region_ok(h->rows_off, h->nslots * h->rows_cap, sizeof(uint32_t), 64, size, &end))
        CDL_REJECT("row marks outside the object");
    if (!cdl__group_region_ok(h->entries_off, h->cache_bytes ? h->num_items : 0, sizeof(cdl__cache_entry), 64, size, &end))
        CDL_REJECT("cache entries outside the object");
    if (!cdl__group_region_ok(h->slab_off, 1, h->cache_bytes, 64, size, &end)) CDL_REJECT("cache slab outside the object");
    if (!cdl__group_region_ok(h->ring_off, h->nslots, h->slot_stride, 64, size, &end)) CDL_REJECT("ring outside the object");
    return 1;
}

/* The contents part: every value later used as an index, a length or a
 * loop bound. Under the object's lock when the object is live. */
static int cdl__group_validate_contents(const cdl__u8 *b, const cdl__group_header *h, char *why, size_t cap) {
    uint64_t world = 0, rank = 0;
    if (!cdl__group_field_value(h, "world", &world) || !cdl__group_field_value(h, "rank", &rank) || world < 1 ||
        rank >= world)
        CDL_REJECT("no valid rank and world among the config fields");
    const uint64_t share = h->num_items / world;
    cdl__stream S;
    memcpy(&S, b + h->stream_off, sizeof S);
    if (S.assign.slot > h->nslots) CDL_REJECT("a pending assignment names slot %u", S.assign.slot);
    if (S.assign.slot && (S.assign.n < 1 || S.assign.n > h->rows_cap || S.assign.pos > share ||
                          S.assign.n > share - S.assign.pos))
        CDL_REJECT("a pending assignment of %u rows at %llu", S.assign.n, (unsigned long long)S.assign.pos);
    if (S.cut_pos > share) CDL_REJECT("batch size cut at %llu of %llu", (unsigned long long)S.cut_pos, (unsigned long long)share);
    if (atomic_load(&S.cache_used) > h->cache_bytes) CDL_REJECT("cache use beyond its budget");
    size_t data, labels, ids;
    data = cdl__round_up((size_t)h->slot_data_cap, 64);
    labels = cdl__round_up((size_t)h->rows_cap * sizeof(int32_t), 64);
    ids = cdl__round_up((size_t)h->rows_cap * sizeof(uint64_t), 64);
    for (uint64_t s = 0; s < h->nslots; s++) {
        cdl__slot sl;
        memcpy(&sl, b + h->slots_off + s * sizeof sl, sizeof sl);
        const uint64_t base = s * h->slot_stride;
        if (sl.data_off != base || sl.labels_off != base + data || sl.ids_off != base + data + labels ||
            sl.targets_off != base + data + labels + ids ||
            sl.nboxes_off != sl.targets_off + cdl__round_up((size_t)(h->rows_cap * h->target_row_bytes), 64))
            CDL_REJECT("slot %llu points outside its part of the ring", (unsigned long long)s);
        if (sl.state != CDL_SLOT_FREE && sl.state != CDL_SLOT_FILLING && sl.state != CDL_SLOT_READY)
            CDL_REJECT("slot %llu is in state %d", (unsigned long long)s, sl.state);
        if (sl.state == CDL_SLOT_FREE) continue;
        if (sl.n < 1 || sl.n > h->rows_cap || sl.rows_claimed > sl.n || sl.rows_done > sl.n ||
            sl.row_bytes != h->row_bytes || sl.pos > share || sl.n > share - sl.pos)
            CDL_REJECT("slot %llu: %u rows of %llu bytes at %llu", (unsigned long long)s, sl.n,
                       (unsigned long long)sl.row_bytes, (unsigned long long)sl.pos);
        if (sl.status < COORDL_ERR_UNSUPPORTED || sl.status > COORDL_END_OF_EPOCH || !cdl__cstr_ok(sl.errmsg, sizeof sl.errmsg))
            CDL_REJECT("slot %llu holds a bad status or message", (unsigned long long)s);
    }
    for (uint64_t i = 0; h->cache_bytes && i < h->num_items; i++) {
        const cdl__cache_entry *ce = (const cdl__cache_entry *)(const void *)(b + h->entries_off) + i;
        uint32_t state, len, room, jpeg;
        uint64_t off;
        memcpy(&state, (const cdl__u8 *)ce + offsetof(cdl__cache_entry, state), sizeof state);
        memcpy(&len, (const cdl__u8 *)ce + offsetof(cdl__cache_entry, len), sizeof len);
        memcpy(&off, (const cdl__u8 *)ce + offsetof(cdl__cache_entry, off), sizeof off);
        memcpy(&room, (const cdl__u8 *)ce + offsetof(cdl__cache_entry, cap), sizeof room);
        memcpy(&jpeg, (const cdl__u8 *)ce + offsetof(cdl__cache_entry, jpeg), sizeof jpeg);
        /* the low bytes are the states; a writing member's index above */
        if ((state & CDL_CE_STATE) > CDL_CE_LOST || state >> CDL_CE_OWNER_SHIFT >= CDL_MAX_MEMBERS ||
            (jpeg & CDL_CE_STATE) > CDL_CE_CLAIMED || jpeg >> CDL_CE_OWNER_SHIFT >= CDL_MAX_MEMBERS)
            CDL_REJECT("cache entry %llu is in state %u/%u", (unsigned long long)i, state, jpeg);
        const uint32_t held = state & CDL_CE_STATE;
        if ((held == CDL_CE_PRESENT || held == CDL_CE_REWRITING) &&
            (len == 0 || len > room || off > h->cache_bytes || room > h->cache_bytes - off))
            CDL_REJECT("cache entry %llu points outside the slab", (unsigned long long)i);
    }
    return 1;
#undef CDL_REJECT
}

/* Checks a group object's bytes before anything in them is trusted: the
 * header (magic, version, this build's structure sizes), every part
 * (stream, slots, row marks, cache entries, slab, ring) inside `size`
 * bytes, in order, without overflow; and with `contents`, every value the
 * code later uses as an index, a length or a loop bound (slot states, row
 * counts and offsets, the pending assignment, stream positions, cache
 * entries, message strings). A pure function of the bytes: it takes no
 * lock, writes nothing and needs no alignment, so a fuzz harness can call
 * it on any input (#include "coordl.c"). Returns 1, or 0 with the first
 * problem in why. */
static int cdl__group_validate(const void *base, uint64_t size, int contents, char *why, size_t why_cap) {
    cdl__group_header h;
    if (!base || size < sizeof h) {
        snprintf(why, why_cap, "%llu bytes: smaller than a group header", (unsigned long long)size);
        return 0;
    }
    memcpy(&h, base, sizeof h);
    if (!cdl__group_validate_layout(&h, size, why, why_cap)) return 0;
    return !contents || cdl__group_validate_contents(base, &h, why, why_cap);
}

/* --- liveness ------------------------------------------------------------ */

enum { CDL_MEMBER_ALIVE = 0, CDL_MEMBER_DEAD, CDL_MEMBER_SILENT };

/* Whether member m lives. Its member thread holds members[m].alive for the
 * member's whole life: a trylock that gets EOWNERDEAD means the holder
 * died (the lock is made consistent and released, ready for the next
 * member at this index); EBUSY means held; free means the member thread has
 * not taken it yet (just joined), and the heartbeat decides. A heartbeat
 * older than timeout_ns is silence (stopped or hung). Pids play no part:
 * they mean nothing across PID namespaces. Takes no stream lock. */
static int cdl__member_probe(cdl__stream *S, int m, uint64_t now, uint64_t timeout_ns, int patient) {
    if (atomic_load(&S->members[m].died_holding_lock)) return CDL_MEMBER_DEAD;
    pthread_mutex_t *alive = &S->members[m].alive;
    int e = pthread_mutex_trylock(alive);
    /* EBUSY may be another prober's moment: where a wrong "alive" would
     * cost (the lock-free stale check of an object of other settings,
     * which several openers may run at once), look again a few times */
    for (int again = 0; patient && e == EBUSY && again < 4; again++) {
        usleep(200);
        e = pthread_mutex_trylock(alive);
    }
    if (e == EOWNERDEAD) {
        (void)cdl__mutex_held(alive, e); /* consistent again, for the index's next member */
        pthread_mutex_unlock(alive);
        return CDL_MEMBER_DEAD;
    }
    if (e == ENOTRECOVERABLE) return CDL_MEMBER_DEAD;
    if (e == 0) pthread_mutex_unlock(alive);
    const uint64_t hb = atomic_load(&S->members[m].heartbeat_ns);
    return now > hb && now - hb > timeout_ns ? CDL_MEMBER_SILENT : CDL_MEMBER_ALIVE;
}

/* The group's liveness timeout (the object's, once attached). */
static uint64_t cdl__group_timeout_ns(const coordl *L) { return (uint64_t)L->member.timeout_ms * 1000000ull; }

/* This member's heartbeat (while it is still the generation it joined as). */
static void cdl__group_beat(coordl *L, uint64_t now) {
    if (cdl__member_current(L)) atomic_store(&L->S->members[L->member.me].heartbeat_ns, now);
}

/* The member thread's stream lock: polled, beating while it waits. A
 * member thread blocked on the lock would fall silent while its process
 * lives: a holder stopped (SIGSTOP, a debugger, a suspended job) for
 * longer than group_timeout_ms would, once continued, find every member
 * that waited for it silent and drop them all. A lock held for
 * microseconds is had at the first try or after a yield. */
static void cdl__lock_beating(coordl *L) {
    int e;
    while ((e = cdl__mutex_lock_until(&L->S->mu, cdl__now_ns() + 10000000ull)) == ETIMEDOUT)
        cdl__group_beat(L, cdl__now_ns()); /* every 10 ms of waiting */
    cdl__lock_acquired(L, e);
}

/* Why a member leaves: it died or fell silent (dropped by another member),
 * or it leaves itself (close, or open giving up). */
enum { CDL_MEMBER_LEAVES = 100 };

/* The one way a member leaves the stream: member m of generation gen is
 * dropped if it still is that generation (and, when judged silent, still
 * silent), and what it held goes back: its claimed rows and consumer bits
 * (stream) and its cache reader records, rewrite claims and half-written
 * entries (cache). Logs why unless it leaves itself. Under mu. */
static void cdl__group_drop(coordl *L, int m, uint64_t gen, int how) {
    cdl__stream *S = L->S;
    if (!cdl__member_is(S, m, gen)) return;
    if (how == CDL_MEMBER_SILENT) { /* it may have spoken since the probe */
        const uint64_t now = cdl__now_ns(), hb = atomic_load(&S->members[m].heartbeat_ns);
        if (!(now > hb && now - hb > cdl__group_timeout_ns(L))) return;
    }
    if (how != CDL_MEMBER_LEAVES)
        cdl__log(L, COORDL_LOG_WARN, "group %s: member %d (pid %d) %s; its work is taken over", L->cfg.group, m,
                 (int)atomic_load(&S->members[m].pid),
                 how == CDL_MEMBER_SILENT                        ? "fell silent for longer than group_timeout_ms"
                 : atomic_load(&S->members[m].died_holding_lock) ? "died holding the group's lock"
                                                                 : "died");
    cdl__stream_drop_member(L, m, gen);
    cdl__cache_drop_member(L, m);
}

/* Probes every other member in the live set and drops those that died or
 * fell silent; returns how many are alive. locked: the caller holds mu
 * (close, or an opener before it joins); otherwise mu is taken, beating
 * while waiting, only to drop (the member thread). Not patient: under the
 * lock only member threads probe at the same moment, and they belong to a
 * live group anyway; a wait here would hold up every member's workers. */
static int cdl__group_sweep(coordl *L, int locked) {
    cdl__stream *S = L->S;
    const uint64_t now = cdl__now_ns();
    int alive = 0;
    for (int m = 0; m < CDL_MAX_MEMBERS; m++) {
        if (m == L->member.me || !(atomic_load(&S->live_mask) >> m & 1u)) continue;
        const uint64_t gen = atomic_load(&S->members[m].gen);
        const int how = cdl__member_probe(S, m, now, cdl__group_timeout_ns(L), 0);
        if (how == CDL_MEMBER_ALIVE) {
            alive++;
            continue;
        }
        if (!locked) cdl__lock_beating(L);
        cdl__group_drop(L, m, gen, how);
        if (!locked) cdl__unlock(L);
    }
    return alive;
}

/* One round of the member thread: this member's heartbeat, then every
 * other member that died or fell silent is dropped. The only place where
 * members are reaped. */
static void cdl__group_reap(coordl *L) {
    if (!cdl__member_current(L)) return; /* a dropped member reaps nobody */
    cdl__group_beat(L, cdl__now_ns());
    cdl__test_hook(L, "heartbeat");
    cdl__group_sweep(L, 0);
}

/* The member thread: holds this member's liveness lock for the member's
 * life and every period (a quarter of group_timeout_ms, at most 50 ms)
 * beats and reaps. Once this member has been dropped it gives the lock up,
 * so that its index can serve a new member. */
static void *cdl__member_main(void *arg) {
    coordl *L = arg;
    cdl__stream *S = L->S;
    pthread_setname_np(pthread_self(), "coordl-member");
    pthread_mutex_t *alive = &S->members[L->member.me].alive;
    int held = cdl__mutex_held(alive, pthread_mutex_lock(alive)); /* a dead predecessor at this index */
    long period_ms = (long)(L->member.timeout_ms / 4);
    period_ms = period_ms < 1 ? 1 : period_ms > 50 ? 50 : period_ms;
    cdl__group_beat(L, cdl__now_ns()); /* alive from here, however long open waited for the lock */
    pthread_mutex_lock(&L->member.mu);
    L->member.running = 1; /* open waits for this: from now on a death is seen at once */
    pthread_cond_broadcast(&L->member.cv);
    while (!L->member.stop) {
        pthread_mutex_unlock(&L->member.mu);
        cdl__group_reap(L);
        if (held && !cdl__member_current(L)) {
            pthread_mutex_unlock(alive);
            held = 0;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += period_ms * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_mutex_lock(&L->member.mu);
        if (!L->member.stop) pthread_cond_timedwait(&L->member.cv, &L->member.mu, &ts);
    }
    pthread_mutex_unlock(&L->member.mu);
    if (held) pthread_mutex_unlock(alive);
    return NULL;
}

static coordl_status cdl__member_thread_start(coordl *L) {
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) return cdl__open_fail(COORDL_ERR_NOMEM, "cannot start the member thread");
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int e = pthread_mutex_init(&L->member.mu, NULL);
    if (!e) e = pthread_cond_init(&L->member.cv, &ca);
    pthread_condattr_destroy(&ca);
    if (e) return cdl__open_fail(COORDL_ERR_NOMEM, "cannot start the member thread: %s", strerror(e));
    L->member.sync_ready = 1;
    e = pthread_create(&L->member.thread, NULL, cdl__member_main, L);
    if (e) return cdl__open_fail(COORDL_ERR_NOMEM, "cannot start the member thread: %s", strerror(e));
    L->member.thread_started = 1;
    /* until it holds the liveness lock, only the heartbeat would tell this
     * member's death: open returns after that window, not within it */
    pthread_mutex_lock(&L->member.mu);
    while (!L->member.running) pthread_cond_wait(&L->member.cv, &L->member.mu);
    pthread_mutex_unlock(&L->member.mu);
    return COORDL_OK;
}

CDL_PRIVATE void cdl__member_thread_stop(coordl *L) {
    if (L->member.thread_started) {
        pthread_mutex_lock(&L->member.mu);
        L->member.stop = 1;
        pthread_cond_signal(&L->member.cv);
        pthread_mutex_unlock(&L->member.mu);
        pthread_join(L->member.thread, NULL);
        L->member.thread_started = 0;
    }
    if (L->member.sync_ready) {
        pthread_mutex_destroy(&L->member.mu);
        pthread_cond_destroy(&L->member.cv);
        L->member.sync_ready = 0;
    }
}

/* --- creating, finding and joining the object ------------------------- */

/* Retires a mapped object: under its own lock, the first process to find
 * it not yet retired marks it and unlinks its name; anyone later sees the
 * mark and leaves the name alone (it may already be a new object's). A
 * lock not had within a second is left alone (the object stays). */
static void cdl__group_retire(const char *name, cdl__group_header *h, cdl__stream *os) {
    if (cdl__mutex_held(&os->mu, cdl__mutex_lock_until(&os->mu, cdl__now_ns() + 1000000000ull))) {
        if (!atomic_load(&h->retired)) {
            atomic_store(&h->retired, 1u);
            shm_unlink(name);
        }
        pthread_mutex_unlock(&os->mu);
    }
}

/* Points the handle at the parts of a mapped object. */
static void cdl__group_attach(coordl *L, cdl__group_header *h) {
    cdl__u8 *base = (cdl__u8 *)h;
    if (h->timeout_ms != (uint32_t)L->cfg.group_timeout_ms)
        cdl__log(L, COORDL_LOG_INFO, "group %s: members are judged silent after the group's group_timeout_ms of %u ms "
                 "(set by the member that created it; this one asked for %d ms)", L->cfg.group, h->timeout_ms,
                 L->cfg.group_timeout_ms);
    L->member.timeout_ms = h->timeout_ms;
    L->S = (cdl__stream *)(void *)(base + h->stream_off);
    L->ring.slots = (cdl__slot *)(void *)(base + h->slots_off);
    L->ring.row_state = (uint32_t *)(void *)(base + h->rows_off);
    if (L->cfg.cache_bytes) {
        L->cache.entries = (cdl__cache_entry *)(void *)(base + h->entries_off);
        L->cache.arena.base = base + h->slab_off;
        L->cache.arena.bytes = L->cfg.cache_bytes;
        L->cache.arena.borrowed = 1;
    }
    L->ring.arena.base = base + h->ring_off;
    L->ring.arena.bytes = h->total_bytes - h->ring_off;
    L->ring.arena.borrowed = 1;
}

static void cdl__group_detach(coordl *L, void *p, uint64_t bytes) {
    munmap(p, bytes);
    L->S = NULL;
    L->ring.slots = NULL;
    L->ring.row_state = NULL;
    L->cache.entries = NULL;
    memset(&L->cache.arena, 0, sizeof L->cache.arena);
    memset(&L->ring.arena, 0, sizeof L->ring.arena);
}

/* Joins the stream as a new generation of a free index: one not in the
 * group whose liveness lock nobody holds (a dropped member's process may
 * still be alive, stopped, and hold its own). Under mu. */
static coordl_status cdl__group_join(coordl *L, uint64_t start_epoch) {
    cdl__stream *S = L->S;
    int me = -1;
    for (int m = 0; m < CDL_MAX_MEMBERS && me < 0; m++) {
        if (atomic_load(&S->live_mask) >> m & 1u) continue;
        if (cdl__mutex_held(&S->members[m].alive, pthread_mutex_trylock(&S->members[m].alive))) {
            pthread_mutex_unlock(&S->members[m].alive);
            me = m;
        }
    }
    if (me < 0)
        return cdl__open_fail(COORDL_ERR_GROUP, "group %s: full (%d members, and no free member index)",
                              L->cfg.group, __builtin_popcount(atomic_load(&S->live_mask)));
    cdl__member *M = &S->members[me];
    L->member.me = me;
    L->member.bit = 1u << me;
    L->member.my_gen = atomic_load(&M->gen) + 1;
    atomic_store(&M->gen, L->member.my_gen);
    atomic_store(&M->pid, (int32_t)getpid());
    atomic_store(&M->died_holding_lock, 0u);
    atomic_store(&M->heartbeat_ns, cdl__now_ns());
    M->start_epoch = start_epoch;
    atomic_fetch_or(&S->live_mask, L->member.bit);
    /* from here a death holding the lock drops this member at once */
    S->lock_owner = me;
    S->lock_owner_gen = L->member.my_gen;
    L->consumer.cur_epoch = start_epoch;
    return COORDL_OK;
}

/* Creates the object with O_EXCL (never opening one another process made)
 * and joins it as its first member before publishing it (ready = 1), so a
 * visible object with no live member is always a stale one. *exists: the
 * name is taken. On success the object is mapped and attached. */
static coordl_status cdl__group_create(coordl *L, const cdl__group_header *want, int *exists) {
    const char *g = L->cfg.group;
    *exists = 0;
    int fd = shm_open(L->member.shm_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == EEXIST) { *exists = 1; return COORDL_OK; }
        return cdl__open_fail(COORDL_ERR_IO, "group %s: shm_open %s: %s", g, L->member.shm_name, strerror(errno));
    }
    struct statvfs vs;
    if (statvfs("/dev/shm", &vs) == 0 && (uint64_t)vs.f_bavail * vs.f_frsize < want->total_bytes) {
        close(fd);
        shm_unlink(L->member.shm_name);
        return cdl__open_fail(COORDL_ERR_NOMEM, "group %s: needs %llu bytes of /dev/shm (cache %llu, ring %llu, "
                              "tables %llu) but %llu are free; lower cache_bytes or enlarge /dev/shm", g,
                              (unsigned long long)want->total_bytes, (unsigned long long)L->cfg.cache_bytes,
                              (unsigned long long)(want->total_bytes - want->ring_off),
                              (unsigned long long)want->slab_off,
                              (unsigned long long)((uint64_t)vs.f_bavail * vs.f_frsize));
    }
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)want->total_bytes) == 0)
        p = mmap(NULL, want->total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(L->member.shm_name);
        return cdl__open_fail(COORDL_ERR_NOMEM, "group %s: cannot size or map %llu bytes of shared memory: %s; lower "
                              "cache_bytes, prefetch_batches or batch_size", g, (unsigned long long)want->total_bytes, strerror(e));
    }
    cdl__group_header *h = p;
    *h = *want;
    cdl__group_attach(L, h);
    coordl_status rc = cdl__stream_init(L->S, 1);
    if (rc != COORDL_OK) {
        cdl__group_detach(L, h, want->total_bytes);
        shm_unlink(L->member.shm_name);
        return rc;
    }
    cdl__ring_layout(L);
    L->member.shm_base = h;
    L->member.shm_bytes = want->total_bytes;
    rc = cdl__group_join(L, 0);
    if (rc != COORDL_OK) return rc;
    L->S->lock_owner = -1;
    L->S->started = L->cfg.group_size == 1;
    atomic_store(&h->ready, 1u);
    return COORDL_OK;
}

/* Opens and maps the existing object once its creator has published it.
 * Refuses an object of another user, or not a regular file, or open to
 * other users: such an object was not made by this user's coordl, and its
 * contents cannot be trusted. *retry: it vanished, or its creator died
 * while setting it up (then its name is unlinked if it still names it). */
static coordl_status cdl__group_map_existing(coordl *L, uint64_t deadline, void **out, uint64_t *bytes, int *retry) {
    const char *g = L->cfg.group;
    *retry = 0;
    *out = NULL;
    int fd = shm_open(L->member.shm_name, O_RDWR | O_CLOEXEC, 0); /* glibc adds O_NOFOLLOW */
    if (fd < 0) {
        if (errno == ENOENT) { *retry = 1; return COORDL_OK; }
        return cdl__open_fail(COORDL_ERR_GROUP, "group %s: cannot open /dev/shm%s: %s", g, L->member.shm_name, strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 077)) {
        const int bad_owner = sb.st_uid != geteuid();
        close(fd);
        if (bad_owner)
            return cdl__open_fail(COORDL_ERR_GROUP, "group %s: /dev/shm%s belongs to uid %u, not to this process's uid %u: "
                                  "another user made it, and coordl does not use another user's object; remove it "
                                  "(as its owner or root) or pick another group name", g, L->member.shm_name,
                                  (unsigned)sb.st_uid, (unsigned)geteuid());
        return cdl__open_fail(COORDL_ERR_GROUP, "group %s: /dev/shm%s is not a private regular file (mode %04o); "
                              "coordl did not make it: remove it or pick another group name", g, L->member.shm_name,
                              (unsigned)(sb.st_mode & 07777));
    }
    void *p = MAP_FAILED;
    for (;;) {
        if (fstat(fd, &sb) == 0 && (uint64_t)sb.st_size >= sizeof(cdl__group_header)) {
            p = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p != MAP_FAILED && atomic_load(&((cdl__group_header *)p)->ready)) break;
            if (p != MAP_FAILED) munmap(p, (size_t)sb.st_size);
            p = MAP_FAILED;
        }
        if (cdl__now_ns() > deadline) break;
        usleep(2000);
    }
    close(fd);
    if (p == MAP_FAILED) { /* its creator died while setting it up */
        struct stat now_sb;
        int fd2 = shm_open(L->member.shm_name, O_RDWR | O_CLOEXEC, 0);
        if (fd2 >= 0) {
            if (fstat(fd2, &now_sb) == 0 && now_sb.st_ino == sb.st_ino) shm_unlink(L->member.shm_name);
            close(fd2);
        }
        *retry = 1;
        return COORDL_OK;
    }
    *out = p;
    *bytes = (uint64_t)sb.st_size;
    return COORDL_OK;
}

/* Live members of an attached object, probed without its lock and
 * without dropping anyone. */
static int cdl__group_probe_alive(coordl *L) {
    const uint64_t now = cdl__now_ns();
    int alive = 0;
    for (int m = 0; m < CDL_MAX_MEMBERS; m++)
        if ((atomic_load(&L->S->live_mask) >> m & 1u) &&
            cdl__member_probe(L->S, m, now, cdl__group_timeout_ns(L), 1) == CDL_MEMBER_ALIVE)
            alive++;
    return alive;
}

/* The object's settings equal this member's (a config field by name), and
 * so does its geometry. */
static coordl_status cdl__group_compare(coordl *L, const cdl__group_header *got, const cdl__group_header *want) {
    const char *g = L->cfg.group;
    for (uint32_t i = 0; i < want->nfields; i++)
        if (i >= got->nfields || strcmp(got->fields[i].name, want->fields[i].name) != 0 ||
            got->fields[i].value != want->fields[i].value)
            return cdl__open_fail(COORDL_ERR_GROUP, "group %s: %s differs from the group's (this member %llu, the "
                                  "group %llu); members must open with the same settings", g, want->fields[i].name,
                                  (unsigned long long)want->fields[i].value,
                                  (unsigned long long)(i < got->nfields ? got->fields[i].value : 0));
    const size_t geometry = sizeof *want - offsetof(cdl__group_header, nslots);
    if (got->total_bytes != want->total_bytes ||
        memcmp((const cdl__u8 *)got + offsetof(cdl__group_header, nslots),
               (const cdl__u8 *)want + offsetof(cdl__group_header, nslots), geometry) != 0)
        return cdl__open_fail(COORDL_ERR_GROUP, "group %s: the shared layout differs (%llu bytes, expected %llu)", g,
                              (unsigned long long)got->total_bytes, (unsigned long long)want->total_bytes);
    return COORDL_OK;
}

/* Attaches to the existing object: validated (layout, then contents under
 * its lock), stale members dropped (an object none of whose members lives
 * is retired: *retry), settings compared. Returns with the lock held and
 * the object attached, ready for cdl__group_join. */
static coordl_status cdl__group_attach_existing(coordl *L, const cdl__group_header *want, uint64_t deadline,
                                                int *retry) {
    const char *g = L->cfg.group;
    void *p = NULL;
    uint64_t bytes = 0;
    char why[200];
    coordl_status rc = cdl__group_map_existing(L, deadline, &p, &bytes, retry);
    if (rc != COORDL_OK || *retry) return rc;
    if (!cdl__group_validate(p, bytes, 0, why, sizeof why)) {
        munmap(p, bytes);
        return cdl__open_fail(COORDL_ERR_GROUP, "group %s: /dev/shm%s is not a usable coordl group object (%s); "
                              "if no process uses it, remove it (rm /dev/shm%s) or pick another group name", g,
                              L->member.shm_name, why, L->member.shm_name);
    }
    cdl__group_header *h = p;
    cdl__group_attach(L, h);
    L->member.me = -1;
    if (h->nslots != L->ring.nslots || h->rows_cap != L->geom.slot_rows_cap || h->num_items != L->index.num_items ||
        h->cache_bytes != L->cfg.cache_bytes) {
        /* Another geometry: this member's repair and recount would index the
         * object wrongly, so it neither locks nor drops anyone; an object
         * with no member alive is retired, else the settings differ. */
        if (cdl__group_probe_alive(L) == 0) {
            cdl__log(L, COORDL_LOG_WARN, "group %s: %s was left by a crashed run; replacing it", g, L->member.shm_name);
            cdl__group_retire(L->member.shm_name, h, L->S);
            cdl__group_detach(L, p, bytes);
            *retry = 1;
            return COORDL_OK;
        }
        rc = cdl__group_compare(L, h, want);
        cdl__group_detach(L, p, bytes);
        return rc;
    }
    /* the contents are checked under the lock, before repair may act on
     * them after a holder died; the lock is waited for within the open's
     * deadline (a damaged object's may never come free) */
    int e = cdl__mutex_lock_until(&L->S->mu, deadline);
    if (e != 0 && e != EOWNERDEAD) {
        cdl__group_detach(L, p, bytes);
        return cdl__open_fail(COORDL_ERR_TIMEOUT, "group %s: the lock of /dev/shm%s did not come free within "
                              "group_timeout_ms (%d ms): a member may be stopped while holding it, or the object "
                              "is damaged (%s)", g, L->member.shm_name, L->cfg.group_timeout_ms, strerror(e));
    }
    if (!cdl__group_validate(p, bytes, 1, why, sizeof why)) {
        (void)cdl__mutex_held(&L->S->mu, e); /* left as found: nothing repaired */
        pthread_mutex_unlock(&L->S->mu);
        cdl__group_detach(L, p, bytes);
        return cdl__open_fail(COORDL_ERR_GROUP, "group %s: /dev/shm%s is not a usable coordl group object (%s); "
                              "if no process uses it, remove it (rm /dev/shm%s) or pick another group name", g,
                              L->member.shm_name, why, L->member.shm_name);
    }
    cdl__lock_acquired(L, e);
    /* stale first: an object whose every recorded member is gone is
     * replaced whatever settings it was made with */
    if (cdl__group_sweep(L, 1) == 0 || atomic_load(&h->retired)) {
        if (!atomic_load(&h->retired))
            cdl__log(L, COORDL_LOG_WARN, "group %s: %s was left by a crashed run; replacing it", g, L->member.shm_name);
        if (!atomic_load(&h->retired)) {
            atomic_store(&h->retired, 1u);
            shm_unlink(L->member.shm_name);
        }
        cdl__unlock(L);
        cdl__group_detach(L, p, bytes);
        *retry = 1;
        return COORDL_OK;
    }
    rc = cdl__group_compare(L, h, want);
    if (rc != COORDL_OK) {
        cdl__unlock(L);
        cdl__group_detach(L, p, bytes);
        return rc;
    }
    L->member.shm_base = h;
    L->member.shm_bytes = bytes;
    return COORDL_OK;
}

/* Waits (bounded by the deadline) until group_size members have joined. */
static coordl_status cdl__group_wait_started(coordl *L, uint64_t deadline) {
    cdl__stream *S = L->S;
    while (!S->started) {
        if (!cdl__member_current(L))
            return cdl__open_fail(COORDL_ERR_GROUP, "group %s: dropped while waiting for the other members",
                                  L->cfg.group);
        if (cdl__now_ns() > deadline) {
            const int have = __builtin_popcount(atomic_load(&S->live_mask));
            cdl__group_drop(L, L->member.me, L->member.my_gen, CDL_MEMBER_LEAVES);
            return cdl__open_fail(COORDL_ERR_TIMEOUT, "group %s: only %d of group_size %d members joined within "
                                  "group_timeout_ms (%d ms)", L->cfg.group, have, L->cfg.group_size,
                                  L->cfg.group_timeout_ms);
        }
        const uint64_t left_ms = (deadline - cdl__now_ns()) / 1000000ull + 1;
        cdl__wait_ms(L, &S->ready_cv, left_ms > 1000 ? 1000 : (int)left_ms); /* a join wakes it; the deadline too */
    }
    return COORDL_OK;
}

/* Page-locks the mapping per cache_pin and registers its cache slab and
 * ring with the pin callback (once per process; unregistered before the
 * unmap). */
static void cdl__group_pin(coordl *L) {
    cdl__group_header *h = L->member.shm_base;
    if (L->cfg.cache_pin != COORDL_PIN_OFF) {
#ifdef MLOCK_ONFAULT
        if (mlock2(h, L->member.shm_bytes, MLOCK_ONFAULT) == 0) L->stats.st.pinned_bytes = L->member.shm_bytes;
#endif
    }
    if (L->cfg.cache_bytes)
        cdl__arena_borrow(L, &L->cache.arena, (cdl__u8 *)h + h->slab_off, (size_t)L->cfg.cache_bytes, "cache slab");
    cdl__arena_borrow(L, &L->ring.arena, (cdl__u8 *)h + h->ring_off, (size_t)(h->total_bytes - h->ring_off),
                      "batch ring");
}

/* Creates or joins the group's object, starts the member thread and waits
 * for group_size members. */
CDL_PRIVATE coordl_status cdl__group_open(coordl *L) {
    const char *g = L->cfg.group;
    /* the name was checked with the config (config.c): it names files */
    if (L->cfg.cache_policy == COORDL_CACHE_LRU)
        return cdl__open_fail(COORDL_ERR_UNSUPPORTED, "group: cache_policy LRU cannot be shared; use MinIO");
    snprintf(L->member.shm_name, sizeof L->member.shm_name, "/coordl-%s", g);
    cdl__group_header want;
    cdl__group_want(L, &want);
    cdl__group_fit_shm(L, &want);
    L->member.timeout_ms = (uint32_t)L->cfg.group_timeout_ms; /* the object's, once attached */
    /* how long this member waits to open is its own setting */
    const uint64_t deadline = cdl__now_ns() + (uint64_t)L->cfg.group_timeout_ms * 1000000ull;
    int creator = 0, attached = 0;
    /* members racing to replace a stale object retry until one of them
     * has created the new one; bounded by group_timeout_ms */
    for (int attempt = 0; !attached && (attempt < 8 || cdl__now_ns() < deadline) && attempt < 100000; attempt++) {
        int exists = 0, retry = 0;
        coordl_status rc = cdl__group_create(L, &want, &exists);
        if (rc != COORDL_OK) return rc;
        if (!exists) {
            creator = attached = 1;
            break;
        }
        rc = cdl__group_attach_existing(L, &want, deadline, &retry);
        if (rc != COORDL_OK) return rc;
        if (retry) {
            usleep(1000);
            continue;
        }
        attached = 1; /* holding the lock */
    }
    if (!attached) return cdl__open_fail(COORDL_ERR_GROUP, "group %s: could not create or join %s", g, L->member.shm_name);
    cdl__group_pin(L);
    cdl__stream *S = L->S;
    coordl_status rc = COORDL_OK;
    if (creator) {
        cdl__lock(L);
    } else if (S->started && !L->cfg.group_late_join) {
        rc = cdl__open_fail(COORDL_ERR_GROUP, "group %s: already started with %d members; set group_late_join "
                            "to join at the next epoch", g, __builtin_popcount(atomic_load(&S->live_mask)));
    } else if (!S->started && __builtin_popcount(atomic_load(&S->live_mask)) >= L->cfg.group_size) {
        rc = cdl__open_fail(COORDL_ERR_GROUP, "group %s: full (%d members)", g,
                            __builtin_popcount(atomic_load(&S->live_mask)));
    } else {
        /* a late member starts with the first epoch nobody has begun */
        rc = cdl__group_join(L, S->started ? S->claim_epoch + 1 : 0);
        if (rc == COORDL_OK && !S->started && __builtin_popcount(atomic_load(&S->live_mask)) >= L->cfg.group_size)
            S->started = 1;
        cdl__broadcast(L, &S->ready_cv);
        cdl__broadcast(L, &S->work_cv);
    }
    /* the private ring arrays (MPI's per-row bookkeeping) and the ring's
     * geometry are set before the member thread exists: it reads them when
     * it drops a dead member's rows */
    if (rc == COORDL_OK) rc = cdl__ring_alloc(L, L->geom.slot_rows_cap, L->geom.slot_data_cap);
    if (rc == COORDL_OK) {
        cdl__test_hook(L, "joined");
        rc = cdl__member_thread_start(L);
    }
    if (rc == COORDL_OK) rc = cdl__group_wait_started(L, deadline);
    if (rc == COORDL_OK) cdl__stream_check(L, "join");
    cdl__unlock(L);
    if (rc == COORDL_OK)
        cdl__log(L, COORDL_LOG_INFO, "group %s: %s as member %d of %d", g, creator ? "created" : "joined", L->member.me,
                 L->cfg.group_size);
    return rc;
}

/* Leaves the group (if still in it); the last member out removes the
 * object; then the member thread stops and the mapping goes. */
CDL_PRIVATE void cdl__group_leave(coordl *L) {
    cdl__group_header *h = L->member.shm_base;
    if (!h) return;
    if (L->S && L->member.me >= 0) {
        cdl__lock(L);
        if (cdl__member_current(L)) {
            cdl__group_drop(L, L->member.me, L->member.my_gen, CDL_MEMBER_LEAVES);
            cdl__group_sweep(L, 1); /* members that died since the last round are not "still in" */
        }
        /* the last one out retires the name under the lock, so a process
         * joining right now sees `retired` and starts over */
        if (atomic_load(&L->S->live_mask) == 0 && !atomic_load(&h->retired)) {
            atomic_store(&h->retired, 1u);
            shm_unlink(L->member.shm_name);
            cdl__ix_group_remove(L); /* the index the group shared */
        }
        cdl__unlock(L);
    }
    cdl__member_thread_stop(L);
    cdl__group_detach(L, h, L->member.shm_bytes);
    L->member.shm_base = NULL;
}

