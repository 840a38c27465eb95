/* SPDX-License-Identifier: MIT */
/*
 * http.c - the event loop under remote sources: one thread per handle
 * drives libcurl's multi interface (curl_multi_socket_action over epoll)
 * for every HTTP(S) request in flight, over a pool of keep-alive
 * connections; it starts, judges, retries and completes requests, and
 * hands each back to its waiting caller or its completion function.
 * What a request asks for (which object, which bytes, a scan's stream)
 * is remote.c's.
 *
 * Owns:  the cdl__rloop (L->rloop): its thread, libcurl's multi handle and
 *        easy handles, the submission queue, the live requests, the table
 *        of objects opened so far (URL -> size, ETag) and the counters
 * Lock:  R->mu guards the submission queue, the table and the counters;
 *        everything else belongs to the event-loop thread. Synchronous
 *        callers wait on their own condition variable under R->mu;
 *        completion functions run on the event-loop thread without R->mu
 * Calls: status, s3 (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "http_state.h"
#include "http.h"
#include "status.h"
#include "s3.h"
#include "s3_state.h"
#include "handle.h"

#ifndef COORDL_NO_REMOTE

#define CDL_RM_RETRIES 5             /* retries of one request at most          */
#define CDL_RM_BACKOFF_MS 50         /* first retry's delay; doubles each time  */
#define CDL_RM_DEFAULT_TIMEOUT_MS 30000u
#define CDL_RM_LIST_MAX (16u << 20)  /* one ListObjectsV2 page's body at most   */

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
CDL_PRIVATE cdl__rentry *cdl__rm_lookup(cdl__rloop *R, const char *url) {
    if (!R->table_cap) return NULL;
    for (cdl__rentry *e = R->table[cdl__rm_hash(url) % R->table_cap]; e; e = e->next)
        if (strcmp(e->url, url) == 0) return e;
    return NULL;
}

/* Under R->mu; 0 when memory runs out (e is then the caller's to free). */
CDL_PRIVATE int cdl__rm_insert(cdl__rloop *R, cdl__rentry *e) {
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

CDL_PRIVATE void cdl__rm_wake(cdl__rloop *R) {
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
    q->done(q->arg, q->status, q->got, q->err); /* a scan chunk's: remote.c's */
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
    if (q->s3 && R->s3.key) { /* libcurl signs (SigV4) what it sends: path,
                                 query, Host and our x-amz- headers */
        curl_easy_setopt(e, CURLOPT_USERNAME, R->s3.key);
        curl_easy_setopt(e, CURLOPT_PASSWORD, R->s3.secret);
        curl_easy_setopt(e, CURLOPT_AWS_SIGV4, R->s3.sigv4);
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
                         q->s3 ? R->s3.creds : "");
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

/* ---- setup ---- */
CDL_PRIVATE void cdl__rm_free(coordl *L, cdl__rloop *R) {
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
    cdl__s3_forget(L, &R->s3);
    cdl__free(L, R->table);
    cdl__free(L, R->easy_pool);
    pthread_mutex_destroy(&R->mu);
    pthread_cond_destroy(&R->cancel_cv);
    cdl__free(L, R);
}

/* The handle's loop, made by the first URL opened (on the opening thread,
 * while the source is indexed; a race is settled by a compare-exchange). */
CDL_PRIVATE cdl__rloop *cdl__rm_get(const coordl *Lc, char *why, size_t cap) {
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
    if (!cdl__s3_env(L, &R->s3)) {
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

CDL_PRIVATE void cdl__rm_enqueue(cdl__rloop *R, cdl__rreq *q) {
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
CDL_PRIVATE coordl_status cdl__rm_sync(cdl__rloop *R, cdl__rreq *q, char *err, size_t cap) {
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

#endif /* COORDL_NO_REMOTE */
