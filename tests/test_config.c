/*
 * test_config.c - coordl_get_config: the settings a handle runs with after
 * open resolved them (thread count, cache budget after clamping, the layout
 * forced by the token and audio pipelines, the cores and NUMA node chosen,
 * coordl_set's changes), strings owned by the handle, and the caller's
 * struct size respected; a thread count or cache budget beyond what the
 * machine has is cut down, logged, and the stats report what is in force.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

static char *g_dir;
static char *g_images;
static uint64_t g_images_bytes;

static const tu_folder_spec g_spec = {2, 6, 24, 20, 0, TU_PAT_TEXTURED, TU_FMT_JPEG, 90, 7};

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    g_images = tu_join(g_dir, "images");
    g_images_bytes = tu_make_image_folder(g_images, &g_spec);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_images);
    free(g_dir);
    return 0;
}

static void test_get_config_resolves_threads_cache_and_copies_strings(void **state)
{
    (void)state;
    char source[4096];
    snprintf(source, sizeof source, "%s", g_images);
    coordl_config cfg = tu_config(source);
    cfg.threads = 0;                      /* resolved at open            */
    cfg.cache_bytes = (uint64_t)1 << 40;  /* clamped to dataset + 1/8 + 64 MiB */
    cfg.cache_pin = COORDL_PIN_OFF;
    cfg.seed = 99;
    coordl *L = tu_open(&cfg);
    /* the caller's string may go away after open */
    memset(source, 'x', strlen(source));

    coordl_config eff;
    memset(&eff, 0x5a, sizeof eff);
    assert_int_equal(coordl_get_config(L, &eff), COORDL_OK);
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_true(eff.threads >= 1);
    assert_int_equal(eff.threads, (int)st.threads);
    assert_int_equal(st.dataset_bytes, g_images_bytes);
    /* + 1/8: room for JPEG rewrites (jpeg_random_access) */
    assert_int_equal(eff.cache_bytes, g_images_bytes + g_images_bytes / 8 + (64u << 20));
    /* the stats report the budget in force, and what was asked beside it */
    assert_int_equal(st.cache_bytes_budget, eff.cache_bytes);
    assert_int_equal(st.cache_bytes_requested, (uint64_t)1 << 40);
    assert_non_null(eff.source);
    assert_ptr_not_equal(eff.source, source);
    assert_string_equal(eff.source, g_images);
    /* what open did not change comes back as given */
    assert_int_equal(eff.batch_size, cfg.batch_size);
    assert_int_equal(eff.out_w, cfg.out_w);
    assert_int_equal(eff.layout, COORDL_U8_NHWC);
    assert_int_equal(eff.seed, 99);
    assert_int_equal(eff.world, 1);
    assert_ptr_equal(eff.log, cfg.log);
    assert_null(eff.group);
    /* placement: the PUs the workers were put on, as the stats list them */
    assert_non_null(eff.cpuset);
    assert_string_equal(eff.cpuset, st.placement_cpus);
    assert_int_equal(eff.numa_node, st.placement_node);
    assert_null(eff.pci_bus_id);
    coordl_close(L);
}

static void test_get_config_cache_below_dataset_is_kept(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.cache_bytes = 4096;
    cfg.cache_pin = COORDL_PIN_OFF;
    coordl *L = tu_open(&cfg);
    coordl_config eff;
    assert_int_equal(coordl_get_config(L, &eff), COORDL_OK);
    assert_int_equal(eff.cache_bytes, 4096);
    coordl_close(L);
}

/* threads = 1000 on a machine of a few processing units: at most 4 per
 * unit run, a WARN says so, and both the config and the stats report the
 * workers that run (and the stats what was asked). */
static void test_threads_beyond_four_per_unit_are_cut_and_logged(void **state)
{
    (void)state;
    cpu_set_t set;
    CPU_ZERO(&set);
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    const int pus = CPU_COUNT(&set);
    if (4 * pus >= 1000)
        fail_msg("this machine has %d processing units: 1000 threads is not beyond 4 per unit", pus);
    tu_log_record *rec = tu_log_record_new();
    coordl_config cfg = tu_config(g_images);
    cfg.threads = 1000;
    cfg.log = tu_log_record_fn;
    cfg.log_user = rec;
    coordl *L = tu_open(&cfg);
    coordl_config eff;
    assert_int_equal(coordl_get_config(L, &eff), COORDL_OK);
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_int_equal(eff.threads, 4 * pus);
    assert_int_equal(st.threads, 4 * pus);
    assert_int_equal(st.threads_requested, 1000);
    if (!tu_log_contains(rec, "threads: 1000 asked for"))
        fail_msg("no WARN saying that threads = 1000 was cut to %d", 4 * pus);
    coordl_close(L);
    tu_log_record_free(rec);
}

