/*
 * fuzz_tar.c - the WebDataset tar-shard index (ustar, GNU long names, pax
 * path/size, base-256 sizes, .cls labels, class folders) and the reads of
 * its items, all through a coordl_io reader that serves the input from
 * memory (no file system per execution). Input: 8 parameter bytes, then
 * the shard.
 *
 * Sources (the reader knows "fz:/in.tar", "fz:/a.tar", "fz:/b.tar",
 * "fz:/shards.txt"):
 *   one shard     fz:/in.tar = the input
 *   split         a list of fz:/a.tar (the input's first k blocks, then
 *                 the two end-of-archive blocks) and fz:/b.tar (the rest)
 *   twice         a list naming fz:/in.tar twice
 * Reader behaviours: plain; short reads (coordl must loop); a size at
 * open 512 bytes larger than the data (reads end early); every read_at
 * after the first k fails with -EIO.
 *
 * Oracles, index (cdl__index_source on a bare handle, as coordl_open
 * indexes):
 *   - a failure is CORRUPT, INVALID, NOMEM, or IO only when the reader
 *     failed; its message names a shard or the list, and a CORRUPT one
 *     the offset;
 *   - on success every item's (shard, offset, size) lies inside its
 *     shard (at the size the reader gave), past a header, block-aligned;
 *     every label is in 0..num_classes-1, and with .cls labels
 *     num_classes is the largest + 1; every path is "<shard>:<member>";
 *   - every item reads through the worker's read path (cdl__read_file)
 *     and its bytes are the shard's bytes at that offset (an I/O error
 *     only where the reader lied or failed; CORRUPT only for an empty
 *     member or one over max_item_bytes);
 *   - every file the reader opened was closed exactly once.
 * Oracles, public API (parameter bit): coordl_open with the same reader
 * agrees with the index (status, items, paths, labels, classes);
 * coordl_sample_transform of every item and one epoch of coordl_next
 * return OK or a clean bad-item status (coordl_next's message names the
 * item; coordl_sample_transform, callable from any thread, has no
 * message), never a crash or a hang; batch rows carry the index's labels.
 *
 * Parameters:
 *   0  bits 0-1 source (0, 3 one shard; 1 split; 2 twice); bits 2-3
 *      pipeline (0, 3 train; 1 eval; 2 audio); bit 4 public API;
 *      bits 5-6 reader (0 plain; 1 short reads; 2 size + 512; 3 -EIO)
 *   1  split point: block b % (blocks + 1)
 *   2  bit 7: max_item_bytes = 1 + (b & 127) x 37; else the default
 *   3  -EIO after b read_at calls
 *   4  batch_size 1 + b % 4; 5 epoch; 6 seed; 7 unused
 */
#include "../../coordl.c"
#include "fuzz_common.h"

#define FZ_PARAMS 8
#define FZ_MAX_READ_ITEMS 256 /* items read per execution (index oracle) */
#define FZ_MAX_API_ITEMS 32   /* coordl_sample_transform calls per execution */

typedef struct {
    const char *name;
    const uint8_t *p;
    size_t n;
} fz_memfile;

typedef struct {
    fz_memfile files[4];
    int nfiles;
    int mode;             /* 0 plain, 1 short reads, 2 size + 512, 3 -EIO */
    atomic_long reads_left; /* mode 3 */
    atomic_int open_now;
    atomic_int failed;    /* the reader returned an error at least once */
} fz_mem;

static int fz_mem_open(void *user, const char *path, void **file, uint64_t *size)
{
    fz_mem *m = user;
    for (int i = 0; i < m->nfiles; i++) {
        if (strcmp(path, m->files[i].name) == 0) {
            *file = &m->files[i];
            *size = m->files[i].n + (m->mode == 2 ? 512u : 0u);
            atomic_fetch_add(&m->open_now, 1);
            return 0;
        }
    }
    return -ENOENT;
}

