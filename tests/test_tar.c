/*
 * test_tar.c - WebDataset-style tar shards as a source: a .tar file, a
 * folder of them, a glob, or a list file of their paths.
 *
 *   - a tar of an ImageFolder tree (made with system tar, in ustar, GNU
 *     and pax formats, sorted or not, one shard or several) gives the
 *     tree's batches, byte for byte (same items, order, labels, pixels);
 *   - WebDataset samples: members grouped by key, the first image member,
 *     labels from .cls; ids in shard order;
 *   - the index reads headers, not member data;
 *   - truncated and corrupt shards fail at open naming shard and offset;
 *   - items are cached like any other (second epoch: no storage read).
 */
#include "test_util.h"
#include "tu_io.h"
#include "tu_tar.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *g_dir;
static char *g_tree; /* the ImageFolder tree the tar tests compare with */
static int g_serial;

/* Runs a shell command in `dir`; fails the test when it fails. */
static void sh(const char *dir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sh(const char *dir, const char *fmt, ...)
{
    char cmd[8192], line[9000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char *q = tu_shell_quote(dir);
    snprintf(line, sizeof line, "cd %s && %s", q, cmd);
    free(q);
    char *err = NULL;
    int rc = tu_run_capture(line, NULL, &err);
    if (rc != 0) fail_msg("`%s` failed (%d): %s", line, rc, err ? err : "");
    free(err);
}

/* The tree: 4 classes (class_c is empty), JPEG and PNG files, a nested
 * folder with a path longer than 100 bytes (tar needs a GNU long name, a
 * pax path or a ustar prefix for it), a hidden file and a text file (both
 * ignored by an ImageFolder). */
static const char *LONG_DIR =
    "a_folder_with_a_rather_long_name_0123456789/and_another_long_one_abcdefghijklmnopqrstuvwxyz";

static void make_tree(const char *root)
{
    uint8_t base[3];
    int serial = 0;
    static const char *classes[] = {"class_a", "class_b", "class_d"};
    for (int k = 0; k < 3; k++) {
        tu_class_colour(k, base);
        for (int j = 0; j < 7; j++) {
            char *p = tu_join(root, "%s/img_%02d.%s", classes[k], j, j % 3 == 2 ? "png" : "jpg");
            uint8_t *pix = tu_textured_rgb(30 + 2 * j, 24 + k, base, (uint64_t)serial++);
            if (j % 3 == 2) tu_write_png(p, pix, 30 + 2 * j, 24 + k, 3);
            else tu_write_jpeg(p, pix, 30 + 2 * j, 24 + k, 3, NULL);
            free(pix);
            free(p);
        }
    }
    for (int j = 0; j < 3; j++) { /* deep and long paths in class_b */
        char *p = tu_join(root, "class_b/%s/deep_image_with_a_long_file_name_%d.jpg", LONG_DIR, j);
        uint8_t *pix = tu_textured_rgb(40, 30, base, (uint64_t)(100 + j));
        tu_write_jpeg(p, pix, 40, 30, 3, NULL);
        free(pix);
        free(p);
    }
    char *empty = tu_join(root, "class_c");
    tu_mkdirs(empty);
    free(empty);
    char *hidden = tu_join(root, "class_a/.hidden.jpg"), *txt = tu_join(root, "class_d/notes.txt");
    uint8_t *pix = tu_textured_rgb(20, 20, base, 999);
    tu_write_jpeg(hidden, pix, 20, 20, 3, NULL);
    free(pix);
    tu_write_file(txt, "not an image\n", 13);
    free(hidden);
    free(txt);
}

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    g_tree = tu_join(g_dir, "tree");
    make_tree(g_tree);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_tree);
    return 0;
}

static coordl_config tar_config(const char *source)
{
    coordl_config cfg = tu_config(source);
    cfg.batch_size = 5;
    cfg.out_w = cfg.out_h = 14;
    cfg.layout = COORDL_F32_NCHW;
    cfg.seed = 7;
    return cfg;
}

static tu_run run_of(const coordl_config *cfg, unsigned epochs)
{
    coordl *L = tu_open(cfg);
    tu_run r;
    memset(&r, 0, sizeof r);
    coordl_status rc = tu_run_epochs(L, epochs, &r);
    if (rc != COORDL_OK) fail_msg("%s: %s", cfg->source, coordl_errmsg(L));
    coordl_close(L);
    return r;
}

static void assert_same_run(const tu_run *a, const tu_run *b, const char *what)
{
    if (a->nbatches != b->nbatches) fail_msg("%s: %zu batches, the tree gives %zu", what, b->nbatches, a->nbatches);
    for (size_t i = 0; i < a->nbatches; i++)
        if (a->hash[i] != b->hash[i])
            fail_msg("%s: batch %zu (epoch %llu index %llu) differs from the tree's", what, i,
                     (unsigned long long)a->epoch[i], (unsigned long long)a->index[i]);
    for (size_t i = 0; i < a->nrows; i++) {
        assert_int_equal(a->ids[i], b->ids[i]);
        assert_int_equal(a->labels[i], b->labels[i]);
    }
}

/* ---- a tar of an ImageFolder tree is the tree ------------------------- */

/* system tar in each format, as one shard, sorted and in directory order;
 * the same index, labels and batches as the tree (train pipeline,
 * shuffled, two epochs). */
static void test_tar_of_imagefolder_tree_gives_the_trees_batches(void **state)
{
    (void)state;
    coordl_config cfg = tar_config(g_tree);
    coordl *L = tu_open(&cfg);
    const uint64_t n = coordl_num_items(L);
    const uint32_t k = coordl_num_classes(L);
    assert_int_equal(n, 24);
    assert_int_equal(k, 4);
    coordl_close(L);
    tu_run want = run_of(&cfg, 2);
    static const char *formats[] = {"ustar", "gnu", "pax"};
    for (int f = 0; f < 3; f++)
        for (int sorted = 0; sorted < 2; sorted++) {
            char *tar = tu_join(g_dir, "tree-%s-%d.tar", formats[f], sorted);
            sh(g_tree, "tar --format=%s %s -cf %s .", formats[f], sorted ? "--sort=name" : "", tar);
            cfg = tar_config(tar);
            L = tu_open(&cfg);
            assert_int_equal(coordl_num_items(L), n);
            assert_int_equal(coordl_num_classes(L), k);
            coordl_close(L);
            tu_run got = run_of(&cfg, 2);
            char what[256];
            snprintf(what, sizeof what, "tar --format=%s%s", formats[f], sorted ? " --sort=name" : "");
            assert_same_run(&want, &got, what);
            tu_run_free(&got);
            free(tar);
        }
    tu_run_free(&want);
}

