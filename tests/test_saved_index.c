/*
 * test_saved_index.c - cfg.index_path, the saved index of a tar-shard
 * source (docs/index.md):
 *   - absent: open scans and writes it (no temporary left); present: open
 *     loads it, reading no shard byte, and the batches, ids, labels and
 *     item paths are those of a scan, byte for byte;
 *   - a stale file (a shard changed), a foreign one (another source) and a
 *     corrupt one (a flipped byte, cut short, not an index) are rescanned
 *     with a log line saying which, and rewritten;
 *   - the coordl-index tool's output (tools/coordl-index.c).
 */
#include "test_util.h"
#include "tu_io.h"
#include "tu_tar.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *g_dir, *g_shards, *g_list;
static char g_tool[4096]; /* coordl-index: $COORDL_INDEX_TOOL, else ../coordl-index beside this binary */

static uint8_t *small_jpeg(int k, uint64_t seed, size_t *n)
{
    uint8_t base[3];
    tu_class_colour(k, base);
    uint8_t *pix = tu_textured_rgb(16 + k, 16, base, seed);
    uint8_t *jpg = tu_encode_jpeg(pix, 16 + k, 16, 3, NULL, n);
    free(pix);
    return jpg;
}

/* Three shards of WebDataset samples (.jpg + .cls), 7 samples each. */
static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    g_shards = tu_join(g_dir, "shards");
    tu_mkdirs(g_shards);
    char text[4096] = "";
    for (int s = 0; s < 3; s++) {
        char *path = tu_join(g_shards, "part-%03d.tar", s);
        tu_tar t;
        tu_tar_open(&t, path);
        for (int i = 0; i < 7; i++) {
            char name[64], cls[8];
            size_t n;
            uint8_t *j = small_jpeg((s + i) % 4, (uint64_t)(s * 100 + i), &n);
            snprintf(name, sizeof name, "s%d_%02d.cls", s, i);
            snprintf(cls, sizeof cls, "%d", (s + i) % 4);
            tu_tar_file(&t, name, cls, strlen(cls));
            snprintf(name, sizeof name, "s%d_%02d.jpg", s, i);
            tu_tar_file(&t, name, j, n);
            free(j);
        }
        tu_tar_close(&t, 1);
        strcat(text, path);
        strcat(text, "\n");
        free(path);
    }
    g_list = tu_join(g_dir, "shards.txt");
    tu_write_file(g_list, text, strlen(text));
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_shards);
    free(g_list);
    return 0;
}

static coordl_config cfg_of(const char *source, const char *index_path, tu_log_record *log)
{
    coordl_config cfg = tu_config(source);
    cfg.batch_size = 4;
    cfg.out_w = cfg.out_h = 12;
    cfg.seed = 11;
    cfg.index_path = index_path;
    if (log) {
        cfg.log = tu_log_record_fn;
        cfg.log_user = log;
        cfg.log_level = COORDL_LOG_INFO;
    }
    return cfg;
}

/* Two shuffled epochs, every batch hashed, and every item's path. */
typedef struct {
    tu_run run;
    char **paths;
    uint64_t n;
} snapshot;

static snapshot snap(const coordl_config *cfg)
{
    snapshot s;
    memset(&s, 0, sizeof s);
    coordl *L = tu_open(cfg);
    s.n = coordl_num_items(L);
    s.paths = calloc(s.n, sizeof *s.paths);
    for (uint64_t i = 0; i < s.n; i++) s.paths[i] = strdup(coordl_item_path(L, i));
    if (tu_run_epochs(L, 2, &s.run) != COORDL_OK) fail_msg("%s", coordl_errmsg(L));
    coordl_close(L);
    return s;
}

static void snap_free(snapshot *s)
{
    for (uint64_t i = 0; i < s->n; i++) free(s->paths[i]);
    free(s->paths);
    tu_run_free(&s->run);
}

static void assert_same(const snapshot *a, const snapshot *b)
{
    assert_int_equal(a->n, b->n);
    for (uint64_t i = 0; i < a->n; i++) assert_string_equal(a->paths[i], b->paths[i]);
    assert_int_equal(a->run.nbatches, b->run.nbatches);
    for (size_t i = 0; i < a->run.nbatches; i++) assert_int_equal(a->run.hash[i], b->run.hash[i]);
    assert_int_equal(a->run.nrows, b->run.nrows);
    for (size_t i = 0; i < a->run.nrows; i++) {
        assert_int_equal(a->run.ids[i], b->run.ids[i]);
        assert_int_equal(a->run.labels[i], b->run.labels[i]);
    }
}

/* Files in g_dir whose name contains needle. */
static int files_containing(const char *dir, const char *needle)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += strstr(e->d_name, needle) != NULL;
    closedir(d);
    return n;
}

