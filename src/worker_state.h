/* SPDX-License-Identifier: MIT */
/* worker_state.h - a worker's scratch: the types worker.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; worker.h declares
 * the functions. */
#ifndef CDL_WORKER_STATE_H
#define CDL_WORKER_STATE_H
#include "platform.h"
#include "status_state.h"
#include "lock_state.h"

/* Per-worker scratch; everything grows on demand and is reused, so the
 * steady state allocates nothing per image. */
/* A worker's JPEG rewrite budget, in its own thread's CPU time (a busy
 * machine stretches wall time, not the work): over a window of the last
 * few seconds (halved as it fills), time preparing rows, rewriting, and
 * the spliced decodes; since it started, its JPEG decodes, plain and
 * spliced (their means: what a rewrite saves a sample). worker.c keeps
 * every count: decode and jpeg report to it. */
typedef struct cdl__rewrite_budget {
    uint64_t busy_cpu, rewrite_cpu, splice_win;
    uint64_t plain_cpu, plain_n, splice_cpu, splice_n;
} cdl__rewrite_budget;

/* The last batch of llm.c's order a thread located (sampler.c's
 * cdl__item_at_hinted): the rows of one batch are consecutive windows, so
 * the batch's first window serves all its rows without the table's lock. */
typedef struct cdl__item_hint {
    uint64_t epoch, batch, batch_size, first;
    int valid;
} cdl__item_hint;

typedef struct cdl__worker cdl__worker;
struct cdl__worker {
    coordl *L;
    pthread_t thread;
    int started;
    int index;
    int pu;            /* PU this worker is bound to (planned), or -1     */
    cdl__u8 *readbuf;  size_t readcap;
    cdl__kept_file kept; /* the shard this worker read last, still open */
    cdl__item_hint item_hint; /* llm.c's order: its last batch's first window */
    cdl__u8 *pix;      size_t pixcap;   /* decoded region, RGB           */
    cdl__u8 *row4;     size_t row4cap;  /* one CMYK row                  */
    float *tmp;        size_t tmpcap;   /* resampling window + one row   */
    float *rot;        size_t rotcap;   /* whole output image (rotation)  */
    cdl__u8 *stage;    size_t stagecap; /* group: the row before it is copied in */
    int32_t *targets;  /* tokens: this row's targets in the slot; boxes:
                          its max_boxes x 5 floats (plan.c writes them)   */
    uint32_t nboxes;   /* boxes: how many plan.c wrote for the row        */
    int32_t *window_row; size_t window_rowcap;
    int32_t *xstart;   size_t xstartcap;
    float *xw;         size_t xwcap;
    float *xw8;        size_t xw8cap;   /* x weights spread for AVX2    */
    int32_t *ystart;   size_t ystartcap;
    float *yw;         size_t ywcap;
#ifndef COORDL_NO_JPEGTURBO
    struct jpeg_decompress_struct jd;
    struct cdl__jpeg_err {
        struct jpeg_error_mgr pub;
        jmp_buf jump;
        int fatal_warning;
        int guessed; /* a warning other than extraneous bytes: libjpeg
                        made up or dropped data (a rewrite refuses it) */
        char msg[JMSG_LENGTH_MAX];
    } jerr;
    struct jpeg_progress_mgr jprogress; /* enforces CDL_JPEG_MAX_SCANS */
    int jd_ready;
    /* JPEG rewrites (jpeg.c): a compress object made per rewrite, the
     * destination that writes into rw, the row index before it is filled */
    struct jpeg_compress_struct jc;
    int jc_live;
    struct cdl__jdest {
        struct jpeg_destination_mgr pub;
        cdl__u8 *buf;
        size_t cap;
        int overflow;
    } jdest;
#endif
    cdl__u8 *rw;       size_t rwcap;     /* a rewritten JPEG                */
    cdl__u8 *rwidx;    size_t rwidxcap;  /* its row index, being made       */
    cdl__u8 *splice;   size_t splicecap; /* a spliced crop JPEG             */
    /* what the last fetch found in the MinIO cache: the entry it holds a
     * reader reference on (id + 1, 0: none), and the entry's kind and room */
    uint64_t held;
    _Atomic uint32_t *reader; /* its reader record (cache.c); NULL: it reads
                                 no cached bytes in place (a miss)          */
    int fetch_kind;    /* CDL_CE_* of ce->jpeg, -1: not a MinIO entry      */
    uint32_t fetch_cap;
    cdl__rewrite_budget budget; /* the JPEG rewrite budget (worker.c)      */
    /* this row's counters, added to the totals when the row completes */
    cdl__counters row;
    const cdl__claim *claim; /* the row being prepared (its epoch, slot and
                                row), while cdl__worker_prepare runs; else NULL */
    struct cdl__ra_entry *ra_entry; /* its read-ahead entry, or NULL         */
    char err[CDL_ERRMSG_MAX];
    char item_name[CDL_ERRMSG_MAX / 2]; /* a lazily indexed item's name (its
                                        block may be dropped meanwhile)    */
};

typedef struct cdl__bytes {
    const cdl__u8 *p;
    size_t len;
} cdl__bytes;

#endif /* CDL_WORKER_STATE_H */