/* Item paths and labels of a tar match the tree's one for one. */
static void test_tar_items_are_the_trees_items(void **state)
{
    (void)state;
    char *tar = tu_join(g_dir, "items.tar");
    sh(g_tree, "tar -cf %s class_d class_b class_a class_c", tar); /* not in class order */
    coordl_config cfg = tar_config(g_tree);
    coordl *T = tu_open(&cfg);
    cfg.source = tar;
    coordl *S = tu_open(&cfg);
    assert_int_equal(coordl_num_items(S), coordl_num_items(T));
    for (uint64_t id = 0; id < coordl_num_items(T); id++) {
        const char *tp = coordl_item_path(T, id), *sp = coordl_item_path(S, id);
        /* tree: <root>/<rel>; shard: <tar>:<rel> */
        assert_true(strncmp(sp, tar, strlen(tar)) == 0 && sp[strlen(tar)] == ':');
        assert_string_equal(sp + strlen(tar) + 1, tp + strlen(g_tree) + 1);
        assert_int_equal(coordl_item_label(S, id), coordl_item_label(T, id));
    }
    coordl_close(S);
    coordl_close(T);
    free(tar);
}

/* The tree split over several shards (by class folder, not in class order)
 * as a folder of shards, a glob and a list file: the tree's batches. */
static void test_tree_split_over_shards_folder_glob_list(void **state)
{
    (void)state;
    coordl_config cfg = tar_config(g_tree);
    tu_run want = run_of(&cfg, 1);
    char *dir = tu_join(g_dir, "shards");
    tu_mkdirs(dir);
    sh(g_tree, "tar -cf %s/s-0.tar class_d && tar --format=pax -cf %s/s-1.tar class_a class_c && "
               "tar --format=gnu -cf %s/s-2.tar class_b", dir, dir, dir);
    char *glob = tu_join(dir, "s-*.tar");
    char *list = tu_join(dir, "shards.txt");
    char text[256];
    snprintf(text, sizeof text, "s-2.tar\n\n%s/s-0.tar\r\ns-1.tar\n", dir); /* relative and absolute */
    tu_write_file(list, text, strlen(text));
    const char *sources[] = {dir, glob, list};
    for (int i = 0; i < 3; i++) {
        cfg = tar_config(sources[i]);
        tu_run got = run_of(&cfg, 1);
        assert_same_run(&want, &got, sources[i]);
        tu_run_free(&got);
    }
    tu_run_free(&want);
    free(glob);
    free(list);
    free(dir);
}

/* ---- WebDataset samples ------------------------------------------------- */

static uint8_t *small_jpeg(int k, uint64_t seed, size_t *n)
{
    uint8_t base[3];
    tu_class_colour(k, base);
    uint8_t *pix = tu_textured_rgb(16, 16, base, seed);
    uint8_t *jpg = tu_encode_jpeg(pix, 16, 16, 3, NULL, n);
    free(pix);
    return jpg;
}

/* Members grouped by key (the path up to the first dot of the last
 * component); the first image member is the item; .cls is the label; ids
 * in shard order, then member order; samples without an image skipped. */
static void test_webdataset_samples_keys_first_image_and_cls(void **state)
{
    (void)state;
    char *a = tu_join(g_dir, "wds-a.tar"), *b = tu_join(g_dir, "wds-b.tar");
    size_t n1, n2, n3;
    uint8_t *j1 = small_jpeg(1, 1, &n1), *j2 = small_jpeg(2, 2, &n2), *j3 = small_jpeg(3, 3, &n3);
    tu_tar t;
    tu_tar_open(&t, a);
    /* sample 1: cls before the image, a json beside */
    tu_tar_file(&t, "d/s001.cls", "7\n", 2);
    const uint64_t h1 = tu_tar_file(&t, "d/s001.jpg", j1, n1);
    tu_tar_file(&t, "d/s001.json", "{}", 2);
    /* no image: skipped */
    tu_tar_file(&t, "d/s002.cls", "1", 1);
    tu_tar_file(&t, "d/s002.txt", "caption", 7);
    /* two image members: the first (a multi-dot extension) is the item */
    tu_tar_file(&t, "d/s003.cls", " 0 ", 3);
    const uint64_t h3 = tu_tar_file(&t, "d/s003.left.png.jpg", j2, n2);
    tu_tar_file(&t, "d/s003.jpg", j3, n3);
    tu_tar_close(&t, 1);
    tu_tar_open(&t, b);
    tu_tar_file(&t, "s004.jpeg", j3, n3);
    tu_tar_file(&t, "s004.cls", "12", 2);
    tu_tar_close(&t, 1);
    char *list = tu_join(g_dir, "wds.txt");
    char text[512];
    snprintf(text, sizeof text, "%s\n%s\n", a, b);
    tu_write_file(list, text, strlen(text));

    coordl_config cfg = tar_config(list);
    cfg.shuffle = 0;
    cfg.batch_size = 3;
    cfg.layout = COORDL_U8_NHWC;
    cfg.pipeline = COORDL_PIPE_EVAL;
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 3);
    assert_int_equal(coordl_num_classes(L), 13);
    char want[4096];
    snprintf(want, sizeof want, "%s:d/s001.jpg", a);
    assert_string_equal(coordl_item_path(L, 0), want);
    snprintf(want, sizeof want, "%s:d/s003.left.png.jpg", a);
    assert_string_equal(coordl_item_path(L, 1), want);
    snprintf(want, sizeof want, "%s:s004.jpeg", b);
    assert_string_equal(coordl_item_path(L, 2), want);
    assert_int_equal(coordl_item_label(L, 0), 7);
    assert_int_equal(coordl_item_label(L, 1), 0);
    assert_int_equal(coordl_item_label(L, 2), 12);
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_int_equal(st.dataset_bytes, n1 + n2 + n3);
    /* the pixels are the members' (the eval pipeline of a solid-ish image:
     * compare with the same JPEG as a plain file through a list source) */
    coordl_batch bt;
    assert_int_equal(coordl_next(L, &bt), COORDL_OK);
    char *p1 = tu_join(g_dir, "wds-ref/1.jpg"), *p2 = tu_join(g_dir, "wds-ref/2.jpg"),
         *p3 = tu_join(g_dir, "wds-ref/3.jpg"), *rl = tu_join(g_dir, "wds-ref/l.txt");
    tu_write_file(p1, j1, n1);
    tu_write_file(p2, j2, n2);
    tu_write_file(p3, j3, n3);
    tu_write_file(rl, "1.jpg\t7\n2.jpg\t0\n3.jpg\t12\n", 24);
    cfg.source = rl;
    coordl *R = tu_open(&cfg);
    coordl_batch br;
    assert_int_equal(coordl_next(R, &br), COORDL_OK);
    assert_int_equal(bt.data_bytes, br.data_bytes);
    assert_memory_equal(bt.data, br.data, bt.data_bytes);
    assert_memory_equal(bt.labels, br.labels, 3 * sizeof(int32_t));
    coordl_release(R, &br);
    coordl_release(L, &bt);
    coordl_close(R);
    coordl_close(L);
    (void)h1;
    (void)h3;
    free(j1); free(j2); free(j3); free(a); free(b); free(list);
    free(p1); free(p2); free(p3); free(rl);
}

