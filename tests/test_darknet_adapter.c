/*
 * test_darknet_adapter.c - examples/darknet/coordl_darknet.h: the config
 * helper, checked by value against Darknet's train_classifier, and the
 * adapter's handling of a bad batch.
 *
 * train_classifier (pjreddie/darknet examples/classifier.c) builds its
 * load_args from the network: w, h = net->w, net->h; n = imgs =
 * net->batch * net->subdivisions * ngpus; min = net->min_ratio * net->w,
 * max = net->max_ratio * net->w (truncated to int); angle, aspect, hue,
 * saturation, exposure as given; with net->random the size changes every
 * 40 batches to (rand() % 11 + 4) * 32. coordl_dn_config must give the same
 * numbers, Darknet's crop, and a ring sized from the network (not 448 for
 * every network). The adapter must never hand a bad batch to the trainer
 * silently: it prints the file and the reason and returns the error with
 * an empty data struct (under COORDL_BAD_FAIL), or substitutes the row
 * (COORDL_BAD_SUBSTITUTE).
 */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../examples/darknet/coordl_darknet.h"

static char *g_dir;

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

/* darknet19.cfg's [net]: batch=128 subdivisions=1 (Darknet: net->batch =
 * 128 / 1), 224 x 224, max_crop=448 min_crop... here min_crop 256 max_crop
 * 448 (ratios over w as parse_net_options computes them), angle 7, hue .1,
 * saturation .75, exposure .75, aspect .75, random 0. */
static coordl_dn_net darknet19(void)
{
    coordl_dn_net n;
    memset(&n, 0, sizeof n);
    n.w = n.h = 224;
    n.batch = 32;
    n.subdivisions = 4;
    n.ngpus = 2;
    n.min_ratio = (float)256 / 224;
    n.max_ratio = (float)448 / 224;
    n.angle = 7;
    n.aspect = .75f;
    n.hue = .1f;
    n.saturation = .75f;
    n.exposure = .75f;
    return n;
}

static void test_config_from_network_by_value(void **state)
{
    (void)state;
    coordl_config cfg = coordl_config_default();
    cfg.source = "keep";
    cfg.threads = 3;
    coordl_dn_net n = darknet19();
    assert_int_equal(coordl_dn_config(&cfg, &n), COORDL_OK);
    assert_int_equal(cfg.out_w, 224);
    assert_int_equal(cfg.out_h, 224);
    assert_int_equal(cfg.batch_size, 32 * 4 * 2); /* imgs */
    assert_int_equal(cfg.train_crop, COORDL_CROP_DARKNET);
    assert_int_equal(cfg.min_crop, (int)(n.min_ratio * 224)); /* args.min */
    assert_int_equal(cfg.min_crop, 256);
    assert_int_equal(cfg.max_crop, 448);
    assert_true(cfg.rotate_deg == 7.0f);
    assert_true(cfg.aspect == .75f && cfg.hue == .1f && cfg.saturation == .75f && cfg.exposure == .75f);
    assert_int_equal(cfg.flip, 1);
    assert_int_equal(cfg.max_out_w, 224); /* random = 0: the network's size, not 448 */
    assert_int_equal(cfg.max_out_h, 224);
    assert_int_equal(cfg.prefetch_batches, 3);
    assert_string_equal(cfg.source, "keep"); /* the rest is the caller's */
    assert_int_equal(cfg.threads, 3);

    /* random: the largest size the resize draws, or the network's if larger */
    n.random = 1;
    assert_int_equal(coordl_dn_config(&cfg, &n), COORDL_OK);
    assert_int_equal(cfg.max_out_w, 448);
    assert_int_equal(cfg.max_out_h, 448);
    n.w = n.h = 608;
    assert_int_equal(coordl_dn_config(&cfg, &n), COORDL_OK);
    assert_int_equal(cfg.max_out_w, 608);
    n.w = n.h = 64;
    n.random_max = 96;
    assert_int_equal(coordl_dn_config(&cfg, &n), COORDL_OK);
    assert_int_equal(cfg.max_out_w, 96);
    /* a ratio from the cfg that is not k / w truncates as Darknet does */
    n.min_ratio = 0.87f;
    n.max_ratio = 1.5f;
    assert_int_equal(coordl_dn_config(&cfg, &n), COORDL_OK);
    assert_int_equal(cfg.min_crop, (int)(0.87f * 64));
    assert_int_equal(cfg.max_crop, 96);
    /* ngpus 0 counts as one */
    n.ngpus = 0;
    assert_int_equal(coordl_dn_config(&cfg, &n), COORDL_OK);
    assert_int_equal(cfg.batch_size, 32 * 4);
}

