/*
 * coordl_darknet.h - feed Darknet's classifier and detector training from
 * coordl.
 *
 * Header only: static inline functions, prefix coordl_dn_. It replaces
 * Darknet's load_data(args) thread (pthread_join / train = buffer /
 * load_data) with batches from coordl, in Darknet's own `data` struct:
 *
 *     coordl_dn dn;
 *     coordl_config cfg = coordl_config_default();
 *     coordl_dn_net n = coordl_dn_net_of(net, ngpus);   // Darknet's [net] section
 *     coordl_dn_config(&cfg, &n);     // size, imgs, crop, angle, aspect, hue, ...
 *     coordl_dn_write_temp_list(list, sizeof list, paths, N, labels, classes, NULL, NULL);
 *     cfg.source = list;   cfg.seed = seed;             // a fresh list file; the run's seed
 *     if (coordl_dn_open(&dn, &cfg) != COORDL_OK) { fprintf(stderr, ...); exit(1); }
 *     unlink(list);                   // read at open
 *     coordl_dn_resume(&dn, *net->seen);                // resumed weights: where they left off
 *     while (get_current_batch(net) < net->max_batches) {
 *         if (coordl_dn_load(&dn, classes, &train, COORDL_DN_SHALLOW) != COORDL_OK)
 *             break;                  // the adapter printed the file and the reason
 *         float loss = train_network(net, train);
 *         free_data(train);
 *     }
 *     coordl_dn_close(&dn);
 *
 * train_classifier.patch (beside this file) makes exactly this change to
 * pjreddie/darknet's examples/classifier.c and Makefile. For the detector,
 * coordl_dn_config_detection fills the config from the [net] section and
 * the last (yolo) layer, and coordl_dn_load fills y with Darknet's truth
 * rows (max_boxes x (x, y, w, h, class)); train_detector.patch makes that
 * change to examples/detector.c (it needs train_classifier.patch's Makefile
 * lines, which build src/coordl.c).
 *
 * Data semantics are Darknet's classifier data: X has one row per image,
 * CHW planar floats in [0, 1] (RGB), X.cols = 3 * h * w; y has one row per
 * image, one-hot over `classes`. coordl_dn_open forces what that needs:
 * layout COORDL_F32_NCHW with mean {0,0,0} and std {1,1,1} (so the values
 * are x / 255), and drop_last = 1 (train_network wants a multiple of
 * net->batch rows, so every batch is full). The stream does not stop at
 * epoch ends: coordl_dn_load steps over COORDL_END_OF_EPOCH as Darknet's
 * loader draws images forever (count epochs with coordl_dn.epoch, or with
 * *net->seen / N as Darknet does).
 *
 * Ownership (the `mode` of coordl_dn_load):
 *   COORDL_DN_SHALLOW  X.vals[i] point into coordl's batch slot (zero copy),
 *                      y.vals[i] into a one-hot buffer the adapter keeps
 *                      with it; d.shallow = 1, so Darknet's free_data(d) (or
 *                      coordl_dn_free) frees only the two row-pointer arrays.
 *                      The adapter keeps the last two batches alive: the rows
 *                      of a load stay valid until the second coordl_dn_load
 *                      call after it (successful or not), coordl_dn_release
 *                      or coordl_dn_close, so Darknet's
 *                      double-buffered pattern (train on batch k while batch
 *                      k+1 is loaded) stays valid.
 *   COORDL_DN_COPY     every row is its own malloc'd copy (as Darknet's loader
 *                      makes them); d.shallow = 0; free with Darknet's
 *                      free_data or coordl_dn_free; the data outlives the
 *                      adapter.
 *
 * Bad items. With cfg.on_bad_sample = COORDL_BAD_FAIL (coordl's default) a
 * batch holding an unreadable or corrupt image is not handed out:
 * coordl_dn_load prints "coordl_dn_load: <file>: <reason>" (to dn.report,
 * stderr unless set to NULL after open) and returns the error with *out
 * zeroed; stop there, as Darknet stops on an image it cannot load (a data
 * struct of zero rows must not reach train_network: its loss is 0/0). With
 * COORDL_BAD_SUBSTITUTE coordl fills the row from a deterministic substitute
 * item, counts it (coordl_get_stats bad_samples) and logs the file and the
 * reason through cfg.log, and coordl_dn_load returns COORDL_OK.
 *
 * Random input sizes (Darknet's `random = 1`): coordl_dn_resize(&dn, w, h)
 * wraps coordl_set(COORDL_PARAM_OUT_W / OUT_H). The new size applies from the
 * next coordl_dn_load on: batches coordl prepared ahead at the old size are
 * dropped and prepared again, and batches already loaded stay valid. Set
 * cfg.max_out_w / max_out_h to the largest size you will ask for (Darknet's
 * classifier draws up to (4 + 10) * 32 = 448): a larger size needs a bigger
 * ring, which coordl can only map while no batch is held, so it fails with
 * COORDL_ERR_INVALID while the adapter holds batches (call
 * coordl_dn_release first, which ends the validity of shallow loads).
 * coordl_dn_config sizes max_out_w/max_out_h from the network: net->w x
 * net->h, or the largest size the random resize draws when random = 1 (not
 * a fixed 448 for every network: the ring holds prefetch_batches x imgs
 * rows of that size).
 *
 * Darknet's types: this header declares stand-ins for `matrix` and `data`
 * with Darknet's layout (include/darknet.h:
 *   typedef struct matrix { int rows, cols; float **vals; } matrix;
 *   typedef struct { int w, h; matrix X; matrix y; int shallow;
 *                    int *num_boxes; box **boxes; } data;)
 * so it compiles without Darknet. Include darknet.h before this header (its
 * include guard DARKNET_API is recognised), or define COORDL_DN_HAVE_DARKNET,
 * to use Darknet's own declarations instead.
 *
 * Thread safety: as coordl's: one consumer thread per adapter.
 */