/* GNU long names, pax paths and sizes, and base-256 size fields, written
 * by hand: each member lands where its name says. */
static void test_long_names_pax_records_and_base256_sizes(void **state)
{
    (void)state;
    char *tar = tu_join(g_dir, "names.tar");
    size_t n1, n2, n3, n4;
    uint8_t *j1 = small_jpeg(0, 11, &n1), *j2 = small_jpeg(1, 12, &n2), *j3 = small_jpeg(2, 13, &n3),
            *j4 = small_jpeg(3, 14, &n4);
    char long1[300], long2[300];
    snprintf(long1, sizeof long1, "c0/%s/%s/x.jpg", LONG_DIR, LONG_DIR);
    snprintf(long2, sizeof long2, "c1/%s/y.jpg", LONG_DIR);
    tu_tar t;
    tu_tar_open(&t, tar);
    tu_tar_gnu_long_name(&t, long1);
    tu_tar_header(&t, "c0/cut-off-name", '0', n1, TU_TAR_SIZE_OCTAL, 1);
    tu_tar_data(&t, j1, n1);
    tu_tar_pax(&t, "path", long2, NULL, NULL);
    tu_tar_file(&t, "c1/wrong-name.jpg", j2, n2);
    /* a pax size overrides a header that says 0 */
    char size[32];
    snprintf(size, sizeof size, "%zu", n3);
    tu_tar_pax(&t, "size", size, "path", "c2/z.jpg");
    tu_tar_header(&t, "c2/zz", '0', 0, TU_TAR_SIZE_OCTAL, 0);
    tu_tar_data(&t, j3, n3);
    tu_tar_header(&t, "c3/w.jpg", '0', n4, TU_TAR_SIZE_BASE256, 1);
    tu_tar_data(&t, j4, n4);
    tu_tar_close(&t, 1);
    coordl_config cfg = tar_config(tar);
    cfg.shuffle = 0;
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 4);
    assert_int_equal(coordl_num_classes(L), 4);
    const char *want[4] = {long1, long2, "c2/z.jpg", "c3/w.jpg"};
    const size_t sizes[4] = {n1, n2, n3, n4};
    uint64_t total = 0;
    for (int i = 0; i < 4; i++) {
        const char *p = coordl_item_path(L, (uint64_t)i);
        assert_string_equal(p + strlen(tar) + 1, want[i]);
        assert_int_equal(coordl_item_label(L, (uint64_t)i), i);
        total += sizes[i];
    }
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_int_equal(st.dataset_bytes, total);
    tu_run r;
    memset(&r, 0, sizeof r);
    assert_int_equal(tu_run_epochs(L, 1, &r), COORDL_OK); /* every member decodes */
    tu_run_free(&r);
    coordl_close(L);
    free(j1); free(j2); free(j3); free(j4);
    free(tar);
}

/* ---- the index reads headers, not member data --------------------------- */

/* A reader that records the byte ranges the thread in coordl_open reads
 * (the workers, started at the end of open, are other threads). */
typedef struct {
    tu_io io;
    pthread_t opener;
    pthread_mutex_t mu;
    uint64_t off[4096], len[4096];
    size_t n;
} opener_io;

static int64_t opener_read_at(void *user, void *file, void *buf, uint64_t len, uint64_t offset)
{
    opener_io *o = user;
    int64_t got = tu_io__read_at(&o->io, file, buf, len, offset);
    if (got > 0 && pthread_equal(pthread_self(), o->opener)) {
        pthread_mutex_lock(&o->mu);
        assert_true(o->n < 4096);
        o->off[o->n] = offset;
        o->len[o->n++] = (uint64_t)got;
        pthread_mutex_unlock(&o->mu);
    }
    return got;
}
static int opener_open(void *user, const char *path, void **file, uint64_t *size)
{
    return tu_io__open(&((opener_io *)user)->io, path, file, size);
}
static void opener_close(void *user, void *file) { tu_io__close(&((opener_io *)user)->io, file); }

/* 40 samples of a noise JPEG (~25 KB), a .cls and a .json: coordl_open
 * reads every header, the .cls texts, and not one byte of JPEG or JSON
 * data; the workers read the JPEGs later. */
static void test_index_reads_headers_not_member_data(void **state)
{
    (void)state;
    char *tar = tu_join(g_dir, "big.tar");
    uint64_t jpg_data[40], jpg_len[40], json_data[40];
    tu_tar t;
    tu_tar_open(&t, tar);
    for (int i = 0; i < 40; i++) {
        uint8_t *pix = tu_noise_rgb(96, 96, (uint64_t)i);
        size_t n;
        uint8_t *jpg = tu_encode_jpeg(pix, 96, 96, 3, NULL, &n);
        char name[64], cls[8];
        snprintf(name, sizeof name, "s%03d.jpg", i);
        jpg_data[i] = tu_tar_file(&t, name, jpg, n) + 512;
        jpg_len[i] = n;
        snprintf(name, sizeof name, "s%03d.cls", i);
        snprintf(cls, sizeof cls, "%d", i % 5);
        tu_tar_file(&t, name, cls, strlen(cls));
        snprintf(name, sizeof name, "s%03d.json", i);
        json_data[i] = tu_tar_file(&t, name, "{\"k\": 1}", 8) + 512;
        free(jpg);
        free(pix);
    }
    tu_tar_close(&t, 1);
    opener_io o;
    memset(&o, 0, sizeof o);
    tu_io_init(&o.io);
    pthread_mutex_init(&o.mu, NULL);
    o.opener = pthread_self();
    coordl_io table = {&o, opener_open, opener_read_at, opener_close};
    coordl_config cfg = tar_config(tar);
    cfg.io = &table;
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 40);
    assert_int_equal(coordl_num_classes(L), 5);
    pthread_mutex_lock(&o.mu);
    const size_t reads = o.n;
    uint64_t bytes = 0;
    for (size_t r = 0; r < reads; r++) {
        bytes += o.len[r];
        for (int i = 0; i < 40; i++) {
            if (o.off[r] < jpg_data[i] + jpg_len[i] && jpg_data[i] < o.off[r] + o.len[r])
                fail_msg("coordl_open read [%llu, %llu), inside the data of s%03d.jpg", (unsigned long long)o.off[r],
                         (unsigned long long)(o.off[r] + o.len[r]), i);
            if (o.off[r] < json_data[i] + 8 && json_data[i] < o.off[r] + o.len[r])
                fail_msg("coordl_open read the data of s%03d.json", i);
        }
    }
    pthread_mutex_unlock(&o.mu);
    coordl_close(L);
    /* per sample: the .jpg header, the .cls header, then the .cls text
     * with the .json header in one read: 3 reads, 2 KiB (and the end) */
    assert_true(reads <= 3 * 40 + 1);
    assert_true(bytes <= 40 * 2048 + 512);
    pthread_mutex_destroy(&o.mu);
    tu_io_destroy(&o.io);
    free(tar);
}

