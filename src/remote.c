/* SPDX-License-Identifier: MIT */
/*
 * remote.c - http(s):// and s3:// reads: objects, their bytes and listings,
 * over the event loop of http.c.
 *
 * Owns:  what requests ask for: objects opened (entries made and kept in
 *        the loop's table), open files and their read-ahead windows, the
 *        index scan's stream of chunks, ListObjectsV2 listings, and the
 *        asynchronous reads of the read-ahead
 * Lock:  the loop's mutex (R->mu, http.c) for the scan stream and the
 *        table; callers of cdl__remote_read wait on their own condition
 *        variable under it; chunk completions run on the event-loop thread
 * Calls: status, s3, http (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */
#include "platform.h"
#include "remote_state.h"
#include "remote.h"
#include "status.h"
#include "s3.h"
#include "s3_state.h"
#include "http.h"
#include "http_state.h"
#include "handle.h"

/* ---- remote sources ---------------------------------------------------------
 * The built-in reader reads a path that is an http://, https:// (or s3://)
 * URL here; io.c dispatches (docs/remote.md). One thread per handle drives
 * libcurl's multi interface with curl_multi_socket_action over epoll:
 * hundreds of ranged GETs in flight on one thread, over a pool of HTTP/1.1
 * keep-alive connections (cleartext HTTP/2 breaks in curl 7.88 after a
 * connection's first request; curl_multi_perform cost 112 against 62 us a
 * request here at 64 in flight). Every request asks for exactly the bytes
 * it wants (`Range: bytes=a-b`) into the caller's buffer; an object's size
 * and ETag come from its first ranged GET (no HEAD), and later requests
 * send `If-Match` with that ETag and check the Content-Range total, so an
 * object that changed since it was indexed is an error naming it, never
 * other bytes. Faults: 5xx, 429 and dropped or cut-short connections are
 * retried with a doubling backoff, CDL_RM_RETRIES times at most; 404, 403,
 * other 4xx, a name that does not resolve and a request with no complete
 * answer within io_timeout_ms are errors at once. Nothing waits unbounded:
 * each attempt is bounded by io_timeout_ms and the attempts are counted. */
#define CDL_RM_SCAN_MIN (64u << 10)  /* a sequential reader's first window      */
#define CDL_RM_SCAN_MAX (8u << 20)   /* ... doubling while read in order, to    */
#define CDL_RM_SMALL_READ (64u << 10) /* reads served from the window at most   */
#define CDL_RM_PROBE 4096u           /* bytes of an object's first ranged GET   */

CDL_PRIVATE int cdl__remote_is_url(const char *p) {
    return strncasecmp(p, "http://", 7) == 0 || strncasecmp(p, "https://", 8) == 0 || strncasecmp(p, "s3://", 5) == 0;
}

#ifndef COORDL_NO_REMOTE

/* ---- the index scan's stream (cdl__remote_scan_begin) ----
 * coordl_open indexes the shards one after another (tar.c parses each in
 * order), and each shard's headers come in windows that double from 64
 * KiB: read on demand, that is a chain of about 8 ranged GETs per shard of
 * 5 MB, one after another across the shards; at 20 ms a request the open
 * of 8 shards took 2 s (and 12 s before the windows doubled). So while the
 * shards are scanned, their bytes are asked for ahead of the parser as one
 * stream of CDL_RM_CHUNK ranged GETs over the shards in scan order, at most
 * CDL_RM_SCAN_BUDGET bytes issued and not yet parsed past: every shard's
 * first chunk (its size and ETag) at once, then the rest of each shard in
 * order, all on the event loop. The parser finds its bytes there or waits
 * for the one chunk it needs; a byte the stream does not hold (a chunk not
 * asked for yet, one that failed, a read behind the parser) is read as
 * before, by the window below. A shard whose scan jumps a whole chunk
 * (members larger than a chunk: its data is not wanted at open) is not
 * streamed further: its headers are read by windows. */
#define CDL_RM_CHUNK (1u << 20)
#define CDL_RM_SCAN_BUDGET (64u << 20)

enum { CDL_CH_NONE, CDL_CH_FLIGHT, CDL_CH_DONE, CDL_CH_DROPPED };

typedef struct cdl__rchunk {
    cdl__u8 *buf; /* CDL_RM_CHUNK bytes while in flight or done            */
    uint64_t got;
    int state;    /* CDL_CH_*; DROPPED: parsed past (or failed): a transfer
                     still in flight frees buf when it ends                */
    int in_flight;
    int touched;  /* the parser read from it                               */
} cdl__rchunk;

typedef struct cdl__rscan_obj {
    char *url, *target;   /* target: an s3:// name's HTTP(S) URL, or NULL   */
    int s3;
    int probed;           /* its first chunk was asked for                  */
    int failed;           /* not streamed: its open reads (and reports) it  */
    int stop;             /* a whole chunk was jumped: no more of it        */
    char *err;            /* the first answer's error (its open returns it) */
    cdl__rentry *e;       /* from its first chunk's answer                  */
    cdl__u8 *first;       /* the first chunk's bytes until the size is known */
    cdl__rchunk *chunks;  /* ceil(size / CDL_RM_CHUNK), once the size is known */
    size_t nchunks, next, released; /* next to ask for; first not released */
} cdl__rscan_obj;

