/*
 * loop_main.c - drives README's "Use it from a trainer" loop (README.md,
 * recipe readme-loop, written to train.c by tests/packaging/recipes.sh):
 * its train() over a dataset holding one damaged file, two epochs.
 *
 *   app DATASET_DIR     exits 0 when train() returned 0 and every row of
 *                       both epochs reached the step (the damaged file's
 *                       row came from a substitute: the loop went on)
 */
#include <stdio.h>
#include <stdint.h>

#include "coordl.h"

int train(const char *root, int epochs);

static uint64_t rows_stepped;

void train_step(const float *x, const int32_t *y, uint32_t n) {
    (void)x, (void)y;
    rows_stepped += n;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: app DATASET_DIR\n"); return 2; }
    coordl_config cfg = coordl_config_default();
    cfg.source = argv[1];
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) { fprintf(stderr, "app: %s\n", coordl_errmsg(NULL)); return 1; }
    const uint64_t items = coordl_num_items(L);
    coordl_close(L);
    const int failed = train(argv[1], 2);
    const int ok = !failed && rows_stepped == 2 * items;
    printf("app: README's loop: train() returned %d, %llu rows stepped of %llu: %s\n", failed,
           (unsigned long long)rows_stepped, (unsigned long long)(2 * items), ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
}
