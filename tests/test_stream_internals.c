/*
 * test_stream_internals.c - the stream state machine (coordl.c section 14)
 * and the group object's validator (section 15), white-box: this file
 * includes coordl.c and drives the transitions directly on a stream of its
 * own, with members simulated by switching the handle's identity, so each
 * interleaving is exact instead of left to the scheduler.
 *
 * What is checked: the invariant checker accepts every state the
 * transitions produce and rejects broken ones (so a COORDL_DEBUG build
 * fails where a transition breaks one); a row completed by a member after
 * it was dropped counts nothing (its rows were already put back: no second
 * decrement of the rows in flight); a member killed inside the drop leaves
 * marks that repair frees; a dropped member's release and completion do
 * not touch the member that took its index; a stale batch handle releases
 * nothing; row marks encode (member, generation) without colliding with
 * "free" or "done"; cdl__group_validate accepts a real group object and
 * rejects every offset, size and index that would point outside it, and
 * never reads outside the bytes it is given (run under ASan); a cache
 * entry's rewrite has one owner, and a dropped member's reader records,
 * rewrite claims and half-written entries are given back.
 */
#include "coordl.c"

#include "test_util.h"

#include <stdlib.h>
#include <string.h>

/* ---- a stream of our own -------------------------------------------- */

#define ROWS 4u
#define SLOTS 3u
#define ITEMS 48u

/* A simulated member: its identity and its consumer's state (which the
 * handle holds for the member it is acting as). */
typedef struct {
    int me;
    uint64_t gen;
    uint32_t held;
    uint64_t cur_epoch, cur_pos, cur_index;
} identity;

static identity *g_acting; /* whose state the handle holds now */

static coordl *fake_open(void)
{
    coordl *L = calloc(1, sizeof *L);
    assert_non_null(L);
    L->alloc.malloc_fn = cdl__default_malloc;
    L->alloc.realloc_fn = cdl__default_realloc;
    L->alloc.free_fn = cdl__default_free;
    L->lock_repair = cdl__stream_repair;
    L->cfg = coordl_config_default();
    L->cfg.source = "fake";
    L->cfg.log = NULL;
    L->cfg.cache_pin = COORDL_PIN_OFF;
    L->cfg.batch_size = ROWS;
    L->cfg.shuffle = 0;
    L->index.num_items = ITEMS;
    L->sampler.share = ITEMS;
    L->geom.row_bytes = 8;
    L->ring.nslots = SLOTS;
    L->S = calloc(1, sizeof *L->S);
    assert_non_null(L->S);
    assert_int_equal(cdl__stream_init(L->S, 0), COORDL_OK);
    L->member.me = 0;
    L->member.my_gen = 1;
    L->member.bit = 1;
    atomic_store(&L->S->members[0].gen, 1);
    atomic_store(&L->S->live_mask, 1u);
    L->S->started = 1;
    assert_int_equal(cdl__ring_alloc(L, ROWS, ROWS * 8), COORDL_OK);
    g_acting = NULL;
    return L;
}

static void fake_close(coordl *L)
{
    cdl__ring_free(L);
    pthread_mutex_destroy(&L->S->mu);
    free(L->S);
    free(L);
}

/* Member m joins with a fresh generation (what cdl__group_join does). */
static identity fake_join(coordl *L, int m)
{
    identity id = {m, atomic_load(&L->S->members[m].gen) + 1, 0, 0, 0, 0};
    atomic_store(&L->S->members[m].gen, id.gen);
    L->S->members[m].start_epoch = 0;
    atomic_fetch_or(&L->S->live_mask, 1u << m);
    return id;
}

/* Acts as member id from now on: the handle's consumer state goes back to
 * the member it was acting as, and id's comes in. */
static void act_as(coordl *L, identity *id)
{
    if (g_acting) {
        g_acting->held = L->consumer.held;
        g_acting->cur_epoch = L->consumer.cur_epoch;
        g_acting->cur_pos = L->consumer.cur_pos;
        g_acting->cur_index = L->consumer.cur_index;
    }
    L->member.me = id->me;
    L->member.my_gen = id->gen;
    L->member.bit = 1u << id->me;
    L->consumer.held = id->held;
    L->consumer.cur_epoch = id->cur_epoch;
    L->consumer.cur_pos = id->cur_pos;
    L->consumer.cur_index = id->cur_index;
    g_acting = id;
}