typedef struct cdl__rscan {
    cdl__rscan_obj *objs;
    size_t n, cur;       /* the shard being parsed: those before are done */
    uint64_t held;       /* chunk bytes asked for and not released        */
    int ending;
    pthread_cond_t cv;   /* with R->mu: a chunk or a first answer arrived */
} cdl__rscan;

/* An open file: the object, and for a sequential reader (a tar scan) the
 * window it reads ahead into, and the scan stream's shard. */
typedef struct cdl__rfile {
    cdl__rentry *e;
    cdl__rscan_obj *scan;
    int sequential;
    cdl__u8 *win;
    uint64_t win_off;
    size_t win_len, win_cap, next_win;
} cdl__rfile;

/* Logs once per handle where s3:// requests go and whose credentials
 * sign them: variable names only. */
static void cdl__rm_s3_log(const coordl *L, cdl__rloop *R) {
    pthread_mutex_lock(&R->mu);
    const int first = !R->s3_logged;
    R->s3_logged = 1;
    pthread_mutex_unlock(&R->mu);
    if (first)
        cdl__log(L, COORDL_LOG_INFO, "s3: %s; credentials: %s",
                 R->s3.endpoint ? R->s3.endpoint : "AWS (virtual-host style)", R->s3.creds);
}

static cdl__rentry *cdl__rm_entry_make(const coordl *L, const char *url, const char *target, int s3, uint64_t size,
                                       const char *etag, const struct curl_slist *base) {
    const size_t n = strlen(url), tn = target ? strlen(target) + 1 : 0;
    cdl__rentry *e = cdl__calloc(L, 1, sizeof *e + n + 1 + tn);
    if (!e) return NULL;
    memcpy(e->url, url, n + 1);
    e->target = e->url;
    if (target) {
        memcpy(e->url + n + 1, target, tn);
        e->target = e->url + n + 1;
    }
    e->s3 = s3;
    e->size = size;
    int ok = 1;
    for (const struct curl_slist *h = base; h && ok; h = h->next) {
        struct curl_slist *l = curl_slist_append(e->headers, h->data);
        if (l) e->headers = l;
        else ok = 0;
    }
    if (etag[0] && ok) {
        char h[160];
        snprintf(h, sizeof h, "If-Match: %s", etag);
        struct curl_slist *l = curl_slist_append(e->headers, h);
        if (l) e->headers = l;
        else ok = 0;
    }
    if (!ok) {
        curl_slist_free_all(e->headers);
        cdl__free(L, e);
        return NULL;
    }
    return e;
}

/* Puts e in the table, or frees it for the one another thread put there
 * first. Under R->mu; NULL when memory runs out. */
static cdl__rentry *cdl__rm_entry_keep(cdl__rloop *R, cdl__rentry *e) {
    cdl__rentry *other = cdl__rm_lookup(R, e->url);
    if (other || !cdl__rm_insert(R, e)) {
        curl_slist_free_all(e->headers);
        cdl__free(R->L, e);
        return other;
    }
    return e;
}

/* The size of an object from its first ranged GET: the Content-Range
 * total, or the body itself when it is shorter than asked (a server that
 * ignores Range and sent a small object). 0: unknown. */
static uint64_t cdl__rm_first_size(const cdl__rreq *q) {
    return q->total ? q->total : q->got < q->want ? q->got : 0;
}

/* ---- the index scan's stream (see cdl__rscan above) ---- */

static void cdl__rm_chunk_done(cdl__rloop *R, cdl__rreq *q);

/* A chunk request's completion function (http.c calls it with the request:
 * arg is the request itself). */
static void cdl__rm_chunk_done_fn(void *arg, coordl_status status, uint64_t got, const char *err) {
    (void)status, (void)got, (void)err; /* all in the request */
    cdl__rreq *q = arg;
    cdl__rm_chunk_done(q->loop, q);
}

/* Asks for chunk k of o (its first when the size is not known yet): into
 * R's queue, under R->mu (the caller wakes the loop). 0: out of memory. */
