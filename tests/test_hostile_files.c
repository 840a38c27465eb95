/*
 * test_hostile_files.c - files a hostile or careless dataset holds where
 * coordl expects regular files and well-formed list files (issue #12):
 *   - a FIFO (or a device) in place of an item, a token shard, a list file,
 *     a shard list or a glob match: a clear COORDL_ERR_IO naming the file,
 *     never a blocked open. Each check runs in a child process with a time
 *     bound, so a hang is reported as a failure instead of stopping the run;
 *   - the list-file label grammar: a label is decimal digits only, 0 ..
 *     2147483646 (so the class count fits an int32), nothing else on the
 *     line after the last TAB; anything else fails the open naming the line;
 *   - the cases that were already fine and must stay so: odd list files
 *     (CRLF, spaces, tabs and non-UTF-8 bytes in names), symbolic-link loops,
 *     files truncated after open, shards with negative or huge counts.
 */
#include "test_util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char *g_dir;
static int g_serial;

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    return 0;
}

/* ---- running a check in a child with a time bound ----------------------
 * The child runs fn and exits 0 when every check in it held, 1 when one
 * failed (its message on stderr). A child still running after `seconds`
 * is killed and the test fails: that is the hang the checks are about. */
typedef int (*child_fn)(void *arg);

static void run_bounded(const char *what, child_fn fn, void *arg, unsigned seconds)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(0); /* the parent's watchdog is not the child's */
        _exit(fn(arg) == 0 ? 0 : 1);
    }
    int status = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        assert_true(r == 0);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec >= (time_t)seconds) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fail_msg("%s: still blocked after %u s (killed)", what, seconds);
        }
        usleep(10000);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("%s: the check failed in the child (status 0x%x; see above)", what, status);
}