static void test_config_refusals(void **state)
{
    (void)state;
    coordl_config cfg = coordl_config_default(), before = cfg;
    coordl_dn_net n = darknet19();
    n.batch = 0;
    assert_int_equal(coordl_dn_config(&cfg, &n), COORDL_ERR_INVALID);
    assert_memory_equal(&cfg, &before, sizeof cfg);
    assert_int_equal(coordl_dn_config(NULL, &n), COORDL_ERR_INVALID);
}

/* center = 1 trains under stock Darknet (train_classifier never passes it
 * to its loader): the config is the one without it. */
static void test_center_is_ignored_in_training_as_darknet_does(void **state)
{
    (void)state;
    coordl_config with = coordl_config_default(), without = coordl_config_default();
    coordl_dn_net n = darknet19();
    assert_int_equal(coordl_dn_config(&without, &n), COORDL_OK);
    n.center = 1;
    assert_int_equal(coordl_dn_config(&with, &n), COORDL_OK);
    assert_memory_equal(&with, &without, sizeof with);
}

/* a list file of JPEGs labelled by path, one of them cut short */
static char *make_list(const char *name, int count, int bad_index)
{
    char *dir = tu_join(g_dir, "%s", name);
    char *list = tu_join(dir, "train.list");
    tu_mkdirs(dir);
    FILE *f = fopen(list, "w");
    assert_non_null(f);
    for (int i = 0; i < count; i++) {
        uint8_t colour[3];
        tu_class_colour(i % 2, colour);
        uint8_t *pix = tu_textured_rgb(48, 40, colour, (uint64_t)i);
        char *p = tu_join(dir, "img_%03d_%s.jpg", i, i % 2 ? "dog" : "cat");
        tu_write_jpeg(p, pix, 48, 40, 3, NULL);
        if (i == bad_index) { /* truncated: the scan stops half way */
            size_t n;
            uint8_t *bytes = tu_read_file(p, &n);
            tu_write_file(p, bytes, n / 2);
            free(bytes);
        }
        fprintf(f, "img_%03d_%s.jpg\t%d\n", i, i % 2 ? "dog" : "cat", i % 2);
        free(p);
        free(pix);
    }
    fclose(f);
    free(dir);
    return list;
}

static coordl_config small_config(const char *list, coordl_bad_policy policy)
{
    coordl_config cfg = tu_config(list);
    coordl_dn_net n;
    memset(&n, 0, sizeof n);
    n.w = n.h = 24;
    n.batch = 4;
    n.subdivisions = 2;
    n.min_ratio = 1;
    n.max_ratio = 1.5f;
    n.saturation = n.exposure = .75f;
    n.random = 1;
    n.random_max = 40;
    assert_int_equal(coordl_dn_config(&cfg, &n), COORDL_OK);
    cfg.on_bad_sample = policy;
    cfg.shuffle = 0;
    return cfg;
}

/* Under COORDL_BAD_FAIL the batch holding the cut JPEG is not handed out:
 * coordl_dn_load prints "<file>: <reason>" to dn.report, returns
 * COORDL_ERR_CORRUPT with a zeroed data struct (no rows to train on), and
 * the next load is the batch after it. Every batch handed out is finite
 * and in [0, 1]. */