/* A reader that says every .jpg is 1 TiB (the list's files are small
 * JPEGs): a dataset far larger than the machine's memory, without one. */
static int huge_open(void *user, const char *path, void **file, uint64_t *size)
{
    const coordl_io *posix = user;
    int rc = posix->open(posix->user, path, file, size);
    const size_t n = strlen(path);
    if (rc == 0 && n > 4 && strcmp(path + n - 4, ".jpg") == 0)
        *size = (uint64_t)1 << 40;
    return rc;
}
static int64_t huge_read_at(void *user, void *file, void *buf, uint64_t len, uint64_t offset)
{
    const coordl_io *posix = user;
    return posix->read_at(posix->user, file, buf, len, offset);
}
static void huge_close(void *user, void *file)
{
    const coordl_io *posix = user;
    posix->close(posix->user, file);
}

/* cache_bytes of 1 TiB over a dataset larger still: cut to 3/4 of the
 * machine's memory with a WARN; coordl_get_config and the stats' budget
 * say what is in force, cache_bytes_requested what was asked. */
static void test_cache_beyond_memory_is_cut_and_logged(void **state)
{
    (void)state;
    const uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    assert_true(ram > 0 && ram / 4 * 3 < ((uint64_t)1 << 40));
    char *list = tu_join(g_dir, "huge.txt");
    FILE *f = fopen(list, "w");
    assert_non_null(f);
    for (int k = 0; k < g_spec.classes; k++)
        for (int j = 0; j < g_spec.per_class; j++) {
            char *p = tu_folder_file(g_images, &g_spec, k, j);
            fprintf(f, "%s\t%d\n", p, k);
            free(p);
        }
    fclose(f);
    coordl_io io = {(void *)coordl_io_posix(), huge_open, huge_read_at, huge_close};
    tu_log_record *rec = tu_log_record_new();
    coordl_config cfg = tu_config(list);
    cfg.io = &io;
    cfg.cache_bytes = (uint64_t)1 << 40;
    cfg.cache_pin = COORDL_PIN_OFF;
    cfg.readahead_items = 0;
    cfg.on_bad_sample = COORDL_BAD_SUBSTITUTE; /* the workers find the items "too large": no batch is asked */
    cfg.log = tu_log_record_fn;
    cfg.log_user = rec;
    coordl *L = tu_open(&cfg);
    coordl_config eff;
    assert_int_equal(coordl_get_config(L, &eff), COORDL_OK);
    coordl_stats st;
    coordl_get_stats(L, &st);
    assert_true(st.dataset_bytes > ((uint64_t)1 << 40));
    assert_int_equal(eff.cache_bytes, ram / 4 * 3);
    assert_int_equal(st.cache_bytes_budget, ram / 4 * 3);
    assert_int_equal(st.cache_bytes_requested, (uint64_t)1 << 40);
    if (!tu_log_contains(rec, "cache_bytes: 1099511627776 asked for"))
        fail_msg("no WARN saying that cache_bytes was cut to 3/4 of the memory");
    coordl_close(L);
    tu_log_record_free(rec);
    free(list);
}

/* Opens cfg in a child whose address space is capped at what it uses now
 * plus `headroom` bytes, so that the arena of that size cannot be mapped;
 * returns the open's status and copies its message into msg. */