/* Absent: scanned and saved; present: loaded without reading a shard
 * byte; the same batches, ids, labels and paths as with no index. */
static void test_saved_index_round_trip_gives_the_scans_batches(void **state)
{
    (void)state;
    char *ix = tu_join(g_dir, "rt.cdlidx");
    coordl_config cfg = cfg_of(g_list, NULL, NULL);
    snapshot want = snap(&cfg);
    assert_int_equal(want.n, 21);

    tu_log_record *log = tu_log_record_new();
    cfg = cfg_of(g_list, ix, log);
    snapshot saved = snap(&cfg);
    assert_true(tu_log_contains(log, "does not exist yet"));
    assert_true(tu_log_contains(log, "index_path: saved"));
    assert_int_equal(access(ix, R_OK), 0);
    assert_int_equal(files_containing(g_dir, ".tmp."), 0);
    assert_same(&want, &saved);
    tu_log_record_free(log);

    /* loaded: through a caller's reader, no shard byte is read at open
     * (one open per shard gives its size, the staleness check) */
    tu_io io;
    tu_io_init(&io);
    log = tu_log_record_new();
    cfg = cfg_of(g_list, ix, log);
    cfg.io = &io.table;
    coordl *L = tu_open(&cfg);
    /* a caller's reader records sizes only: the file saved through the
     * POSIX reader (with mtimes) is stale for it, so this open rescans;
     * the next one loads */
    coordl_close(L);
    tu_io_reset_counts(&io);
    tu_log_record_free(log);
    log = tu_log_record_new();
    cfg.log_user = log;
    /* every read of a shard fails: a scan could not open; a load reads
     * none (the workers' reads fail after open: not this test's concern) */
    io.fail_read_path = ".tar";
    coordl_status rc = coordl_open(&cfg, &L);
    if (rc != COORDL_OK) fail_msg("open with a saved index read a shard: %s", coordl_errmsg(NULL));
    assert_false(tu_log_contains(log, "scanning"));
    assert_false(tu_log_contains(log, "rescanning"));
    coordl_close(L);
    tu_log_record_free(log);
    tu_io_destroy(&io);

    /* and back with the POSIX reader: rescanned once (the file records
     * the caller's reader's view), then loaded: the same run */
    cfg = cfg_of(g_list, ix, NULL);
    snapshot again = snap(&cfg);
    log = tu_log_record_new();
    cfg = cfg_of(g_list, ix, log);
    snapshot loaded = snap(&cfg);
    assert_false(tu_log_contains(log, "scanning"));
    assert_same(&want, &again);
    assert_same(&want, &loaded);
    tu_log_record_free(log);
    snap_free(&want);
    snap_free(&saved);
    snap_free(&again);
    snap_free(&loaded);
    free(ix);
}

/* Opens with index_path and checks the log says `why`, the run is the
 * scan's, and the file was rewritten so that the next open loads it. */
static void expect_rescan(const char *source, const char *ix, const char *why, const snapshot *want)
{
    tu_log_record *log = tu_log_record_new();
    coordl_config cfg = cfg_of(source, ix, log);
    snapshot got = snap(&cfg);
    if (!tu_log_contains(log, why)) fail_msg("no log line saying \"%s\"", why);
    assert_true(tu_log_contains(log, "rescanning"));
    assert_same(want, &got);
    snap_free(&got);
    tu_log_record_free(log);
    log = tu_log_record_new();
    cfg = cfg_of(source, ix, log);
    got = snap(&cfg);
    assert_false(tu_log_contains(log, "scanning"));
    assert_same(want, &got);
    snap_free(&got);
    tu_log_record_free(log);
}

static void write_at(const char *path, size_t off, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, (long)off, SEEK_SET);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

static void test_stale_foreign_and_corrupt_files_are_rescanned(void **state)
{
    (void)state;
    char *ix = tu_join(g_dir, "bad.cdlidx");
    coordl_config cfg = cfg_of(g_list, ix, NULL);
    snapshot want = snap(&cfg); /* scans and saves */
    size_t n;
    uint8_t *good = tu_read_file(ix, &n);

    /* stale: a shard's modification time moved (its bytes unchanged) */
    char *shard = tu_join(g_shards, "part-001.tar");
    struct timespec times[2] = {{0, UTIME_OMIT}, {1000000000, 0}};
    assert_int_equal(utimensat(AT_FDCWD, shard, times, 0), 0);
    expect_rescan(g_list, ix, "stale: shard", &want);

    /* foreign: the file of another source (the folder of the same shards:
     * its items are the same, its source string is not) */
    coordl_config other = cfg_of(g_shards, ix, NULL);
    snapshot via_folder = snap(&other); /* rewrites ix for the folder */
    assert_same(&want, &via_folder);
    snap_free(&via_folder);
    expect_rescan(g_list, ix, "foreign: indexes another source", &want);

    /* corrupt: a flipped byte in the names, a file cut short, not an index */
    free(good);
    good = tu_read_file(ix, &n);
    uint8_t flipped = good[n - 3] ^ 0x5a;
    write_at(ix, n - 3, &flipped, 1);
    expect_rescan(g_list, ix, "corrupt: checksum mismatch", &want);
    assert_int_equal(truncate(ix, (off_t)(n / 2)), 0);
    expect_rescan(g_list, ix, "corrupt:", &want);
    static const char not_index[] = "hello, not an index, but long enough to be read as a header of one..........."
                                    "...................................................................";
    tu_write_file(ix, not_index, sizeof not_index - 1);
    expect_rescan(g_list, ix, "not a coordl index", &want);
    assert_int_equal(files_containing(g_dir, ".tmp."), 0);

    free(good);
    free(shard);
    snap_free(&want);
    free(ix);
}