#define CHILD_CHECK(cond, ...)                                   \
    do {                                                         \
        if (!(cond)) {                                           \
            fprintf(stderr, "check failed: %s: ", #cond);        \
            fprintf(stderr, __VA_ARGS__);                        \
            fprintf(stderr, "\n");                               \
            return 1;                                            \
        }                                                        \
    } while (0)

/* Puts a FIFO at path in one step (made aside, then renamed over it), so
 * a worker reading path meanwhile sees the old file or the FIFO, never a
 * missing name. Returns 0, or -1 with errno set. */
static int put_fifo(const char *path)
{
    char tmp[4096];
    int n = snprintf(tmp, sizeof tmp, "%s.fifo-tmp", path);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    unlink(tmp);
    if (mkfifo(tmp, 0600) != 0)
        return -1;
    return rename(tmp, path);
}

static void make_fifo(const char *path)
{
    if (put_fifo(path) != 0)
        fail_msg("mkfifo %s: %s", path, strerror(errno));
}

/* ---- FIFOs and devices in place of items ------------------------------ */

#define N_ITEMS 8
#define BATCH 2
static const tu_folder_spec SPEC = {1, N_ITEMS, 20, 20, 0, TU_PAT_TEXTURED,
                                    TU_FMT_JPEG, 90, 3};

typedef struct {
    char *root;
    char *victim;     /* item 5: replaced after open */
    uint64_t victim_id;
    int policy;
    int as_device;    /* a symlink to /dev/zero instead of a FIFO */
} item_case;

static item_case make_item_case(int policy, int as_device)
{
    item_case c;
    c.root = tu_join(g_dir, "items%d", g_serial++);
    tu_make_image_folder(c.root, &SPEC);
    c.victim_id = 5;
    c.victim = tu_folder_file(c.root, &SPEC, 0, 5);
    c.policy = policy;
    c.as_device = as_device;
    return c;
}

static void replace_victim(const item_case *c)
{
    if (c->as_device) {
        char *tmp = tu_join(c->root, "link-tmp");
        if (symlink("/dev/zero", tmp) != 0 || rename(tmp, c->victim) != 0)
            fail_msg("symlink: %s", strerror(errno));
        free(tmp);
    } else {
        make_fifo(c->victim);
    }
}

/* Child: open, replace the item, run two epochs, close. FAIL: the batch of
 * the item fails with COORDL_ERR_IO naming it and saying why; SUBSTITUTE:
 * every batch is full and the item is counted bad once per epoch. */
static int child_items(void *arg)
{
    const item_case *c = arg;
    coordl_config cfg = tu_config(c->root);
    cfg.batch_size = BATCH;
    cfg.shuffle = 0;
    cfg.prefetch_batches = 1;
    cfg.readahead_items = 0; /* what is read when: only the ring's rows (no read-ahead) */
    cfg.threads = 2;
    cfg.on_bad_sample = c->policy;
    coordl *L = NULL;
    CHILD_CHECK(coordl_open(&cfg, &L) == COORDL_OK, "%s", coordl_errmsg(NULL));
    /* one ring slot, shuffle off: batch 0 may be in flight, batch 2 (ids 4
     * and 5) cannot have been read yet */
    replace_victim(c);
    const char *name = strrchr(c->victim, '/') + 1;
    uint64_t bad = 0;
    for (int e = 0; e < 2; e++) {
        for (uint64_t i = 0; i < N_ITEMS / BATCH; i++) {
            coordl_batch b;
            coordl_status rc = coordl_next(L, &b);
            if (c->policy == COORDL_BAD_FAIL && i == c->victim_id / BATCH) {
                CHILD_CHECK(rc == COORDL_ERR_IO, "epoch %d batch %llu: status %d: %s", e,
                            (unsigned long long)i, (int)rc, coordl_errmsg(L));
                CHILD_CHECK(strstr(coordl_errmsg(L), name) != NULL, "\"%s\" names no %s",
                            coordl_errmsg(L), name);
                CHILD_CHECK(strstr(coordl_errmsg(L), "not a regular file") != NULL,
                            "\"%s\" does not say why", coordl_errmsg(L));
                continue;
            }
            CHILD_CHECK(rc == COORDL_OK, "epoch %d batch %llu: status %d: %s", e,
                        (unsigned long long)i, (int)rc, coordl_errmsg(L));
            CHILD_CHECK(b.n == BATCH, "short batch %u", b.n);
            for (uint32_t r = 0; r < b.n; r++)
                CHILD_CHECK(b.ids[r] != c->victim_id, "the bad item was used");
            coordl_release(L, &b);
        }
        coordl_batch b;
        CHILD_CHECK(coordl_next(L, &b) == COORDL_END_OF_EPOCH, "no end of epoch");
        coordl_epoch_stats es;
        CHILD_CHECK(coordl_get_epoch_stats(L, (uint64_t)e, &es) == COORDL_OK, "epoch stats");
        bad += es.bad_samples;
    }
    if (c->policy == COORDL_BAD_SUBSTITUTE)
        CHILD_CHECK(bad == 2, "bad_samples %llu over 2 epochs, expected 2", (unsigned long long)bad);
    /* the diagnostic call reads the item too */
    coordl_transform t;
    CHILD_CHECK(coordl_sample_transform(L, 0, c->victim_id, &t) == COORDL_ERR_IO,
                "coordl_sample_transform did not refuse it");
    coordl_close(L);
    return 0;
}

static void check_items(int policy, int as_device, const char *what)
{
    item_case c = make_item_case(policy, as_device);
    run_bounded(what, child_items, &c, 20);
    tu_rmtree(c.root);
    free(c.root);
    free(c.victim);
}

static void test_fifo_item_fails_its_batch_with_io_error(void **state)
{
    (void)state;
    check_items(COORDL_BAD_FAIL, 0, "item replaced by a FIFO, FAIL policy");
}

static void test_fifo_item_is_substituted_and_counted(void **state)
{
    (void)state;
    check_items(COORDL_BAD_SUBSTITUTE, 0, "item replaced by a FIFO, SUBSTITUTE policy");
}

static void test_device_item_is_refused_not_read(void **state)
{
    (void)state;
    check_items(COORDL_BAD_FAIL, 1, "item replaced by a link to /dev/zero");
}

/* ---- FIFOs where the index reads --------------------------------------- */

typedef struct {
    const char *source;
    coordl_pipeline pipeline;
    const char *expect_in_msg; /* the name the message must hold */
} open_case;

static int child_open_refused(void *arg)
{
    const open_case *c = arg;
    coordl_config cfg = tu_config(c->source);
    cfg.pipeline = c->pipeline;
    if (c->pipeline == COORDL_PIPE_TOKENS)
        cfg.seq_len = 4;
    coordl *L = NULL;
    coordl_status rc = coordl_open(&cfg, &L);
    CHILD_CHECK(rc == COORDL_ERR_IO, "coordl_open = %d: %s", (int)rc, coordl_errmsg(NULL));
    CHILD_CHECK(L == NULL, "handle not reset");
    CHILD_CHECK(strstr(coordl_errmsg(NULL), c->expect_in_msg) != NULL, "\"%s\" names no %s",
                coordl_errmsg(NULL), c->expect_in_msg);
    CHILD_CHECK(strstr(coordl_errmsg(NULL), "FIFO") != NULL, "\"%s\" does not say FIFO",
                coordl_errmsg(NULL));
    return 0;
}

static void test_list_file_that_is_a_fifo_fails_open(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "fifolist");
    tu_mkdirs(dir);
    char *list = tu_join(dir, "train.txt");
    make_fifo(list);
    open_case c = {list, COORDL_PIPE_TRAIN, "train.txt"};
    run_bounded("list file that is a FIFO", child_open_refused, &c, 20);
    free(list);
    free(dir);
}

