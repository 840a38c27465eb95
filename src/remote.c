/* SPDX-License-Identifier: MIT */
/*
 * remote.c - http(s):// and s3:// reads: one libcurl event loop per handle.
 *
 * Owns:  L->rloop: the handle's event-loop thread, libcurl's multi handle
 *        and its keep-alive connections, the table of objects opened so far
 *        (URL -> size, ETag), and every request in flight
 * Lock:  its own mutex (R->mu) guards the submission queue, the table and
 *        the counters; everything else belongs to the event-loop thread.
 *        Callers of cdl__remote_read wait on their own condition variable
 *        under R->mu; asynchronous completions run on the event-loop thread
 *        without R->mu held
 * Calls: status (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */
#include "platform.h"
#include "remote_state.h"
#include "remote.h"
#include "status.h"
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
#define CDL_RM_RETRIES 5             /* retries of one request at most          */
#define CDL_RM_BACKOFF_MS 50         /* first retry's delay; doubles each time  */
#define CDL_RM_DEFAULT_TIMEOUT_MS 30000u
#define CDL_RM_SCAN_MIN (64u << 10)  /* a sequential reader's first window      */
#define CDL_RM_SCAN_MAX (8u << 20)   /* ... doubling while read in order, to    */
#define CDL_RM_SMALL_READ (64u << 10) /* reads served from the window at most   */
#define CDL_RM_PROBE 4096u           /* bytes of an object's first ranged GET   */
#define CDL_RM_LIST_MAX (16u << 20)  /* one ListObjectsV2 page's body at most   */

CDL_PRIVATE int cdl__remote_is_url(const char *p) {
    return strncasecmp(p, "http://", 7) == 0 || strncasecmp(p, "https://", 8) == 0 || strncasecmp(p, "s3://", 5) == 0;
}

#ifndef COORDL_NO_REMOTE

/* An object opened once: its size and ETag as first seen. Never freed
 * before the handle closes, so file handles point at it. */
typedef struct cdl__rentry {
    struct cdl__rentry *next; /* hash chain */
    uint64_t size;
    struct curl_slist *headers; /* "If-Match: <etag>" (and an s3:// object's
                                   x-amz- headers), or NULL */
    int s3;                     /* requests are signed (SigV4)            */
    const char *target;         /* the URL requested: url itself, or an
                                   s3:// name's HTTP(S) URL (in url[]'s
                                   storage)                               */
    char url[];                 /* as the source names it                 */
} cdl__rentry;

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

enum { CDL_RQ_QUEUED, CDL_RQ_ACTIVE, CDL_RQ_WAITING };

typedef struct cdl__rreq {
    struct cdl__rreq *next, *prev; /* queue, or the loop's live list */
    int state;
    const char *url;    /* as the source names it: every message's name */
    const char *target; /* the URL requested, when not url (s3://)       */
    const struct curl_slist *headers;
    int s3;             /* sign it (SigV4)                               */
    int whole;          /* no Range: the whole body into a growing dst
                           (a ListObjectsV2 page), cap bytes so far      */
    size_t cap;
    const coordl *heap; /* whose allocator grows a whole body's dst      */
    uint64_t off, want, got, skipped;
    uint64_t expect_total; /* 0: unknown (the object's first request) */
    uint64_t total;        /* from Content-Range, or a 200's Content-Length */
    cdl__u8 *dst;
    long code;
    int overflow, complete_early, attempts;
    uint64_t due_ns;
    CURL *easy;
    char etag[128];
    char body[160]; size_t body_len; /* an error answer's first bytes */
    coordl_status status;
    char err[CDL_ERRMSG_MAX];
    /* a synchronous caller waits on cv; an asynchronous one is called */
    pthread_cond_t *cv;
    int finished;
    const void *owner;
    cdl__remote_done_fn done;
    void *arg;
    cdl__rscan_obj *scan_obj; /* a chunk of the index scan's stream */
} cdl__rreq;

struct cdl__rloop {
    coordl *L;
    pthread_mutex_t mu;
    pthread_t thread;
    int thread_started;
    int ep, evfd;
    CURLM *multi;
    uint32_t timeout_ms;
    /* R->mu: submissions, cancellation, stop */
    cdl__rreq *q_head, *q_tail;
    int stopping;
    const void *cancel_owner;
    int cancel_pending;
    pthread_cond_t cancel_cv;
    cdl__rentry **table;
    size_t table_cap, table_n;
    cdl__rscan *scan; /* the index scan's stream, while coordl_open scans */
    cdl__remote_counters counters;
    /* the loop thread's own */
    cdl__rreq live; /* sentinel of the requests the loop holds */
    /* S3, read from the environment when the loop is made (cdl__rm_s3_env)
     * and constant after: the secret goes to libcurl's signer only, never
     * into a message, a log line or a counter */
    char *s3_endpoint;              /* AWS_ENDPOINT_URL[_S3] without a
                                       trailing '/', or NULL: AWS itself */
    char s3_region[64];
    char s3_sigv4[96];              /* "aws:amz:REGION:s3"                */
    char *s3_key, *s3_secret;       /* NULL: requests go unsigned         */
    struct curl_slist *s3_headers;  /* x-amz-content-sha256 (and the
                                       session token)                     */
    char s3_creds[200];             /* where the credentials came from,
                                       by variable names only             */
    char s3_bad[200];               /* a setting that cannot work, or ""  */
    int s3_logged;                  /* R->mu: its settings were logged    */
    uint64_t in_flight, waiting;
    uint64_t timer_due;
    CURL **easy_pool;
    size_t easy_n, easy_cap;
};

