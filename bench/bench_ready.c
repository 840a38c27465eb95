/*
 * bench_ready.c - what a ready batch costs the trainer (issue 23): the
 * trainer is slower than the loader, so its next batch is always ready,
 * and coordl_next + coordl_release should cost about an atomic load and a
 * store, with no system call on the trainer's thread.
 *
 *   bench_ready --data DIR [--calls 300] [--sleep-ms 20] [--prefetch 8]
 *               [--size 64] [--group NAME] [--markers]
 *
 * Opens DIR (an image tree) with the given prefetch, takes one batch and
 * waits until the ring is full; then, --calls times: sleep --sleep-ms (the
 * trainer's step), time coordl_next + coordl_release together. Prints the
 * mean, median, p99 and max of those pairs in microseconds.
 *
 * Beside it, in the same loop (each after its own sleep, so the machine's
 * state is the same for all four), three peers: the ideal ready
 * path, an acquire load of a slot state and a release store; that with a
 * mutex lock and unlock around it; and the cost of waking a thread
 * parked on a condition variable, which a release pays when it frees half
 * the ring and a worker is parked (once per prefetch / 2 batches). On a VM
 * the floor after a sleep is not zero: the sleeping core's caches and TLB
 * are cold when the trainer wakes, and a wake-up that needs the other
 * (idle) vCPU costs an inter-processor interrupt; the peers show what
 * those cost on this machine.
 *
 * --markers: before and after each pair, a write(-1, "coordl-mark", 11)
 * (it fails with EBADF and does nothing) so that `strace -f` output shows
 * where each pair starts and ends; bench/run.sh ready counts the system
 * calls of the trainer's thread between the markers.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coordl.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {}
}

static void report(const char *what, uint64_t *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_u64);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)t[i];
    printf("  %-40s mean %7.2f us, p50 %7.2f us, p99 %7.2f us, max %8.2f us\n", what, sum / n / 1e3, t[n / 2] / 1e3,
           t[(size_t)(n * 0.99)] / 1e3, t[n - 1] / 1e3);
}

/* the peers' slot: a state word on a page of its own, as a ring's is;
 * and a thread parked on cv until `wakes` moves */
typedef struct {
    _Alignas(64) atomic_uint state;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned wakes, seen;
    int stop;
} peer_slot;

static void *parked_main(void *arg)
{
    peer_slot *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        while (p->seen == p->wakes && !p->stop) pthread_cond_wait(&p->cv, &p->mu);
        p->seen = p->wakes;
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void mark(int on)
{
    if (on) {
        ssize_t k = write(-1, "coordl-mark", 11);
        (void)k;
    }
}

int main(int argc, char **argv)
{
    const char *data = NULL, *group = NULL;
    int calls = 300, sleep_each = 20, prefetch = 8, size = 64, markers = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc) calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sleep-ms") && i + 1 < argc) sleep_each = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prefetch") && i + 1 < argc) prefetch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc) size = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--group") && i + 1 < argc) group = argv[++i];
        else if (!strcmp(argv[i], "--markers")) markers = 1;
        else {
            fprintf(stderr, "usage: bench_ready --data DIR [--calls N] [--sleep-ms MS] [--prefetch N] "
                            "[--size PX] [--group NAME] [--markers]\n");
            return 2;
        }
    }
    if (!data || calls < 1) {
        fprintf(stderr, "bench_ready: --data DIR is required\n");
        return 2;
    }
    coordl_config cfg = coordl_config_default();
    cfg.source = data;
    cfg.batch_size = 32;
    cfg.out_w = cfg.out_h = (uint32_t)size;
    cfg.prefetch_batches = (uint32_t)prefetch;
    cfg.group = group;
    cfg.group_size = 1;
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "bench_ready: %s\n", coordl_errmsg(NULL));
        return 1;
    }
    coordl_batch b;
    uint64_t *t = calloc((size_t)calls, sizeof *t), *t_atomic = calloc((size_t)calls, sizeof *t),
             *t_mutex = calloc((size_t)calls, sizeof *t),
             *t_wake = calloc((size_t)calls, sizeof *t);
    peer_slot *slot = aligned_alloc(4096, 4096);
    if (!t || !t_atomic || !t_mutex || !t_wake || !slot) {
        fprintf(stderr, "bench_ready: out of memory\n");
        return 1;
    }
    atomic_init(&slot->state, 1);
    pthread_mutex_init(&slot->mu, NULL);
    pthread_cond_init(&slot->cv, NULL);
    slot->wakes = slot->seen = 0;
    slot->stop = 0;
    pthread_t parked;
    if (pthread_create(&parked, NULL, parked_main, slot) != 0) {
        fprintf(stderr, "bench_ready: cannot start a thread\n");
        return 1;
    }
    int n = 0;
    /* the ring fills while the trainer "computes" */
    if (coordl_next(L, &b) == COORDL_OK) coordl_release(L, &b);
    sleep_ms(1000);
    while (n < calls) {
        sleep_ms(sleep_each);
        mark(markers);
        const uint64_t t0 = now_ns();
        coordl_status rc = coordl_next(L, &b);
        if (rc == COORDL_OK) coordl_release(L, &b);
        const uint64_t t1 = now_ns();
        mark(markers);
        if (rc == COORDL_END_OF_EPOCH) continue;
        if (rc != COORDL_OK) {
            fprintf(stderr, "bench_ready: coordl_next: %s\n", coordl_errmsg(L));
            return 1;
        }
        if (!markers) { /* strace's count is of coordl's pairs alone */
            sleep_ms(sleep_each);
            uint64_t a0 = now_ns();
            unsigned st = atomic_load_explicit(&slot->state, memory_order_acquire);
            atomic_store_explicit(&slot->state, st + 1, memory_order_release);
            t_atomic[n] = now_ns() - a0;
            sleep_ms(sleep_each);
            a0 = now_ns();
            pthread_mutex_lock(&slot->mu);
            st = atomic_load_explicit(&slot->state, memory_order_acquire);
            atomic_store_explicit(&slot->state, st + 1, memory_order_release);
            pthread_mutex_unlock(&slot->mu);
            t_mutex[n] = now_ns() - a0;
            sleep_ms(sleep_each); /* the parked thread has long gone back to its wait */
            a0 = now_ns();
            pthread_mutex_lock(&slot->mu);
            slot->wakes++;
            pthread_mutex_unlock(&slot->mu);
            pthread_cond_signal(&slot->cv);
            t_wake[n] = now_ns() - a0;
        }
        t[n++] = t1 - t0;
    }
    printf("ready batch, %s, prefetch %d, trainer step %d ms, %d pairs (each timed after its own sleep):\n",
           group ? "coordinated group of 1" : "one process", prefetch, sleep_each, n);
    report("coordl_next + coordl_release", t, n);
    if (!markers) {
        report("peer: acquire load + release store", t_atomic, n);
        report("peer: mutex lock/unlock around them", t_mutex, n);
        report("peer: wake a parked thread (cond signal)", t_wake, n);
    }
    pthread_mutex_lock(&slot->mu);
    slot->stop = 1;
    pthread_mutex_unlock(&slot->mu);
    pthread_cond_signal(&slot->cv);
    pthread_join(parked, NULL);
    free(t_atomic);
    free(t_mutex);
    free(t_wake);
    pthread_cond_destroy(&slot->cv);
    pthread_mutex_destroy(&slot->mu);
    free(slot);
    free(t);
    coordl_close(L);
    return 0;
}