#ifndef COORDL_DARKNET_H
#define COORDL_DARKNET_H

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coordl.h"

#if !defined(COORDL_DN_HAVE_DARKNET) && !defined(DARKNET_API)
/* Darknet's layouts; `boxes` is box ** in Darknet (unused here). */
typedef struct matrix {
    int rows, cols;
    float **vals;
} matrix;
typedef struct {
    int w, h;
    matrix X;
    matrix y;
    int shallow;
    int *num_boxes;
    void **boxes;
} data;
#endif

typedef enum {
    COORDL_DN_SHALLOW = 0, /* rows point into coordl's slot; keep-alive: two loads */
    COORDL_DN_COPY = 1     /* rows are owned copies */
} coordl_dn_mode;

/* What coordl needs of a Darknet network's [net] section (parse_net_options
 * in src/parser.c), in Darknet's units. coordl_dn_net_of fills it from a
 * `network *` when darknet.h is included; a trainer without Darknet's types
 * fills it by hand. */
typedef struct coordl_dn_net {
    int w, h;               /* net->w, net->h: the input size               */
    int batch;              /* net->batch: images per subdivision (Darknet
                               divides the cfg's batch by subdivisions)     */
    int subdivisions;       /* net->subdivisions                            */
    int ngpus;              /* train_classifier's ngpus; 0 counts as 1      */
    float min_ratio, max_ratio; /* net->min_ratio, net->max_ratio: the crop
                               range over w (min_crop / w, max_crop / w)   */
    float angle;            /* net->angle, degrees                          */
    float aspect;           /* net->aspect                                  */
    float hue, saturation, exposure; /* net->hue, ->saturation, ->exposure  */
    int random;             /* net->random: train_classifier resizes the
                               input every 40 batches                       */
    int random_max;         /* the largest side that resize draws: (rand() %
                               11 + 4) * 32 = 448 in train_classifier; 0
                               means that                                   */
    int center;             /* net->center: ignored, as train_classifier
                               ignores it (its load_args never set center:
                               only Darknet's validation crops centred)    */
} coordl_dn_net;

#if defined(DARKNET_API) || defined(COORDL_DN_HAVE_DARKNET)
/* The fields of coordl_dn_net from a loaded Darknet network. */
static inline coordl_dn_net coordl_dn_net_of(const network *net, int ngpus)
{
    coordl_dn_net n;
    memset(&n, 0, sizeof n);
    n.w = net->w;
    n.h = net->h;
    n.batch = net->batch;
    n.subdivisions = net->subdivisions;
    n.ngpus = ngpus;
    n.min_ratio = net->min_ratio;
    n.max_ratio = net->max_ratio;
    n.angle = net->angle;
    n.aspect = net->aspect;
    n.hue = net->hue;
    n.saturation = net->saturation;
    n.exposure = net->exposure;
    n.random = net->random;
    n.random_max = 448;
    n.center = net->center;
    return n;
}
#endif

