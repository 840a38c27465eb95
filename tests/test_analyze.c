/*
 * test_analyze.c - DS-Analyzer: coordl_analyze's differential runs and its
 * what-if model, coordl_stats_json and coordl_report_json, and the
 * coordl-analyze tool (exit codes, report.json, report.svg).
 *
 * Dataset: 4 classes x 24 textured JPEGs of 48..64 x 40..56 pixels (96
 * items, ~100 KB), made once for the group. Runs are a few batches of 8
 * with a 2 ms step, so timings are noisy: the tests check structure,
 * ranges and the model's shape, not figures.
 *
 * The tool is found next to the test binary (argv[0] is
 * BUILD/tests/test_analyze, the tool BUILD/coordl-analyze) or at
 * $COORDL_ANALYZE. report.svg must pass `xmllint --noout` (libxml2-utils,
 * installed by tools/install-deps.sh): a missing xmllint fails the test.
 */
#include "test_util.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char g_tool[PATH_MAX];
static char *g_dir, *g_root, *g_qroot;
static const tu_folder_spec g_spec = {4, 24, 48, 40, 16, TU_PAT_TEXTURED, TU_FMT_JPEG, 85, 7};
#define N_ITEMS 96

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_mkdtemp();
    g_root = tu_join(g_dir, "data");
    tu_make_image_folder(g_root, &g_spec);
    g_qroot = tu_shell_quote(g_root);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmtree(g_dir);
    free(g_dir);
    free(g_root);
    free(g_qroot);
    return 0;
}

static coordl_config analyze_config(void)
{
    coordl_config cfg = tu_config(g_root);
    cfg.batch_size = 8;
    cfg.out_w = cfg.out_h = 16;
    return cfg;
}

static coordl_analyze_opts quick_opts(void)
{
    coordl_analyze_opts o;
    memset(&o, 0, sizeof o);
    o.batches = 4;
    o.synthetic_step_ms = 2;
    return o;
}

static void assert_fraction(double v, const char *what)
{
    if (!(v >= 0.0 && v <= 1.0))
        fail_msg("%s = %g, not in [0, 1]", what, v);
}

static void assert_valid_json(const char *js, const char *what)
{
    size_t off = 0;
    if (!tu_json_valid(js, strlen(js), &off))
        fail_msg("%s is not valid JSON at offset %zu: ...%.60s...", what, off,
                 js + (off > 20 ? off - 20 : 0));
}

static char *read_text(const char *path)
{
    size_t n;
    uint8_t *b = tu_read_file(path, &n);
    char *s = realloc(b, n + 1);
    assert_non_null(s);
    s[n] = '\0';
    return s;
}

static void assert_xmllint_ok(const char *path)
{
    char *q = tu_shell_quote(path);
    size_t n = strlen(q) + 32;
    char *cmd = malloc(n);
    assert_non_null(cmd);
    snprintf(cmd, n, "xmllint --noout %s", q);
    char *err = NULL;
    int rc = tu_run_capture(cmd, NULL, &err);
    if (rc == 127)
        fail_msg("xmllint is not installed (apt-get install libxml2-utils): it is a test "
                 "dependency");
    if (rc != 0)
        fail_msg("xmllint --noout %s: exit %d: %s", path, rc, err);
    free(err);
    free(cmd);
    free(q);
}

static void assert_contains(const char *hay, const char *needle, const char *what)
{
    if (!strstr(hay, needle))
        fail_msg("%s has no \"%s\"", what, needle);
}

/* ---- the library ---------------------------------------------------------- */

