/* SPDX-License-Identifier: MIT */
/*
 * uring.c - local reads in flight on io_uring: one ring per handle.
 *
 * Owns:  the read-ahead's ring (made by cdl__ra_start for the built-in
 *        POSIX reader), its completion thread and the reads in it
 * Lock:  its own mutex (U->mu) guards the submission side and the
 *        counters; the completion queue belongs to the completion thread,
 *        which calls each read's done without U->mu held
 * Calls: status (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */
#include "platform.h"
#include "uring_state.h"
#include "uring.h"
#include "status.h"

/* ---- reads in flight without a thread each ----------------------------------
 * The read-ahead hands a read of an open local file here when the page
 * cache could not answer it at once (source.c tries preadv2 RWF_NOWAIT
 * first): the read goes into the kernel's submission queue and the calling
 * thread goes on; one completion thread reaps the completion queue and
 * calls the read's done. So depth N of missing reads is N reads in the
 * kernel, on one thread, instead of N threads each blocked in pread.
 * Buffered reads that miss are served by the kernel's asynchronous page
 * cache reads (ext4, xfs, btrfs): no io-wq worker threads appear here.
 * A short read is continued from where it ended, until len bytes or the
 * end of the file (a result of 0), as cdl__posix_read_at loops; -EAGAIN and
 * -EINTR are submitted again. Where the kernel refuses a ring
 * (io_uring_queue_init fails: an old kernel, a seccomp filter, the
 * RLIMIT_MEMLOCK of kernels before 5.12; or its ring cannot read: before
 * 5.6) cdl__uring_start returns NULL and
 * the read-ahead keeps its I/O threads. COORDL_NO_URING compiles all of it
 * out (no liburing). */
#ifndef COORDL_NO_URING

struct cdl__uring {
    coordl *L;               /* its handle: the test hook                  */
    struct io_uring ring;
    pthread_mutex_t mu;
    pthread_t thread;
    uint64_t in_flight;      /* reads in the ring now (under mu)           */
    cdl__uring_counters n;   /* under mu                                   */
    int stopping;            /* the stop request was submitted             */
};

enum { CDL_URING_STACK_BYTES = 256 * 1024 };
#define CDL_URING_MAX_READ ((uint64_t)1 << 30) /* bytes in one SQE (its len is 32 bits) */

/* Puts q's remaining bytes in the submission queue and submits; under
 * U->mu. 0 when the kernel refuses the submission (the SQE is taken back). */
static int cdl__uring_queue(cdl__uring *U, cdl__uring_req *q) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&U->ring);
    if (!sqe) return 0; /* never: the ring has an entry per read in flight */
    const uint64_t left = q->len - q->got;
    io_uring_prep_read(sqe, q->fd, q->dst + q->got, (unsigned)(left > CDL_URING_MAX_READ ? CDL_URING_MAX_READ : left),
                       q->off + q->got);
    io_uring_sqe_set_data(sqe, q);
    for (int tries = 0; tries < 100; tries++) {
        const int r = io_uring_submit(&U->ring);
        if (r >= 1) return 1;
        if (r != -EINTR && r != -EAGAIN && r != -EBUSY) break;
    }
    /* not consumed: make the SQE a no-op without a completion owner, so a
     * later submission carries nothing of q */
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data(sqe, U); /* U: ignored by the completion thread */
    return 0;
}

/* Starts q (q->got = 0 or the bytes already read). 1: submitted, done will
 * be called on the completion thread; 0: refused (read it another way). */
CDL_PRIVATE int cdl__uring_submit(cdl__uring *U, cdl__uring_req *q) {
    pthread_mutex_lock(&U->mu);
    const int ok = !U->stopping && cdl__uring_queue(U, q);
    if (ok) {
        U->n.reads++;
        if (++U->in_flight > U->n.max_in_flight) U->n.max_in_flight = U->in_flight;
    }
    pthread_mutex_unlock(&U->mu);
    return ok;
}

static void cdl__uring_finish(cdl__uring *U, cdl__uring_req *q, int err) {
    pthread_mutex_lock(&U->mu);
    U->in_flight--;
    pthread_mutex_unlock(&U->mu);
    q->done(q, err);
}

static void *cdl__uring_main(void *arg) {
    cdl__uring *U = arg;
    int stop_seen = 0;
    pthread_setname_np(pthread_self(), "coordl-uring");
    for (;;) {
        pthread_mutex_lock(&U->mu);
        const int drained = stop_seen && U->in_flight == 0;
        pthread_mutex_unlock(&U->mu);
        if (drained) break;
        struct io_uring_cqe *cqe;
        const int e = io_uring_wait_cqe(&U->ring, &cqe);
        if (e < 0) continue; /* -EINTR (a signal): wait again */
        void *data = io_uring_cqe_get_data(cqe);
        const int res = cqe->res;
        io_uring_cqe_seen(&U->ring, cqe);
        if (data == NULL) {
            stop_seen = 1;
            continue;
        }
        if (data == (void *)U) continue; /* a submission taken back */
        cdl__test_hook(U->L, "uring_complete"); /* a test holds completions back here */
        cdl__uring_req *q = data;
        /* q was filled in before its submission, under U->mu: taking the
         * lock orders what this thread reads of q after those writes (the
         * kernel's rings order them too, but nothing a checker such as
         * ThreadSanitizer sees; an inline completion can even arrive while
         * the submitter still holds the lock) */
        pthread_mutex_lock(&U->mu);
        pthread_mutex_unlock(&U->mu);
        if (res == -EAGAIN || res == -EINTR) {
            pthread_mutex_lock(&U->mu);
            const int again = cdl__uring_queue(U, q);
            pthread_mutex_unlock(&U->mu);
            if (!again) cdl__uring_finish(U, q, -res);
        } else if (res < 0) {
            cdl__uring_finish(U, q, -res);
        } else {
            q->got += (uint64_t)res;
            if (res == 0 || q->got >= q->len) {
                cdl__uring_finish(U, q, 0);
            } else {
                pthread_mutex_lock(&U->mu);
                const int again = cdl__uring_queue(U, q);
                pthread_mutex_unlock(&U->mu);
                if (!again) cdl__uring_finish(U, q, EIO);
            }
        }
    }
    return NULL;
}