/* Fills the fields of *cfg that train_classifier's load_args carried, from
 * the network, with Darknet's semantics:
 *   out_w x out_h = w x h; batch_size = batch x subdivisions x ngpus
 *     (train_classifier's imgs);
 *   train_crop = COORDL_CROP_DARKNET with min_crop = (int)(min_ratio x w),
 *     max_crop = (int)(max_ratio x w) (train_classifier's args.min/max;
 *     after a resize coordl scales them as it does);
 *   rotate_deg = angle, aspect, hue, saturation, exposure as given (rand_scale
 *     semantics: 0.75 is the range 0.75..1.33), flip = 1 (Darknet flips
 *     every classifier image with p = 0.5);
 *   max_out_w = max_out_h = w x h, or with random the largest size the
 *     resize draws (random_max, 448 when 0) if larger: the ring is sized for
 *     it, no bigger;
 *   prefetch_batches = 3: the adapter holds two loads, so one batch is
 *     prepared ahead, as Darknet's loader thread keeps one.
 * Everything else (source, threads, cache_bytes, seed, on_bad_sample, ...)
 * is left as it is. center = 1 changes nothing: stock train_classifier
 * trains such a cfg with the random crop (it never passes center to its
 * loader), so the caller may say so in a log line and go on. Returns
 * COORDL_OK; COORDL_ERR_INVALID for a size or batch below 1, *cfg
 * untouched then. */
static inline coordl_status coordl_dn_config(coordl_config *cfg, const coordl_dn_net *n)
{
    if (!cfg || !n || n->w < 1 || n->h < 1 || n->batch < 1 || n->subdivisions < 1 || n->ngpus < 0)
        return COORDL_ERR_INVALID;
    cfg->out_w = (uint32_t)n->w;
    cfg->out_h = (uint32_t)n->h;
    cfg->batch_size = (uint32_t)n->batch * (uint32_t)n->subdivisions * (uint32_t)(n->ngpus ? n->ngpus : 1);
    cfg->train_crop = COORDL_CROP_DARKNET;
    cfg->min_crop = n->min_ratio > 0 ? (uint32_t)(n->min_ratio * n->w) : 0;
    cfg->max_crop = n->max_ratio > 0 ? (uint32_t)(n->max_ratio * n->w) : 0;
    cfg->rotate_deg = n->angle;
    cfg->aspect = n->aspect;
    cfg->hue = n->hue;
    cfg->saturation = n->saturation;
    cfg->exposure = n->exposure;
    cfg->flip = 1;
    int mw = n->w, mh = n->h;
    if (n->random) {
        int rmax = n->random_max > 0 ? n->random_max : 448;
        if (rmax > mw) mw = rmax;
        if (rmax > mh) mh = rmax;
    }
    cfg->max_out_w = (uint32_t)mw;
    cfg->max_out_h = (uint32_t)mh;
    cfg->prefetch_batches = 3;
    return COORDL_OK;
}

/* Fills *cfg for Darknet's detector (train_detector's load_args, for
 * load_data_detection), with Darknet's semantics:
 *   out_w x out_h = w x h; batch_size = imgs (as coordl_dn_config);
 *   labels = COORDL_LABELS_BOXES (YOLO label files: .../images/... ->
 *     .../labels/....txt), max_boxes = the last layer's max_boxes,
 *     num_classes = its classes;
 *   train_crop = COORDL_CROP_DARKNET_BOXES with `jitter` (the last layer's
 *     jitter), hue, saturation, exposure from the net, flip = 1;
 *   max_out_w = max_out_h = 608 when random (train_detector draws
 *     (rand() % 10 + 10) * 32), else w x h; prefetch_batches = 3.
 * Returns COORDL_OK; COORDL_ERR_INVALID for a size, batch, max_boxes or
 * classes below 1, *cfg untouched then. */