static void assert_invariants(coordl *L, const char *when)
{
    char why[256];
    cdl__lock(L);
    int ok = cdl__stream_invariants(L, why, sizeof why);
    cdl__unlock(L);
    if (!ok)
        fail_msg("%s: %s", when, why);
}

static void assert_broken(coordl *L, const char *needle)
{
    char why[256];
    cdl__lock(L);
    int ok = cdl__stream_invariants(L, why, sizeof why);
    cdl__unlock(L);
    if (ok)
        fail_msg("the invariant checker accepted a stream with %s", needle);
    if (!strstr(why, needle))
        fail_msg("the checker said \"%s\", expected it to name \"%s\"", why, needle);
}

static void claim(coordl *L, cdl__claim *c)
{
    cdl__lock(L);
    assert_int_equal(cdl__stream_claim(L, c, 0), 1);
    cdl__unlock(L);
}

static void complete(coordl *L, const cdl__claim *c)
{
    cdl__counters n;
    memset(&n, 0, sizeof n);
    n.items = 1;
    cdl__row_result r = {COORDL_OK, c->pos, 7, NULL, NULL, "", 0};
    cdl__lock(L);
    cdl__stream_complete(L, c, &n, &r);
    cdl__unlock(L);
}

static coordl_status take(coordl *L, coordl_batch *b)
{
    uint64_t e;
    cdl__lock(L);
    coordl_status rc = cdl__consumer_next(L, b, &e);
    cdl__unlock(L);
    return rc;
}

static void release(coordl *L, coordl_batch *b)
{
    cdl__lock(L);
    cdl__stream_release(L, b);
    cdl__unlock(L);
}

/* Claims and completes every row of the next batch. */
static void fill_one(coordl *L)
{
    cdl__claim c[ROWS];
    for (unsigned r = 0; r < ROWS; r++)
        claim(L, &c[r]);
    for (unsigned r = 0; r < ROWS; r++)
        complete(L, &c[r]);
}

static void test_invariants_hold_through_every_transition(void **state)
{
    (void)state;
    coordl *L = fake_open();
    identity a = {0, 1, 0, 0, 0, 0}, b = fake_join(L, 1);
    assert_invariants(L, "open");
    for (int k = 0; k < 5; k++) {
        cdl__claim c1, c2;
        act_as(L, &a);
        claim(L, &c1);
        assert_invariants(L, "claim");
        act_as(L, &b);
        claim(L, &c2);
        complete(L, &c2);
        assert_invariants(L, "complete");
        act_as(L, &a);
        claim(L, &c2);
        complete(L, &c2);
        complete(L, &c1);
        cdl__claim c3;
        claim(L, &c3);
        complete(L, &c3);
        assert_invariants(L, "a batch done");
        coordl_batch ba, bb;
        assert_int_equal(take(L, &ba), COORDL_OK);
        assert_invariants(L, "take");
        act_as(L, &b);
        assert_int_equal(take(L, &bb), COORDL_OK);
        release(L, &bb);
        act_as(L, &a);
        release(L, &ba);
        assert_invariants(L, "release by both");
    }
    cdl__lock(L);
    cdl__stream_pause(L);
    cdl__stream_restart(L, 0);
    cdl__unlock(L);
    assert_invariants(L, "pause and restart");
    fake_close(L);
}

/* The checker must be able to fail: each broken state is named. */
static void test_invariant_checker_rejects_broken_streams(void **state)
{
    (void)state;
    coordl *L = fake_open();
    identity a = {0, 1, 0, 0, 0, 0}, b = fake_join(L, 1);
    cdl__claim c;
    act_as(L, &b);
    claim(L, &c);
    act_as(L, &a);
    cdl__slot *sl = &L->ring.slots[c.slot];
    sl->rows_claimed++;
    assert_broken(L, "claimed");
    sl->rows_claimed--;
    L->S->inflight++;
    assert_broken(L, "in flight");
    L->S->inflight--;
    atomic_fetch_add(&L->S->members[1].gen, 1); /* b's mark now names a dead generation */
    assert_broken(L, "not in the group");
    atomic_fetch_sub(&L->S->members[1].gen, 1);
    assert_invariants(L, "restored");
    L->consumer.held = 3;
    assert_broken(L, "held");
    L->consumer.held = 0;
    L->S->slots_free++;
    assert_broken(L, "counted free");
    L->S->slots_free--;
    fake_close(L);
}

