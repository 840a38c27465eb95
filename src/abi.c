/* SPDX-License-Identifier: MIT */
/*
 * abi.c - the stable ABI.
 *
 * Every public struct crosses the boundary with the caller's sizeof
 * (coordl.h, "Stable ABI"). Inputs are copied over the library's
 * defaults, outputs are filled in a full struct and copied back cut to
 * the caller's size; the sections above only ever see full structs.
 * The plain names are also exported, for binaries built against 0.3.0.
 *
 * Owns:  nothing: sized entry points that copy each public struct with the
 *        caller's sizeof, and the 0.3.0 symbols
 * Lock:  none
 * Calls: status, config, api, analyzer (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "status.h"
#include "config.h"
#include "api.h"
#include "analyzer.h"
#include "handle.h"

/* Sizes of the public structs in 0.3.0, the last release without sizes:
 * the end of each struct's last 0.3.0 field, rounded up to the struct's
 * alignment then (its widest members: 8-byte integers, doubles,
 * pointers). */
#define CDL__MAX(a, b) ((a) > (b) ? (a) : (b))
#define CDL__V030_ALIGN CDL__MAX(CDL__MAX(_Alignof(uint64_t), _Alignof(double)), _Alignof(void *))
#define CDL__V030_SIZE(type, last_field)                                                                \
    ((offsetof(type, last_field) + sizeof(((type *)0)->last_field) + CDL__V030_ALIGN - 1) /              \
     CDL__V030_ALIGN * CDL__V030_ALIGN)
#define CDL__V030_CONFIG CDL__V030_SIZE(coordl_config, pin_user)
#define CDL__V030_BATCH CDL__V030_SIZE(coordl_batch, slot_)
#define CDL__V030_STATS CDL__V030_SIZE(coordl_stats, prep_us_per_item)
#define CDL__V030_EPOCH_STATS CDL__V030_SIZE(coordl_epoch_stats, batches)
#define CDL__V030_TRANSFORM CDL__V030_SIZE(coordl_transform, angle)
#define CDL__V030_ANALYZE_OPTS CDL__V030_SIZE(coordl_analyze_opts, progress_user)
#define CDL__V030_REPORT CDL__V030_SIZE(coordl_report, recommend_threads)
#if defined(__x86_64__) && defined(__LP64__)
/* the sizes the 0.3.0 header gives on x86-64 (tests/abi checks them at run
 * time on every platform) */
_Static_assert(CDL__V030_CONFIG == 352 && CDL__V030_BATCH == 88 && CDL__V030_STATS == 776 &&
               CDL__V030_EPOCH_STATS == 112 && CDL__V030_TRANSFORM == 56 &&
               CDL__V030_ANALYZE_OPTS == 72 && CDL__V030_REPORT == 224,
               "a public struct's 0.3.0 fields moved: fields are appended at the end, never reordered");
#endif

/* An input struct: the caller's first src_size bytes over dst, which holds
 * the defaults. A caller with a newer header may pass a larger struct; its
 * extra bytes must be zero (fields this library does not know, unset). */
static coordl_status cdl__struct_in(void *dst, size_t dst_size, const void *src, size_t src_size,
                                    size_t min_size, const char *type) {
    if (src_size < min_size)
        return cdl__open_fail(COORDL_ERR_INVALID, "%s: size %zu is smaller than any release's layout (%zu); "
                              "pass sizeof(%s)", type, src_size, min_size, type);
    if (src_size > dst_size) {
        const unsigned char *extra = (const unsigned char *)src + dst_size;
        for (size_t i = 0; i < src_size - dst_size; i++)
            if (extra[i])
                return cdl__open_fail(COORDL_ERR_UNSUPPORTED, "%s: the caller's header (%zu bytes) sets a field "
                                      "at byte %zu that this library (%s, %zu bytes) does not know; link a "
                                      "newer coordl", type, src_size, dst_size + i, COORDL_VERSION, dst_size);
    }
    memcpy(dst, src, src_size < dst_size ? src_size : dst_size);
    return COORDL_OK;
}

/* An output struct: the first dst_size bytes of the library's full struct;
 * bytes beyond it (a caller with a newer header) are zeroed. */