static inline coordl_status coordl_dn_config_detection(coordl_config *cfg, const coordl_dn_net *n, float jitter,
                                                       int max_boxes, int classes)
{
    if (max_boxes < 1 || classes < 1) return COORDL_ERR_INVALID;
    coordl_dn_net m = *n;
    m.random_max = 608;
    m.min_ratio = m.max_ratio = 0; /* no classifier crop */
    const coordl_status rc = coordl_dn_config(cfg, &m);
    if (rc != COORDL_OK) return rc;
    cfg->train_crop = COORDL_CROP_DARKNET_BOXES;
    cfg->rotate_deg = 0.0f; /* load_data_detection does not rotate */
    cfg->aspect = 0.0f;     /* its aspect is the jitter */
    cfg->jitter = jitter;
    cfg->labels = COORDL_LABELS_BOXES;
    cfg->max_boxes = (uint32_t)max_boxes;
    cfg->num_classes = classes;
    return COORDL_OK;
}

/* The adapter. Read L (for coordl_get_stats ...), epoch and index; report
 * may be changed after coordl_dn_open; the rest is internal. */
typedef struct coordl_dn {
    coordl *L;             /* the loader */
    uint64_t epoch, index; /* coordl's epoch and batch index of the last load */
    FILE *report;          /* where coordl_dn_load prints a bad batch's file
                              and reason; stderr after open, NULL: quiet */
    coordl_batch held_[2]; /* SHALLOW: the batches the last two loads point into */
    float *onehot_[2];     /* their y rows */
    size_t onehot_cap_[2]; /* floats */
    unsigned next_;        /* which held_ entry the next load reuses */
    int w_, h_;            /* the output size asked for */
    int truth_cols_;       /* boxes: max_boxes x 5 (a Darknet truth row) */
    char err_[256];        /* the adapter's own error message */
} coordl_dn;

/* The last error: the adapter's own, else coordl's. */
static inline const char *coordl_dn_errmsg(const coordl_dn *dn)
{
    if (!dn) return coordl_errmsg(NULL);
    if (dn->err_[0]) return dn->err_;
    return dn->L ? coordl_errmsg(dn->L) : coordl_errmsg(NULL);
}

static inline void coordl_dn_seterr_(coordl_dn *dn, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dn->err_, sizeof dn->err_, fmt, ap);
    va_end(ap);
}

/* Opens a loader with Darknet classifier semantics: cfg is copied and its
 * layout, mean, std and drop_last are overridden (see the top of this file);
 * prefetch_batches is raised to at least 3 (the adapter holds two). Every
 * other field is the caller's: source, batch_size (net->batch *
 * net->subdivisions * ngpus), out_w/out_h (net->w/h), max_out_w/max_out_h,
 * hue, saturation, exposure, rotate_deg (net->angle), aspect, threads,
 * cache_bytes, seed, ... Returns coordl_open's status; on failure
 * coordl_dn_errmsg(dn) says why and dn->L is NULL. */
static inline coordl_status coordl_dn_open(coordl_dn *dn, const coordl_config *cfg)
{
    memset(dn, 0, sizeof *dn);
    coordl_config c = *cfg;
    c.layout = COORDL_F32_NCHW;
    for (int i = 0; i < 3; i++) {
        c.mean[i] = 0.0f;
        c.std[i] = 1.0f;
    }
    c.drop_last = 1;
    if (c.prefetch_batches < 3) c.prefetch_batches = 3;
    coordl_status rc = coordl_open(&c, &dn->L);
    if (rc != COORDL_OK) {
        dn->L = NULL;
        coordl_dn_seterr_(dn, "coordl_open: %s", coordl_errmsg(NULL));
    }
    dn->w_ = (int)c.out_w;
    dn->h_ = (int)c.out_h;
    dn->report = stderr;
    if (rc == COORDL_OK && c.labels == COORDL_LABELS_BOXES) {
        coordl_config got;
        if (coordl_get_config(dn->L, &got) == COORDL_OK) dn->truth_cols_ = (int)got.max_boxes * 5;
    }
    return rc;
}

/* Gives back the batches the adapter holds for SHALLOW loads: the rows of
 * every earlier shallow load become invalid. */
static inline void coordl_dn_release(coordl_dn *dn)
{
    for (int i = 0; i < 2; i++) coordl_release(dn->L, &dn->held_[i]);
}

