/*
 * test_tokens_llmc.c - token_order = COORDL_TOKENS_LLMC: llm.c's DataLoader
 * order, its positions, and the token pipeline's default worker count.
 *
 * The reference is a reimplementation of llm.c's batching written for this
 * test from reading llmc/dataloader.h (karpathy/llm.c): per shard,
 * shard_num_samples = (ntok - 1) / (P * B * T); sample j of rank r reads
 * B * T + 1 tokens at token j * P * B * T + r * B * T, inputs = the first
 * B * T, targets = the same shifted by one; when the samples of a shard
 * run out it moves to the next shard, and after the last shard it resets to
 * shard 0 (the next epoch). It reads the shard files itself (header, then
 * uint16 tokens), so nothing of coordl's indexing is shared with it.
 *
 * Shards are unaligned (no size is a multiple of B * T + 1) and every one
 * holds at least one sample at 3 ranks, as llm.c asserts. B = 3, T = 8:
 *   s0 200 tokens, s1 97, s2 331, s3 74, s4 150
 *   samples per shard at P = 1: 8 4 13 3 6 (34); P = 2: 4 2 6 1 3 (16);
 *   P = 3: 2 1 4 1 2 (10).
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B 3
#define T 8
#define NSHARDS 5

static const size_t shard_tokens[NSHARDS] = {200, 97, 331, 74, 150};
static char *g_dir;
static char *g_glob;

static uint32_t tokv(int shard, size_t p)
{
    return (uint32_t)(((uint64_t)shard * 7919u + p * 104729u + 12345u) % 65536u);
}

/* ---- the reference: llm.c's DataLoader, reimplemented ------------------ */

typedef struct {
    uint16_t *tok[NSHARDS]; /* read back from the files */
    size_t ntok[NSHARDS];
    int P, rank;
    size_t shard_idx, sample_idx, shard_num_samples;
} ref_loader;

static void ref_read_shard(ref_loader *R, int s)
{
    char *path = tu_join(g_dir, "shard_%03d.bin", s);
    size_t n;
    uint8_t *bytes = tu_read_file(path, &n);
    int32_t header[256];
    assert_true(n >= sizeof header);
    memcpy(header, bytes, sizeof header);
    assert_int_equal(header[0], 20240520);
    assert_int_equal(header[1], 1);
    R->ntok[s] = (size_t)header[2];
    assert_true(n == sizeof header + R->ntok[s] * 2);
    R->tok[s] = malloc(R->ntok[s] * sizeof(uint16_t));
    assert_non_null(R->tok[s]);
    memcpy(R->tok[s], bytes + sizeof header, R->ntok[s] * 2);
    free(bytes);
    free(path);
}

static void ref_load_shard(ref_loader *R)
{
    R->shard_num_samples = (R->ntok[R->shard_idx] - 1) / ((size_t)R->P * B * T);
}

static void ref_init(ref_loader *R, int P, int rank)
{
    memset(R, 0, sizeof *R);
    R->P = P;
    R->rank = rank;
    for (int s = 0; s < NSHARDS; s++) {
        ref_read_shard(R, s);
        assert_true(R->ntok[s] >= (size_t)P * B * T + 1); /* llm.c's own assert */
    }
    R->shard_idx = 0; /* dataloader_reset */
    R->sample_idx = 0;
    ref_load_shard(R);
}

static void ref_free(ref_loader *R)
{
    for (int s = 0; s < NSHARDS; s++) free(R->tok[s]);
}

static void ref_next_batch(ref_loader *R, int32_t *inputs, int32_t *targets)
{
    if (R->sample_idx >= R->shard_num_samples) { /* dataloader_advance_ */
        if (R->shard_idx == NSHARDS - 1) R->shard_idx = 0;
        else R->shard_idx++;
        R->sample_idx = 0;
        ref_load_shard(R);
    }
    size_t at = R->sample_idx * (size_t)R->P * B * T + (size_t)R->rank * B * T;
    const uint16_t *t = R->tok[R->shard_idx] + at;
    for (int i = 0; i < B * T; i++) {
        inputs[i] = t[i];
        targets[i] = t[i + 1];
    }
    R->sample_idx++;
}

static size_t ref_batches_per_epoch(const ref_loader *R)
{
    size_t n = 0;
    for (int s = 0; s < NSHARDS; s++) n += (R->ntok[s] - 1) / ((size_t)R->P * B * T);
    return n;
}