/* ---- truncated and corrupt shards fail at open --------------------------- */

/* Opens `tar` and expects COORDL_ERR_CORRUPT with a message naming the
 * shard, "offset <off>" and `what`. */
static void expect_corrupt(const char *tar, uint64_t off, const char *what)
{
    coordl_config cfg = tar_config(tar);
    coordl *L = (coordl *)(uintptr_t)1;
    coordl_status rc = coordl_open(&cfg, &L);
    const char *msg = coordl_errmsg(NULL);
    if (rc != COORDL_ERR_CORRUPT) fail_msg("%s: status %d (%s): %s", what, (int)rc, coordl_strerror(rc), msg);
    assert_null(L);
    char offs[64];
    snprintf(offs, sizeof offs, "offset %llu", (unsigned long long)off);
    if (!strstr(msg, tar) || !strstr(msg, offs) || !strstr(msg, what))
        fail_msg("message \"%s\" does not name the shard, \"%s\" and \"%s\"", msg, offs, what);
}

/* A good 3-member shard (labels from .cls); returns its bytes, the
 * header offsets in hdr[0..5]. */
static uint8_t *good_shard(size_t *n, uint64_t hdr[6])
{
    char *tar = tu_join(g_dir, "good-%d.tar", g_serial++);
    size_t nj;
    uint8_t *jpg = small_jpeg(0, 42, &nj);
    tu_tar t;
    tu_tar_open(&t, tar);
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "k%d.jpg", i);
        hdr[2 * i] = tu_tar_file(&t, name, jpg, nj);
        snprintf(name, sizeof name, "k%d.cls", i);
        hdr[2 * i + 1] = tu_tar_file(&t, name, "3", 1);
    }
    tu_tar_close(&t, 1);
    uint8_t *bytes = tu_read_file(tar, n);
    unlink(tar);
    free(tar);
    free(jpg);
    return bytes;
}

static void test_truncated_and_corrupt_shards_fail_at_open_naming_offset(void **state)
{
    (void)state;
    size_t n;
    uint64_t hdr[6];
    uint8_t *good = good_shard(&n, hdr);
    char *tar = tu_join(g_dir, "bad.tar");
    /* the good one opens */
    tu_write_file(tar, good, n);
    coordl_config cfg = tar_config(tar);
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 3);
    coordl_close(L);
    /* cut inside the data of member 2 (k1.jpg) */
    tu_write_file(tar, good, hdr[2] + 512 + 100);
    expect_corrupt(tar, hdr[2], "past the end of the shard");
    /* cut inside the header of member 4 (k2.jpg) */
    tu_write_file(tar, good, hdr[4] + 200);
    expect_corrupt(tar, hdr[4], "truncated header");
    /* cut right after the last member: no end-of-archive blocks */
    tu_write_file(tar, good, hdr[5] + 1024);
    expect_corrupt(tar, hdr[5] + 1024, "without the end-of-archive");
    /* a flipped byte in the name of member 3 (k1.cls) */
    uint8_t *bad = malloc(n);
    memcpy(bad, good, n);
    bad[hdr[3] + 1] ^= 0x20;
    tu_write_file(tar, bad, n);
    expect_corrupt(tar, hdr[3], "checksum");
    /* a size field of letters (checksum fixed up) in member 2 */
    memcpy(bad, good, n);
    memcpy(bad + hdr[2] + 124, "0000000zz00", 11);
    {
        uint8_t *h = bad + hdr[2];
        memset(h + 148, ' ', 8);
        unsigned sum = 0;
        for (int i = 0; i < 512; i++) sum += h[i];
        char tmp[8];
        snprintf(tmp, sizeof tmp, "%06o", sum);
        memcpy(h + 148, tmp, 7);
    }
    tu_write_file(tar, bad, n);
    expect_corrupt(tar, hdr[2], "size field");
    /* not a tar: a JPEG named .tar */
    size_t nj;
    uint8_t *jpg = small_jpeg(1, 5, &nj);
    tu_write_file(tar, jpg, nj);
    expect_corrupt(tar, 0, "checksum");
    /* a bad .cls */
    memcpy(bad, good, n);
    bad[hdr[1] + 512] = 'x'; /* the data changed, not the header: no checksum to fix */
    tu_write_file(tar, bad, n);
    expect_corrupt(tar, hdr[1], ".cls");
    free(jpg);
    free(bad);
    free(good);
    free(tar);
}

static void test_mixed_cls_and_unlabelled_samples_are_invalid(void **state)
{
    (void)state;
    char *tar = tu_join(g_dir, "mixed.tar");
    size_t nj;
    uint8_t *jpg = small_jpeg(0, 3, &nj);
    tu_tar t;
    tu_tar_open(&t, tar);
    tu_tar_file(&t, "c/a.jpg", jpg, nj);
    tu_tar_file(&t, "c/a.cls", "1", 1);
    tu_tar_file(&t, "c/b.jpg", jpg, nj);
    tu_tar_close(&t, 1);
    coordl_config cfg = tar_config(tar);
    coordl *L = NULL;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "c/b.jpg"));
    assert_non_null(strstr(coordl_errmsg(NULL), ".cls"));
    free(jpg);
    free(tar);
}

/* Shards without a sample (only the end-of-archive blocks, as `tar cf x.tar
 * -T /dev/null` writes; a folder member and a text file; a hidden image)
 * are a clean "holds no images", not undefined behaviour: the index once
 * handed qsort its NULL sample array (fuzz_tar; UBSan: "null pointer
 * passed as argument 1", so this test fails before the fix under make
 * test-sanitize). */
