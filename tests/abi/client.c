/*
 * client.c - a trainer built against some coordl.h, run against whatever
 * library it is linked with: every public struct the library reads or
 * fills lives in a heap block of exactly the client's sizeof followed by a
 * guard (64 bytes of 0xA5, poisoned under AddressSanitizer), so a library
 * that writes or reads past the caller's struct is caught: by ASan at the
 * access, or by the guard check after the call.
 *
 * Built by tests/abi/run.sh against three headers:
 *   CLIENT_HEADER = "coordl-0.3.0.h"  a binary built against 0.3.0 (plain
 *                                      names: the 0.3.0 ABI symbols)
 *                   "coordl.h"        today's header (the _sized macros)
 *                   a grown header    a future header whose structs each
 *                                      have a field more (CLIENT_GROWN)
 * and told whether the library it is linked with was built from a grown
 * header too (LIB_GROWN), which decides what a set future field gives.
 *
 *   client DATASET_DIR
 * Exits 0 when every check passed; prints the failed check otherwise.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include CLIENT_HEADER

#ifndef CLIENT_GROWN
#define CLIENT_GROWN 0
#endif
#ifndef LIB_GROWN
#define LIB_GROWN 0
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CLIENT_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CLIENT_ASAN 1
#endif
#ifdef CLIENT_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define GUARD 64
static int failures;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "abi client (%s): %s:%d: check failed: %s\n", CLIENT_HEADER, \
                    __FILE__, __LINE__, #cond);                                       \
            failures++;                                                               \
        }                                                                             \
    } while (0)

/* A struct of n bytes (filled with 0x5a, so fields the library does not
 * write are recognisable) and its guard. */
static void *guarded(size_t n) {
    unsigned char *p = malloc(n + GUARD);
    if (!p) { perror("malloc"); exit(2); }
    memset(p, 0x5a, n);
    memset(p + n, 0xA5, GUARD);
    POISON(p + n, GUARD);
    return p;
}

static void guard_check(const void *block, size_t n, const char *what) {
    unsigned char *g = (unsigned char *)block + n;
    UNPOISON(g, GUARD);
    for (int i = 0; i < GUARD; i++)
        if (g[i] != 0xA5) {
            fprintf(stderr, "abi client (%s): the library wrote %d bytes past the caller's %s (%zu bytes)\n",
                    CLIENT_HEADER, i + 1, what, n);
            failures++;
            break;
        }
    POISON(g, GUARD);
}

static void guarded_free(void *block, size_t n) {
    UNPOISON((unsigned char *)block + n, GUARD);
    free(block);
}

#if CLIENT_GROWN
/* A field the library does not know must come back zero from outputs. */
static int future_zero(const uint64_t *f) { return f[0] == 0 && f[1] == 0 && f[2] == 0; }
#endif

static int pin_calls, log_calls, progress_calls;

static int on_pin(void *user, void *addr, size_t bytes, int register_it) {
    (void)addr; (void)bytes; (void)register_it;
    if (user == &pin_calls) pin_calls++;
    return 0;
}

static void on_log(void *user, coordl_log_level level, const char *msg) {
    (void)level; (void)msg;
    if (user == &log_calls) log_calls++;
}