static int cdl__rm_chunk_ask(cdl__rloop *R, cdl__rscan *S, cdl__rscan_obj *o, size_t k) {
    const coordl *L = R->L;
    cdl__rreq *q = cdl__calloc(L, 1, sizeof *q);
    cdl__u8 *buf = q ? cdl__malloc(L, CDL_RM_CHUNK) : NULL;
    if (!buf) {
        cdl__free(L, q);
        return 0;
    }
    q->url = o->url;
    q->owner = S;
    q->scan_obj = o;
    q->loop = R;
    q->done = cdl__rm_chunk_done_fn;
    q->arg = q;
    q->dst = buf;
    q->off = (uint64_t)k * CDL_RM_CHUNK;
    if (o->e) {
        cdl__rchunk *c = &o->chunks[k];
        q->target = o->e->target;
        q->s3 = o->e->s3;
        q->headers = o->e->headers;
        q->expect_total = o->e->size;
        q->want = o->e->size - q->off < CDL_RM_CHUNK ? o->e->size - q->off : CDL_RM_CHUNK;
        c->buf = buf;
        c->state = CDL_CH_FLIGHT;
        c->in_flight = 1;
    } else {
        q->target = o->target;
        q->s3 = o->s3;
        q->headers = o->s3 ? R->s3.headers : NULL;
        q->want = CDL_RM_CHUNK;
        o->first = buf;
        o->probed = 1;
    }
    S->held += CDL_RM_CHUNK;
    q->state = CDL_RQ_QUEUED;
    if (R->q_tail) R->q_tail->next = q;
    else R->q_head = q;
    R->q_tail = q;
    return 1;
}

/* Asks for what the budget allows, in scan order: the first chunk of
 * every shard not asked yet, the rest of each shard in order once its
 * size is known (a shard still waiting for its first answer holds back
 * the rest of those after it). Under R->mu; 1 when it queued any. */
static int cdl__rm_scan_pump(cdl__rloop *R, cdl__rscan *S) {
    int queued = 0, blocked = 0;
    if (S->ending) return 0;
    for (size_t i = S->cur; i < S->n; i++) {
        cdl__rscan_obj *o = &S->objs[i];
        if (o->failed) continue;
        if (!o->probed) { /* first answers: half the budget's worth of shards ahead at most */
            if (S->held + CDL_RM_CHUNK > CDL_RM_SCAN_BUDGET || i - S->cur >= CDL_RM_SCAN_BUDGET / CDL_RM_CHUNK / 2)
                break;
            if (!cdl__rm_chunk_ask(R, S, o, 0)) break;
            queued = 1;
            continue;
        }
        if (!o->chunks) {
            blocked = 1;
            continue;
        }
        if (blocked || o->stop) continue;
        while (o->next < o->nchunks && S->held + CDL_RM_CHUNK <= CDL_RM_SCAN_BUDGET) {
            if (!cdl__rm_chunk_ask(R, S, o, o->next)) return queued;
            o->next++;
            queued = 1;
        }
        if (o->next < o->nchunks) break;
    }
    return queued;
}

/* Lets chunk k of o go (parsed past, or the scan ends): its bytes now, or
 * when its transfer ends. Under R->mu. */
static void cdl__rm_chunk_drop(const coordl *L, cdl__rscan *S, cdl__rscan_obj *o, size_t k) {
    cdl__rchunk *c = &o->chunks[k];
    if (c->state == CDL_CH_DROPPED) return;
    if (c->state == CDL_CH_NONE || (c->state == CDL_CH_DONE && !c->touched && k > 0))
        o->stop = 1; /* jumped a whole chunk: members larger than one */
    c->state = CDL_CH_DROPPED;
    if (!c->in_flight && c->buf) {
        cdl__free(L, c->buf);
        c->buf = NULL;
        S->held -= CDL_RM_CHUNK;
    }
}

/* A chunk's transfer ended (event-loop thread, R->mu not held). */
static void cdl__rm_chunk_done(cdl__rloop *R, cdl__rreq *q) {
    const coordl *L = R->L;
    cdl__rscan_obj *o = q->scan_obj;
    cdl__rscan *S = (cdl__rscan *)q->owner;
    cdl__rentry *e = NULL;
    cdl__rchunk *chunks = NULL;
    size_t nchunks = 0;
    const int first = q->off == 0 && q->expect_total == 0;
    if (first && q->status == COORDL_OK) { /* the size and the ETag: the table entry, and the chunks */
        const uint64_t size = cdl__rm_first_size(q);
        nchunks = (size_t)((size + CDL_RM_CHUNK - 1) / CDL_RM_CHUNK);
        if (size) e = cdl__rm_entry_make(L, o->url, o->target, o->s3, size, q->etag, q->headers);
        if (e) chunks = cdl__calloc(L, nchunks, sizeof *chunks);
    }
    pthread_mutex_lock(&R->mu);
    if (first) {
        if (e && chunks) e = cdl__rm_entry_keep(R, e);
        if (e && chunks && e->size == cdl__rm_first_size(q)) {
            o->e = e;
            o->chunks = chunks;
            o->nchunks = nchunks;
            o->next = 1;
            chunks[0].buf = o->first;
            chunks[0].got = q->got;
            const int gone = S->ending || (size_t)(o - S->objs) < S->cur; /* parsed already (by windows) */
            chunks[0].state = gone ? CDL_CH_DROPPED : CDL_CH_DONE;
            if (gone) {
                cdl__free(L, o->first);
                chunks[0].buf = NULL;
                S->held -= CDL_RM_CHUNK;
            }
        } else { /* its open asks again, and says why */
            if (e && !chunks) {
                curl_slist_free_all(e->headers);
                cdl__free(L, e);
            }
            cdl__free(L, chunks);
            o->failed = 1;
            if (q->status != COORDL_OK && (o->err = cdl__malloc(L, strlen(q->err) + 1))) /* not asked twice */
                memcpy(o->err, q->err, strlen(q->err) + 1);
            cdl__free(L, o->first);
            S->held -= CDL_RM_CHUNK;
        }
        o->first = NULL;
    } else {
        cdl__rchunk *c = &o->chunks[q->off / CDL_RM_CHUNK];
        c->in_flight = 0;
        c->got = q->got;
        if (c->state == CDL_CH_FLIGHT && q->status == COORDL_OK && q->got == q->want) {
            c->state = CDL_CH_DONE;
        } else { /* dropped meanwhile, or failed: the window reads it, and reports */
            c->state = CDL_CH_DROPPED;
            cdl__free(L, c->buf);
            c->buf = NULL;
            S->held -= CDL_RM_CHUNK;
        }
    }
    const int queued = cdl__rm_scan_pump(R, S);
    pthread_cond_broadcast(&S->cv);
    pthread_mutex_unlock(&R->mu);
    if (queued) cdl__rm_wake(R);
}

