/*
 * test_index.c - what the index makes of a source: ImageFolder trees (class
 * order, recursive file order, extensions, content-sniffed formats) and list
 * files (line order, labels, relative and absolute paths, malformed lines).
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* A small solid JPEG (or other format by ext) of colour c at root/rel. */
static void put_image(const char *root, const char *rel, const uint8_t c[3])
{
    char *path = tu_join(root, "%s", rel);
    uint8_t *pix = tu_solid(12, 12, 3, c);
    const char *dot = strrchr(rel, '.');
    char ext[8] = {0};
    for (int i = 0; dot && dot[i + 1] && i < 7; i++)
        ext[i] = (char)(dot[i + 1] | 0x20); /* lower case */
    if (!strcmp(ext, "png"))
        tu_write_png(path, pix, 12, 12, 3);
    else if (!strcmp(ext, "bmp"))
        tu_write_bmp(path, pix, 12, 12, 3);
    else if (!strcmp(ext, "tga"))
        tu_write_tga(path, pix, 12, 12, 3);
    else if (!strcmp(ext, "ppm"))
        tu_write_ppm(path, pix, 12, 12);
    else if (!strcmp(ext, "pgm"))
        tu_write_pgm(path, pix, 12, 12); /* first third of the bytes: gray */
    else
        tu_write_jpeg(path, pix, 12, 12, 3, NULL);
    free(pix);
    free(path);
}

static const uint8_t GREY[3] = {128, 128, 128};

/* ---- ImageFolder ----------------------------------------------------- */

static void test_imagefolder_classes_sorted_by_strcmp_get_labels(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "classes");
    /* strcmp order: "Mid" < "alpha" < "beta" < "zeta" (upper case first) */
    const char *made[] = {"zeta", "alpha", "Mid", "beta"};
    const char *sorted[] = {"Mid", "alpha", "beta", "zeta"};
    for (int k = 0; k < 4; k++)
        for (int j = 0; j <= k; j++) { /* class sizes differ: 1..4 */
            char rel[64];
            snprintf(rel, sizeof rel, "%s/f%d.jpg", made[k], j);
            put_image(root, rel, GREY);
        }
    coordl_config cfg = tu_config(root);
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_classes(L), 4);
    assert_int_equal(coordl_num_items(L), 1 + 2 + 3 + 4);
    /* class-major ids: all of "Mid" (made[2], 3 files), then "alpha" (2),
     * then "beta" (4), then "zeta" (1) */
    const int count[] = {3, 2, 4, 1};
    uint64_t id = 0;
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < count[k]; j++, id++) {
            char *expect = tu_join(root, "%s/f%d.jpg", sorted[k], j);
            assert_int_equal(coordl_item_label(L, id), k);
            assert_string_equal(coordl_item_path(L, id), expect);
            free(expect);
        }
    coordl_close(L);
    tu_rmtree(root);
    free(root);
}

static void test_imagefolder_files_found_recursively_sorted_by_path(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "recursive");
    /* written in scrambled order; expected strcmp order of relative paths */
    const char *rel[] = {"c/sub/z.jpg", "c/b.jpg",     "c/A.jpg",
                         "c/sub/a.jpg", "c/sub2/deep/x.jpg", "c/a_b.jpg",
                         "c/a.jpg"};
    const char *sorted[] = {"c/A.jpg",     "c/a.jpg",     "c/a_b.jpg",
                            "c/b.jpg",     "c/sub/a.jpg", "c/sub/z.jpg",
                            "c/sub2/deep/x.jpg"};
    for (int i = 0; i < 7; i++)
        put_image(root, rel[i], GREY);
    coordl_config cfg = tu_config(root);
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_classes(L), 1);
    assert_int_equal(coordl_num_items(L), 7);
    for (uint64_t id = 0; id < 7; id++) {
        char *expect = tu_join(root, "%s", sorted[id]);
        assert_string_equal(coordl_item_path(L, id), expect);
        assert_int_equal(coordl_item_label(L, id), 0);
        free(expect);
    }
    coordl_close(L);
    tu_rmtree(root);
    free(root);
}