static coordl_status open_with_address_space_cap(const coordl_config *cfg, uint64_t headroom, char *msg, size_t cap)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        unsigned long vm_pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        if (!f || fscanf(f, "%lu", &vm_pages) != 1)
            _exit(100);
        fclose(f);
        struct rlimit rl;
        rl.rlim_cur = rl.rlim_max = (rlim_t)vm_pages * (rlim_t)sysconf(_SC_PAGESIZE) + headroom;
        if (setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(101);
        coordl *L = NULL;
        const coordl_status rc = coordl_open(cfg, &L);
        const char *m = coordl_errmsg(NULL);
        if (write(fds[1], m, strlen(m)) < 0)
            _exit(102);
        if (L)
            coordl_close(L);
        _exit(rc == COORDL_ERR_NOMEM ? 0 : rc == COORDL_OK ? 1 : 2);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t got;
    while (n + 1 < cap && (got = read(fds[0], msg + n, cap - 1 - n)) > 0)
        n += (size_t)got;
    msg[n] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status) == 0 ? COORDL_ERR_NOMEM : WEXITSTATUS(status) == 1 ? COORDL_OK : COORDL_ERR_INVALID;
}

/* An arena that cannot be mapped fails the open with COORDL_ERR_NOMEM
 * naming the arena and the config field that sizes it. */
static void test_out_of_memory_names_the_field_to_lower(void **state)
{
    (void)state;
    char msg[1024];
    /* the cache slab: the dataset plus 64 MiB of room, into 16 MiB */
    coordl_config cfg = tu_config(g_images);
    cfg.cache_bytes = (uint64_t)1 << 30;
    cfg.cache_pin = COORDL_PIN_OFF;
    assert_int_equal(open_with_address_space_cap(&cfg, 16u << 20, msg, sizeof msg), COORDL_ERR_NOMEM);
    if (!strstr(msg, "cache slab") || !strstr(msg, "lower cache_bytes"))
        fail_msg("cache slab: \"%s\" does not name cache_bytes", msg);
    /* the batch ring: 4 slots of 8 rows of 1024 x 1024 x 3 floats (384 MiB) */
    cfg = tu_config(g_images);
    cfg.cache_bytes = 0;
    cfg.cache_pin = COORDL_PIN_OFF;
    cfg.out_w = cfg.out_h = 1024;
    cfg.layout = COORDL_F32_NCHW;
    assert_int_equal(open_with_address_space_cap(&cfg, 64u << 20, msg, sizeof msg), COORDL_ERR_NOMEM);
    if (!strstr(msg, "batch ring") || !strstr(msg, "prefetch_batches") || !strstr(msg, "out_w/out_h"))
        fail_msg("batch ring: \"%s\" does not name prefetch_batches and out_w/out_h", msg);
}

static void test_get_config_forces_token_and_audio_layouts(void **state)
{
    (void)state;
#if defined(COORDL_NO_TOKENS) || defined(COORDL_NO_AUDIO)
    printf("skip: built with COORDL_NO_TOKENS or COORDL_NO_AUDIO (test_switches checks those refuse to open)\n");
    return;
#endif
    char *tokdir = tu_join(g_dir, "tokens");
    tu_mkdirs(tokdir);
    char *shard = tu_join(tokdir, "shard_000.bin");
    uint32_t toks[600];
    for (int i = 0; i < 600; i++) toks[i] = (uint32_t)(i * 7 % 50257);
    tu_write_shard(shard, 1, toks, 600);
    coordl_config cfg = tu_config(tokdir);
    cfg.pipeline = COORDL_PIPE_TOKENS;
    cfg.seq_len = 16;
    cfg.layout = COORDL_F32_NCHW; /* ignored: tokens are int32 */
    coordl *L = tu_open(&cfg);
    coordl_config eff;
    assert_int_equal(coordl_get_config(L, &eff), COORDL_OK);
    assert_int_equal(eff.layout, COORDL_I32);
    assert_int_equal(eff.pipeline, COORDL_PIPE_TOKENS);
    assert_int_equal(eff.seq_len, 16);
    coordl_close(L);

    char *wavdir = tu_join(g_dir, "audio");
    char *wav = tu_join(wavdir, "a/clip.wav");
    int16_t pcm[800];
    for (int i = 0; i < 800; i++) pcm[i] = (int16_t)(i * 37);
    tu_write_wav_i16(wav, 1, 8000, pcm, 800);
    cfg = tu_config(wavdir);
    cfg.pipeline = COORDL_PIPE_AUDIO;
    cfg.audio_samples = 400;
    cfg.batch_size = 1;
    cfg.layout = COORDL_U8_NHWC; /* ignored: audio is float */
    L = tu_open(&cfg);
    assert_int_equal(coordl_get_config(L, &eff), COORDL_OK);
    assert_int_equal(eff.layout, COORDL_F32);
    assert_int_equal(eff.audio_samples, 400);
    coordl_close(L);
    free(wav);
    free(wavdir);
    free(shard);
    free(tokdir);
}

