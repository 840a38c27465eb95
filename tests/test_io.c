/*
 * test_io.c - the storage reader (coordl_io): every byte coordl reads from
 * storage goes through cfg.io; the built-in POSIX reader refuses what is
 * not a regular file without blocking (a FIFO), and a custom reader's
 * batches are the POSIX reader's, byte for byte.
 *
 * Fault injection through the reader (EIO, short reads, EINTR, latency,
 * garbage) is in test_faults.c.
 */
#include "test_util.h"
#include "tu_io.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *g_dir;
static char *g_tree; /* 2 classes x 6 textured JPEGs */
static uint64_t g_tree_bytes;
static const tu_folder_spec SPEC = {2, 6, 20, 20, 0, TU_PAT_TEXTURED, TU_FMT_JPEG, 90, 3};

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    g_tree = tu_join(g_dir, "tree");
    g_tree_bytes = tu_make_image_folder(g_tree, &SPEC);
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

static coordl_config small_config(const char *source)
{
    coordl_config cfg = tu_config(source);
    cfg.batch_size = 4;
    cfg.out_w = cfg.out_h = 12;
    cfg.prefetch_batches = 2;
    return cfg;
}

/* ---- the built-in POSIX reader ------------------------------------------ */

static void test_posix_reader_reads_regular_files_and_refuses_the_rest(void **state)
{
    (void)state;
    const coordl_io *io = coordl_io_posix();
    assert_non_null(io);
    assert_ptr_equal(io, coordl_io_posix()); /* one constant table */
    char *file = tu_join(g_dir, "posix.bin");
    tu_write_file(file, "0123456789", 10);
    void *f = NULL;
    uint64_t size = 0;
    assert_int_equal(io->open(io->user, file, &f, &size), 0);
    assert_int_equal(size, 10);
    char buf[16] = {0};
    assert_int_equal(io->read_at(io->user, f, buf, 4, 3), 4);
    assert_memory_equal(buf, "3456", 4);
    assert_int_equal(io->read_at(io->user, f, buf, 16, 8), 2); /* up to the end */
    assert_memory_equal(buf, "89", 2);
    assert_int_equal(io->read_at(io->user, f, buf, 16, 10), 0); /* at the end */
    io->close(io->user, f);

    assert_int_equal(io->open(io->user, g_dir, &f, &size), -EISDIR);
    char *missing = tu_join(g_dir, "missing.bin");
    assert_int_equal(io->open(io->user, missing, &f, &size), -ENOENT);
    /* a FIFO with no writer: open must neither block nor succeed */
    char *fifo = tu_join(g_dir, "posix.fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(io->open(io->user, fifo, &f, &size), -EINVAL);
    unlink(fifo);
    free(fifo);
    free(missing);
    free(file);
}

/* ---- a custom reader sees every byte ------------------------------------ */

/* Two epochs, no cache: every item is opened once per epoch through the
 * reader, every open is closed, the bytes read are the dataset's twice,
 * and the batches equal those of the POSIX reader. */
static void test_custom_reader_reads_every_item_and_matches_posix(void **state)
{
    (void)state;
    coordl_config cfg = small_config(g_tree);
    cfg.threads = 2;
    coordl *L = tu_open(&cfg);
    tu_run posix;
    memset(&posix, 0, sizeof posix);
    assert_int_equal(tu_run_epochs(L, 2, &posix), COORDL_OK);
    coordl_close(L);

    tu_io io;
    tu_io_init(&io);
    cfg.io = &io.table;
    L = tu_open(&cfg);
    tu_run mine;
    memset(&mine, 0, sizeof mine);
    assert_int_equal(tu_run_epochs(L, 2, &mine), COORDL_OK);
    coordl_stats st;
    coordl_get_stats(L, &st);
    coordl_close(L);

    /* the workers run ahead into epoch 2 by up to the ring's 2 batches of
     * 4, and the read-ahead up to 32 items beyond */
    const long n = SPEC.classes * SPEC.per_class;
    assert_in_range(atomic_load(&io.opens), 2 * n, 2 * n + 8 + 32);
    assert_int_equal(atomic_load(&io.closes), atomic_load(&io.opens));
    assert_int_equal(atomic_load(&io.open_now), 0);
    assert_true(atomic_load(&io.bytes) >= 2 * g_tree_bytes);
    assert_true(st.storage_bytes >= 2 * g_tree_bytes);
    assert_true(atomic_load(&io.bytes) >= st.storage_bytes);
    assert_int_equal(mine.nbatches, posix.nbatches);
    for (size_t i = 0; i < posix.nbatches; i++)
        assert_int_equal(mine.hash[i], posix.hash[i]);
    tu_run_free(&posix);
    tu_run_free(&mine);
    tu_io_destroy(&io);
}

/* A list file and the files it names exist only behind the reader (paths
 * the local file system does not have): indexing and every read go
 * through it, and the batches are those of the same files on disk. */
static void test_list_source_read_only_through_the_reader(void **state)
{
    (void)state;
    /* the on-disk twin: a list file next to copies of two tree images */
    char *disk = tu_join(g_dir, "listdisk");
    char *a = tu_folder_file(g_tree, &SPEC, 0, 1), *b = tu_folder_file(g_tree, &SPEC, 1, 2);
    size_t na, nb;
    uint8_t *da = tu_read_file(a, &na), *db = tu_read_file(b, &nb);
    char *pa = tu_join(disk, "x/a.jpg"), *pb = tu_join(disk, "b.jpg"), *list = tu_join(disk, "l.txt");
    tu_write_file(pa, da, na);
    tu_write_file(pb, db, nb);
    const char *text = "x/a.jpg\t3\nb.jpg\t1\n";
    tu_write_file(list, text, strlen(text));
    coordl_config cfg = small_config(list);
    cfg.batch_size = 2;
    cfg.shuffle = 0;
    coordl *L = tu_open(&cfg);
    tu_run want;
    memset(&want, 0, sizeof want);
    assert_int_equal(tu_run_epochs(L, 1, &want), COORDL_OK);
    coordl_close(L);

    tu_io io;
    tu_io_init(&io);
    io.mem_only = 1;
    tu_io_add_mem(&io, "mem:/store/l.txt", text, strlen(text));
    tu_io_add_mem(&io, "mem:/store/x/a.jpg", da, na);
    tu_io_add_mem(&io, "mem:/store/b.jpg", db, nb);
    cfg.source = "mem:/store/l.txt";
    cfg.io = &io.table;
    L = tu_open(&cfg);
    assert_int_equal(coordl_num_items(L), 2);
    assert_int_equal(coordl_num_classes(L), 4);
    assert_string_equal(coordl_item_path(L, 0), "mem:/store/x/a.jpg");
    /* nothing of it is on disk: the index came through the reader */
    tu_run got;
    memset(&got, 0, sizeof got);
    assert_int_equal(tu_run_epochs(L, 1, &got), COORDL_OK);
    coordl_close(L);
    /* 3 at indexing, one epoch (2 reads), and what the workers and the
     * read-ahead read of the epochs after it */
    assert_true(atomic_load(&io.opens) >= 5);
    assert_int_equal(atomic_load(&io.closes), atomic_load(&io.opens));
    assert_int_equal(got.nbatches, want.nbatches);
    for (size_t i = 0; i < want.nbatches; i++)
        assert_int_equal(got.hash[i], want.hash[i]);
    tu_run_free(&want);
    tu_run_free(&got);
    tu_io_destroy(&io);
    free(da); free(db); free(a); free(b); free(pa); free(pb); free(list);
    tu_rmtree(disk);
    free(disk);
}

/* Token shards (and a shard list) behind the reader only. */
static void test_token_shards_read_only_through_the_reader(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "tok");
    char *shard = tu_join(dir, "s.bin");
    uint32_t toks[200];
    for (int i = 0; i < 200; i++) toks[i] = (uint32_t)(i * 7 % 50000);
    tu_write_shard(shard, 1, toks, 200);
    size_t n;
    uint8_t *bytes = tu_read_file(shard, &n);
    tu_io io;
    tu_io_init(&io);
    io.mem_only = 1;
    tu_io_add_mem(&io, "mem:/t/s.bin", bytes, n);
    const char *list = "s.bin\n";
    tu_io_add_mem(&io, "mem:/t/list.txt", list, strlen(list));
    for (int use_list = 0; use_list < 2; use_list++) {
        coordl_config cfg = tu_config(use_list ? "mem:/t/list.txt" : "mem:/t/s.bin");
        cfg.pipeline = COORDL_PIPE_TOKENS;
        cfg.seq_len = 16;
        cfg.batch_size = 2;
        cfg.shuffle = 0;
        cfg.io = &io.table;
        coordl *L = tu_open(&cfg);
        assert_int_equal(coordl_num_items(L), (200 - 1) / 16);
        coordl_batch b;
        assert_int_equal(coordl_next(L, &b), COORDL_OK);
        const int32_t *x = b.data;
        for (int r = 0; r < 2; r++)
            for (int t = 0; t < 16; t++) {
                assert_int_equal(x[r * 16 + t], (int32_t)toks[r * 16 + t]);
                assert_int_equal(b.targets[r * 16 + t], (int32_t)toks[r * 16 + t + 1]);
            }
        coordl_release(L, &b);
        coordl_close(L);
    }
    assert_int_equal(atomic_load(&io.opens), atomic_load(&io.closes));
    tu_io_destroy(&io);
    free(bytes);
    free(shard);
    tu_rmtree(dir);
    free(dir);
}