static pthread_once_t cdl__curl_once = PTHREAD_ONCE_INIT;
static CURLcode cdl__curl_init_rc = CURLE_FAILED_INIT;
/* libcurl's process-wide setup (its TLS library): once, never undone,
 * since another library in the process may use libcurl too. */
static void cdl__curl_init_once(void) { cdl__curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static uint64_t cdl__rm_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (cdl__u8)*s++) * 1099511628211ull;
    return h;
}

/* Under R->mu. */
static cdl__rentry *cdl__rm_lookup(cdl__rloop *R, const char *url) {
    if (!R->table_cap) return NULL;
    for (cdl__rentry *e = R->table[cdl__rm_hash(url) % R->table_cap]; e; e = e->next)
        if (strcmp(e->url, url) == 0) return e;
    return NULL;
}

/* Under R->mu; 0 when memory runs out (e is then the caller's to free). */
static int cdl__rm_insert(cdl__rloop *R, cdl__rentry *e) {
    if (R->table_n + 1 > R->table_cap / 2) {
        const size_t ncap = R->table_cap ? R->table_cap * 2 : 64;
        cdl__rentry **t = cdl__calloc(R->L, ncap, sizeof *t);
        if (!t) return 0;
        for (size_t i = 0; i < R->table_cap; i++)
            for (cdl__rentry *x = R->table[i], *nx; x; x = nx) {
                nx = x->next;
                x->next = t[cdl__rm_hash(x->url) % ncap];
                t[cdl__rm_hash(x->url) % ncap] = x;
            }
        cdl__free(R->L, R->table);
        R->table = t;
        R->table_cap = ncap;
    }
    e->next = R->table[cdl__rm_hash(e->url) % R->table_cap];
    R->table[cdl__rm_hash(e->url) % R->table_cap] = e;
    R->table_n++;
    return 1;
}

static void cdl__rm_wake(cdl__rloop *R) {
    const uint64_t one = 1;
    ssize_t w;
    do w = write(R->evfd, &one, sizeof one);
    while (w < 0 && errno == EINTR);
}

/* ---- libcurl's callbacks (event-loop thread) ---- */
static int cdl__rm_socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp) {
    cdl__rloop *R = userp;
    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(R->ep, EPOLL_CTL_DEL, s, NULL);
        return 0;
    }
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) | (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
    ev.data.fd = s;
    if (socketp) {
        if (epoll_ctl(R->ep, EPOLL_CTL_MOD, s, &ev) != 0 && errno == ENOENT) epoll_ctl(R->ep, EPOLL_CTL_ADD, s, &ev);
    } else {
        if (epoll_ctl(R->ep, EPOLL_CTL_ADD, s, &ev) != 0 && errno == EEXIST) epoll_ctl(R->ep, EPOLL_CTL_MOD, s, &ev);
        curl_multi_assign(R->multi, s, R);
    }
    return 0;
}

static int cdl__rm_timer_cb(CURLM *multi, long timeout_ms, void *userp) {
    cdl__rloop *R = userp;
    (void)multi;
    R->timer_due = timeout_ms < 0 ? UINT64_MAX : cdl__now_ns() + (uint64_t)timeout_ms * 1000000ull;
    return 0;
}

static size_t cdl__rm_header_cb(char *line, size_t size, size_t n, void *userp) {
    cdl__rreq *q = userp;
    const size_t len = size * n;
    char buf[256];
    const size_t k = len < sizeof buf - 1 ? len : sizeof buf - 1;
    memcpy(buf, line, k);
    buf[k] = '\0';
    unsigned long long a, b, t;
    if (strncmp(buf, "HTTP/", 5) == 0) { /* a new answer (after a redirect): forget the last one's */
        q->total = 0;
        q->etag[0] = '\0';
    } else if (strncasecmp(buf, "content-range:", 14) == 0) {
        if (sscanf(buf + 14, " bytes %llu-%llu/%llu", &a, &b, &t) == 3) q->total = t;
    } else if (strncasecmp(buf, "content-length:", 15) == 0) {
        long code = 0;
        curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code == 200 && sscanf(buf + 15, " %llu", &t) == 1) q->total = t;
    } else if (strncasecmp(buf, "etag:", 5) == 0) {
        const char *v = buf + 5;
        while (*v == ' ' || *v == '\t') v++;
        size_t m = strcspn(v, "\r\n");
        if (m < sizeof q->etag) {
            memcpy(q->etag, v, m);
            q->etag[m] = '\0';
        }
    }
    return len;
}

/* The body into the caller's buffer: exactly the range asked for. A server
 * that ignores Range answers 200 with the whole object: the bytes before
 * the range are skipped and the transfer ends once the range is in. An
 * error answer's first bytes are kept for the message (S3's <Code>). */
