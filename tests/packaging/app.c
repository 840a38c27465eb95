/*
 * app.c - the outside program of the packaging checks: a trainer's data
 * loop that knows coordl only through <coordl.h> and one of the ways
 * README's "Build" section gives (vendored files, pkg-config, CMake).
 *
 *   app DATASET_DIR     one epoch; exits 0 when every row came exactly once
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordl.h" /* vendored next to app.c, or found through -I (pkg-config, CMake) */

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: app DATASET_DIR\n"); return 2; }
    if (coordl_libversion_number() != COORDL_VERSION_NUMBER) {
        fprintf(stderr, "app: header %d, library %d\n", COORDL_VERSION_NUMBER, coordl_libversion_number());
        return 1;
    }
    coordl_config cfg = coordl_config_default();
    cfg.source = argv[1];
    cfg.batch_size = 4;
    cfg.out_w = cfg.out_h = 32;
    cfg.threads = 2;
    cfg.cache_pin = COORDL_PIN_OFF;
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "app: %s\n", coordl_errmsg(NULL));
        return 1;
    }
    const uint64_t n = coordl_num_items(L);
    unsigned char *seen = calloc(n, 1);
    uint64_t rows = 0;
    coordl_batch b;
    coordl_status rc;
    while ((rc = coordl_next(L, &b)) == COORDL_OK) {
        for (uint32_t i = 0; i < b.n; i++) seen[b.ids[i]]++;
        rows += b.n;
        coordl_release(L, &b);
    }
    int ok = rc == COORDL_END_OF_EPOCH && rows == n;
    for (uint64_t i = 0; i < n; i++) ok = ok && seen[i] == 1;
    coordl_config eff;
    coordl_get_config(L, &eff);
    printf("app: coordl %s, %llu rows of %llu items, %d workers on PUs %s: %s\n", COORDL_VERSION,
           (unsigned long long)rows, (unsigned long long)n, eff.threads, eff.cpuset, ok ? "OK" : "FAILED");
    if (!ok && rc != COORDL_END_OF_EPOCH) fprintf(stderr, "app: %s\n", coordl_errmsg(L));
    free(seen);
    coordl_close(L);
    return ok ? 0 : 1;
}