static void write_shard(const char *path)
{
    uint32_t tok[64];
    for (int i = 0; i < 64; i++)
        tok[i] = (uint32_t)i;
    tu_write_shard(path, 1, tok, 64);
}

static void test_token_source_that_is_a_fifo_fails_open(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "fifotok");
    tu_mkdirs(dir);
    char *src = tu_join(dir, "shards.bin");
    make_fifo(src);
    open_case c = {src, COORDL_PIPE_TOKENS, "shards.bin"};
    run_bounded("token source that is a FIFO", child_open_refused, &c, 20);
    free(src);
    free(dir);
}

static void test_shard_glob_matching_a_fifo_fails_open(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "fifoglob");
    char *a = tu_join(dir, "a.bin"), *b = tu_join(dir, "b.bin");
    write_shard(a);
    make_fifo(b);
    char *pattern = tu_join(dir, "*.bin");
    open_case c = {pattern, COORDL_PIPE_TOKENS, "b.bin"};
    run_bounded("shard glob matching a FIFO", child_open_refused, &c, 20);
    free(a);
    free(b);
    free(pattern);
    free(dir);
}

static void test_shard_list_naming_a_fifo_fails_open(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "fifoshlist");
    char *a = tu_join(dir, "a.bin"), *b = tu_join(dir, "b.bin");
    write_shard(a);
    make_fifo(b);
    char *list = tu_join(dir, "shards.txt");
    tu_write_file(list, "a.bin\nb.bin\n", 12);
    open_case c = {list, COORDL_PIPE_TOKENS, "b.bin"};
    run_bounded("shard list naming a FIFO", child_open_refused, &c, 20);
    free(a);
    free(b);
    free(list);
    free(dir);
}

/* A shard replaced by a FIFO after open: its windows fail, no hang; the
 * other shard's windows are untouched. Shard a.bin is read first (no
 * shuffle) and the ring holds one batch, so nothing of b.bin has been
 * read when it is swapped: every b window must be refused. (Swapping the
 * shard being read would race with a thread's kept descriptor, which
 * keeps reading the file it opened: that is fine, and not this case.) */