static void test_shard_without_samples_holds_no_images(void **state)
{
    (void)state;
    size_t nj;
    uint8_t *jpg = small_jpeg(0, 5, &nj);
    for (int k = 0; k < 3; k++) {
        char *tar = tu_join(g_dir, "nosamples-%d.tar", k);
        tu_tar t;
        tu_tar_open(&t, tar);
        if (k == 1) {
            tu_tar_dir(&t, "class_a/");
            tu_tar_file(&t, "class_a/readme.txt", "text", 4);
        } else if (k == 2) {
            tu_tar_file(&t, "class_a/.hidden.jpg", jpg, nj);
        }
        tu_tar_close(&t, 1);
        coordl_config cfg = tar_config(tar);
        coordl *L = NULL;
        coordl_status rc = coordl_open(&cfg, &L);
        if (rc != COORDL_ERR_INVALID || !strstr(coordl_errmsg(NULL), "holds no images"))
            fail_msg("shard %d: status %d: %s", k, (int)rc, coordl_errmsg(NULL));
        assert_null(L);
        free(tar);
    }
    free(jpg);
}

static void test_shard_list_with_a_bad_line_is_invalid(void **state)
{
    (void)state;
    char *list = tu_join(g_dir, "badlist.txt");
    tu_write_file(list, "a.tar\nb.tar\nnot-a-shard.zip\n", 28);
    coordl_config cfg = tar_config(list);
    coordl *L = NULL;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_non_null(strstr(coordl_errmsg(NULL), "line 3"));
    free(list);
}

/* Every list file has one parser (io.c's cdl__list_next): a shard-list line
 * holding a NUL byte is refused naming the line, as item and token lists
 * already were. (The tar list's old parser cut the line at the NUL and
 * opened the shard named before it.) */
static void test_shard_list_line_with_a_nul_byte_is_invalid(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "nulshards");
    tu_mkdirs(dir);
    sh(g_tree, "tar -cf %s/n-0.tar class_a", dir);
    char *list = tu_join(dir, "nul.txt");
    static const char text[] = "n-0.tar\nn-0.tar\0-was-cut-here.zip\n";
    tu_write_file(list, text, sizeof text - 1);
    coordl_config cfg = tar_config(list);
    coordl *L = NULL;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_null(L);
    assert_non_null(strstr(coordl_errmsg(NULL), "line 2: holds a NUL byte"));
    free(list);
    free(dir);
}

/* A folder holding both class folders and .tar files stays an ImageFolder
 * (as before shards existed): the .tar is not an image and is ignored. */
static void test_folder_with_class_folders_stays_an_imagefolder(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "mixedroot");
    sh(g_dir, "cp -r %s %s && tar -cf %s/extra.tar -C %s class_a", g_tree, root, root, g_tree);
    coordl_config cfg = tar_config(root);
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 24);
    assert_int_equal(coordl_num_classes(L), 4);
    assert_null(strstr(coordl_item_path(L, 0), ".tar:"));
    coordl_close(L);
    tu_rmtree(root);
    free(root);
}

/* ---- cached like any other item ----------------------------------------- */

static void test_tar_items_are_cached_and_batches_unchanged(void **state)
{
    (void)state;
    char *tar = tu_join(g_dir, "cached.tar");
    sh(g_tree, "tar -cf %s .", tar);
    coordl_config cfg = tar_config(tar);
    tu_run cold = run_of(&cfg, 3);
    cfg.cache_bytes = 1u << 20;
    coordl *L = tu_open(&cfg);
    tu_run warm;
    memset(&warm, 0, sizeof warm);
    assert_int_equal(tu_run_epochs(L, 3, &warm), COORDL_OK);
    coordl_epoch_stats e1, e2;
    assert_int_equal(coordl_get_epoch_stats(L, 1, &e1), COORDL_OK);
    assert_int_equal(coordl_get_epoch_stats(L, 2, &e2), COORDL_OK);
    coordl_close(L);
    /* epochs 1 and 2: from the cache (a few items of epoch 0's tail can
     * be read late, see docs/analyzer.md, "The counters") */
    assert_true(e1.cache_hits >= 20);
    assert_int_equal(e2.cache_misses, 0);
    assert_int_equal(e2.storage_bytes, 0);
    assert_same_run(&cold, &warm, "cached");
    tu_run_free(&cold);
    tu_run_free(&warm);
    free(tar);
}

/* ---- hostile shards: mutations of a good one ----------------------------- */

/* 400 mutations of a shard with GNU long names, pax records and .cls
 * members (bytes overwritten in and around headers, size fields, cuts),
 * served from memory: every open returns OK or an error, every opened
 * handle runs an epoch (batches or per-batch errors) and closes. Under
 * ASan (make test-sanitize) this is what proves the parser never reads
 * outside what it was given. */
static void test_mutated_shards_fail_cleanly(void **state)
{
    (void)state;
    char *path = tu_join(g_dir, "mut.tar");
    size_t nj;
    uint8_t *jpg = small_jpeg(2, 77, &nj);
    char long1[300];
    snprintf(long1, sizeof long1, "c0/%s/%s/x.jpg", LONG_DIR, LONG_DIR);
    tu_tar t;
    tu_tar_open(&t, path);
    tu_tar_file(&t, "c0/a.jpg", jpg, nj);
    tu_tar_file(&t, "c0/a.cls", "1", 1);
    tu_tar_gnu_long_name(&t, long1);
    tu_tar_header(&t, "cut", '0', nj, TU_TAR_SIZE_OCTAL, 1);
    tu_tar_data(&t, jpg, nj);
    char long_cls[300];
    snprintf(long_cls, sizeof long_cls, "c0/%s/%s/x.cls", LONG_DIR, LONG_DIR);
    tu_tar_gnu_long_name(&t, long_cls);
    tu_tar_header(&t, "cut2", '0', 1, TU_TAR_SIZE_OCTAL, 1);
    tu_tar_data(&t, "0", 1);
    tu_tar_pax(&t, "path", "c1/b.jpg", "size", "0");
    tu_tar_header(&t, "c1/b.jpg", '0', 0, TU_TAR_SIZE_OCTAL, 0);
    tu_tar_file(&t, "c1/b.cls", "2", 1);
    tu_tar_close(&t, 1);
    size_t n;
    uint8_t *good = tu_read_file(path, &n);
    uint8_t *bad = malloc(n);
    uint64_t rng = 12345;
    int opened = 0, refused = 0;
    for (int it = 0; it < 400; it++) {
        memcpy(bad, good, n);
        size_t len = n;
        const int muts = it == 0 ? 0 : 1 + (int)(tu_rand(&rng) % 4); /* 0: the good one */
        for (int m = 0; m < muts; m++) {
            const uint64_t r = tu_rand(&rng);
            const size_t block = (size_t)(r % (n / 512)) * 512;
            switch ((r >> 20) % 5) {
            case 0: bad[block + (r >> 32) % 512] = (uint8_t)(r >> 40); break;   /* any byte of a block */
            case 1: memset(bad + block + 124, (int)('0' + (r >> 32) % 10), 11); break; /* size digits */
            case 2: bad[block + 124] = (uint8_t)(0x80 | (r >> 32)); break;      /* base-256 size */
            case 3: bad[block + 156] = "0xLgK57"[(r >> 32) % 7]; break;          /* type */
            case 4: len = (size_t)((r >> 32) % n); break;                        /* cut */
            }
        }
        tu_io io;
        tu_io_init(&io);
        io.mem_only = 1;
        tu_io_add_mem(&io, "mem:/m.tar", bad, len);
        coordl_config cfg = tar_config("mem:/m.tar");
        cfg.io = &io.table;
        cfg.batch_size = 1;
        cfg.threads = 1;
        cfg.prefetch_batches = 1;
        coordl *L = NULL;
        coordl_status rc = coordl_open(&cfg, &L);
        if (it == 0 && rc != COORDL_OK) fail_msg("the unmutated shard: %s", coordl_errmsg(NULL));
        if (rc == COORDL_OK) {
            opened++;
            for (int ends = 0; ends < 1;) {
                coordl_batch b;
                rc = coordl_next(L, &b);
                if (rc == COORDL_END_OF_EPOCH) ends++;
                else if (rc == COORDL_OK) coordl_release(L, &b);
                else if (rc != COORDL_ERR_CORRUPT && rc != COORDL_ERR_IO && rc != COORDL_ERR_UNSUPPORTED)
                    fail_msg("mutation %d: coordl_next = %d: %s", it, (int)rc, coordl_errmsg(L));
            }
            coordl_close(L);
        } else {
            refused++;
            if (rc != COORDL_ERR_CORRUPT && rc != COORDL_ERR_INVALID && rc != COORDL_ERR_IO)
                fail_msg("mutation %d: coordl_open = %d: %s", it, (int)rc, coordl_errmsg(NULL));
            assert_null(L);
            assert_true(strlen(coordl_errmsg(NULL)) > 0);
        }
        assert_int_equal(atomic_load(&io.open_now), 0);
        tu_io_destroy(&io);
    }
    printf("mutations: %d opened, %d refused at open\n", opened, refused);
    if (!(opened > 20 && refused > 20)) /* both paths were taken, often */
        fail_msg("opened %d, refused %d", opened, refused);
    free(bad);
    free(good);
    free(jpg);
    free(path);
}