/* ---- FIFOs: refused, never waited on ------------------------------------ */

/* An item replaced by a FIFO after open: under COORDL_BAD_FAIL its batch
 * fails with COORDL_ERR_IO naming the file and "FIFO"; under
 * COORDL_BAD_SUBSTITUTE the row is substituted and counted. Neither
 * coordl_next nor coordl_close blocks (the test binary has a watchdog). */
static void test_item_replaced_by_fifo_is_refused_without_blocking(void **state)
{
    (void)state;
    for (int policy = 0; policy < 2; policy++) {
        char *root = tu_join(g_dir, "fifo%d", policy);
        tu_make_image_folder(root, &SPEC);
        char *victim = tu_folder_file(root, &SPEC, 0, 2); /* id 2 */
        coordl_config cfg = small_config(root);
        cfg.shuffle = 0;
        cfg.on_bad_sample = policy ? COORDL_BAD_SUBSTITUTE : COORDL_BAD_FAIL;
        coordl *L = tu_open(&cfg);
        assert_int_equal(unlink(victim), 0);
        assert_int_equal(mkfifo(victim, 0600), 0);
        /* the first batch may have been prepared before the swap: start
         * over from a seek so that batch 0 is read after it */
        assert_int_equal(coordl_seek(L, 1, 0), COORDL_OK);
        coordl_batch b;
        coordl_status rc = coordl_next(L, &b);
        if (policy == 0) {
            assert_int_equal(rc, COORDL_ERR_IO);
            assert_non_null(strstr(coordl_errmsg(L), "img_00002.jpg"));
            assert_non_null(strstr(coordl_errmsg(L), "FIFO"));
        } else {
            assert_int_equal(rc, COORDL_OK);
            assert_int_equal(b.n, 4);
            assert_int_not_equal(b.ids[2], 2);
            coordl_release(L, &b);
            coordl_stats st;
            coordl_get_stats(L, &st);
            assert_true(st.bad_samples >= 1);
        }
        coordl_close(L);
        unlink(victim);
        free(victim);
        tu_rmtree(root);
        free(root);
    }
}