/* ---- fixture --------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    for (int s = 0; s < NSHARDS; s++) {
        uint32_t *t = malloc(shard_tokens[s] * sizeof *t);
        assert_non_null(t);
        for (size_t p = 0; p < shard_tokens[s]; p++) t[p] = tokv(s, p);
        char *path = tu_join(g_dir, "shard_%03d.bin", s);
        tu_write_shard(path, 1, t, shard_tokens[s]);
        free(path);
        free(t);
    }
    g_glob = tu_join(g_dir, "shard_*.bin");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_glob);
    return 0;
}

static coordl_config llmc_config(int P, int rank, int shuffle)
{
    coordl_config cfg = tu_config(g_glob);
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.token_order = COORDL_TOKENS_LLMC;
    cfg.seq_len = T;
    cfg.batch_size = B;
    cfg.world = P;
    cfg.rank = rank;
    cfg.shuffle = shuffle;
    cfg.seed = 7;
    cfg.threads = 0;
    return cfg;
}

/* ---- llm.c's batches, exactly ----------------------------------------- */

/* 1.5 epochs of every rank at P = 1, 2, 3, batch for batch: coordl_next's
 * data and targets equal the reference's inputs and targets, the epoch ends
 * after exactly the reference's batch count, and coordl_next_into (used
 * for odd ranks) gives the same bytes. */
static void test_shuffle_off_equals_llmc_dataloader_at_1_2_3_ranks(void **state)
{
    (void)state;
    int32_t ri[B * T], rt[B * T], ci[B * T], ct[B * T];
    for (int P = 1; P <= 3; P++)
        for (int r = 0; r < P; r++) {
            ref_loader R;
            ref_init(&R, P, r);
            const size_t per_epoch = ref_batches_per_epoch(&R);
            coordl_config cfg = llmc_config(P, r, 0);
            coordl *L = tu_open(&cfg);
            assert_int_equal(coordl_batches_per_epoch(L), per_epoch);
            size_t step = 0;
            for (int epoch = 0; epoch < 2; epoch++)
                for (size_t k = 0; k < (epoch == 0 ? per_epoch : per_epoch / 2); k++, step++) {
                    ref_next_batch(&R, ri, rt);
                    if (r % 2 == 0) {
                        coordl_batch b;
                        coordl_status rc = coordl_next(L, &b);
                        if (rc == COORDL_END_OF_EPOCH) rc = coordl_next(L, &b);
                        assert_int_equal(rc, COORDL_OK);
                        assert_int_equal(b.n, B);
                        assert_int_equal(b.epoch, (uint64_t)epoch);
                        assert_int_equal(b.index, k);
                        memcpy(ci, b.data, sizeof ci);
                        memcpy(ct, b.targets, sizeof ct);
                        assert_int_equal(b.labels[0], (int32_t)R.shard_idx);
                        coordl_release(L, &b);
                    } else {
                        coordl_status rc = coordl_next_into(L, ci, sizeof ci, ct, sizeof ct);
                        if (rc == COORDL_END_OF_EPOCH) rc = coordl_next_into(L, ci, sizeof ci, ct, sizeof ct);
                        assert_int_equal(rc, COORDL_OK);
                    }
                    if (memcmp(ri, ci, sizeof ri) != 0 || memcmp(rt, ct, sizeof rt) != 0)
                        fail_msg("P=%d rank %d step %zu (epoch %d batch %zu, llm.c shard %zu sample %zu): "
                                 "coordl's batch differs from llm.c's (first input %d vs %d)",
                                 P, r, step, epoch, k, R.shard_idx, R.sample_idx - 1, ci[0], ri[0]);
                }
            coordl_close(L);
            ref_free(&R);
        }
}

/* A shard too small for one sample is skipped (llm.c would assert): the
 * batches are the other shards' and the count is theirs. */
