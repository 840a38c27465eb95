/*
 * test_s3.c - s3:// sources (docs/remote.md) against s3rver (the npm
 * package, installed by tools/install-deps.sh under build/npm) started by
 * the test on 127.0.0.1 with a bucket it creates and shards it uploads:
 * batches from s3:// are byte-identical to the same shards on local disk,
 * for a brace range and for a prefix listed with ListObjectsV2 over more
 * than one page. s3rver checks no signature, so every request of one run
 * goes through tests/tu_http_proxy.js, which writes them down, and
 * tests/tu_sigv4_check.py recomputes each signature with botocore (Debian's
 * python3-botocore): a wrong signature, an unsigned header or a query that
 * is not canonical fails the test. Errors name the s3:// object, a 403
 * names where the credentials came from, and no message or log line holds
 * the secret. A missing s3rver, node or botocore fails the test: it never
 * skips.
 */
#include "test_util.h"
#include "tu_tar.h"
#include "tu_remote.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#define NSHARDS 4
#define PER_SHARD 16
#define FILLERS 1000 /* objects before the shards in key order: the shards are on the listing's second page */
#define BUCKET "coordl-test"
#define SECRET "coordl/Secret+Key=never-logged-4242"
#define TOKEN "coordl-session/token+never=logged"

static char *g_dir, *g_data;
static pid_t g_s3rver = -1, g_faults = -1;
static int g_s3_port, g_faults_port, g_faults_stdin = -1;

/* ---- the log, captured ---- */
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_log[1 << 16];
static size_t g_log_len;

static void capture_log(void *user, coordl_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    pthread_mutex_lock(&g_log_mu);
    const size_t n = strlen(msg);
    if (g_log_len + n + 2 < sizeof g_log) {
        memcpy(g_log + g_log_len, msg, n);
        g_log_len += n;
        g_log[g_log_len++] = '\n';
        g_log[g_log_len] = '\0';
    }
    pthread_mutex_unlock(&g_log_mu);
}

static void assert_no_secret(const char *text, const char *what)
{
    if (strstr(text, SECRET) || strstr(text, TOKEN)) fail_msg("%s holds the secret or the session token: %s", what, text);
}

/* ---- the shards, on disk and uploaded ---- */
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
            const int w = 40 + j, h = 30 + s;
            uint8_t *pix = tu_textured_rgb(w, h, base, (uint64_t)(s * 100 + j));
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

typedef struct upload {
    char url[512];
    uint8_t *body;
    size_t len;
} upload;

static size_t discard(char *p, size_t s, size_t n, void *u)
{
    (void)p;
    (void)u;
    return s * n;
}

/* PUTs every upload straight to s3rver (unsigned: it checks none), 32 at
 * once; each must answer 200. */
static void put_all(upload *up, size_t n)
{
    CURLM *m = curl_multi_init();
    size_t next = 0, done = 0;
    int running = 0;
    while (done < n) {
        while (next < n && running < 32) {
            CURL *c = curl_easy_init();
            curl_easy_setopt(c, CURLOPT_URL, up[next].url);
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, up[next].body ? (const char *)up[next].body : "");
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)up[next].len);
            curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
            curl_easy_setopt(c, CURLOPT_PRIVATE, up[next].url);
            curl_multi_add_handle(m, c);
            next++;
            running++;
        }
        int still = 0;
        curl_multi_perform(m, &still);
        curl_multi_poll(m, NULL, 0, 100, NULL);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE) continue;
            long code = 0;
            char *url = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &url);
            if (msg->data.result != CURLE_OK || code != 200)
                fail_msg("PUT %s: %s, HTTP %ld", url, curl_easy_strerror(msg->data.result), code);
            curl_multi_remove_handle(m, msg->easy_handle);
            curl_easy_cleanup(msg->easy_handle);
            running--;
            done++;
        }
    }
    curl_multi_cleanup(m);
}

