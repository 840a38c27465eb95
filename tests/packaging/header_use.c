/*
 * header_use.c - coordl.h as a C99, C11 or C++ translation unit sees it
 * (tests/packaging/header.sh compiles it as each, warnings as errors, and
 * runs it linked with libcoordl.a): every macro over a _sized call, the
 * inline coordl_config_default, enums and structs, from the language.
 */
#include "coordl.h"

#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
#define LANG "C++"
#else
#define LANG "C"
#endif

static int step(void *user, const coordl_batch *b) {
    (void)user;
    return b->n == 0;
}

int main(void) {
    coordl_config cfg = coordl_config_default();
    coordl *L = NULL;
    /* no source: every call below must fail cleanly, with its message */
    coordl_status rc = coordl_open(&cfg, &L);
    int ok = rc == COORDL_ERR_INVALID && L == NULL && strstr(coordl_errmsg(NULL), "source") != NULL;
    coordl_stats st;
    coordl_get_stats(L, &st);
    coordl_epoch_stats es;
    coordl_batch b;
    coordl_transform t;
    coordl_config eff;
    ok = ok && coordl_get_epoch_stats(L, 0, &es) == COORDL_ERR_INVALID;
    ok = ok && coordl_next(L, &b) == COORDL_ERR_INVALID;
    ok = ok && coordl_sample_transform(L, 0, 0, &t) == COORDL_ERR_INVALID;
    ok = ok && coordl_get_config(L, &eff) == COORDL_ERR_INVALID;
    coordl_analyze_opts opts;
    memset(&opts, 0, sizeof opts);
    coordl_report rep;
    ok = ok && coordl_analyze(&cfg, step, NULL, &opts, &rep) == COORDL_ERR_INVALID;
    coordl_report_free(&rep);
    coordl_whatif w = coordl_report_predict(&rep, 0.5, 2, 0);
    ok = ok && w.threads == 2 && coordl_report_json(&rep, NULL, 0) > 0;
    ok = ok && coordl_libversion_number() == COORDL_VERSION_NUMBER && cfg.batch_size == 32;
    coordl_close(L);
    printf("header_use (%s, %ld): %s\n", LANG, (long)
#ifdef __cplusplus
           __cplusplus
#else
           __STDC_VERSION__
#endif
           , ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
}