/* A member dropped while preparing a row completes it later: the drop put
 * the row back and took it out of the rows in flight; the completion must
 * count nothing (the old code decremented in-flight a second time). */
static void test_completion_after_drop_counts_nothing(void **state)
{
    (void)state;
    coordl *L = fake_open();
    identity a = {0, 1, 0, 0, 0, 0}, b = fake_join(L, 1);
    cdl__claim cb;
    act_as(L, &b);
    claim(L, &cb);
    act_as(L, &a);
    cdl__lock(L);
    cdl__stream_drop_member(L, b.me, b.gen);
    cdl__unlock(L);
    assert_invariants(L, "drop");
    assert_int_equal(L->S->inflight, 0);
    assert_int_equal(L->ring.slots[cb.slot].rows_claimed, 0);
    act_as(L, &b); /* the resumed zombie finishes its row */
    complete(L, &cb);
    act_as(L, &a);
    assert_invariants(L, "the zombie's completion");
    assert_int_equal(L->S->inflight, 0);
    assert_int_equal(L->ring.slots[cb.slot].rows_done, 0);
    assert_int_equal(cdl__slot_rows(L, &L->ring.slots[cb.slot])[cb.row], CDL_ROW_FREE);
    /* the row is prepared again, by a live member */
    fill_one(L);
    coordl_batch x;
    assert_int_equal(take(L, &x), COORDL_OK);
    assert_int_equal(x.n, ROWS);
    release(L, &x);
    assert_invariants(L, "refilled");
    fake_close(L);
}

/* A member killed inside the drop of another: it left the live set (or
 * only bumped the generation) but did not free the marks. Repair must
 * free them; the old repair counted them claimed forever. */
static void test_repair_after_a_death_inside_drop_frees_the_marks(void **state)
{
    (void)state;
    for (int variant = 0; variant < 2; variant++) {
        coordl *L = fake_open();
        identity a = {0, 1, 0, 0, 0, 0}, b = fake_join(L, 1);
        cdl__claim c1, c2;
        act_as(L, &b);
        claim(L, &c1);
        claim(L, &c2);
        act_as(L, &a);
        if (variant == 0)
            atomic_fetch_and(&L->S->live_mask, ~2u); /* died after leaving the live set */
        else
            atomic_fetch_add(&L->S->members[1].gen, 1); /* died after the new generation */
        assert_broken(L, "not in the group");
        cdl__lock(L);
        cdl__stream_repair(L, -1, 0);
        cdl__unlock(L);
        assert_invariants(L, "repair");
        assert_int_equal(L->S->inflight, 0);
        assert_int_equal(L->ring.slots[c1.slot].rows_claimed, 0);
        fill_one(L);
        assert_invariants(L, "refilled after repair");
        fake_close(L);
    }
}

/* Member 1 is dropped; a new member takes index 1 (a new generation). The
 * dropped one's release of a batch it held, and its completion of a row,
 * must not touch the new member's consumer bits or rows. */
static void test_dropped_member_cannot_touch_the_new_holder_of_its_index(void **state)
{
    (void)state;
    coordl *L = fake_open();
    identity a = {0, 1, 0, 0, 0, 0}, old = fake_join(L, 1);
    fill_one(L);
    coordl_batch zb, nb, ab;
    act_as(L, &old);
    assert_int_equal(take(L, &zb), COORDL_OK);
    cdl__claim zc;
    claim(L, &zc);
    act_as(L, &a);
    cdl__lock(L);
    cdl__stream_drop_member(L, old.me, old.gen);
    cdl__unlock(L);
    identity fresh = fake_join(L, 1);
    assert_true(fresh.gen != old.gen);
    /* the batch was READY before the new member joined: it is not among
     * its consumers; the next batch is */
    act_as(L, &a);
    assert_int_equal(take(L, &ab), COORDL_OK);
    release(L, &ab);
    fill_one(L);
    fresh.cur_pos = ROWS; /* it consumes from batch 1 on */
    fresh.cur_index = 1;
    act_as(L, &fresh);
    assert_int_equal(take(L, &nb), COORDL_OK);
    const cdl__slot *ns = &L->ring.slots[nb.slot_ - 1];
    act_as(L, &old);
    release(L, &zb); /* the zombie's stale batch */
    coordl_batch forged = nb;
    release(L, &forged); /* even a handle naming the new member's slot */
    complete(L, &zc);
    act_as(L, &fresh);
    assert_true(ns->taken_mask & 2u);
    assert_false(ns->done_mask & 2u);
    assert_int_equal(L->consumer.held, 1);
    assert_invariants(L, "after the zombie acted");
    release(L, &nb);
    assert_invariants(L, "the new member released");
    fake_close(L);
}