static void test_bad_batch_is_reported_not_trained_on(void **state)
{
    (void)state;
    char *list = make_list("fail", 24, 11); /* batch 1 of 3 (8 per batch) */
    coordl_config cfg = small_config(list, COORDL_BAD_FAIL);
    coordl_dn dn;
    assert_int_equal(coordl_dn_open(&dn, &cfg), COORDL_OK);
    char *report_path = tu_join(g_dir, "report.txt");
    FILE *report = fopen(report_path, "w+");
    assert_non_null(report);
    dn.report = report;
    data d;
    int bad = 0, good = 0;
    for (int k = 0; k < 6; k++) { /* two epochs */
        coordl_status rc = coordl_dn_load(&dn, 2, &d, COORDL_DN_SHALLOW);
        if (rc != COORDL_OK) {
            assert_int_equal(rc, COORDL_ERR_CORRUPT);
            assert_int_equal(d.X.rows, 0);
            assert_null(d.X.vals);
            assert_non_null(strstr(coordl_dn_errmsg(&dn), "img_011_dog.jpg"));
            bad++;
            continue;
        }
        good++;
        assert_int_equal(d.X.rows, 8);
        assert_int_equal(d.X.cols, 3 * 24 * 24);
        for (int i = 0; i < d.X.rows; i++)
            for (int j = 0; j < d.X.cols; j++)
                assert_true(d.X.vals[i][j] >= 0.0f && d.X.vals[i][j] <= 1.0f);
        coordl_dn_free(&d);
    }
    assert_int_equal(bad, 2);
    assert_int_equal(good, 4);
    fflush(report);
    rewind(report);
    char text[2048] = {0};
    size_t got = fread(text, 1, sizeof text - 1, report);
    assert_true(got > 0);
    const char *line = strstr(text, "img_011_dog.jpg");
    if (!line || !strstr(text, "JPEG"))
        fail_msg("the report does not name the file and the reason: \"%s\"", text);
    fclose(report);
    free(report_path);
    coordl_dn_close(&dn);
    free(list);
}

/* Under COORDL_BAD_SUBSTITUTE every load succeeds, the rows are finite,
 * and the substitution is counted once in each epoch. */
static void test_bad_item_substituted_under_policy(void **state)
{
    (void)state;
    char *list = make_list("subst", 24, 11);
    coordl_config cfg = small_config(list, COORDL_BAD_SUBSTITUTE);
    coordl_dn dn;
    assert_int_equal(coordl_dn_open(&dn, &cfg), COORDL_OK);
    data d;
    for (int k = 0; k < 6; k++) {
        assert_int_equal(coordl_dn_load(&dn, 2, &d, COORDL_DN_COPY), COORDL_OK);
        for (int i = 0; i < d.X.rows; i++)
            for (int j = 0; j < d.X.cols; j++) assert_true(isfinite(d.X.vals[i][j]));
        coordl_dn_free(&d);
    }
    /* Six loads of 8 rows are epochs 0 and 1 of 24 items. The workers may
     * already be preparing epoch 2 (its substitution is counted there), so
     * the two consumed epochs are checked, not the running total. */
    for (uint64_t e = 0; e < 2; e++) {
        coordl_epoch_stats es;
        assert_int_equal(coordl_get_epoch_stats(dn.L, e, &es), COORDL_OK);
        assert_int_equal(es.bad_samples, 1);
    }
    coordl_dn_close(&dn);
    free(list);
}

/* Resuming from weights that saw `seen` images: the next load is the one
 * an unbroken run with the same seed loads after seen / imgs loads, across
 * an epoch boundary too; two seeds give two orders (a run's seed is its
 * own, not epoch 0's order every time). */