static void test_analyze_runs_three_runs_and_fits_the_model(void **state)
{
    (void)state;
    coordl_config cfg = analyze_config();
    coordl_analyze_opts o = quick_opts();
    static const double fr[] = {0, 0.25, 0.5, 0.75, 1};
    static const int th[] = {1, 2, 3};
    o.whatif_cache_fractions = fr;
    o.n_whatif_cache_fractions = 5;
    o.whatif_threads = th;
    o.n_whatif_threads = 3;
    coordl_report r;
    coordl_status rc = coordl_analyze(&cfg, NULL, NULL, &o, &r);
    if (rc != COORDL_OK)
        fail_msg("coordl_analyze = %d: %s", (int)rc, coordl_errmsg(NULL));

    const coordl_run_report *runs[3] = {&r.synthetic, &r.warm, &r.cold};
    static const char *const names[3] = {"synthetic", "warm", "cold"};
    for (int i = 0; i < 3; i++) {
        if (!(runs[i]->images_per_s > 0))
            fail_msg("%s.images_per_s = %g", names[i], runs[i]->images_per_s);
        assert_true(runs[i]->seconds > 0);
        assert_true(runs[i]->images > 0);
        assert_fraction(runs[i]->stall_fraction, names[i]);
    }
    assert_fraction(r.prep_stall_fraction, "prep_stall_fraction");
    assert_fraction(r.fetch_stall_fraction, "fetch_stall_fraction");
    assert_true(r.prep_stall_fraction + r.fetch_stall_fraction <= 1.0 + 1e-9);

    assert_int_equal(r.dataset_items, N_ITEMS);
    assert_int_equal(r.dataset_bytes, tu_tree_bytes(g_root));
    assert_true(fabs(r.mean_item_bytes - (double)r.dataset_bytes / N_ITEMS) < 1.0);
    assert_int_equal(r.threads, 2);
    assert_true(r.ingest_images_per_s > 0);
    assert_true(r.prep_images_per_s_per_core > 0);

    /* the grid: fractions x threads, each entry what predict says */
    assert_non_null(r.whatif);
    assert_int_equal(r.n_whatif, 5 * 3);
    for (size_t i = 0; i < r.n_whatif; i++) {
        const coordl_whatif *w = &r.whatif[i];
        int in_f = 0, in_t = 0;
        for (size_t k = 0; k < 5; k++)
            in_f |= w->cache_fraction == fr[k];
        for (size_t k = 0; k < 3; k++)
            in_t |= w->threads == th[k];
        assert_true(in_f && in_t);
        coordl_whatif p = coordl_report_predict(&r, w->cache_fraction, w->threads, 0);
        assert_true(fabs(p.predicted_images_per_s - w->predicted_images_per_s) <=
                    1e-9 * fmax(1, p.predicted_images_per_s));
        assert_fraction(w->predicted_stall_fraction, "predicted_stall_fraction");
    }
    for (size_t a = 0; a < 5; a++)
        for (size_t b = 0; b < 3; b++) {
            int found = 0;
            for (size_t i = 0; i < r.n_whatif; i++)
                found += r.whatif[i].cache_fraction == fr[a] && r.whatif[i].threads == th[b];
            assert_int_equal(found, 1);
        }

    /* the model: never above the trainer's rate; more cache or more
     * threads never predicts less */
    for (int t = 1; t <= 8; t++)
        for (int k = 0; k <= 20; k++) {
            double f = k / 20.0;
            coordl_whatif w = coordl_report_predict(&r, f, t, 0);
            assert_true(w.predicted_images_per_s > 0);
            assert_true(w.predicted_images_per_s <= r.ingest_images_per_s * (1 + 1e-9));
            assert_fraction(w.predicted_stall_fraction, "predicted_stall_fraction");
            assert_true(fabs(w.cache_fraction - f) < 1e-12);
            assert_int_equal(w.threads, t);
            if (k > 0) {
                double prev = coordl_report_predict(&r, (k - 1) / 20.0, t, 0).predicted_images_per_s;
                if (w.predicted_images_per_s < prev * (1 - 1e-9))
                    fail_msg("not monotone in cache: f=%g t=%d: %g < %g at f=%g", f, t,
                             w.predicted_images_per_s, prev, (k - 1) / 20.0);
            }
            if (t > 1) {
                double prev = coordl_report_predict(&r, f, t - 1, 0).predicted_images_per_s;
                if (w.predicted_images_per_s < prev * (1 - 1e-9))
                    fail_msg("not monotone in threads: f=%g t=%d: %g < %g at t=%d", f, t,
                             w.predicted_images_per_s, prev, t - 1);
            }
            /* storage_mb_per_s <= 0 means the measured bandwidth; more
             * bandwidth never predicts less */
            coordl_whatif m = coordl_report_predict(&r, f, t, r.storage_mb_per_s);
            assert_true(fabs(m.predicted_images_per_s - w.predicted_images_per_s) <=
                        1e-9 * w.predicted_images_per_s);
            if (r.storage_mb_per_s > 0) {
                coordl_whatif x = coordl_report_predict(&r, f, t, 10 * r.storage_mb_per_s);
                assert_true(x.predicted_images_per_s >= w.predicted_images_per_s * (1 - 1e-9));
                assert_true(fabs(x.storage_mb_per_s - 10 * r.storage_mb_per_s) < 1e-6 * x.storage_mb_per_s);
            }
        }

    /* the recommendation is a grid point predicted under 3% stall */
    if (r.recommend_threads > 0) {
        coordl_whatif w = coordl_report_predict(&r, r.recommend_cache_fraction,
                                                r.recommend_threads, 0);
        assert_true(w.predicted_stall_fraction < 0.03);
        assert_fraction(r.recommend_cache_fraction, "recommend_cache_fraction");
    } else {
        assert_int_equal(r.recommend_threads, -1);
    }

    /* the JSON: valid, snprintf-like, with the documented keys */
    size_t n = coordl_report_json(&r, NULL, 0);
    assert_true(n > 0);
    char *js = malloc(n + 1);
    assert_non_null(js);
    assert_int_equal(coordl_report_json(&r, js, n + 1), n);
    assert_int_equal(strlen(js), n);
    assert_valid_json(js, "coordl_report_json");
    static const char *const keys[] = {"runs", "synthetic", "warm", "cold", "images_per_s",
                                       "stall_fraction", "prep_slowdown_fraction",
                                       "fetch_slowdown_fraction", "fetch_within_noise", "model", "whatif",
                                       "cache_fraction", "threads", "predicted_images_per_s",
                                       "recommendation"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        if (!tu_json_has_key(js, keys[k]))
            fail_msg("coordl_report_json has no key \"%s\": %s", keys[k], js);
    char small[16];
    memset(small, 'x', sizeof small);
    assert_int_equal(coordl_report_json(&r, small, 10), n);
    assert_int_equal(small[9], '\0');
    assert_memory_equal(small, js, 9);
    assert_int_equal(small[10], 'x');
    free(js);

    coordl_report_free(&r);
    assert_null(r.whatif);
    coordl_report_free(&r); /* twice is harmless */
}

typedef struct {
    unsigned calls;
    unsigned bad;
} step_count;

static int counting_step(void *user, const coordl_batch *b)
{
    step_count *c = user;
    c->calls++;
    if (!b || b->n == 0 || b->n > 8 || !b->data || !b->labels)
        c->bad++;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
    return 0;
}

static void count_lines(void *user, const char *line)
{
    assert_non_null(line);
    ++*(int *)user;
}

static void test_analyze_calls_the_step_on_real_batches(void **state)
{
    (void)state;
    coordl_config cfg = analyze_config();
    coordl_analyze_opts o = quick_opts();
    o.skip_cold = 1;
    int lines = 0;
    o.progress = count_lines;
    o.progress_user = &lines;
    step_count c = {0, 0};
    coordl_report r;
    coordl_status rc = coordl_analyze(&cfg, counting_step, &c, &o, &r);
    if (rc != COORDL_OK)
        fail_msg("coordl_analyze = %d: %s", (int)rc, coordl_errmsg(NULL));
    /* synthetic and warm at least (skip_cold: no cold run) */
    assert_true(c.calls >= 2 * o.batches);
    assert_int_equal(c.bad, 0);
    assert_true(lines > 0);
    assert_true(r.synthetic.images_per_s > 0 && r.warm.images_per_s > 0);
    /* the default grid: 11 fractions (0, 0.1, ..., 1) per thread count */
    assert_true(r.n_whatif > 0);
    assert_int_equal(r.n_whatif % 11, 0);
    assert_fraction(r.fetch_stall_fraction, "fetch_stall_fraction");
    coordl_report_free(&r);
}

/* A step slow only in the warm runs (calls batches+1 .. 3 x batches: the
 * warm fill and the warm timed run): the cold run is faster than the warm
 * one. That is noise, not a 0% fetch slowdown: the report says within
 * noise, in the struct, the JSON and the figure. */
typedef struct {
    unsigned calls, batches;
} warm_slow;

static int warm_slow_step(void *user, const coordl_batch *b)
{
    warm_slow *w = user;
    (void)b;
    w->calls++;
    const int warm = w->calls > w->batches && w->calls <= 3 * w->batches;
    struct timespec ts = {0, warm ? 40000000 : 1000000};
    nanosleep(&ts, NULL);
    return 0;
}

static void test_cold_faster_than_warm_is_within_noise(void **state)
{
    (void)state;
    coordl_config cfg = analyze_config();
    coordl_analyze_opts o = coordl_analyze_opts_default();
    o.batches = 4;
    warm_slow w = {0, 4};
    coordl_report r;
    coordl_status rc = coordl_analyze(&cfg, warm_slow_step, &w, &o, &r);
    if (rc != COORDL_OK)
        fail_msg("coordl_analyze = %d: %s", (int)rc, coordl_errmsg(NULL));
    assert_int_equal(w.calls, 4 * 4); /* synthetic, warm fill, warm, cold */
    assert_true(r.cold.images_per_s > r.warm.images_per_s);
    assert_int_equal(r.fetch_within_noise, 1);
    assert_true(r.fetch_slowdown_fraction == 0.0);
    static char js[1 << 16], svg[1 << 17];
    assert_true(coordl_report_json(&r, js, sizeof js) < sizeof js);
    assert_contains(js, "\"fetch_within_noise\":true", "coordl_report_json");
    assert_true(coordl_report_svg(&r, NULL, 0, svg, sizeof svg) < sizeof svg);
    assert_contains(svg, "fetch within noise", "coordl_report_svg");
    coordl_report_free(&r);
}

/* The library call gives a caller's own step what the tool gets: the
 * figure and the JSON written where asked, over `repeat` analyses (their
 * median), from an options initialiser. */
static void test_analyze_writes_the_figure_for_the_callers_step(void **state)
{
    (void)state;
    coordl_config cfg = analyze_config();
    coordl_analyze_opts o = coordl_analyze_opts_default();
    assert_int_equal(o.batches, 50);
    assert_true(o.synthetic_step_ms == 10.0);
    assert_int_equal(o.repeat, 1);
    assert_null(o.svg_path);
    o.batches = 4;
    o.repeat = 2;
    char *svg_path = tu_join(g_dir, "own-step.svg"), *json_path = tu_join(g_dir, "own-step.json");
    o.svg_path = svg_path;
    o.json_path = json_path;
    o.step_name = "my trainer step";
    step_count c = {0, 0};
    coordl_report r;
    coordl_status rc = coordl_analyze(&cfg, counting_step, &c, &o, &r);
    if (rc != COORDL_OK)
        fail_msg("coordl_analyze = %d: %s", (int)rc, coordl_errmsg(NULL));
    /* two analyses of 4 batches each in 4 runs (synthetic, warm fill, warm, cold) */
    assert_int_equal(c.calls, 2 * 4 * 4);
    assert_int_equal(r.repeat, 2);
    assert_int_equal(r.batches, 4);
    assert_int_equal(r.batch_size, 8);
    assert_true(r.step_ms > 0);
    assert_string_equal(r.source, g_root);
    assert_xmllint_ok(svg_path);
    char *svg = read_text(svg_path);
    assert_contains(svg, "my trainer step", svg_path);
    assert_contains(svg, "median of 2", svg_path);
    assert_contains(svg, g_root, svg_path);
    assert_contains(svg, "fetch slowdown", svg_path);
    /* the file is the figure coordl_report_svg draws */
    const size_t n = coordl_report_svg(&r, NULL, 0, NULL, 0);
    assert_int_equal(strlen(svg), n);
    char *js = read_text(json_path);
    assert_valid_json(js, json_path);
    assert_true(tu_json_has_key(js, "fetch_slowdown_fraction"));
    free(js);
    free(svg);
    free(svg_path);
    free(json_path);
    coordl_report_free(&r);
}

static void test_analyze_unreadable_source_fails_with_a_message(void **state)
{
    (void)state;
    char *missing = tu_join(g_dir, "no-such-dataset");
    coordl_config cfg = analyze_config();
    cfg.source = missing;
    coordl_analyze_opts o = quick_opts();
    coordl_report r;
    coordl_status rc = coordl_analyze(&cfg, NULL, NULL, &o, &r);
    assert_true(rc < 0);
    assert_true(strlen(coordl_errmsg(NULL)) > 0);
    coordl_report_free(&r);
    free(missing);
}

static void test_stats_json_is_valid_and_snprintf_like(void **state)
{
    (void)state;
    coordl_config cfg = analyze_config();
    cfg.cache_bytes = 1 << 20;
    coordl *L = tu_open(&cfg);
    tu_run run;
    memset(&run, 0, sizeof run);
    assert_int_equal(tu_run_epochs(L, 2, &run), COORDL_OK);
    tu_run_free(&run);

    /* the handle is live (workers prefetch the next epoch, counters move),
     * so lengths are compared within one call only */
    size_t n = coordl_stats_json(L, NULL, 0);
    assert_true(n > 0);
    size_t cap = n + 4096;
    char *js = malloc(cap);
    assert_non_null(js);
    n = coordl_stats_json(L, js, cap);
    assert_true(n < cap);
    assert_int_equal(strlen(js), n);
    assert_valid_json(js, "coordl_stats_json");
    static const char *const keys[] = {"stall_ns", "compute_ns", "batches", "items",
                                       "cache_hits", "cache_misses", "dataset_bytes",
                                       "storage_bytes", "decode_ns", "epochs"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        if (!tu_json_has_key(js, keys[k]))
            fail_msg("coordl_stats_json has no key \"%s\": %s", keys[k], js);
    /* both epochs are kept */
    assert_non_null(strstr(js, "\"epoch\":0") ? strstr(js, "\"epoch\":0") : strstr(js, "\"epoch\": 0"));
    assert_non_null(strstr(js, "\"epoch\":1") ? strstr(js, "\"epoch\":1") : strstr(js, "\"epoch\": 1"));

    char small[24];
    memset(small, 'x', sizeof small);
    assert_true(coordl_stats_json(L, small, 12) > 11); /* the length it needs */
    assert_int_equal(small[11], '\0');
    assert_memory_equal(small, js, 11);
    assert_int_equal(small[12], 'x');
    free(js);
    coordl_close(L);
}

/* ---- the tool ------------------------------------------------------------------ */

static void require_tool(void)
{
    if (access(g_tool, X_OK))
        fail_msg("coordl-analyze not found at %s (build it with make tools, or set "
                 "COORDL_ANALYZE)", g_tool);
}

/* Runs the tool with the given arguments (a shell fragment). */
static int run_tool(const char *args, char **out, char **err)
{
    require_tool();
    char *q = tu_shell_quote(g_tool);
    size_t n = strlen(q) + strlen(args) + 2;
    char *cmd = malloc(n);
    assert_non_null(cmd);
    snprintf(cmd, n, "%s %s", q, args);
    int rc = tu_run_capture(cmd, out, err);
    free(cmd);
    free(q);
    return rc;
}

static void check_reports(const char *outdir, int validated)
{
    char *jp = tu_join(outdir, "report.json"), *sp = tu_join(outdir, "report.svg");
    char *js = read_text(jp);
    assert_valid_json(js, jp);
    static const char *const keys[] = {"runs", "synthetic", "warm", "cold", "images_per_s",
                                       "stall_fraction", "prep_slowdown_fraction",
                                       "fetch_slowdown_fraction", "fetch_within_noise", "whatif", "cache_fraction",
                                       "threads", "predicted_images_per_s"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        if (!tu_json_has_key(js, keys[k]))
            fail_msg("%s has no key \"%s\"", jp, keys[k]);
    assert_int_equal(tu_json_has_key(js, "validation"), validated);
    assert_int_equal(tu_json_has_key(js, "measured_images_per_s"), validated);
    if (validated) {
        /* four points, each with the prediction, the measurement and the error */
        const char *v = strstr(js, "\"validation\"");
        int points = 0;
        for (const char *p = v; (p = strstr(p, "\"measured_images_per_s\"")) != NULL; p++)
            points++;
        assert_int_equal(points, 4);
        assert_true(tu_json_has_key(v, "error"));
        assert_true(tu_json_has_key(v, "predicted_images_per_s"));
    }

    assert_xmllint_ok(sp);
    char *svg = read_text(sp);
    assert_contains(svg, "<svg", sp);
    assert_contains(svg, "</svg>", sp);
    /* axis labels with units, the legends, the title with the dataset */
    static const char *const texts[] = {"seconds per 100 batches", "images/s", "cache size",
                                        "% of the dataset", "compute", "prep slowdown",
                                        "fetch slowdown", "legend", "loader thread",
                                        "synthetic", "warm", "cold", "DS-Analyzer"};
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++)
        assert_contains(svg, texts[k], sp);
    assert_contains(svg, g_root, sp);
    if (validated)
        assert_contains(svg, "measured (validation)", sp);
    else
        assert_null(strstr(svg, "measured (validation)"));
    free(svg);
    free(js);
    free(jp);
    free(sp);
}

static void test_tool_writes_a_report(void **state)
{
    (void)state;
    char *out = tu_join(g_dir, "out-plain/nested");
    char *qout = tu_shell_quote(out);
    char args[1024];
    snprintf(args, sizeof args,
             "--data %s --out %s --batch-size 8 --batches 4 --step-ms 2 --step spin --size 16 --threads 2 "
             "--cache-fraction 0.5 --repeat 1",
             g_qroot, qout);
    char *so = NULL, *se = NULL;
    int rc = run_tool(args, &so, &se);
    if (rc != 0)
        fail_msg("exit %d\nstdout:\n%s\nstderr:\n%s", rc, so, se);
    static const char *const texts[] = {"synthetic", "warm", "cold", "images/s", "stall",
                                        "prep", "fetch", "recommendation", "what-if",
                                        "current setting: cache 50%"};
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++)
        assert_contains(so, texts[k], "stdout");
    assert_null(strstr(so, "validation:"));
    assert_contains(se, "coordl-analyze: ", "stderr (progress)");
    check_reports(out, 0);
    free(so);
    free(se);
    free(qout);
    free(out);
}

static void test_tool_validates_and_checks(void **state)
{
    (void)state;
    char *out = tu_join(g_dir, "out-validate");
    char *qout = tu_shell_quote(out);
    char args[1024];
    /* a tolerance nobody misses: exit 0 */
    snprintf(args, sizeof args,
             "--data %s --out %s --batch-size 8 --batches 4 --step-ms 2 --size 16 "
             "--validate --check 1000",
             g_qroot, qout);
    char *so = NULL, *se = NULL;
    int rc = run_tool(args, &so, &se);
    if (rc != 0)
        fail_msg("exit %d\nstdout:\n%s\nstderr:\n%s", rc, so, se);
    assert_contains(so, "validation", "stdout");
    assert_contains(so, "predicted", "stdout");
    assert_contains(so, "measured", "stdout");
    assert_contains(so, "max |error|", "stdout");
    assert_contains(so, "passed", "stdout");
    check_reports(out, 1);
    free(so);
    free(se);

    /* a tolerance of 0 is always missed: exit 1, reports still written */
    char *out2 = tu_join(g_dir, "out-check0");
    char *qout2 = tu_shell_quote(out2);
    snprintf(args, sizeof args,
             "--data %s --out %s --batch-size 8 --batches 2 --step-ms 1 --size 16 --repeat 2 "
             "--check 0",
             g_qroot, qout2);
    rc = run_tool(args, &so, &se);
    if (rc != 1)
        fail_msg("--check 0: exit %d, expected 1\nstdout:\n%s\nstderr:\n%s", rc, so, se);
    assert_contains(so, "FAILED", "stdout");
    check_reports(out2, 1);
    free(so);
    free(se);
    free(qout2);
    free(out2);
    free(qout);
    free(out);
}

static void test_tool_bad_arguments_exit_2_with_usage(void **state)
{
    (void)state;
    char *out = tu_join(g_dir, "out-bad");
    char *qout = tu_shell_quote(out);
    const char *tails[] = {"--bogus", "--batches 0", "--threads -1", "--threads x",
                           "--batch-size 0", "--cache-fraction 1.5", "--step-ms -3",
                           "--step-ms abc", "--size 0", "--check -1", "--step warp",
                           "--repeat 0", "--repeat 10", "--seed -1", "--batches"};
    char args[1024];
    for (size_t i = 0; i < sizeof tails / sizeof *tails; i++) {
        snprintf(args, sizeof args, "--data %s --out %s %s", g_qroot, qout, tails[i]);
        char *so = NULL, *se = NULL;
        int rc = run_tool(args, &so, &se);
        if (rc != 2 || !strstr(se, "usage"))
            fail_msg("'%s': exit %d (expected 2), stderr:\n%s", tails[i], rc, se);
        free(so);
        free(se);
    }
    /* missing --data, missing --out, nothing at all, a stray argument */
    const char *whole[4];
    char a1[512], a2[512], a4[512];
    snprintf(a1, sizeof a1, "--out %s", qout);
    snprintf(a2, sizeof a2, "--data %s", g_qroot);
    snprintf(a4, sizeof a4, "--data %s --out %s stray", g_qroot, qout);
    whole[0] = a1, whole[1] = a2, whole[2] = "", whole[3] = a4;
    for (size_t i = 0; i < 4; i++) {
        char *so = NULL, *se = NULL;
        int rc = run_tool(whole[i], &so, &se);
        if (rc != 2 || !strstr(se, "usage"))
            fail_msg("'%s': exit %d (expected 2), stderr:\n%s", whole[i], rc, se);
        free(so);
        free(se);
    }
    /* nothing was written */
    assert_int_not_equal(access(out, F_OK), 0);
    /* --help: usage on stdout, exit 0 */
    char *so = NULL, *se = NULL;
    assert_int_equal(run_tool("--help", &so, &se), 0);
    assert_contains(so, "usage", "--help stdout");
    free(so);
    free(se);
    free(qout);
    free(out);
}

static void test_tool_unreadable_dataset_exits_1_naming_it(void **state)
{
    (void)state;
    char *missing = tu_join(g_dir, "no-such-dataset");
    char *empty = tu_join(g_dir, "empty-dataset");
    tu_mkdirs(empty);
    char *out = tu_join(g_dir, "out-missing");
    const char *paths[2] = {missing, empty};
    for (int i = 0; i < 2; i++) {
        char *qd = tu_shell_quote(paths[i]), *qo = tu_shell_quote(out);
        char args[1024];
        snprintf(args, sizeof args, "--data %s --out %s --batches 2", qd, qo);
        char *so = NULL, *se = NULL;
        int rc = run_tool(args, &so, &se);
        if (rc != 1 || !strstr(se, paths[i]))
            fail_msg("--data %s: exit %d (expected 1 and the path on stderr), stderr:\n%s",
                     paths[i], rc, se);
        /* in the tool's terms: the option, not the library's config field */
        if (!strstr(se, "--data") || strstr(se, "cfg.source") || strstr(se, "source:"))
            fail_msg("--data %s: stderr names the library's source, not --data:\n%s", paths[i], se);
        assert_null(strstr(se, "usage"));
        free(so);
        free(se);
        free(qd);
        free(qo);
    }
    free(out);
    free(empty);
    free(missing);
}

/* The tool: $COORDL_ANALYZE, else ../coordl-analyze next to this binary. */
static void find_tool(const char *argv0)
{
    const char *env = getenv("COORDL_ANALYZE");
    if (env && *env) {
        snprintf(g_tool, sizeof g_tool, "%s", env);
        return;
    }
    const char *slash = argv0 ? strrchr(argv0, '/') : NULL;
    if (slash)
        snprintf(g_tool, sizeof g_tool, "%.*s/../coordl-analyze", (int)(slash - argv0), argv0);
    else
        snprintf(g_tool, sizeof g_tool, "../coordl-analyze");
}

int main(int argc, char **argv)
{
    (void)argc;
    tu_main_init(180);
    find_tool(argv[0]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_analyze_runs_three_runs_and_fits_the_model),
        cmocka_unit_test(test_analyze_calls_the_step_on_real_batches),
        cmocka_unit_test(test_analyze_unreadable_source_fails_with_a_message),
        cmocka_unit_test(test_cold_faster_than_warm_is_within_noise),
        cmocka_unit_test(test_analyze_writes_the_figure_for_the_callers_step),
        cmocka_unit_test(test_stats_json_is_valid_and_snprintf_like),
        cmocka_unit_test(test_tool_writes_a_report),
        cmocka_unit_test(test_tool_validates_and_checks),
        cmocka_unit_test(test_tool_bad_arguments_exit_2_with_usage),
        cmocka_unit_test(test_tool_unreadable_dataset_exits_1_naming_it),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