/* ---- a coordinated group over a tar source ------------------------------ */

/* A member: opens the group, consumes two epochs, writes its batch hashes
 * to `out` (count, then hashes); exit status 0, or 1 on any failure.
 * Children do not use cmocka: the parent asserts. */
static void tar_group_member(const coordl_config *cfg, const char *out)
{
    alarm(60);
    coordl *L = NULL;
    if (coordl_open(cfg, &L) != COORDL_OK) {
        fprintf(stderr, "member: %s\n", coordl_errmsg(NULL));
        _exit(1);
    }
    uint64_t hashes[256];
    uint64_t n = 0;
    for (int ends = 0; ends < 2;) {
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) { ends++; continue; }
        if (rc != COORDL_OK || n == 256) { fprintf(stderr, "member: %s\n", coordl_errmsg(L)); _exit(1); }
        hashes[n++] = tu_batch_hash(&b);
        coordl_release(L, &b);
    }
    coordl_close(L);
    FILE *f = fopen(out, "wb");
    if (!f || fwrite(&n, sizeof n, 1, f) != 1 || fwrite(hashes, sizeof *hashes, n, f) != n || fclose(f) != 0) _exit(1);
    _exit(0);
}

/* Two processes in one group over a tar shard get the single loader's
 * batches (each batch prepared once, from the shared cache after epoch 0). */
static void test_tar_source_in_a_coordinated_group(void **state)
{
    (void)state;
    char *tar = tu_join(g_dir, "group.tar");
    sh(g_tree, "tar -cf %s .", tar);
    coordl_config cfg = tar_config(tar);
    cfg.cache_bytes = 1u << 20;
    cfg.threads = 1;
    tu_run want = run_of(&cfg, 2);
    char group[64];
    snprintf(group, sizeof group, "tartest-%d", (int)getpid());
    cfg.group = group;
    cfg.group_size = 2;
    pid_t pids[2];
    char *outs[2];
    for (int k = 0; k < 2; k++) {
        outs[k] = tu_join(g_dir, "member-%d.bin", k);
        pids[k] = fork();
        assert_true(pids[k] >= 0);
        if (pids[k] == 0) tar_group_member(&cfg, outs[k]);
    }
    for (int k = 0; k < 2; k++) {
        int st = 0;
        assert_int_equal(waitpid(pids[k], &st, 0), pids[k]);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_msg("member %d failed (status %d)", k, st);
        size_t n;
        uint64_t *got = (uint64_t *)(void *)tu_read_file(outs[k], &n);
        assert_int_equal(got[0], want.nbatches);
        for (size_t i = 0; i < want.nbatches; i++)
            if (got[1 + i] != want.hash[i]) fail_msg("member %d: batch %zu differs from the single loader's", k, i);
        free(got);
        free(outs[k]);
    }
    tu_run_free(&want);
    free(tar);
}

/* ---- links and sparse members -------------------------------------- */

/* A tree whose items include hard and symbolic links, as trees made with
 * cp -l or ln -s are: 34 files, 6 of them links (a second hard link, a
 * link to a link, one to a file archived after it, one in another class
 * folder, one through a parent folder), and a dangling link. A tar stores
 * each link as a link member, not its data; the tar's items must still be
 * the tree's. */
static void make_link_tree(const char *root)
{
    uint8_t base[3];
    for (int k = 0; k < 2; k++) {
        tu_class_colour(k, base);
        for (int j = 0; j < 14; j++) {
            char *p = tu_join(root, "class_%c/img_%02d.jpg", 'a' + k, j);
            uint8_t *pix = tu_textured_rgb(20 + j, 18 + k, base, (uint64_t)(40 * k + j));
            tu_write_jpeg(p, pix, 20 + j, 18 + k, 3, NULL);
            free(pix);
            free(p);
        }
    }
    static const struct { const char *from, *to; int hard; } links[] = {
        {"class_a/img_00.jpg", "class_a/hard_00.jpg", 1},       /* a second hard link, same folder   */
        {"class_b/img_03.jpg", "class_a/hard_b03.jpg", 1},      /* hard, across class folders         */
        {"img_01.jpg", "class_a/sym_01.jpg", 0},                /* symbolic, beside its target       */
        {"../class_b/img_02.jpg", "class_a/sym_b02.jpg", 0},    /* symbolic, into the other class    */
        {"sym_01.jpg", "class_a/zz_chain.jpg", 0},              /* a link to a link                  */
        {"../class_a/zz_chain.jpg", "class_b/aa_chain.jpg", 0}, /* before what it leads to (sorted)  */
        {"nowhere.jpg", "class_b/dangling.jpg", 0},             /* leads nowhere: skipped, logged    */
    };
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        char *to = tu_join(root, "%s", links[i].to);
        if (links[i].hard) {
            char *from = tu_join(root, "%s", links[i].from);
            assert_int_equal(link(from, to), 0);
            free(from);
        } else {
            assert_int_equal(symlink(links[i].from, to), 0);
        }
        free(to);
    }
}