/* An index file in a folder that cannot be written: the open still
 * works from its scan and says the index was not saved. */
static void test_unwritable_index_path_logs_and_opens(void **state)
{
    (void)state;
    char *ix = tu_join(g_dir, "no-such-folder/x.cdlidx");
    tu_log_record *log = tu_log_record_new();
    coordl_config cfg = cfg_of(g_list, ix, log);
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 21);
    assert_true(tu_log_contains(log, "not saved"));
    coordl_close(L);
    tu_log_record_free(log);
    free(ix);
}

/* A coordinated group without index_path: the first member scans and
 * writes the group's index in /dev/shm; a sibling maps it, reading no
 * shard byte at open, and gets the same batches; the last member out
 * removes the file. */
static int sibling_main(const char *group, const char *ix_file, const snapshot *want)
{
    for (int i = 0; i < 2000 && access(ix_file, R_OK) != 0; i++) usleep(10000); /* the first member's scan */
    if (access(ix_file, R_OK) != 0) {
        fprintf(stderr, "sibling: %s never appeared\n", ix_file);
        return 10;
    }
    tu_io io;
    tu_io_init(&io);
    io.fail_read_path = ".tar"; /* a scan (it reads each shard's first header) fails: only a load can open */
    io.fail_read_at_start = 1;
    tu_log_record *log = tu_log_record_new();
    coordl_config cfg = cfg_of(g_list, NULL, log);
    cfg.group = group;
    cfg.group_size = 2;
    cfg.io = &io.table;
    coordl *L = NULL;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "sibling: open read a shard (it scanned?): %s\n", coordl_errmsg(NULL));
        return 11;
    }
    if (!tu_log_contains(log, "group index: loaded") || tu_log_contains(log, "scanning")) {
        fprintf(stderr, "sibling: the log does not say the group's index was loaded\n");
        return 12;
    }
    if (coordl_num_items(L) != want->n) return 13;
    for (uint64_t i = 0; i < want->n; i++)
        if (strcmp(coordl_item_path(L, i), want->paths[i]) != 0) {
            fprintf(stderr, "sibling: item %llu is %s, the scan says %s\n", (unsigned long long)i,
                    coordl_item_path(L, i), want->paths[i]);
            return 14;
        }
    tu_run run;
    memset(&run, 0, sizeof run);
    if (tu_run_epochs(L, 2, &run) != COORDL_OK) {
        fprintf(stderr, "sibling: %s\n", coordl_errmsg(L));
        return 15;
    }
    int same = run.nrows == want->run.nrows && run.nbatches == want->run.nbatches;
    for (size_t i = 0; same && i < run.nrows; i++) same = run.ids[i] == want->run.ids[i];
    for (size_t i = 0; same && i < run.nbatches; i++) same = run.hash[i] == want->run.hash[i];
    if (!same) {
        fprintf(stderr, "sibling: its batches differ from a single loader's\n");
        return 16;
    }
    tu_run_free(&run);
    coordl_close(L);
    tu_log_record_free(log);
    tu_io_destroy(&io);
    return 0;
}