/* A copy of a released batch names the slot's old generation. */
static void test_stale_handle_releases_nothing(void **state)
{
    (void)state;
    coordl *L = fake_open();
    for (unsigned k = 0; k < SLOTS; k++)
        fill_one(L);
    coordl_batch first, stale, held;
    assert_int_equal(take(L, &first), COORDL_OK);
    stale = first;
    release(L, &first);
    fill_one(L); /* batch 3 goes into the freed slot */
    for (unsigned k = 1; k < SLOTS; k++) {
        coordl_batch x;
        assert_int_equal(take(L, &x), COORDL_OK);
        release(L, &x);
    }
    assert_int_equal(take(L, &held), COORDL_OK);
    assert_int_equal(held.index, SLOTS);
    assert_int_equal(held.slot_, stale.slot_);
    assert_true(held.gen_ != stale.gen_);
    release(L, &stale);
    assert_int_equal(L->consumer.held, 1);
    assert_int_equal(L->ring.slots[held.slot_ - 1].state, CDL_SLOT_READY);
    assert_invariants(L, "stale release");
    release(L, &held);
    assert_int_equal(L->consumer.held, 0);
    fake_close(L);
}

static void test_marks_encode_member_and_generation(void **state)
{
    (void)state;
    const uint64_t gens[] = {0, 1, 2, CDL_MARK_GEN_MASK, CDL_MARK_GEN_MASK + 1, UINT64_MAX};
    for (int m = 0; m < CDL_MAX_MEMBERS; m++)
        for (size_t g = 0; g < sizeof gens / sizeof gens[0]; g++) {
            const uint32_t mark = cdl__mark_for(m, gens[g]);
            assert_true(mark != CDL_ROW_FREE);
            assert_true(mark != CDL_ROW_DONE);
            assert_int_equal((int)(mark & 63u) - 1, m);
            assert_int_equal(mark >> 6, gens[g] & CDL_MARK_GEN_MASK);
        }
}

/* ---- cache entries: one owner per rewrite, readers recorded per member -- */

/* Two workers on the same plain entry: one claim; a rewrite backs off while
 * another reader (of this member or another) reads the bytes, and gives
 * its claim back so the entry is tried later; a dropped member's reader
 * records are given back (the rewrite then goes through), its claims
 * freed, and the entries it was writing made LOST (misses for good). */
