/*
 * test_remote.c - http:// sources (docs/remote.md) against real servers the
 * test starts on 127.0.0.1 and stops: nginx (Debian's package, installed by
 * tools/install-deps.sh) serving generated WebDataset shards with keep-alive
 * and ranges, and tests/tu_http_faults.js (Node) for 5xx, 403, 404, short
 * bodies, stalls and latency. A missing nginx or node fails the test: it
 * never skips. Batches from URLs are byte-identical to the same shards on
 * local disk; each fault ends in its status and a message naming the URL.
 */
#include "test_util.h"
#include "tu_tar.h"
#include "tu_remote.h"

#include <curl/curl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NSHARDS 4
#define PER_SHARD 24

static char *g_dir, *g_data;
static pid_t g_nginx = -1, g_faults = -1;
static int g_nginx_port, g_faults_port, g_faults_stdin = -1;

/* ---- the shards ---- */
static void make_shards(const char *dir)
{
    uint8_t base[3];
    tu_mkdirs(dir);
    for (int s = 0; s < NSHARDS; s++) {
        char *p = tu_join(dir, "shard-%06d.tar", s);
        tu_tar t;
        tu_tar_open(&t, p);
        for (int j = 0; j < PER_SHARD; j++) {
            const int k = (s * PER_SHARD + j) % 5;
            tu_class_colour(k, base);
            /* one large member in each shard: its headers come in a small read */
            const int w = j == 7 ? 400 : 40 + j, h = j == 7 ? 300 : 30 + s;
            uint8_t *pix = j == 7 ? tu_noise_rgb(w, h, (uint64_t)(s * 100 + j))
                                  : tu_textured_rgb(w, h, base, (uint64_t)(s * 100 + j));
            size_t n = 0;
            uint8_t *jpg = tu_encode_jpeg(pix, w, h, 3, NULL, &n);
            char name[64], cls[16];
            snprintf(name, sizeof name, "s%d_%04d.jpg", s, j);
            tu_tar_file(&t, name, jpg, n);
            snprintf(name, sizeof name, "s%d_%04d.cls", s, j);
            snprintf(cls, sizeof cls, "%d", k);
            tu_tar_file(&t, name, cls, strlen(cls));
            free(jpg);
            free(pix);
        }
        tu_tar_close(&t, 2);
        free(p);
    }
}

/* ---- the servers ---- */
static void start_nginx(void)
{
    static const char *const where[] = {"/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx", NULL};
    const char *nginx = find_program(where);
    if (!nginx) fail_msg("nginx is not installed: the remote tests need it (run tools/install-deps.sh as root)");
    g_nginx_port = free_port();
    char *conf = tu_join(g_dir, "nginx.conf"), *tmp = tu_join(g_dir, "nginx-tmp");
    tu_mkdirs(tmp);
    char text[4096];
    snprintf(text, sizeof text,
             "%s"
             "daemon off;\nmaster_process off;\nworker_processes 1;\npid %s/nginx.pid;\nerror_log %s/error.log;\n"
             "events { worker_connections 4096; }\n"
             "http {\n access_log off;\n keepalive_requests 100000;\n keepalive_timeout 60s;\n"
             " client_body_temp_path %s/b;\n proxy_temp_path %s/p;\n fastcgi_temp_path %s/f;\n"
             " uwsgi_temp_path %s/u;\n scgi_temp_path %s/s;\n"
             " server {\n  listen 127.0.0.1:%d;\n  root %s;\n  location / { }\n }\n}\n",
             geteuid() == 0 ? "user root;\n" : "", g_dir, g_dir, tmp, tmp, tmp, tmp, tmp, g_nginx_port, g_data);
    tu_write_file(conf, text, strlen(text));
    g_nginx = fork();
    if (g_nginx == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execl(nginx, "nginx", "-p", g_dir, "-c", conf, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500 && !port_open(g_nginx_port); i++) usleep(10000);
    if (!port_open(g_nginx_port)) fail_msg("nginx did not start on 127.0.0.1:%d (see %s/error.log)", g_nginx_port, g_dir);
    free(conf);
    free(tmp);
}

static void start_fault_server(void)
{
    static const char *const where[] = {"/usr/bin/node", "/usr/local/bin/node", "/usr/bin/nodejs", NULL};
    const char *node = find_program(where);
    if (!node) fail_msg("node is not installed: the remote fault tests need it (run tools/install-deps.sh as root)");
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) fail_msg("pipe");
    g_faults = fork();
    if (g_faults == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execl(node, "node", "tests/tu_http_faults.js", g_data, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    g_faults_stdin = in[1];
    FILE *f = fdopen(out[0], "r");
    if (!f || fscanf(f, "port %d", &g_faults_port) != 1) fail_msg("tests/tu_http_faults.js did not start");
    fclose(f);
}

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    chmod(g_dir, 0755);
    g_data = tu_join(g_dir, "data");
    make_shards(g_data);
    start_nginx();
    start_fault_server();
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (g_faults_stdin >= 0) close(g_faults_stdin);
    stop(&g_faults);
    stop(&g_nginx);
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_data);
    return 0;
}

