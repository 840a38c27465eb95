/*
 * fuzz_common.h - what the libFuzzer harnesses share. Each harness is one
 * translation unit that #includes coordl.c (to reach its static parsers)
 * and then this file. The same harness links two ways:
 *   - with -fsanitize=fuzzer (clang, `make fuzz`): libFuzzer drives
 *     LLVMFuzzerTestOneInput;
 *   - with tests/fuzz/replay.c (any compiler, `make test`): the replay
 *     driver feeds it the seed corpus and every file under
 *     tests/fuzz/regress/<target>/.
 * An input starts with a few parameter bytes (FZ_PARAMS of them; missing
 * ones read as 0) that choose the configuration; the rest is the file.
 * A harness calls abort() when an oracle fails (a decode reported success
 * but left part of its row unwritten, two decodes of the same input
 * differ, an index breaks its own invariants): libFuzzer keeps the input.
 */
#ifndef COORDL_FUZZ_COMMON_H
#define COORDL_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    const uint8_t *p;
    size_t n;
} fz_bytes;

/* The next parameter byte (0 once the input is used up). */
static uint8_t fz_u8(fz_bytes *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static uint16_t fz_u16(fz_bytes *in)
{
    uint16_t lo = fz_u8(in);
    return (uint16_t)(lo | (uint16_t)fz_u8(in) << 8);
}

/* Takes exactly k parameter bytes (zero-padded), leaving the file. */
static void fz_params(fz_bytes *in, uint8_t *out, size_t k)
{
    for (size_t i = 0; i < k; i++)
        out[i] = fz_u8(in);
}

#define FZ_CHECK(cond, ...)                                           \
    do {                                                              \
        if (!(cond)) {                                                \
            fprintf(stderr, "fuzz oracle failed: %s: ", #cond);       \
            fprintf(stderr, __VA_ARGS__);                             \
            fprintf(stderr, "\n");                                    \
            abort();                                                  \
        }                                                             \
    } while (0)

/* A handle with no index, threads or arenas: what a harness needs to call
 * the parsers and a worker's decode path. cfg must have passed
 * cdl__validate; output geometry is derived as coordl_open derives it. */
static coordl *fz_loader(const coordl_config *cfg)
{
    coordl *L = calloc(1, sizeof *L);
    FZ_CHECK(L != NULL, "out of memory");
    L->alloc.malloc_fn = cdl__default_malloc;
    L->alloc.realloc_fn = cdl__default_realloc;
    L->alloc.free_fn = cdl__default_free;
    L->cfg = *cfg;
    L->member.me = -1;
    L->io = &cdl__posix_io;
    if (!L->cfg.max_decode_bytes)
        L->cfg.max_decode_bytes = CDL_DEFAULT_MAX_DECODE_BYTES;
    if (!L->cfg.max_audio_samples)
        L->cfg.max_audio_samples = CDL_DEFAULT_MAX_AUDIO_SAMPLES;
    cdl__output_setup(L);
    return L;
}

/* coordl_close tears down partly built handles (a failed open does). */
static void fz_loader_free(coordl *L)
{
    coordl_close(L);
}

/* A worker of L, preparing a row of L's output size (the claim a worker
 * holds while it prepares a row: the decoders read the size from it). */
static void fz_worker_init(cdl__worker *W, coordl *L)
{
    static cdl__claim claim;
    memset(&claim, 0, sizeof claim);
    claim.out_w = L->cfg.out_w;
    claim.out_h = L->cfg.out_h;
    claim.row_bytes = L->geom.row_bytes;
    memset(W, 0, sizeof *W);
    W->L = L;
    W->pu = -1;
    W->claim = &claim;
    cdl__worker_decoder_init(W);
}

static void fz_worker_free(cdl__worker *W)
{
    cdl__worker_free(W->L, W);
}

/* A quiet default config (no log spam from the bad-sample paths). */
static coordl_config fz_config(void)
{
    coordl_config c = cdl__config_default();
    c.source = "fuzz";
    c.log = NULL;
    return c;
}

#endif /* COORDL_FUZZ_COMMON_H */

/* ---- a fixture folder for the index harnesses -------------------------
 * Made once per process under $TMPDIR (or /dev/shm, or /tmp), removed at
 * exit:
 *   a.jpg, "b c.png", "t<TAB>ab.jpg", sub/d.bmp    files a list may name
 *   p (a FIFO), loop (a link to itself), null (a link to /dev/null)
 *   shards/a.bin, shards/c.bin                     valid llm.c shards
 *   shards/p (FIFO), shards/loop                   hostile neighbours
 * The harnesses write their input into it (list.txt, shards/in.bin). */
#ifndef COORDL_FUZZ_COMMON_FIXTURE
#define COORDL_FUZZ_COMMON_FIXTURE
#include <sys/stat.h>
#include <unistd.h>

static char fz_dir[512];

static void fz_write(const char *rel, const void *data, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", fz_dir, rel);
    FILE *f = fopen(path, "wb");
    FZ_CHECK(f != NULL, "cannot write %s", path);
    FZ_CHECK(n == 0 || fwrite(data, 1, n, f) == n, "short write %s", path);
    fclose(f);
}

static void fz_shard(const char *rel, int32_t magic, int32_t version, uint32_t ntok, int tb)
{
    size_t n = 1024 + (size_t)ntok * (size_t)tb;
    uint8_t *buf = calloc(1, n);
    FZ_CHECK(buf != NULL, "out of memory");
    memcpy(buf, &magic, 4);
    memcpy(buf + 4, &version, 4);
    memcpy(buf + 8, &ntok, 4);
    for (uint32_t i = 0; i < ntok; i++) {
        uint32_t v = (i * 2654435761u) % 50257u;
        memcpy(buf + 1024 + (size_t)i * (size_t)tb, &v, (size_t)tb); /* little-endian */
    }
    fz_write(rel, buf, n);
    free(buf);
}

static void fz_rmtree(const char *path)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    int r = system(cmd);
    (void)r;
}

static void fz_fixture_cleanup(void)
{
    if (fz_dir[0])
        fz_rmtree(fz_dir);
}

static const char *fz_fixture(void)
{
    if (fz_dir[0])
        return fz_dir;
    /* tmpfs when there is one: the input is rewritten every run, and a
     * disk file system may flush a file truncated and rewritten on close */
    struct stat sb;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fz_dir, sizeof fz_dir, "%s/coordl-fuzz-XXXXXX", tmp);
    FZ_CHECK(mkdtemp(fz_dir) != NULL, "mkdtemp %s", fz_dir);
    atexit(fz_fixture_cleanup);
    char path[1024];
    fz_write("a.jpg", "\xff\xd8\xff not a whole jpeg", 20);
    fz_write("b c.png", "\x89PNG\r\n\x1a\n", 8);
    fz_write("t\tab.jpg", "tab", 3);
    snprintf(path, sizeof path, "%s/sub", fz_dir);
    mkdir(path, 0700);
    fz_write("sub/d.bmp", "BM", 2);
    snprintf(path, sizeof path, "%s/p", fz_dir);
    mkfifo(path, 0600);
    snprintf(path, sizeof path, "%s/loop", fz_dir);
    FZ_CHECK(symlink("loop", path) == 0, "symlink");
    snprintf(path, sizeof path, "%s/null", fz_dir);
    FZ_CHECK(symlink("/dev/null", path) == 0, "symlink");
    snprintf(path, sizeof path, "%s/shards", fz_dir);
    mkdir(path, 0700);
    fz_shard("shards/a.bin", 20240520, 1, 64, 2);
    fz_shard("shards/c.bin", 20240801, 7, 40, 4);
    snprintf(path, sizeof path, "%s/shards/p", fz_dir);
    mkfifo(path, 0600);
    snprintf(path, sizeof path, "%s/shards/loop", fz_dir);
    FZ_CHECK(symlink("loop", path) == 0, "symlink");
    return fz_dir;
}
#endif