/* system tar in each format, sorted and not: the same 34 items, labels and
 * batches as the tree; the dangling link, and only it, is named in the
 * log as skipped, by the tree and by the tar. */
static void test_tar_of_a_tree_with_links_gives_the_trees_batches(void **state)
{
    (void)state;
    char *tree = tu_join(g_dir, "link-tree");
    make_link_tree(tree);
    coordl_config cfg = tar_config(tree);
    tu_log_record *tree_log = tu_log_record_new();
    cfg.log = tu_log_record_fn;
    cfg.log_user = tree_log;
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 34);
    coordl_close(L);
    assert_true(tu_log_contains(tree_log, "class_b/dangling.jpg skipped"));
    tu_log_record_free(tree_log);
    cfg.log = tu_log_quiet;
    tu_run want = run_of(&cfg, 2);
    static const char *formats[] = {"ustar", "gnu", "pax"};
    for (int f = 0; f < 3; f++)
        for (int sorted = 0; sorted < 2; sorted++) {
            char *tar = tu_join(g_dir, "link-tree-%s-%d.tar", formats[f], sorted);
            sh(tree, "tar --format=%s %s -cf %s .", formats[f], sorted ? "--sort=name" : "", tar);
            tu_log_record *log = tu_log_record_new();
            cfg = tar_config(tar);
            cfg.log = tu_log_record_fn;
            cfg.log_user = log;
            L = tu_open(&cfg);
            if (coordl_num_items(L) != 34)
                fail_msg("tar --format=%s%s of 34 files: %llu items", formats[f], sorted ? " --sort=name" : "",
                         (unsigned long long)coordl_num_items(L));
            assert_int_equal(coordl_num_classes(L), 2);
            coordl_close(L);
            assert_true(tu_log_contains(log, "link \"class_b/dangling.jpg\" -> \"nowhere.jpg\" skipped"));
            assert_false(tu_log_contains(log, "_chain.jpg\" ->") || tu_log_contains(log, "sym_") ||
                         tu_log_contains(log, "hard_"));
            tu_log_record_free(log);
            cfg.log = tu_log_quiet;
            tu_run got = run_of(&cfg, 2);
            char what[256];
            snprintf(what, sizeof what, "links, tar --format=%s%s", formats[f], sorted ? " --sort=name" : "");
            assert_same_run(&want, &got, what);
            tu_run_free(&got);
            free(tar);
        }
    tu_run_free(&want);
    free(tree);
}

/* Links written by hand, every way a tar names a target (the header's
 * link field, a GNU 'K' record, a pax linkpath; forward, through a folder
 * that is itself a link): the items are those of a tar holding a copy of
 * each target under the link's name. Links that lead nowhere in the shard
 * are skipped, each named in the log with the reason. */
static void test_tar_links_resolve_inside_the_shard_or_are_skipped_with_a_warning(void **state)
{
    (void)state;
    char *tar = tu_join(g_dir, "links.tar"), *ref = tu_join(g_dir, "links-ref.tar");
    size_t n0, n1, n2;
    uint8_t *j0 = small_jpeg(0, 21, &n0), *j1 = small_jpeg(1, 22, &n1), *j2 = small_jpeg(2, 23, &n2);
    const char *long_target =
        "class_a/a_target_path_longer_than_the_hundred_bytes_of_a_ustar_link_field_0123456789_abcdefghij/img.jpg";
    tu_tar t, r;
    tu_tar_open(&t, tar);
    tu_tar_open(&r, ref);
    tu_tar_dir(&t, "class_a/");
    tu_tar_file(&t, "class_a/img_0.jpg", j0, n0);
    tu_tar_file(&t, "./class_a/img_1.jpg", j1, n1);
    tu_tar_gnu_long_name(&t, long_target);
    tu_tar_file(&t, long_target, j2, n2);
    tu_tar_dir(&r, "class_a/");
    tu_tar_file(&r, "class_a/img_0.jpg", j0, n0);
    tu_tar_file(&r, "class_a/img_1.jpg", j1, n1);
    tu_tar_gnu_long_name(&r, long_target);
    tu_tar_file(&r, long_target, j2, n2);
    /* skipped: each leads nowhere in the shard */
    tu_tar_link(&t, "class_a/abs.jpg", '2', "/etc/img_0.jpg");
    tu_tar_link(&t, "class_a/esc.jpg", '2', "../../class_a/img_0.jpg");
    tu_tar_link(&t, "class_a/loop1.jpg", '2', "loop2.jpg");
    tu_tar_link(&t, "class_a/loop2.jpg", '2', "./loop1.jpg");
    tu_tar_link(&t, "class_a/missing.jpg", '2', "nothing.jpg");
    tu_tar_link(&t, "class_a/hard_missing.jpg", '1', "class_a/img_9.jpg");
    tu_tar_link(&t, "class_c", '2', "class_a"); /* a folder: the tar holds no files under class_c */
    /* resolved */
    tu_tar_dir(&t, "class_b/");
    tu_tar_dir(&r, "class_b/");
    tu_tar_link(&t, "class_b/hard.jpg", '1', "./class_a/img_0.jpg");
    tu_tar_file(&r, "class_b/hard.jpg", j0, n0);
    tu_tar_link(&t, "class_b/via.jpg", '2', "../class_c/img_1.jpg"); /* class_c is a link to class_a */
    tu_tar_file(&r, "class_b/via.jpg", j1, n1);
    tu_tar_gnu_long_link(&t, long_target);
    tu_tar_link(&t, "class_b/long_hard.jpg", '1', "truncated-by-the-K-record");
    tu_tar_file(&r, "class_b/long_hard.jpg", j2, n2);
    tu_tar_pax(&t, "linkpath", "../class_a/.//img_1.jpg", NULL, NULL);
    tu_tar_link(&t, "class_b/pax.jpg", '2', "ignored-for-the-pax-linkpath");
    tu_tar_file(&r, "class_b/pax.jpg", j1, n1);
    tu_tar_link(&t, "class_b/fwd.jpg", '2', "../class_a/late.jpg"); /* archived after the link */
    tu_tar_file(&r, "class_b/fwd.jpg", j2, n2);
    tu_tar_file(&t, "class_a/late.jpg", j2, n2);
    tu_tar_file(&r, "class_a/late.jpg", j2, n2);
    tu_tar_close(&t, 1);
    tu_tar_close(&r, 1);

    tu_log_record *log = tu_log_record_new();
    coordl_config cfg = tar_config(tar);
    cfg.log = tu_log_record_fn;
    cfg.log_user = log;
    coordl *L = tu_open(&cfg);
    if (coordl_num_items(L) != 9) {
        char items[4096] = "";
        for (uint64_t id = 0; id < coordl_num_items(L); id++) {
            strncat(items, strchr(coordl_item_path(L, id), ':'), sizeof items - strlen(items) - 2);
            strcat(items, " ");
        }
        fail_msg("%llu items, expected 9: %s", (unsigned long long)coordl_num_items(L), items);
    }
    assert_int_equal(coordl_num_classes(L), 2);
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_int_equal(st.dataset_bytes, 2 * n0 + 3 * n1 + 4 * n2);
    coordl_close(L);
    static const char *const skipped[][2] = {
        {"\"class_a/abs.jpg\" -> \"/etc/img_0.jpg\"", "absolute"},
        {"\"class_a/esc.jpg\"", "climbs out of the shard"},
        {"\"class_a/loop1.jpg\"", "loop"},
        {"\"class_a/loop2.jpg\"", "loop"},
        {"\"class_a/missing.jpg\"", "no member"},
        {"hard link \"class_a/hard_missing.jpg\"", "no member"},
        {"\"class_c\" -> \"class_a\"", "folder"},
    };
    for (size_t i = 0; i < sizeof skipped / sizeof skipped[0]; i++)
        if (!tu_log_contains(log, skipped[i][0]) || !tu_log_contains(log, skipped[i][1]))
            fail_msg("the log does not name %s as skipped (%s)", skipped[i][0], skipped[i][1]);
    assert_false(tu_log_contains(log, "class_b/")); /* every link there resolved */
    tu_log_record_free(log);
    cfg.log = tu_log_quiet;
    /* the items are the reference tar's, byte for byte */
    coordl_config rcfg = tar_config(ref);
    tu_run a = run_of(&rcfg, 2), b = run_of(&cfg, 2);
    assert_same_run(&a, &b, "links resolved");
    coordl *R = tu_open(&rcfg);
    L = tu_open(&cfg);
    for (uint64_t id = 0; id < coordl_num_items(R); id++) {
        const char *rp = strchr(coordl_item_path(R, id), ':'), *lp = strchr(coordl_item_path(L, id), ':');
        assert_string_equal(rp, lp);
    }
    coordl_close(R);
    coordl_close(L);
    tu_run_free(&a);
    tu_run_free(&b);
    free(j0); free(j1); free(j2); free(tar); free(ref);
}