static size_t cdl__rm_write_cb(char *data, size_t size, size_t n, void *userp) {
    cdl__rreq *q = userp;
    size_t len = size * n;
    if (!q->code) curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &q->code);
    if (q->whole && q->code == 200) { /* a listing page: all of it */
        if (q->got + len > CDL_RM_LIST_MAX) {
            q->overflow = 1;
            return 0;
        }
        if (q->got + len + 1 > q->cap) {
            size_t ncap = q->cap ? q->cap : 64u << 10;
            while (ncap < q->got + len + 1) ncap *= 2;
            void *p = cdl__realloc(q->heap, q->dst, ncap);
            if (!p) {
                q->overflow = 1;
                return 0;
            }
            q->dst = p;
            q->cap = ncap;
        }
        memcpy(q->dst + q->got, data, len);
        q->got += len;
        q->dst[q->got] = '\0';
        return len;
    }
    if (q->code != 200 && q->code != 206) {
        const size_t k = len < sizeof q->body - 1 - q->body_len ? len : sizeof q->body - 1 - q->body_len;
        memcpy(q->body + q->body_len, data, k);
        q->body_len += k;
        q->body[q->body_len] = '\0';
        return size * n;
    }
    if (q->code == 200 && q->skipped < q->off) {
        const uint64_t s = q->off - q->skipped < len ? q->off - q->skipped : len;
        q->skipped += s;
        data += s;
        len -= (size_t)s;
    }
    if (len > q->want - q->got) {
        if (q->code == 206) { /* more than the range asked for */
            q->overflow = 1;
            return 0;
        }
        memcpy(q->dst + q->got, data, (size_t)(q->want - q->got));
        q->got = q->want;
        q->complete_early = 1;
        return 0;
    }
    memcpy(q->dst + q->got, data, len);
    q->got += len;
    if (q->code == 200 && q->got == q->want && q->want > 0) {
        q->complete_early = 1;
        return 0;
    }
    return size * n;
}

/* ---- requests (event-loop thread) ---- */
static void cdl__rm_unlink(cdl__rreq *q) {
    q->prev->next = q->next;
    q->next->prev = q->prev;
    q->next = q->prev = NULL;
}

static void cdl__rm_link(cdl__rloop *R, cdl__rreq *q) {
    q->next = &R->live;
    q->prev = R->live.prev;
    R->live.prev->next = q;
    R->live.prev = q;
}

static void cdl__rm_easy_put(cdl__rloop *R, CURL *e) {
    if (R->easy_n < R->easy_cap) R->easy_pool[R->easy_n++] = e;
    else curl_easy_cleanup(e);
}

static void cdl__rm_chunk_done(cdl__rloop *R, cdl__rreq *q);

/* Ends q: its caller is told (q may be gone on return). */
static void cdl__rm_complete(cdl__rloop *R, cdl__rreq *q) {
    if (q->easy) {
        curl_multi_remove_handle(R->multi, q->easy);
        cdl__rm_easy_put(R, q->easy);
        q->easy = NULL;
        R->in_flight--;
    }
    if (q->state == CDL_RQ_WAITING) R->waiting--;
    if (q->next) cdl__rm_unlink(q);
    pthread_mutex_lock(&R->mu);
    R->counters.bytes += q->got;
    if (q->cv) {
        q->finished = 1;
        pthread_cond_signal(q->cv);
        pthread_mutex_unlock(&R->mu);
        return;
    }
    pthread_mutex_unlock(&R->mu);
    if (q->scan_obj) cdl__rm_chunk_done(R, q);
    else q->done(q->arg, q->status, q->got, q->err);
    cdl__free(R->L, q);
}

static void cdl__rm_fail(cdl__rloop *R, cdl__rreq *q, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cdl__vformat(q->err, sizeof q->err, fmt, ap);
    va_end(ap);
    q->status = COORDL_ERR_IO;
    cdl__rm_complete(R, q);
}

static void cdl__rm_start(cdl__rloop *R, cdl__rreq *q) {
    CURL *e = R->easy_n ? R->easy_pool[--R->easy_n] : curl_easy_init();
    if (!e) {
        cdl__rm_fail(R, q, "%s: cannot start a request (out of memory)", q->url);
        return;
    }
    char range[64];
    q->code = 0;
    q->overflow = q->complete_early = 0;
    q->skipped = 0;
    q->body_len = 0;
    q->body[0] = '\0';
    q->total = 0;
    q->etag[0] = '\0';
    q->got = 0; /* a retry asks for the whole range again */
    snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)q->off, (unsigned long long)(q->off + q->want - 1));
    curl_easy_reset(e);
    curl_easy_setopt(e, CURLOPT_URL, q->target ? q->target : q->url);
    if (!q->whole) curl_easy_setopt(e, CURLOPT_RANGE, range);
    if (q->s3 && R->s3_key) { /* libcurl signs (SigV4) what it sends: path,
                                 query, Host and our x-amz- headers */
        curl_easy_setopt(e, CURLOPT_USERNAME, R->s3_key);
        curl_easy_setopt(e, CURLOPT_PASSWORD, R->s3_secret);
        curl_easy_setopt(e, CURLOPT_AWS_SIGV4, R->s3_sigv4);
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, q->headers);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, cdl__rm_write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, q);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, cdl__rm_header_cb);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, q);
    curl_easy_setopt(e, CURLOPT_PRIVATE, q);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)R->timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)R->timeout_ms);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_USERAGENT, "coordl/" COORDL_VERSION);
    q->easy = e;
    q->state = CDL_RQ_ACTIVE;
    if (curl_multi_add_handle(R->multi, e) != CURLM_OK) {
        cdl__rm_easy_put(R, e);
        q->easy = NULL;
        cdl__rm_fail(R, q, "%s: cannot start a request", q->url);
        return;
    }
    R->in_flight++;
    pthread_mutex_lock(&R->mu);
    R->counters.requests++;
    if (R->in_flight > R->counters.max_in_flight) R->counters.max_in_flight = R->in_flight;
    pthread_mutex_unlock(&R->mu);
}

/* A failed attempt worth another: waits (doubling, with a jitter drawn
 * from the request's address so that retries do not come in step) and
 * goes again, or fails with why once the retries are spent. */