/* The stream's shard named url (NULL: none), from the one being parsed
 * on. Under R->mu. */
static cdl__rscan_obj *cdl__rm_scan_find(cdl__rscan *S, const char *url) {
    for (size_t i = S->cur; i < S->n; i++)
        if (strcmp(S->objs[i].url, url) == 0) return &S->objs[i];
    return NULL;
}

/* Starts the stream over the shards urls[0..n) that are URLs (others are
 * left out), before coordl_open scans them in this order; ended by
 * cdl__remote_scan_end. Nothing is lost when it cannot start (out of
 * memory): the scan then reads each shard by windows. */
CDL_PRIVATE void cdl__remote_scan_begin(const coordl *L, const char *const *urls, size_t n) {
    char why[CDL_ERRMSG_MAX];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) m += cdl__remote_is_url(urls[i]) != 0;
    if (m < 1) return;
    cdl__rloop *R = cdl__rm_get(L, why, sizeof why);
    if (!R) return; /* the first open says why */
    cdl__rscan *S = cdl__calloc(L, 1, sizeof *S);
    if (!S || !(S->objs = cdl__calloc(L, m, sizeof *S->objs))) {
        cdl__free(L, S);
        return;
    }
    pthread_cond_init(&S->cv, NULL);
    int any_s3 = 0;
    for (size_t i = 0; i < n; i++) {
        if (!cdl__remote_is_url(urls[i])) continue;
        cdl__rscan_obj *o = &S->objs[S->n++];
        const size_t len = strlen(urls[i]);
        if (!(o->url = cdl__malloc(L, len + 1))) {
            o->failed = 1;
            continue;
        }
        memcpy(o->url, urls[i], len + 1);
        if (strncasecmp(o->url, "s3://", 5) == 0) {
            const char *slash = strchr(o->url + 5, '/');
            o->s3 = any_s3 = 1;
            if (!slash || !slash[1] || !(o->target = cdl__s3_url(L, &R->s3, o->url, slash + 1, NULL, why, sizeof why)))
                o->failed = 1; /* its open says why */
        }
    }
    if (any_s3) cdl__rm_s3_log(L, R);
    pthread_mutex_lock(&R->mu);
    R->scan = S;
    const int queued = cdl__rm_scan_pump(R, S);
    pthread_mutex_unlock(&R->mu);
    if (queued) cdl__rm_wake(R);
}

/* Ends the stream: transfers still in flight are cancelled, every byte
 * is freed. After the last shard is closed. */
CDL_PRIVATE void cdl__remote_scan_end(const coordl *L) {
    cdl__rloop *R = atomic_load_explicit(&((coordl *)L)->rloop, memory_order_acquire);
    if (!R) return;
    pthread_mutex_lock(&R->mu);
    cdl__rscan *S = R->scan;
    if (S) S->ending = 1;
    pthread_mutex_unlock(&R->mu);
    if (!S) return;
    cdl__remote_cancel(L, S);
    pthread_mutex_lock(&R->mu);
    R->scan = NULL;
    pthread_mutex_unlock(&R->mu);
    for (size_t i = 0; i < S->n; i++) {
        cdl__rscan_obj *o = &S->objs[i];
        for (size_t k = 0; k < o->nchunks; k++) cdl__free(L, o->chunks[k].buf);
        cdl__free(L, o->chunks);
        cdl__free(L, o->first);
        cdl__free(L, o->url);
        cdl__free(L, o->target);
        cdl__free(L, o->err);
    }
    pthread_cond_destroy(&S->cv);
    cdl__free(L, S->objs);
    cdl__free(L, S);
}

/* The stream's part of opening url: the shard becomes the one parsed
 * (those before it are let go), its first answer is waited for. Returns
 * its stream shard when it has one; its first answer's error into why
 * (*failed set): the request was retried as any other, and is not asked
 * again. */