/* Sparse members (old GNU 'S' with extension headers before its data, as
 * GNU tar writes a file of more than 4 data regions; pax GNU.sparse 1.0)
 * are skipped with a log line naming them; the rest of the shard is
 * indexed (the 'S' member's extension headers made the scan fail). */
static void test_sparse_members_are_skipped_with_a_log_line(void **state)
{
    (void)state;
    char *tar = tu_join(g_dir, "sparse.tar");
    size_t n0, n1;
    uint8_t *j0 = small_jpeg(0, 31, &n0), *j1 = small_jpeg(1, 32, &n1);
    uint8_t holes[1500];
    memset(holes, 'x', sizeof holes);
    tu_tar t;
    tu_tar_open(&t, tar);
    tu_tar_file(&t, "class_a/img_0.jpg", j0, n0);
    tu_tar_gnu_sparse(&t, "class_a/holes.jpg", holes, sizeof holes, 2);
    tu_tar_pax(&t, "GNU.sparse.major", "1", "GNU.sparse.name", "class_b/holes_pax.jpg");
    tu_tar_file(&t, "class_b/GNUSparseFile.0/holes_pax.jpg", holes, sizeof holes);
    tu_tar_file(&t, "class_b/img_1.jpg", j1, n1);
    tu_tar_close(&t, 1);
    tu_log_record *log = tu_log_record_new();
    coordl_config cfg = tar_config(tar);
    cfg.log = tu_log_record_fn;
    cfg.log_user = log;
    coordl *L = NULL;
    coordl_status rc = coordl_open(&cfg, &L);
    if (rc != COORDL_OK) fail_msg("a shard with sparse members: open = %d: %s", (int)rc, coordl_errmsg(NULL));
    assert_int_equal(coordl_num_items(L), 2);
    assert_int_equal(coordl_num_classes(L), 2); /* class_a, class_b: no GNUSparseFile.0 */
    char want[4096];
    snprintf(want, sizeof want, "%s:class_b/img_1.jpg", tar);
    assert_string_equal(coordl_item_path(L, 1), want);
    assert_true(tu_log_contains(log, "sparse member \"class_a/holes.jpg\""));
    assert_true(tu_log_contains(log, "sparse member \"class_b/holes_pax.jpg\""));
    coordl_close(L);
    tu_log_record_free(log);
    free(j0); free(j1); free(tar);
}

int main(void)
{
    tu_main_init(180);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tar_of_imagefolder_tree_gives_the_trees_batches),
        cmocka_unit_test(test_tar_items_are_the_trees_items),
        cmocka_unit_test(test_tree_split_over_shards_folder_glob_list),
        cmocka_unit_test(test_webdataset_samples_keys_first_image_and_cls),
        cmocka_unit_test(test_long_names_pax_records_and_base256_sizes),
        cmocka_unit_test(test_index_reads_headers_not_member_data),
        cmocka_unit_test(test_truncated_and_corrupt_shards_fail_at_open_naming_offset),
        cmocka_unit_test(test_mixed_cls_and_unlabelled_samples_are_invalid),
        cmocka_unit_test(test_shard_without_samples_holds_no_images),
        cmocka_unit_test(test_shard_list_with_a_bad_line_is_invalid),
        cmocka_unit_test(test_shard_list_line_with_a_nul_byte_is_invalid),
        cmocka_unit_test(test_folder_with_class_folders_stays_an_imagefolder),
        cmocka_unit_test(test_tar_items_are_cached_and_batches_unchanged),
        cmocka_unit_test(test_tar_source_in_a_coordinated_group),
        cmocka_unit_test(test_mutated_shards_fail_cleanly),
        cmocka_unit_test(test_tar_of_a_tree_with_links_gives_the_trees_batches),
        cmocka_unit_test(test_tar_links_resolve_inside_the_shard_or_are_skipped_with_a_warning),
        cmocka_unit_test(test_sparse_members_are_skipped_with_a_log_line),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