static void test_cache_rewrite_has_one_owner_and_a_dropped_member_holds_nothing(void **state)
{
    (void)state;
    coordl *L = fake_open();
    L->cfg.group = "fake";
    cdl__cache_entry *entries = calloc(ITEMS, sizeof *entries);
    uint8_t *slab = calloc(1, 4 * 64);
    assert_non_null(entries);
    assert_non_null(slab);
    L->cache.entries = entries;
    L->cache.arena.base = slab;
    for (uint64_t i = 0; i < 4; i++) {
        entries[i].off = i * 64;
        entries[i].len = 16;
        entries[i].cap = 64;
        memset(slab + i * 64, 'a' + (int)i, 16);
        atomic_store(&entries[i].state, CDL_CE_PRESENT);
        atomic_store(&entries[i].jpeg, CDL_CE_PLAIN);
    }
    atomic_store(&L->S->cache_items, 4);
    atomic_store(&L->S->cache_plain_items, 4);
    identity m0 = {0, 1, 0, 0, 0, 0};
    act_as(L, &m0);
    _Atomic uint32_t *a = cdl__cache_reader(L, 0), *b = cdl__cache_reader(L, 1);
    uint32_t len;
    int kind;
    assert_non_null(cdl__cache_acquire_minio(L, a, 0, &len, &kind, NULL));
    assert_non_null(cdl__cache_acquire_minio(L, b, 0, &len, &kind, NULL));
    assert_int_equal(kind, CDL_CE_PLAIN);
    /* one owner: the second worker does not rewrite it too */
    assert_int_equal(cdl__cache_claim_rewrite(L, 0), 1);
    assert_int_equal(cdl__cache_claim_rewrite(L, 0), 0);
    const uint8_t rewrite[20] = "rewritten-bytes-0123";
    /* b reads: no replace, the claim goes back, the bytes are untouched */
    assert_int_equal(cdl__cache_replace_minio(L, a, 0, rewrite, sizeof rewrite), 0);
    assert_int_equal(atomic_load(&entries[0].jpeg), CDL_CE_PLAIN);
    assert_int_equal(atomic_load(&entries[0].state), CDL_CE_PRESENT);
    assert_int_equal(slab[0], 'a');
    cdl__cache_release_minio(b);
    /* member 1 joins and reads entry 0; it also holds a claim on entry 1,
     * was rewriting entry 2 and admitting entry 3 when it died */
    identity m1 = fake_join(L, 1);
    atomic_store(&L->S->members[1].reading[7], 0 + 1);
    atomic_store(&entries[1].jpeg, CDL_CE_CLAIMED | CDL_CE_OWNER(1));
    atomic_store(&entries[2].jpeg, CDL_CE_CLAIMED | CDL_CE_OWNER(1));
    atomic_store(&entries[2].state, CDL_CE_REWRITING | CDL_CE_OWNER(1));
    atomic_store(&entries[3].state, CDL_CE_ADMITTING | CDL_CE_OWNER(1));
    assert_int_equal(cdl__cache_claim_rewrite(L, 0), 1);
    assert_int_equal(cdl__cache_replace_minio(L, a, 0, rewrite, sizeof rewrite), 0); /* member 1 reads it */
    assert_int_equal(cdl__cache_claim_rewrite(L, 1), 0);                            /* member 1's claim */
    cdl__lock(L); /* a drop runs under the stream lock */
    cdl__group_drop(L, 1, m1.gen, CDL_MEMBER_DEAD);
    cdl__unlock(L);
    assert_int_equal(atomic_load(&L->S->members[1].reading[7]), 0);
    assert_int_equal(atomic_load(&entries[1].jpeg), CDL_CE_PLAIN);
    assert_int_equal(atomic_load(&entries[2].state), CDL_CE_LOST);
    assert_int_equal(atomic_load(&entries[3].state), CDL_CE_LOST);
    assert_null(cdl__cache_acquire_minio(L, b, 2, &len, &kind, NULL)); /* a miss for good */
    assert_int_equal(atomic_load(b), 0);
    assert_false(cdl__cache_holds(L, 3));
    assert_int_equal(atomic_load(&L->S->cache_items), 3);       /* entry 2 is no longer cached */
    assert_int_equal(atomic_load(&L->S->cache_plain_items), 3);
    /* nothing holds entry 0 but its rewriter: replaced */
    assert_int_equal(cdl__cache_claim_rewrite(L, 0), 1);
    assert_int_equal(cdl__cache_replace_minio(L, a, 0, rewrite, sizeof rewrite), 1);
    assert_int_equal(atomic_load(&entries[0].jpeg), CDL_CE_RST);
    assert_int_equal(atomic_load(&entries[0].state), CDL_CE_PRESENT);
    assert_int_equal(entries[0].len, sizeof rewrite);
    assert_memory_equal(slab, rewrite, sizeof rewrite);
    assert_int_equal(atomic_load(&L->S->cache_rst_items), 1);
    assert_int_equal(atomic_load(&L->S->cache_plain_items), 2);
    cdl__cache_release_minio(a);
    L->cache.entries = NULL;
    L->cache.arena.base = NULL;
    free(entries);
    free(slab);
    fake_close(L);
}

/* ---- the group object's validator ----------------------------------- */

static char *g_dir, *g_root;