static int child_shard_becomes_fifo(void *arg)
{
    const char *dir = arg;
    char path[4096];
    snprintf(path, sizeof path, "%s/b.bin", dir);
    coordl_config cfg = tu_config(dir);
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.seq_len = 4;
    cfg.batch_size = 1;
    cfg.prefetch_batches = 1;
    cfg.readahead_items = 0; /* what is read when: only the ring's rows (no read-ahead) */
    cfg.threads = 1;
    cfg.shuffle = 0;
    coordl *L = NULL;
    CHILD_CHECK(coordl_open(&cfg, &L) == COORDL_OK, "%s", coordl_errmsg(NULL));
    const uint64_t nb = coordl_batches_per_epoch(L);
    CHILD_CHECK(nb == 30, "%llu batches per epoch, expected 2 shards x 15 windows", (unsigned long long)nb);
    CHILD_CHECK(put_fifo(path) == 0, "mkfifo: %s", strerror(errno));
    int ok = 0, io = 0;
    for (uint64_t i = 0; i < nb; i++) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (i < 15) { /* a.bin: tokens i*4 .. i*4+3, targets one on */
            CHILD_CHECK(rc == COORDL_OK, "batch %llu (a.bin): status %d: %s", (unsigned long long)i, (int)rc,
                        coordl_errmsg(L));
            const int32_t *in = b.data;
            for (int t = 0; t < 4; t++)
                CHILD_CHECK(in[t] == (int32_t)(i * 4 + (uint64_t)t) && b.targets[t] == in[t] + 1,
                            "batch %llu token %d: %d -> %d", (unsigned long long)i, t, (int)in[t],
                            (int)b.targets[t]);
            coordl_release(L, &b);
            ok++;
        } else {
            CHILD_CHECK(rc == COORDL_ERR_IO && strstr(coordl_errmsg(L), "FIFO"),
                        "batch %llu (b.bin, now a FIFO): status %d: %s", (unsigned long long)i, (int)rc,
                        rc == COORDL_OK ? "a batch from a FIFO" : coordl_errmsg(L));
            if (rc == COORDL_OK) coordl_release(L, &b);
            io++;
        }
    }
    CHILD_CHECK(ok == 15 && io == 15, "%d batches read, %d refused", ok, io);
    coordl_close(L);
    return 0;
}

static void test_shard_replaced_by_fifo_after_open_fails_batches(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "fifoshard");
    char *a = tu_join(dir, "a.bin"), *b = tu_join(dir, "b.bin");
    write_shard(a);
    write_shard(b);
    run_bounded("shard replaced by a FIFO after open", child_shard_becomes_fifo, dir, 20);
    free(a);
    free(b);
    free(dir);
}

/* ---- the list-file label grammar --------------------------------------- */

static char *put_list(const char *dir, const char *name, const char *text, size_t n)
{
    char *p = tu_join(dir, "%s", name);
    tu_write_file(p, text, n);
    return p;
}

static char *label_dir(void)
{
    char *dir = tu_join(g_dir, "labels%d", g_serial++);
    char *a = tu_join(dir, "a.jpg");
    uint8_t *pix = tu_solid(8, 8, 3, (const uint8_t[3]){50, 60, 70});
    tu_write_jpeg(a, pix, 8, 8, 3, NULL);
    free(pix);
    free(a);
    return dir;
}

/* Line 3 of a list holds `label` (n bytes: it may contain a NUL): the
 * open fails with COORDL_ERR_INVALID naming line 3. */
static void expect_label_refused(const char *label, size_t n)
{
    char *dir = label_dir();
    char text[256];
    int head = snprintf(text, sizeof text, "a.jpg\t0\n\na.jpg\t");
    memcpy(text + head, label, n);
    memcpy(text + head + n, "\na.jpg\t1\n", 9);
    char *list = put_list(dir, "l.txt", text, (size_t)head + n + 9);
    coordl_config cfg = tu_config(list);
    coordl *L = NULL;
    coordl_status rc = coordl_open(&cfg, &L);
    if (rc != COORDL_ERR_INVALID) {
        uint32_t k = L ? coordl_num_classes(L) : 0;
        coordl_close(L);
        fail_msg("label \"%.*s\" (%zu bytes): coordl_open = %d, num_classes %u; expected "
                 "COORDL_ERR_INVALID", (int)n, label, n, (int)rc, k);
    }
    assert_null(L);
    if (!strstr(coordl_errmsg(NULL), "line 3"))
        fail_msg("\"%s\" does not name line 3", coordl_errmsg(NULL));
    tu_rmtree(dir);
    free(list);
    free(dir);
}

static void test_label_int32_max_is_refused_no_overflow(void **state)
{
    (void)state;
    /* the class count would be 2^31: not an int32 */
    expect_label_refused("2147483647", 10);
    expect_label_refused("4294967296", 10);
    expect_label_refused("99999999999999999999999", 23);
}