static int64_t fz_mem_read_at(void *user, void *file, void *buf, uint64_t len, uint64_t offset)
{
    fz_mem *m = user;
    const fz_memfile *f = file;
    if (m->mode == 3 && atomic_fetch_sub(&m->reads_left, 1) <= 0) {
        atomic_store(&m->failed, 1);
        return -EIO;
    }
    if (offset >= f->n)
        return 0;
    uint64_t k = f->n - offset < len ? f->n - offset : len;
    if (m->mode == 1) { /* a short read of 1..61 bytes */
        const uint64_t cap = 1 + (offset * 131u + len) % 61u;
        if (k > cap)
            k = cap;
    }
    memcpy(buf, f->p + offset, (size_t)k);
    return (int64_t)k;
}

static void fz_mem_close(void *user, void *file)
{
    fz_mem *m = user;
    (void)file;
    atomic_fetch_sub(&m->open_now, 1);
}

/* The bytes of `path` as the reader serves them (NULL: not one of ours). */
static const fz_memfile *fz_mem_find(const fz_mem *m, const char *path, size_t len)
{
    for (int i = 0; i < m->nfiles; i++)
        if (strlen(m->files[i].name) == len && memcmp(path, m->files[i].name, len) == 0)
            return &m->files[i];
    return NULL;
}

/* Does msg name one of the reader's files? */
static int fz_names_a_file(const fz_mem *m, const char *msg)
{
    for (int i = 0; i < m->nfiles; i++)
        if (strstr(msg, m->files[i].name))
            return 1;
    return 0;
}

static void fz_mem_reset(fz_mem *m, long reads)
{
    atomic_store(&m->reads_left, reads);
    atomic_store(&m->failed, 0);
}