static void on_progress(void *user, const char *line) {
    (void)line;
    if (user == &progress_calls) progress_calls++;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: client DATASET_DIR\n"); return 2; }
    printf("abi client: header %s (%d), library %d; sizeof config %zu batch %zu stats %zu epoch_stats %zu "
           "transform %zu analyze_opts %zu report %zu\n", COORDL_VERSION, COORDL_VERSION_NUMBER,
           coordl_libversion_number(), sizeof(coordl_config), sizeof(coordl_batch), sizeof(coordl_stats),
           sizeof(coordl_epoch_stats), sizeof(coordl_transform), sizeof(coordl_analyze_opts),
           sizeof(coordl_report));

    /* defaults: every field of the caller's config, up to its last */
    coordl_config *cfg = guarded(sizeof *cfg);
    *cfg = coordl_config_default();
    guard_check(cfg, sizeof *cfg, "coordl_config (coordl_config_default)");
    CHECK(cfg->batch_size == 32 && cfg->out_w == 224 && cfg->world == 1);
    CHECK(cfg->log_level == COORDL_LOG_WARN && cfg->pin == NULL && cfg->pin_user == NULL);

    cfg->source = argv[1];
    cfg->batch_size = 8;
    cfg->out_w = cfg->out_h = 32;
    cfg->threads = 2;
    cfg->prefetch_batches = 2;
    cfg->cache_bytes = 1u << 20;
    cfg->cache_pin = COORDL_PIN_OFF;
    cfg->log = on_log;
    cfg->log_user = &log_calls;
    cfg->log_level = COORDL_LOG_INFO;
    cfg->pin = on_pin;
    cfg->pin_user = &pin_calls; /* the last field of the 0.3.0 config */

    coordl *L = NULL;
#if CLIENT_GROWN
    /* a field of a newer header than the library's: refused unless the
     * library knows it; zero (unset) is accepted */
    cfg->abi_future_[0] = 1;
    coordl_status frc = coordl_open(cfg, &L);
    if (LIB_GROWN) {
        CHECK(frc == COORDL_OK);
        coordl_close(L);
    } else {
        CHECK(frc == COORDL_ERR_UNSUPPORTED);
        CHECK(strstr(coordl_errmsg(NULL), "does not know") != NULL);
    }
    L = NULL;
    cfg->abi_future_[0] = 0;
    pin_calls = log_calls = 0;
#endif
    coordl_status rc = coordl_open(cfg, &L);
    guard_check(cfg, sizeof *cfg, "coordl_config (coordl_open)");
    if (rc != COORDL_OK) {
        fprintf(stderr, "abi client: coordl_open: %s: %s\n", coordl_strerror(rc), coordl_errmsg(NULL));
        return 1;
    }
    CHECK(pin_calls >= 1); /* pin and pin_user were read */
    CHECK(log_calls >= 1); /* log, log_user and log_level were read */
#if COORDL_VERSION_NUMBER >= 4000
    /* coordl_get_config (0.4.0): the effective settings, cut to our size */
    coordl_config *eff = guarded(sizeof *eff);
    CHECK(coordl_get_config(L, eff) == COORDL_OK);
    guard_check(eff, sizeof *eff, "coordl_config (coordl_get_config)");
    CHECK(eff->threads == 2 && eff->batch_size == 8 && eff->pin_user == &pin_calls);
#if CLIENT_GROWN
    CHECK(future_zero(eff->abi_future_));
#endif
    guarded_free(eff, sizeof *eff);
#endif

    const uint64_t items = coordl_num_items(L), bpe = coordl_batches_per_epoch(L);
    CHECK(items == 16 && bpe == 2);
    coordl_batch *b = guarded(sizeof *b);
    uint64_t rows = 0, batches = 0;
    while ((rc = coordl_next(L, b)) == COORDL_OK) {
        guard_check(b, sizeof *b, "coordl_batch (coordl_next)");
        CHECK(b->n == 8 && b->c == 3 && b->h == 32 && b->w == 32 && b->layout == COORDL_F32_NCHW);
        CHECK(b->data != NULL && b->data_bytes == (size_t)8 * 3 * 32 * 32 * 4 && b->index == batches);
        for (uint32_t i = 0; i < b->n; i++) CHECK(b->ids[i] < items && b->labels[i] == coordl_item_label(L, b->ids[i]));
#if CLIENT_GROWN
        CHECK(future_zero(b->abi_future_));
#endif
        rows += b->n;
        batches++;
        coordl_release(L, b);
        CHECK(b->slot_ == 0);
    }
    CHECK(rc == COORDL_END_OF_EPOCH && rows == items && batches == bpe);
    guard_check(b, sizeof *b, "coordl_batch (end of epoch)");

    coordl_stats *st = guarded(sizeof *st);
    coordl_get_stats(L, st);
    guard_check(st, sizeof *st, "coordl_stats");
    CHECK(st->batches == bpe && st->items >= items && st->dataset_bytes > 0);
    CHECK(st->cache_bytes_budget > 0 && st->threads == 2);
    CHECK(st->prep_us_per_item > 0.0 && st->prep_us_per_item < 1e7); /* the last 0.3.0 field */
#if CLIENT_GROWN
    CHECK(future_zero(st->abi_future_));
#endif

    coordl_epoch_stats *es = guarded(sizeof *es);
    CHECK(coordl_get_epoch_stats(L, 0, es) == COORDL_OK);
    guard_check(es, sizeof *es, "coordl_epoch_stats");
    CHECK(es->epoch == 0 && es->items == items && es->batches == bpe); /* batches: the last field */
#if CLIENT_GROWN
    CHECK(future_zero(es->abi_future_));
#endif

    coordl_transform *tr = guarded(sizeof *tr);
    CHECK(coordl_sample_transform(L, 0, 0, tr) == COORDL_OK);
    guard_check(tr, sizeof *tr, "coordl_transform");
    CHECK(tr->image_w >= 8 && tr->image_h >= 8 && tr->w > 0 && tr->h > 0 && tr->angle == 0.0);
#if CLIENT_GROWN
    CHECK(future_zero(tr->abi_future_));
#endif
    coordl_close(L);

    /* DS-Analyzer: config, options and report */
    cfg->log = NULL;
    cfg->pin = NULL;
    coordl_analyze_opts *opts = guarded(sizeof *opts);
    memset(opts, 0, sizeof *opts);
    static const double fractions[2] = {0.0, 1.0};
    static const int threads[2] = {1, 2};
    opts->batches = 2;
    opts->synthetic_step_ms = 1.0;
    opts->skip_cold = 1;
    opts->whatif_cache_fractions = fractions;
    opts->n_whatif_cache_fractions = 2;
    opts->whatif_threads = threads;
    opts->n_whatif_threads = 2;
    opts->progress = on_progress;
    opts->progress_user = &progress_calls; /* the last 0.3.0 field */
    coordl_report *rep = guarded(sizeof *rep);
    rc = coordl_analyze(cfg, NULL, NULL, opts, rep);
    guard_check(opts, sizeof *opts, "coordl_analyze_opts");
    guard_check(rep, sizeof *rep, "coordl_report (coordl_analyze)");
    guard_check(cfg, sizeof *cfg, "coordl_config (coordl_analyze)");
#ifdef COORDL_NO_ANALYZER
    /* the library was built without the analyzer: refused, the report still
     * written in full (and no further) */
    CHECK(rc == COORDL_ERR_UNSUPPORTED && strstr(coordl_errmsg(NULL), "COORDL_NO_ANALYZER") != NULL);
    CHECK(rep->n_whatif == 0 && rep->whatif == NULL && rep->recommend_threads == -1);
    char json[4096];
    size_t need = coordl_report_json(rep, json, sizeof json);
    CHECK(need > 0 && need < sizeof json && strstr(json, "COORDL_NO_ANALYZER") != NULL);
#else
    if (rc != COORDL_OK) {
        fprintf(stderr, "abi client: coordl_analyze: %s: %s\n", coordl_strerror(rc), coordl_errmsg(NULL));
        return 1;
    }
    CHECK(progress_calls >= 2);
    CHECK(rep->n_whatif == 4 && rep->whatif != NULL && rep->dataset_items == items);
    CHECK(rep->synthetic.images > 0 && rep->warm.images > 0);
    /* the last 0.3.0 field: written (-1 or a thread count), not our 0x5a */
    CHECK(rep->recommend_threads == -1 || rep->recommend_threads == 1 || rep->recommend_threads == 2);
    char json[4096];
    size_t need = coordl_report_json(rep, json, sizeof json);
    CHECK(need > 0 && need < sizeof json && strstr(json, "\"recommendation\":") != NULL);
    coordl_whatif w = coordl_report_predict(rep, 0.5, 2, 0);
    CHECK(w.threads == 2 && w.cache_fraction == 0.5 && w.predicted_images_per_s >= 0.0);
#endif
#if CLIENT_GROWN
    CHECK(future_zero(rep->abi_future_));
#endif
    coordl_report_free(rep);
    guard_check(rep, sizeof *rep, "coordl_report (coordl_report_free)");
    CHECK(rep->whatif == NULL && rep->n_whatif == 0);

    guarded_free(cfg, sizeof *cfg);
    guarded_free(b, sizeof *b);
    guarded_free(st, sizeof *st);
    guarded_free(es, sizeof *es);
    guarded_free(tr, sizeof *tr);
    guarded_free(opts, sizeof *opts);
    guarded_free(rep, sizeof *rep);
    if (failures) {
        fprintf(stderr, "abi client (%s): %d check(s) failed\n", CLIENT_HEADER, failures);
        return 1;
    }
    printf("abi client (%s, library %s): all checks passed\n", CLIENT_HEADER, LIB_GROWN ? "grown" : "as built");
    return 0;
}