static uint8_t *copy_of_a_group_object(uint64_t *size)
{
    char group[64];
    snprintf(group, sizeof group, "cdlt-%d-validate", (int)getpid());
    coordl_config cfg = tu_config(g_root);
    cfg.group = group;
    cfg.cache_bytes = 1 << 20;
    cfg.batch_size = 4;
    coordl *L = tu_open(&cfg);
    tu_run run;
    memset(&run, 0, sizeof run);
    assert_int_equal(tu_run_epochs(L, 1, &run), COORDL_OK); /* fills the cache entries */
    tu_run_free(&run);
    /* read through the file (the member thread writes its heartbeat in the
     * mapping meanwhile, without a lock) */
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/coordl-%s", group);
    size_t n = 0;
    uint8_t *bytes = tu_read_file(path, &n);
    assert_int_equal(n, L->member.shm_bytes);
    coordl_close(L);
    *size = n;
    /* one byte off alignment: the validator must not need any */
    uint8_t *buf = malloc(n + 1);
    assert_non_null(buf);
    memcpy(buf + 1, bytes, n);
    free(bytes);
    return buf;
}

static void put_u64(uint8_t *obj, size_t off, uint64_t v) { memcpy(obj + off, &v, sizeof v); }
static uint64_t get_u64(const uint8_t *obj, size_t off)
{
    uint64_t v;
    memcpy(&v, obj + off, sizeof v);
    return v;
}

static void expect_rejected(const uint8_t *obj, uint64_t size, const char *what)
{
    char why[256];
    if (cdl__group_validate(obj, size, 1, why, sizeof why))
        fail_msg("cdl__group_validate accepted an object with %s", what);
}