static void test_shard_without_a_sample_is_skipped(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const size_t sizes[3] = {200, 10, 97};
    for (int s = 0; s < 3; s++) {
        uint32_t t[200];
        for (size_t p = 0; p < sizes[s]; p++) t[p] = tokv(s, p);
        char *path = tu_join(dir, "s%d.bin", s);
        tu_write_shard(path, 1, t, sizes[s]);
        free(path);
    }
    char *glob = tu_join(dir, "s*.bin");
    coordl_config cfg = llmc_config(1, 0, 0);
    cfg.source = glob;
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_batches_per_epoch(L), (200 - 1) / (B * T) + (97 - 1) / (B * T));
    coordl_batch b;
    for (int k = 0; k < 12; k++) {
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        assert_int_equal(b.labels[0], k < 8 ? 0 : 2);
        int sample = k < 8 ? k : k - 8;
        assert_int_equal(((int32_t *)b.data)[0], (int32_t)tokv(k < 8 ? 0 : 2, (size_t)sample * B * T));
        coordl_release(L, &b);
    }
    assert_int_equal(coordl_next(L, &b), COORDL_END_OF_EPOCH);
    coordl_close(L);
    tu_rmtree(dir);
    free(dir);
    free(glob);
}

/* ---- shuffle: llm.c's scheme ------------------------------------------ */

typedef struct {
    int shard;
    uint64_t sample; /* block index / P */
} batch_pos;

/* One epoch of rank r: where each batch comes from, checking that its rows
 * are B consecutive windows of one shard, at a block of this rank. */
static void shuffled_epoch(coordl *L, int P, int r, uint64_t epoch, batch_pos *out, size_t n)
{
    /* first window id of each shard: windows of shard s come after those of
     * the shards before it, (ntok - 1) / T each */
    uint64_t first[NSHARDS], acc = 0;
    for (int s = 0; s < NSHARDS; s++) { first[s] = acc; acc += (shard_tokens[s] - 1) / T; }
    for (size_t k = 0; k < n; k++) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) rc = coordl_next(L, &b);
        assert_int_equal(rc, COORDL_OK);
        assert_int_equal(b.epoch, epoch);
        assert_int_equal(b.index, k);
        const int s = b.labels[0];
        const uint64_t w0 = b.ids[0] - first[s];
        for (int i = 0; i < B; i++) {
            assert_int_equal(b.labels[i], s);
            assert_int_equal(b.ids[i], b.ids[0] + (uint64_t)i);
            const int32_t *in = (const int32_t *)b.data + i * T;
            for (int t = 0; t < T; t++) {
                assert_int_equal(in[t], (int32_t)tokv(s, (w0 + (uint64_t)i) * T + (uint64_t)t));
                assert_int_equal(b.targets[i * T + t], (int32_t)tokv(s, (w0 + (uint64_t)i) * T + (uint64_t)t + 1));
            }
        }
        const uint64_t block = w0 / B;
        assert_int_equal(w0 % B, 0);
        assert_int_equal(block % (uint64_t)P, (uint64_t)r);
        const uint64_t samples = (shard_tokens[s] - 1) / ((uint64_t)P * B * T);
        assert_true(block / (uint64_t)P < samples); /* the tail is dropped */
        out[k].shard = s;
        out[k].sample = block / (uint64_t)P;
        coordl_release(L, &b);
    }
}

/* With shuffle on, at P = 2: every sample of every shard comes exactly once
 * per epoch, a shard's batches are consecutive (shards are visited one at
 * a time), both ranks take the same sample at every step (their blocks
 * j*P + 0 and j*P + 1), the order differs between epochs and is the same
 * when opened again with the same seed, and differs from shuffle off. */
