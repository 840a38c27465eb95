/* SPDX-License-Identifier: MIT */
/* http_state.h - the event loop's types (http.c owns them; remote.c builds
 * requests and reads objects' entries through them). They hold libcurl's
 * types, which no module outside remote sources sees. */
#ifndef CDL_HTTP_STATE_H
#define CDL_HTTP_STATE_H
#include "platform.h"
#include "s3_state.h"

typedef struct cdl__rloop cdl__rloop;

/* A finished asynchronous read (cdl__remote_submit): its status, the bytes
 * it delivered, and on failure the message naming the URL. Runs on the
 * event-loop thread: it must not block, nor submit and wait. */
typedef void (*cdl__remote_done_ptr)(void *arg, coordl_status status, uint64_t got, const char *err);
typedef cdl__remote_done_ptr cdl__remote_done_fn; /* (a plain name: tools/check-layers.py finds its owner) */

/* Counters of a handle's event loop (coordl_stats remote_*). */
typedef struct cdl__remote_counters {
    uint64_t requests;      /* HTTP requests sent (retries included)      */
    uint64_t retries;       /* of them, retries after a 5xx or a dropped
                               connection                                 */
    uint64_t bytes;         /* body bytes received into callers' buffers  */
    uint64_t max_in_flight; /* most requests in flight at once            */
} cdl__remote_counters;


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
    void *scan_obj;     /* remote.c: a chunk of the index scan's stream */
    cdl__rloop *loop;   /* the loop it went to (cdl__rm_enqueue)     */
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
    void *scan; /* remote.c's cdl__rscan: the index scan's stream, while coordl_open scans */
    cdl__remote_counters counters;
    /* the loop thread's own */
    cdl__rreq live; /* sentinel of the requests the loop holds */
    /* S3, read from the environment when the loop is made (s3.c) and
     * constant after */
    cdl__s3 s3;
    int s3_logged;                  /* R->mu: its settings were logged    */
    uint64_t in_flight, waiting;
    uint64_t timer_due;
    CURL **easy_pool;
    size_t easy_n, easy_cap;
};

#endif /* COORDL_NO_REMOTE */

#endif /* CDL_HTTP_STATE_H */