static cdl__rscan_obj *cdl__rm_scan_open(cdl__rloop *R, const char *url, int *failed, char *why, size_t cap) {
    pthread_mutex_lock(&R->mu);
    cdl__rscan *S = R->scan;
    cdl__rscan_obj *o = S ? cdl__rm_scan_find(S, url) : NULL;
    if (!o) {
        pthread_mutex_unlock(&R->mu);
        return NULL;
    }
    for (const size_t to = (size_t)(o - S->objs); S->cur < to; S->cur++)
        for (size_t k = 0; k < S->objs[S->cur].nchunks; k++) cdl__rm_chunk_drop(R->L, S, &S->objs[S->cur], k);
    int queued = cdl__rm_scan_pump(R, S);
    if (!o->probed) o->failed = 1; /* no room for it now: read by windows */
    while (o->probed && !o->chunks && !o->failed) pthread_cond_wait(&S->cv, &R->mu);
    if (o->failed && o->err) {
        snprintf(why, cap, "%s", o->err);
        *failed = 1;
    }
    if (o->failed) o = NULL;
    pthread_mutex_unlock(&R->mu);
    if (queued) cdl__rm_wake(R);
    return o;
}

/* A sequential reader's bytes [off, off + len) from the stream: 1 when
 * they were all there (waiting for the chunks in flight), 0 when the
 * window must read them. The chunks before off are let go. */
static int cdl__rm_scan_read(cdl__rloop *R, cdl__rscan_obj *o, cdl__u8 *buf, uint64_t len, uint64_t off) {
    uint64_t copied = 0;
    pthread_mutex_lock(&R->mu);
    cdl__rscan *S = R->scan;
    if (!S) {
        pthread_mutex_unlock(&R->mu);
        return 0;
    }
    const size_t at = (size_t)(off / CDL_RM_CHUNK);
    for (; o->released < at && o->released < o->nchunks; o->released++) cdl__rm_chunk_drop(R->L, S, o, o->released);
    int queued = cdl__rm_scan_pump(R, S); /* the room just freed goes to this shard first */
    if (queued) {
        pthread_mutex_unlock(&R->mu);
        cdl__rm_wake(R);
        pthread_mutex_lock(&R->mu);
    }
    while (copied < len) {
        const uint64_t pos = off + copied;
        const size_t k = (size_t)(pos / CDL_RM_CHUNK);
        if (k >= o->nchunks || k < o->released) break;
        cdl__rchunk *c = &o->chunks[k];
        while (c->state == CDL_CH_FLIGHT) pthread_cond_wait(&S->cv, &R->mu);
        const uint64_t in = pos - (uint64_t)k * CDL_RM_CHUNK;
        if (c->state != CDL_CH_DONE || in >= c->got) break;
        const uint64_t take = c->got - in < len - copied ? c->got - in : len - copied;
        memcpy(buf + copied, c->buf + in, (size_t)take);
        c->touched = 1;
        copied += take;
    }
    queued = cdl__rm_scan_pump(R, S);
    pthread_mutex_unlock(&R->mu);
    if (queued) cdl__rm_wake(R);
    return copied == len;
}

CDL_PRIVATE coordl_status cdl__remote_open(const coordl *L, const char *url, void **file, uint64_t *size, char *why,
                                           size_t cap) {
    cdl__rloop *R = cdl__rm_get(L, why, cap);
    if (!R) return COORDL_ERR_IO;
    int failed = 0;
    cdl__rscan_obj *scan = cdl__rm_scan_open(R, url, &failed, why, cap);
    if (failed) return COORDL_ERR_IO;
    pthread_mutex_lock(&R->mu);
    cdl__rentry *e = cdl__rm_lookup(R, url);
    pthread_mutex_unlock(&R->mu);
    cdl__u8 probe[CDL_RM_PROBE];
    uint64_t probe_got = 0;
    if (!e) {
        /* the first ranged GET gives the size (Content-Range) and the ETag:
         * no HEAD; its bytes start the window of a sequential reader */
        const int s3 = strncasecmp(url, "s3://", 5) == 0;
        char *target = NULL;
        if (s3) {
            const char *slash = strchr(url + 5, '/');
            if (!slash || !slash[1]) {
                snprintf(why, cap, "%s: not s3://BUCKET/KEY (a prefix ending in '/' is listed only as a whole "
                         "source)", url);
                return COORDL_ERR_INVALID;
            }
            if (!(target = cdl__s3_url(L, &R->s3, url, slash + 1, NULL, why, cap))) return COORDL_ERR_INVALID;
            cdl__rm_s3_log(L, R);
        }
        cdl__rreq q;
        memset(&q, 0, sizeof q);
        q.url = url;
        q.target = target;
        q.s3 = s3;
        q.headers = s3 ? R->s3.headers : NULL;
        q.want = sizeof probe;
        q.dst = probe;
        coordl_status rc = cdl__rm_sync(R, &q, why, cap);
        if (rc == COORDL_OK && !cdl__rm_first_size(&q)) {
            snprintf(why, cap, "%s: the server gave no size (no Content-Range total)", url);
            rc = COORDL_ERR_IO;
        }
        if (rc == COORDL_OK && !(e = cdl__rm_entry_make(L, url, target, s3, cdl__rm_first_size(&q), q.etag, q.headers))) {
            snprintf(why, cap, "out of memory");
            rc = COORDL_ERR_NOMEM;
        }
        cdl__free(L, target);
        if (rc != COORDL_OK) return rc;
        probe_got = q.got;
        pthread_mutex_lock(&R->mu);
        e = cdl__rm_entry_keep(R, e);
        pthread_mutex_unlock(&R->mu);
        if (!e) {
            snprintf(why, cap, "out of memory");
            return COORDL_ERR_NOMEM;
        }
    }
    cdl__rfile *f = cdl__calloc(L, 1, sizeof *f);
    if (!f) {
        snprintf(why, cap, "out of memory");
        return COORDL_ERR_NOMEM;
    }
    f->e = e;
    f->scan = scan && scan->e == e ? scan : NULL;
    f->next_win = CDL_RM_SCAN_MIN;
    if (probe_got && (f->win = cdl__malloc(L, sizeof probe))) {
        memcpy(f->win, probe, (size_t)probe_got);
        f->win_cap = sizeof probe;
        f->win_len = (size_t)probe_got;
    }
    *file = f;
    *size = e->size;
    return COORDL_OK;
}