/* Loads the next batch into *out (Darknet's CLASSIFICATION_DATA: X rows of
 * CHW floats in [0, 1], y one-hot rows of `classes`); mode as above.
 * Returns COORDL_OK; COORDL_ERR_CORRUPT / COORDL_ERR_IO for a batch with a
 * bad item (with on_bad_sample = COORDL_BAD_FAIL; call again for the batch
 * after it, or open with COORDL_BAD_SUBSTITUTE); COORDL_ERR_INVALID for a
 * label outside [0, classes); COORDL_ERR_NOMEM. On an error *out is zeroed
 * (free_data on it is harmless, train_network on it is not: it divides by
 * its zero rows) and the reason, naming the file, is printed to dn->report
 * and kept for coordl_dn_errmsg. */
static inline coordl_status coordl_dn_load(coordl_dn *dn, int classes, data *out,
                                           coordl_dn_mode mode)
{
    memset(out, 0, sizeof *out);
    dn->err_[0] = '\0';
    if (!dn->L || classes < 1) {
        coordl_dn_seterr_(dn, "coordl_dn_load: %s", !dn->L ? "the adapter is not open"
                                                           : "classes must be at least 1");
        return COORDL_ERR_INVALID;
    }
    const unsigned slot = dn->next_;
    /* The load before the previous one ends here: its slot goes back to
     * coordl before the next batch is taken, so at most two are held. */
    coordl_release(dn->L, &dn->held_[slot]);

    coordl_batch b;
    coordl_status rc = coordl_next(dn->L, &b);
    if (rc == COORDL_END_OF_EPOCH) rc = coordl_next(dn->L, &b); /* Darknet's stream is endless */
    if (rc == COORDL_END_OF_EPOCH) {
        coordl_dn_seterr_(dn, "coordl_dn_load: an epoch has no full batch");
        rc = COORDL_ERR_INVALID;
    }
    if (rc != COORDL_OK) {
        if (!dn->err_[0]) /* coordl's message names the file and the reason */
            coordl_dn_seterr_(dn, "coordl_dn_load: %s (%s)", coordl_errmsg(dn->L), coordl_strerror(rc));
        if (dn->report) fprintf(dn->report, "%s\n", dn->err_);
        return rc;
    }

    const int n = (int)b.n, cols = (int)(b.c * b.h * b.w);
    /* boxes (Darknet's DETECTION_DATA): y rows are the truth rows,
     * max_boxes x (x, y, w, h, class), zero past the boxes */
    const int truth = b.boxes ? dn->truth_cols_ : 0;
    for (int i = 0; i < n && !truth; i++)
        if (b.labels[i] < 0 || b.labels[i] >= classes) {
            coordl_dn_seterr_(dn, "coordl_dn_load: item %s has label %d, not below classes = %d",
                              coordl_item_path(dn->L, b.ids[i]) ? coordl_item_path(dn->L, b.ids[i])
                                                                : "?",
                              (int)b.labels[i], classes);
            if (dn->report) fprintf(dn->report, "%s\n", dn->err_);
            coordl_release(dn->L, &b);
            return COORDL_ERR_INVALID;
        }

    data d;
    memset(&d, 0, sizeof d);
    d.w = (int)b.w;
    d.h = (int)b.h;
    d.X.rows = d.y.rows = n;
    d.X.cols = cols;
    d.y.cols = truth ? truth : classes;
    d.X.vals = (float **)calloc((size_t)n, sizeof(float *));
    d.y.vals = (float **)calloc((size_t)n, sizeof(float *));
    int ok = d.X.vals && d.y.vals;
    if (ok && mode == COORDL_DN_SHALLOW) {
        size_t need = (size_t)n * (size_t)classes;
        if (dn->onehot_cap_[slot] < need) {
            float *p = (float *)realloc(dn->onehot_[slot], need * sizeof(float));
            ok = p != NULL;
            if (ok) {
                dn->onehot_[slot] = p;
                dn->onehot_cap_[slot] = need;
            }
        }
        if (ok) {
            float *y = dn->onehot_[slot];
            memset(y, 0, need * sizeof(float));
            for (int i = 0; i < n; i++) {
                d.X.vals[i] = (float *)b.data + (size_t)i * (size_t)cols;
                if (truth) { /* Darknet reads truth rows, never writes them */
                    d.y.vals[i] = (float *)(uintptr_t)(b.boxes + (size_t)i * (size_t)truth);
                    continue;
                }
                d.y.vals[i] = y + (size_t)i * (size_t)classes;
                d.y.vals[i][b.labels[i]] = 1.0f;
            }
            d.shallow = 1;
            dn->held_[slot] = b; /* released by the second load after this one */
            dn->next_ = slot ^ 1u;
        }
    } else if (ok) {
        for (int i = 0; i < n && ok; i++) {
            d.X.vals[i] = (float *)malloc((size_t)cols * sizeof(float));
            d.y.vals[i] = (float *)calloc((size_t)d.y.cols, sizeof(float));
            ok = d.X.vals[i] && d.y.vals[i];
            if (ok) {
                memcpy(d.X.vals[i], (const float *)b.data + (size_t)i * (size_t)cols,
                       (size_t)cols * sizeof(float));
                if (truth) memcpy(d.y.vals[i], b.boxes + (size_t)i * (size_t)truth, (size_t)truth * sizeof(float));
                else d.y.vals[i][b.labels[i]] = 1.0f;
            }
        }
        d.shallow = 0;
        coordl_release(dn->L, &b);
    }
    if (!ok) {
        if (mode == COORDL_DN_COPY && d.X.vals && d.y.vals)
            for (int i = 0; i < n; i++) {
                free(d.X.vals[i]);
                free(d.y.vals[i]);
            }
        free(d.X.vals);
        free(d.y.vals);
        coordl_release(dn->L, &b);
        coordl_dn_seterr_(dn, "coordl_dn_load: out of memory for %d rows", n);
        if (dn->report) fprintf(dn->report, "%s\n", dn->err_);
        return COORDL_ERR_NOMEM;
    }
    dn->epoch = b.epoch;
    dn->index = b.index;
    *out = d;
    return COORDL_OK;
}