static void test_imagefolder_counts_only_image_extensions_any_case(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "exts");
    const char *images[] = {"k/a.jpg", "k/b.JPG", "k/c.jpeg", "k/d.JpEg",
                            "k/e.png", "k/f.PNG", "k/g.bmp",  "k/h.BMP",
                            "k/i.ppm", "k/j.PPM", "k/k.pgm",  "k/l.PGM",
                            "k/m.tga", "k/n.TGA"};
    for (int i = 0; i < 14; i++)
        put_image(root, images[i], GREY);
    /* files that must be ignored */
    const char *junk[] = {"k/notes.txt", "k/README", "k/o.jpg.bak",
                          "k/p.gif", "k/q.jpgx", "k/jpg", "k/r.webp"};
    for (int i = 0; i < 7; i++) {
        char *p = tu_join(root, "%s", junk[i]);
        tu_write_file(p, "junk", 4);
        free(p);
    }
    coordl_config cfg = tu_config(root);
    cfg.batch_size = 14;
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 14);
    for (uint64_t id = 0; id < 14; id++) {
        const char *p = coordl_item_path(L, id);
        assert_non_null(p);
        assert_null(strstr(p, "junk"));
        assert_null(strstr(p, ".txt"));
        assert_null(strstr(p, ".bak"));
    }
    /* every one of them decodes: one epoch with no error */
    tu_run run = {0};
    assert_int_equal(tu_run_epochs(L, 1, &run), COORDL_OK);
    assert_int_equal(run.nrows, 14);
    tu_run_free(&run);
    coordl_close(L);
    tu_rmtree(root);
    free(root);
}

static void test_imagefolder_item_path_names_the_file(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "paths");
    tu_folder_spec spec = {3, 5, 16, 16, 0, TU_PAT_SOLID, TU_FMT_JPEG, 90, 1};
    tu_make_image_folder(root, &spec);
    coordl_config cfg = tu_config(root);
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 15);
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 5; j++) {
            char *expect = tu_folder_file(root, &spec, k, j);
            uint64_t id = (uint64_t)(k * 5 + j);
            assert_string_equal(coordl_item_path(L, id), expect);
            assert_int_equal(coordl_item_label(L, id), k);
            free(expect);
        }
    coordl_close(L);
    tu_rmtree(root);
    free(root);
}

static void test_imagefolder_rows_carry_their_class_label(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "labels");
    tu_folder_spec spec = {4, 6, 16, 16, 0, TU_PAT_SOLID, TU_FMT_JPEG, 100, 1};
    tu_make_image_folder(root, &spec);
    coordl_config cfg = tu_config(root);
    cfg.batch_size = 5;
    cfg.out_w = cfg.out_h = 8;
    coordl *L = tu_open(&cfg);
    tu_run run = {0};
    assert_int_equal(tu_run_epochs(L, 2, &run), COORDL_OK);
    assert_int_equal(run.nrows, 48);
    for (size_t i = 0; i < run.nrows; i++) {
        assert_int_equal(run.labels[i], (int32_t)(run.ids[i] / 6));
        assert_int_equal(run.labels[i], coordl_item_label(L, run.ids[i]));
    }
    tu_run_free(&run);
    coordl_close(L);
    tu_rmtree(root);
    free(root);
}

static void test_dataset_bytes_is_sum_of_file_sizes(void **state)
{
    (void)state;
    char *root = tu_join(g_dir, "bytes");
    tu_folder_spec spec = {2, 7, 16, 16, 9, TU_PAT_TEXTURED, TU_FMT_JPEG, 90, 3};
    uint64_t total = tu_make_image_folder(root, &spec);
    char *txt = tu_join(root, "class_000/ignored.txt");
    tu_write_file(txt, "0123456789", 10); /* not an item: not counted */
    coordl_config cfg = tu_config(root);
    coordl *L = tu_open(&cfg);
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_int_equal(st.dataset_bytes, total);
    coordl_close(L);
    tu_rmtree(root);
    free(root);
    free(txt);
}

/* ---- list files ---------------------------------------------------------- */

/* Writes `text` to dir/name and returns the malloc'd path. */
static char *put_list(const char *dir, const char *name, const char *text)
{
    char *p = tu_join(dir, "%s", name);
    tu_write_file(p, text, strlen(text));
    return p;
}

static void test_list_file_ids_follow_line_order_with_labels(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "list1");
    put_image(dir, "imgs/one.jpg", GREY);
    put_image(dir, "imgs/two.png", GREY);
    put_image(dir, "other/three.jpg", GREY);
    char *abs_img = tu_join(g_dir, "abs_elsewhere/four.jpg");
    put_image(g_dir, "abs_elsewhere/four.jpg", GREY);
    char text[4096];
    /* deliberately not sorted; empty lines are ignored; label 7 is the max */
    snprintf(text, sizeof text,
             "other/three.jpg\t2\n"
             "\n"
             "imgs/one.jpg\t7\n"
             "%s\t0\n"
             "\n"
             "imgs/two.png\t2\n",
             abs_img);
    char *list = put_list(dir, "train.txt", text);
    coordl_config cfg = tu_config(list);
    cfg.batch_size = 4;
    cfg.shuffle = 0;
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 4);
    assert_int_equal(coordl_num_classes(L), 8);
    const char *tails[] = {"other/three.jpg", "imgs/one.jpg", "four.jpg",
                           "imgs/two.png"};
    const int32_t labels[] = {2, 7, 0, 2};
    for (uint64_t id = 0; id < 4; id++) {
        const char *p = coordl_item_path(L, id);
        assert_non_null(p);
        size_t lp = strlen(p), lt = strlen(tails[id]);
        assert_true(lp >= lt);
        assert_string_equal(p + lp - lt, tails[id]);
        assert_int_equal(access(p, R_OK), 0); /* resolves to the real file */
        assert_int_equal(coordl_item_label(L, id), labels[id]);
    }
    assert_string_equal(coordl_item_path(L, 2), abs_img);
    tu_run run = {0};
    assert_int_equal(tu_run_epochs(L, 1, &run), COORDL_OK);
    assert_int_equal(run.nrows, 4);
    for (uint64_t i = 0; i < 4; i++) {
        assert_int_equal(run.ids[i], i);
        assert_int_equal(run.labels[i], labels[i]);
    }
    tu_run_free(&run);
    coordl_close(L);
    free(abs_img);
    free(list);
    free(dir);
}