static void cdl__rm_retry(cdl__rloop *R, cdl__rreq *q, const char *why) {
    if (q->attempts >= CDL_RM_RETRIES) {
        cdl__rm_fail(R, q, "%s: %s (after %d retries)", q->url, why, q->attempts);
        return;
    }
    curl_multi_remove_handle(R->multi, q->easy);
    cdl__rm_easy_put(R, q->easy);
    q->easy = NULL;
    R->in_flight--;
    const uint64_t base = (uint64_t)CDL_RM_BACKOFF_MS << q->attempts;
    const uint64_t jitter = ((uintptr_t)q >> 4) * 2654435761u % (base / 2 + 1);
    q->attempts++;
    q->due_ns = cdl__now_ns() + (base + jitter) * 1000000ull;
    q->state = CDL_RQ_WAITING;
    R->waiting++;
    pthread_mutex_lock(&R->mu);
    R->counters.retries++;
    pthread_mutex_unlock(&R->mu);
}

/* Judges a finished transfer. */
static void cdl__rm_judge(cdl__rloop *R, cdl__rreq *q, CURLcode rc) {
    long code = 0;
    curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &code);
    const char *url = q->url;
    if (rc == CURLE_WRITE_ERROR && q->complete_early) rc = CURLE_OK;
    if (rc == CURLE_WRITE_ERROR && q->overflow && q->whole) {
        cdl__rm_fail(R, q, "%s: a listing page larger than %u MiB (or out of memory)", url, CDL_RM_LIST_MAX >> 20);
        return;
    }
    if (rc == CURLE_OK && q->whole && code == 200) {
        q->status = COORDL_OK;
        cdl__rm_complete(R, q);
        return;
    }
    if (rc == CURLE_WRITE_ERROR && q->overflow) {
        cdl__rm_fail(R, q, "%s: the server answered bytes %llu-%llu with more bytes than asked for", url,
                     (unsigned long long)q->off, (unsigned long long)(q->off + q->want - 1));
        return;
    }
    if (rc == CURLE_OK && (code == 200 || code == 206)) {
        if (q->expect_total && q->total && q->total != q->expect_total) {
            cdl__rm_fail(R, q, "%s: changed since it was indexed (%llu bytes then, %llu now)", url,
                         (unsigned long long)q->expect_total, (unsigned long long)q->total);
            return;
        }
        if (q->got < q->want) {
            const uint64_t total = q->total ? q->total : q->expect_total;
            if (total && q->off + q->got >= total) { /* the object ends there */
                if (q->expect_total) {
                    cdl__rm_fail(R, q, "%s: has %llu bytes, fewer than the %llu its index needs (changed since "
                                 "it was indexed?)", url, (unsigned long long)total,
                                 (unsigned long long)(q->off + q->want));
                    return;
                }
            } else {
                char why[96];
                snprintf(why, sizeof why, "the body ended after %llu of %llu bytes", (unsigned long long)q->got,
                         (unsigned long long)q->want);
                cdl__rm_retry(R, q, why);
                return;
            }
        }
        q->status = COORDL_OK;
        cdl__rm_complete(R, q);
        return;
    }
    if (rc == CURLE_OK) {
        const char *s3 = strstr(q->body, "<Code>");
        char detail[96] = "";
        if (s3) {
            size_t m = strcspn(s3 + 6, "<");
            if (m > 60) m = 60;
            snprintf(detail, sizeof detail, " (%.*s)", (int)m, s3 + 6);
        }
        if (code >= 500 || code == 429) {
            char why[128];
            snprintf(why, sizeof why, "HTTP %ld%s", code, detail);
            cdl__rm_retry(R, q, why);
        } else if (code == 404) {
            cdl__rm_fail(R, q, "%s: HTTP 404 Not Found%s: no such %s", url, detail,
                         strstr(detail, "NoSuchBucket") ? "bucket" : "object");
        } else if (code == 403 || code == 401) {
            cdl__rm_fail(R, q, "%s: HTTP %ld %s%s: access denied%s%s", url, code,
                         code == 403 ? "Forbidden" : "Unauthorized", detail, q->s3 ? "; credentials: " : "",
                         q->s3 ? R->s3_creds : "");
        } else if (code == 412) {
            cdl__rm_fail(R, q, "%s: changed since it was indexed (its ETag is no longer the one indexed)", url);
        } else if (code == 416) {
            cdl__rm_fail(R, q, "%s: HTTP 416: bytes %llu-%llu are past its end (changed since it was indexed?)", url,
                         (unsigned long long)q->off, (unsigned long long)(q->off + q->want - 1));
        } else {
            cdl__rm_fail(R, q, "%s: HTTP %ld%s", url, code, detail);
        }
        return;
    }
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        cdl__rm_fail(R, q, "%s: cannot resolve the host name (%s)", url, curl_easy_strerror(rc));
        break;
    case CURLE_OPERATION_TIMEDOUT:
        cdl__rm_fail(R, q, "%s: no complete answer within io_timeout_ms (%u ms) for bytes %llu-%llu (%llu received)",
                     url, R->timeout_ms, (unsigned long long)q->off, (unsigned long long)(q->off + q->want - 1),
                     (unsigned long long)q->got);
        break;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_TOO_MANY_REDIRECTS:
        cdl__rm_fail(R, q, "%s: %s", url, curl_easy_strerror(rc));
        break;
    case CURLE_PARTIAL_FILE:
        cdl__rm_retry(R, q, "the body ended before its Content-Length");
        break;
    default: {
        char why[160];
        snprintf(why, sizeof why, "%s", curl_easy_strerror(rc));
        cdl__rm_retry(R, q, why);
    }
    }
}