static void upload_bucket(void)
{
    const size_t n = 1 + FILLERS + NSHARDS + 1;
    upload *up = calloc(n, sizeof *up);
    size_t k = 0;
    snprintf(up[k++].url, sizeof up->url, "http://127.0.0.1:%d/" BUCKET, g_s3_port);
    put_all(up, 1); /* the bucket first */
    static const char filler[] = "{\"not\": \"a shard\"}";
    for (int i = 0; i < FILLERS; i++, k++) {
        snprintf(up[k].url, sizeof up->url, "http://127.0.0.1:%d/" BUCKET "/train/a-%04d.json", g_s3_port, i);
        up[k].body = (uint8_t *)filler;
        up[k].len = sizeof filler - 1;
    }
    for (int s = 0; s < NSHARDS; s++, k++) {
        char *p = tu_join(g_data, "shard-%06d.tar", s);
        up[k].body = tu_read_file(p, &up[k].len);
        snprintf(up[k].url, sizeof up->url, "http://127.0.0.1:%d/" BUCKET "/train/shard-%06d.tar", g_s3_port, s);
        free(p);
    }
    /* shard 0 again under a key SigV4 must encode: a space and a '+' */
    up[k].body = up[1 + FILLERS].body;
    up[k].len = up[1 + FILLERS].len;
    snprintf(up[k++].url, sizeof up->url, "http://127.0.0.1:%d/" BUCKET "/odd%%20dir/shard%%2B1%%20000000.tar",
             g_s3_port);
    put_all(up + 1, n - 1);
    for (int s = 0; s < NSHARDS; s++) free(up[1 + FILLERS + s].body);
    free(up);
}

/* ---- the servers ---- */
static const char *node_path(void)
{
    static const char *const where[] = {"/usr/bin/node", "/usr/local/bin/node", "/usr/bin/nodejs", NULL};
    const char *node = find_program(where);
    if (!node) fail_msg("node is not installed: the S3 tests need it (run tools/install-deps.sh as root)");
    return node;
}

static const char *s3rver_path(void)
{
    const char *p = getenv("COORDL_S3RVER");
    if (!p) p = "build/npm/node_modules/s3rver/bin/s3rver.js";
    if (access(p, R_OK) != 0)
        fail_msg("s3rver is not installed at %s: the S3 tests need it (run tools/install-deps.sh, which installs it "
                 "with npm under build/npm; COORDL_S3RVER names another copy)", p);
    return p;
}

static void start_s3rver(void)
{
    const char *node = node_path(), *s3rver = s3rver_path();
    g_s3_port = free_port();
    char *store = tu_join(g_dir, "s3rver"), *log = tu_join(g_dir, "s3rver.log"), port[16];
    tu_mkdirs(store);
    snprintf(port, sizeof port, "%d", g_s3_port);
    g_s3rver = fork();
    if (g_s3rver == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        FILE *f = freopen(log, "w", stdout);
        (void)f;
        dup2(1, 2);
        /* s3rver 3.7.1's ListObjectsV2 continuation tokens use a cipher
         * OpenSSL 3 keeps in its legacy provider */
        setenv("NODE_OPTIONS", "--openssl-legacy-provider", 1);
        execl(node, "node", s3rver, "--directory", store, "--address", "127.0.0.1", "--port", port, "--silent",
              (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 1000 && !port_open(g_s3_port); i++) usleep(10000);
    if (!port_open(g_s3_port)) fail_msg("s3rver did not start on 127.0.0.1:%d (see %s)", g_s3_port, log);
    free(store);
    free(log);
}

/* node SCRIPT ARGS...: a helper server printing "port N"; stopped when
 * *stdin_fd closes. */
static pid_t start_node(const char *script, const char *a1, const char *a2, const char *a3, int *port, int *stdin_fd)
{
    const char *node = node_path();
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) fail_msg("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execl(node, "node", script, a1, a2, a3, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    *stdin_fd = in[1];
    FILE *f = fdopen(out[0], "r");
    if (!f || fscanf(f, "port %d", port) != 1) fail_msg("%s did not start", script);
    fclose(f);
    return pid;
}

static void set_env(const char *endpoint_port_or_null, int with_token)
{
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%s", endpoint_port_or_null ? endpoint_port_or_null : "0");
    unsetenv("AWS_ENDPOINT_URL_S3");
    unsetenv("AWS_DEFAULT_REGION");
    setenv("AWS_ENDPOINT_URL", endpoint, 1);
    setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1); /* s3rver's one account (it checks the key id, not SigV4) */
    setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
    setenv("AWS_REGION", "eu-west-1", 1);
    if (with_token) setenv("AWS_SESSION_TOKEN", TOKEN, 1);
    else unsetenv("AWS_SESSION_TOKEN");
}

static void set_env_port(int port, int with_token)
{
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    set_env(p, with_token);
}

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    chmod(g_dir, 0755);
    g_data = tu_join(g_dir, "data");
    make_shards(g_data);
    start_s3rver();
    upload_bucket();
    g_faults = start_node("tests/tu_http_faults.js", g_data, NULL, NULL, &g_faults_port, &g_faults_stdin);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (g_faults_stdin >= 0) close(g_faults_stdin);
    stop(&g_faults);
    stop(&g_s3rver);
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_data);
    return 0;
}