static CDL_HOT void cdl__struct_out(void *dst, size_t dst_size, const void *src, size_t src_size) {
    size_t n = dst_size < src_size ? dst_size : src_size;
    memcpy(dst, src, n);
    if (dst_size > n) memset((unsigned char *)dst + n, 0, dst_size - n);
}

void coordl_config_init_sized(coordl_config *cfg, size_t cfg_size) {
    if (!cfg) return;
    coordl_config d = cdl__config_default();
    cdl__struct_out(cfg, cfg_size, &d, sizeof d);
}

/* A config that asks for a part this build left out (platform.h's
 * switches) is refused at open, naming the switch. */
static coordl_status cdl__parts_check(const coordl_config *c) {
#ifdef COORDL_NO_AUDIO
    if (c->pipeline == COORDL_PIPE_AUDIO)
        return cdl__open_fail(COORDL_ERR_UNSUPPORTED, "pipeline: COORDL_PIPE_AUDIO is not in this build (coordl.c "
                              "was compiled with COORDL_NO_AUDIO)");
#endif
#ifdef COORDL_NO_TOKENS
    if (c->pipeline == COORDL_PIPE_TOKENS || c->token_order == COORDL_TOKENS_LLMC)
        return cdl__open_fail(COORDL_ERR_UNSUPPORTED, "pipeline: COORDL_PIPE_TOKENS is not in this build (coordl.c "
                              "was compiled with COORDL_NO_TOKENS)");
#endif
    (void)c;
    return COORDL_OK;
}

coordl_status coordl_open_sized(const coordl_config *cfg, size_t cfg_size, coordl **out) {
    cdl__open_errmsg[0] = '\0';
    if (out) *out = NULL;
    if (!cfg || !out) return cdl__open_fail(COORDL_ERR_INVALID, "coordl_open: cfg and out must not be NULL");
    coordl_config c = cdl__config_default();
    coordl_status rc = cdl__struct_in(&c, sizeof c, cfg, cfg_size, CDL__V030_CONFIG, "coordl_config");
    if (rc == COORDL_OK) rc = cdl__parts_check(&c);
    return rc == COORDL_OK ? cdl__open(&c, out) : rc;
}

CDL_HOT coordl_status coordl_next_sized(coordl *L, coordl_batch *out, size_t out_size) {
    if (!L || !out) return COORDL_ERR_INVALID;
    if (out_size < CDL__V030_BATCH) {
        /* the batch could not be released: its slot_ would not fit */
        snprintf(L->errmsg, sizeof L->errmsg, "coordl_next: batch size %zu is smaller than any release's "
                 "coordl_batch (%zu); pass sizeof(coordl_batch)", out_size, (size_t)CDL__V030_BATCH);
        return COORDL_ERR_INVALID;
    }
    coordl_batch b;
    coordl_status rc = cdl__next(L, &b);
    cdl__struct_out(out, out_size, &b, sizeof b);
    return rc;
}

void coordl_get_stats_sized(const coordl *L, coordl_stats *out, size_t out_size) {
    if (!out) return;
    coordl_stats s;
    cdl__get_stats(L, &s);
    cdl__struct_out(out, out_size, &s, sizeof s);
}

coordl_status coordl_get_epoch_stats_sized(const coordl *L, uint64_t epoch, coordl_epoch_stats *out,
                                           size_t out_size) {
    if (!L || !out) return COORDL_ERR_INVALID;
    coordl_epoch_stats e;
    coordl_status rc = cdl__get_epoch_stats(L, epoch, &e);
    if (rc == COORDL_OK) cdl__struct_out(out, out_size, &e, sizeof e);
    return rc;
}

coordl_status coordl_get_config_sized(const coordl *L, coordl_config *out, size_t out_size) {
    if (!L || !out) return COORDL_ERR_INVALID;
    coordl_config c;
    cdl__get_config(L, &c);
    cdl__struct_out(out, out_size, &c, sizeof c);
    return COORDL_OK;
}