/* ---- helpers ---- */
static size_t sink(char *p, size_t s, size_t n, void *u)
{
    char *buf = u;
    size_t have = strlen(buf), k = s * n;
    if (have + k < 256) {
        memcpy(buf + have, p, k);
        buf[have + k] = '\0';
    }
    return s * n;
}

/* GET http://127.0.0.1:<fault port>/<what>: the body. */
static void fault_get(const char *what, char out[256])
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/%s", g_faults_port, what);
    out[0] = '\0';
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    if (curl_easy_perform(c) != CURLE_OK) fail_msg("GET %s failed", url);
    curl_easy_cleanup(c);
}

static long fault_requests(void)
{
    char body[256];
    long n = -1;
    fault_get("stats", body);
    if (sscanf(body, "{\"requests\":%ld", &n) != 1) fail_msg("bad /stats answer: %s", body);
    return n;
}

static coordl_config remote_config(const char *source)
{
    coordl_config cfg = tu_config(source);
    cfg.batch_size = 7;
    cfg.out_w = cfg.out_h = 12;
    cfg.layout = COORDL_F32_NCHW;
    cfg.seed = 11;
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
    if (a->nbatches != b->nbatches) fail_msg("%s: %zu batches, local disk gives %zu", what, b->nbatches, a->nbatches);
    for (size_t i = 0; i < a->nbatches; i++)
        if (a->hash[i] != b->hash[i])
            fail_msg("%s: batch %zu (epoch %llu index %llu) differs from local disk's", what, i,
                     (unsigned long long)a->epoch[i], (unsigned long long)a->index[i]);
    printf("%s: %zu batches byte-identical to local disk's\n", what, a->nbatches);
}

static tu_run local_run(unsigned epochs, uint64_t cache_bytes, uint32_t depth)
{
    char *glob = tu_join(g_data, "shard-*.tar");
    coordl_config cfg = remote_config(glob);
    cfg.cache_bytes = cache_bytes;
    cfg.readahead_items = depth;
    tu_run r = run_of(&cfg, epochs);
    free(glob);
    return r;
}

/* ---- tests ---- */
static void test_http_brace_range_gives_the_local_batches(void **state)
{
    (void)state;
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/shard-{000000..%06d}.tar", g_nginx_port, NSHARDS - 1);
    /* cache off and read-ahead of several depths; then half the items cached */
    const uint32_t depths[] = {0, 8, 128};
    for (int i = 0; i < 3; i++) {
        tu_run local = local_run(2, 0, depths[i]);
        coordl_config cfg = remote_config(url);
        cfg.cache_bytes = 0;
        cfg.readahead_items = depths[i];
        tu_run http = run_of(&cfg, 2);
        char what[64];
        snprintf(what, sizeof what, "nginx, readahead_items %u", depths[i]);
        assert_same_run(&local, &http, what);
        tu_run_free(&local);
        tu_run_free(&http);
    }
    const uint64_t half = tu_tree_bytes(g_data) / 2;
    tu_run local = local_run(3, half, 32);
    coordl_config cfg = remote_config(url);
    cfg.cache_bytes = half;
    tu_run http = run_of(&cfg, 3);
    assert_same_run(&local, &http, "nginx, half cached, 3 epochs");
    tu_run_free(&local);
    tu_run_free(&http);
}

