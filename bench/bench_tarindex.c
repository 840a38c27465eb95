/*
 * bench_tarindex - what a saved index (index_path, docs/index.md) saves on a
 * large tar-shard set: coordl_open's seconds, resident bytes per item and
 * storage calls when it scans every shard, when it scans and saves, and
 * when it loads the saved file.
 *
 *   bench_tarindex [--root build/bench-tar] [--shards 200] [--per-shard 5000]
 *                  [--repeat 3]
 *
 * The set (shards x per-shard one-member samples, each member a 4-byte
 * SOI+EOI "JPEG", labels from the members' first folder (1,000 classes): nothing in
 * the set decodes, only the index is measured) is made once with its own
 * tar writer and reused: ROOT.done marks it complete. Every open runs in a
 * child process of its own, so its resident set is its own: the child
 * reads VmRSS before and after coordl_open and closes at once. The opens
 * go through a counting coordl_io (POSIX underneath) that counts the
 * calls the opening thread makes (open + read_at): the storage calls a
 * parallel file system sees from one process.
 *
 * Threads 1, one prefetch slot, batch 1, out 8x8 U8, no cache: the
 * smallest everything but the index. Prints a table and
 *   RESULT tarindex <case> <items> <best open s> <median open s> <rss B/item> <storage calls>
 * with case = scan | save | load.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "bench_common.h"
#include "coordl.h"

static void quiet_log(void *user, coordl_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

/* ---- the set: ustar shards written here ------------------------------------ */

static void tar_header(unsigned char h[512], const char *name, uint64_t size)
{
    memset(h, 0, 512);
    snprintf((char *)h, 100, "%s", name);
    snprintf((char *)h + 100, 8, "%07o", 0644);
    snprintf((char *)h + 108, 8, "%07o", 0);
    snprintf((char *)h + 116, 8, "%07o", 0);
    snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
    snprintf((char *)h + 136, 12, "%011o", 0);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

static int make_set(const char *root, int shards, int per_shard)
{
    char done[4200];
    snprintf(done, sizeof done, "%s.done", root);
    if (access(done, F_OK) == 0) return 0;
    printf("bench_tarindex: writing %d shards x %d samples under %s (once)\n", shards, per_shard, root);
    const double t0 = now_s();
    if (mkdir(root, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "bench_tarindex: mkdir %s: %s\n", root, strerror(errno));
        return -1;
    }
    const size_t rec = 1024; /* a header and one block of data */
    unsigned char *buf = xmalloc((size_t)per_shard * rec + 1024);
    static const unsigned char soi_eoi[4] = {0xff, 0xd8, 0xff, 0xd9};
    for (int s = 0; s < shards; s++) {
        memset(buf, 0, (size_t)per_shard * rec + 1024);
        for (int i = 0; i < per_shard; i++) {
            char name[100];
            /* class = the sample's number mod 1000: the key's first folder */
            snprintf(name, sizeof name, "c%03d/s%05d_%06d.jpg", (s * per_shard + i) % 1000, s, i);
            tar_header(buf + (size_t)i * rec, name, sizeof soi_eoi);
            memcpy(buf + (size_t)i * rec + 512, soi_eoi, sizeof soi_eoi);
        }
        char p[4300];
        snprintf(p, sizeof p, "%s/shard-%06d.tar", root, s);
        FILE *f = fopen(p, "wb");
        const size_t n = (size_t)per_shard * rec + 1024; /* two zero blocks end it */
        if (!f || fwrite(buf, 1, n, f) != n || fclose(f) != 0) {
            fprintf(stderr, "bench_tarindex: write %s: %s\n", p, strerror(errno));
            return -1;
        }
    }
    free(buf);
    FILE *f = fopen(done, "w");
    if (!f) return -1;
    fclose(f);
    printf("bench_tarindex: written in %.1f s\n", now_s() - t0);
    return 0;
}

/* ---- a counting reader ---------------------------------------------------- */

static pthread_t g_opener;
static atomic_long g_calls;

static void count_call(void)
{
    if (pthread_equal(pthread_self(), g_opener)) atomic_fetch_add(&g_calls, 1);
}
static int c_open(void *u, const char *path, void **file, uint64_t *size)
{
    (void)u;
    count_call();
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return -EIO;
    }
    *size = (uint64_t)sb.st_size;
    *file = (void *)(intptr_t)(fd + 1);
    return 0;
}
static int64_t c_read(void *u, void *file, void *buf, uint64_t len, uint64_t off)
{
    (void)u;
    count_call();
    const ssize_t n = pread((int)(intptr_t)file - 1, buf, len, (off_t)off);
    return n < 0 ? -errno : n;
}
static void c_close(void *u, void *file)
{
    (void)u;
    close((int)(intptr_t)file - 1);
}

/* One open in a child: writes seconds, RSS bytes, items and calls to fd. */
typedef struct {
    double secs;
    uint64_t rss, items;
    long calls;
    int ok;
} open_result;