static void test_label_largest_allowed_gives_int32_class_count(void **state)
{
    (void)state;
    char *dir = label_dir();
    char *list = put_list(dir, "l.txt", "a.jpg\t2147483646\na.jpg\t0\n", 25);
    coordl_config cfg = tu_config(list);
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_item_label(L, 0), 2147483646);
    assert_int_equal(coordl_num_classes(L), 2147483647u);
    coordl_close(L);
    tu_rmtree(dir);
    free(list);
    free(dir);
}

static void test_label_with_sign_or_space_is_refused(void **state)
{
    (void)state;
    expect_label_refused(" 7", 2);
    expect_label_refused("+7", 2);
    expect_label_refused("7 ", 2);
    expect_label_refused("-0", 2);
}

static void test_label_with_nul_or_junk_is_refused(void **state)
{
    (void)state;
    expect_label_refused("0\0junk", 6);
    expect_label_refused("\0", 1);
    expect_label_refused("1e3", 3);
    expect_label_refused("0x10", 4);
    expect_label_refused("\xd9\xa3", 2); /* ARABIC-INDIC DIGIT THREE */
    expect_label_refused("", 0);
}

static void test_label_leading_zeros_are_decimal(void **state)
{
    (void)state;
    char *dir = label_dir();
    char *list = put_list(dir, "l.txt", "a.jpg\t010\na.jpg\t0000000000000000000000007\n", 41);
    coordl_config cfg = tu_config(list);
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_item_label(L, 0), 10);
    assert_int_equal(coordl_item_label(L, 1), 7);
    assert_int_equal(coordl_num_classes(L), 11);
    coordl_close(L);
    tu_rmtree(dir);
    free(list);
    free(dir);
}

static void test_nul_in_a_path_is_refused_naming_the_line(void **state)
{
    (void)state;
    char *dir = label_dir();
    char *list = put_list(dir, "l.txt", "a.jpg\t0\na.jpg\0x\t1\n", 18);
    coordl_config cfg = tu_config(list);
    coordl *L = NULL;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    if (!strstr(coordl_errmsg(NULL), "line 2") || !strstr(coordl_errmsg(NULL), "NUL"))
        fail_msg("\"%s\" does not name line 2 and the NUL", coordl_errmsg(NULL));
    tu_rmtree(dir);
    free(list);
    free(dir);
}

/* ---- odd list files that are fine --------------------------------------- */

static void test_odd_names_spaces_tabs_non_utf8_crlf(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "oddnames");
    static const char *names[] = {"a b.jpg", "tab\there.jpg", "\xff\xfe\x80.jpg", " lead.jpg"};
    uint8_t *pix = tu_solid(8, 8, 3, (const uint8_t[3]){90, 90, 90});
    for (int i = 0; i < 4; i++) {
        char *p = tu_join(dir, "%s", names[i]);
        tu_write_jpeg(p, pix, 8, 8, 3, NULL);
        free(p);
    }
    free(pix);
    const char text[] = "a b.jpg\t3\r\n\r\ntab\there.jpg\t1\n\xff\xfe\x80.jpg\t2\r\n lead.jpg\t0";
    char *list = put_list(dir, "l.txt", text, sizeof text - 1);
    coordl_config cfg = tu_config(list);
    cfg.batch_size = 4;
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 4);
    static const int32_t labels[] = {3, 1, 2, 0};
    for (int i = 0; i < 4; i++) {
        char *p = tu_join(dir, "%s", names[i]);
        assert_string_equal(coordl_item_path(L, (uint64_t)i), p);
        assert_int_equal(coordl_item_label(L, (uint64_t)i), labels[i]);
        free(p);
    }
    assert_int_equal(coordl_num_classes(L), 4);
    tu_run run = {0};
    assert_int_equal(tu_run_epochs(L, 1, &run), COORDL_OK);
    assert_int_equal(run.nrows, 4);
    tu_run_free(&run);
    coordl_close(L);
    free(list);
    free(dir);
}

/* ---- symbolic-link loops ---------------------------------------------- */