static void test_list_file_mixes_urls_and_local_paths(void **state)
{
    (void)state;
    char *list = tu_join(g_dir, "mixed.txt");
    char text[1024];
    int n = 0;
    for (int s = 0; s < NSHARDS; s++)
        n += s % 2 ? snprintf(text + n, sizeof text - (size_t)n, "http://127.0.0.1:%d/shard-%06d.tar\n", g_nginx_port, s)
                   : snprintf(text + n, sizeof text - (size_t)n, "%s/shard-%06d.tar\n", g_data, s);
    tu_write_file(list, text, (size_t)n);
    tu_run local = local_run(2, 0, 32);
    coordl_config cfg = remote_config(list);
    cfg.cache_bytes = 0;
    tu_run mixed = run_of(&cfg, 2);
    assert_same_run(&local, &mixed, "a list of URLs and local paths");
    tu_run_free(&local);
    tu_run_free(&mixed);
    free(list);
}

/* Indexing a shard is a few large ranged reads, not a GET per member:
 * NSHARDS x PER_SHARD x 2 members, counted by the fault server. */
static void test_index_reads_headers_in_large_ranges(void **state)
{
    (void)state;
    char url[256], body[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok/shard-{000000..%06d}.tar", g_faults_port, NSHARDS - 1);
    fault_get("reset", body);
    coordl_config cfg = remote_config(url);
    cfg.readahead_items = 0;
    cfg.threads = 1;
    cfg.prefetch_batches = 1;
    coordl *L = tu_open(&cfg);
    coordl_close(L);
    const long requests = fault_requests();
    printf("indexing %d shards of %d members: %ld requests (with the first batches' items)\n", NSHARDS,
           2 * PER_SHARD, requests);
    /* per shard: the first ranged GET (size), then windows: the one large
     * member costs a jump; items of the first batches come on top */
    assert_true(requests <= NSHARDS * 6 + 3 * 7);
}

/* coordl_open asks for every shard at once (issue 24: one shard after
 * another, 20 ms a request, the open of 8 shards took 12 s): with the
 * read-ahead off and one worker, nothing else puts two requests in
 * flight, so the most in flight is the NSHARDS first answers (sizes and
 * ETags) asked together; the server, adding 40 ms to each, sees them all
 * at once too. Counts, not times. */
static void test_open_scans_every_shard_at_once(void **state)
{
    (void)state;
    char url[256], body[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/lat40/shard-{000000..%06d}.tar", g_faults_port, NSHARDS - 1);
    fault_get("reset", body);
    coordl_config cfg = remote_config(url);
    cfg.cache_bytes = 0;
    cfg.readahead_items = 0;
    cfg.threads = 1;
    cfg.prefetch_batches = 1;
    coordl *L = tu_open(&cfg);
    coordl_stats st;
    coordl_get_stats(L, &st);
    fault_get("stats", body);
    long seen = -1;
    const char *m = strstr(body, "\"max_in_flight\":");
    if (m) seen = strtol(m + strlen("\"max_in_flight\":"), NULL, 10);
    printf("open of %d shards: at most %llu requests in flight (server saw %ld at once)\n", NSHARDS,
           (unsigned long long)st.remote_max_in_flight, seen);
    assert_int_equal(st.remote_max_in_flight, NSHARDS);
    assert_int_equal(seen, NSHARDS);
    coordl_close(L);
    /* and the batches are those of local disk */
    tu_run local = local_run(1, 0, 0);
    tu_run http = run_of(&cfg, 1);
    assert_same_run(&local, &http, "shards scanned at once, 40 ms a request");
    tu_run_free(&local);
    tu_run_free(&http);
}

static void test_503_slowdown_is_retried_and_batches_are_unchanged(void **state)
{
    (void)state;
    char url[256], body[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/flaky2/shard-{000000..%06d}.tar", g_faults_port, NSHARDS - 1);
    fault_get("reset", body);
    tu_run local = local_run(1, 0, 32);
    coordl_config cfg = remote_config(url);
    cfg.cache_bytes = 0;
    tu_run http = run_of(&cfg, 1);
    assert_same_run(&local, &http, "503 SlowDown twice per shard, retried");
    tu_run_free(&local);
    tu_run_free(&http);
}

/* readahead_items is the number of reads in flight without a thread each:
 * with 40 ms added per request, depth 64 puts dozens of transfers in
 * flight on the one event-loop thread, and the read-ahead starts at most
 * 2 I/O threads. Counts, not times. */
static void test_depth_is_transfers_in_flight_not_threads(void **state)
{
    (void)state;
    char url[256], body[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/lat40/shard-{000000..%06d}.tar", g_faults_port, NSHARDS - 1);
    fault_get("reset", body);
    coordl_config cfg = remote_config(url);
    cfg.cache_bytes = 0;
    cfg.readahead_items = 64;
    cfg.batch_size = 4;
    cfg.prefetch_batches = 2;
    cfg.threads = 1;
    coordl *L = tu_open(&cfg);
    tu_run r;
    memset(&r, 0, sizeof r);
    if (tu_run_epochs(L, 1, &r) != COORDL_OK) fail_msg("%s", coordl_errmsg(L));
    coordl_stats st;
    coordl_get_stats(L, &st);
    fault_get("stats", body);
    printf("depth 64 at 40 ms: %llu requests, at most %llu in flight (server saw: %s), %u I/O threads, %llu read ahead\n",
           (unsigned long long)st.remote_requests, (unsigned long long)st.remote_max_in_flight, body,
           st.readahead_io_threads, (unsigned long long)st.readahead_reads);
    assert_true(st.remote_max_in_flight >= 32);
    assert_true(st.readahead_io_threads <= 2);
    assert_true(st.readahead_reads >= NSHARDS * PER_SHARD / 2);
    coordl_close(L);
    tu_run_free(&r);
}

/* Opens source and expects the open to fail with status and a message
 * holding each of the needles. */
static void expect_open_fails(const char *source, uint32_t timeout_ms, coordl_status status, const char *n1,
                              const char *n2)
{
    coordl_config cfg = remote_config(source);
    cfg.io_timeout_ms = timeout_ms;
    coordl *L = NULL;
    coordl_status rc = coordl_open(&cfg, &L);
    const char *msg = coordl_errmsg(NULL);
    if (rc != status) fail_msg("%s: got %s (%s), expected %s", source, coordl_strerror(rc), msg, coordl_strerror(status));
    if (!strstr(msg, n1) || (n2 && !strstr(msg, n2)))
        fail_msg("%s: the message does not say \"%s\"%s%s: \"%s\"", source, n1, n2 ? " and " : "", n2 ? n2 : "", msg);
    printf("%s -> %s: \"%s\"\n", source, coordl_strerror(rc), msg);
    assert_null(L);
}

static void test_faults_are_errors_naming_the_url(void **state)
{
    (void)state;
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/s404/shard-000000.tar", g_faults_port);
    expect_open_fails(url, 0, COORDL_ERR_IO, url, "HTTP 404");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/s403/shard-000000.tar", g_faults_port);
    expect_open_fails(url, 0, COORDL_ERR_IO, url, "HTTP 403");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/s500/shard-000000.tar", g_faults_port);
    expect_open_fails(url, 0, COORDL_ERR_IO, url, "after 5 retries");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/short/shard-000000.tar", g_faults_port);
    expect_open_fails(url, 0, COORDL_ERR_IO, url, "retries");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/stall/shard-000000.tar", g_faults_port);
    expect_open_fails(url, 300, COORDL_ERR_IO, url, "io_timeout_ms (300 ms)");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/shard-000099.tar", g_nginx_port);
    expect_open_fails(url, 0, COORDL_ERR_IO, url, "HTTP 404");
    expect_open_fails("http://no-such-host.invalid/shard-000000.tar", 0, COORDL_ERR_IO,
                      "http://no-such-host.invalid/shard-000000.tar", "resolve");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/shard-{000000..000003}.idx", g_nginx_port);
    expect_open_fails(url, 0, COORDL_ERR_INVALID, "must name .tar shards", NULL);
    /* nothing listens on the port nginx had before it: refused, retried */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/shard-000000.tar", free_port());
    expect_open_fails(url, 0, COORDL_ERR_IO, url, "retries");
}

/* A shard that goes away or changes after indexing: every batch that can
 * be correct is, and the rest are errors naming the URL. */
static void test_shard_gone_or_changed_after_indexing(void **state)
{
    (void)state;
    char *copy = tu_join(g_data, "copy-000000.tar"), *orig = tu_join(g_data, "shard-000000.tar");
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        uint8_t *bytes = tu_read_file(orig, &n);
        tu_write_file(copy, bytes, n);
        char url[256];
        snprintf(url, sizeof url, "http://127.0.0.1:%d/copy-000000.tar", g_nginx_port);
        coordl_config cfg = remote_config(url);
        cfg.cache_bytes = 0;
        cfg.readahead_items = 4;
        cfg.prefetch_batches = 1;
        cfg.threads = 1;
        coordl *L = tu_open(&cfg);
        if (pass == 0) {
            unlink(copy);
        } else { /* same name, other bytes: its ETag and size change */
            tu_write_file(copy, bytes, n - 1024);
        }
        tu_run r;
        memset(&r, 0, sizeof r);
        coordl_status rc = tu_run_epochs(L, 2, &r);
        if (rc == COORDL_OK) fail_msg("pass %d: two epochs of a shard that %s ran without an error", pass,
                                      pass ? "changed" : "is gone");
        const char *msg = coordl_errmsg(L);
        if (!strstr(msg, url) || !strstr(msg, pass == 0 ? "404" : "changed since it was indexed"))
            fail_msg("pass %d: the error does not name the URL and the cause: \"%s\"", pass, msg);
        printf("shard %s after indexing: %s \"%s\"\n", pass ? "changed" : "gone", coordl_strerror(rc), msg);
        coordl_close(L);
        tu_run_free(&r);
        free(bytes);
        unlink(copy);
    }
    free(copy);
    free(orig);
}

/* The shard-window order over HTTP indexes the shards lazily (one process,
 * no LRU cache, no index_path: docs/shuffle.md): open reads the first shard
 * only (the item count is not known yet), and the batches are the ones the
 * same shards give from local disk in the same order, byte for byte, two
 * epochs (ids (shard << 32) | ordinal on both sides). */
static void test_shard_window_over_http_indexes_shards_as_reached(void **state)
{
    (void)state;
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/shard-{000000..%06d}.tar", g_nginx_port, NSHARDS - 1);
    char *glob = tu_join(g_data, "shard-*.tar");
    coordl_config local = remote_config(glob);
    local.shuffle = COORDL_SHUFFLE_SHARD_WINDOW;
    local.shuffle_window_shards = 2;
    local.readahead_items = 16;
    coordl_config http = local;
    http.source = url;
    coordl *L = tu_open(&http);
    assert_int_equal(coordl_num_items(L), 0); /* lazily indexed */
    tu_run a, b;
    memset(&b, 0, sizeof b);
    if (tu_run_epochs(L, 2, &b) != COORDL_OK) fail_msg("%s: %s", url, coordl_errmsg(L));
    assert_int_equal(coordl_num_items(L), NSHARDS * PER_SHARD);
    coordl_close(L);
    a = run_of(&local, 2);
    assert_same_run(&a, &b, "nginx, shard-window order indexed as reached");
    tu_run_free(&a);
    tu_run_free(&b);
    free(glob);
}

int main(void)
{
    tu_main_init(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_brace_range_gives_the_local_batches),
        cmocka_unit_test(test_list_file_mixes_urls_and_local_paths),
        cmocka_unit_test(test_index_reads_headers_in_large_ranges),
        cmocka_unit_test(test_open_scans_every_shard_at_once),
        cmocka_unit_test(test_503_slowdown_is_retried_and_batches_are_unchanged),
        cmocka_unit_test(test_depth_is_transfers_in_flight_not_threads),
        cmocka_unit_test(test_faults_are_errors_naming_the_url),
        cmocka_unit_test(test_shard_gone_or_changed_after_indexing),
        cmocka_unit_test(test_shard_window_over_http_indexes_shards_as_reached),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