/* Takes the submissions and a cancellation (event-loop thread). */
static int cdl__rm_take(cdl__rloop *R) {
    pthread_mutex_lock(&R->mu);
    cdl__rreq *q = R->q_head;
    R->q_head = R->q_tail = NULL;
    const int stopping = R->stopping, cancel = R->cancel_pending;
    const void *owner = R->cancel_owner;
    pthread_mutex_unlock(&R->mu);
    while (q) {
        cdl__rreq *next = q->next;
        q->next = NULL;
        cdl__rm_link(R, q);
        if (cancel && q->owner == owner && !q->cv) {
            snprintf(q->err, sizeof q->err, "%s: cancelled", q->url);
            q->status = COORDL_ERR_IO;
            cdl__rm_complete(R, q);
        } else {
            cdl__rm_start(R, q);
        }
        q = next;
    }
    if (cancel) {
        for (cdl__rreq *x = R->live.next, *nx; x != &R->live; x = nx) {
            nx = x->next;
            if (x->owner == owner && !x->cv) {
                snprintf(x->err, sizeof x->err, "%s: cancelled", x->url);
                x->status = COORDL_ERR_IO;
                cdl__rm_complete(R, x);
            }
        }
        pthread_mutex_lock(&R->mu);
        R->cancel_pending = 0;
        pthread_cond_broadcast(&R->cancel_cv);
        pthread_mutex_unlock(&R->mu);
    }
    return stopping;
}