/* Frees what coordl_dn_load allocated in d, as Darknet's free_data does:
 * the row arrays, and the rows too unless d->shallow. Zeroes *d. */
static inline void coordl_dn_free(data *d)
{
    if (!d->shallow) {
        for (int i = 0; d->X.vals && i < d->X.rows; i++) free(d->X.vals[i]);
        for (int i = 0; d->y.vals && i < d->y.rows; i++) free(d->y.vals[i]);
    }
    free(d->X.vals);
    free(d->y.vals);
    memset(d, 0, sizeof *d);
}

/* Darknet's random resize: the next load (not the ones before it) comes at
 * w x h. Both or neither change. Returns coordl_set's status. */
static inline coordl_status coordl_dn_resize(coordl_dn *dn, int w, int h)
{
    dn->err_[0] = '\0';
    if (!dn->L) return COORDL_ERR_INVALID;
    coordl_status rc = coordl_set(dn->L, COORDL_PARAM_OUT_W, w);
    if (rc != COORDL_OK) return rc;
    rc = coordl_set(dn->L, COORDL_PARAM_OUT_H, h);
    if (rc != COORDL_OK) {
        coordl_dn_seterr_(dn, "coordl_dn_resize: %s", coordl_errmsg(dn->L));
        coordl_set(dn->L, COORDL_PARAM_OUT_W, dn->w_); /* back to the old width */
        return rc;
    }
    dn->w_ = w;
    dn->h_ = h;
    return COORDL_OK;
}

/* Writes a coordl list file ("path<TAB>label" lines) from Darknet's
 * train.list paths and labels.list names, labelling each path as Darknet's
 * fill_truth does: label j when labels[j] occurs in the path. coordl reads
 * list paths relative to the list file's folder (absolute ones as they
 * are), so write the list into the folder Darknet's paths are relative to,
 * or give absolute paths; coordl_dn_write_temp_list does the latter into a
 * fresh temporary file (what train_classifier.patch uses). Paths with no matching label are left out, paths with
 * several take the first; both are counted in *unlabelled / *ambiguous
 * (either may be NULL). Returns the number of lines written, or -1 (with
 * errno) when the file cannot be written. */