static void test_file_symlink_loop_is_skipped_at_index(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "fileloop");
    char *good = tu_join(root, "k/good.jpg");
    uint8_t *pix = tu_solid(8, 8, 3, (const uint8_t[3]){90, 90, 90});
    tu_write_jpeg(good, pix, 8, 8, 3, NULL);
    free(pix);
    char *a = tu_join(root, "k/a.jpg"), *b = tu_join(root, "k/b.jpg");
    assert_int_equal(symlink("b.jpg", a), 0);
    assert_int_equal(symlink("a.jpg", b), 0);
    coordl_config cfg = tu_config(root);
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 1);
    assert_string_equal(coordl_item_path(L, 0), good);
    coordl_close(L);
    free(a);
    free(b);
    free(good);
    free(root);
}

static void test_directory_symlink_loop_fails_open_clearly(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "dirloop");
    char *good = tu_join(root, "k/good.jpg");
    uint8_t *pix = tu_solid(8, 8, 3, (const uint8_t[3]){90, 90, 90});
    tu_write_jpeg(good, pix, 8, 8, 3, NULL);
    free(pix);
    char *loop = tu_join(root, "k/again");
    assert_int_equal(symlink(".", loop), 0);
    coordl_config cfg = tu_config(root);
    coordl *L = NULL;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_null(L);
    if (!strstr(coordl_errmsg(NULL), "deeper than"))
        fail_msg("\"%s\" does not explain the loop", coordl_errmsg(NULL));
    free(loop);
    free(good);
    free(root);
}

static void test_item_turned_into_symlink_loop_is_io_error(void **state)
{
    (void)state;
    item_case c = make_item_case(COORDL_BAD_FAIL, 0);
    coordl_config cfg = tu_config(c.root);
    cfg.batch_size = BATCH;
    cfg.shuffle = 0;
    cfg.prefetch_batches = 1;
    cfg.readahead_items = 0; /* what is read when: only the ring's rows (no read-ahead) */
    coordl *L = tu_open(&cfg);
    char *tmp = tu_join(c.root, "link-tmp");
    assert_int_equal(symlink(strrchr(c.victim, '/') + 1, tmp), 0); /* to itself, once renamed */
    assert_int_equal(rename(tmp, c.victim), 0);
    free(tmp);
    for (uint64_t i = 0; i < N_ITEMS / BATCH; i++) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (i == c.victim_id / BATCH) {
            assert_int_equal(rc, COORDL_ERR_IO);
            assert_non_null(strstr(coordl_errmsg(L), strrchr(c.victim, '/') + 1));
            continue;
        }
        assert_int_equal(rc, COORDL_OK);
        coordl_release(L, &b);
    }
    coordl_close(L);
    tu_rmtree(c.root);
    free(c.root);
    free(c.victim);
}

/* ---- files truncated after open ---------------------------------------- */

static void check_truncated_after_open(size_t keep_of_1024)
{
    item_case c = make_item_case(COORDL_BAD_FAIL, 0);
    /* a large noisy JPEG, so that a cut loses scan data */
    uint8_t *noise = tu_noise_rgb(64, 64, 4);
    tu_write_jpeg(c.victim, noise, 64, 64, 3, NULL);
    free(noise);
    coordl_config cfg = tu_config(c.root);
    cfg.batch_size = BATCH;
    cfg.shuffle = 0;
    cfg.prefetch_batches = 1;
    cfg.readahead_items = 0; /* what is read when: only the ring's rows (no read-ahead) */
    coordl *L = tu_open(&cfg);
    assert_int_equal(truncate(c.victim, (off_t)(tu_file_size(c.victim) * keep_of_1024 / 1024)), 0);
    for (uint64_t i = 0; i < N_ITEMS / BATCH; i++) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (i == c.victim_id / BATCH) {
            if (rc != COORDL_ERR_CORRUPT)
                fail_msg("cut to %zu/1024: status %d: %s", keep_of_1024, (int)rc, coordl_errmsg(L));
            assert_non_null(strstr(coordl_errmsg(L), strrchr(c.victim, '/') + 1));
            continue;
        }
        assert_int_equal(rc, COORDL_OK);
        coordl_release(L, &b);
    }
    coordl_close(L);
    tu_rmtree(c.root);
    free(c.root);
    free(c.victim);
}

