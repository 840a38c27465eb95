/*
 * bench_index - how long coordl_open takes to index a large ImageFolder, and
 * how many bytes of memory the index costs per item.
 *
 *   bench_index [--root build/bench-index] [--classes 100] [--per-class 1000]
 *               [--repeat 3]
 *
 * The tree (classes x per-class tiny files, each a 4-byte SOI+EOI "JPEG" that
 * does not decode) is made once and reused: its completion is marked by the
 * file ROOT.done beside it. Only coordl_open is timed (readdir + stat + sort,
 * plus the arenas and the worker start); the handle is closed right after,
 * so the workers' failures on those files do not matter (their log lines are
 * dropped). Threads 1, one prefetch slot, batch 1, out 8x8 U8, no cache:
 * the smallest everything but the index.
 *
 * Memory per item: the process's resident set (/proc/self/statm) before and
 * after the first open, and malloc's bytes in use (mallinfo2) before and
 * after each open, both divided by the item count.
 *
 * Prints a line per open and
 *   RESULT index <items> <min open s> <median open s> <rss B/item> <heap B/item>
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>

#include "bench_common.h"
#include "coordl.h"

static void quiet_log(void *user, coordl_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

static uint64_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

static int make_tree(const char *root, int classes, int per_class)
{
    char done[4200];
    snprintf(done, sizeof done, "%s.done", root);
    if (access(done, F_OK) == 0) return 0;
    printf("bench_index: making %d x %d files under %s (once)\n", classes, per_class, root);
    double t0 = now_s();
    if (mkdir(root, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "bench_index: mkdir %s: %s\n", root, strerror(errno));
        return -1;
    }
    static const unsigned char soi_eoi[4] = {0xff, 0xd8, 0xff, 0xd9};
    for (int c = 0; c < classes; c++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/n%08d", root, c);
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "bench_index: mkdir %s: %s\n", dir, strerror(errno));
            return -1;
        }
        for (int i = 0; i < per_class; i++) {
            char p[8400];
            snprintf(p, sizeof p, "%s/n%08d_%d.jpg", dir, c, i);
            int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || write(fd, soi_eoi, sizeof soi_eoi) != (ssize_t)sizeof soi_eoi) {
                fprintf(stderr, "bench_index: write %s: %s\n", p, strerror(errno));
                return -1;
            }
            close(fd);
        }
    }
    FILE *f = fopen(done, "w");
    if (!f) return -1;
    fclose(f);
    printf("bench_index: made in %.1f s\n", now_s() - t0);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_index [--root build/bench-index] [--classes 100]\n"
                    "                   [--per-class 1000] [--repeat 3]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *root = "build/bench-index";
    int classes = 100, per_class = 1000, repeat = 3;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        const char *a = argv[i], *v = argv[++i];
        if (strcmp(a, "--root") == 0) root = v;
        else if (strcmp(a, "--classes") == 0) classes = atoi(v);
        else if (strcmp(a, "--per-class") == 0) per_class = atoi(v);
        else if (strcmp(a, "--repeat") == 0) repeat = atoi(v);
        else usage();
    }
    if (classes <= 0 || per_class <= 0 || repeat <= 0) usage();
    if (make_tree(root, classes, per_class) != 0) return 1;

    coordl_config cfg = coordl_config_default();
    cfg.source = root;
    cfg.threads = 1;
    cfg.prefetch_batches = 1;
    cfg.batch_size = 1;
    cfg.out_w = cfg.out_h = 8;
    cfg.layout = COORDL_U8_NHWC;
    cfg.cache_bytes = 0;
    cfg.log = quiet_log;

    double *secs = xmalloc((size_t)repeat * sizeof *secs);
    double *heap_per_item = xmalloc((size_t)repeat * sizeof *heap_per_item);
    double rss_per_item = 0;
    uint64_t items = 0;
    for (int r = 0; r < repeat; r++) {
        uint64_t rss0 = rss_bytes(), heap0 = heap_in_use();
        coordl *L = NULL;
        double t0 = now_s();
        coordl_status rc = coordl_open(&cfg, &L);
        double t1 = now_s();
        uint64_t rss1 = rss_bytes(), heap1 = heap_in_use();
        if (rc != COORDL_OK) {
            fprintf(stderr, "bench_index: coordl_open: %s: %s\n", coordl_strerror(rc),
                    coordl_errmsg(NULL));
            return 1;
        }
        items = coordl_num_items(L);
        coordl_close(L);
        malloc_trim(0);
        secs[r] = t1 - t0;
        heap_per_item[r] = ((double)heap1 - (double)heap0) / (double)items;
        if (r == 0) rss_per_item = ((double)rss1 - (double)rss0) / (double)items;
        printf("  open %d: %llu items in %.3f s (%.2f us/item); heap +%.1f B/item%s", r + 1,
               (unsigned long long)items, secs[r], secs[r] * 1e6 / (double)items,
               heap_per_item[r], r == 0 ? "" : "\n");
        if (r == 0) printf(", RSS +%.1f B/item\n", rss_per_item);
    }
    double smin = secs[0];
    for (int r = 1; r < repeat; r++)
        if (secs[r] < smin) smin = secs[r];
    double smed = median(secs, (size_t)repeat);
    double hmed = median(heap_per_item, (size_t)repeat);
    printf("RESULT index %llu %.4f %.4f %.1f %.1f\n", (unsigned long long)items, smin, smed,
           rss_per_item, hmed);
    free(secs);
    free(heap_per_item);
    return 0;
}