/* A list file naming a FIFO, and a token-shard list naming one, are
 * refused at open (naming the FIFO) instead of blocking in it. */
static void test_lists_naming_a_fifo_are_refused_at_open(void **state)
{
    (void)state;
    char *dir = tu_join(g_dir, "fifolist");
    tu_mkdirs(dir);
    char *fifo = tu_join(dir, "item.jpg");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    char *list = tu_join(dir, "l.txt");
    tu_write_file(list, "item.jpg\t0\n", 11);
    coordl_config cfg = small_config(list);
    coordl *L = NULL;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_null(L);
    assert_non_null(strstr(coordl_errmsg(NULL), "item.jpg"));
    assert_non_null(strstr(coordl_errmsg(NULL), "FIFO"));

    char *tlist = tu_join(dir, "shards.txt");
    tu_write_file(tlist, "item.jpg\n", 9);
    cfg = tu_config(tlist);
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.seq_len = 8;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_IO);
    assert_non_null(strstr(coordl_errmsg(NULL), "FIFO"));
    /* the list itself being a FIFO */
    cfg.source = fifo;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_IO);
    assert_non_null(strstr(coordl_errmsg(NULL), "FIFO"));
    cfg = small_config(fifo);
    assert_int_not_equal(coordl_open(&cfg, &L), COORDL_OK);
    assert_non_null(strstr(coordl_errmsg(NULL), "FIFO"));
    unlink(fifo);
    free(fifo);
    free(list);
    free(tlist);
    tu_rmtree(dir);
    free(dir);
}