static void test_list_file_paths_relative_to_its_folder_not_cwd(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "list2/deep");
    put_image(dir, "a.jpg", GREY);
    char *list = put_list(dir, "l.txt", "a.jpg\t0\n");
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir("/"), 0);
    coordl_config cfg = tu_config(list);
    coordl *L = NULL;
    coordl_status rc = coordl_open(&cfg, &L);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(rc, COORDL_OK);
    assert_int_equal(coordl_num_items(L), 1);
    tu_run run = {0};
    assert_int_equal(tu_run_epochs(L, 1, &run), COORDL_OK);
    assert_int_equal(run.nrows, 1);
    tu_run_free(&run);
    coordl_close(L);
    free(list);
    free(dir);
}

/* A list whose line 5 is `bad` (lines 1-4 good) must be refused, naming
 * line 5. */
static void expect_list_line_refused(const char *name, const char *bad)
{
    char *dir = tu_join(g_dir, "list_bad");
    put_image(dir, "a.jpg", GREY);
    char text[512];
    snprintf(text, sizeof text, "a.jpg\t0\na.jpg\t1\na.jpg\t0\na.jpg\t1\n%s\n"
                                "a.jpg\t0\n",
             bad);
    char *list = put_list(dir, name, text);
    coordl_config cfg = tu_config(list);
    coordl *L = (coordl *)(uintptr_t)1;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_null(L);
    const char *msg = coordl_errmsg(NULL);
    if (!strstr(msg, "line 5") && !strstr(msg, ":5"))
        fail_msg("message \"%s\" does not name line 5 (line: \"%s\")", msg, bad);
    free(list);
    free(dir);
}

static void test_list_line_without_tab_is_invalid(void **state)
{
    (void)state;
    expect_list_line_refused("notab.txt", "a.jpg 1");
}

static void test_list_line_with_non_integer_label_is_invalid(void **state)
{
    (void)state;
    expect_list_line_refused("nonint.txt", "a.jpg\tcat");
}

static void test_list_line_with_trailing_junk_label_is_invalid(void **state)
{
    (void)state;
    expect_list_line_refused("junk.txt", "a.jpg\t3x");
}

static void test_list_line_with_negative_label_is_invalid(void **state)
{
    (void)state;
    expect_list_line_refused("neg.txt", "a.jpg\t-1");
}

static void test_list_line_with_empty_label_is_invalid(void **state)
{
    (void)state;
    expect_list_line_refused("empty_label.txt", "a.jpg\t");
}

static void test_list_line_naming_missing_file_is_invalid(void **state)
{
    (void)state;
    /* found at open, with the line, not as a bad sample mid-epoch */
    expect_list_line_refused("missing.txt", "no_such_file.jpg\t0");
}

static void test_list_file_accepts_crlf_line_endings(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "list_crlf");
    put_image(dir, "a.jpg", GREY);
    put_image(dir, "b.jpg", GREY);
    char *list = put_list(dir, "l.txt", "a.jpg\t4\r\n\r\nb.jpg\t1\r\n");
    coordl_config cfg = tu_config(list);
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 2);
    assert_int_equal(coordl_item_label(L, 0), 4);
    assert_int_equal(coordl_item_label(L, 1), 1);
    char *b = tu_join(dir, "b.jpg");
    assert_string_equal(coordl_item_path(L, 1), b);
    coordl_close(L);
    free(b);
    free(list);
    free(dir);
}

static void test_list_file_of_only_empty_lines_is_invalid(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "list_empty");
    tu_mkdirs(dir);
    char *list = put_list(dir, "e.txt", "\n\n\n");
    coordl_config cfg = tu_config(list);
    coordl *L = (coordl *)(uintptr_t)1;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_null(L);
    assert_true(strlen(coordl_errmsg(NULL)) > 0);
    free(list);
    free(dir);
}