/* Every .tar object under s3://bucket/prefix, listed with ListObjectsV2
 * (a page of up to 1,000 keys per request, following the continuation
 * tokens), in the store's key order, as lines "s3://bucket/key\n" in
 * *text (allocated from L). */
CDL_PRIVATE coordl_status cdl__remote_list(const coordl *L, const char *url, char **text, size_t *len, char *why,
                                           size_t cap) {
    *text = NULL;
    *len = 0;
    cdl__rloop *R = cdl__rm_get(L, why, cap);
    if (!R) return COORDL_ERR_IO;
    const char *slash = strchr(url + 5, '/');
    const char *prefix = slash ? slash + 1 : "";
    const size_t blen = slash ? (size_t)(slash - (url + 5)) : strlen(url + 5);
    char *out = NULL, *query = NULL;
    size_t out_cap = 0, query_cap = 0, objects = 0, pages = 0;
    char token[2048] = "", key[4096];
    coordl_status rc = COORDL_OK;
    cdl__rm_s3_log(L, R);
    for (;;) {
        /* the query canonical as SigV4 wants it: parameters sorted by
         * name, values percent-encoded, "name=" for an empty value */
        const size_t need = 3 * (strlen(token) + strlen(prefix)) + 64;
        if (!cdl__reserve(L, (void **)&query, &query_cap, need)) {
            rc = COORDL_ERR_NOMEM;
            snprintf(why, cap, "out of memory");
            break;
        }
        size_t k = 0;
        if (token[0]) {
            k += (size_t)snprintf(query, need, "continuation-token=");
            k += cdl__s3_pct(query + k, token, strlen(token), 0);
            query[k++] = '&';
        }
        k += (size_t)snprintf(query + k, need - k, "list-type=2&prefix=");
        cdl__s3_pct(query + k, prefix, strlen(prefix), 0);
        char *target = cdl__s3_url(L, &R->s3, url, NULL, query, why, cap);
        if (!target) {
            rc = COORDL_ERR_INVALID;
            break;
        }
        cdl__rreq q;
        memset(&q, 0, sizeof q);
        q.url = url;
        q.target = target;
        q.s3 = 1;
        q.whole = 1;
        q.heap = L;
        q.headers = R->s3.headers;
        rc = cdl__rm_sync(R, &q, why, cap);
        cdl__free(L, target);
        pages++;
        const char *body = q.dst ? (const char *)q.dst : "";
        if (rc == COORDL_OK && !strstr(body, "<ListBucketResult")) {
            snprintf(why, cap, "%s: the answer to ListObjectsV2 is not a ListBucketResult (is %s an S3 endpoint?)", url,
                     R->s3.endpoint ? R->s3.endpoint : "AWS");
            rc = COORDL_ERR_IO;
        }
        const char *pos = body;
        while (rc == COORDL_OK && cdl__s3_xml_next(&pos, "Key", key, sizeof key)) {
            const size_t n = strlen(key);
            if (n < 4 || strcmp(key + n - 4, ".tar") != 0) continue;
            if (!cdl__reserve(L, (void **)&out, &out_cap, *len + blen + n + 8)) {
                rc = COORDL_ERR_NOMEM;
                snprintf(why, cap, "out of memory");
                break;
            }
            *len += (size_t)snprintf(out + *len, out_cap - *len, "s3://%.*s/%s\n", (int)blen, url + 5, key);
            objects++;
        }
        char truncated[16] = "";
        pos = body;
        cdl__s3_xml_next(&pos, "IsTruncated", truncated, sizeof truncated);
        pos = body;
        const int more = rc == COORDL_OK && strcmp(truncated, "true") == 0;
        if (more && !cdl__s3_xml_next(&pos, "NextContinuationToken", token, sizeof token)) {
            snprintf(why, cap, "%s: a truncated listing page without a NextContinuationToken", url);
            rc = COORDL_ERR_IO;
        }
        cdl__free(L, q.dst);
        if (rc != COORDL_OK || !more) break;
    }
    cdl__free(L, query);
    if (rc != COORDL_OK) {
        cdl__free(L, out);
        *len = 0;
        return rc;
    }
    cdl__log(L, COORDL_LOG_INFO, "%s: %zu .tar objects in %zu listing pages", url, objects, pages);
    *text = out;
    return COORDL_OK;
}