static void test_group_validate_rejects_bad_offsets_and_sizes(void **state)
{
    (void)state;
    uint64_t size;
    uint8_t *buf = copy_of_a_group_object(&size);
    uint8_t *obj = buf + 1;
    char why[256];
    if (!cdl__group_validate(obj, size, 1, why, sizeof why))
        fail_msg("a real group object was rejected: %s", why);
    assert_false(cdl__group_validate(obj, size - 4096, 0, why, sizeof why));
    assert_false(cdl__group_validate(obj, 16, 0, why, sizeof why));
    assert_false(cdl__group_validate(NULL, size, 0, why, sizeof why));

    static const struct {
        size_t off;
        const char *name;
    } words[] = {
#define W(f) {offsetof(cdl__group_header, f), #f}
        W(total_bytes), W(nslots), W(rows_cap), W(num_items), W(cache_bytes), W(slot_stride), W(slot_data_cap),
        W(row_bytes), W(target_row_bytes), W(stream_bytes), W(slot_bytes), W(entry_bytes), W(stream_off),
        W(slots_off), W(rows_off), W(entries_off), W(slab_off), W(ring_off),
#undef W
    };
    uint8_t *m = malloc(size);
    assert_non_null(m);
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        const uint64_t was = get_u64(obj, words[i].off);
        const uint64_t bad[] = {UINT64_MAX, UINT64_MAX - 63, size, size + 64, 1ull << 62, was * 1024 + size};
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            if (bad[k] == was)
                continue;
            memcpy(m, obj, size);
            put_u64(m, words[i].off, bad[k]);
            char what[96];
            snprintf(what, sizeof what, "%s = %llu", words[i].name, (unsigned long long)bad[k]);
            expect_rejected(m, size, what);
        }
    }
    /* contents: what the code uses as an index, length or loop bound */
    cdl__group_header h;
    memcpy(&h, obj, sizeof h);
    const size_t slot0 = h.slots_off;
    memcpy(m, obj, size);
    put_u64(m, slot0 + offsetof(cdl__slot, data_off), get_u64(obj, slot0 + offsetof(cdl__slot, data_off)) + 8);
    expect_rejected(m, size, "a slot's data outside its part of the ring");
    {
        cdl__slot sl;
        memcpy(m, obj, size);
        memcpy(&sl, m + slot0, sizeof sl);
        sl.state = CDL_SLOT_FILLING;
        sl.n = (uint32_t)h.rows_cap + 1;
        memcpy(m + slot0, &sl, sizeof sl);
        expect_rejected(m, size, "more rows than a slot holds");
        sl.n = 1;
        sl.pos = h.num_items;
        memcpy(m + slot0, &sl, sizeof sl);
        expect_rejected(m, size, "a batch past the end of the epoch");
        sl.pos = 0;
        sl.state = 9;
        memcpy(m + slot0, &sl, sizeof sl);
        expect_rejected(m, size, "a slot in an unknown state");
        sl.state = CDL_SLOT_READY;
        memset(sl.errmsg, 'x', sizeof sl.errmsg);
        memcpy(m + slot0, &sl, sizeof sl);
        expect_rejected(m, size, "an unterminated message");
    }
    {
        cdl__stream S;
        memcpy(m, obj, size);
        memcpy(&S, m + h.stream_off, sizeof S);
        S.assign.slot = (uint32_t)h.nslots + 1;
        memcpy(m + h.stream_off, &S, sizeof S);
        expect_rejected(m, size, "a pending assignment of a slot that does not exist");
    }
    {
        memcpy(m, obj, size);
        const size_t e0 = h.entries_off;
        uint32_t ce_state = CDL_CE_PRESENT, len = 16;
        uint64_t off = h.cache_bytes - 8;
        memcpy(m + e0 + offsetof(cdl__cache_entry, state), &ce_state, sizeof ce_state);
        memcpy(m + e0 + offsetof(cdl__cache_entry, len), &len, sizeof len);
        memcpy(m + e0 + offsetof(cdl__cache_entry, off), &off, sizeof off);
        expect_rejected(m, size, "a cache entry past the slab");
        /* an entry member 3 rewrites, its rewrite claimed by member 3
         * (cache.c): accepted; an owner past the members, or a length
         * past its room, is not */
        memcpy(m, obj, size);
        cdl__cache_entry ce;
        memcpy(&ce, m + e0, sizeof ce);
        assert_int_equal(atomic_load(&ce.state) & CDL_CE_STATE, CDL_CE_PRESENT);
        atomic_store(&ce.state, CDL_CE_REWRITING | CDL_CE_OWNER(3));
        atomic_store(&ce.jpeg, CDL_CE_CLAIMED | CDL_CE_OWNER(3));
        memcpy(m + e0, &ce, sizeof ce);
        if (!cdl__group_validate(m, size, 1, why, sizeof why))
            fail_msg("an entry being rewritten was rejected: %s", why);
        atomic_store(&ce.jpeg, CDL_CE_CLAIMED | CDL_CE_OWNER(CDL_MAX_MEMBERS));
        memcpy(m + e0, &ce, sizeof ce);
        expect_rejected(m, size, "a rewrite claimed by a member that cannot exist");
        atomic_store(&ce.jpeg, CDL_CE_PLAIN);
        ce.cap = ce.len - 1;
        memcpy(m + e0, &ce, sizeof ce);
        expect_rejected(m, size, "a cache entry longer than its room");
    }
    /* random damage anywhere in the header, stream and slots: never a read
     * outside the bytes (ASan), whatever the answer */
    uint64_t rng = 12345;
    const uint64_t span = h.rows_off < size ? h.rows_off : size;
    for (int k = 0; k < 3000; k++) {
        memcpy(m, obj, size);
        for (int j = 0; j < 3; j++)
            m[tu_rand(&rng) % span] = (uint8_t)tu_rand(&rng);
        (void)cdl__group_validate(m, size, 1, why, sizeof why);
    }
    free(m);
    free(buf);
}

static int setup(void **state)
{
    (void)state;
    static const tu_folder_spec spec = {2, 8, 24, 24, 8, TU_PAT_TEXTURED, TU_FMT_JPEG, 90, 3};
    g_dir = tu_mkdtemp();
    g_root = tu_join(g_dir, "data");
    tu_make_image_folder(g_root, &spec);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_root);
    return 0;
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invariants_hold_through_every_transition),
        cmocka_unit_test(test_invariant_checker_rejects_broken_streams),
        cmocka_unit_test(test_completion_after_drop_counts_nothing),
        cmocka_unit_test(test_repair_after_a_death_inside_drop_frees_the_marks),
        cmocka_unit_test(test_dropped_member_cannot_touch_the_new_holder_of_its_index),
        cmocka_unit_test(test_stale_handle_releases_nothing),
        cmocka_unit_test(test_marks_encode_member_and_generation),
        cmocka_unit_test(test_group_validate_rejects_bad_offsets_and_sizes),
        cmocka_unit_test(test_cache_rewrite_has_one_owner_and_a_dropped_member_holds_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