static void test_shuffle_permutes_shards_and_samples_like_llmc(void **state)
{
    (void)state;
    const int P = 2;
    const size_t n = 16;
    batch_pos pos[2][2][16]; /* rank, epoch, batch */
    for (int r = 0; r < P; r++) {
        coordl_config cfg = llmc_config(P, r, 1);
        coordl *L = tu_open(&cfg);
        assert_int_equal(coordl_batches_per_epoch(L), n);
        for (uint64_t e = 0; e < 2; e++) shuffled_epoch(L, P, r, e, pos[r][e], n);
        coordl_close(L);
    }
    for (int e = 0; e < 2; e++) {
        int seen[NSHARDS][8];
        memset(seen, 0, sizeof seen);
        int visited[NSHARDS] = {0};
        for (size_t k = 0; k < n; k++) {
            assert_int_equal(pos[0][e][k].shard, pos[1][e][k].shard);
            assert_int_equal(pos[0][e][k].sample, pos[1][e][k].sample);
            seen[pos[0][e][k].shard][pos[0][e][k].sample]++;
            if (k == 0 || pos[0][e][k].shard != pos[0][e][k - 1].shard) {
                if (visited[pos[0][e][k].shard])
                    fail_msg("epoch %d: shard %d comes back at batch %zu", e, pos[0][e][k].shard, k);
                visited[pos[0][e][k].shard] = 1;
            }
        }
        for (int s = 0; s < NSHARDS; s++)
            for (uint64_t j = 0; j < (shard_tokens[s] - 1) / ((uint64_t)P * B * T); j++)
                assert_int_equal(seen[s][j], 1);
    }
    int same01 = 1, unshuffled = 1;
    for (size_t k = 0; k < n; k++) {
        same01 &= pos[0][0][k].shard == pos[0][1][k].shard && pos[0][0][k].sample == pos[0][1][k].sample;
        uint64_t c = 0;
        int s = 0;
        while (k >= c + (shard_tokens[s] - 1) / ((uint64_t)P * B * T)) { c += (shard_tokens[s] - 1) / ((uint64_t)P * B * T); s++; }
        unshuffled &= pos[0][0][k].shard == s && pos[0][0][k].sample == k - c;
    }
    assert_false(same01);
    assert_false(unshuffled);
    /* the same seed again: the same order */
    coordl_config cfg = llmc_config(P, 0, 1);
    coordl *L = tu_open(&cfg);
    batch_pos again[16];
    shuffled_epoch(L, P, 0, 0, again, n);
    for (size_t k = 0; k < n; k++) {
        assert_int_equal(again[k].shard, pos[0][0][k].shard);
        assert_int_equal(again[k].sample, pos[0][0][k].sample);
    }
    coordl_close(L);
}

/* ---- positions: llm.c's (shard, sample) and coordl's (epoch, batch) ----- */

/* Resuming from a llm.c position: after k batches of the reference, its
 * (current_shard_idx, current_sample_idx) through coordl_from_llmc and
 * coordl_seek give the batch the reference loads next, for every k of an
 * epoch and the end of it (where llm.c holds (last shard, its count)). */
static void test_llmc_position_resumes_where_llmc_would(void **state)
{
    (void)state;
    const int P = 3, r = 2;
    ref_loader R;
    ref_init(&R, P, r);
    const size_t per_epoch = ref_batches_per_epoch(&R);
    coordl_config cfg = llmc_config(P, r, 0);
    coordl *L = tu_open(&cfg);
    int32_t ri[B * T], rt[B * T], ci[B * T], ct[B * T];
    for (size_t k = 0; k <= per_epoch; k++) {
        uint64_t e, batch;
        assert_int_equal(coordl_from_llmc(L, 0, R.shard_idx, R.sample_idx, &e, &batch), COORDL_OK);
        assert_int_equal(e, k == per_epoch ? 1 : 0);
        assert_int_equal(batch, k == per_epoch ? 0 : k);
        assert_int_equal(coordl_seek(L, e, batch), COORDL_OK);
        ref_next_batch(&R, ri, rt);
        assert_int_equal(coordl_next_into(L, ci, sizeof ci, ct, sizeof ct), COORDL_OK);
        if (memcmp(ri, ci, sizeof ri) != 0 || memcmp(rt, ct, sizeof rt) != 0)
            fail_msg("after %zu batches: coordl resumed at (%llu, %llu) with another batch than llm.c's", k,
                     (unsigned long long)e, (unsigned long long)batch);
    }
    coordl_close(L);
    ref_free(&R);
}

/* docs/integrations.md's resume recipe, after k batches taken (k = step x
 * grad_accum_steps): llm.c's place is that after the last batch taken, in
 * that batch's epoch, and so is the epoch coordl_from_llmc is given. */
static uint64_t position_epoch(uint64_t k, uint64_t bpe) { return k ? (k - 1) / bpe : 0; }

static void save_position(coordl *L, uint64_t k, uint64_t bpe, uint64_t *shard_idx, uint64_t *sample_idx)
{
    *shard_idx = *sample_idx = 0;
    if (k == 0) return;
    assert_int_equal(coordl_to_llmc(L, (k - 1) / bpe, (k - 1) % bpe, shard_idx, sample_idx), COORDL_OK);
    *sample_idx += 1; /* llm.c counts the batch it just loaded */
}