coordl_status coordl_sample_transform_sized(coordl *L, uint64_t epoch, uint64_t id, coordl_transform *out,
                                            size_t out_size) {
    if (!L || !out) return COORDL_ERR_INVALID;
    coordl_transform t;
    coordl_status rc = cdl__sample_transform(L, epoch, id, &t);
    cdl__struct_out(out, out_size, &t, sizeof t);
    return rc;
}

coordl_status coordl_analyze_sized(const coordl_config *cfg, size_t cfg_size, coordl_step_fn step_fn, void *user,
                                   const coordl_analyze_opts *opts, size_t opts_size, coordl_report *report,
                                   size_t report_size) {
    cdl__open_errmsg[0] = '\0';
    if (!cfg || !report) return cdl__open_fail(COORDL_ERR_INVALID, "coordl_analyze: cfg and report must not be NULL");
    if (report_size < CDL__V030_REPORT)
        return cdl__open_fail(COORDL_ERR_INVALID, "coordl_report: size %zu is smaller than any release's layout "
                              "(%zu); pass sizeof(coordl_report)", report_size, (size_t)CDL__V030_REPORT);
    coordl_config c = cdl__config_default();
    coordl_status rc = cdl__struct_in(&c, sizeof c, cfg, cfg_size, CDL__V030_CONFIG, "coordl_config");
    if (rc != COORDL_OK) return rc;
    coordl_analyze_opts o;
    cdl__analyze_opts_default(&o);
    if (opts && (rc = cdl__struct_in(&o, sizeof o, opts, opts_size, CDL__V030_ANALYZE_OPTS,
                                     "coordl_analyze_opts")) != COORDL_OK)
        return rc;
    coordl_report r;
    rc = cdl__analyze(&c, step_fn, user, opts ? &o : NULL, &r);
    cdl__struct_out(report, report_size, &r, sizeof r);
    return rc;
}

void coordl_analyze_opts_init_sized(coordl_analyze_opts *opts, size_t opts_size) {
    if (!opts) return;
    coordl_analyze_opts d;
    cdl__analyze_opts_default(&d);
    cdl__struct_out(opts, opts_size, &d, sizeof d);
}

/* A report the caller passes back: its fields, the rest zero. Reports are
 * filled by coordl_analyze, so a larger one's extra bytes are this
 * library's zeros. */
static void cdl__report_in(coordl_report *full, const coordl_report *r, size_t r_size) {
    memset(full, 0, sizeof *full);
    memcpy(full, r, r_size < sizeof *full ? r_size : sizeof *full);
}

coordl_whatif coordl_report_predict_sized(const coordl_report *r, size_t r_size, double cache_fraction, int threads,
                                          double storage_mb_per_s) {
    coordl_report full;
    if (r) cdl__report_in(&full, r, r_size);
    else memset(&full, 0, sizeof full);
    return cdl__report_predict(&full, cache_fraction, threads, storage_mb_per_s);
}

coordl_whatif coordl_report_predict_readahead_sized(const coordl_report *r, size_t r_size, double cache_fraction,
                                                    int threads, double storage_mb_per_s, uint32_t readahead_items) {
    coordl_report full;
    if (r) cdl__report_in(&full, r, r_size);
    else memset(&full, 0, sizeof full);
    return cdl__report_predict_ra(&full, cache_fraction, threads, storage_mb_per_s, readahead_items,
                                  cdl__ra_threads_for(readahead_items));
}

size_t coordl_report_json_sized(const coordl_report *r, size_t r_size, char *buf, size_t cap) {
    coordl_report full;
    if (r) cdl__report_in(&full, r, r_size);
    else memset(&full, 0, sizeof full);
    return cdl__report_json(&full, buf, cap);
}

size_t coordl_report_svg_sized(const coordl_report *r, size_t r_size, const coordl_measured *measured,
                               size_t n_measured, char *buf, size_t cap) {
    coordl_report full;
    if (r) cdl__report_in(&full, r, r_size);
    else memset(&full, 0, sizeof full);
    return cdl__report_svg(&full, measured, n_measured, buf, cap);
}