CDL_PRIVATE void cdl__remote_sequential(void *file) { ((cdl__rfile *)file)->sequential = 1; }

/* The ETag an open object had when first opened ("" when the server
 * sent none): a saved index records it (indexfile.c). */
CDL_PRIVATE void cdl__remote_etag(const void *file, char *out, size_t cap) {
    const struct curl_slist *h = ((const cdl__rfile *)file)->e->headers;
    while (h && strncmp(h->data, "If-Match: ", 10) != 0) h = h->next;
    snprintf(out, cap, "%s", h ? h->data + strlen("If-Match: ") : "");
}

CDL_PRIVATE void cdl__remote_close(const coordl *L, void *file) {
    cdl__rfile *f = file;
    if (!f) return;
    cdl__free(L, f->win);
    cdl__free(L, f);
}

static coordl_status cdl__rm_range(cdl__rloop *R, const cdl__rentry *e, void *buf, uint64_t len, uint64_t off,
                                   uint64_t *got, char *err, size_t cap) {
    cdl__rreq q;
    memset(&q, 0, sizeof q);
    q.url = e->url;
    q.target = e->target;
    q.s3 = e->s3;
    q.headers = e->headers;
    q.off = off;
    q.want = len;
    q.dst = buf;
    q.expect_total = e->size;
    const coordl_status rc = cdl__rm_sync(R, &q, err, cap);
    *got = q.got;
    return rc;
}

/* len bytes at off, clipped at the object's size as indexed. A sequential
 * reader's small reads (a tar scan's headers) come from a window read
 * ahead in one ranged GET, doubling while it is read in order
 * (CDL_RM_SCAN_MIN to CDL_RM_SCAN_MAX) and starting small again after a
 * jump (past a large member): a shard of small members is read in a few
 * large requests, one of large members in small ones at its headers. */
CDL_PRIVATE coordl_status cdl__remote_read(const coordl *L, void *file, void *buf, uint64_t len, uint64_t off,
                                           uint64_t *got, char *err, size_t cap) {
    cdl__rfile *f = file;
    cdl__rloop *R = atomic_load_explicit(&((coordl *)L)->rloop, memory_order_acquire);
    const uint64_t size = f->e->size;
    *got = 0;
    if (off >= size || len == 0) return COORDL_OK;
    if (len > size - off) len = size - off;
    if (f->win && off >= f->win_off && off + len <= f->win_off + f->win_len) {
        memcpy(buf, f->win + (off - f->win_off), (size_t)len);
        *got = len;
        return COORDL_OK;
    }
    if (f->scan && f->sequential && cdl__rm_scan_read(R, f->scan, (cdl__u8 *)buf, len, off)) {
        *got = len;
        return COORDL_OK;
    }
    if (!f->sequential || len > CDL_RM_SMALL_READ) return cdl__rm_range(R, f->e, buf, len, off, got, err, cap);
    /* in order: at or past the window's end by less than a window (a scan
     * reads a header, skips the member's data, reads the next header: a
     * jump of exactly zero bytes is rare then, and taking only that as in
     * order kept every window at 64 KiB: 519 requests to index 8 shards of
     * 4.7 MB, 12 s at 20 ms a request) */
    const uint64_t win_end = f->win_off + f->win_len;
    if (f->win_len && off >= win_end && off - win_end < f->next_win) {
        if (f->next_win < CDL_RM_SCAN_MAX) f->next_win *= 2;
    } else {
        f->next_win = CDL_RM_SCAN_MIN;
    }
    size_t w = f->next_win;
    if (w < len) w = (size_t)len;
    if (w > size - off) w = (size_t)(size - off);
    if (w > f->win_cap) {
        void *p = cdl__realloc(L, f->win, w);
        if (!p) return cdl__rm_range(R, f->e, buf, len, off, got, err, cap);
        f->win = p;
        f->win_cap = w;
    }
    uint64_t n = 0;
    f->win_len = 0;
    const coordl_status rc = cdl__rm_range(R, f->e, f->win, w, off, &n, err, cap);
    if (rc != COORDL_OK) return rc;
    f->win_off = off;
    f->win_len = (size_t)n;
    *got = n < len ? n : len;
    memcpy(buf, f->win, (size_t)*got);
    return COORDL_OK;
}