/* A ring with room for depth reads and its completion thread, or NULL
 * (logged once: the read-ahead then uses I/O threads). COORDL_URING=0 in
 * the environment at open asks for the I/O threads (tests, and a way out
 * should a kernel misbehave). */
CDL_PRIVATE cdl__uring *cdl__uring_start(const coordl *L, uint32_t depth) {
    const char *env = getenv("COORDL_URING");
    if (env && strcmp(env, "0") == 0) {
        cdl__log(L, COORDL_LOG_INFO, "read-ahead: COORDL_URING=0: local reads in flight on I/O threads, not io_uring");
        return NULL;
    }
    cdl__uring *U = cdl__calloc(L, 1, sizeof *U);
    if (!U) return NULL;
    U->L = (coordl *)(uintptr_t)L;
    /* one entry per read in flight, and the stop request */
    const int e = io_uring_queue_init(depth + 1, &U->ring, 0);
    if (e < 0) {
        cdl__log(L, COORDL_LOG_INFO, "read-ahead: io_uring refused (%s): local reads in flight on I/O threads",
                 strerror(-e));
        cdl__free(L, U);
        return NULL;
    }
    /* IORING_OP_READ came in Linux 5.6: a ring from 5.1-5.5 would fail
     * every read with EINVAL */
    struct io_uring_probe *probe = io_uring_get_probe_ring(&U->ring);
    const int can_read = probe && io_uring_opcode_supported(probe, IORING_OP_READ);
    if (probe) io_uring_free_probe(probe);
    if (!can_read) {
        cdl__log(L, COORDL_LOG_INFO, "read-ahead: this kernel's io_uring has no IORING_OP_READ (before 5.6): local "
                 "reads in flight on I/O threads");
        io_uring_queue_exit(&U->ring);
        cdl__free(L, U);
        return NULL;
    }
    if (pthread_mutex_init(&U->mu, NULL) != 0) {
        io_uring_queue_exit(&U->ring);
        cdl__free(L, U);
        return NULL;
    }
    pthread_attr_t attr;
    int started = pthread_attr_init(&attr) == 0;
    if (started) {
        size_t stack = CDL_URING_STACK_BYTES;
        if (stack < (size_t)PTHREAD_STACK_MIN) stack = (size_t)PTHREAD_STACK_MIN;
        (void)pthread_attr_setstacksize(&attr, stack);
        started = pthread_create(&U->thread, &attr, cdl__uring_main, U) == 0;
        pthread_attr_destroy(&attr);
    }
    if (!started) {
        cdl__log(L, COORDL_LOG_INFO, "read-ahead: cannot start io_uring's completion thread: local reads in flight "
                 "on I/O threads");
        pthread_mutex_destroy(&U->mu);
        io_uring_queue_exit(&U->ring);
        cdl__free(L, U);
        return NULL;
    }
    return U;
}

CDL_PRIVATE void cdl__uring_counters_get(cdl__uring *U, cdl__uring_counters *out) {
    memset(out, 0, sizeof *out);
    if (!U) return;
    pthread_mutex_lock(&U->mu);
    *out = U->n;
    pthread_mutex_unlock(&U->mu);
}

/* Waits for the reads in the ring (they write into the caller's memory),
 * then ends the thread and the ring. No read may be submitted after. */
CDL_PRIVATE void cdl__uring_stop(const coordl *L, cdl__uring *U) {
    if (!U) return;
    pthread_mutex_lock(&U->mu);
    U->stopping = 1;
    for (;;) { /* a no-op with no owner: the completion thread's cue */
        struct io_uring_sqe *sqe = io_uring_get_sqe(&U->ring);
        if (!sqe) { /* never: the ring has an entry for it */
            (void)io_uring_submit(&U->ring);
            continue;
        }
        io_uring_prep_nop(sqe);
        io_uring_sqe_set_data(sqe, NULL);
        int r;
        do r = io_uring_submit(&U->ring);
        while (r == -EINTR || r == -EAGAIN || r == -EBUSY);
        break;
    }
    pthread_mutex_unlock(&U->mu);
    pthread_join(U->thread, NULL);
    pthread_mutex_destroy(&U->mu);
    io_uring_queue_exit(&U->ring);
    cdl__free(L, U);
}

#else /* COORDL_NO_URING: the read-ahead keeps its I/O threads */

CDL_PRIVATE cdl__uring *cdl__uring_start(const coordl *L, uint32_t depth) {
    (void)L;
    (void)depth;
    return NULL;
}
CDL_PRIVATE int cdl__uring_submit(cdl__uring *U, cdl__uring_req *q) {
    (void)U;
    (void)q;
    return 0;
}
CDL_PRIVATE void cdl__uring_counters_get(cdl__uring *U, cdl__uring_counters *out) {
    (void)U;
    memset(out, 0, sizeof *out);
}
CDL_PRIVATE void cdl__uring_stop(const coordl *L, cdl__uring *U) {
    (void)L;
    (void)U;
}
#endif