void coordl_report_free_sized(coordl_report *r, size_t r_size) {
    if (!r || r_size < CDL__V030_REPORT) return;
    coordl_report full;
    cdl__report_in(&full, r, r_size);
    cdl__report_free(&full);
    /* write back only what the caller has (the freed array's fields are
     * 0.3.0 fields) */
    memcpy(r, &full, r_size < sizeof full ? r_size : sizeof full);
}

/* The 0.3.0 ABI: what binaries built against the 0.3.0 header call. That
 * header declared these names as functions taking structs of 0.3.0's size;
 * the current header turns the names into macros over the `_sized` calls,
 * so the definitions below name them in parentheses. coordl_config_default
 * returned the config by value: the caller reserved 0.3.0's size for it, so
 * the 0.3.0 symbol returns exactly that many bytes (a struct of that size
 * is returned through memory on every ABI, whatever its field types). */
typedef struct cdl__config_v030 {
    unsigned char bytes[CDL__V030_CONFIG];
} cdl__config_v030;

COORDL_API cdl__config_v030 (coordl_config_default)(void);
COORDL_API coordl_status (coordl_open)(const coordl_config *cfg, coordl **out);
COORDL_API coordl_status (coordl_next)(coordl *L, coordl_batch *out);
COORDL_API void (coordl_get_stats)(const coordl *L, coordl_stats *out);
COORDL_API coordl_status (coordl_get_epoch_stats)(const coordl *L, uint64_t epoch, coordl_epoch_stats *out);
COORDL_API coordl_status (coordl_sample_transform)(coordl *L, uint64_t epoch, uint64_t id, coordl_transform *out);
COORDL_API coordl_status (coordl_analyze)(const coordl_config *cfg, coordl_step_fn step_fn, void *user,
                                          const coordl_analyze_opts *opts, coordl_report *report);
COORDL_API coordl_whatif (coordl_report_predict)(const coordl_report *r, double cache_fraction, int threads,
                                                 double storage_mb_per_s);
COORDL_API size_t (coordl_report_json)(const coordl_report *r, char *buf, size_t cap);
COORDL_API void (coordl_report_free)(coordl_report *r);

cdl__config_v030 (coordl_config_default)(void) {
    coordl_config d = cdl__config_default();
    cdl__config_v030 v;
    memcpy(v.bytes, &d, sizeof v.bytes);
    return v;
}

coordl_status (coordl_open)(const coordl_config *cfg, coordl **out) {
    return coordl_open_sized(cfg, CDL__V030_CONFIG, out);
}

CDL_HOT coordl_status (coordl_next)(coordl *L, coordl_batch *out) { return coordl_next_sized(L, out, CDL__V030_BATCH); }

void (coordl_get_stats)(const coordl *L, coordl_stats *out) { coordl_get_stats_sized(L, out, CDL__V030_STATS); }

coordl_status (coordl_get_epoch_stats)(const coordl *L, uint64_t epoch, coordl_epoch_stats *out) {
    return coordl_get_epoch_stats_sized(L, epoch, out, CDL__V030_EPOCH_STATS);
}

coordl_status (coordl_sample_transform)(coordl *L, uint64_t epoch, uint64_t id, coordl_transform *out) {
    return coordl_sample_transform_sized(L, epoch, id, out, CDL__V030_TRANSFORM);
}

coordl_status (coordl_analyze)(const coordl_config *cfg, coordl_step_fn step_fn, void *user,
                               const coordl_analyze_opts *opts, coordl_report *report) {
    return coordl_analyze_sized(cfg, CDL__V030_CONFIG, step_fn, user, opts, CDL__V030_ANALYZE_OPTS, report,
                                CDL__V030_REPORT);
}

coordl_whatif (coordl_report_predict)(const coordl_report *r, double cache_fraction, int threads,
                                      double storage_mb_per_s) {
    return coordl_report_predict_sized(r, CDL__V030_REPORT, cache_fraction, threads, storage_mb_per_s);
}

size_t (coordl_report_json)(const coordl_report *r, char *buf, size_t cap) {
    return coordl_report_json_sized(r, CDL__V030_REPORT, buf, cap);
}

void (coordl_report_free)(coordl_report *r) { coordl_report_free_sized(r, CDL__V030_REPORT); }