static void test_resume_continues_where_the_weights_left_off(void **state)
{
    (void)state;
    char *list = make_list("resume", 24, -1);
    coordl_config cfg = small_config(list, COORDL_BAD_FAIL);
    cfg.shuffle = 1;
    cfg.seed = 1234;
    const int imgs = (int)cfg.batch_size; /* 8: 3 loads per epoch */
    const int seen_loads[3] = {2, 3, 4};   /* mid epoch 0, exactly epoch 1, inside epoch 1 */
    coordl_dn run;
    assert_int_equal(coordl_dn_open(&run, &cfg), COORDL_OK);
    for (int k = 0; k < 6; k++) { /* 3 loads per epoch: load k is (k / 3, k % 3) */
        data d;
        assert_int_equal(coordl_dn_load(&run, 2, &d, COORDL_DN_COPY), COORDL_OK);
        coordl_dn_free(&d);
        assert_int_equal(run.epoch, (uint64_t)(k / 3));
        assert_int_equal(run.index, (uint64_t)(k % 3));
    }
    coordl_dn_close(&run);
    for (int t = 0; t < 3; t++) {
        const int k = seen_loads[t];
        coordl_dn a, z;
        assert_int_equal(coordl_dn_open(&a, &cfg), COORDL_OK);
        assert_int_equal(coordl_dn_open(&z, &cfg), COORDL_OK);
        assert_int_equal(coordl_dn_resume(&a, (uint64_t)k * imgs + 3), COORDL_OK); /* + a part batch */
        data d, w;
        for (int j = 0; j < k; j++) {
            assert_int_equal(coordl_dn_load(&z, 2, &w, COORDL_DN_COPY), COORDL_OK);
            coordl_dn_free(&w);
        }
        assert_int_equal(coordl_dn_load(&a, 2, &d, COORDL_DN_COPY), COORDL_OK);
        assert_int_equal(coordl_dn_load(&z, 2, &w, COORDL_DN_COPY), COORDL_OK);
        assert_int_equal(a.epoch, (uint64_t)(k / 3));
        assert_int_equal(a.index, (uint64_t)(k % 3));
        assert_int_equal(a.epoch, z.epoch);
        assert_int_equal(a.index, z.index);
        for (int i = 0; i < d.X.rows; i++) assert_memory_equal(d.X.vals[i], w.X.vals[i], (size_t)d.X.cols * sizeof(float));
        coordl_dn_free(&d);
        coordl_dn_free(&w);
        coordl_dn_close(&a);
        coordl_dn_close(&z);
    }
    /* another seed, another order of epoch 0 */
    coordl_dn a, z;
    assert_int_equal(coordl_dn_open(&a, &cfg), COORDL_OK);
    cfg.seed = 4321;
    assert_int_equal(coordl_dn_open(&z, &cfg), COORDL_OK);
    int same = 1;
    for (int j = 0; j < 3; j++) {
        coordl_batch x, y;
        assert_int_equal(coordl_next(a.L, &x), COORDL_OK);
        assert_int_equal(coordl_next(z.L, &y), COORDL_OK);
        same &= memcmp(x.ids, y.ids, x.n * sizeof(uint64_t)) == 0;
        coordl_release(a.L, &x);
        coordl_release(z.L, &y);
    }
    assert_false(same);
    coordl_dn_close(&a);
    coordl_dn_close(&z);
    free(list);
}

/* The list goes to a fresh file in $TMPDIR with absolute paths: two lists
 * from one working directory do not collide, a read-only working directory
 * does not matter, and a loader opened from it reads every item after the
 * file is unlinked. */
static void test_temp_list_is_private_absolute_and_read_at_open(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "tmplist");
    tu_mkdirs(dir);
    char *tmp = tu_join(dir, "tmp");
    tu_mkdirs(tmp);
    char *src = make_list("tmpsrc", 16, -1);
    char *src_dir = tu_join(g_dir, "tmpsrc");
    char old_cwd[4096];
    assert_non_null(getcwd(old_cwd, sizeof old_cwd));
    const char *old_tmpdir = getenv("TMPDIR");
    char *saved_tmpdir = old_tmpdir ? strdup(old_tmpdir) : NULL;
    setenv("TMPDIR", tmp, 1);
    assert_int_equal(chdir(src_dir), 0);
    assert_int_equal(chmod(src_dir, 0555), 0); /* read-only working directory */
    char *paths[16], *labels[2] = {"cat", "dog"};
    for (int i = 0; i < 16; i++) {
        char name[64];
        snprintf(name, sizeof name, "img_%03d_%s.jpg", i, i % 2 ? "dog" : "cat");
        paths[i] = strdup(name);
    }
    char l1[512], l2[512];
    int unl = -1, amb = -1;
    assert_int_equal(coordl_dn_write_temp_list(l1, sizeof l1, paths, 16, labels, 2, &unl, &amb), 16);
    assert_int_equal(coordl_dn_write_temp_list(l2, sizeof l2, paths, 16, labels, 2, NULL, NULL), 16);
    assert_int_equal(unl, 0);
    assert_int_equal(amb, 0);
    assert_string_not_equal(l1, l2);
    assert_true(strncmp(l1, tmp, strlen(tmp)) == 0);
    size_t n;
    char *text = (char *)tu_read_file(l1, &n);
    char *first_line = tu_join(src_dir, "img_000_cat.jpg\t0\n");
    assert_true(strncmp(text, first_line, strlen(first_line)) == 0);
    free(text);
    free(first_line);
    assert_int_equal(chmod(src_dir, 0755), 0);
    assert_int_equal(chdir(old_cwd), 0);
    if (saved_tmpdir) setenv("TMPDIR", saved_tmpdir, 1);
    else unsetenv("TMPDIR");
    free(saved_tmpdir);

    coordl_config cfg = small_config(l1, COORDL_BAD_FAIL);
    coordl_dn dn;
    assert_int_equal(coordl_dn_open(&dn, &cfg), COORDL_OK);
    assert_int_equal(unlink(l1), 0);
    assert_int_equal(unlink(l2), 0);
    data d;
    for (int k = 0; k < 4; k++) { /* two epochs of 16 */
        assert_int_equal(coordl_dn_load(&dn, 2, &d, COORDL_DN_SHALLOW), COORDL_OK);
        assert_int_equal(d.X.rows, 8);
        coordl_dn_free(&d);
    }
    coordl_dn_close(&dn);
    for (int i = 0; i < 16; i++) free(paths[i]);
    free(src);
    free(src_dir);
    free(tmp);
    free(dir);
}