static void *cdl__rm_main(void *arg) {
    cdl__rloop *R = arg;
    struct epoll_event ev[64];
    int running = 0;
    pthread_setname_np(pthread_self(), "coordl-http");
    for (;;) {
        const int stopping = cdl__rm_take(R);
        if (stopping && R->live.next == &R->live) break;
        uint64_t now = cdl__now_ns(), due = R->timer_due;
        if (R->waiting)
            for (cdl__rreq *x = R->live.next; x != &R->live; x = x->next)
                if (x->state == CDL_RQ_WAITING && x->due_ns < due) due = x->due_ns;
        int wait_ms = due == UINT64_MAX ? 1000 : due <= now ? 0 : (int)((due - now + 999999) / 1000000);
        if (wait_ms > 1000) wait_ms = 1000;
        const int n = epoll_wait(R->ep, ev, 64, wait_ms);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.fd == R->evfd) {
                uint64_t v;
                ssize_t rd = read(R->evfd, &v, sizeof v);
                (void)rd;
                continue;
            }
            const int flags = (ev[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                              (ev[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                              (ev[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(R->multi, ev[i].data.fd, flags, &running);
        }
        /* the expired timer is consumed before libcurl is called back in
         * (it may set a new one); left set, the loop would spin */
        now = cdl__now_ns();
        if (R->timer_due <= now) {
            R->timer_due = UINT64_MAX;
            curl_multi_socket_action(R->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        }
        if (R->waiting)
            for (cdl__rreq *x = R->live.next, *nx; x != &R->live; x = nx) {
                nx = x->next;
                if (x->state == CDL_RQ_WAITING && x->due_ns <= now) {
                    R->waiting--;
                    cdl__rm_start(R, x);
                }
            }
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(R->multi, &left)) != NULL) {
            if (m->msg != CURLMSG_DONE) continue;
            cdl__rreq *q = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&q);
            const CURLcode rc = m->data.result;
            if (q) cdl__rm_judge(R, q, rc);
        }
        if (stopping) /* closing: whatever is left is cancelled */
            for (cdl__rreq *x = R->live.next, *nx; x != &R->live; x = nx) {
                nx = x->next;
                snprintf(x->err, sizeof x->err, "%s: cancelled (the loader is closing)", x->url);
                x->status = COORDL_ERR_IO;
                cdl__rm_complete(R, x);
            }
    }
    return NULL;
}

/* ---- S3 (s3://bucket/key): addressing and signing ----------------------
 * As every AWS tool: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL names a
 * custom endpoint (an S3-compatible store), addressed path-style
 * (ENDPOINT/bucket/key); without one, AWS itself, virtual-host style
 * (https://bucket.s3.REGION.amazonaws.com/key; path-style for a bucket
 * with a dot, which the certificate's wildcard does not cover). Region:
 * AWS_REGION, AWS_DEFAULT_REGION, else us-east-1. Requests are signed
 * with SigV4 by libcurl (CURLOPT_AWS_SIGV4) when AWS_ACCESS_KEY_ID and
 * AWS_SECRET_ACCESS_KEY are set (AWS_SESSION_TOKEN adds
 * x-amz-security-token), unsigned (a public bucket) when neither is.
 * curl 7.88 signs the path and the query exactly as written and does not
 * send x-amz-content-sha256 (S3 answers 400 without it), so the URL is
 * written canonical here (each key byte but A-Za-z0-9-_.~/ percent-encoded,
 * query parameters sorted, values encoded likewise) and the header is ours
 * (UNSIGNED-PAYLOAD: every request is a GET without a body). */

static char *cdl__rm_strdup(const coordl *L, const char *s) {
    const size_t n = strlen(s);
    char *d = cdl__malloc(L, n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

static const char *cdl__rm_env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Zeroes and frees a secret (volatile: the stores are not dropped). */
static void cdl__rm_wipe(const coordl *L, char *s) {
    if (!s) return;
    for (volatile char *p = s; *p; p++) *p = 0;
    cdl__free(L, s);
}

static void cdl__rm_s3_forget(const coordl *L, cdl__rloop *R) {
    cdl__free(L, R->s3_endpoint);
    cdl__free(L, R->s3_key);
    cdl__rm_wipe(L, R->s3_secret);
    curl_slist_free_all(R->s3_headers);
    R->s3_endpoint = R->s3_key = R->s3_secret = NULL;
    R->s3_headers = NULL;
}

/* Reads the S3 settings (once, as the loop is made). 0: out of memory; a
 * setting that cannot work is kept in s3_bad for the first s3:// open. */
static int cdl__rm_s3_env(const coordl *L, cdl__rloop *R) {
    const char *endpoint = cdl__rm_env("AWS_ENDPOINT_URL_S3"), *endpoint_var = "AWS_ENDPOINT_URL_S3";
    if (!endpoint) endpoint = cdl__rm_env(endpoint_var = "AWS_ENDPOINT_URL");
    const char *region = cdl__rm_env("AWS_REGION"), *region_var = "AWS_REGION";
    if (!region) region = cdl__rm_env(region_var = "AWS_DEFAULT_REGION");
    if (!region) region = "us-east-1", region_var = NULL;
    const char *key = cdl__rm_env("AWS_ACCESS_KEY_ID"), *secret = cdl__rm_env("AWS_SECRET_ACCESS_KEY");
    const char *token = cdl__rm_env("AWS_SESSION_TOKEN");
    R->s3_bad[0] = '\0';
    if (strlen(region) >= sizeof R->s3_region || strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(region))
        snprintf(R->s3_bad, sizeof R->s3_bad, "%s is not a region name (lower-case letters, digits and '-')",
                 region_var);
    else
        snprintf(R->s3_region, sizeof R->s3_region, "%s", region);
    snprintf(R->s3_sigv4, sizeof R->s3_sigv4, "aws:amz:%s:s3", R->s3_region);
    if (endpoint) {
        if (strncasecmp(endpoint, "http://", 7) != 0 && strncasecmp(endpoint, "https://", 8) != 0)
            snprintf(R->s3_bad, sizeof R->s3_bad, "%s must start with http:// or https://", endpoint_var);
        if (!(R->s3_endpoint = cdl__rm_strdup(L, endpoint))) return 0;
        for (size_t n = strlen(R->s3_endpoint); n > 0 && R->s3_endpoint[n - 1] == '/'; n--) R->s3_endpoint[n - 1] = '\0';
    }
    if (!key != !secret) {
        snprintf(R->s3_bad, sizeof R->s3_bad, "%s is set but %s is not", key ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                 key ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
    } else if (key) {
        if (!(R->s3_key = cdl__rm_strdup(L, key)) || !(R->s3_secret = cdl__rm_strdup(L, secret))) return 0;
        snprintf(R->s3_creds, sizeof R->s3_creds, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY%s from the environment, "
                 "region %s%s%s", token ? " with AWS_SESSION_TOKEN" : "", R->s3_region, region_var ? " from " : "",
                 region_var ? region_var : " (the default)");
    } else {
        snprintf(R->s3_creds, sizeof R->s3_creds, "none (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are unset: the "
                 "requests go unsigned, as to a public bucket)");
    }
    R->s3_headers = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (!R->s3_headers) return 0;
    if (token && key) {
        const size_t n = strlen(token) + 32;
        char *h = cdl__malloc(L, n);
        if (!h) return 0;
        snprintf(h, n, "x-amz-security-token: %s", token);
        struct curl_slist *l = curl_slist_append(R->s3_headers, h);
        cdl__rm_wipe(L, h);
        if (!l) return 0;
    }
    return 1;
}

/* Appends s percent-encoded as SigV4 canonicalises it: every byte but
 * A-Za-z0-9-_.~ (and '/' when keep_slash) as %XX, upper-case hex. */
static size_t cdl__rm_pct(char *out, const char *s, size_t n, int keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
            c == '.' || c == '~' || (keep_slash && c == '/')) {
            out[k++] = (char)c;
        } else {
            out[k++] = '%';
            out[k++] = hex[c >> 4];
            out[k++] = hex[c & 15];
        }
    }
    out[k] = '\0';
    return k;
}

/* The HTTP(S) URL of s3://bucket/key (key NULL: the bucket itself, for a
 * listing), with query appended as given (already canonical). Allocated
 * from L; NULL with why set. */
static char *cdl__rm_s3_url(const coordl *L, const cdl__rloop *R, const char *name, const char *key_or_null,
                            const char *query, char *why, size_t cap) {
    const char *bucket = name + 5, *slash = strchr(bucket, '/');
    const size_t blen = slash ? (size_t)(slash - bucket) : strlen(bucket);
    if (R->s3_bad[0]) {
        snprintf(why, cap, "%s: %s", name, R->s3_bad);
        return NULL;
    }
    if (blen == 0 || blen > 255 || strspn(bucket, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") < blen) {
        snprintf(why, cap, "%s: not s3://BUCKET/KEY (a bucket name of letters, digits, '.', '-' and '_')", name);
        return NULL;
    }
    const char *key = key_or_null ? key_or_null : "";
    const size_t klen = strlen(key), qlen = query ? strlen(query) : 0;
    const size_t n = (R->s3_endpoint ? strlen(R->s3_endpoint) : 0) + 2 * blen + strlen(R->s3_region) + 3 * klen + qlen + 64;
    char *url = cdl__malloc(L, n);
    if (!url) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    size_t k;
    if (R->s3_endpoint || memchr(bucket, '.', blen)) { /* path-style */
        if (R->s3_endpoint) k = (size_t)snprintf(url, n, "%s/%.*s", R->s3_endpoint, (int)blen, bucket);
        else k = (size_t)snprintf(url, n, "https://s3.%s.amazonaws.com/%.*s", R->s3_region, (int)blen, bucket);
        if (key_or_null) url[k++] = '/';
    } else { /* virtual-host style */
        k = (size_t)snprintf(url, n, "https://%.*s.s3.%s.amazonaws.com/", (int)blen, bucket, R->s3_region);
    }
    k += cdl__rm_pct(url + k, key, klen, 1);
    if (query) snprintf(url + k, n - k, "?%s", query);
    return url;
}

/* Logs once per handle where s3:// requests go and whose credentials
 * sign them: variable names only. */
static void cdl__rm_s3_log(const coordl *L, cdl__rloop *R) {
    pthread_mutex_lock(&R->mu);
    const int first = !R->s3_logged;
    R->s3_logged = 1;
    pthread_mutex_unlock(&R->mu);
    if (first)
        cdl__log(L, COORDL_LOG_INFO, "s3: %s; credentials: %s",
                 R->s3_endpoint ? R->s3_endpoint : "AWS (virtual-host style)", R->s3_creds);
}

/* ---- setup ---- */
static void cdl__rm_free(coordl *L, cdl__rloop *R) {
    if (!R) return;
    if (R->thread_started) {
        pthread_mutex_lock(&R->mu);
        R->stopping = 1;
        pthread_mutex_unlock(&R->mu);
        cdl__rm_wake(R);
        pthread_join(R->thread, NULL);
    }
    for (size_t i = 0; i < R->easy_n; i++) curl_easy_cleanup(R->easy_pool[i]);
    if (R->multi) curl_multi_cleanup(R->multi);
    if (R->ep >= 0) close(R->ep);
    if (R->evfd >= 0) close(R->evfd);
    for (size_t i = 0; i < R->table_cap; i++)
        for (cdl__rentry *e = R->table[i], *nx; e; e = nx) {
            nx = e->next;
            curl_slist_free_all(e->headers);
            cdl__free(L, e);
        }
    cdl__rm_s3_forget(L, R);
    cdl__free(L, R->table);
    cdl__free(L, R->easy_pool);
    pthread_mutex_destroy(&R->mu);
    pthread_cond_destroy(&R->cancel_cv);
    cdl__free(L, R);
}

/* The handle's loop, made by the first URL opened (on the opening thread,
 * while the source is indexed; a race is settled by a compare-exchange). */
static cdl__rloop *cdl__rm_get(const coordl *Lc, char *why, size_t cap) {
    coordl *L = (coordl *)Lc; /* L->rloop is the loop's slot, written once */
    cdl__rloop *R = atomic_load_explicit(&L->rloop, memory_order_acquire);
    if (R) return R;
    pthread_once(&cdl__curl_once, cdl__curl_init_once);
    if (cdl__curl_init_rc != CURLE_OK) {
        snprintf(why, cap, "libcurl did not initialise: %s", curl_easy_strerror(cdl__curl_init_rc));
        return NULL;
    }
    R = cdl__calloc(L, 1, sizeof *R);
    if (!R) {
        snprintf(why, cap, "out of memory for the remote reader");
        return NULL;
    }
    R->L = L;
    R->ep = R->evfd = -1;
    R->live.next = R->live.prev = &R->live;
    R->timer_due = UINT64_MAX;
    R->timeout_ms = L->cfg.io_timeout_ms ? L->cfg.io_timeout_ms : CDL_RM_DEFAULT_TIMEOUT_MS;
    pthread_mutex_init(&R->mu, NULL);
    pthread_cond_init(&R->cancel_cv, NULL);
    if (!cdl__rm_s3_env(L, R)) {
        snprintf(why, cap, "out of memory for the remote reader");
        cdl__rm_free(L, R);
        return NULL;
    }
    /* connections: two descriptors' worth of room each under the soft
     * limit (the process has other files open), 1024 at most */
    struct rlimit rl;
    long conns = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (long)rl.rlim_cur / 2 - 32 < conns)
        conns = (long)rl.rlim_cur / 2 - 32;
    if (conns < 4) conns = 4;
    R->easy_cap = (size_t)conns;
    R->easy_pool = cdl__calloc(L, R->easy_cap, sizeof *R->easy_pool);
    R->ep = epoll_create1(EPOLL_CLOEXEC);
    R->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    R->multi = curl_multi_init();
    if (!R->easy_pool || R->ep < 0 || R->evfd < 0 || !R->multi) {
        snprintf(why, cap, "cannot set up the remote reader's event loop: %s", strerror(errno ? errno : ENOMEM));
        cdl__rm_free(L, R);
        return NULL;
    }
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.fd = R->evfd;
    epoll_ctl(R->ep, EPOLL_CTL_ADD, R->evfd, &ev);
    curl_multi_setopt(R->multi, CURLMOPT_SOCKETFUNCTION, cdl__rm_socket_cb);
    curl_multi_setopt(R->multi, CURLMOPT_SOCKETDATA, R);
    curl_multi_setopt(R->multi, CURLMOPT_TIMERFUNCTION, cdl__rm_timer_cb);
    curl_multi_setopt(R->multi, CURLMOPT_TIMERDATA, R);
    curl_multi_setopt(R->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, conns);
    curl_multi_setopt(R->multi, CURLMOPT_MAXCONNECTS, conns);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    const int e = pthread_create(&R->thread, &attr, cdl__rm_main, R);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        snprintf(why, cap, "cannot start the remote reader's thread: %s", strerror(e));
        cdl__rm_free(L, R);
        return NULL;
    }
    R->thread_started = 1;
    cdl__rloop *expected = NULL;
    if (!atomic_compare_exchange_strong(&L->rloop, &expected, R)) {
        cdl__rm_free(L, R);
        return expected;
    }
    return R;
}

static void cdl__rm_enqueue(cdl__rloop *R, cdl__rreq *q) {
    q->state = CDL_RQ_QUEUED;
    q->next = NULL;
    pthread_mutex_lock(&R->mu);
    if (R->q_tail) R->q_tail->next = q;
    else R->q_head = q;
    R->q_tail = q;
    pthread_mutex_unlock(&R->mu);
    cdl__rm_wake(R);
}

/* One request, waited for on the calling thread. */
static coordl_status cdl__rm_sync(cdl__rloop *R, cdl__rreq *q, char *err, size_t cap) {
    pthread_cond_t cv;
    pthread_cond_init(&cv, NULL);
    q->cv = &cv;
    cdl__rm_enqueue(R, q);
    pthread_mutex_lock(&R->mu);
    while (!q->finished) pthread_cond_wait(&cv, &R->mu);
    pthread_mutex_unlock(&R->mu);
    pthread_cond_destroy(&cv);
    if (q->status != COORDL_OK) snprintf(err, cap, "%s", q->err);
    return q->status;
}

/* A table entry for url: its size and ETag as answered (If-Match from
 * then on), base headers (an s3:// object's) first; target is copied in.
 * NULL when memory runs out. */
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
        q->headers = o->s3 ? R->s3_headers : NULL;
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
            if (!slash || !slash[1] || !(o->target = cdl__rm_s3_url(L, R, o->url, slash + 1, NULL, why, sizeof why)))
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
            if (!(target = cdl__rm_s3_url(L, R, url, slash + 1, NULL, why, cap))) return COORDL_ERR_INVALID;
            cdl__rm_s3_log(L, R);
        }
        cdl__rreq q;
        memset(&q, 0, sizeof q);
        q.url = url;
        q.target = target;
        q.s3 = s3;
        q.headers = s3 ? R->s3_headers : NULL;
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

/* The next <tag>...</tag> of a ListObjectsV2 answer from *pos on, its
 * XML entities decoded, into out; *pos moves past it. 0 when there is no
 * more, or the text does not fit (cap: a key is 1,024 bytes at most). */
static int cdl__rm_xml_next(const char **pos, const char *tag, char *out, size_t cap) {
    char open[48], close[48];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *a = strstr(*pos, open);
    if (!a) return 0;
    a += strlen(open);
    const char *b = strstr(a, close);
    if (!b) return 0;
    *pos = b + strlen(close);
    size_t k = 0;
    for (const char *p = a; p < b; p++) {
        unsigned long c = (unsigned char)*p;
        const int ref = *p == '&';
        if (ref) {
            const char *semi = memchr(p, ';', (size_t)(b - p));
            if (!semi) return 0;
            const size_t n = (size_t)(semi - p - 1);
            if (n == 3 && memcmp(p + 1, "amp", 3) == 0) c = '&';
            else if (n == 2 && memcmp(p + 1, "lt", 2) == 0) c = '<';
            else if (n == 2 && memcmp(p + 1, "gt", 2) == 0) c = '>';
            else if (n == 4 && memcmp(p + 1, "quot", 4) == 0) c = '"';
            else if (n == 4 && memcmp(p + 1, "apos", 4) == 0) c = '\'';
            else if (n >= 2 && p[1] == '#') c = p[2] == 'x' ? strtoul(p + 3, NULL, 16) : strtoul(p + 2, NULL, 10);
            else return 0;
            p = semi;
        }
        if (k + 5 > cap) return 0;
        if (!ref || c < 0x80) { /* raw bytes (UTF-8 already) as they are; a reference as UTF-8 */
            out[k++] = (char)c;
        } else if (c < 0x800) {
            out[k++] = (char)(0xC0 | c >> 6);
            out[k++] = (char)(0x80 | (c & 63));
        } else if (c < 0x10000) {
            out[k++] = (char)(0xE0 | c >> 12);
            out[k++] = (char)(0x80 | (c >> 6 & 63));
            out[k++] = (char)(0x80 | (c & 63));
        } else {
            out[k++] = (char)(0xF0 | (c >> 18 & 7));
            out[k++] = (char)(0x80 | (c >> 12 & 63));
            out[k++] = (char)(0x80 | (c >> 6 & 63));
            out[k++] = (char)(0x80 | (c & 63));
        }
    }
    out[k] = '\0';
    return 1;
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
            k += cdl__rm_pct(query + k, token, strlen(token), 0);
            query[k++] = '&';
        }
        k += (size_t)snprintf(query + k, need - k, "list-type=2&prefix=");
        cdl__rm_pct(query + k, prefix, strlen(prefix), 0);
        char *target = cdl__rm_s3_url(L, R, url, NULL, query, why, cap);
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
        q.headers = R->s3_headers;
        rc = cdl__rm_sync(R, &q, why, cap);
        cdl__free(L, target);
        pages++;
        const char *body = q.dst ? (const char *)q.dst : "";
        if (rc == COORDL_OK && !strstr(body, "<ListBucketResult")) {
            snprintf(why, cap, "%s: the answer to ListObjectsV2 is not a ListBucketResult (is %s an S3 endpoint?)", url,
                     R->s3_endpoint ? R->s3_endpoint : "AWS");
            rc = COORDL_ERR_IO;
        }
        const char *pos = body;
        while (rc == COORDL_OK && cdl__rm_xml_next(&pos, "Key", key, sizeof key)) {
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
        cdl__rm_xml_next(&pos, "IsTruncated", truncated, sizeof truncated);
        pos = body;
        const int more = rc == COORDL_OK && strcmp(truncated, "true") == 0;
        if (more && !cdl__rm_xml_next(&pos, "NextContinuationToken", token, sizeof token)) {
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