static void test_group_siblings_share_one_scan(void **state)
{
    (void)state;
    char group[64], ix_file[128], shm_obj[128];
    snprintf(group, sizeof group, "ixgroup-%ld", (long)getpid());
    snprintf(ix_file, sizeof ix_file, "/dev/shm/coordl-%s.index", group);
    snprintf(shm_obj, sizeof shm_obj, "/dev/shm/coordl-%s", group);
    unlink(ix_file);
    coordl_config cfg = cfg_of(g_list, NULL, NULL);
    snapshot want = snap(&cfg);
    fflush(NULL);
    pid_t kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        alarm(60);
        _exit(sibling_main(group, ix_file, &want));
    }
    /* the same kind of reader as the sibling's (a caller's reader records
     * no modification times: a file saved through another is stale) */
    tu_io io;
    tu_io_init(&io);
    tu_log_record *log = tu_log_record_new();
    cfg = cfg_of(g_list, NULL, log);
    cfg.group = group;
    cfg.group_size = 2;
    cfg.io = &io.table;
    coordl *L = NULL;
    coordl_status rc = coordl_open(&cfg, &L);
    if (rc != COORDL_OK) {
        kill(kid, SIGKILL);
        waitpid(kid, NULL, 0);
        unlink(ix_file);
        fail_msg("first member: %s", coordl_errmsg(NULL));
    }
    assert_true(tu_log_contains(log, "group index: /dev/shm/coordl-"));
    assert_true(tu_log_contains(log, "does not exist yet"));
    tu_run run;
    memset(&run, 0, sizeof run);
    rc = tu_run_epochs(L, 2, &run);
    int status = -1;
    if (rc == COORDL_OK) coordl_close(L);
    if (waitpid(kid, &status, 0) != kid) status = -1;
    if (rc != COORDL_OK) {
        unlink(ix_file);
        fail_msg("first member: %s", coordl_errmsg(L));
    }
    assert_int_equal(run.nrows, want.run.nrows);
    for (size_t i = 0; i < run.nrows; i++) assert_int_equal(run.ids[i], want.run.ids[i]);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("the sibling failed (status 0x%x; see its message above)", (unsigned)status);
    /* both gone: the group's object and its index are removed */
    assert_int_not_equal(access(ix_file, F_OK), 0);
    assert_int_not_equal(access(shm_obj, F_OK), 0);
    tu_run_free(&run);
    tu_log_record_free(log);
    tu_io_destroy(&io);
    snap_free(&want);
}

/* coordl-index writes the index open then loads, and prints what it
 * found; a second run finds it up to date. */
static void test_coordl_index_tool_writes_and_reports(void **state)
{
    (void)state;
    if (access(g_tool, X_OK) != 0)
        fail_msg("coordl-index not found at %s (make tools, or set COORDL_INDEX_TOOL)", g_tool);
    char *ix = tu_join(g_dir, "tool.cdlidx");
    char cmd[8192], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "%s %s %s", g_tool, g_list, ix);
    assert_int_equal(tu_run_capture(cmd, &out, &err), 0);
    char want[4096];
    snprintf(want, sizeof want, "source: %s\nindex: %s (written)\nitems: 21\nshards: 3\n", g_list, ix);
    if (strncmp(out, want, strlen(want)) != 0) fail_msg("output:\n%s\nexpected it to start with:\n%s", out, want);
    coordl_config cfg = cfg_of(g_list, NULL, NULL);
    coordl *L = tu_open(&cfg);
    coordl_stats st;
    coordl_get_stats(L, &st);
    snprintf(want, sizeof want, "bytes: %llu\nclasses: %u\n", (unsigned long long)st.dataset_bytes,
             coordl_num_classes(L));
    coordl_close(L);
    assert_non_null(strstr(out, want));
    assert_non_null(strstr(out, "index bytes: "));
    free(out);
    free(err);
    out = err = NULL;
    assert_int_equal(tu_run_capture(cmd, &out, &err), 0);
    assert_non_null(strstr(out, "(up to date)"));
    free(out);
    free(err);
    out = err = NULL;
    /* an ImageFolder is not tar shards: exit 2, saying so */
    char *tree = tu_join(g_dir, "tree/a");
    tu_mkdirs(tree);
    char *img = tu_join(tree, "x.jpg");
    size_t n;
    uint8_t *j = small_jpeg(0, 1, &n);
    tu_write_file(img, j, n);
    char *root = tu_join(g_dir, "tree"), *ix2 = tu_join(g_dir, "tree.cdlidx");
    snprintf(cmd, sizeof cmd, "%s %s %s", g_tool, root, ix2);
    assert_int_equal(tu_run_capture(cmd, &out, &err), 2);
    assert_non_null(strstr(err, "is not tar shards"));
    free(out);
    free(err);
    free(j);
    free(img);
    free(tree);
    free(root);
    free(ix2);
    free(ix);
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *env = getenv("COORDL_INDEX_TOOL");
    const char *slash = strrchr(argv[0], '/');
    if (env) snprintf(g_tool, sizeof g_tool, "%s", env);
    else if (slash) snprintf(g_tool, sizeof g_tool, "%.*s/../coordl-index", (int)(slash - argv[0]), argv[0]);
    else snprintf(g_tool, sizeof g_tool, "../coordl-index");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_saved_index_round_trip_gives_the_scans_batches),
        cmocka_unit_test(test_stale_foreign_and_corrupt_files_are_rescanned),
        cmocka_unit_test(test_unwritable_index_path_logs_and_opens),
        cmocka_unit_test(test_group_siblings_share_one_scan),
        cmocka_unit_test(test_coordl_index_tool_writes_and_reports),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