static inline long coordl_dn_write_list(const char *out, char **paths, int n, char **labels,
                                        int classes, int *unlabelled, int *ambiguous)
{
    FILE *f = fopen(out, "w");
    if (!f) return -1;
    long lines = 0;
    int none = 0, many = 0;
    for (int i = 0; i < n; i++) {
        if (!labels) { /* the detector's list: bare paths, boxes from label files */
            if (fprintf(f, "%s\n", paths[i]) < 0) break;
            lines++;
            continue;
        }
        int label = -1, count = 0;
        for (int j = 0; j < classes; j++)
            if (strstr(paths[i], labels[j])) {
                if (label < 0) label = j;
                count++;
            }
        none += count == 0;
        many += count > 1;
        if (label < 0) continue;
        if (fprintf(f, "%s\t%d\n", paths[i], label) < 0) break;
        lines++;
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return -1;
    if (unlabelled) *unlabelled = none;
    if (ambiguous) *ambiguous = many;
    return lines;
}

/* Resuming from Darknet's weights: *net->seen (images trained on, saved
 * in the weights file) as a stream position. The next load is the batch
 * an unbroken run would load after images_seen / batch_size loads:
 * coordl_seek to (k / bpe, k % bpe) with k = images_seen / batch_size and
 * bpe = coordl_batches_per_epoch. With the same seed the batches are that
 * run's; call it right after coordl_dn_open. Returns coordl_seek's
 * status. */
static inline coordl_status coordl_dn_resume(coordl_dn *dn, uint64_t images_seen)
{
    dn->err_[0] = '\0';
    if (!dn->L) return COORDL_ERR_INVALID;
    coordl_config c;
    coordl_status rc = coordl_get_config(dn->L, &c);
    const uint64_t bpe = coordl_batches_per_epoch(dn->L);
    if (rc != COORDL_OK || bpe == 0 || c.batch_size == 0) {
        coordl_dn_seterr_(dn, "coordl_dn_resume: the loader has no full batch");
        return COORDL_ERR_INVALID;
    }
    const uint64_t k = images_seen / c.batch_size;
    rc = coordl_seek(dn->L, k / bpe, k % bpe);
    if (rc != COORDL_OK) coordl_dn_seterr_(dn, "coordl_dn_resume: %s", coordl_errmsg(dn->L));
    else {
        dn->epoch = k / bpe;
        dn->index = k % bpe;
    }
    return rc;
}

/* coordl_dn_write_list into a file of its own: a fresh name made by
 * mkstemp in $TMPDIR (else /tmp), so runs sharing a working directory do
 * not overwrite each other's list and a read-only working directory does
 * not matter. Darknet's relative paths are made absolute against the
 * working directory (coordl reads list paths relative to the list's
 * folder). The name is written to path (cap bytes). coordl reads the list
 * at open only: unlink(path) once coordl_dn_open has returned. labels =
 * NULL writes the bare paths (the detector: each image's boxes come from
 * its label file). Returns the number of lines written, or -1 (with errno;
 * nothing is left behind). */
static inline long coordl_dn_write_temp_list(char *path, size_t cap, char **paths, int n, char **labels,
                                             int classes, int *unlabelled, int *ambiguous)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !dir[0]) dir = "/tmp";
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return -1;
    if (snprintf(path, cap, "%s/coordl_train.XXXXXX", dir) >= (int)cap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(path);
        errno = e;
        return -1;
    }
    long lines = 0;
    int none = 0, many = 0, bad = 0;
    for (int i = 0; i < n && !bad; i++) {
        const char *pre = paths[i][0] == '/' ? "" : cwd, *sep = paths[i][0] == '/' ? "" : "/";
        if (!labels) { /* the detector's list: bare paths, boxes from label files */
            if (fprintf(f, "%s%s%s\n", pre, sep, paths[i]) < 0) bad = 1;
            lines++;
            continue;
        }
        int label = -1, count = 0;
        for (int j = 0; j < classes; j++)
            if (strstr(paths[i], labels[j])) {
                if (label < 0) label = j;
                count++;
            }
        none += count == 0;
        many += count > 1;
        if (label < 0) continue;
        if (fprintf(f, "%s%s%s\t%d\n", pre, sep, paths[i], label) < 0) bad = 1;
        lines++;
    }
    bad |= ferror(f);
    int e = errno;
    if (fclose(f) != 0 || bad) {
        unlink(path);
        errno = e ? e : EIO;
        return -1;
    }
    if (unlabelled) *unlabelled = none;
    if (ambiguous) *ambiguous = many;
    return lines;
}

/* Releases the held batches, closes the loader, frees the adapter's
 * buffers. Shallow loads become invalid; copies stay. */
static inline void coordl_dn_close(coordl_dn *dn)
{
    if (dn->L) {
        coordl_dn_release(dn);
        coordl_close(dn->L);
    }
    free(dn->onehot_[0]);
    free(dn->onehot_[1]);
    memset(dn, 0, sizeof *dn);
}

#endif /* COORDL_DARKNET_H */