/* ---- runs ---- */
static coordl_config s3_config(const char *source)
{
    coordl_config cfg = tu_config(source);
    cfg.batch_size = 5;
    cfg.out_w = cfg.out_h = 12;
    cfg.layout = COORDL_F32_NCHW;
    cfg.seed = 23;
    cfg.cache_bytes = 0;
    cfg.log = capture_log;
    cfg.log_level = COORDL_LOG_DEBUG;
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
        if (a->hash[i] != b->hash[i]) fail_msg("%s: batch %zu differs from local disk's", what, i);
    printf("%s: %zu batches byte-identical to local disk's\n", what, a->nbatches);
}

static tu_run local_run(const char *name, unsigned epochs, uint32_t depth)
{
    char *src = tu_join(g_data, "%s", name);
    coordl_config cfg = s3_config(src);
    cfg.readahead_items = depth;
    tu_run r = run_of(&cfg, epochs);
    free(src);
    return r;
}

static void expect_open_fails(const char *source, coordl_status status, const char *n1, const char *n2)
{
    coordl_config cfg = s3_config(source);
    coordl *L = NULL;
    coordl_status rc = coordl_open(&cfg, &L);
    const char *msg = coordl_errmsg(NULL);
    if (rc != status) fail_msg("%s: got %s (%s), expected %s", source, coordl_strerror(rc), msg, coordl_strerror(status));
    if (!strstr(msg, n1) || (n2 && !strstr(msg, n2)))
        fail_msg("%s: the message does not say \"%s\"%s%s: \"%s\"", source, n1, n2 ? " and " : "", n2 ? n2 : "", msg);
    assert_no_secret(msg, "the error message");
    printf("%s -> %s: \"%s\"\n", source, coordl_strerror(rc), msg);
    assert_null(L);
}

/* ---- tests ---- */
static void test_s3_brace_range_gives_the_local_batches(void **state)
{
    (void)state;
    set_env_port(g_s3_port, 0);
    const uint32_t depths[] = {0, 128};
    for (int i = 0; i < 2; i++) {
        tu_run local = local_run("shard-*.tar", 2, depths[i]);
        coordl_config cfg = s3_config("s3://" BUCKET "/train/shard-{000000..000003}.tar");
        cfg.readahead_items = depths[i];
        tu_run s3 = run_of(&cfg, 2);
        char what[64];
        snprintf(what, sizeof what, "s3rver, brace range, readahead_items %u", depths[i]);
        assert_same_run(&local, &s3, what);
        tu_run_free(&local);
        tu_run_free(&s3);
    }
}

/* FILLERS + NSHARDS objects under train/: ListObjectsV2 gives 1,000 keys a
 * page, so the shards are only found by following the continuation token. */
static void test_s3_prefix_is_listed_over_pages(void **state)
{
    (void)state;
    set_env_port(g_s3_port, 0);
    g_log_len = 0;
    g_log[0] = '\0';
    tu_run local = local_run("shard-*.tar", 1, 32);
    coordl_config cfg = s3_config("s3://" BUCKET "/train/");
    tu_run s3 = run_of(&cfg, 1);
    assert_same_run(&local, &s3, "s3rver, s3://" BUCKET "/train/ listed");
    char want[128];
    snprintf(want, sizeof want, "s3://" BUCKET "/train/: %d .tar objects in 2 listing pages", NSHARDS);
    if (!strstr(g_log, want)) fail_msg("the log does not say \"%s\":\n%s", want, g_log);
    printf("log: %s\n", want);
    assert_no_secret(g_log, "the log");
    tu_run_free(&local);
    tu_run_free(&s3);
}

static const char *python_with_botocore(void)
{
    static const char *const pythons[] = {"/usr/bin/python3", "python3", NULL};
    for (int i = 0; pythons[i]; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "%s -c 'import botocore' >/dev/null 2>&1", pythons[i]);
        if (system(cmd) == 0) return pythons[i];
    }
    fail_msg("botocore is not installed: the SigV4 check needs it (python3-botocore; run tools/install-deps.sh as root)");
    return NULL;
}

/* Runs tu_sigv4_check.py over log with secret: its exit status, its
 * output in out. */