/* ---- configuration and reader misbehaviour ------------------------------ */

static void test_io_table_missing_a_callback_is_invalid(void **state)
{
    (void)state;
    tu_io io;
    tu_io_init(&io);
    coordl_io partial = io.table;
    partial.close = NULL;
    coordl_config cfg = small_config(g_tree);
    cfg.io = &partial;
    coordl *L = (coordl *)(uintptr_t)1;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_INVALID);
    assert_null(L);
    assert_non_null(strstr(coordl_errmsg(NULL), "io"));
    assert_int_equal(atomic_load(&io.opens), 0);
    tu_io_destroy(&io);
}

/* open returning something that is neither 0 nor -errno, or failing with
 * an errno: an error naming the file and the reason, at open for a list
 * source and per batch for an item. */
static void test_reader_open_errors_name_the_file(void **state)
{
    (void)state;
    tu_io io;
    tu_io_init(&io);
    io.open_ret = 42; /* garbage */
    char *dir = tu_join(g_dir, "openerr");
    char *list = tu_join(dir, "l.txt");
    tu_write_file(list, "a.jpg\t0\n", 8);
    coordl_config cfg = small_config(list);
    cfg.io = &io.table;
    coordl *L = NULL;
    assert_int_equal(coordl_open(&cfg, &L), COORDL_ERR_IO);
    assert_non_null(strstr(coordl_errmsg(NULL), "l.txt"));
    assert_non_null(strstr(coordl_errmsg(NULL), "42"));

    io.open_ret = 0;
    io.fail_open_path = "img_00003";
    io.fail_open_errno = EACCES;
    cfg = small_config(g_tree);
    cfg.io = &io.table;
    cfg.shuffle = 0;
    L = tu_open(&cfg);
    coordl_batch b;
    assert_int_equal(coordl_next(L, &b), COORDL_ERR_IO); /* ids 0-3 */
    assert_non_null(strstr(coordl_errmsg(L), "img_00003.jpg"));
    assert_non_null(strstr(coordl_errmsg(L), strerror(EACCES)));
    assert_int_equal(coordl_next(L, &b), COORDL_OK); /* ids 4-7 */
    coordl_release(L, &b);
    coordl_close(L);
    assert_int_equal(atomic_load(&io.opens), atomic_load(&io.closes));
    tu_io_destroy(&io);
    tu_rmtree(dir);
    free(dir);
    free(list);
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_posix_reader_reads_regular_files_and_refuses_the_rest),
        cmocka_unit_test(test_custom_reader_reads_every_item_and_matches_posix),
        cmocka_unit_test(test_list_source_read_only_through_the_reader),
        cmocka_unit_test(test_token_shards_read_only_through_the_reader),
        cmocka_unit_test(test_item_replaced_by_fifo_is_refused_without_blocking),
        cmocka_unit_test(test_lists_naming_a_fifo_are_refused_at_open),
        cmocka_unit_test(test_io_table_missing_a_callback_is_invalid),
        cmocka_unit_test(test_reader_open_errors_name_the_file),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