CDL_PRIVATE int cdl__remote_submit(const coordl *L, const char *url, uint64_t off, uint64_t len, void *dst,
                                   const void *owner, cdl__remote_done_fn done, void *arg) {
    cdl__rloop *R = atomic_load_explicit(&((coordl *)L)->rloop, memory_order_acquire);
    if (!R) return 0;
    pthread_mutex_lock(&R->mu);
    const cdl__rentry *e = cdl__rm_lookup(R, url);
    pthread_mutex_unlock(&R->mu);
    if (!e || off > e->size || len > e->size - off || len == 0) return 0; /* read synchronously: it says why */
    cdl__rreq *q = cdl__calloc(L, 1, sizeof *q);
    if (!q) return 0;
    q->url = e->url;
    q->target = e->target;
    q->s3 = e->s3;
    q->headers = e->headers;
    q->off = off;
    q->want = len;
    q->dst = dst;
    q->expect_total = e->size;
    q->owner = owner;
    q->done = done;
    q->arg = arg;
    cdl__rm_enqueue(R, q);
    return 1;
}

/* Ends every asynchronous request of owner, calling each one's done with
 * an error, before it returns. Not from the event-loop thread. */
CDL_PRIVATE void cdl__remote_cancel(const coordl *L, const void *owner) {
    cdl__rloop *R = atomic_load_explicit(&((coordl *)L)->rloop, memory_order_acquire);
    if (!R) return;
    pthread_mutex_lock(&R->mu);
    while (R->cancel_pending) pthread_cond_wait(&R->cancel_cv, &R->mu);
    R->cancel_owner = owner;
    R->cancel_pending = 1;
    pthread_mutex_unlock(&R->mu);
    cdl__rm_wake(R);
    pthread_mutex_lock(&R->mu);
    while (R->cancel_pending) pthread_cond_wait(&R->cancel_cv, &R->mu);
    pthread_mutex_unlock(&R->mu);
}

CDL_PRIVATE void cdl__remote_counters_get(const coordl *L, cdl__remote_counters *out) {
    cdl__rloop *R = atomic_load_explicit(&((coordl *)L)->rloop, memory_order_acquire);
    memset(out, 0, sizeof *out);
    if (!R) return;
    pthread_mutex_lock(&R->mu);
    *out = R->counters;
    pthread_mutex_unlock(&R->mu);
}

/* Stops the loop and frees everything (after every reader is done). */
CDL_PRIVATE void cdl__remote_destroy(coordl *L) {
    cdl__rloop *R = atomic_exchange(&L->rloop, NULL);
    cdl__rm_free(L, R);
}

#else /* COORDL_NO_REMOTE */

CDL_PRIVATE coordl_status cdl__remote_open(const coordl *L, const char *url, void **file, uint64_t *size, char *why,
                                           size_t cap) {
    (void)L; (void)file; (void)size;
    snprintf(why, cap, "%s: remote sources are not in this build (coordl.c was compiled with COORDL_NO_REMOTE)", url);
    return COORDL_ERR_UNSUPPORTED;
}
CDL_PRIVATE coordl_status cdl__remote_read(const coordl *L, void *file, void *buf, uint64_t len, uint64_t off,
                                           uint64_t *got, char *err, size_t cap) {
    (void)L; (void)file; (void)buf; (void)len; (void)off;
    *got = 0;
    snprintf(err, cap, "remote sources are not in this build (COORDL_NO_REMOTE)");
    return COORDL_ERR_UNSUPPORTED;
}
CDL_PRIVATE coordl_status cdl__remote_list(const coordl *L, const char *url, char **text, size_t *len, char *why,
                                           size_t cap) {
    (void)L;
    *text = NULL;
    *len = 0;
    snprintf(why, cap, "%s: remote sources are not in this build (coordl.c was compiled with COORDL_NO_REMOTE)", url);
    return COORDL_ERR_UNSUPPORTED;
}
CDL_PRIVATE void cdl__remote_close(const coordl *L, void *file) { (void)L; (void)file; }
CDL_PRIVATE void cdl__remote_scan_begin(const coordl *L, const char *const *urls, size_t n) {
    (void)L; (void)urls; (void)n;
}
CDL_PRIVATE void cdl__remote_scan_end(const coordl *L) { (void)L; }
CDL_PRIVATE void cdl__remote_sequential(void *file) { (void)file; }
CDL_PRIVATE void cdl__remote_etag(const void *file, char *out, size_t cap) {
    (void)file;
    if (cap) out[0] = '\0';
}
CDL_PRIVATE int cdl__remote_submit(const coordl *L, const char *url, uint64_t off, uint64_t len, void *dst,
                                   const void *owner, cdl__remote_done_fn done, void *arg) {
    (void)L; (void)url; (void)off; (void)len; (void)dst; (void)owner; (void)done; (void)arg;
    return 0;
}
CDL_PRIVATE void cdl__remote_cancel(const coordl *L, const void *owner) { (void)L; (void)owner; }
CDL_PRIVATE void cdl__remote_counters_get(const coordl *L, cdl__remote_counters *out) {
    (void)L;
    memset(out, 0, sizeof *out);
}
CDL_PRIVATE void cdl__remote_destroy(coordl *L) { (void)L; }

#endif /* COORDL_NO_REMOTE */