/* Resuming at exactly an epoch boundary (k = bpe, 2 bpe), and around it,
 * with shuffle on and off: the saved pair is llm.c's own (shuffle = 0: the
 * reference loader's after k batches), and coordl_from_llmc with the
 * documented epoch gives (k / bpe, k % bpe), the batch an unbroken run
 * takes next, byte for byte; never an error, never an epoch skipped. A
 * refused position says why in coordl_errmsg. */
static void test_resume_at_an_epoch_boundary_with_the_documented_recipe(void **state)
{
    (void)state;
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        coordl_config cfg = llmc_config(1, 0, shuffle);
        coordl *L = tu_open(&cfg), *run = tu_open(&cfg);
        const uint64_t bpe = coordl_batches_per_epoch(L);
        ref_loader R;
        ref_init(&R, 1, 0);
        int32_t in[B * T], tg[B * T], ri[B * T], rt[B * T];
        const uint64_t ks[] = {0, 1, bpe - 1, bpe, bpe + 1, 2 * bpe, 2 * bpe + 1};
        uint64_t taken = 0;
        for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
            const uint64_t k = ks[i];
            for (; taken < k; taken++) { /* the unbroken run, and llm.c's reference */
                coordl_status rc = coordl_next_into(run, in, sizeof in, tg, sizeof tg);
                if (rc == COORDL_END_OF_EPOCH) rc = coordl_next_into(run, in, sizeof in, tg, sizeof tg);
                assert_int_equal(rc, COORDL_OK);
                ref_next_batch(&R, ri, rt);
            }
            uint64_t si, sj, e, b;
            save_position(L, k, bpe, &si, &sj);
            if (!shuffle) {
                assert_int_equal(si, R.shard_idx);
                assert_int_equal(sj, R.sample_idx);
            }
            coordl_status rc = coordl_from_llmc(L, position_epoch(k, bpe), si, sj, &e, &b);
            if (rc != COORDL_OK)
                fail_msg("shuffle %d, k = %llu (bpe %llu): coordl_from_llmc: %s", shuffle, (unsigned long long)k,
                         (unsigned long long)bpe, coordl_errmsg(L));
            if (e != k / bpe || b != k % bpe)
                fail_msg("shuffle %d, k = %llu (bpe %llu): resumed at (%llu, %llu), the run is at (%llu, %llu)",
                         shuffle, (unsigned long long)k, (unsigned long long)bpe, (unsigned long long)e,
                         (unsigned long long)b, (unsigned long long)(k / bpe), (unsigned long long)(k % bpe));
            assert_int_equal(coordl_seek(L, e, b), COORDL_OK);
            int32_t want_in[B * T], want_tg[B * T];
            coordl_status rr = coordl_next_into(run, want_in, sizeof want_in, want_tg, sizeof want_tg);
            if (rr == COORDL_END_OF_EPOCH) rr = coordl_next_into(run, want_in, sizeof want_in, want_tg, sizeof want_tg);
            assert_int_equal(rr, COORDL_OK);
            ref_next_batch(&R, ri, rt);
            taken++;
            assert_int_equal(coordl_next_into(L, in, sizeof in, tg, sizeof tg), COORDL_OK);
            assert_memory_equal(in, want_in, sizeof in);
            assert_memory_equal(tg, want_tg, sizeof tg);
            if (!shuffle) assert_memory_equal(in, ri, sizeof in);
        }
        /* a refused position says why */
        uint64_t e, b;
        assert_int_equal(coordl_from_llmc(L, 0, 0, 1000, &e, &b), COORDL_ERR_INVALID);
        assert_non_null(strstr(coordl_errmsg(L), "sample_idx 1000"));
        assert_int_equal(coordl_from_llmc(L, 0, NSHARDS, 0, &e, &b), COORDL_ERR_INVALID);
        assert_non_null(strstr(coordl_errmsg(L), "shard_idx"));
        assert_int_equal(coordl_to_llmc(L, 0, bpe, &e, &b), COORDL_ERR_INVALID);
        assert_non_null(strstr(coordl_errmsg(L), "coordl_to_llmc: batch"));
        ref_free(&R);
        coordl_close(L);
        coordl_close(run);
    }
}

/* coordl_to_llmc and coordl_from_llmc are inverse over a shuffled epoch;
 * the shard position names the batch's shard in that epoch's order, the
 * sample position counts the earlier batches of that shard; the end of a
 * shard is the start of the next one; bad arguments are refused. A run
 * reopened and positioned from the pair continues with identical batches. */