static const char *fz_status(coordl_status s) { return coordl_strerror(s); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_bytes in = {data, size};
    uint8_t b[FZ_PARAMS];
    fz_params(&in, b, FZ_PARAMS);

    static const char two[] = "in.tar\nin.tar\n", split[] = "a.tar\r\nb.tar\n";
    static const uint8_t zeros[1024];
    fz_mem m;
    memset(&m, 0, sizeof m);
    m.mode = b[0] >> 5 & 3;
    uint8_t *first = NULL;
    const char *source = "fz:/in.tar";
    switch (b[0] & 3) {
    case 1: { /* split at a block boundary; the first part gets its end blocks */
        const size_t blocks = in.n / 512, k = (size_t)b[1] % (blocks + 1);
        first = malloc(k * 512 + sizeof zeros);
        FZ_CHECK(first != NULL, "out of memory");
        memcpy(first, in.p, k * 512);
        memcpy(first + k * 512, zeros, sizeof zeros);
        m.files[m.nfiles++] = (fz_memfile){"fz:/a.tar", first, k * 512 + sizeof zeros};
        m.files[m.nfiles++] = (fz_memfile){"fz:/b.tar", in.p + k * 512, in.n - k * 512};
        m.files[m.nfiles++] = (fz_memfile){"fz:/shards.txt", (const uint8_t *)split, sizeof split - 1};
        source = "fz:/shards.txt";
        break;
    }
    case 2:
        m.files[m.nfiles++] = (fz_memfile){"fz:/in.tar", in.p, in.n};
        m.files[m.nfiles++] = (fz_memfile){"fz:/shards.txt", (const uint8_t *)two, sizeof two - 1};
        source = "fz:/shards.txt";
        break;
    default:
        m.files[m.nfiles++] = (fz_memfile){"fz:/in.tar", in.p, in.n};
        break;
    }
    const coordl_io table = {&m, fz_mem_open, fz_mem_read_at, fz_mem_close};

    coordl_config cfg = fz_config();
    cfg.source = source;
    cfg.io = &table;
    const int pipe = b[0] >> 2 & 3;
    cfg.pipeline = pipe == 1 ? COORDL_PIPE_EVAL : pipe == 2 ? COORDL_PIPE_AUDIO : COORDL_PIPE_TRAIN;
    if (cfg.pipeline == COORDL_PIPE_AUDIO)
        cfg.audio_samples = 64;
    cfg.out_w = cfg.out_h = 8;
    cfg.batch_size = 1u + b[4] % 4u;
    cfg.seed = b[6];
    if (b[2] & 128)
        cfg.max_item_bytes = 1u + (uint64_t)(b[2] & 127) * 37u;
    FZ_CHECK(cdl__validate(&cfg) == COORDL_OK, "config: %s", cdl__open_errmsg);

    /* ---- the index, as coordl_open builds it ---------------------------- */
    fz_mem_reset(&m, b[3]);
    coordl *L = fz_loader(&cfg);
    L->io = &table;
    cdl__open_errmsg[0] = '\0';
    const coordl_status rc = cdl__index_source(L);
    FZ_CHECK(atomic_load(&m.open_now) == 0, "%d file(s) left open by the index", atomic_load(&m.open_now));
    const int lied = m.mode == 2, failed = atomic_load(&m.failed);
    static int verbose = -1; /* FZ_VERBOSE=1: what each input indexed to */
    if (verbose < 0)
        verbose = getenv("FZ_VERBOSE") != NULL;
    if (verbose)
        fprintf(stderr, "fuzz_tar: %s: %s, %llu items, %u classes%s%s\n", source, fz_status(rc),
                rc == COORDL_OK ? (unsigned long long)L->index.num_items : 0ull, rc == COORDL_OK ? L->index.num_classes : 0u,
                rc == COORDL_OK ? "" : ": ", rc == COORDL_OK ? "" : cdl__open_errmsg);
    if (rc != COORDL_OK) {
        FZ_CHECK(rc == COORDL_ERR_CORRUPT || rc == COORDL_ERR_INVALID || rc == COORDL_ERR_NOMEM ||
                 (rc == COORDL_ERR_IO && failed), "status %d (%s): %s", (int)rc, fz_status(rc), cdl__open_errmsg);
        FZ_CHECK(rc == COORDL_ERR_NOMEM || fz_names_a_file(&m, cdl__open_errmsg),
                 "message \"%s\" names no shard", cdl__open_errmsg);
        FZ_CHECK(rc != COORDL_ERR_CORRUPT || strstr(cdl__open_errmsg, "offset ") != NULL,
                 "message \"%s\" has no offset", cdl__open_errmsg);
    } else {
        FZ_CHECK(L->index.num_items > 0 && L->index.tar_refs != NULL && L->index.ntar_shards > 0, "num_items %llu",
                 (unsigned long long)L->index.num_items);
        int32_t max_label = -1;
        uint64_t bytes = 0;
        for (uint64_t i = 0; i < L->index.num_items; i++) {
            const cdl__tar_ref *it = &L->index.tar_refs[i], *ti = it;
            FZ_CHECK(ti->shard < L->index.ntar_shards, "item %llu: shard %u of %zu", (unsigned long long)i, ti->shard,
                     L->index.ntar_shards);
            const char *shard = L->index.strings + L->index.tar_shards[ti->shard];
            const fz_memfile *f = fz_mem_find(&m, shard, strlen(shard));
            FZ_CHECK(f != NULL, "item %llu: shard %s is not one the reader serves", (unsigned long long)i, shard);
            const uint64_t known = f->n + (lied ? 512u : 0u); /* the size the reader gave */
            FZ_CHECK(ti->offset >= 512 && ti->offset % 512 == 0 && ti->offset <= known &&
                     it->bytes <= known - ti->offset, "item %llu: [%llu, +%llu) is not inside %s (%llu bytes)",
                     (unsigned long long)i, (unsigned long long)ti->offset, (unsigned long long)it->bytes, shard,
                     (unsigned long long)known);
            const char *path = coordl_item_path(L, i);
            FZ_CHECK(path != NULL && path == L->index.names + L->index.name_offs[i], "item %llu: path", (unsigned long long)i);
            const size_t slen = strlen(shard);
            FZ_CHECK(strncmp(path, shard, slen) == 0 && path[slen] == ':' && path[slen + 1] != '\0' &&
                     path[slen + 1] != '.', "item %llu: path \"%s\" is not \"%s:<member>\"", (unsigned long long)i,
                     path, shard);
            FZ_CHECK(coordl_item_label(L, i) == it->label, "item %llu: label", (unsigned long long)i);
            FZ_CHECK(it->label >= 0 && (uint32_t)it->label < L->index.num_classes, "item %llu: label %d of %u classes",
                     (unsigned long long)i, it->label, L->index.num_classes);
            if (it->label > max_label)
                max_label = it->label;
            bytes += it->bytes;
        }
        FZ_CHECK(L->index.num_classes >= (uint32_t)max_label + 1, "num_classes %u, largest label %d", L->index.num_classes,
                 max_label);
        FZ_CHECK(bytes == L->index.dataset_bytes, "dataset_bytes %llu, items add up to %llu",
                 (unsigned long long)L->index.dataset_bytes, (unsigned long long)bytes);
        /* the documented order: with .cls labels shard order, then member
         * order; with class folders (label, member path, shard, offset),
         * labels numbering the class folders in name order */
        int in_shard_order = 1, in_folder_order = 1;
        for (uint64_t i = 1; i < L->index.num_items; i++) {
            const cdl__tar_ref *p = &L->index.tar_refs[i - 1], *q = &L->index.tar_refs[i];
            if (!(p->shard < q->shard || (p->shard == q->shard && p->offset < q->offset)))
                in_shard_order = 0;
            const cdl__tar_ref *x = p, *y = q;
            const char *mx = coordl_item_path(L, i - 1) + strlen(L->index.strings + L->index.tar_shards[p->shard]) + 1;
            const char *my = coordl_item_path(L, i) + strlen(L->index.strings + L->index.tar_shards[q->shard]) + 1;
            const char *sx = strchr(mx, '/'), *sy = strchr(my, '/');
            const int c = strcmp(mx, my);
            if (!sx || !sy || x->label > y->label ||
                (x->label == y->label && (c > 0 || (c == 0 && !(p->shard < q->shard ||
                                                                (p->shard == q->shard && p->offset < q->offset))))))
                in_folder_order = 0;
            else if ((x->label == y->label) != (sx - mx == sy - my && memcmp(mx, my, (size_t)(sx - mx)) == 0))
                in_folder_order = 0; /* one label, one class folder */
            else if (x->label < y->label) { /* class folders in name order */
                const size_t lx = (size_t)(sx - mx), ly = (size_t)(sy - my);
                const int cc = memcmp(mx, my, lx < ly ? lx : ly);
                if (cc > 0 || (cc == 0 && lx > ly))
                    in_folder_order = 0;
            }
        }
        FZ_CHECK(in_shard_order || in_folder_order, "the items are in neither documented order");
        FZ_CHECK(coordl_num_items(L) == L->index.num_items && coordl_item_path(L, L->index.num_items) == NULL &&
                 coordl_item_label(L, L->index.num_items) == -1, "out-of-range getters");

        /* every item through the worker's read path */
        cdl__worker W;
        fz_worker_init(&W, L);
        for (uint64_t i = 0; i < L->index.num_items && i < FZ_MAX_READ_ITEMS; i++) {
            const cdl__tar_ref *it = &L->index.tar_refs[i], *ti = it;
            const char *shard = L->index.strings + L->index.tar_shards[ti->shard];
            const fz_memfile *f = fz_mem_find(&m, shard, strlen(shard));
            cdl__bytes got = {NULL, 0};
            W.err[0] = '\0';
            const coordl_status r = cdl__read_file(&W, i, &got);
            FZ_CHECK(atomic_load(&m.open_now) == 0, "item %llu left its shard open", (unsigned long long)i);
            const int past_data = ti->offset + it->bytes > f->n;
            if (r == COORDL_OK) {
                FZ_CHECK(!past_data && got.len == it->bytes && memcmp(got.p, f->p + ti->offset, got.len) == 0,
                         "item %llu: the bytes read are not the shard's bytes at %llu", (unsigned long long)i,
                         (unsigned long long)ti->offset);
            } else if (r == COORDL_ERR_CORRUPT) {
                FZ_CHECK(it->bytes == 0 || it->bytes > cfg.max_item_bytes, "item %llu: CORRUPT: %s",
                         (unsigned long long)i, W.err);
            } else {
                FZ_CHECK(r == COORDL_ERR_IO && (past_data || atomic_load(&m.failed)), "item %llu: status %d: %s",
                         (unsigned long long)i, (int)r, W.err);
            }
            FZ_CHECK(r == COORDL_OK || strstr(W.err, coordl_item_path(L, i)) != NULL,
                     "item %llu: message \"%s\" does not name the member", (unsigned long long)i, W.err);
        }
        fz_worker_free(&W);
    }

    /* ---- the public API over the same reader ---------------------------- */
    if (b[0] & 16) {
        coordl_config c = cfg;
        c.threads = 1;
        c.prefetch_batches = 1;
        c.cache_bytes = 1u << 16;
        fz_mem_reset(&m, b[3]);
        coordl *P = NULL;
        const coordl_status orc = coordl_open(&c, &P);
        FZ_CHECK(orc == rc, "coordl_open = %d (%s), the index gave %d: %s", (int)orc, fz_status(orc), (int)rc,
                 coordl_errmsg(NULL));
        if (orc == COORDL_OK) {
            FZ_CHECK(coordl_num_items(P) == L->index.num_items && coordl_num_classes(P) == L->index.num_classes,
                     "items %llu classes %u, the index: %llu, %u", (unsigned long long)coordl_num_items(P),
                     coordl_num_classes(P), (unsigned long long)L->index.num_items, L->index.num_classes);
            for (uint64_t i = 0; i < L->index.num_items; i++)
                FZ_CHECK(strcmp(coordl_item_path(P, i), coordl_item_path(L, i)) == 0 &&
                         coordl_item_label(P, i) == coordl_item_label(L, i), "item %llu differs",
                         (unsigned long long)i);
            if (cfg.pipeline != COORDL_PIPE_AUDIO) {
                for (uint64_t i = 0; i < L->index.num_items && i < FZ_MAX_API_ITEMS; i++) {
                    coordl_transform t;
                    const coordl_status r = coordl_sample_transform(P, b[5], i, &t);
                    FZ_CHECK(r == COORDL_OK || r == COORDL_ERR_CORRUPT || r == COORDL_ERR_UNSUPPORTED ||
                             r == COORDL_ERR_NOMEM || r == COORDL_ERR_IO, "sample_transform %llu: %d: %s",
                             (unsigned long long)i, (int)r, coordl_errmsg(P));
                }
            }
            /* one epoch (FAIL policy: a bad item ends the batch with its status) */
            for (int calls = 0; calls < 64; calls++) {
                coordl_batch bt;
                const coordl_status r = coordl_next(P, &bt);
                if (r == COORDL_END_OF_EPOCH)
                    break;
                if (r == COORDL_OK) {
                    FZ_CHECK(bt.n >= 1 && bt.n <= cfg.batch_size, "batch of %u rows", bt.n);
                    for (uint32_t k = 0; k < bt.n; k++)
                        FZ_CHECK(bt.ids[k] < L->index.num_items && bt.labels[k] == L->index.tar_refs[bt.ids[k]].label,
                                 "row %u: id %llu label %d", k, (unsigned long long)bt.ids[k], bt.labels[k]);
                    coordl_release(P, &bt);
                    continue;
                }
                FZ_CHECK(r == COORDL_ERR_CORRUPT || r == COORDL_ERR_UNSUPPORTED || r == COORDL_ERR_NOMEM ||
                         r == COORDL_ERR_IO, "coordl_next: %d: %s", (int)r, coordl_errmsg(P));
                FZ_CHECK(strstr(coordl_errmsg(P), "fz:/") != NULL, "coordl_next: message \"%s\" names no item",
                         coordl_errmsg(P));
            }
            coordl_close(P);
        } else {
            FZ_CHECK(P == NULL, "a failed open returned a handle");
        }
        FZ_CHECK(atomic_load(&m.open_now) == 0, "%d file(s) left open by the loader", atomic_load(&m.open_now));
    }
    fz_loader_free(L);
    free(first);
    return 0;
}