static void test_item_truncated_after_open_is_corrupt(void **state)
{
    (void)state;
    check_truncated_after_open(512);
    check_truncated_after_open(0);
}

/* ---- shards with negative or huge token counts ------------------------- */

static void check_shard_count_refused(int32_t count, const char *why)
{
    char *dir = tu_join(g_dir, "shcount%d", g_serial++);
    char *good = tu_join(dir, "a.bin"), *bad = tu_join(dir, "b.bin");
    write_shard(good);
    uint32_t tok[64] = {0};
    tu_write_shard_raw(bad, TU_SHARD_MAGIC_U16, 1, count, tok, 64, 2, 0);
    coordl_config cfg = tu_config(dir);
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.seq_len = 4;
    coordl *L = NULL;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_CORRUPT);
    assert_null(L);
    if (!strstr(coordl_errmsg(NULL), "b.bin") || !strstr(coordl_errmsg(NULL), why))
        fail_msg("count %d: \"%s\" does not name b.bin and \"%s\"", count, coordl_errmsg(NULL), why);
    tu_rmtree(dir);
    free(good);
    free(bad);
    free(dir);
}

static void test_shard_negative_or_huge_count_is_corrupt(void **state)
{
    (void)state;
    check_shard_count_refused(-5, "negative");
    check_shard_count_refused(INT32_MIN, "negative");
    check_shard_count_refused(INT32_MAX, "truncated");
    check_shard_count_refused(65, "truncated");
}


/* Found by fuzz_shard: a source naming one shard file skipped the index's
 * last checks, so it counted 0 classes and a shard too short for one
 * window opened as "0 items" instead of saying why. */
static void test_single_shard_file_is_checked_like_a_list(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "oneshard");
    char *a = tu_join(dir, "a.bin");
    write_shard(a); /* 64 tokens */
    coordl_config cfg = tu_config(a);
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.seq_len = 4;
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 15); /* (64 - 1) / 4 */
    assert_int_equal(coordl_num_classes(L), 1);
    coordl_close(L);
    cfg.seq_len = 64; /* needs 65 tokens */
    L = NULL;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    if (!strstr(coordl_errmsg(NULL), "no window of seq_len + 1"))
        fail_msg("\"%s\" does not say the shard is too short", coordl_errmsg(NULL));
    free(a);
    free(dir);
}

int main(void)
{
    tu_main_init(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_item_fails_its_batch_with_io_error),
        cmocka_unit_test(test_fifo_item_is_substituted_and_counted),
        cmocka_unit_test(test_device_item_is_refused_not_read),
        cmocka_unit_test(test_list_file_that_is_a_fifo_fails_open),
        cmocka_unit_test(test_token_source_that_is_a_fifo_fails_open),
        cmocka_unit_test(test_shard_glob_matching_a_fifo_fails_open),
        cmocka_unit_test(test_shard_list_naming_a_fifo_fails_open),
        cmocka_unit_test(test_shard_replaced_by_fifo_after_open_fails_batches),
        cmocka_unit_test(test_label_int32_max_is_refused_no_overflow),
        cmocka_unit_test(test_label_largest_allowed_gives_int32_class_count),
        cmocka_unit_test(test_label_with_sign_or_space_is_refused),
        cmocka_unit_test(test_label_with_nul_or_junk_is_refused),
        cmocka_unit_test(test_label_leading_zeros_are_decimal),
        cmocka_unit_test(test_nul_in_a_path_is_refused_naming_the_line),
        cmocka_unit_test(test_odd_names_spaces_tabs_non_utf8_crlf),
        cmocka_unit_test(test_file_symlink_loop_is_skipped_at_index),
        cmocka_unit_test(test_directory_symlink_loop_fails_open_clearly),
        cmocka_unit_test(test_item_turned_into_symlink_loop_is_io_error),
        cmocka_unit_test(test_item_truncated_after_open_is_corrupt),
        cmocka_unit_test(test_shard_negative_or_huge_count_is_corrupt),
        cmocka_unit_test(test_single_shard_file_is_checked_like_a_list),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