static void test_list_file_without_final_newline(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "list_nonl");
    put_image(dir, "a.jpg", GREY);
    put_image(dir, "b.jpg", GREY);
    char *list = put_list(dir, "l.txt", "a.jpg\t0\nb.jpg\t3");
    coordl_config cfg = tu_config(list);
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 2);
    assert_int_equal(coordl_item_label(L, 1), 3);
    assert_int_equal(coordl_num_classes(L), 4);
    coordl_close(L);
    free(list);
    free(dir);
}

static void test_list_file_content_sniffed_format(void **state)
{
    (void)state;
    /* a PNG named .jpg, listed: decodes to its colour */
    char *dir = tu_join(g_dir, "list_sniff");
    char *path = tu_join(dir, "really_png.jpg");
    const uint8_t col[3] = {200, 30, 90};
    uint8_t *pix = tu_solid(12, 12, 3, col);
    tu_write_png(path, pix, 12, 12, 3);
    char *list = put_list(dir, "l.txt", "really_png.jpg\t0\n");
    coordl_config cfg = tu_config(list);
    cfg.batch_size = 1;
    cfg.out_w = cfg.out_h = 8;
    coordl *L = tu_open(&cfg);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_OK);
    const uint8_t *d = b.data;
    for (size_t i = 0; i < 8 * 8; i++)
        for (int c = 0; c < 3; c++)
            assert_true(abs((int)d[i * 3 + c] - col[c]) <= 1);
    coordl_release(L, &b);
    coordl_close(L);
    free(pix);
    free(list);
    free(path);
    free(dir);
}

/* One image (or another file that is no list) given as source: refused
 * saying what the file is and what source expects, not "line 1: holds a
 * NUL byte" (what the list parser finds in a JPEG's header). */
static void expect_source_kind_refused(const char *path, const char *kind)
{
    coordl_config cfg = tu_config(path);
    coordl *L = (coordl *)(uintptr_t)1;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_null(L);
    const char *msg = coordl_errmsg(NULL);
    if (!strstr(msg, kind) || !strstr(msg, "ImageFolder root") || !strstr(msg, "list file") ||
        !strstr(msg, ".tar shard") || strstr(msg, "NUL byte"))
        fail_msg("message \"%s\" does not say that %s is %s and what source expects", msg, path, kind);
}

static void test_image_given_as_source_says_it_is_an_image(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "source_kind");
    char *jpg = tu_join(dir, "cat.jpg"), *png = tu_join(dir, "cat.png"), *wav = tu_join(dir, "a.wav");
    const uint8_t col[3] = {10, 20, 30};
    uint8_t *pix = tu_solid(16, 16, 3, col);
    tu_write_jpeg(jpg, pix, 16, 16, 3, NULL);
    tu_write_png(png, pix, 16, 16, 3);
    static const uint8_t riff[44] = {'R', 'I', 'F', 'F', 36, 0, 0, 0, 'W', 'A', 'V', 'E', 'f', 'm', 't', ' '};
    tu_write_file(wav, riff, sizeof riff);
    expect_source_kind_refused(jpg, "a JPEG image");
    expect_source_kind_refused(png, "a PNG image");
    expect_source_kind_refused(wav, "a WAV file");
    free(pix);
    free(jpg);
    free(png);
    free(wav);
    free(dir);
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_imagefolder_classes_sorted_by_strcmp_get_labels),
        cmocka_unit_test(test_imagefolder_files_found_recursively_sorted_by_path),
        cmocka_unit_test(test_imagefolder_counts_only_image_extensions_any_case),
        cmocka_unit_test(test_imagefolder_item_path_names_the_file),
        cmocka_unit_test(test_imagefolder_rows_carry_their_class_label),
        cmocka_unit_test(test_dataset_bytes_is_sum_of_file_sizes),
        cmocka_unit_test(test_list_file_ids_follow_line_order_with_labels),
        cmocka_unit_test(test_list_file_paths_relative_to_its_folder_not_cwd),
        cmocka_unit_test(test_list_line_without_tab_is_invalid),
        cmocka_unit_test(test_list_line_with_non_integer_label_is_invalid),
        cmocka_unit_test(test_list_line_with_trailing_junk_label_is_invalid),
        cmocka_unit_test(test_list_line_with_negative_label_is_invalid),
        cmocka_unit_test(test_list_line_with_empty_label_is_invalid),
        cmocka_unit_test(test_list_line_naming_missing_file_is_invalid),
        cmocka_unit_test(test_list_file_accepts_crlf_line_endings),
        cmocka_unit_test(test_list_file_of_only_empty_lines_is_invalid),
        cmocka_unit_test(test_list_file_without_final_newline),
        cmocka_unit_test(test_list_file_content_sniffed_format),
        cmocka_unit_test(test_image_given_as_source_says_it_is_an_image),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