/* The ring is sized from the network: with random_max 40 a resize to 40
 * needs no bigger ring while two loads are held; 48 would (refused while
 * held). */
static void test_ring_sized_from_network(void **state)
{
    (void)state;
    char *list = make_list("ring", 16, -1);
    coordl_config cfg = small_config(list, COORDL_BAD_FAIL);
    coordl_dn dn;
    assert_int_equal(coordl_dn_open(&dn, &cfg), COORDL_OK);
    data a, b;
    assert_int_equal(coordl_dn_load(&dn, 2, &a, COORDL_DN_SHALLOW), COORDL_OK);
    assert_int_equal(coordl_dn_load(&dn, 2, &b, COORDL_DN_SHALLOW), COORDL_OK);
    dn.report = NULL;
    assert_int_equal(coordl_dn_resize(&dn, 48, 48), COORDL_ERR_INVALID);
    assert_int_equal(coordl_dn_resize(&dn, 40, 40), COORDL_OK);
    coordl_dn_free(&a);
    coordl_dn_free(&b);
    assert_int_equal(coordl_dn_load(&dn, 2, &a, COORDL_DN_SHALLOW), COORDL_OK);
    assert_int_equal(a.w, 40);
    assert_int_equal(a.X.cols, 3 * 40 * 40);
    coordl_dn_free(&a);
    coordl_dn_close(&dn);
    free(list);
}

/* The detector: coordl_dn_config_detection takes the [net] section and the
 * yolo layer's jitter, max_boxes and classes; coordl_dn_load fills y with
 * Darknet's truth rows (max_boxes x (x, y, w, h, class), zero past the
 * boxes), shallow and copied alike, from YOLO label files; a class not
 * below classes is a bad label named by the load. */
