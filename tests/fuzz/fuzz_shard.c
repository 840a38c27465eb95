/*
 * fuzz_shard.c - llm.c token shards: the header parser, the three ways a
 * source names shards (one file or a text list of them, a glob, a folder),
 * token_order LLMC's tables, window reads and the token decode. Input: 8
 * parameter bytes, then the file, written to shards/in.bin in the fixture
 * folder (fuzz_common.h: two valid shards, a FIFO and a link loop beside
 * it; a list may name any of them).
 * Oracles: on success the shards' first ids are the running sum of their
 * windows and add up to num_items; the first, last and a chosen window
 * read and decode (a read may fail cleanly only if the file changed); in
 * LLMC order every position of the share maps to an item below num_items.
 *
 * Parameters: 0 seq_len = 1 + b % 64; 1 bits 0-1 source (0, 3: in.bin,
 * 1: shards/<*>.bin, 2: the shards folder), bit 2 token_order LLMC; 2 world
 * = 1 + b % 4; 3 rank = b % world; 4 batch_size = 1 + b % 8; 5-6 a window
 * id; 7 epoch.
 */
#include "../../coordl.c"
#include "fuzz_common.h"

#define FZ_PARAMS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_bytes in = {data, size};
    uint8_t b[FZ_PARAMS];
    fz_params(&in, b, FZ_PARAMS);
    const char *dir = fz_fixture();
    fz_write("shards/in.bin", in.p, in.n);
    char src[1024];
    switch (b[1] & 3) {
    case 1: snprintf(src, sizeof src, "%s/shards/*.bin", dir); break;
    case 2: snprintf(src, sizeof src, "%s/shards", dir); break;
    default: snprintf(src, sizeof src, "%s/shards/in.bin", dir); break;
    }
    coordl_config cfg = fz_config();
    cfg.source = src;
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.seq_len = 1u + b[0] % 64u;
    cfg.token_order = b[1] & 4 ? COORDL_TOKENS_LLMC : COORDL_TOKENS_WINDOWS;
    cfg.world = 1 + b[2] % 4;
    cfg.rank = b[3] % cfg.world;
    cfg.batch_size = 1u + b[4] % 8u;
    if (cdl__validate(&cfg) != COORDL_OK)
        return 0;
    coordl *L = fz_loader(&cfg);
    coordl_status rc = cdl__index_tokens(L);
    FZ_CHECK(rc == COORDL_OK || rc == COORDL_ERR_CORRUPT || rc == COORDL_ERR_INVALID || rc == COORDL_ERR_IO ||
             rc == COORDL_ERR_NOMEM, "status %d", (int)rc);
    if (rc == COORDL_OK) {
        uint64_t sum = 0;
        for (size_t i = 0; i < L->index.nshards; i++) {
            FZ_CHECK(L->index.shards[i].first_item == sum, "shard %zu starts at %llu, expected %llu", i,
                     (unsigned long long)L->index.shards[i].first_item, (unsigned long long)sum);
            FZ_CHECK(L->index.shards[i].tok_bytes == 2 || L->index.shards[i].tok_bytes == 4, "token bytes");
            sum += L->index.shards[i].nwindows;
        }
        FZ_CHECK(sum == L->index.num_items && sum > 0, "windows %llu, num_items %llu", (unsigned long long)sum,
                 (unsigned long long)L->index.num_items);
        cdl__worker W;
        fz_worker_init(&W, L);
        int32_t *inputs = malloc(cfg.seq_len * sizeof *inputs), *targets = malloc(cfg.seq_len * sizeof *targets);
        FZ_CHECK(inputs && targets, "out of memory");
        W.targets = targets;
        const uint64_t ids[3] = {0, L->index.num_items - 1, ((uint64_t)b[5] | (uint64_t)b[6] << 8) % L->index.num_items};
        for (int k = 0; k < 3; k++) {
            cdl__bytes win = {NULL, 0};
            coordl_status r = cdl__read_file(&W, ids[k], &win);
            FZ_CHECK(r == COORDL_OK, "window %llu: %d: %s", (unsigned long long)ids[k], (int)r, W.err);
            FZ_CHECK(win.len == (size_t)(cfg.seq_len + 1) * cdl__shard_of(L, ids[k])->tok_bytes, "window bytes");
            FZ_CHECK(cdl__decode_tokens(&W, &win, inputs) == COORDL_OK, "decode");
            for (uint32_t t = 1; t < cfg.seq_len; t++)
                FZ_CHECK(targets[t - 1] == inputs[t], "targets are not inputs shifted by one");
        }
        free(inputs);
        free(targets);
        fz_worker_free(&W);
        if (cfg.token_order == COORDL_TOKENS_LLMC && cdl__llmc_init(L) == COORDL_OK) {
            L->sampler.share = L->sampler.llmc->total * cfg.batch_size;
            const uint64_t epoch = b[7];
            cdl__perm perm = cdl__perm_for(L, epoch);
            for (uint64_t pos = 0; pos < L->sampler.share && pos < 64; pos++) {
                uint64_t id = cdl__item_at(L, &perm, pos);
                FZ_CHECK(id < L->index.num_items, "position %llu maps to %llu of %llu", (unsigned long long)pos,
                         (unsigned long long)id, (unsigned long long)L->index.num_items);
            }
        }
    }
    fz_loader_free(L);
    return 0;
}