static open_result open_in_child(const char *source, const char *index_path)
{
    open_result res;
    memset(&res, 0, sizeof res);
    int fds[2];
    if (pipe(fds) != 0) return res;
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        coordl_io io = {NULL, c_open, c_read, c_close};
        coordl_config cfg = coordl_config_default();
        cfg.source = source;
        cfg.index_path = index_path;
        cfg.io = &io;
        cfg.threads = 1;
        cfg.prefetch_batches = 1;
        cfg.batch_size = 1;
        cfg.out_w = cfg.out_h = 8;
        cfg.layout = COORDL_U8_NHWC;
        cfg.cache_bytes = 0;
        cfg.log = quiet_log;
        g_opener = pthread_self();
        open_result r;
        memset(&r, 0, sizeof r);
        const uint64_t rss0 = rss_bytes();
        coordl *L = NULL;
        const double t0 = now_s();
        const coordl_status rc = coordl_open(&cfg, &L);
        r.secs = now_s() - t0;
        r.calls = atomic_load(&g_calls);
        r.rss = rss_bytes() - rss0;
        if (rc == COORDL_OK) {
            r.items = coordl_num_items(L);
            r.ok = 1;
            coordl_close(L);
        } else {
            fprintf(stderr, "bench_tarindex: coordl_open: %s: %s\n", coordl_strerror(rc), coordl_errmsg(NULL));
        }
        ssize_t w = write(fds[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r && r.ok ? 0 : 1);
    }
    close(fds[1]);
    if (pid > 0 && read(fds[0], &res, sizeof res) != (ssize_t)sizeof res) memset(&res, 0, sizeof res);
    close(fds[0]);
    int st;
    if (pid > 0) waitpid(pid, &st, 0);
    return res;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_tarindex [--root build/bench-tar] [--shards 200] [--per-shard 5000] [--repeat 3]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *root = "build/bench-tar";
    int shards = 200, per_shard = 5000, repeat = 3;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        const char *a = argv[i], *v = argv[++i];
        if (strcmp(a, "--root") == 0) root = v;
        else if (strcmp(a, "--shards") == 0) shards = atoi(v);
        else if (strcmp(a, "--per-shard") == 0) per_shard = atoi(v);
        else if (strcmp(a, "--repeat") == 0) repeat = atoi(v);
        else usage();
    }
    if (shards <= 0 || per_shard <= 0 || repeat <= 0) usage();
    if (make_set(root, shards, per_shard) != 0) return 1;
    char index[4200];
    snprintf(index, sizeof index, "%s.cdlidx", root);

    static const char *names[3] = {"scan", "save", "load"};
    static const char *what[3] = {"scan every shard (no index_path)", "scan and save (first open)",
                                  "load the saved index"};
    double secs[3][16];
    uint64_t rss[3] = {0, 0, 0}, items[3] = {0, 0, 0};
    long calls[3] = {0, 0, 0};
    if (repeat > 16) repeat = 16;
    for (int r = 0; r < repeat; r++) {
        /* rounds alternate the cases, so a neighbour's load hits all three */
        for (int c = 0; c < 3; c++) {
            if (c == 1) unlink(index); /* save: the file is absent */
            const open_result o = open_in_child(root, c == 0 ? NULL : index);
            if (!o.ok) return 1;
            secs[c][r] = o.secs;
            if (r == 0 || o.rss < rss[c]) rss[c] = o.rss;
            items[c] = o.items;
            calls[c] = o.calls;
        }
    }
    struct stat sb;
    const uint64_t file_bytes = stat(index, &sb) == 0 ? (uint64_t)sb.st_size : 0;
    printf("\ncoordl_open on %llu items in %d tar shards (%s), a child process per open, best and median of %d\n",
           (unsigned long long)items[0], shards, root, repeat);
    printf("%-34s %9s %10s %12s %14s\n", "open", "best s", "median s", "RSS B/item", "storage calls");
    for (int c = 0; c < 3; c++) {
        double sorted[16];
        memcpy(sorted, secs[c], sizeof(double) * (size_t)repeat);
        qsort(sorted, (size_t)repeat, sizeof(double), bench_cmp_double);
        const double per_item = items[c] ? (double)rss[c] / (double)items[c] : 0;
        printf("%-34s %9.3f %10.3f %12.1f %14ld\n", what[c], sorted[0], sorted[repeat / 2], per_item, calls[c]);
        printf("RESULT tarindex %s %llu %.4f %.4f %.1f %ld\n", names[c], (unsigned long long)items[c], sorted[0],
               sorted[repeat / 2], per_item, calls[c]);
    }
    printf("index file: %llu bytes (%.1f per item on disk)\n", (unsigned long long)file_bytes,
           items[2] ? (double)file_bytes / (double)items[2] : 0);
    return 0;
}