static void test_positions_round_trip_and_resume_shuffled(void **state)
{
    (void)state;
    const int P = 2, r = 1;
    coordl_config cfg = llmc_config(P, r, 1);
    coordl *L = tu_open(&cfg);
    const uint64_t n = coordl_batches_per_epoch(L);
    coordl_batch b;
    int32_t shard_at[64];
    uint64_t count_in_shard[NSHARDS] = {0}, shards_begun = 0;
    assert_int_equal(coordl_seek(L, 3, 0), COORDL_OK);
    for (uint64_t k = 0; k < n; k++) {
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        uint64_t si, sj, e2, k2;
        assert_int_equal(coordl_to_llmc(L, 3, k, &si, &sj), COORDL_OK);
        /* every shard has a sample at P = 2: position = shards begun - 1 */
        if (k == 0 || b.labels[0] != shard_at[k - 1]) shards_begun++;
        assert_int_equal(si, shards_begun - 1);
        shard_at[k] = b.labels[0];
        assert_int_equal(sj, count_in_shard[b.labels[0]]++);
        assert_int_equal(coordl_from_llmc(L, 3, si, sj, &e2, &k2), COORDL_OK);
        assert_int_equal(e2, 3);
        assert_int_equal(k2, k);
        if (k + 1 < n) {
            uint64_t si_next, sj_next;
            assert_int_equal(coordl_to_llmc(L, 3, k + 1, &si_next, &sj_next), COORDL_OK);
            if (si_next != si) { /* (si, count) is the start of the next shard */
                assert_int_equal(coordl_from_llmc(L, 3, si, sj + 1, &e2, &k2), COORDL_OK);
                assert_int_equal(k2, k + 1);
                assert_int_equal(sj_next, 0);
            }
        } else {
            assert_int_equal(coordl_from_llmc(L, 3, si, sj + 1, &e2, &k2), COORDL_OK);
            assert_int_equal(e2, 4);
            assert_int_equal(k2, 0);
            assert_int_equal(coordl_from_llmc(L, 3, si, sj + 2, &e2, &k2), COORDL_ERR_INVALID);
        }
        coordl_release(L, &b);
    }
    uint64_t a, c;
    assert_int_equal(coordl_to_llmc(L, 0, n, &a, &c), COORDL_ERR_INVALID);
    assert_int_equal(coordl_from_llmc(L, 0, NSHARDS, 0, &a, &c), COORDL_ERR_INVALID);

    /* resume: 5 batches into epoch 1, a new handle continues identically */
    assert_int_equal(coordl_seek(L, 1, 0), COORDL_OK);
    for (int k = 0; k < 5; k++) {
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        coordl_release(L, &b);
    }
    uint64_t si, sj, e2, k2;
    assert_int_equal(coordl_to_llmc(L, b.epoch, b.index + 1, &si, &sj), COORDL_OK);
    coordl *L2 = tu_open(&cfg);
    assert_int_equal(coordl_from_llmc(L2, 1, si, sj, &e2, &k2), COORDL_OK);
    assert_int_equal(coordl_seek(L2, e2, k2), COORDL_OK);
    for (uint64_t k = 5; k < n; k++) {
        coordl_batch b1, b2;
        assert_int_equal(coordl_next(L, &b1), COORDL_OK);
        assert_int_equal(coordl_next(L2, &b2), COORDL_OK);
        assert_int_equal(tu_batch_hash(&b1), tu_batch_hash(&b2));
        assert_memory_equal(b1.targets, b2.targets, sizeof(int32_t) * B * T);
        coordl_release(L, &b1);
        coordl_release(L2, &b2);
    }
    coordl_close(L2);
    coordl_close(L);
}

/* llm.c's dataloader_reset(&val_loader) before each evaluation is
 * coordl_seek(V, 0, 0) on a loader with shuffle = 0. */