static void test_get_config_reports_synthetic_placement(void **state)
{
    (void)state;
#ifdef COORDL_NO_HWLOC
    printf("skip: built with COORDL_NO_HWLOC, synthetic topologies need hwloc\n");
#else
    coordl_config cfg = tu_config(g_images);
    cfg.threads = 0;
    cfg.topology = "synthetic:package:2 numa:1 core:4 pu:2";
    cfg.numa_node = 1;
    cfg.cache_pin = COORDL_PIN_OFF;
    coordl *L = tu_open(&cfg);
    coordl_config eff;
    assert_int_equal(coordl_get_config(L, &eff), COORDL_OK);
    coordl_stats st;
    coordl_get_stats(L, &st);
    /* node 1 of that machine: 4 cores, PUs 8-15; one worker per core */
    assert_int_equal(eff.numa_node, 1);
    assert_int_equal(eff.threads, 4);
    assert_non_null(eff.cpuset);
    assert_string_equal(eff.cpuset, st.placement_cpus);
    assert_string_equal(eff.cpuset, "8,10,12,14");
    assert_non_null(eff.topology);
    assert_string_equal(eff.topology, "synthetic:package:2 numa:1 core:4 pu:2");
    coordl_close(L);
#endif
}

static void test_get_config_follows_coordl_set(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    cfg.max_out_w = cfg.max_out_h = 32;
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_set(L, COORDL_PARAM_OUT_SIZE, 24), COORDL_OK);
    assert_int_equal(coordl_set(L, COORDL_PARAM_BATCH_SIZE, 3), COORDL_OK);
    coordl_config eff;
    assert_int_equal(coordl_get_config(L, &eff), COORDL_OK);
    assert_int_equal(eff.out_w, 24);
    assert_int_equal(eff.out_h, 24);
    assert_int_equal(eff.batch_size, 3);
    coordl_close(L);
}

static void test_get_config_writes_only_the_callers_size(void **state)
{
    (void)state;
    coordl_config cfg = tu_config(g_images);
    coordl *L = tu_open(&cfg);
    assert_int_equal(coordl_get_config(NULL, &cfg), COORDL_ERR_INVALID);
    assert_int_equal(coordl_get_config(L, NULL), COORDL_ERR_INVALID);

    /* a caller whose coordl_config ends before `threads` */
    const size_t small = offsetof(coordl_config, threads);
    unsigned char buf[sizeof(coordl_config) + 64];
    memset(buf, 0xA5, sizeof buf);
    assert_int_equal(coordl_get_config_sized(L, (coordl_config *)(void *)buf, small), COORDL_OK);
    for (size_t i = small; i < sizeof buf; i++)
        if (buf[i] != 0xA5) fail_msg("byte %zu past the caller's %zu-byte struct was written", i, small);
    coordl_config head;
    memcpy(&head, buf, small);
    assert_int_equal(head.batch_size, cfg.batch_size);

    /* a caller with a newer header: the bytes this library knows nothing
     * about come back zero */
    memset(buf, 0xA5, sizeof buf);
    assert_int_equal(coordl_get_config_sized(L, (coordl_config *)(void *)buf, sizeof buf), COORDL_OK);
    for (size_t i = sizeof(coordl_config); i < sizeof buf; i++)
        if (buf[i] != 0) fail_msg("byte %zu beyond the library's coordl_config is %#x, not 0", i, buf[i]);
    coordl_close(L);
}

int main(void)
{
    tu_main_init(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_config_resolves_threads_cache_and_copies_strings),
        cmocka_unit_test(test_get_config_cache_below_dataset_is_kept),
        cmocka_unit_test(test_threads_beyond_four_per_unit_are_cut_and_logged),
        cmocka_unit_test(test_cache_beyond_memory_is_cut_and_logged),
        cmocka_unit_test(test_out_of_memory_names_the_field_to_lower),
        cmocka_unit_test(test_get_config_forces_token_and_audio_layouts),
        cmocka_unit_test(test_get_config_reports_synthetic_placement),
        cmocka_unit_test(test_get_config_follows_coordl_set),
        cmocka_unit_test(test_get_config_writes_only_the_callers_size),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