static int sigv4_check(const char *log, const char *secret, char *out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s tests/tu_sigv4_check.py '%s' '%s' '%s' 2>&1", python_with_botocore(), log, secret,
             TOKEN);
    FILE *p = popen(cmd, "r");
    if (!p) fail_msg("cannot run %s", cmd);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    const int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Every request of a listing (with a continuation token), of a key with a
 * space and a '+', and of item reads, with a session token, recomputed by
 * botocore from what arrived; the same log with another secret must fail
 * the check (it has teeth). */
static void test_s3_signatures_match_botocore(void **state)
{
    (void)state;
    char port[16], *log = tu_join(g_dir, "requests.jsonl");
    int proxy_port = 0, proxy_stdin = -1;
    snprintf(port, sizeof port, "%d", g_s3_port);
    pid_t proxy = start_node("tests/tu_http_proxy.js", port, "0", log, &proxy_port, &proxy_stdin);
    set_env_port(proxy_port, 1);
    tu_run local = local_run("shard-000000.tar", 1, 8);
    coordl_config cfg = s3_config("s3://" BUCKET "/odd dir/");
    cfg.readahead_items = 8;
    tu_run odd = run_of(&cfg, 1);
    assert_same_run(&local, &odd, "s3://" BUCKET "/odd dir/ (a key with a space and a '+'), signed with a session token");
    tu_run_free(&local);
    tu_run_free(&odd);
    cfg = s3_config("s3://" BUCKET "/train/");
    tu_run train = run_of(&cfg, 1);
    tu_run_free(&train);
    close(proxy_stdin);
    stop(&proxy);
    char out[4096];
    int rc = sigv4_check(log, SECRET, out, sizeof out);
    printf("%s", out);
    if (rc != 0 || !strstr(out, " 0 wrong")) fail_msg("botocore does not agree with the signatures sent: %s", out);
    int verified = 0, wrong = 0, tokens = 0;
    if (sscanf(out, "sigv4: %d requests verified by botocore %*s %d wrong, %d", &verified, &wrong, &tokens) != 3)
        fail_msg("bad output: %s", out);
    assert_true(verified >= 10);
    assert_true(tokens >= 1);
    rc = sigv4_check(log, "not-the-secret", out, sizeof out);
    const char *last = strstr(out, "sigv4: 0 requests");
    printf("with another secret: %s", last ? last : out);
    assert_int_equal(rc, 1);
    assert_true(strstr(out, " 0 requests verified") != NULL);
    unlink(log);
    free(log);
}

static void test_s3_errors_name_the_object_never_the_secret(void **state)
{
    (void)state;
    g_log_len = 0;
    g_log[0] = '\0';
    set_env_port(g_s3_port, 1);
    expect_open_fails("s3://" BUCKET "/train/shard-000099.tar", COORDL_ERR_IO, "s3://" BUCKET "/train/shard-000099.tar",
                      "HTTP 404 Not Found (NoSuchKey)");
    expect_open_fails("s3://no-such-bucket/shard-{000000..000001}.tar", COORDL_ERR_IO,
                      "s3://no-such-bucket/shard-000000.tar", "NoSuchBucket");
    expect_open_fails("s3://no-such-bucket/train/", COORDL_ERR_IO, "s3://no-such-bucket/train/", "NoSuchBucket");
    expect_open_fails("s3://" BUCKET "/nothing-here/", COORDL_ERR_INVALID, "no .tar objects under this prefix", NULL);
    expect_open_fails("s3:///shard-000000.tar", COORDL_ERR_INVALID, "not s3://BUCKET/KEY", NULL);
    /* a 403 names the credentials' source by variable names */
    set_env_port(g_faults_port, 1);
    expect_open_fails("s3://s403/shard-000000.tar", COORDL_ERR_IO, "s3://s403/shard-000000.tar: HTTP 403 Forbidden",
                      "credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY with AWS_SESSION_TOKEN from the "
                      "environment, region eu-west-1 from AWS_REGION");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    expect_open_fails("s3://s403/shard-000000.tar", COORDL_ERR_INVALID,
                      "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not", NULL);
    set_env_port(g_s3_port, 1);
    if (!strstr(g_log, "s3: http://127.0.0.1:")) fail_msg("the log does not say where s3:// requests go:\n%s", g_log);
    assert_no_secret(g_log, "the log");
    printf("log (%zu bytes) holds no secret\n", g_log_len);
}

int main(void)
{
    tu_main_init(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_s3_brace_range_gives_the_local_batches),
        cmocka_unit_test(test_s3_prefix_is_listed_over_pages),
        cmocka_unit_test(test_s3_signatures_match_botocore),
        cmocka_unit_test(test_s3_errors_name_the_object_never_the_secret),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