static void test_validation_reset_is_seek_to_batch_zero(void **state)
{
    (void)state;
    coordl_config cfg = llmc_config(1, 0, 0);
    coordl *V = tu_open(&cfg);
    int32_t first[3][B * T], again[B * T], targets[B * T];
    for (int round = 0; round < 3; round++) {
        assert_int_equal(coordl_seek(V, 0, 0), COORDL_OK);
        for (int k = 0; k < 3; k++) {
            assert_int_equal(coordl_next_into(V, round ? again : first[k], sizeof again, targets, sizeof targets),
                             COORDL_OK);
            if (round) assert_memory_equal(again, first[k], sizeof again);
        }
    }
    assert_int_equal(first[0][0], (int32_t)tokv(0, 0));
    coordl_close(V);
}

/* The ways llm.c's order is refused: another pipeline, an unknown order, a
 * dataset with no sample, a batch size change, and the position functions
 * on the windows order. */
static void test_llmc_order_refusals(void **state)
{
    (void)state;
    coordl *L = NULL;
    coordl_config cfg = llmc_config(1, 0, 0);
    cfg.pipeline = COORDL_PIPE_TRAIN;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "token_order"));
    cfg = llmc_config(1, 0, 0);
    cfg.token_order = 7;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "token_order"));
    cfg = llmc_config(3, 0, 0);
    cfg.batch_size = 20; /* 3 x 20 x 8 + 1 = 481 tokens: no shard has them */
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "481"));

    cfg = llmc_config(1, 0, 0);
    L = tu_open(&cfg);
    assert_int_equal(coordl_set(L, COORDL_PARAM_BATCH_SIZE, 2), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(L), "batch size"));
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    assert_int_equal(b.n, B);
    coordl_release(L, &b);
    coordl_close(L);

    cfg = llmc_config(1, 0, 0);
    cfg.token_order = COORDL_TOKENS_WINDOWS;
    L = tu_open(&cfg);
    uint64_t x, y;
    assert_int_equal(coordl_from_llmc(L, 0, 0, 0, &x, &y), COORDL_ERR_INVALID);
    assert_int_equal(coordl_to_llmc(L, 0, 0, &x, &y), COORDL_ERR_INVALID);
    coordl_close(L);
}

/* threads = 0 means no worker thread for token pipelines (issue 23: the
 * trainer's thread copies the windows inside coordl_next), an explicit
 * count is kept, and both give the same batches, byte for byte, over an
 * epoch and a half, shuffled and not. */
static void test_token_pipelines_default_to_no_worker(void **state)
{
    (void)state;
    coordl_stats st;
    for (int shuffle = 0; shuffle < 2; shuffle++)
        for (int order = 0; order < 2; order++) {
            uint64_t hash[2] = {TU_FNV_OFFSET, TU_FNV_OFFSET};
            const uint32_t threads[2] = {0, 2};
            for (int k = 0; k < 2; k++) {
                coordl_config cfg = llmc_config(1, 0, shuffle);
                cfg.token_order = order;
                cfg.threads = (int)threads[k];
                coordl *L = tu_open(&cfg);
                coordl_get_stats(L, &st);
                assert_int_equal(st.threads, threads[k]);
                const uint64_t n = coordl_batches_per_epoch(L) * 3 / 2;
                for (uint64_t i = 0; i < n; i++) {
                    coordl_batch b;
                    coordl_status rc = coordl_next(L, &b);
                    if (rc == COORDL_END_OF_EPOCH) rc = coordl_next(L, &b);
                    assert_int_equal(rc, COORDL_OK);
                    hash[k] = tu_fnv1a(tu_fnv1a(hash[k], b.data, b.data_bytes), b.targets,
                                       (size_t)b.n * T * sizeof(int32_t));
                    coordl_release(L, &b);
                }
                coordl_close(L);
            }
            if (hash[0] != hash[1])
                fail_msg("order %d shuffle %d: batches with no worker differ from batches with 2 workers", order,
                         shuffle);
        }
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shuffle_off_equals_llmc_dataloader_at_1_2_3_ranks),
        cmocka_unit_test(test_shard_without_a_sample_is_skipped),
        cmocka_unit_test(test_shuffle_permutes_shards_and_samples_like_llmc),
        cmocka_unit_test(test_llmc_position_resumes_where_llmc_would),
        cmocka_unit_test(test_positions_round_trip_and_resume_shuffled),
        cmocka_unit_test(test_resume_at_an_epoch_boundary_with_the_documented_recipe),
        cmocka_unit_test(test_validation_reset_is_seek_to_batch_zero),
        cmocka_unit_test(test_llmc_order_refusals),
        cmocka_unit_test(test_token_pipelines_default_to_no_worker),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