static void test_detection_loads_truth_rows(void **state)
{
    (void)state;
    coordl_config cfg = coordl_config_default();
    coordl_dn_net n = darknet19();
    n.random = 1;
    assert_int_equal(coordl_dn_config_detection(&cfg, &n, .3f, 0, 80), COORDL_ERR_INVALID);
    assert_int_equal(coordl_dn_config_detection(&cfg, &n, .3f, 5, 3), COORDL_OK);
    assert_int_equal(cfg.labels, COORDL_LABELS_BOXES);
    assert_int_equal(cfg.train_crop, COORDL_CROP_DARKNET_BOXES);
    assert_int_equal(cfg.max_boxes, 5);
    assert_int_equal(cfg.num_classes, 3);
    assert_true(cfg.jitter == .3f && cfg.rotate_deg == 0.0f && cfg.hue == .1f);
    assert_int_equal(cfg.max_out_w, 608); /* train_detector's largest random size */
    assert_int_equal(cfg.batch_size, 32 * 4 * 2);
    /* 6 images of 40 x 30 with 2 boxes each, in Darknet's layout */
    char *root = tu_join(g_dir, "det");
    char *paths[6];
    uint8_t pix[40 * 30 * 3];
    memset(pix, 128, sizeof pix);
    for (int k = 0; k < 6; k++) {
        paths[k] = tu_join(root, "images/img_%d.png", k);
        tu_write_png(paths[k], pix, 40, 30, 3);
        char *lab = tu_join(root, "labels/img_%d.txt", k);
        char text[128];
        int len = snprintf(text, sizeof text, "%d 0.5 0.5 0.5 0.5\n%d 0.25 0.25 0.2 0.2\n", k % 3, (k + 1) % 3);
        tu_write_file(lab, text, (size_t)len);
        free(lab);
    }
    char *list = tu_join(root, "train.list");
    assert_int_equal(coordl_dn_write_list(list, paths, 6, NULL, 0, NULL, NULL), 6);
    n = darknet19();
    n.w = n.h = 32;
    n.batch = 3;
    n.subdivisions = 1;
    n.ngpus = 1;
    assert_int_equal(coordl_dn_config_detection(&cfg, &n, 0.0f, 5, 3), COORDL_OK);
    cfg.source = list;
    cfg.hue = 0.0f;
    cfg.saturation = cfg.exposure = 0.0f;
    cfg.flip = 0;
    coordl_dn dn;
    assert_int_equal(coordl_dn_open(&dn, &cfg), COORDL_OK);
    for (int mode = 0; mode < 2; mode++) {
        data d;
        assert_int_equal(coordl_dn_load(&dn, 3, &d, mode ? COORDL_DN_COPY : COORDL_DN_SHALLOW), COORDL_OK);
        assert_int_equal(d.X.rows, 3);
        assert_int_equal(d.X.cols, 3 * 32 * 32);
        assert_int_equal(d.y.cols, 5 * 5);
        for (int i = 0; i < 3; i++) {
            const float *t = d.y.vals[i];
            /* two boxes (the image placed on the whole canvas: no jitter,
             * scale 1 and a 4:3 image leave it letterboxed in height) */
            assert_true(t[2] > 0.0f && t[3] > 0.0f && t[7] > 0.0f && t[8] > 0.0f);
            assert_true(t[4] >= 0.0f && t[4] <= 2.0f && t[9] >= 0.0f && t[9] <= 2.0f && t[4] != t[9]);
            assert_true(fabsf(t[0] - 0.5f) < 0.02f && fabsf(t[2] - 0.5f) < 0.02f); /* x and w keep the width */
            for (int j = 10; j < 25; j++) assert_true(t[j] == 0.0f);
        }
        coordl_dn_free(&d);
    }
    coordl_dn_close(&dn);
    /* a class out of range: the load fails naming the label file */
    char *bad = tu_join(root, "labels/img_2.txt");
    tu_write_file(bad, "3 0.5 0.5 0.1 0.1\n", 18);
    assert_int_equal(coordl_dn_open(&dn, &cfg), COORDL_OK);
    dn.report = NULL;
    data d;
    coordl_status rc = COORDL_OK;
    for (int k = 0; k < 2 && rc == COORDL_OK; k++) {
        rc = coordl_dn_load(&dn, 3, &d, COORDL_DN_SHALLOW);
        if (rc == COORDL_OK) coordl_dn_free(&d);
    }
    assert_int_not_equal(rc, COORDL_OK);
    assert_non_null(strstr(coordl_dn_errmsg(&dn), "img_2.txt"));
    coordl_dn_close(&dn);
    for (int k = 0; k < 6; k++) free(paths[k]);
    free(bad);
    free(list);
    free(root);
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_from_network_by_value),
        cmocka_unit_test(test_config_refusals),
        cmocka_unit_test(test_center_is_ignored_in_training_as_darknet_does),
        cmocka_unit_test(test_resume_continues_where_the_weights_left_off),
        cmocka_unit_test(test_temp_list_is_private_absolute_and_read_at_open),
        cmocka_unit_test(test_bad_batch_is_reported_not_trained_on),
        cmocka_unit_test(test_bad_item_substituted_under_policy),
        cmocka_unit_test(test_ring_sized_from_network),
        cmocka_unit_test(test_detection_loads_truth_rows),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
