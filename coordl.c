/* SPDX-License-Identifier: MIT */
/*
 * coordl.c - an embedded, in-process data loader for C training engines.
 *
 * GENERATED FILE: do not edit. It is the amalgamation of the modules in
 * src/ (tools/amalgamate.py, `make amalgamation`), in the layer order of
 * src/modules.txt; CI fails when it differs from them. Edit src/ and
 * regenerate. See coordl.h for the API and docs/DESIGN.md for the design.
 *
 * Modules, lowest layer first (each calls only the ones above it here):
 *   platform     build switches, system headers, clocks (header only)
 *   status       status strings, errors and logging, allocation, counters
 *   rand         counter-based randomness: (seed, stream, epoch, item) -> draws
 *   placement    cores and NUMA node(s) from hwloc, chosen at open
 *   arena        offset-addressed mmap regions (cache slab, ring)
 *   lock         the stream's shared state types and its robust lock, waits, wakes
 *   worker       a worker's scratch (per-thread buffers every stage reuses)
 *   s3           S3's addressing, credentials, SigV4's canonical URL, ListObjectsV2's XML
 *   http         the event loop: libcurl multi over epoll, requests, retries
 *   remote       http(s):// and s3:// reads: objects, ranges, the scan stream, listings
 *   io           the coordl_io seam: the POSIX reader, reads through the handle's reader
 *   uring        local reads in flight on one io_uring per handle, its completion thread
 *   index        the item table: ImageFolder and list sources, item accessors
 *   tar          WebDataset tar shards: scan and index
 *   indexfile    the saved index of tar shards: image, checks, atomic write, load
 *   source       token shards, the source dispatcher, reading one item's bytes
 *   sampler      epoch permutation, rank share, batches; llm.c's shard order
 *   jpeg_layout  JPEG marker walk, restart interval and rewrite room (no libjpeg)
 *   cache        the MinIO cache (admit until full, never evict) and the LRU one
 *   peers        the partitioned cache over MPI: map exchange, requests, serving
 *   readahead    I/O threads reading the known order ahead of the workers
 *   fetch        where a row's bytes come from: cache, peer, read-ahead, storage
 *   plan         a sample's crop geometry, drawn before decoding
 *   resample     resampling tables and the fused resize/flip/normalize pass
 *   image        decode limits; stb_image (PNG, BMP, PPM, TGA) under a budget
 *   jpeg         libjpeg decode: ROI, DCT scaling, restart-marker rewrite, splices
 *   audio        WAV parsing and the audio crop
 *   decode       tokens, the per-item decode dispatch, the rewrite budget
 *   config       defaults, validation, output geometry of a config
 *   stream       the ring and the stream state machine (claim ... repair)
 *   pool         worker threads: claim, prepare, complete; their placement
 *   group        the coordinated group: shm object, members, liveness
 *   api          the public API: open, next, release, seek, set, stats, close
 *   analyzer     stats JSON, DS-Analyzer's differential protocol and what-if
 *   abi          sized entry points and the 0.3.0 symbols
 */
#define CDL_PRIVATE static /* internal across modules, private to this file */

/* ---- src/platform.h ---------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * platform.h - build switches, system headers, clocks: the layer every
 * module stands on. Owns nothing: macros, the system's and the optional
 * libraries' headers, and the clock helpers. In module builds CDL_PRIVATE
 * is empty (extern); tools/amalgamate.py defines it static.
 */
#ifndef CDL_PLATFORM_H
#define CDL_PLATFORM_H
#ifndef CDL_PRIVATE
#define CDL_PRIVATE /* static in the amalgamation */
#endif

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* sched_getaffinity, CPU_COUNT, MAP_POPULATE */
#endif

#include "coordl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h> /* flock: the saved index's lock file */
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#ifdef __linux__
#include <linux/futex.h>
#endif
#include <signal.h>
#include <time.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h> /* AVX2 resampling, chosen at run time (resample.c) */
#endif

/* Build switches for the parts, miniaudio's MA_NO_* style: each leaves one
 * part's code out, and what that part served answers
 * COORDL_ERR_UNSUPPORTED naming the switch (the config is checked at open,
 * abi.c). The public API is the same in every build.
 *   COORDL_NO_HWLOC      placement by plain pthread affinity, no NUMA
 *   COORDL_NO_AUDIO      COORDL_PIPE_AUDIO (the WAV reader and crop)
 *   COORDL_NO_TOKENS     COORDL_PIPE_TOKENS (llm.c shard parsing, windows)
 *   COORDL_NO_ANALYZER   coordl_analyze and the report functions (the stats
 *                        and coordl_stats_json stay)
 *   COORDL_NO_STB        no stb_image: JPEG only, through libjpeg
 *   COORDL_NO_JPEGTURBO  JPEG through stb_image instead of libjpeg
 *   COORDL_STB_UPSTREAM  stb_image.h as "stb_image.h" (an upstream checkout
 *                        on the include path) instead of Debian's
 *                        <stb/stb_image.h>; COORDL_STB_IMAGE_H="path" names
 *                        any other
 *   COORDL_NO_REMOTE     no http(s):// or s3:// sources (no libcurl)
 *   COORDL_NO_URING      no io_uring (no liburing): the read-ahead's local
 *                        reads in flight are I/O threads (docs/storage.md)
 *   COORDL_MPI           the partitioned cache over MPI
 * With COORDL_NO_HWLOC, COORDL_NO_STB, COORDL_NO_REMOTE and COORDL_NO_URING, coordl.c needs no header beyond
 * the C library's and libjpeg's. */
#if defined(COORDL_NO_STB) && defined(COORDL_NO_JPEGTURBO)
#error "coordl: COORDL_NO_STB and COORDL_NO_JPEGTURBO together leave no image decoder"
#endif

#ifndef COORDL_NO_HWLOC
#include <hwloc.h>
#endif

#ifdef COORDL_MPI
#include <mpi.h>
#endif

#ifndef COORDL_NO_REMOTE
#include <curl/curl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#endif

#ifndef COORDL_NO_URING
#include <liburing.h>
#endif

#ifndef COORDL_NO_JPEGTURBO
#include <jpeglib.h>
#include <jerror.h>
#endif

#define CDL_MAX_SIDE (1 << 24) /* longest image side any decoder may report */

/* Marks the functions a ready batch runs through (coordl_next and
 * coordl_release, issue 23). GCC and Clang put them in .text.hot, next
 * to each other, whichever module they come from: after the trainer's
 * step the pair then touches two or three code pages instead of one per
 * module, and on a VM each cold page costs a page walk (bench_ready: p50
 * 9.8-10.8 -> 6.3-7.6 us, in alternating runs). */
#if defined(__GNUC__) || defined(__clang__)
#define CDL_HOT __attribute__((hot))
#else
#define CDL_HOT
#endif

#define CDL_ERRMSG_MAX 512
#define CDL_EPOCH_STATS_KEPT 16
#define CDL_SUBSTITUTE_TRIES 16

typedef unsigned char cdl__u8;

/* CPU time of the calling thread (the rewrite budget, decode.c). */
static inline uint64_t cdl__thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t cdl__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline size_t cdl__page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static inline size_t cdl__round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
/* Whether a pipeline's items are images (decoded, cropped, resampled):
 * every pipeline but tokens and audio. */
static inline int cdl__pipeline_is_image(coordl_pipeline p) {
    return p == COORDL_PIPE_TRAIN || p == COORDL_PIPE_EVAL || p == COORDL_PIPE_EXACT;
}

/* little-endian fields (WAV headers, BMP palettes) */
#if !defined(COORDL_NO_STB) || !defined(COORDL_NO_AUDIO)
static inline uint32_t cdl__le32(const cdl__u8 *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static inline uint16_t cdl__le16(const cdl__u8 *p) { return (uint16_t)(p[0] | p[1] << 8); }
#endif

/* A token shard one reading thread keeps open between its reads:
 * consecutive windows of one shard then cost one read call each, not open + stat + read + close (issue 23: four system calls a
 * token window). Owned by that thread (a worker, the consumer's helper, an
 * I/O thread); opened by source.c, closed by io.c's cdl__kept_close when
 * the thread reads another file, after a failed read (the next one opens
 * again) and when the thread ends. path is the index's
 * string, compared by address. */
typedef struct cdl__kept_file {
    const char *path;
    void *f;
    uint64_t size; /* as at open */
    /* the last block read from it: windows inside it are copied from
     * here, no read call (llm.c's batch is B consecutive windows) */
    cdl__u8 *block;
    size_t block_cap;
    uint64_t block_off, block_len;
} cdl__kept_file;

#endif /* CDL_PLATFORM_H */
/* ---- src/status_state.h ------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/* status_state.h - status codes, errors, logging, allocation, counters: the types status.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; status.h declares
 * the functions. */
#ifndef CDL_STATUS_STATE_H
#define CDL_STATUS_STATE_H

/* Every counter, once: X(name, row, stats, epoch).
 *   row:   a worker counts it per prepared row (cdl__counters), added to
 *          the handle's and the epoch's totals when the row completes;
 *   stats: a field of coordl_stats and a key of coordl_stats_json;
 *   epoch: a field of coordl_epoch_stats and a key of its JSON.
 * In coordl_stats' field order (the JSON follows it). */
#define CDL_COUNTERS(X)                 \
    X(stall_ns, 0, 1, 1)                \
    X(compute_ns, 0, 1, 1)              \
    X(batches, 0, 1, 1)                 \
    X(items, 1, 1, 1)                   \
    X(cache_hits, 1, 1, 1)              \
    X(cache_misses, 1, 1, 1)            \
    X(cache_hit_bytes, 1, 1, 1)         \
    X(cache_bytes_used, 0, 1, 0)        \
    X(cache_items, 0, 1, 0)             \
    X(cache_bytes_budget, 0, 1, 0)      \
    X(dataset_bytes, 0, 1, 0)           \
    X(fetch_bytes, 1, 0, 1)             \
    X(storage_bytes, 1, 1, 1)           \
    X(storage_reads, 1, 1, 0)           \
    X(bad_samples, 1, 1, 1)             \
    X(read_ns, 1, 1, 0)                 \
    X(read_cache_ns, 1, 1, 1)           \
    X(read_storage_ns, 1, 1, 1)         \
    X(decode_ns, 1, 1, 1)               \
    X(augment_ns, 1, 1, 1)              \
    X(wait_slot_ns, 0, 1, 0)            \
    X(threads, 0, 1, 0)                 \
    X(pinned_bytes, 0, 1, 0)            \
    X(threads_bound, 0, 1, 0)           \
    X(items_prepared, 0, 1, 0)          \
    X(group_members, 0, 1, 0)           \
    X(peer_hits, 1, 1, 0)               \
    X(peer_bytes, 1, 1, 0)              \
    X(peer_fallbacks, 1, 1, 0)          \
    X(peer_served, 0, 1, 0)             \
    X(jpeg_rewrites, 1, 1, 1)           \
    X(jpeg_rewrites_idle, 1, 1, 0)      \
    X(jpeg_rewrite_ns, 1, 1, 1)         \
    X(jpeg_rewrite_failures, 1, 1, 0)   \
    X(jpeg_spliced, 1, 1, 1)            \
    X(jpeg_rewritten_items, 0, 1, 0)    \
    X(cache_item_bytes, 0, 1, 0)        \
    X(readahead_reads, 0, 1, 0)         \
    X(readahead_read_ns, 0, 1, 0)       \
    X(readahead_skips, 0, 1, 0)         \
    X(readahead_hits, 1, 1, 0)          \
    X(readahead_wait_ns, 1, 1, 0)       \
    X(cache_bytes_requested, 0, 1, 0)   \
    X(threads_requested, 0, 1, 0)

#define CDL_IF_0(...)
#define CDL_IF_1(...) __VA_ARGS__

/* What a worker counts while preparing one row. */
typedef struct cdl__counters {
#define CDL_COUNTER_FIELD(name, row, in_stats, epoch) CDL_IF_##row(uint64_t name;)
    CDL_COUNTERS(CDL_COUNTER_FIELD)
#undef CDL_COUNTER_FIELD
} cdl__counters;

typedef struct cdl__epoch_counters {
    uint64_t epoch;
    int used;
    coordl_epoch_stats s;
} cdl__epoch_counters;

/* Counters (under the stream's lock): totals and the last epochs'. */
typedef struct cdl__stats {
    coordl_stats st;
    cdl__epoch_counters epochs[CDL_EPOCH_STATS_KEPT];
} cdl__stats;

#endif /* CDL_STATUS_STATE_H */
/* ---- src/rand_state.h -------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* rand_state.h - counter-based randomness: the types rand.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; rand.h declares
 * the functions. */
#ifndef CDL_RAND_STATE_H
#define CDL_RAND_STATE_H

enum { CDL_STREAM_PERM = 1, CDL_STREAM_CROP = 2, CDL_STREAM_SUBST = 3, CDL_STREAM_SHARD_ORDER = 4,
       CDL_STREAM_SHARD_SAMPLES = 5, CDL_STREAM_WINDOW_SHARDS = 6, CDL_STREAM_WINDOW_ITEMS = 7 };

typedef struct cdl__rng {
    uint64_t key, counter;
} cdl__rng;

#endif /* CDL_RAND_STATE_H */
/* ---- src/placement_state.h --------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* placement_state.h - placement: cores and NUMA node(s): the types placement.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; placement.h declares
 * the functions. */
#ifndef CDL_PLACEMENT_STATE_H
#define CDL_PLACEMENT_STATE_H

#define CDL_MAX_PUS 4096

typedef struct cdl__placement {
    int *worker_pus;   /* PUs for workers, cores first, then hyper-threads */
    int nworker_pus;
    int *reserved_pus;
    int nreserved;
    int ncores;        /* non-reserved cores                              */
    int node, nnodes;  /* node of the arenas (-1: several), nodes spanned  */
    int simulate;      /* topology given: compute, bind nothing           */
    int memory_bound_all; /* every arena bound so far (arena)              */
    int pin_failed;    /* some arena could not be locked (logged once)    */
    char pin_error[128];
#ifndef COORDL_NO_HWLOC
    hwloc_topology_t topo;
    hwloc_bitmap_t nodeset;
#endif
} cdl__placement;

#endif /* CDL_PLACEMENT_STATE_H */
/* ---- src/arena_state.h ------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* arena_state.h - arenas: offset-addressed mmap regions: the types arena.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; arena.h declares
 * the functions. */
#ifndef CDL_ARENA_STATE_H
#define CDL_ARENA_STATE_H

typedef struct cdl__arena {
    cdl__u8 *base;
    size_t bytes;  /* mapped length */
    int locked;    /* mlock succeeded */
    int pin_registered;
    int borrowed;  /* part of a group's shm mapping: not unmapped alone */
} cdl__arena;

#endif /* CDL_ARENA_STATE_H */
/* ---- src/lock_state.h -------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* lock_state.h - the stream's shared state and its lock: the types lock.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; lock.h declares
 * the functions. */
#ifndef CDL_LOCK_STATE_H
#define CDL_LOCK_STATE_H

enum { CDL_SLOT_FREE = 0, CDL_SLOT_FILLING, CDL_SLOT_READY };

#define CDL_MAX_MEMBERS 32
/* Readers of cached bytes per member: its workers (0..255; a worker past
 * them reads cached items by their misses, from storage), the consumer's
 * helper, the MPI peer server and the API's own calls. Item ids fit in
 * 31 bits (source.c), so a record is 32 bits: 1 KiB a member. */
#define CDL_MAX_READERS (256 + 3)
#define CDL_READER_HELPER (CDL_MAX_READERS - 3)
#define CDL_READER_PEERS (CDL_MAX_READERS - 2)
#define CDL_READER_API (CDL_MAX_READERS - 1)

/* Row marks, one uint32 per row of a slot: free, done, or claimed by one
 * generation of one member: (generation mod 2^26) << 6 | (member + 1). A
 * mark names the generation, so a member that was dropped and resumed (or
 * whose index a late joiner took) is never mistaken for the mark's owner. */
#define CDL_ROW_FREE 0u
#define CDL_ROW_DONE 0xFFFFFFFFu
#define CDL_MARK_GEN_MASK 0x3FFFFFFull

/* A batch slot. Who holds it is a set of consumer bits: a READY slot is
 * handed to every member in need_mask; it is free again when all of them
 * have released it (done_mask). A single loader is a group of one. `gen`
 * changes at every assignment and every freeing, so a claim or a batch
 * handle taken under an older generation no longer refers to the slot. */
typedef struct cdl__slot {
    int state;
    uint64_t gen;
    uint32_t need_mask, taken_mask, done_mask;
    uint64_t epoch, pos;    /* first row = position pos of the rank's share */
    uint64_t index;         /* batch number within the epoch                */
    uint32_t n;             /* rows                                         */
    uint32_t out_w, out_h;  /* row geometry when the batch was assigned     */
    size_t row_bytes;
    uint32_t rows_claimed, rows_done;
    coordl_status status;   /* first error by row order                     */
    uint32_t err_row;
    size_t data_off, labels_off, ids_off, targets_off; /* in the ring arena */
    size_t nboxes_off;      /* boxes: each row's box count (uint32)        */
    /* last: what a ready batch's next and release read is in the lines
     * above (issue 23: after the trainer's step those lines are cold) */
    char errmsg[CDL_ERRMSG_MAX];
} cdl__slot;

/* A claimed row: everything its worker needs, copied under the lock, so
 * that it never reads the slot again before completing. */
typedef struct cdl__claim {
    uint32_t slot, row;
    uint64_t slot_gen;    /* the slot's assignment the row belongs to      */
    uint32_t mark;        /* this member generation's mark on the row      */
    uint64_t epoch, pos;  /* the row is position pos of the epoch's share  */
    uint32_t out_w, out_h; /* the slot's output size (coordl_set may change
                            * cfg's while the row is prepared)      */
    size_t row_bytes;
    size_t data_off, targets_off; /* the row's place in the ring arena    */
} cdl__claim;

/* A condition to wait on under the stream's mutex. A private loader uses
 * the pthread condition variable. A group uses the sequence word with a
 * futex instead: glibc's process-shared condition variables keep state
 * per waiter, and a waiter killed in the middle of a wait leaves a later
 * broadcast blocked forever; a futex word holds no such state. `parked`
 * counts the group's threads inside (or entering) the futex wait: a wake
 * with none parked makes no system call (issue 23). */
typedef struct cdl__cond {
    pthread_cond_t cv;
    _Atomic uint32_t seq;
    _Atomic uint32_t parked;
} cdl__cond;

/* A process in the (possibly one-member) group. Its identity is (index,
 * gen): gen changes when it joins and when it is dropped. */
typedef struct cdl__member {
    _Atomic uint64_t gen;
    _Atomic int32_t pid;           /* in its own PID namespace: messages only */
    _Atomic uint32_t died_holding_lock; /* set by the repair that found this
                                      generation dead holding the stream lock
                                      (maybe before it ever took `alive`);
                                      member threads drop it and say so */
    _Atomic uint64_t heartbeat_ns; /* CLOCK_MONOTONIC, by its member thread */
    uint64_t start_epoch;          /* first epoch it consumes (late join)   */
    pthread_mutex_t alive;         /* robust, process-shared: held by the
                                      member's thread for its whole life, so
                                      the kernel releases it (EOWNERDEAD) when
                                      the process dies, in any PID namespace */
    _Atomic uint32_t reading[CDL_MAX_READERS]; /* per reader of this member:
                                      the cache entry (id + 1) whose bytes it
                                      reads now, 0: none. The record is the
                                      reference (cache.c): a rewrite looks
                                      at the live members' records, so a
                                      dead member holds nothing */
} cdl__member;

/* The stream's shared state: what every worker and consumer of the group
 * agrees on, under one robust, process-shared mutex. Lives in the handle's
 * own memory, or in the group's shm object. Section 14 owns its
 * transitions. */
typedef struct cdl__stream {
    pthread_mutex_t mu;
    cdl__cond work_cv;        /* workers wait for a free slot or row       */
    cdl__cond ready_cv;       /* consumers wait for a ready slot           */
    cdl__cond idle_cv;        /* seek/set wait for in-flight rows          */
    int32_t paused;           /* seek/set in progress: no new claims       */
    int32_t broken;           /* the ring could not be remapped            */
    uint64_t claim_epoch, claim_pos, claim_index; /* next batch to assign  */
    uint64_t cut_epoch, cut_pos; /* the batch size took effect here        */
    uint32_t inflight;        /* rows claimed and not yet done             */
    uint32_t slots_free;      /* slots in state FREE: a release reads this,
                                 not every slot's line (issue 23)          */
    _Atomic uint32_t live_mask; /* members in the group                    */
    int32_t lock_owner;       /* member holding mu (-1: none or joining),  */
    uint64_t lock_owner_gen;  /*   and its generation                      */
    int32_t lock_tid;         /* COORDL_DEBUG: thread holding mu           */
    struct {                  /* a slot assignment in progress (slot + 1) */
        uint32_t slot, n;
        uint64_t epoch, pos, index;
    } assign;
    uint32_t started;         /* group_size members joined once            */
    cdl__member members[CDL_MAX_MEMBERS];
    _Atomic uint64_t cache_used;  /* MinIO slab bytes reserved             */
    _Atomic uint64_t cache_items;
    _Atomic uint64_t cache_src_bytes; /* the cached items' bytes as read   */
    _Atomic uint64_t cache_rst_items; /* of them, held as JPEG rewrites    */
    _Atomic uint64_t cache_plain_items; /* ... JPEGs that may still be
                                           rewritten (ce->jpeg PLAIN)       */
} cdl__stream;

#define CDL_PER_SLOT 0
#define CDL_PER_ROW 1

#endif /* CDL_LOCK_STATE_H */
/* ---- src/worker_state.h ------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/* worker_state.h - a worker's scratch: the types worker.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; worker.h declares
 * the functions. */
#ifndef CDL_WORKER_STATE_H
#define CDL_WORKER_STATE_H

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
/* ---- src/s3_state.h ---------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* s3_state.h - S3's settings: the type s3.c owns (remote.c's event loop
 * holds one). */
#ifndef CDL_S3_STATE_H
#define CDL_S3_STATE_H

#ifndef COORDL_NO_REMOTE
typedef struct cdl__s3 {
    char *endpoint;             /* AWS_ENDPOINT_URL[_S3] without a trailing
                                   '/', or NULL: AWS itself               */
    char region[64];
    char sigv4[96];             /* "aws:amz:REGION:s3"                    */
    char *key, *secret;         /* NULL: requests go unsigned             */
    struct curl_slist *headers; /* x-amz-content-sha256 (and the session
                                   token)                                 */
    char creds[200];            /* where the credentials came from, by
                                   variable names only                    */
    char bad[200];              /* a setting that cannot work, or ""      */
} cdl__s3;
#endif

#endif /* CDL_S3_STATE_H */
/* ---- src/http_state.h -------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* http_state.h - the event loop's types (http.c owns them; remote.c builds
 * requests and reads objects' entries through them). They hold libcurl's
 * types, which no module outside remote sources sees. */
#ifndef CDL_HTTP_STATE_H
#define CDL_HTTP_STATE_H

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
/* ---- src/remote_state.h ------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/* remote_state.h - http(s):// and s3:// reads: remote.c keeps its state in
 * the event loop (http_state.h: the loop, its counters, the completion
 * functions of asynchronous reads); remote.h declares the functions. */
#ifndef CDL_REMOTE_STATE_H
#define CDL_REMOTE_STATE_H

/* the loop, its counters and completion functions are http.c's */
#endif /* CDL_REMOTE_STATE_H */
/* ---- src/io_state.h ---------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* io_state.h - the storage seam (coordl_io): the types io.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; io.h declares
 * the functions. */
#ifndef CDL_IO_STATE_H
#define CDL_IO_STATE_H

/* One line of a list file (cdl__list_next): not NUL-terminated. */
typedef struct cdl__list_line {
    const char *text;
    size_t len;
    uint64_t lineno; /* 1-based, counting empty lines too */
} cdl__list_line;

#endif /* CDL_IO_STATE_H */
/* ---- src/uring_state.h ------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* uring_state.h - local reads in flight on io_uring: the types uring.c owns
 * (its state, and the data it shares with other modules). handle.h composes
 * the states; uring.h declares the functions. The ring itself is private to
 * uring.c (it holds liburing's types, which no other module sees). */
#ifndef CDL_URING_STATE_H
#define CDL_URING_STATE_H

typedef struct cdl__uring cdl__uring;
typedef struct cdl__uring_req cdl__uring_req;

/* A finished read: err is 0 or an errno; q->got the bytes read (fewer than
 * q->len: the file ended there). Runs on the ring's completion thread: it
 * must not block, nor submit and wait. */
typedef void (*cdl__uring_done_ptr)(cdl__uring_req *q, int err);
typedef cdl__uring_done_ptr cdl__uring_done_fn; /* (a plain name: tools/check-layers.py finds its owner) */

/* One read of [off, off + len) of fd into dst, owned by the caller (it
 * lives in the caller's memory from submit to done: nothing is allocated
 * per read). Short reads are continued by the ring until len bytes or the
 * end of the file. */
struct cdl__uring_req {
    int fd;
    cdl__u8 *dst;
    uint64_t len, off;
    uint64_t got;            /* bytes read so far                        */
    cdl__uring_done_fn done;
};

/* Counters of a handle's ring (coordl_stats readahead_*). */
typedef struct cdl__uring_counters {
    uint64_t reads;          /* reads submitted (continuations not counted) */
    uint64_t max_in_flight;  /* most reads in the ring at once              */
} cdl__uring_counters;

#endif /* CDL_URING_STATE_H */
/* ---- src/index_state.h ------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* index_state.h - the item table: the types index.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; index.h declares
 * the functions. */
#ifndef CDL_INDEX_STATE_H
#define CDL_INDEX_STATE_H

typedef struct cdl__item {
    uint64_t path_off; /* into the string arena                        */
    uint64_t bytes;    /* encoded size at indexing                     */
    int32_t label;
} cdl__item;

/* Where a tar-shard item's bytes are while its shards are scanned (tar.c
 * fills them beside items; indexfile.c packs both into tar_refs). */
typedef struct cdl__tar_item {
    uint64_t offset; /* of the member's data in its shard               */
    uint32_t shard;  /* index into tar_shards                           */
    uint32_t txt_bytes;  /* the sample's .txt member (box labels): its  */
    uint64_t txt_offset; /* size and data offset; UINT32_MAX: none       */
} cdl__tar_item;

/* Box labels (labels = COORDL_LABELS_BOXES), read and checked at open:
 * item i's boxes are box[first[i] .. first[i + 1]), each cx, cy, w, h,
 * class as its label file gives them (normalized to the source image).
 * Read-only after open. */
typedef struct cdl__boxes {
    float (*box)[5];
    uint64_t *first;    /* num_items + 1                                  */
    uint64_t *bad;      /* per item: 0, or 1 + the string-arena offset of
                           why its label is bad (it is a bad sample)      */
    uint64_t dropped;   /* boxes beyond max_boxes                         */
    uint64_t bad_items; /* items with a bad label                         */
    uint64_t hash;      /* of every box and bad mark: group members compare */
} cdl__boxes;
/* A tar-shard item once indexed: everything a read needs, 24 bytes; its
 * name is not resident (names below). The same bytes are the items
 * section of a saved index (indexfile.c). */
typedef struct cdl__tar_ref {
    uint64_t offset; /* of the member's data in its shard               */
    uint64_t bytes;  /* the member's size                               */
    uint32_t shard;  /* index into tar_shards                           */
    int32_t label;
} cdl__tar_ref;
/* Where a tar item's .txt member (its box labels) lies in its shard: kept
 * from the scan for labels = COORDL_LABELS_BOXES (the compact index holds
 * no such member). bytes UINT32_MAX: none. */
typedef struct cdl__tar_txt {
    uint64_t offset;
    uint32_t bytes;
} cdl__tar_txt;

/* One llm.c token shard. */
typedef struct cdl__shard {
    uint64_t path_off;   /* into the string arena                          */
    uint64_t first_item; /* id of its first window                         */
    uint64_t nwindows;
    uint32_t tok_bytes;  /* 2 (uint16) or 4 (uint32)                       */
} cdl__shard;

/* A tar-shard source indexed lazily (docs/shuffle.md, "Shards indexed as
 * the window reaches them"): open lists the shards and reads none; a shard
 * is scanned when the shard-window order first needs its item count or
 * one of its items. Item ids are (shard << 32) | ordinal in the shard: unique
 * and stable whatever order the shards are reached in. A shard's count,
 * once known, is kept (O(shards)); its items (a block: refs and names) stay
 * resident while in use, at most max_resident blocks, the least recently
 * used dropped first and scanned again if needed. Everything is under mu:
 * readers copy what they need out. */
#define CDL_LAZY_UNKNOWN UINT32_MAX
#define CDL_LAZY_ID(shard, ordinal) (((uint64_t)(shard) << 32) | (uint64_t)(ordinal))
#define CDL_LAZY_SHARD(id) ((uint32_t)((id) >> 32))
#define CDL_LAZY_ORDINAL(id) ((uint32_t)((id) & 0xFFFFFFFFu))
typedef struct cdl__lazy_block {
    cdl__tar_ref *refs;  /* count of them, NULL: not resident              */
    uint32_t *name_offs; /* per item: its member name in names             */
    char *names;
    uint32_t count;
} cdl__lazy_block;
/* Scans shard s into *out (refs, names, count); on failure says why in err.
 * Set by tar.c, which owns the scan (index.c sits below it). */
typedef coordl_status (*cdl__lazy_scan_fn)(coordl *L, uint32_t shard, cdl__lazy_block *out, char *err,
                                          size_t errcap);
typedef struct cdl__lazy {
    size_t nshards;
    uint32_t *count;        /* per shard: items, or CDL_LAZY_UNKNOWN      */
    cdl__lazy_block *block; /* per shard                                  */
    uint64_t *used;         /* per shard: the tick of its last use         */
    uint8_t *scanning;      /* per shard: a thread is scanning it          */
    uint8_t *cached;        /* per shard: every item in the MinIO cache,
                               labels too (cache.c): no scan-ahead for it */
    uint32_t *resident_list; /* the shards whose block is resident        */
    size_t resident, max_resident;
    uint64_t tick;
    uint64_t counted, counted_items, counted_bytes; /* shards whose count is
                                       known, and their items' and data bytes
                                       (cdl__lazy_census)                 */
    uint64_t failed, failed_reported; /* shards whose first scan failed;
                                         those coordl_next has reported  */
    coordl_status first_fail_rc;
    char first_fail[CDL_ERRMSG_MAX];   /* the first one's message         */
    cdl__lazy_scan_fn scan;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* a scan ended                                */
    char **interned;        /* coordl_item_path's strings: kept until close */
    size_t ninterned, interned_cap;
} cdl__lazy;

/* The index module's state (index, tar and source fill it at open; it is
 * read-only after, so any thread reads it without a lock). */
typedef struct cdl__index {
    cdl__item *items;
    uint64_t num_items;
    char *strings;         /* the string arena: item and shard paths        */
    size_t strings_len, strings_cap;
    uint32_t num_classes;
    uint64_t dataset_bytes;
    cdl__shard *shards;    /* tokens pipeline only                         */
    size_t nshards;
    uint64_t *tar_shards;  /* tar sources: each shard's path (string arena) */
    size_t ntar_shards;
    cdl__tar_item *tar_items; /* tar sources while scanned: per item       */
    /* tar sources once indexed (items and tar_items are then NULL): */
    cdl__tar_ref *tar_refs;   /* per item                                  */
    const uint64_t *name_offs; /* per item: its "shard:member" in names    */
    const char *names;
    uint64_t names_len;
    void *image;              /* the saved index's bytes names point into: */
    size_t image_len;         /* a read-only mapping of index_path, or an  */
    int image_mapped;         /* allocation (no file; an MPI broadcast)    */
    int tar_refs_shared;      /* tar_refs point into a group's mapped image
                                 (not freed: indexfile.c's cdl__ix_adopt)  */
    cdl__boxes boxes;         /* labels = COORDL_LABELS_BOXES only         */
    cdl__tar_txt *tar_txt;    /* labels = COORDL_LABELS_BOXES, tar: per item */
    cdl__lazy *lazy;          /* a lazily indexed tar source, else NULL:
                                 items, tar_refs and names are then NULL
                                 and num_items is 0 until every shard's
                                 count is known                            */
} cdl__index;

#endif /* CDL_INDEX_STATE_H */
/* ---- src/source_state.h ------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/* source_state.h - token shards, the source dispatcher, reading one item's
 * bytes: the types source.c shares with other modules. handle.h composes
 * the states; source.h declares the functions. */
#ifndef CDL_SOURCE_STATE_H
#define CDL_SOURCE_STATE_H

/* An item's read in the io_uring (cdl__read_item_start), in the caller's
 * memory from start to done: nothing is allocated per read. */
typedef struct cdl__item_aread {
    cdl__uring_req q;          /* first: the ring's request (done finds us) */
    const coordl *L;
    void *file;                /* the open file, closed when the read ends */
    uint64_t id;
    uint64_t want;             /* the item's bytes                          */
    int member;                /* a tar member (short = cut short), or a
                                  plain file (short = decode what is there) */
    cdl__remote_done_fn done;  /* the caller's, as a remote read's          */
    void *arg;
    /* a read through cfg.io_async (cdl__read_item_submit) */
    uint64_t off, asked;       /* where, and the bytes asked for            */
    int grew;                  /* the file is larger than indexed: the
                                  caller reads it again through cfg.io     */
} cdl__item_aread;

#endif /* CDL_SOURCE_STATE_H */
/* ---- src/sampler_state.h ----------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* sampler_state.h - the sampler: the types sampler.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; sampler.h declares
 * the functions. */
#ifndef CDL_SAMPLER_STATE_H
#define CDL_SAMPLER_STATE_H

typedef struct cdl__perm {
    uint64_t n;
    unsigned half_bits;
    uint64_t half_mask;
    uint64_t keys[6];
    int identity;
    uint64_t epoch;
} cdl__perm;
typedef struct cdl__llmc_epoch {
    uint64_t epoch;
    int valid;
    uint32_t *order;  /* shard at visiting position i                       */
    uint64_t *prefix; /* batches before position i; prefix[nshards] = total */
} cdl__llmc_epoch;

typedef struct cdl__llmc {
    uint64_t *samples;  /* G_s per shard, in source order                    */
    uint64_t total;     /* batches per epoch: sum of G_s                     */
    pthread_mutex_t mu; /* guards ep[] and victim                            */
    cdl__llmc_epoch ep[2];
    unsigned victim;    /* entry the next new epoch replaces                 */
} cdl__llmc;

/* The shard-window order (shuffle = COORDL_SHUFFLE_SHARD_WINDOW): one
 * epoch's shard order and the prefix sums of item counts along it. */
typedef struct cdl__window_epoch {
    uint64_t epoch;
    int valid;
    uint32_t *order;  /* shard at visiting position i                       */
    uint64_t *prefix; /* items before visiting position i; prefix[nshards]
                         = num_items                                        */
    size_t known;     /* a lazy index: prefix[0..known] holds, known being
                         the end of the last window whose every shard's
                         count is known (nshards: all)                      */
} cdl__window_epoch;

typedef struct cdl__window {
    size_t nshards;
    uint64_t width;     /* shards per window (shuffle_window_shards)         */
    uint64_t *count;    /* items per shard, in source order                  */
    uint64_t *first;    /* per shard: its first id when a shard's items are
                           consecutive ids, else its first entry of by_shard */
    uint32_t *by_shard; /* NULL, or the ids grouped by shard (a tar set
                           labelled by class folders orders its ids by
                           class, not by shard): 4 bytes per item           */
    uint64_t bytes;     /* what the tables above and below hold             */
    int lazy;           /* a lazily indexed tar source: ids are
                           CDL_LAZY_ID(shard, ordinal), count[s] is
                           UINT64_MAX until shard s is scanned              */
    size_t unknown;     /* lazy: shards whose count is not known yet        */
    _Atomic uint64_t total; /* lazy: the items of the set once every count
                           is known, else 0                                 */
    int front_valid;    /* lazy: the furthest window an item was mapped in  */
    uint64_t front_epoch, front_window; /* (reset by a seek)                */
    int ahead_stop;     /* lazy: the scan-ahead threads exit                */
    pthread_cond_t ahead_cv; /* with mu: the front moved, or stop           */
    pthread_mutex_t mu; /* guards ep[] and victim                            */
    cdl__window_epoch ep[2];
    unsigned victim;    /* entry the next new epoch replaces                 */
} cdl__window;

/* The sampler's state: fixed at open, but for the batch count coordl_set
 * changes (under the stream's lock). */
typedef struct cdl__sampler {
    struct cdl__llmc *llmc; /* token_order COORDL_TOKENS_LLMC               */
    struct cdl__window *window; /* shuffle COORDL_SHUFFLE_SHARD_WINDOW     */
    uint64_t share;        /* items per rank per epoch                      */
    uint64_t bpe;          /* batches per epoch                             */
} cdl__sampler;

#endif /* CDL_SAMPLER_STATE_H */
/* ---- src/jpeg_layout_state.h ------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* jpeg_layout_state.h - the JPEG marker walk: the types jpeg_layout.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; jpeg_layout.h declares
 * the functions. */
#ifndef CDL_JPEG_LAYOUT_STATE_H
#define CDL_JPEG_LAYOUT_STATE_H

#define CDL_RST_TAG "coordl-rst"
#define CDL_RST_TAG_LEN 10
#define CDL_RST_HEAD 16        /* tag, version, 0, interval u16, rows u16     */
#define CDL_RST_MAX_ROWS ((65533u - CDL_RST_HEAD) / 4u)
#define CDL_RST_BYTES_PER_MARKER_X10 43 /* mean growth a marker, standard tables */
#define CDL_RST_ROOM_PER_MARKER_X10 65  /* reserved: above the worst file seen (6.0) */

typedef struct cdl__jpeg_layout {
    int sof;                     /* SOF marker code (0xC0 ...)                */
    uint32_t w, h;
    int ncomp, max_h, max_v;
    int subsampled;              /* some component has fewer samples: fancy
                                    upsampling reads neighbours             */
    int hsub;                    /* ... fewer columns                          */
    uint32_t mcu_w, mcu_h, mcus_per_row, mcu_rows;
    size_t sof_off, data_off;    /* SOF marker; first entropy-coded byte      */
    size_t index_off, index_len; /* our APP15 segment, marker included; 0: none */
    uint32_t interval;           /* restart interval the index records        */
} cdl__jpeg_layout;

#endif /* CDL_JPEG_LAYOUT_STATE_H */
/* ---- src/cache_state.h ------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* cache_state.h - the MinIO cache: the types cache.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; cache.h declares
 * the functions. */
#ifndef CDL_CACHE_STATE_H
#define CDL_CACHE_STATE_H

/* A cache entry lives beside the slab so that both can be shared later. */
typedef struct cdl__cache_entry {
    _Atomic uint32_t state; /* low byte CDL_CE_EMPTY / _ADMITTING / _PRESENT /
                               _REWRITING / _LOST; while ADMITTING or
                               REWRITING, the writing member's index in
                               CDL_CE_OWNER (a dropped member's half-written
                               entry is found and made LOST)                */
    uint32_t len;  /* bytes of the item as held now                         */
    uint64_t off;  /* offset of the bytes in the slab                       */
    uint32_t cap;  /* bytes reserved there: len + room for a JPEG rewrite   */
    _Atomic uint32_t jpeg; /* low byte CDL_CE_PLAIN / _RST / _KEEP /
                              _CLAIMED (+ the claiming member in
                              CDL_CE_OWNER): one owner per rewrite          */
} cdl__cache_entry;

/* LOST: left half-written by a member that was dropped; a miss for good
 * (a dropped member still running could yet write its old place), its
 * room stays counted as used. */
enum { CDL_CE_EMPTY = 0, CDL_CE_ADMITTING = 1, CDL_CE_PRESENT = 2, CDL_CE_REWRITING = 3, CDL_CE_LOST = 4 };
#define CDL_CE_STATE 0xFFu
#define CDL_CE_OWNER_SHIFT 8
#define CDL_CE_OWNER(m) ((uint32_t)(m) << CDL_CE_OWNER_SHIFT)
/* ce->jpeg: PLAIN bytes as read (may be rewritten), RST a restart-marker
 * rewrite (jpeg.c), KEEP never rewritten (not a JPEG coordl rewrites,
 * or its rewrite failed or did not fit), CLAIMED plain bytes a worker is
 * rewriting now (nobody else tries) */
enum { CDL_CE_PLAIN = 0, CDL_CE_RST = 1, CDL_CE_KEEP = 2, CDL_CE_CLAIMED = 3 };

typedef struct cdl__lru {
    pthread_mutex_t mu;
    int32_t *prev, *next; /* per item; -1 = none                            */
    cdl__u8 **data;       /* per item; NULL when not cached                 */
    uint32_t *len;
    int32_t head, tail;   /* head = most recently used                      */
    uint64_t bytes_used, items;
} cdl__lru;

/* A lazily indexed source's entries for one shard (ids (shard << 32) |
 * ordinal): allocated when the shard's first item is admitted, so a set no
 * index fits costs 8 bytes a shard plus an entry per item of the shards
 * the cache holds items of. */
typedef struct cdl__shard_entries {
    uint32_t n;
    _Atomic uint32_t present; /* entries admitted: all n, and the shard's
                                 block is needed no more (labels below)   */
    int32_t *labels;          /* the shard's n labels, after e[]: a cached
                                 item's row needs no rescan of its shard  */
    cdl__cache_entry e[];
} cdl__shard_entries;

/* The cache module's state. The entries' states are atomics (see
 * cdl__cache_entry); the slab's byte counts live in the stream (S), so a
 * group shares them. */
typedef struct cdl__cache {
    cdl__arena arena;          /* the slab                                  */
    cdl__cache_entry *entries; /* per item                                  */
    _Atomic(cdl__shard_entries *) *by_shard; /* instead, for a lazy index:
                                  per shard, NULL until it holds an item  */
    size_t nshards;
    cdl__lru *lru;             /* cache_policy LRU instead of MinIO         */
    _Atomic uint64_t idle_cursor; /* next entry an idle worker looks at for
                                     a JPEG rewrite (decode)              */
} cdl__cache;

#endif /* CDL_CACHE_STATE_H */
/* ---- src/peers_state.h ------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* peers_state.h - the partitioned cache over MPI: the types peers.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; peers.h declares
 * the functions. */
#ifndef CDL_PEERS_STATE_H
#define CDL_PEERS_STATE_H

#ifdef COORDL_MPI
#define CDL_TAG_REQ 7701
#define CDL_TAG_RESP 8192 /* + the requester's slot (< 1024): the reply is received in place */

enum { CDL_REMOTE_NONE = 0, CDL_REMOTE_WAIT, CDL_REMOTE_ARRIVED, CDL_REMOTE_FAILED };

/* Peer bookkeeping of one row of a slot. */
typedef struct cdl__remote_row {
    uint64_t id;       /* the item asked for                               */
    uint32_t off, len; /* ARRIVED: its bytes in the slot's reply buffer    */
    uint8_t state;
} cdl__remote_row;

/* What this rank asked one peer for one slot. */
typedef struct cdl__remote_ask {
    uint64_t id;        /* the request awaiting its reply; 0: none         */
    uint32_t first, n;  /* its rows: asked[first .. first + n), in order   */
} cdl__remote_ask;

/* Peer bookkeeping of one ring slot (private to this rank). Its rows'
 * state is the slot's part of peer_rows; the reply to the k-th item of a
 * request belongs to row peer_asked[first + k] (the slot's part), recorded
 * when the request was built, so filing a reply is linear in its items. */
typedef struct cdl__remote {
    uint64_t gen;          /* the slot's generation the requests were for */
    int requested;
    uint64_t request_ns;
    cdl__u8 *buf;          /* replies, received in place                 */
    size_t cap, used;
    cdl__remote_ask *ask;  /* world peers (allocated by cdl__peer_start) */
} cdl__remote;

/* The ring allocator (stream.c) sizes, grows and frees these with the
 * ring, so they always cover slot_rows_cap rows of every slot (coordl_set
 * growing the batch cannot outgrow them); grown arrays are zeroed. */
#define CDL_RING_ARRAYS_PEER(X)                     \
    X(peers, remote, cdl__remote, CDL_PER_SLOT, 0)  \
    X(peers, rows, cdl__remote_row, CDL_PER_ROW, 0) \
    X(peers, asked, uint32_t, CDL_PER_ROW, 0)

#endif /* COORDL_MPI */
#ifdef COORDL_MPI
/* A send buffer: handed to MPI_Isend, reused once MPI is done with it, so
 * the steady state allocates nothing per batch. */
enum { CDL_SEND_FREE = 0, CDL_SEND_FILLING, CDL_SEND_INFLIGHT };
typedef struct cdl__peer_send {
    MPI_Request req;
    cdl__u8 *buf;
    size_t cap;
    int state;
} cdl__peer_send;
#endif /* COORDL_MPI */

/* The peers module's state (distributed builds; a plain build keeps the
 * first fields at zero). The per-slot and per-row arrays are ring arrays
 * (CDL_RING_ARRAYS_PEER): the ring allocator sizes them with the ring.
 * Guarded by the stream's lock, but for admit_epoch (atomic) and
 * map_ready (stored with release: the I/O threads read it unlocked). */
typedef struct cdl__peers {
    int comm_set, map_ready, closing, thread_started;
    int consumer_started;         /* the trainer has asked for a batch:
                                     until then a coordl_seek (a resume)
                                     may still move the admission epoch,
                                     so the map exchange waits for it     */
    _Atomic uint64_t admit_epoch; /* whose share is cached; closed
                                     (UINT64_MAX) by the map exchange     */
    int node_rank, node_ranks;    /* MPI ranks on this node (placement)   */
#ifdef COORDL_MPI
    MPI_Comm comm;
    pthread_t thread;
    int32_t *owner;               /* per item: the rank caching it, -1    */
    struct cdl__remote *remote;   /* per slot                             */
    struct cdl__remote_row *rows; /* slot s, row r: [s * slot_rows_cap + r] */
    uint32_t *asked;              /* same layout: rows grouped by peer    */
    struct cdl__peer_send *sends; /* send buffers, reused                 */
    size_t nsends, sends_cap;
    uint64_t request_seq;
    uint64_t outstanding;         /* requests sent, replies not yet in    */
    cdl__u8 *rx;                  /* the peer thread's request buffer     */
    size_t rxcap;
#endif
} cdl__peers;

#endif /* CDL_PEERS_STATE_H */
/* ---- src/readahead_state.h --------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* readahead_state.h - read-ahead in the known order: the types readahead.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; readahead.h declares
 * the functions. */
#ifndef CDL_READAHEAD_STATE_H
#define CDL_READAHEAD_STATE_H

enum { CDL_RA_FREE = 0, CDL_RA_READING, CDL_RA_DONE, CDL_RA_FAILED, CDL_RA_SKIPPED, CDL_RA_TAKEN };

typedef struct cdl__ra_entry {
    struct cdl__readahead *ra; /* its read-ahead (an asynchronous read's completion finds it) */
    uint64_t t0;               /* when its read started                   */
    int state;
    int stale;              /* its generation was restarted: free it when done */
    int user_read;          /* in flight through the caller's cfg.io_async */
    uint64_t gen;
    uint64_t epoch, pos, id;
    uint64_t start, end;    /* its arena bytes: [start, end) in ring space    */
    uint64_t len;           /* bytes read                                     */
    uint64_t storage_bytes; /* as the reader delivered them                   */
    coordl_status status;
    char err[CDL_ERRMSG_MAX];
    cdl__item_aread aread;  /* its read while in the io_uring             */
} cdl__ra_entry;

typedef struct cdl__readahead cdl__readahead;
struct cdl__readahead {
    coordl *L;
    pthread_mutex_t mu;
    pthread_mutex_t submit_mu; /* around a caller's io_async read: one at a time */
    pthread_cond_t room_cv; /* I/O threads: an entry or arena space freed, a restart */
    pthread_cond_t done_cv; /* workers: a read finished                       */
    int stop;
    int paused;   /* a seek or set is under way: no new reads */
    uint64_t gen;
    /* the next position to read ahead, and the first not yet claimed */
    uint64_t next_epoch, next_pos, front_epoch, front_pos;
    /* what cdl__epoch_end needs, as of the last restart */
    uint64_t batch_size, share, cut_epoch, cut_pos;
    int drop_last;
    /* entries: a ring in position order; [tail, head) are live */
    cdl__ra_entry *e;
    uint32_t depth;
    uint64_t head, tail;
    /* the arena: a byte ring; [atail, ahead) in use (monotonic counters) */
    cdl__u8 *base;
    size_t bytes, map_bytes; /* the ring's size (readahead_bytes), mapped */
    uint64_t ahead, atail;
    pthread_t *threads;     /* max_threads of them, started as needed     */
    int nthreads, started;
    int max_threads;        /* readahead_threads: reads in flight at most */
    int reading;            /* I/O threads inside the reader now          */
    int room_waiters; /* I/O threads waiting for entries or arena space   */
    uint64_t async_reads; /* reads in flight on the remote event loop or
                             the io_uring                                 */
    uint64_t user_reads;  /* of them, through the caller's cfg.io_async */
    uint64_t max_user_reads; /* most of those at once                     */
    uint64_t user_last_ns; /* when the last one started (or, at close,
                              ended): coordl_close's bound               */
    int closing;          /* coordl_close: workers stop waiting for reads */
    uint64_t user_timeouts; /* io_async reads a worker stopped waiting for
                             (io_timeout_ms) and read through cfg.io     */
    int abandoned;        /* coordl_close gave up waiting for them: R and
                             the arena are left to their late dones     */
    cdl__uring *uring;    /* local reads in flight (NULL: I/O threads)    */
    uint64_t max_reading; /* most I/O threads inside the reader at once   */
    /* counters of the I/O threads (coordl_stats readahead_*) */
    uint64_t reads, read_ns, skips;
};

#endif /* CDL_READAHEAD_STATE_H */
/* ---- src/plan_state.h -------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* plan_state.h - a sample's crop geometry: the types plan.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; plan.h declares
 * the functions. */
#ifndef CDL_PLAN_STATE_H
#define CDL_PLAN_STATE_H

typedef struct cdl__geom {
    uint32_t out_w, out_h;        /* the output size it is drawn for: the
                                   * claim's snapshot, never cfg (coordl_set
                                   * writes that under the stream's lock) */
    double x0, y0, sw, sh;        /* source rectangle, float              */
    int clip_x0, clip_y0, clip_x1, clip_y1; /* pixels the filter may read */
    int flip;
    /* Darknet-style extras (0 / 1 when off) */
    float dhue, dsat, dexp; /* hue shift (turns), saturation and value scale */
    float angle;            /* rotation, radians                             */
    double daspect;         /* the aspect factor drawn                       */
    /* COORDL_CROP_DARKNET: output pixel (x, y), before the flip, samples
     * source point (m0 x + m1 y + m2, m3 x + m4 y + m5), bilinearly, black
     * outside the image; the clip rectangle holds every tap inside it. */
    int darknet;
    double m[6];
    /* A canvas (COORDL_CROP_DARKNET_BOXES, and COORDL_PIPE_EVAL's letterbox
     * with boxes; darknet = 1): only output pixels in [px0, px1) x [py0,
     * py1), before the flip, sample the image; the rest are grey (0.5),
     * Darknet's fill_image(sized, .5). */
    int canvas;
    int px0, py0, px1, py1;
    /* COORDL_CROP_SSD: a box is kept only when its centre lies inside the
     * crop (SSD's rule), then clipped */
    int centre_rule;
} cdl__geom;

#endif /* CDL_PLAN_STATE_H */
/* ---- src/resample_state.h ---------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* resample_state.h - resampling and the fused resize/flip/normalize pass: the types resample.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; resample.h declares
 * the functions. */
#ifndef CDL_RESAMPLE_STATE_H
#define CDL_RESAMPLE_STATE_H

typedef struct cdl__axis {
    int K;          /* taps per output */
    int32_t *start; /* first source index per output (absolute)            */
    float *w;       /* out x K weights                                     */
    int lo, hi;     /* source index range the table reads                  */
    float *w8;      /* AVX2 horizontal pass: w, spread for its registers
                       (cdl__axis_spread_avx2); NULL: not made           */
} cdl__axis;

#endif /* CDL_RESAMPLE_STATE_H */
/* ---- src/image_state.h ------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* image_state.h - decode limits and stb_image: the types image.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; image.h declares
 * the functions. */
#ifndef CDL_IMAGE_STATE_H
#define CDL_IMAGE_STATE_H

#define CDL_JPEG_MAX_SCANS 500 /* progressive files have ~10; libjpeg-turbo's fuzzers stop at 500 */

#endif /* CDL_IMAGE_STATE_H */
/* ---- src/audio_state.h ------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* audio_state.h - WAV audio: the types audio.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; audio.h declares
 * the functions. */
#ifndef CDL_AUDIO_STATE_H
#define CDL_AUDIO_STATE_H

/* WAV: RIFF/WAVE with a fmt chunk (PCM 16-bit, IEEE float 32-bit, or
 * WAVE_FORMAT_EXTENSIBLE with one of those) and a data chunk; other
 * chunks are skipped. */
typedef struct cdl__wav {
    const cdl__u8 *data;
    uint64_t frames;
    uint32_t rate, channels, bits, format; /* format 1 = PCM, 3 = float */
} cdl__wav;

#endif /* CDL_AUDIO_STATE_H */
/* ---- src/config_state.h ------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/* config_state.h - configuration: defaults, validation, output geometry: the types config.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; config.h declares
 * the functions. */
#ifndef CDL_CONFIG_STATE_H
#define CDL_CONFIG_STATE_H

#define CDL_DEFAULT_MAX_DECODE_BYTES (256ull << 20)
#define CDL_DEFAULT_MAX_AUDIO_SAMPLES (1ull << 26)

/* The config module's state: the copies of the caller's strings that
 * L->cfg points into (set at open, read-only after). */
typedef struct cdl__config_strings {
    char *source_copy;
    char *group_copy;
    char *topology_copy; /* cfg.topology after open (coordl_get_config) */
} cdl__config_strings;

/* Output geometry of the config in effect: computed at open and by
 * coordl_set (under the stream's lock, with the stream paused). */
typedef struct cdl__geometry {
    size_t row_bytes;      /* bytes of one output row                       */
    size_t target_row_bytes; /* tokens: bytes of one targets row; boxes:
                              one row's max_boxes x 5 floats; else 0       */
    int box_rows;          /* labels = COORDL_LABELS_BOXES: the targets are
                              boxes, and each slot holds per-row counts    */
    size_t slot_data_cap;  /* ring capacity per slot: data bytes, rows      */
    uint32_t slot_rows_cap;
    size_t elem_bytes;
    float norm_scale[3], norm_bias[3]; /* y = x * scale + bias             */
    float crop_min_ratio, crop_max_ratio; /* COORDL_CROP_DARKNET: min_crop and
                              max_crop over the out_w at open (Darknet's
                              min_ratio/max_ratio, floats as Darknet's)     */
    int avx2;              /* resample with the AVX2 loops (resample)       */
} cdl__geometry;

#endif /* CDL_CONFIG_STATE_H */
/* ---- src/stream_state.h ------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/* stream_state.h - the ring and the stream state machine: the types stream.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; stream.h declares
 * the functions. */
#ifndef CDL_STREAM_STATE_H
#define CDL_STREAM_STATE_H

/* What a worker made of its claimed row. */
typedef struct cdl__row_result {
    coordl_status status;
    uint64_t id;                   /* item used (a substitute for a bad one) */
    int32_t label;
    const cdl__u8 *staged;         /* group: the row, copied in on complete */
    const int32_t *staged_targets;
    const char *errmsg;
    uint32_t nboxes;               /* labels = COORDL_LABELS_BOXES: boxes kept */
} cdl__row_result;

/* The ring: the arena and every per-slot array (CDL_RING_ARRAYS), sized
 * by cdl__ring_alloc. In a group the arena and the shared arrays are the
 * shm object's. Slots change under the stream's lock. */
typedef struct cdl__ring {
    cdl__arena arena;
    cdl__slot *slots;
    uint32_t *row_state;   /* slot s, row r: row_state[s * slot_rows_cap + r] */
    uint32_t nslots;
} cdl__ring;

#endif /* CDL_STREAM_STATE_H */
/* ---- src/pool_state.h -------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* pool_state.h - the worker pool: the types pool.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; pool.h declares
 * the functions. */
#ifndef CDL_POOL_STATE_H
#define CDL_POOL_STATE_H

/* The pool's state: this process's workers and read-ahead (set at open,
 * stopped at close; stop is read by the workers under the stream's lock). */
/* Threads scanning a lazily indexed set's shards ahead of the order: two,
 * so one shard's scan waits on storage while another's goes on. */
#define CDL_SCAN_AHEAD_THREADS 2

typedef struct cdl__pool {
    cdl__readahead *ra;    /* read-ahead, or NULL                          */
    cdl__worker *workers;
    cdl__worker *helper;   /* tokens: the consumer's scratch for rows it
                              prepares itself (cdl__consumer_help)          */
    int nworkers;
    int stop;              /* this process's workers exit                  */
    pthread_t ahead[CDL_SCAN_AHEAD_THREADS]; /* a lazy index's scan-ahead
                              threads (cdl__scan_ahead_main)               */
    int nahead;
} cdl__pool;

#endif /* CDL_POOL_STATE_H */
/* ---- src/group_state.h ------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* group_state.h - the coordinated group: the types group.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; group.h declares
 * the functions. */
#ifndef CDL_GROUP_STATE_H
#define CDL_GROUP_STATE_H

/* Who this process is in the stream (a private loader is a group of one,
 * member 0) and, in a group, its mapping and member thread. me/my_gen are
 * set at join, under the stream's lock, and read by every layer that
 * marks rows or records the lock's owner. */
typedef struct cdl__membership {
    int me;                /* this process's member index                  */
    uint64_t my_gen;       /* and the generation it joined with            */
    uint32_t bit;          /* 1u << me                                     */
    void *shm_base;        /* the group's mapping, or NULL                 */
    uint64_t shm_bytes;
    char shm_name[224];
    pthread_t thread;      /* group: liveness, heartbeat, reaping          */
    int thread_started;
    pthread_mutex_t mu;    /* guards stop; cv wakes the thread             */
    pthread_cond_t cv;
    int stop;
    int running;           /* the member thread holds the liveness lock    */
    int sync_ready;        /* mu and cv initialised                        */
    uint32_t timeout_ms;   /* the group's liveness timeout: the creator's
                              group_timeout_ms, held by the object, so every
                              member judges silence alike (until attached:
                              this member's own)                           */
} cdl__membership;

#endif /* CDL_GROUP_STATE_H */
/* ---- src/api_state.h --------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* api_state.h - the public API: the types api.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; api.h declares
 * the functions. */
#ifndef CDL_API_STATE_H
#define CDL_API_STATE_H

/* The consumer: the trainer's thread's position and timing (only the
 * consumer thread writes them; stall_tail_ns is read by stats). */
typedef struct cdl__consumer {
    uint32_t held;            /* batches this consumer holds               */
    uint64_t cur_epoch, cur_pos, cur_index; /* next batch to hand out      */
    uint32_t next_slot;       /* where that batch most likely is: the slot
                                 after the last taken (cdl__stream_find) */
    uint64_t last_return_ns;  /* when the consumer's last coordl call ended */
    _Atomic uint64_t stall_tail_ns; /* its time after the last counted point */
    uint64_t stall_tail_epoch;
} cdl__consumer;

/* The API's one reader record on the MinIO cache (CDL_READER_API): calls
 * that may run on any thread (coordl_sample_transform) take mu while they
 * read a cache entry in place, so two of them never share the record. */
typedef struct cdl__api_reader {
    pthread_mutex_t mu;
} cdl__api_reader;

#endif /* CDL_API_STATE_H */
/* ---- src/handle.h ------------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/* handle.h - struct coordl, the composition of every module's state. It sits
 * above every module: any .c may include it, no header may. */
#ifndef CDL_HANDLE_H
#define CDL_HANDLE_H

/* The handle: the composition of every module's state. Each member names
 * the module that owns it (its header says which lock guards it); a module
 * writes only its own members. */
struct coordl {
    coordl_config cfg;           /* config: the effective settings          */
    cdl__config_strings conf;    /* config: the strings cfg points into     */
    coordl_allocator alloc;      /* status: the allocator hooks             */
    const coordl_io *io;         /* io: cfg.io, or the built-in POSIX reader */
    cdl__rloop *_Atomic rloop;  /* remote: the event loop, made at the
                                    first URL the built-in reader opens    */
    cdl__index index;            /* index, tar, source                      */
    cdl__sampler sampler;        /* sampler                                 */
    cdl__geometry geom;          /* config: output geometry                 */
    cdl__cache cache;            /* cache                                   */
    cdl__ring ring;              /* stream                                  */
    cdl__stream *S;              /* lock: own memory, or the group's object */
    void (*lock_repair)(coordl *L, int dead, uint64_t dead_gen); /* stream's
                                    repair, run by the lock on EOWNERDEAD  */
    cdl__membership member;      /* group                                   */
    cdl__peers peers;            /* peers                                   */
    cdl__placement place;        /* placement                               */
    cdl__pool pool;              /* pool                                    */
    cdl__consumer consumer;      /* api                                     */
    cdl__api_reader api_reader;  /* api                                     */
    cdl__stats stats;            /* status                                  */
    char errmsg[CDL_ERRMSG_MAX]; /* status: the last error's detail         */
};
#endif /* CDL_HANDLE_H */
/* ---- src/status.h ------------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/* status.h - status codes, errors, logging, allocation, counters: the types and functions other modules use (see status.c). */
#ifndef CDL_STATUS_H
#define CDL_STATUS_H

/* ---- interface ---- */
CDL_PRIVATE void cdl__free(const coordl *L, void *p);
CDL_PRIVATE void *cdl__malloc(const coordl *L, size_t n);
CDL_PRIVATE void *cdl__realloc(const coordl *L, void *p, size_t n);
#ifdef COORDL_DEBUG
CDL_PRIVATE void cdl__debug_assert(const coordl *L, int ok, const char *what);
CDL_PRIVATE int cdl__gettid(void);
#endif
CDL_PRIVATE coordl_status cdl__open_fail(coordl_status s, const char *fmt, ...);
CDL_PRIVATE void cdl__log(const coordl *L, coordl_log_level level, const char *fmt, ...);
CDL_PRIVATE int cdl__reserve(const coordl *L, void **buf, size_t *cap, size_t need);
CDL_PRIVATE void *cdl__calloc(const coordl *L, size_t count, size_t size);
CDL_PRIVATE void cdl__test_hook(coordl *L, const char *point);
CDL_PRIVATE void cdl__vformat(char *dst, size_t cap, const char *fmt, va_list ap);
CDL_PRIVATE void cdl__default_log(void *user, coordl_log_level level, const char *msg);
CDL_PRIVATE void cdl__default_free(void *u, void *p);
CDL_PRIVATE void *cdl__default_malloc(void *u, size_t n);
CDL_PRIVATE void *cdl__default_realloc(void *u, void *p, size_t n);
CDL_PRIVATE _Thread_local char cdl__open_errmsg[CDL_ERRMSG_MAX];
#endif /* CDL_STATUS_H */
/* ---- src/rand.h -------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* rand.h - counter-based randomness: the types and functions other modules use (see rand.c). */
#ifndef CDL_RAND_H
#define CDL_RAND_H

/* ---- interface ---- */
CDL_PRIVATE uint64_t cdl__hash4(uint64_t seed, uint64_t stream, uint64_t a, uint64_t b);
CDL_PRIVATE uint64_t cdl__mix64(uint64_t z);
CDL_PRIVATE uint64_t cdl__rng_below(cdl__rng *r, uint64_t n);
CDL_PRIVATE cdl__rng cdl__rng_for(uint64_t seed, uint64_t stream, uint64_t epoch, uint64_t item);
CDL_PRIVATE uint64_t cdl__rng_next(cdl__rng *r);
CDL_PRIVATE double cdl__rng_uniform(cdl__rng *r);
#endif /* CDL_RAND_H */
/* ---- src/placement.h --------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* placement.h - placement: cores and NUMA node(s): the types and functions other modules use (see placement.c). */
#ifndef CDL_PLACEMENT_H
#define CDL_PLACEMENT_H

/* ---- interface ---- */
CDL_PRIVATE int cdl__placement_bind_memory(coordl *L, void *p, size_t bytes);
CDL_PRIVATE void cdl__format_pu_list(const int *pus, int n, char *buf, size_t cap);
CDL_PRIVATE coordl_status cdl__placement_choose(coordl *L, cdl__placement *P);
CDL_PRIVATE void cdl__placement_free(coordl *L, cdl__placement *P);
#endif /* CDL_PLACEMENT_H */
/* ---- src/arena.h ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* arena.h - arenas: offset-addressed mmap regions: the types and functions other modules use (see arena.c). */
#ifndef CDL_ARENA_H
#define CDL_ARENA_H

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__arena_map(coordl *L, cdl__arena *a, size_t bytes, int populate, const char *what,
                                         const char *lower);
CDL_PRIVATE void cdl__arena_advise_huge(void *p, size_t bytes);
CDL_PRIVATE void cdl__arena_unmap(coordl *L, cdl__arena *a);
CDL_PRIVATE void cdl__arena_borrow(coordl *L, cdl__arena *a, void *base, size_t bytes, const char *what);
#endif /* CDL_ARENA_H */
/* ---- src/lock.h -------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* lock.h - the stream's shared state and its lock: the types and functions other modules use (see lock.c). */
#ifndef CDL_LOCK_H
#define CDL_LOCK_H

/* ---- interface ---- */
/* COORDL_DEBUG: the calling thread holds the stream's lock. */
#ifdef COORDL_DEBUG
#define cdl__assert_locked(L) cdl__debug_assert((L), (L)->S->lock_tid == cdl__gettid(), "stream lock not held by this thread")
#else
#define cdl__assert_locked(L) ((void)0)
#endif

CDL_PRIVATE void cdl__broadcast(coordl *L, cdl__cond *c);
CDL_PRIVATE void cdl__lock(coordl *L);
CDL_PRIVATE void cdl__unlock(coordl *L);
CDL_PRIVATE void cdl__wait_ms(coordl *L, cdl__cond *c, int ms);
CDL_PRIVATE void cdl__signal(coordl *L, cdl__cond *c);
CDL_PRIVATE void cdl__wait(coordl *L, cdl__cond *c);
CDL_PRIVATE void cdl__lock_acquired(coordl *L, int e);
CDL_PRIVATE void cdl__signal_unlocked(coordl *L, cdl__cond *c);
CDL_PRIVATE int cdl__mutex_lock_until(pthread_mutex_t *mu, uint64_t deadline_ns);
CDL_PRIVATE int cdl__mutex_held(pthread_mutex_t *mu, int e);
#endif /* CDL_LOCK_H */
/* ---- src/worker.h ------------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/* worker.h - a worker's scratch: the types and functions other modules use (see worker.c). */
#ifndef CDL_WORKER_H
#define CDL_WORKER_H

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__worker_error(cdl__worker *W, coordl_status s, const char *fmt, ...);
CDL_PRIVATE void cdl__budget_row(cdl__worker *W, uint64_t busy_ns);
#ifndef COORDL_NO_JPEGTURBO
CDL_PRIVATE void cdl__budget_rewrite(cdl__worker *W, uint64_t ns);
CDL_PRIVATE void cdl__budget_decode(cdl__worker *W, int spliced, uint64_t ns);
CDL_PRIVATE int cdl__budget_allows(const cdl__worker *W, double f);
#endif
#endif /* CDL_WORKER_H */
/* ---- src/s3.h ---------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* s3.h - S3's addressing, credentials and canonical form: the functions other modules use (see s3.c). */
#ifndef CDL_S3_H
#define CDL_S3_H

/* ---- interface ---- */
#ifndef COORDL_NO_REMOTE
CDL_PRIVATE int cdl__s3_env(const coordl *L, cdl__s3 *R);
CDL_PRIVATE void cdl__s3_forget(const coordl *L, cdl__s3 *R);
CDL_PRIVATE size_t cdl__s3_pct(char *out, const char *s, size_t n, int keep_slash);
CDL_PRIVATE char *cdl__s3_url(const coordl *L, const cdl__s3 *R, const char *name, const char *key_or_null,
                              const char *query, char *why, size_t cap);
CDL_PRIVATE int cdl__s3_xml_next(const char **pos, const char *tag, char *out, size_t cap);
#endif
#endif /* CDL_S3_H */
/* ---- src/http.h -------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* http.h - the event loop under remote sources: the functions other modules use (see http.c). */
#ifndef CDL_HTTP_H
#define CDL_HTTP_H

/* ---- interface ---- */
#ifndef COORDL_NO_REMOTE
CDL_PRIVATE cdl__rentry *cdl__rm_lookup(cdl__rloop *R, const char *url);
CDL_PRIVATE int cdl__rm_insert(cdl__rloop *R, cdl__rentry *e);
CDL_PRIVATE void cdl__rm_wake(cdl__rloop *R);
CDL_PRIVATE void cdl__rm_free(coordl *L, cdl__rloop *R);
CDL_PRIVATE cdl__rloop *cdl__rm_get(const coordl *Lc, char *why, size_t cap);
CDL_PRIVATE void cdl__rm_enqueue(cdl__rloop *R, cdl__rreq *q);
CDL_PRIVATE coordl_status cdl__rm_sync(cdl__rloop *R, cdl__rreq *q, char *err, size_t cap);
#endif
#endif /* CDL_HTTP_H */
/* ---- src/remote.h ------------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/* remote.h - http(s):// and s3:// reads: the functions other modules use (see remote.c). */
#ifndef CDL_REMOTE_H
#define CDL_REMOTE_H

/* ---- interface ---- */
CDL_PRIVATE int cdl__remote_is_url(const char *path);
CDL_PRIVATE coordl_status cdl__remote_open(const coordl *L, const char *url, void **file, uint64_t *size, char *why, size_t cap);
CDL_PRIVATE coordl_status cdl__remote_read(const coordl *L, void *file, void *buf, uint64_t len, uint64_t off, uint64_t *got, char *err, size_t cap);
CDL_PRIVATE coordl_status cdl__remote_list(const coordl *L, const char *url, char **text, size_t *len, char *why, size_t cap);
CDL_PRIVATE void cdl__remote_close(const coordl *L, void *file);
CDL_PRIVATE void cdl__remote_scan_begin(const coordl *L, const char *const *urls, size_t n);
CDL_PRIVATE void cdl__remote_scan_end(const coordl *L);
CDL_PRIVATE void cdl__remote_sequential(void *file);
CDL_PRIVATE void cdl__remote_etag(const void *file, char *out, size_t cap);
CDL_PRIVATE int cdl__remote_submit(const coordl *L, const char *url, uint64_t off, uint64_t len, void *dst, const void *owner, cdl__remote_done_fn done, void *arg);
CDL_PRIVATE void cdl__remote_cancel(const coordl *L, const void *owner);
CDL_PRIVATE void cdl__remote_counters_get(const coordl *L, cdl__remote_counters *out);
CDL_PRIVATE void cdl__remote_destroy(coordl *L);
#endif /* CDL_REMOTE_H */
/* ---- src/io.h ---------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* io.h - the storage seam (coordl_io): the types and functions other modules use (see io.c). */
#ifndef CDL_IO_H
#define CDL_IO_H

/* ---- interface ---- */
CDL_PRIVATE void cdl__io_close(const coordl *L, void *file);
CDL_PRIVATE void cdl__kept_close(const coordl *L, cdl__kept_file *k);
CDL_PRIVATE void cdl__kept_free(const coordl *L, cdl__kept_file *k);
CDL_PRIVATE void cdl__io_sequential(const coordl *L, void *file);
CDL_PRIVATE void cdl__io_etag(const coordl *L, const void *file, char *out, size_t cap);
CDL_PRIVATE coordl_status cdl__io_open(const coordl *L, const char *path, void **file, uint64_t *size, char *why, size_t cap);
CDL_PRIVATE coordl_status cdl__io_read(const coordl *L, void *file, const char *path, void *buf, uint64_t len, uint64_t off, uint64_t *got, char *err, size_t cap);
CDL_PRIVATE int cdl__list_next(const char *text, size_t len, size_t *pos, cdl__list_line *out);
CDL_PRIVATE int cdl__list_path(const coordl *L, const char *list, const char *name, size_t n, char **buf, size_t *cap,
                               size_t *path_len);
CDL_PRIVATE coordl_status cdl__io_slurp(coordl *L, const char *path, const char *what, char **out, size_t *len);
CDL_PRIVATE const coordl_io cdl__posix_io;
CDL_PRIVATE void cdl__posix_close(void *user, void *file);
CDL_PRIVATE int cdl__posix_fd(void *file);
CDL_PRIVATE int cdl__posix_open_why(const char *path, void **file, uint64_t *size, const char **why);
#endif /* CDL_IO_H */
/* ---- src/uring.h ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* uring.h - local reads in flight on io_uring: the functions other modules use (see uring.c). */
#ifndef CDL_URING_H
#define CDL_URING_H

/* ---- interface ---- */
CDL_PRIVATE cdl__uring *cdl__uring_start(const coordl *L, uint32_t depth);
CDL_PRIVATE int cdl__uring_submit(cdl__uring *U, cdl__uring_req *q);
CDL_PRIVATE void cdl__uring_counters_get(cdl__uring *U, cdl__uring_counters *out);
CDL_PRIVATE void cdl__uring_stop(const coordl *L, cdl__uring *U);
#endif /* CDL_URING_H */
/* ---- src/index.h ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* index.h - the item table: the types and functions other modules use (see index.c). */
#ifndef CDL_INDEX_H
#define CDL_INDEX_H

/* ---- interface ---- */
CDL_PRIVATE int cdl__strings_append(coordl *L, const char *s, size_t n, uint64_t *off);
CDL_PRIVATE int cdl__wanted_file(const coordl *L, const char *name);
CDL_PRIVATE coordl_status cdl__index_image_folder(coordl *L, const char *root);
CDL_PRIVATE coordl_status cdl__index_list_text(coordl *L, const char *list, const char *text, size_t len);
CDL_PRIVATE const char *cdl__item_path(const coordl *L, uint64_t id);
CDL_PRIVATE const char *cdl__item_name(const coordl *L, uint64_t id, char *buf, size_t cap);
CDL_PRIVATE const cdl__shard *cdl__shard_of(const coordl *L, uint64_t id);
CDL_PRIVATE uint64_t cdl__item_bytes(const coordl *L, uint64_t id);
CDL_PRIVATE int32_t cdl__item_label(const coordl *L, uint64_t id);
CDL_PRIVATE coordl_status cdl__lazy_init(coordl *L, cdl__lazy_scan_fn scan, size_t max_resident);
CDL_PRIVATE void cdl__lazy_free(coordl *L);
CDL_PRIVATE void cdl__lazy_block_free(const coordl *L, cdl__lazy_block *b);
CDL_PRIVATE void cdl__lazy_adopt(const coordl *L, uint32_t s, cdl__lazy_block *b);
CDL_PRIVATE coordl_status cdl__lazy_count(const coordl *L, uint32_t s, uint32_t *count, char *err, size_t errcap);
CDL_PRIVATE coordl_status cdl__lazy_census(const coordl *L, size_t most, uint64_t *items, uint64_t *bytes,
                                      uint64_t *counted, int *exact);
CDL_PRIVATE int cdl__lazy_id_known(const coordl *L, uint64_t id);
CDL_PRIVATE int cdl__lazy_new_failure(const coordl *L, coordl_status *rc, char *msg, size_t cap);
CDL_PRIVATE int cdl__lazy_prefetch(const coordl *L, uint32_t s);
CDL_PRIVATE int cdl__lazy_ready(const coordl *L, uint32_t s);
CDL_PRIVATE coordl_status cdl__lazy_labels(const coordl *L, uint32_t s, int32_t *out, uint32_t n);
CDL_PRIVATE void cdl__lazy_mark_cached(const coordl *L, uint32_t s);
CDL_PRIVATE const cdl__tar_ref *cdl__tar_ref_of(const coordl *L, uint64_t id, cdl__tar_ref *copy, coordl_status *rc,
                                                char *err, size_t errcap);
CDL_PRIVATE coordl_status cdl__lazy_ref(const coordl *L, uint64_t id, cdl__tar_ref *ref, char *name, size_t namecap,
                                        char *err, size_t errcap);
#endif /* CDL_INDEX_H */
/* ---- src/tar.h --------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* tar.h - WebDataset tar shards: the types and functions other modules use (see tar.c). */
#ifndef CDL_TAR_H
#define CDL_TAR_H

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__index_tar(coordl *L, int kind, const char *list_text, size_t list_len);
CDL_PRIVATE int cdl__is_tar_name(const char *p);
CDL_PRIVATE coordl_status cdl__tar_list_shards(coordl *L, int kind, const char *list_text, size_t list_len);
CDL_PRIVATE int cdl__tar_lazy_possible(const coordl *L);
CDL_PRIVATE int cdl__tar_lazy_open(coordl *L, coordl_status *rc);
#endif /* CDL_TAR_H */
/* ---- src/indexfile.h --------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* indexfile.h - the saved index of a tar-shard source: the types and functions other modules use (see indexfile.c). */
#ifndef CDL_INDEXFILE_H
#define CDL_INDEXFILE_H

/* cdl__ix_check's verdicts besides 0 (sound) */
#define CDL_IX_FOREIGN 1
#define CDL_IX_CORRUPT 2

/* cdl__ix_adopt's `mapped`: where the image lives */
#define CDL_IX_HEAP 0          /* a cdl__malloc allocation L then owns       */
#define CDL_IX_MAPPED 1        /* a mapping of index_path: items copied      */
#define CDL_IX_MAPPED_SHARED 2 /* a mapping of a group's index: items stay   */

/* ---- interface ---- */
CDL_PRIVATE uint64_t cdl__ix_checksum(const cdl__u8 *p, size_t n);
CDL_PRIVATE int cdl__ix_check(const cdl__u8 *p, size_t n, const char *source, int audio, char *why, size_t cap);
CDL_PRIVATE void cdl__ix_release(coordl *L);
CDL_PRIVATE coordl_status cdl__ix_adopt(coordl *L, cdl__u8 *p, size_t n, int mapped);
CDL_PRIVATE int cdl__ix_write(const cdl__u8 *p, size_t n, const char *path, char *why, size_t cap);
CDL_PRIVATE coordl_status cdl__index_tar_saved(coordl *L, int kind, const char *text, size_t len);
CDL_PRIVATE int cdl__ix_group_path(const coordl *L, char *buf, size_t cap);
CDL_PRIVATE void cdl__ix_group_remove(const coordl *L);
#ifdef COORDL_MPI
CDL_PRIVATE coordl_status cdl__index_from_image(coordl *L, cdl__u8 *p, size_t n);
CDL_PRIVATE coordl_status cdl__index_from_shared(coordl *L, cdl__u8 *p, size_t n);
#endif
#endif /* CDL_INDEXFILE_H */
/* ---- src/source.h ------------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/* source.h - token shards, the source dispatcher, reading one item: the types and functions other modules use (see source.c). */
#ifndef CDL_SOURCE_H
#define CDL_SOURCE_H

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__read_item(const coordl *L, cdl__kept_file *kept, uint64_t id, cdl__u8 **buf, size_t *cap, int grow, int *too_big, uint64_t *len, uint64_t *storage_bytes, char *err, size_t errcap);
CDL_PRIVATE int cdl__read_item_async(const coordl *L, uint64_t id, cdl__u8 *dst, size_t cap, const void *owner, cdl__remote_done_fn done, void *arg);
CDL_PRIVATE int cdl__read_item_start(const coordl *L, cdl__uring *U, cdl__item_aread *a, uint64_t id, cdl__u8 *dst, size_t cap, coordl_status *rc, uint64_t *len, uint64_t *storage_bytes, char *err, size_t errcap, cdl__remote_done_fn done, void *arg);
CDL_PRIVATE coordl_status cdl__read_item_result(cdl__item_aread *a, int64_t result, uint64_t *got, char *why, size_t cap);
CDL_PRIVATE int cdl__read_item_submit(const coordl *L, cdl__item_aread *a, uint64_t id, cdl__u8 *dst, size_t cap, coordl_io_done_fn done, void *arg);
CDL_PRIVATE coordl_status cdl__read_file(cdl__worker *W, uint64_t id, cdl__bytes *out);
CDL_PRIVATE coordl_status cdl__index_source(coordl *L);
#endif /* CDL_SOURCE_H */
/* ---- src/sampler.h ----------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* sampler.h - the sampler: the types and functions other modules use (see sampler.c). */
#ifndef CDL_SAMPLER_H
#define CDL_SAMPLER_H

/* ---- interface ---- */
CDL_PRIVATE uint64_t cdl__item_at(const coordl *L, const cdl__perm *p, uint64_t pos);
CDL_PRIVATE uint64_t cdl__item_at_hinted(const coordl *L, const cdl__perm *p, uint64_t pos, cdl__item_hint *h);
CDL_PRIVATE cdl__perm cdl__perm_for(const coordl *L, uint64_t epoch);
CDL_PRIVATE uint64_t cdl__epoch_end_at(uint64_t share, uint64_t B, int drop_last, uint64_t cut_epoch, uint64_t cut_pos,
                                       uint64_t epoch);
CDL_PRIVATE uint64_t cdl__epoch_end(const coordl *L, uint64_t epoch);
CDL_PRIVATE uint64_t cdl__batches_for(const coordl *L, uint64_t B);
CDL_PRIVATE void cdl__llmc_free(coordl *L);
CDL_PRIVATE coordl_status cdl__llmc_init(coordl *L);
CDL_PRIVATE void cdl__llmc_locate(const coordl *L, uint64_t epoch, uint64_t k, uint64_t *shard_pos, uint64_t *sample_pos, uint32_t *shard);
CDL_PRIVATE const cdl__llmc_epoch *cdl__llmc_table(const coordl *L, uint64_t epoch);
CDL_PRIVATE coordl_status cdl__window_init(coordl *L);
CDL_PRIVATE void cdl__window_free(coordl *L);
CDL_PRIVATE uint64_t cdl__sampler_bytes(const coordl *L);
CDL_PRIVATE int cdl__sampler_known(const coordl *L, uint64_t epoch, uint64_t pos, int scan);
CDL_PRIVATE uint64_t cdl__sampler_num_items(const coordl *L);
CDL_PRIVATE int cdl__sampler_settle(coordl *L);
CDL_PRIVATE size_t cdl__sampler_ahead(const coordl *L, uint32_t *out, size_t cap);
CDL_PRIVATE void cdl__sampler_ahead_scan(const coordl *L, uint32_t s);
CDL_PRIVATE void cdl__sampler_ahead_stop(const coordl *L);
CDL_PRIVATE void cdl__sampler_seeked(const coordl *L);
CDL_PRIVATE uint64_t cdl__sample_key(const coordl *L, uint64_t id);
/* cdl__item_at past a lazily indexed epoch's end (found late) */
#define CDL_NO_ITEM UINT64_MAX
#endif /* CDL_SAMPLER_H */
/* ---- src/jpeg_layout.h ------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* jpeg_layout.h - the JPEG marker walk: the types and functions other modules use (see jpeg_layout.c). */
#ifndef CDL_JPEG_LAYOUT_H
#define CDL_JPEG_LAYOUT_H

/* ---- interface ---- */
CDL_PRIVATE size_t cdl__rst_room(const cdl__u8 *p, size_t len);
CDL_PRIVATE int cdl__jpeg_walk(const cdl__u8 *p, size_t len, cdl__jpeg_layout *lay);
CDL_PRIVATE uint32_t cdl__rst_interval(const cdl__jpeg_layout *lay, size_t len);
#endif /* CDL_JPEG_LAYOUT_H */
/* ---- src/cache.h ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* cache.h - the MinIO cache: the types and functions other modules use (see cache.c). */
#ifndef CDL_CACHE_H
#define CDL_CACHE_H

/* ---- interface ---- */
CDL_PRIVATE _Atomic uint32_t *cdl__cache_reader(coordl *L, uint32_t k);
CDL_PRIVATE int cdl__cache_holds(const coordl *L, uint64_t id);
CDL_PRIVATE int cdl__cache_label(const coordl *L, uint64_t id, int32_t *label);
CDL_PRIVATE int cdl__cache_minio(const coordl *L);
#ifdef COORDL_MPI
CDL_PRIVATE uint32_t cdl__cache_room(const coordl *L, uint64_t id);
#endif
CDL_PRIVATE const cdl__u8 *cdl__cache_acquire_minio(coordl *L, _Atomic uint32_t *reader, uint64_t id, uint32_t *len,
                                               int *kind, uint32_t *cap);
CDL_PRIVATE void cdl__cache_admit_lru(coordl *L, uint64_t id, const cdl__u8 *bytes, size_t len);
CDL_PRIVATE int cdl__cache_admit_minio(coordl *L, uint64_t id, const cdl__u8 *bytes, size_t len, uint32_t *cap_out);
CDL_PRIVATE int cdl__cache_lookup_lru(coordl *L, uint64_t id, cdl__u8 *dst, size_t cap, uint32_t *len);
CDL_PRIVATE void cdl__cache_release_minio(_Atomic uint32_t *reader);
CDL_PRIVATE void cdl__cache_drop_member(coordl *L, int m);
#ifndef COORDL_NO_JPEGTURBO
CDL_PRIVATE int cdl__cache_claim_rewrite(coordl *L, uint64_t id);
CDL_PRIVATE void cdl__cache_unclaim_rewrite(coordl *L, uint64_t id);
CDL_PRIVATE void cdl__cache_keep_minio(coordl *L, uint64_t id);
CDL_PRIVATE int cdl__cache_replace_minio(coordl *L, const _Atomic uint32_t *self, uint64_t id, const cdl__u8 *bytes,
                                    size_t len);
#endif
CDL_PRIVATE coordl_status cdl__cache_clamp(coordl *L);
CDL_PRIVATE coordl_status cdl__cache_create(coordl *L);
CDL_PRIVATE void cdl__cache_destroy(coordl *L);
#endif /* CDL_CACHE_H */
/* ---- src/peers.h ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* peers.h - the partitioned cache over MPI: the types and functions other modules use (see peers.c). */
#ifndef CDL_PEERS_H
#define CDL_PEERS_H

/* ---- interface ---- */
CDL_PRIVATE int cdl__peer_map_pending(coordl *L, uint64_t epoch);
CDL_PRIVATE int cdl__peer_admits(coordl *L, uint64_t epoch);
#ifdef COORDL_MPI
CDL_PRIVATE int cdl__peer_fetch(cdl__worker *W, uint64_t id, cdl__bytes *out);
#endif
CDL_PRIVATE int cdl__peer_claim_waits(coordl *L, uint64_t epoch);
#ifdef COORDL_MPI
CDL_PRIVATE void cdl__peer_request_slot(coordl *L, uint32_t s);
CDL_PRIVATE void cdl__peer_close(coordl *L);
CDL_PRIVATE coordl_status cdl__peer_open(coordl *L);
#endif
CDL_PRIVATE void cdl__peer_seek(coordl *L, uint64_t epoch, uint64_t batch);
CDL_PRIVATE void cdl__peer_consumer_started(coordl *L);
#ifdef COORDL_MPI
CDL_PRIVATE coordl_status cdl__peer_start(coordl *L);
CDL_PRIVATE coordl_status cdl__peer_index(coordl *L);
#endif
#endif /* CDL_PEERS_H */
/* ---- src/readahead.h --------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* readahead.h - read-ahead in the known order: the types and functions other modules use (see readahead.c). */
#ifndef CDL_READAHEAD_H
#define CDL_READAHEAD_H

/* ---- interface ---- */
CDL_PRIVATE int cdl__ra_wait(cdl__worker *W, cdl__ra_entry *x, cdl__bytes *out, coordl_status *rc);
CDL_PRIVATE void cdl__ra_pause(coordl *L);
CDL_PRIVATE void cdl__ra_restart(coordl *L, int keep);
CDL_PRIVATE void cdl__ra_release(coordl *L, cdl__ra_entry *x);
CDL_PRIVATE void cdl__ra_closing(coordl *L);
CDL_PRIVATE int cdl__ra_is_closing(coordl *L);
CDL_PRIVATE void cdl__ra_stop(coordl *L);
CDL_PRIVATE cdl__ra_entry *cdl__ra_take(coordl *L, uint64_t epoch, uint64_t pos, uint64_t id);
CDL_PRIVATE coordl_status cdl__ra_start(coordl *L);
#endif /* CDL_READAHEAD_H */
/* ---- src/fetch.h ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* fetch.h - where a row's bytes come from: the types and functions other modules use (see fetch.c). */
#ifndef CDL_FETCH_H
#define CDL_FETCH_H

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__fetch(cdl__worker *W, uint64_t id, cdl__bytes *out);
CDL_PRIVATE void cdl__fetch_done(cdl__worker *W);
#endif /* CDL_FETCH_H */
/* ---- src/plan.h -------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* plan.h - a sample's crop geometry: the types and functions other modules use (see plan.c). */
#ifndef CDL_PLAN_H
#define CDL_PLAN_H

/* ---- interface ---- */
CDL_PRIVATE void cdl__plan(const coordl *L, uint32_t out_w, uint32_t out_h, uint64_t epoch, uint64_t id, int W, int H,
                           cdl__geom *g);
CDL_PRIVATE void cdl__plan_row(cdl__worker *W, uint64_t epoch, uint64_t id, int iw, int ih, cdl__geom *g);
CDL_PRIVATE uint32_t cdl__boxes_map(const coordl *L, const cdl__geom *g, int iw, int ih, uint64_t id, void *out);
#ifndef COORDL_NO_JPEGTURBO
CDL_PRIVATE int cdl__choose_dct_denominator(const cdl__geom *g);
CDL_PRIVATE void cdl__geom_scale(cdl__geom *g, int d, int scaled_w, int scaled_h);
#endif
#endif /* CDL_PLAN_H */
/* ---- src/resample.h ---------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* resample.h - resampling and the fused resize/flip/normalize pass: the types and functions other modules use (see resample.c). */
#ifndef CDL_RESAMPLE_H
#define CDL_RESAMPLE_H

/* ---- interface ---- */
CDL_PRIVATE void cdl__resample(coordl *L, cdl__worker *W, const cdl__u8 *src, size_t stride, int sx0, int sy0, const cdl__axis *ax, const cdl__axis *ay, const cdl__geom *g, void *dst);
CDL_PRIVATE coordl_status cdl__tables_for(cdl__worker *W, const cdl__geom *g, cdl__axis *ax, cdl__axis *ay);
CDL_PRIVATE uint64_t cdl__window_bytes(const cdl__geom *g, const cdl__axis *ax, const cdl__axis *ay);
CDL_PRIVATE int cdl__resample_use_avx2(void);
#endif /* CDL_RESAMPLE_H */
/* ---- src/image.h ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* image.h - decode limits and stb_image: the types and functions other modules use (see image.c). */
#ifndef CDL_IMAGE_H
#define CDL_IMAGE_H

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__check_image_size(cdl__worker *W, const char *path, int64_t iw, int64_t ih);
CDL_PRIVATE coordl_status cdl__name_error(cdl__worker *W, const char *path, coordl_status rc);
CDL_PRIVATE coordl_status cdl__over_decode_limit(cdl__worker *W, const char *path, const char *what, uint64_t need);
CDL_PRIVATE coordl_status cdl__decode_stb(cdl__worker *W, const char *path, const cdl__bytes *in, uint64_t epoch, uint64_t id, void *dst);
CDL_PRIVATE coordl_status cdl__stb_header(cdl__worker *W, const char *path, const cdl__bytes *in, int *iw, int *ih, int *comp);
#endif /* CDL_IMAGE_H */
/* ---- src/jpeg.h -------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* jpeg.h - libjpeg decode and JPEG random access: the types and functions other modules use (see jpeg.c). */
#ifndef CDL_JPEG_H
#define CDL_JPEG_H

/* ---- interface ---- */
#ifndef COORDL_NO_JPEGTURBO
CDL_PRIVATE coordl_status cdl__decode_jpeg(cdl__worker *W, const char *path, const cdl__bytes *in, uint64_t epoch, uint64_t id, void *dst, const cdl__jpeg_layout *rst);
CDL_PRIVATE boolean cdl__jdest_full(j_compress_ptr c);
CDL_PRIVATE void cdl__jdest_init(j_compress_ptr c);
CDL_PRIVATE void cdl__jdest_term(j_compress_ptr c);
CDL_PRIVATE void cdl__jpeg_emit_message(j_common_ptr cinfo, int level);
CDL_PRIVATE void cdl__jpeg_error_exit(j_common_ptr cinfo);
CDL_PRIVATE size_t cdl__jpeg_rewrite(cdl__worker *W, const cdl__u8 *src, size_t len, size_t room, int small, cdl__jpeg_layout *got, int *too_big);
CDL_PRIVATE void cdl__jpeg_scan_limit(j_common_ptr cinfo);
#endif
#endif /* CDL_JPEG_H */
/* ---- src/audio.h ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* audio.h - WAV audio: the types and functions other modules use (see audio.c). */
#ifndef CDL_AUDIO_H
#define CDL_AUDIO_H

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__decode_wav(cdl__worker *W, const char *path, const cdl__bytes *in, uint64_t epoch, uint64_t id, void *dst);
CDL_PRIVATE uint64_t cdl__audio_offset(const coordl *L, uint64_t epoch, uint64_t id, uint64_t n);
CDL_PRIVATE coordl_status cdl__wav_open(cdl__worker *W, const char *path, const cdl__bytes *in, cdl__wav *wav, uint64_t *n_out);
#endif /* CDL_AUDIO_H */
/* ---- src/decode.h ------------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/* decode.h - the per-item decode dispatch: the types and functions other modules use (see decode.c). */
#ifndef CDL_DECODE_H
#define CDL_DECODE_H

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__prepare_item(cdl__worker *W, uint64_t epoch, uint64_t id, void *dst);
#ifndef COORDL_NO_JPEGTURBO
CDL_PRIVATE int cdl__rewrite_idle(cdl__worker *W, cdl__counters *done);
#endif
CDL_PRIVATE void cdl__worker_decoder_init(cdl__worker *W);
CDL_PRIVATE coordl_status cdl__image_size(cdl__worker *W, const char *path, const cdl__bytes *in, int *iw, int *ih);
#endif /* CDL_DECODE_H */
/* ---- src/config.h ------------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/* config.h - configuration: defaults, validation, output geometry: the types and functions other modules use (see config.c). */
#ifndef CDL_CONFIG_H
#define CDL_CONFIG_H

/* ---- interface ---- */
CDL_PRIVATE void cdl__row_shape(const coordl *L, uint32_t out_w, uint32_t out_h, uint32_t *c, uint32_t *h, uint32_t *w);
CDL_PRIVATE size_t cdl__row_bytes_at(const coordl *L, uint32_t out_w, uint32_t out_h);
CDL_PRIVATE void cdl__output_setup(coordl *L);
CDL_PRIVATE coordl_status cdl__validate(const coordl_config *c);
CDL_PRIVATE coordl_config cdl__config_default(void);
#endif /* CDL_CONFIG_H */
/* ---- src/stream.h ------------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/* stream.h - the ring and the stream state machine: the types and functions other modules use (see stream.c). */
#ifndef CDL_STREAM_H
#define CDL_STREAM_H

/* ---- interface ---- */
CDL_PRIVATE void cdl__stream_repair(coordl *L, int dead, uint64_t dead_gen);
CDL_PRIVATE int cdl__stream_claim(coordl *L, cdl__claim *c, int idle);
CDL_PRIVATE void cdl__stream_complete(coordl *L, const cdl__claim *c, const cdl__counters *counters, const cdl__row_result *r);
CDL_PRIVATE int cdl__member_current(const coordl *L);
CDL_PRIVATE int cdl__member_is(const cdl__stream *S, int m, uint64_t gen);
CDL_PRIVATE void cdl__ring_layout(coordl *L);
CDL_PRIVATE size_t cdl__ring_slot_bytes(const coordl *L, uint32_t rows_cap, size_t data_cap, size_t *data, size_t *labels, size_t *ids);
#ifdef COORDL_DEBUG
CDL_PRIVATE void cdl__stream_check(const coordl *L, const char *transition);
#else
#define cdl__stream_check(L, transition) ((void)0)
#endif
CDL_PRIVATE void cdl__stream_drop_member(coordl *L, int m, uint64_t gen);
CDL_PRIVATE coordl_status cdl__stream_init(cdl__stream *S, int pshared);
CDL_PRIVATE cdl__epoch_counters *cdl__epoch_entry(coordl *L, uint64_t epoch);
CDL_PRIVATE coordl_status cdl__ring_alloc(coordl *L, uint32_t rows_cap, size_t data_cap);
CDL_PRIVATE void cdl__ring_free(coordl *L);
CDL_PRIVATE int cdl__stream_find(const coordl *L);
CDL_PRIVATE void cdl__stream_pause(coordl *L);
CDL_PRIVATE int cdl__stream_holds(const coordl *L, const coordl_batch *b);
CDL_PRIVATE int cdl__stream_release(coordl *L, const coordl_batch *b);
CDL_PRIVATE void cdl__stream_restart(coordl *L, int same_order);
CDL_PRIVATE coordl_status cdl__stream_take(coordl *L, uint32_t s, coordl_batch *out);
CDL_PRIVATE int cdl__stream_try_claim(coordl *L, cdl__claim *c);
#endif /* CDL_STREAM_H */
/* ---- src/pool.h -------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* pool.h - the worker pool: the types and functions other modules use (see pool.c). */
#ifndef CDL_POOL_H
#define CDL_POOL_H

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__pool_start(coordl *L);
CDL_PRIVATE void cdl__pool_stop(coordl *L);
CDL_PRIVATE void cdl__worker_prepare(cdl__worker *W, const cdl__claim *c, cdl__row_result *r);
#endif /* CDL_POOL_H */
/* ---- src/group.h ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* group.h - the coordinated group: the types and functions other modules use (see group.c). */
#ifndef CDL_GROUP_H
#define CDL_GROUP_H

/* ---- interface ---- */
CDL_PRIVATE void cdl__group_leave(coordl *L);
CDL_PRIVATE coordl_status cdl__group_open(coordl *L);
CDL_PRIVATE void cdl__member_thread_stop(coordl *L);
#endif /* CDL_GROUP_H */
/* ---- src/api.h --------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* api.h - the public API: the types and functions other modules use (see api.c). */
#ifndef CDL_API_H
#define CDL_API_H

/* ---- interface ---- */
CDL_PRIVATE void cdl__get_config(const coordl *L, coordl_config *out);
CDL_PRIVATE coordl_status cdl__get_epoch_stats(const coordl *L, uint64_t epoch, coordl_epoch_stats *out);
CDL_PRIVATE void cdl__get_stats(const coordl *L, coordl_stats *out);
CDL_PRIVATE coordl_status cdl__next(coordl *L, coordl_batch *out);
CDL_PRIVATE coordl_status cdl__open(const coordl_config *cfg, coordl **out);
CDL_PRIVATE coordl_status cdl__sample_transform(coordl *L, uint64_t epoch, uint64_t id, coordl_transform *out);
#endif /* CDL_API_H */
/* ---- src/analyzer.h ---------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/* analyzer.h - DS-Analyzer: the types and functions other modules use (see analyzer.c). */
#ifndef CDL_ANALYZER_H
#define CDL_ANALYZER_H

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__analyze(const coordl_config *cfg, coordl_step_fn step_fn, void *user, const coordl_analyze_opts *opts_in, coordl_report *r);
CDL_PRIVATE uint32_t cdl__ra_threads_for(uint32_t depth);
CDL_PRIVATE void cdl__report_free(coordl_report *r);
CDL_PRIVATE void cdl__analyze_opts_default(coordl_analyze_opts *o);
CDL_PRIVATE size_t cdl__report_svg(const coordl_report *r, const coordl_measured *m, size_t nm, char *buf, size_t cap);
CDL_PRIVATE size_t cdl__report_json(const coordl_report *r, char *buf, size_t cap);
CDL_PRIVATE coordl_whatif cdl__report_predict(const coordl_report *r, double f, int threads, double storage_mb_per_s);
CDL_PRIVATE coordl_whatif cdl__report_predict_ra(const coordl_report *r, double f, int threads, double storage_mb_per_s, uint32_t depth, uint32_t io_threads);
#endif /* CDL_ANALYZER_H */
/* ---- src/status.c ------------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/*
 * status.c - status codes, errors, logging, allocation, counters.
 *
 * Every failure becomes a coordl_status plus a message naming the file
 * or setting. Memory comes from the configured allocator (all three
 * hooks or none); nothing here calls exit().
 *
 * Owns:  the handle's error detail (L->errmsg), its allocator hooks
 *        (L->alloc), its counters (L->stats), and the one state outside any
 *        handle: the thread-local message of the last failed coordl_open
 * Lock:  L->stats under the stream's lock; L->errmsg is written by the
 *        thread whose call failed (the API is one consumer thread); the
 *        allocator is fixed at open
 * Calls: none (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */

/* The message of the last failed coordl_open on this thread (the handle
 * does not exist yet, so it cannot hold it; tj3GetErrorStr(NULL) does the
 * same). This is the only state outside a handle. */
CDL_PRIVATE _Thread_local char cdl__open_errmsg[CDL_ERRMSG_MAX];

CDL_PRIVATE void *cdl__default_malloc(void *u, size_t n) { (void)u; return malloc(n); }
CDL_PRIVATE void *cdl__default_realloc(void *u, void *p, size_t n) { (void)u; return realloc(p, n); }
CDL_PRIVATE void cdl__default_free(void *u, void *p) { (void)u; free(p); }

CDL_PRIVATE void cdl__default_log(void *user, coordl_log_level level, const char *msg) {
    static const char *names[] = {"error", "warning", "info", "debug"};
    (void)user;
    fprintf(stderr, "coordl %s: %s\n", names[level <= COORDL_LOG_DEBUG ? level : 3], msg);
}

CDL_PRIVATE void *cdl__malloc(const coordl *L, size_t n) {
    return L->alloc.malloc_fn(L->alloc.user, n ? n : 1);
}
CDL_PRIVATE void *cdl__calloc(const coordl *L, size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) return NULL;
    void *p = cdl__malloc(L, count * size);
    if (p) memset(p, 0, count * size);
    return p;
}
CDL_PRIVATE void *cdl__realloc(const coordl *L, void *p, size_t n) {
    return L->alloc.realloc_fn(L->alloc.user, p, n ? n : 1);
}
CDL_PRIVATE void cdl__free(const coordl *L, void *p) {
    if (p) L->alloc.free_fn(L->alloc.user, p);
}

#ifdef COORDL_DEBUG
CDL_PRIVATE int cdl__gettid(void) {
#ifdef SYS_gettid
    return (int)syscall(SYS_gettid);
#else
    return 0;
#endif
}
#endif

CDL_PRIVATE void cdl__test_hook(coordl *L, const char *point) {
    if (L->cfg.test_hook) L->cfg.test_hook(L->cfg.test_hook_user, point);
}

CDL_PRIVATE void cdl__vformat(char *dst, size_t cap, const char *fmt, va_list ap) {
    vsnprintf(dst, cap, fmt, ap);
}

CDL_PRIVATE void cdl__log(const coordl *L, coordl_log_level level, const char *fmt, ...) {
    char msg[CDL_ERRMSG_MAX + 64];
    va_list ap;
    if (!L->cfg.log || level > L->cfg.log_level) return;
    va_start(ap, fmt);
    cdl__vformat(msg, sizeof msg, fmt, ap);
    va_end(ap);
    L->cfg.log(L->cfg.log_user, level, msg);
}

/* Record the detail of an open failure and return its status. */
CDL_PRIVATE coordl_status cdl__open_fail(coordl_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cdl__vformat(cdl__open_errmsg, sizeof cdl__open_errmsg, fmt, ap);
    va_end(ap);
    return s;
}

/* Grow *buf to at least need bytes (amortised doubling); 0 on failure. */
CDL_PRIVATE int cdl__reserve(const coordl *L, void **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 1;
    size_t ncap = *cap ? *cap : 4096;
    while (ncap < need) ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    void *p = cdl__realloc(L, *buf, ncap);
    if (!p) return 0;
    *buf = p;
    *cap = ncap;
    return 1;
}

#ifdef COORDL_DEBUG
/* COORDL_DEBUG: a broken invariant stops the process here, where it broke,
 * instead of as a wrong batch much later (release builds compile it out). */
CDL_PRIVATE void cdl__debug_assert(const coordl *L, int ok, const char *what) {
    (void)L;
    if (ok) return;
    fprintf(stderr, "coordl (COORDL_DEBUG): %s\n", what);
    abort();
}
#endif /* COORDL_DEBUG */
/* ---- src/rand.c -------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * rand.c - counter-based randomness.
 *
 * Every random choice is a pure function of (seed, stream, epoch, item):
 * a keyed SplitMix64 hash, with a counter for draws within one sample.
 * Nothing depends on which thread, process or machine asks, so batches
 * are identical across thread counts and after seek (no replay).
 *
 * Owns:  nothing: every draw is a pure function of (seed, stream, epoch,
 *        item, counter)
 * Lock:  none
 * Calls: none (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */

CDL_PRIVATE uint64_t cdl__mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

CDL_PRIVATE uint64_t cdl__hash4(uint64_t seed, uint64_t stream, uint64_t a, uint64_t b) {
    uint64_t h = cdl__mix64(seed ^ 0x243f6a8885a308d3ull);
    h = cdl__mix64(h ^ (stream * 0x9e3779b97f4a7c15ull));
    h = cdl__mix64(h ^ (a + 0x13198a2e03707344ull));
    return cdl__mix64(h ^ (b * 0xa4093822299f31d1ull + 0x082efa98ec4e6c89ull));
}

CDL_PRIVATE cdl__rng cdl__rng_for(uint64_t seed, uint64_t stream, uint64_t epoch, uint64_t item) {
    cdl__rng r = {cdl__hash4(seed, stream, epoch, item), 0};
    return r;
}

CDL_PRIVATE uint64_t cdl__rng_next(cdl__rng *r) {
    r->counter++;
    return cdl__mix64(r->key + r->counter * 0x9e3779b97f4a7c15ull);
}

/* Uniform in [0, 1) with 53 bits. */
CDL_PRIVATE double cdl__rng_uniform(cdl__rng *r) {
    return (double)(cdl__rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n), n > 0: the high word of a 64x64 multiply
 * (Lemire), in portable C; bias below n / 2^64. */
CDL_PRIVATE uint64_t cdl__rng_below(cdl__rng *r, uint64_t n) {
    uint64_t x = cdl__rng_next(r);
    uint64_t xl = x & 0xffffffffu, xh = x >> 32, nl = n & 0xffffffffu, nh = n >> 32;
    uint64_t ll = xl * nl, lh = xl * nh, hl = xh * nl, hh = xh * nh;
    uint64_t mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
    return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}

/* ---- src/placement.c --------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * placement.c - placement: cores and NUMA node(s).
 *
 * Chooses, once at open, the PUs the workers run on and the NUMA
 * node(s) the cache and ring live on: from cpuset, numa_node,
 * pci_bus_id, or every PU the process may use, in that order. Physical
 * cores come before hyper-threads; the first reserve_cores cores are
 * left to the trainer. hwloc supplies the topology (this machine, or an
 * XML/synthetic one for planning and tests); without it
 * (COORDL_NO_HWLOC) each PU is a core and there is no NUMA placement.
 *
 * Owns:  L->place: the PUs the workers run on, the reserved ones, the
 *        arenas' node, and whether pinning and binding worked
 * Lock:  written at open (and by arena at open), read-only after
 * Calls: status (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */

/* Strict "0-7,16-23" parser into a membership array. */
static int cdl__parse_pu_list(const char *text, unsigned char *in) {
    const char *p = text;
    int any = 0;
    memset(in, 0, CDL_MAX_PUS);
    while (*p) {
        if (*p < '0' || *p > '9') return 0;
        long a = strtol(p, (char **)&p, 10), b = a;
        if (*p == '-') {
            p++;
            if (*p < '0' || *p > '9') return 0;
            b = strtol(p, (char **)&p, 10);
        }
        if (a < 0 || b < a || b >= CDL_MAX_PUS) return 0;
        for (long i = a; i <= b; i++) in[i] = 1;
        any = 1;
        if (*p == ',') {
            p++;
            if (!*p) return 0;
        } else if (*p) {
            return 0;
        }
    }
    return any;
}

/* "0,2,4-6" from a list of PUs (any order), into buf. */
CDL_PRIVATE void cdl__format_pu_list(const int *pus, int n, char *buf, size_t cap) {
    unsigned char in[CDL_MAX_PUS];
    memset(in, 0, sizeof in);
    for (int i = 0; i < n; i++)
        if (pus[i] >= 0 && pus[i] < CDL_MAX_PUS) in[pus[i]] = 1;
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < CDL_MAX_PUS && len + 24 < cap; i++) {
        if (!in[i]) continue;
        int j = i;
        while (j + 1 < CDL_MAX_PUS && in[j + 1]) j++;
        int w = j > i ? snprintf(buf + len, cap - len, "%s%d-%d", len ? "," : "", i, j)
                      : snprintf(buf + len, cap - len, "%s%d", len ? "," : "", i);
        if (w > 0) len += (size_t)w;
        i = j;
    }
}

/* Builds the ordered worker list from cores given as PU groups: `core_of`
 * lists PUs core by core, `core_start[k]..core_start[k+1]` being core k. */
static coordl_status cdl__place_from_cores(coordl *L, cdl__placement *P, const int *pus,
                                           const int *core_start, int ncores) {
    /* Several MPI ranks on one node with the default placement: each takes
     * its own contiguous slice of the cores instead of all piling onto the
     * first ones (measured: 4 ranks on one PU ran at half the speed). */
    if (L->peers.node_ranks > 1 && !L->cfg.cpuset && L->cfg.numa_node < 0 && !L->cfg.pci_bus_id) {
        int lo = (int)((int64_t)ncores * L->peers.node_rank / L->peers.node_ranks);
        int hi = (int)((int64_t)ncores * (L->peers.node_rank + 1) / L->peers.node_ranks);
        if (hi <= lo) { lo = L->peers.node_rank % ncores; hi = lo + 1; }
        core_start += lo;
        ncores = hi - lo;
    }
    const int reserve = L->cfg.reserve_cores;
    if (reserve >= ncores)
        return cdl__open_fail(COORDL_ERR_INVALID, "reserve_cores: %d leaves no core for the workers "
                              "(the chosen set has %d core%s)", reserve, ncores, ncores == 1 ? "" : "s");
    int total = core_start[ncores];
    P->worker_pus = cdl__malloc(L, (size_t)total * sizeof(int));
    P->reserved_pus = cdl__malloc(L, (size_t)total * sizeof(int) + sizeof(int));
    if (!P->worker_pus || !P->reserved_pus) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    for (int k = 0; k < reserve; k++)
        for (int i = core_start[k]; i < core_start[k + 1]; i++) P->reserved_pus[P->nreserved++] = pus[i];
    /* round r takes the r-th PU of every remaining core */
    for (int r = 0;; r++) {
        int added = 0;
        for (int k = reserve; k < ncores; k++)
            if (core_start[k] + r < core_start[k + 1]) {
                P->worker_pus[P->nworker_pus++] = pus[core_start[k] + r];
                added = 1;
            }
        if (!added) break;
    }
    P->ncores = ncores - reserve;
    return COORDL_OK;
}

static coordl_status cdl__allowed_pus(unsigned char *allowed) {
    cpu_set_t set;
    memset(allowed, 0, CDL_MAX_PUS);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return cdl__open_fail(COORDL_ERR_INVALID, "cannot read this process's CPU affinity: %s", strerror(errno));
    for (int i = 0; i < CDL_MAX_PUS && i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &set)) allowed[i] = 1;
    return COORDL_OK;
}

static coordl_status cdl__check_cpuset(const coordl *L, const unsigned char *allowed, unsigned char *chosen) {
    if (!cdl__parse_pu_list(L->cfg.cpuset, chosen))
        return cdl__open_fail(COORDL_ERR_INVALID, "cpuset: \"%s\" is not a list like \"0-7,16-23\"", L->cfg.cpuset);
    for (int i = 0; i < CDL_MAX_PUS; i++)
        if (chosen[i] && !allowed[i])
            return cdl__open_fail(COORDL_ERR_INVALID, "cpuset: PU %d in \"%s\" is not among the PUs this "
                                  "process may use", i, L->cfg.cpuset);
    return COORDL_OK;
}

#ifdef COORDL_NO_HWLOC
CDL_PRIVATE coordl_status cdl__placement_choose(coordl *L, cdl__placement *P) {
    memset(P, 0, sizeof *P);
    P->node = -1;
    if (L->cfg.numa_node >= 0 || L->cfg.pci_bus_id || L->cfg.topology)
        return cdl__open_fail(COORDL_ERR_UNSUPPORTED, "%s: needs hwloc; this build has COORDL_NO_HWLOC",
                              L->cfg.numa_node >= 0 ? "numa_node" : L->cfg.pci_bus_id ? "pci_bus_id" : "topology");
    unsigned char allowed[CDL_MAX_PUS], chosen[CDL_MAX_PUS];
    coordl_status rc = cdl__allowed_pus(allowed);
    if (rc != COORDL_OK) return rc;
    if (L->cfg.cpuset) {
        rc = cdl__check_cpuset(L, allowed, chosen);
        if (rc != COORDL_OK) return rc;
    } else {
        memcpy(chosen, allowed, sizeof chosen);
    }
    int pus[CDL_MAX_PUS], starts[CDL_MAX_PUS + 1], n = 0;
    for (int i = 0; i < CDL_MAX_PUS; i++)
        if (chosen[i]) { starts[n] = n; pus[n++] = i; }
    starts[n] = n;
    return cdl__place_from_cores(L, P, pus, starts, n);
}
CDL_PRIVATE void cdl__placement_free(coordl *L, cdl__placement *P) {
    cdl__free(L, P->worker_pus);
    cdl__free(L, P->reserved_pus);
}
#else
/* Loads the topology: this machine's, or the configured XML/synthetic one
 * (then nothing is bound: P->simulate). */
static coordl_status cdl__place_load_topology(coordl *L, cdl__placement *P) {
    P->simulate = L->cfg.topology != NULL;
    if (hwloc_topology_init(&P->topo) != 0) {
        P->topo = NULL;
        return cdl__open_fail(COORDL_ERR_NOMEM, "hwloc: cannot initialise a topology");
    }
    if (L->cfg.pci_bus_id) hwloc_topology_set_io_types_filter(P->topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (L->cfg.topology) {
        const char *t = L->cfg.topology;
        int bad = strncmp(t, "synthetic:", 10) == 0 ? hwloc_topology_set_synthetic(P->topo, t + 10)
                                                    : hwloc_topology_set_xml(P->topo, t);
        if (bad) return cdl__open_fail(COORDL_ERR_INVALID, "topology: hwloc cannot read \"%s\"", t);
    }
    if (hwloc_topology_load(P->topo) != 0)
        return cdl__open_fail(COORDL_ERR_INVALID, "topology: hwloc cannot load %s",
                              L->cfg.topology ? L->cfg.topology : "this machine's topology");
    return COORDL_OK;
}

/* The PUs the placement may choose from: every PU of a simulated
 * topology, else those this process may run on. */
static coordl_status cdl__place_allowed(const cdl__placement *P, unsigned char *allowed) {
    if (!P->simulate) return cdl__allowed_pus(allowed);
    memset(allowed, 0, CDL_MAX_PUS);
    hwloc_const_cpuset_t all = hwloc_topology_get_topology_cpuset(P->topo);
    int i;
    hwloc_bitmap_foreach_begin(i, all) if (i < CDL_MAX_PUS) allowed[i] = 1;
    hwloc_bitmap_foreach_end();
    return COORDL_OK;
}

/* The chosen PUs (set) and memory nodes (P->nodeset), by precedence:
 * cpuset, numa_node, pci_bus_id, else every allowed PU; never outside the
 * allowed ones. */
static coordl_status cdl__place_choose_set(coordl *L, cdl__placement *P, const unsigned char *allowed,
                                           hwloc_bitmap_t set) {
    coordl_status rc = COORDL_OK;
    unsigned char chosen[CDL_MAX_PUS];
    if (L->cfg.cpuset) {
        rc = cdl__check_cpuset(L, allowed, chosen);
        for (int i = 0; rc == COORDL_OK && i < CDL_MAX_PUS; i++)
            if (chosen[i]) hwloc_bitmap_set(set, (unsigned)i);
        if (rc == COORDL_OK) hwloc_cpuset_to_nodeset(P->topo, set, P->nodeset);
    } else if (L->cfg.numa_node >= 0) {
        hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(P->topo, (unsigned)L->cfg.numa_node);
        if (!node)
            return cdl__open_fail(COORDL_ERR_INVALID, "numa_node: node %d does not exist (this topology has %d)",
                                  L->cfg.numa_node, hwloc_get_nbobjs_by_type(P->topo, HWLOC_OBJ_NUMANODE));
        hwloc_bitmap_copy(set, node->cpuset);
        hwloc_bitmap_only(P->nodeset, (unsigned)L->cfg.numa_node);
    } else if (L->cfg.pci_bus_id) {
        unsigned dom = 0, bus, dev, fn;
        char tail;
        const char *id = L->cfg.pci_bus_id;
        int ok = sscanf(id, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) == 4 ||
                 (dom = 0, sscanf(id, "%x:%x.%x%c", &bus, &dev, &fn, &tail) == 3);
        if (!ok)
            return cdl__open_fail(COORDL_ERR_INVALID, "pci_bus_id: \"%s\" is not a PCI address like \"0000:3b:00.0\"", id);
        hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(P->topo, id);
        if (!pci)
            return cdl__open_fail(COORDL_ERR_INVALID, "pci_bus_id: no PCI device %s in %s", id,
                                  L->cfg.topology ? L->cfg.topology : "this machine");
        hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(P->topo, pci);
        hwloc_bitmap_copy(set, anc->cpuset);
        hwloc_bitmap_copy(P->nodeset, anc->nodeset);
    } else {
        for (int i = 0; i < CDL_MAX_PUS; i++)
            if (allowed[i]) hwloc_bitmap_set(set, (unsigned)i);
        hwloc_cpuset_to_nodeset(P->topo, set, P->nodeset);
    }
    if (rc != COORDL_OK) return rc;
    for (int i = 0; i < CDL_MAX_PUS; i++)
        if (!allowed[i]) hwloc_bitmap_clr(set, (unsigned)i);
    if (hwloc_bitmap_iszero(set))
        return cdl__open_fail(COORDL_ERR_INVALID, "%s: the chosen PUs are not among those this process may use",
                              L->cfg.cpuset ? "cpuset" : L->cfg.numa_node >= 0 ? "numa_node" : "pci_bus_id");
    return COORDL_OK;
}

/* The set's PUs core by core in topology order (PUs not under a core
 * count as cores of their own), handed to cdl__place_from_cores. */
static coordl_status cdl__place_by_cores(coordl *L, cdl__placement *P, hwloc_const_bitmap_t set) {
    int *pus = cdl__malloc(L, CDL_MAX_PUS * sizeof(int));
    int *starts = cdl__malloc(L, (CDL_MAX_PUS + 1) * sizeof(int));
    coordl_status rc = pus && starts ? COORDL_OK : cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    unsigned char seen[CDL_MAX_PUS];
    memset(seen, 0, sizeof seen);
    int n = 0, ncores = 0, i;
    for (hwloc_obj_t core = NULL; rc == COORDL_OK &&
         (core = hwloc_get_next_obj_by_type(P->topo, HWLOC_OBJ_CORE, core)) != NULL;) {
        const int first = n;
        hwloc_bitmap_foreach_begin(i, core->cpuset)
            if (i < CDL_MAX_PUS && hwloc_bitmap_isset(set, (unsigned)i) && !seen[i]) { pus[n++] = i; seen[i] = 1; }
        hwloc_bitmap_foreach_end();
        if (n > first) starts[ncores++] = first;
    }
    if (rc == COORDL_OK) {
        hwloc_bitmap_foreach_begin(i, set)
            if (i < CDL_MAX_PUS && !seen[i]) { starts[ncores++] = n; pus[n++] = i; seen[i] = 1; }
        hwloc_bitmap_foreach_end();
        starts[ncores] = n;
        rc = cdl__place_from_cores(L, P, pus, starts, ncores);
    }
    cdl__free(L, pus);
    cdl__free(L, starts);
    return rc;
}

CDL_PRIVATE coordl_status cdl__placement_choose(coordl *L, cdl__placement *P) {
    memset(P, 0, sizeof *P);
    P->node = -1;
    coordl_status rc = cdl__place_load_topology(L, P);
    unsigned char allowed[CDL_MAX_PUS];
    if (rc == COORDL_OK) rc = cdl__place_allowed(P, allowed);
    if (rc != COORDL_OK) return rc;
    P->nodeset = hwloc_bitmap_alloc();
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    rc = P->nodeset && set ? cdl__place_choose_set(L, P, allowed, set) : cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    if (rc == COORDL_OK) rc = cdl__place_by_cores(L, P, set);
    if (rc == COORDL_OK) {
        P->nnodes = hwloc_bitmap_weight(P->nodeset);
        if (P->nnodes < 0) P->nnodes = 0;
        P->node = P->nnodes == 1 ? hwloc_bitmap_first(P->nodeset) : -1;
    }
    if (set) hwloc_bitmap_free(set);
    return rc;
}

CDL_PRIVATE void cdl__placement_free(coordl *L, cdl__placement *P) {
    cdl__free(L, P->worker_pus);
    cdl__free(L, P->reserved_pus);
    if (P->nodeset) hwloc_bitmap_free(P->nodeset);
    if (P->topo) hwloc_topology_destroy(P->topo);
    P->nodeset = NULL;
    P->topo = NULL;
}
#endif

/* Binds [p, p + bytes) to the chosen node(s) before it is touched. */
CDL_PRIVATE int cdl__placement_bind_memory(coordl *L, void *p, size_t bytes) {
#ifndef COORDL_NO_HWLOC
    cdl__placement *P = &L->place;
    if (!L->cfg.bind || P->simulate || !P->topo || P->nnodes < 1) return 0;
    hwloc_membind_policy_t pol = P->nnodes > 1 ? HWLOC_MEMBIND_INTERLEAVE : HWLOC_MEMBIND_BIND;
    return hwloc_set_area_membind(P->topo, p, bytes, P->nodeset, pol, HWLOC_MEMBIND_BYNODESET) == 0;
#else
    (void)L; (void)p; (void)bytes;
    return 0;
#endif
}

/* ---- src/arena.c ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * arena.c - arenas: offset-addressed mmap regions.
 *
 * The cache slab and the batch ring are mmap'd regions addressed by
 * offsets, never by pointers stored inside them, so the same code can
 * later serve a POSIX shm object shared by sibling processes. Locking
 * (mlock) is tried per cache_pin; failure falls back to pageable memory
 * and is logged once.
 *
 * Owns:  nothing of its own: it maps, binds, pins and unmaps the arenas the
 *        cache (L->cache.arena) and the ring (L->ring.arena) own
 * Lock:  called at open, by coordl_set with the stream paused, and at close
 * Calls: status, placement (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */

/* Asks for transparent huge pages on a big anonymous mapping. Where THP is
 * "madvise" only (Debian's default), a mapping without this faults in 4 KiB
 * pages: on this project's VM a first touch costs ~15 us a page, so 64 MiB
 * costs ~0.25 s of CPU against ~5 ms in 2 MiB pages (measured). */
CDL_PRIVATE void cdl__arena_advise_huge(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    if (bytes >= (2u << 20)) (void)madvise(p, bytes, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

/* Maps an arena, binds it to the chosen node(s) before any page is
 * touched, then page-locks it per cache_pin. `populate`: fault every page
 * in now (the ring: it is written at once, and a first touch costs ~15 us
 * a page on a VM); otherwise pages are locked as they fault in (the cache
 * fills over the first epoch, so locking it all up front would make open
 * pay for pages that may never be used). */
CDL_PRIVATE coordl_status cdl__arena_map(coordl *L, cdl__arena *a, size_t bytes,
                                    int populate, const char *what, const char *lower) {
    memset(a, 0, sizeof *a);
    if (bytes == 0) return COORDL_OK;
    bytes = cdl__round_up(bytes, cdl__page_size());
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot map %zu bytes for the %s: %s; lower %s",
                              bytes, what, strerror(errno), lower);
    a->base = p;
    a->bytes = bytes;
    cdl__arena_advise_huge(p, bytes); /* fewer page faults and TLB misses */
    if (!cdl__placement_bind_memory(L, p, bytes)) L->place.memory_bound_all = 0;
    if (L->cfg.cache_pin != COORDL_PIN_OFF) {
        int locked;
#ifdef MLOCK_ONFAULT
        locked = populate ? mlock(p, bytes) == 0 : mlock2(p, bytes, MLOCK_ONFAULT) == 0;
#else
        locked = mlock(p, bytes) == 0;
#endif
        if (locked) {
            a->locked = 1;
            L->stats.st.pinned_bytes += bytes;
        } else if (L->cfg.cache_pin == COORDL_PIN_REQUIRED) {
            int e = errno;
            munmap(p, bytes);
            a->base = NULL;
            return cdl__open_fail(COORDL_ERR_NOMEM,
                                  "cache_pin = COORDL_PIN_REQUIRED but the %s (%zu bytes) "
                                  "cannot be page-locked: %s (raise RLIMIT_MEMLOCK or grant "
                                  "CAP_IPC_LOCK, lower %s, or set cache_pin = COORDL_PIN_TRY)",
                                  what, bytes, strerror(e), lower);
        } else if (!L->place.pin_failed) {
            L->place.pin_failed = 1;
            snprintf(L->place.pin_error, sizeof L->place.pin_error, "%s", strerror(errno));
        }
    }
    if (populate && !a->locked) memset(p, 0, bytes); /* mlock already faulted it in */
    if (L->cfg.pin) {
        if (L->cfg.pin(L->cfg.pin_user, p, bytes, 1) == 0)
            a->pin_registered = 1;
        else
            cdl__log(L, COORDL_LOG_WARN, "pin callback failed for the %s", what);
    }
    return COORDL_OK;
}

/* Unregisters (pin callback) and unmaps an arena. A borrowed arena (part
 * of a group's mapping) is only unregistered: the mapping goes as one. */
CDL_PRIVATE void cdl__arena_unmap(coordl *L, cdl__arena *a) {
    if (!a->base) return;
    if (a->pin_registered && L->cfg.pin) L->cfg.pin(L->cfg.pin_user, a->base, a->bytes, 0);
    a->pin_registered = 0;
    if (a->borrowed) {
        a->base = NULL;
        return;
    }
    if (a->locked) {
        munlock(a->base, a->bytes);
        L->stats.st.pinned_bytes -= a->bytes;
    }
    munmap(a->base, a->bytes);
    a->base = NULL;
}

/* Registers a part of a group's mapping as an arena with the pin
 * callback, once; cdl__arena_unmap unregisters it before the unmap. */
CDL_PRIVATE void cdl__arena_borrow(coordl *L, cdl__arena *a, void *base, size_t bytes, const char *what) {
    memset(a, 0, sizeof *a);
    a->base = base;
    a->bytes = bytes;
    a->borrowed = 1;
    if (L->cfg.pin && bytes) {
        if (L->cfg.pin(L->cfg.pin_user, base, bytes, 1) == 0)
            a->pin_registered = 1;
        else
            cdl__log(L, COORDL_LOG_WARN, "pin callback failed for the %s", what);
    }
}

/* ---- src/lock.c -------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * lock.c - the stream's shared state and its lock.
 *
 * Owns:  the types of the stream's shared state (cdl__stream, cdl__slot,
 *        cdl__member, cdl__cond), the lock's owner fields in *L->S, and the
 *        waits and wakes on its conditions
 * Lock:  the stream's robust mutex itself (S->mu); in a group it is
 *        process-shared. On EOWNERDEAD it runs L->lock_repair (the stream's
 *        repair, set at open) before marking the mutex consistent
 * Calls: status (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */

/* --- the stream's lock -------------------------------------------------
 * One robust mutex guards the stream (claims, slots, members). In a group
 * it is shared by processes: a thread killed while holding it leaves it
 * EOWNERDEAD, and the next locker runs the stream's repair transition
 * (stream.c) before marking it consistent. Taking the lock does nothing
 * else: heartbeats, liveness and reaping belong to the group's member
 * thread (group.c), so a thread that only queries never drops anyone.
 * The repair transition belongs to the stream, a layer above: open sets
 * L->lock_repair to it, so this module never calls up. */

CDL_PRIVATE CDL_HOT void cdl__lock_acquired(coordl *L, int e) {
    cdl__stream *S = L->S;
    const int dead = S->lock_owner;
    const uint64_t dead_gen = S->lock_owner_gen;
    S->lock_owner = L->member.me;
    S->lock_owner_gen = L->member.my_gen;
#ifdef COORDL_DEBUG
    S->lock_tid = cdl__gettid();
#endif
    if (e == EOWNERDEAD) {
        /* the holder died mid-transition: what it may have left
         * half-done is recomputed, and it is flagged for the member
         * threads to drop (if still that generation) */
        L->lock_repair(L, dead, dead_gen);
        pthread_mutex_consistent(&S->mu);
    }
}

/* A thread that finds the lock held spins briefly before it sleeps: the
 * lock is held for a transition of a few microseconds (a claim, a
 * completion, a take), so the trainer's thread meeting a worker inside one
 * then makes no system call and is not descheduled (issue 23: 65 futex
 * waits per 100 ready next + release pairs before). Bounded: a holder that
 * was preempted costs the spinner a few microseconds, then it blocks. */
static inline void cdl__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

enum { CDL_LOCK_SPINS = 100 };

CDL_PRIVATE CDL_HOT void cdl__lock(coordl *L) {
    pthread_mutex_t *mu = &L->S->mu;
    for (int i = 0; i < CDL_LOCK_SPINS; i++) {
        const int e = pthread_mutex_trylock(mu);
        if (e != EBUSY) {
            cdl__lock_acquired(L, e);
            return;
        }
        cdl__cpu_relax();
    }
    cdl__lock_acquired(L, pthread_mutex_lock(mu));
}

CDL_PRIVATE CDL_HOT void cdl__unlock(coordl *L) {
    L->S->lock_owner = -1;
#ifdef COORDL_DEBUG
    L->S->lock_tid = 0;
#endif
    pthread_mutex_unlock(&L->S->mu);
}

/* The group's wait and wake: an event count. A waiter reads the sequence
 * word under the lock, counts itself parked, unlocks and sleeps only while
 * the word is unchanged; a waker changes the state, bumps the word, and
 * makes the futex call only when someone is parked. Both the park count
 * and the word are sequentially consistent read-modify-writes, so either
 * the waker sees the waiter parked, or the waiter's futex sees the new
 * word and does not sleep: no lost wake-up, and no system call for a wake
 * that nobody waits for. A group wakes every parked thread, never one: a
 * single wake-up could go to a member that is stopped or dying, and the
 * others would sleep on with work to do until its drop. Waits have no
 * timer: what a parked thread waits for is always announced by a wake
 * (a release, a completion, a join, a drop, a repair, close), so an idle
 * loader makes no wake-ups at all; the group's liveness is the member
 * thread's, at its own cadence. */
#ifdef __linux__
static void cdl__futex_wait(_Atomic uint32_t *word, uint32_t seen, int ms) {
    struct timespec rel = {ms / 1000, (long)(ms % 1000) * 1000000L};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, seen, ms < 0 ? NULL : &rel, NULL, 0);
}
static void cdl__futex_wake_all(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}
#else /* no futex: sleep briefly and recheck (a wake cannot reach us) */
static void cdl__futex_wait(_Atomic uint32_t *word, uint32_t seen, int ms) {
    (void)word, (void)seen;
    usleep((useconds_t)(ms < 0 || ms > 5 ? 5 : ms) * 1000);
}
static void cdl__futex_wake_all(_Atomic uint32_t *word) { (void)word; }
#endif

static void cdl__group_wake(cdl__cond *c) {
    atomic_fetch_add(&c->seq, 1u);
    if (atomic_load(&c->parked) != 0) cdl__futex_wake_all(&c->seq);
}

/* Waits on a stream condition for at most ms milliseconds (ms < 0: until
 * woken). */
CDL_PRIVATE void cdl__wait_ms(coordl *L, cdl__cond *c, int ms) {
    int e = 0;
    if (L->cfg.group) {
        const uint32_t seen = atomic_load(&c->seq);
        atomic_fetch_add(&c->parked, 1u);
        cdl__unlock(L);
        cdl__futex_wait(&c->seq, seen, ms);
        atomic_fetch_sub(&c->parked, 1u);
        e = pthread_mutex_lock(&L->S->mu);
    } else if (ms < 0) {
        L->S->lock_owner = -1;
        e = pthread_cond_wait(&c->cv, &L->S->mu);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        L->S->lock_owner = -1;
        e = pthread_cond_timedwait(&c->cv, &L->S->mu, &ts);
        if (e == ETIMEDOUT) e = 0;
    }
    cdl__lock_acquired(L, e);
}

CDL_PRIVATE void cdl__wait(coordl *L, cdl__cond *c) { cdl__wait_ms(L, c, -1); }

/* Wakes waiters of c: all of them, or (cdl__signal) at most one in a
 * private loader (every parked one in a group, see above). Called with the
 * mutex held. */
CDL_PRIVATE void cdl__broadcast(coordl *L, cdl__cond *c) {
    if (L->cfg.group) cdl__group_wake(c);
    else pthread_cond_broadcast(&c->cv);
}

CDL_PRIVATE CDL_HOT void cdl__signal(coordl *L, cdl__cond *c) {
    if (L->cfg.group) cdl__group_wake(c);
    else pthread_cond_signal(&c->cv);
}

/* The same after the caller has unlocked (a state change made under the
 * lock): a waiter that checked the state before the change either sees
 * the new sequence word and does not sleep, or is parked and woken; one
 * that locks after the change sees it. */
CDL_PRIVATE CDL_HOT void cdl__signal_unlocked(coordl *L, cdl__cond *c) { cdl__signal(L, c); }

/* ---- robust mutexes: the one way to take them -------------------------
 * Every robust, process-shared mutex of a group (the stream's, each
 * member's liveness lock, a retired object's) is taken through these two,
 * so EOWNERDEAD is handled in one place: the stream's own through
 * cdl__lock_acquired (which repairs the stream and records the owner),
 * any other through cdl__mutex_held.
 *
 * cdl__mutex_lock_until: takes mu waiting at most until deadline_ns
 * (cdl__now_ns): a mutex found in /dev/shm may say "held" forever
 * (damaged, or its holder stopped). Returns pthread's result (0,
 * EOWNERDEAD, ETIMEDOUT, ...). */
CDL_PRIVATE int cdl__mutex_lock_until(pthread_mutex_t *mu, uint64_t deadline_ns) {
    /* polled: timedlock/clocklock would do, but ThreadSanitizer does not
     * follow their EOWNERDEAD; this runs at open and while a member
     * thread waits, and a lock held for microseconds is had within one
     * retry */
    for (int tries = 0;; tries++) {
        const int e = pthread_mutex_trylock(mu);
        if (e != EBUSY) return e;
        if (cdl__now_ns() > deadline_ns) return ETIMEDOUT;
        if (tries < 16) sched_yield();
        else usleep(500);
    }
}

/* The result e of taking a robust mutex that guards nothing to repair (a
 * liveness lock, a retired object's): a dead holder's EOWNERDEAD is made
 * consistent. 1 when the mutex is now held. */
CDL_PRIVATE int cdl__mutex_held(pthread_mutex_t *mu, int e) {
    if (e == EOWNERDEAD) pthread_mutex_consistent(mu);
    return e == 0 || e == EOWNERDEAD;
}
/* ---- src/worker.c ------------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/*
 * worker.c - a worker's scratch.
 *
 * Owns:  cdl__worker: one per worker thread (and the consumer's helper),
 *        every buffer grown on demand and reused, so the steady state
 *        allocates nothing per item
 * Lock:  none: a worker's scratch is touched only by its own thread
 * Calls: status (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */

CDL_PRIVATE coordl_status cdl__worker_error(cdl__worker *W, coordl_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cdl__vformat(W->err, sizeof W->err, fmt, ap);
    va_end(ap);
    return s;
}

/* Item id's bytes from storage, through the reader, into *buf (of *cap
 * bytes): a plain item is its whole file, at the size it has now (it may
 * have changed since indexing); a token window and a tar member are a byte
 * range (their shard may not have shrunk). With grow, *buf is grown
 * through the allocator to fit; without (the read-ahead arena), an item
 * larger than *cap is not read and *too_big is set. *len receives the
 * item's bytes, *storage_bytes what the reader delivered. Errors name the
 * item: COORDL_ERR_IO (the reader, a file gone or shrunk), COORDL_ERR_CORRUPT
 * (empty, over max_item_bytes, a window cut short), COORDL_ERR_NOMEM. Any
 * thread; touches only its arguments. */

/* ---- the JPEG rewrite budget: every count in one place -------------- */

#define CDL_BUDGET_WINDOW_NS 2000000000ull

/* A prepared row's CPU time, rewrites excluded; the window slides (halves)
 * once it holds more than CDL_BUDGET_WINDOW_NS. */
CDL_PRIVATE void cdl__budget_row(cdl__worker *W, uint64_t busy_ns) {
    cdl__rewrite_budget *b = &W->budget;
    b->busy_cpu += busy_ns;
    if (b->busy_cpu + b->rewrite_cpu > CDL_BUDGET_WINDOW_NS) {
        b->busy_cpu /= 2;
        b->rewrite_cpu /= 2;
        b->splice_win /= 2;
    }
}

#ifndef COORDL_NO_JPEGTURBO /* only libjpeg rewrites and splices */
/* A rewrite's CPU time (while the trainer waits: idle rewrites are free). */
CDL_PRIVATE void cdl__budget_rewrite(cdl__worker *W, uint64_t ns) { W->budget.rewrite_cpu += ns; }

/* The CPU time of one JPEG decode: spliced (from a rewrite) or plain. */
CDL_PRIVATE void cdl__budget_decode(cdl__worker *W, int spliced, uint64_t ns) {
    cdl__rewrite_budget *b = &W->budget;
    if (spliced) {
        b->splice_cpu += ns;
        b->splice_n++;
        b->splice_win++;
    } else {
        b->plain_cpu += ns;
        b->plain_n++;
    }
}

/* Whether a rewrite may be spent now, with budget fraction f. Over the
 * window, rewrites may take f of the worker's time plus the time the
 * spliced decodes in it saved (each against the worker's mean plain
 * decode): rewrite <= f x (busy + rewrite) + saved. So in any stretch of
 * its work it takes at most 1 / (1 - f) of the time the same samples
 * would take without random access: throughput stays >= (1 - f) of that
 * (0.92x at the default 0.08), epoch by epoch, from the first; and what
 * converted items save converts the rest sooner. */
CDL_PRIVATE int cdl__budget_allows(const cdl__worker *W, double f) {
    const cdl__rewrite_budget *b = &W->budget;
    if (f <= 0.0) return 0;
    if (f >= 1.0) return 1;
    double saved = 0.0;
    if (b->plain_n && b->splice_n) {
        const double plain = (double)b->plain_cpu / (double)b->plain_n, spliced = (double)b->splice_cpu / (double)b->splice_n;
        if (plain > spliced) saved = (plain - spliced) * (double)b->splice_win;
    }
    return (double)b->rewrite_cpu <= f * (double)(b->busy_cpu + b->rewrite_cpu) + saved;
}
#endif /* COORDL_NO_JPEGTURBO */
/* ---- src/s3.c ---------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * s3.c - S3's side of remote sources: where an s3:// object is (the
 * endpoint, path- or virtual-host-style addressing), whose credentials sign
 * its requests (read from the environment as every AWS tool reads them),
 * the URL written in SigV4's canonical form, and the XML of a
 * ListObjectsV2 answer. No I/O: remote.c sends the requests.
 *
 * Owns:  a cdl__s3 (held by remote.c's event loop): the settings, read once
 *        when the loop is made and constant after; the secret goes to
 *        libcurl's signer only, never into a message, a log line or a
 *        counter
 * Lock:  none (written before the loop thread starts, read-only after)
 * Calls: status (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */

#ifndef COORDL_NO_REMOTE

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

static char *cdl__s3_strdup(const coordl *L, const char *s) {
    const size_t n = strlen(s);
    char *d = cdl__malloc(L, n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

static const char *cdl__s3_getenv(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Zeroes and frees a secret (volatile: the stores are not dropped). */
static void cdl__s3_wipe(const coordl *L, char *s) {
    if (!s) return;
    for (volatile char *p = s; *p; p++) *p = 0;
    cdl__free(L, s);
}

CDL_PRIVATE void cdl__s3_forget(const coordl *L, cdl__s3 *R) {
    cdl__free(L, R->endpoint);
    cdl__free(L, R->key);
    cdl__s3_wipe(L, R->secret);
    curl_slist_free_all(R->headers);
    R->endpoint = R->key = R->secret = NULL;
    R->headers = NULL;
}

/* Reads the S3 settings (once, as the loop is made). 0: out of memory; a
 * setting that cannot work is kept in s3_bad for the first s3:// open. */
CDL_PRIVATE int cdl__s3_env(const coordl *L, cdl__s3 *R) {
    const char *endpoint = cdl__s3_getenv("AWS_ENDPOINT_URL_S3"), *endpoint_var = "AWS_ENDPOINT_URL_S3";
    if (!endpoint) endpoint = cdl__s3_getenv(endpoint_var = "AWS_ENDPOINT_URL");
    const char *region = cdl__s3_getenv("AWS_REGION"), *region_var = "AWS_REGION";
    if (!region) region = cdl__s3_getenv(region_var = "AWS_DEFAULT_REGION");
    if (!region) region = "us-east-1", region_var = NULL;
    const char *key = cdl__s3_getenv("AWS_ACCESS_KEY_ID"), *secret = cdl__s3_getenv("AWS_SECRET_ACCESS_KEY");
    const char *token = cdl__s3_getenv("AWS_SESSION_TOKEN");
    R->bad[0] = '\0';
    if (strlen(region) >= sizeof R->region || strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(region))
        snprintf(R->bad, sizeof R->bad, "%s is not a region name (lower-case letters, digits and '-')",
                 region_var);
    else
        snprintf(R->region, sizeof R->region, "%s", region);
    snprintf(R->sigv4, sizeof R->sigv4, "aws:amz:%s:s3", R->region);
    if (endpoint) {
        if (strncasecmp(endpoint, "http://", 7) != 0 && strncasecmp(endpoint, "https://", 8) != 0)
            snprintf(R->bad, sizeof R->bad, "%s must start with http:// or https://", endpoint_var);
        if (!(R->endpoint = cdl__s3_strdup(L, endpoint))) return 0;
        for (size_t n = strlen(R->endpoint); n > 0 && R->endpoint[n - 1] == '/'; n--) R->endpoint[n - 1] = '\0';
    }
    if (!key != !secret) {
        snprintf(R->bad, sizeof R->bad, "%s is set but %s is not", key ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                 key ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
    } else if (key) {
        if (!(R->key = cdl__s3_strdup(L, key)) || !(R->secret = cdl__s3_strdup(L, secret))) return 0;
        snprintf(R->creds, sizeof R->creds, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY%s from the environment, "
                 "region %s%s%s", token ? " with AWS_SESSION_TOKEN" : "", R->region, region_var ? " from " : "",
                 region_var ? region_var : " (the default)");
    } else {
        snprintf(R->creds, sizeof R->creds, "none (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are unset: the "
                 "requests go unsigned, as to a public bucket)");
    }
    R->headers = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (!R->headers) return 0;
    if (token && key) {
        const size_t n = strlen(token) + 32;
        char *h = cdl__malloc(L, n);
        if (!h) return 0;
        snprintf(h, n, "x-amz-security-token: %s", token);
        struct curl_slist *l = curl_slist_append(R->headers, h);
        cdl__s3_wipe(L, h);
        if (!l) return 0;
    }
    return 1;
}

/* Appends s percent-encoded as SigV4 canonicalises it: every byte but
 * A-Za-z0-9-_.~ (and '/' when keep_slash) as %XX, upper-case hex. */
CDL_PRIVATE size_t cdl__s3_pct(char *out, const char *s, size_t n, int keep_slash) {
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
CDL_PRIVATE char *cdl__s3_url(const coordl *L, const cdl__s3 *R, const char *name, const char *key_or_null,
                            const char *query, char *why, size_t cap) {
    const char *bucket = name + 5, *slash = strchr(bucket, '/');
    const size_t blen = slash ? (size_t)(slash - bucket) : strlen(bucket);
    if (R->bad[0]) {
        snprintf(why, cap, "%s: %s", name, R->bad);
        return NULL;
    }
    if (blen == 0 || blen > 255 || strspn(bucket, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") < blen) {
        snprintf(why, cap, "%s: not s3://BUCKET/KEY (a bucket name of letters, digits, '.', '-' and '_')", name);
        return NULL;
    }
    const char *key = key_or_null ? key_or_null : "";
    const size_t klen = strlen(key), qlen = query ? strlen(query) : 0;
    const size_t n = (R->endpoint ? strlen(R->endpoint) : 0) + 2 * blen + strlen(R->region) + 3 * klen + qlen + 64;
    char *url = cdl__malloc(L, n);
    if (!url) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    size_t k;
    if (R->endpoint || memchr(bucket, '.', blen)) { /* path-style */
        if (R->endpoint) k = (size_t)snprintf(url, n, "%s/%.*s", R->endpoint, (int)blen, bucket);
        else k = (size_t)snprintf(url, n, "https://s3.%s.amazonaws.com/%.*s", R->region, (int)blen, bucket);
        if (key_or_null) url[k++] = '/';
    } else { /* virtual-host style */
        k = (size_t)snprintf(url, n, "https://%.*s.s3.%s.amazonaws.com/", (int)blen, bucket, R->region);
    }
    k += cdl__s3_pct(url + k, key, klen, 1);
    if (query) snprintf(url + k, n - k, "?%s", query);
    return url;
}

/* The next <tag>...</tag> of a ListObjectsV2 answer from *pos on, its
 * XML entities decoded, into out; *pos moves past it. 0 when there is no
 * more, or the text does not fit (cap: a key is 1,024 bytes at most). */
CDL_PRIVATE int cdl__s3_xml_next(const char **pos, const char *tag, char *out, size_t cap) {
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


#endif /* COORDL_NO_REMOTE */
/* ---- src/http.c -------------------------------------------------------- */
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
/* ---- src/remote.c ------------------------------------------------------ */
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
/* ---- src/io.c ---------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * io.c - the storage seam (coordl_io).
 *
 * Every byte read from storage goes through the handle's coordl_io
 * (cdl__io_open / cdl__io_read): the built-in POSIX reader, or the
 * trainer's. Folder listings (ImageFolder, shard folders, globs) use
 * readdir/glob. The index turns the source into items (path, size,
 * label). Paths live in one string arena addressed by offsets (no
 * malloc per item); the item array is plain. ImageFolder: classes
 * sorted by name are labels, files sorted by relative path. List file:
 * "path<TAB>label" per line. Tar shards: see "WebDataset tar shards".
 *
 * Owns:  L->io: the reader every storage access goes through (the built-in
 *        POSIX one, or the caller's); and the line parser list files share
 * Lock:  none: readers are called concurrently from any thread (coordl.h
 *        documents it); L->io is fixed at open
 * Calls: status, remote (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */

/* ---- the built-in POSIX reader ------------------------------------------
 * Only a regular file is read: a FIFO would block the open (and then every
 * read) until some writer appears, and a device may never end. O_NONBLOCK
 * makes the open itself return at once whatever the path names; fstat then
 * refuses anything but a regular file (reads of a regular file ignore
 * O_NONBLOCK). Symbolic links are followed (datasets are often trees of
 * links); a loop fails the open with ELOOP. A handle is the descriptor
 * shifted left with the low bit set (never NULL, and never the even address
 * of a remote file: cdl__io_is_remote): nothing is allocated per open. *why
 * gets a static description when the refusal is ours, not an errno's. */
CDL_PRIVATE int cdl__posix_open_why(const char *path, void **file, uint64_t *size, const char **why) {
    *why = NULL;
    int fd;
    do fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return -errno;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        const int e = errno;
        close(fd);
        return -e;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        *why = S_ISFIFO(sb.st_mode)  ? "not a regular file (it is a FIFO)"
               : S_ISDIR(sb.st_mode) ? "not a regular file (it is a directory)"
               : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "not a regular file (it is a device)"
               : S_ISSOCK(sb.st_mode) ? "not a regular file (it is a socket)"
                                      : "not a regular file";
        return S_ISDIR(sb.st_mode) ? -EISDIR : -EINVAL;
    }
    *file = (void *)(((uintptr_t)fd << 1) | 1u);
    *size = (uint64_t)sb.st_size;
    return 0;
}

CDL_PRIVATE int cdl__posix_fd(void *file) { return (int)((uintptr_t)file >> 1); }

static int cdl__posix_open(void *user, const char *path, void **file, uint64_t *size) {
    const char *why;
    (void)user;
    return cdl__posix_open_why(path, file, size, &why);
}

/* pread until len bytes or the end of the file; EINTR and short reads are
 * looped over here, so the caller's loop sees them only from other
 * readers. */
static int64_t cdl__posix_read_at(void *user, void *file, void *buf, uint64_t len, uint64_t offset) {
    const int fd = cdl__posix_fd(file);
    uint64_t got = 0;
    (void)user;
    if (offset > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - offset) return -EOVERFLOW;
    while (got < len) {
        const size_t want = len - got > (1u << 30) ? (size_t)1 << 30 : (size_t)(len - got);
        const ssize_t r = pread(fd, (cdl__u8 *)buf + got, want, (off_t)(offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -errno;
        if (r == 0) break;
        got += (uint64_t)r;
    }
    return (int64_t)got;
}

CDL_PRIVATE void cdl__posix_close(void *user, void *file) {
    (void)user;
    close(cdl__posix_fd(file));
}

CDL_PRIVATE const coordl_io cdl__posix_io = {NULL, cdl__posix_open, cdl__posix_read_at, cdl__posix_close};

/* ---- reading through the handle's reader ---------------------------------
 * A custom reader is trusted with nothing: its return values are checked,
 * and what it says becomes an error naming the file, never a crash. */
#define CDL_IO_EINTR_RETRIES 100 /* a reader returning -EINTR forever must not hang us */

/* Remote sources: the built-in reader reads a path that is an http(s)://
 * or s3:// URL through remote.c (docs/remote.md); a caller's reader is
 * given every path as it is. A remote file is an allocation (even address),
 * a POSIX one an odd number. */
static int cdl__io_is_remote(const coordl *L, const void *file) {
    return L->io == &cdl__posix_io && ((uintptr_t)file & 1u) == 0;
}

/* Marks a file read in order from start to end in small pieces (a tar
 * scan): a remote one then reads ahead in large ranged requests. */
CDL_PRIVATE void cdl__io_sequential(const coordl *L, void *file) {
    if (cdl__io_is_remote(L, file)) cdl__remote_sequential(file);
}

/* The ETag of an open remote file, "" for any other (a saved index
 * records a local shard's mtime instead). */
CDL_PRIVATE void cdl__io_etag(const coordl *L, const void *file, char *out, size_t cap) {
    if (cdl__io_is_remote(L, file)) cdl__remote_etag(file, out, cap);
    else if (cap) out[0] = '\0';
}

/* Opens path. On failure: COORDL_ERR_IO (COORDL_ERR_UNSUPPORTED for a URL
 * this build cannot read), and the reason in why (not the path: callers
 * name the file as they need; a URL's reason may name it). */
CDL_PRIVATE coordl_status cdl__io_open(const coordl *L, const char *path, void **file, uint64_t *size,
                                  char *why, size_t cap) {
    const coordl_io *io = L->io;
    const char *ours = NULL;
    void *f = NULL;
    uint64_t sz = 0;
    int r;
    if (io == &cdl__posix_io && cdl__remote_is_url(path)) return cdl__remote_open(L, path, file, size, why, cap);
    for (int tries = 0;; tries++) {
        r = io == &cdl__posix_io ? cdl__posix_open_why(path, &f, &sz, &ours) : io->open(io->user, path, &f, &sz);
        if (r != -EINTR || tries >= CDL_IO_EINTR_RETRIES) break;
    }
    if (r == 0) {
        *file = f;
        *size = sz;
        return COORDL_OK;
    }
    if (ours) snprintf(why, cap, "%s", ours);
    else if (r < 0 && r > -4096) snprintf(why, cap, "%s", strerror(-r));
    else snprintf(why, cap, "the reader's open returned %d (not 0 or -errno)", r);
    return COORDL_ERR_IO;
}

CDL_PRIVATE void cdl__io_close(const coordl *L, void *file) {
    if (cdl__io_is_remote(L, file)) cdl__remote_close(L, file);
    else L->io->close(L->io->user, file);
}

/* Reads len bytes at offset off of an open file, looping over short reads
 * and EINTR; *got receives the bytes read (fewer than len: the file ended
 * there). A reader error, or a count it cannot have read, is
 * COORDL_ERR_IO with "<path>: ..." in err. */
CDL_PRIVATE coordl_status cdl__io_read(const coordl *L, void *file, const char *path, void *buf, uint64_t len,
                                  uint64_t off, uint64_t *got, char *err, size_t cap) {
    const coordl_io *io = L->io;
    uint64_t done = 0;
    int eintr = 0;
    *got = 0;
    if (cdl__io_is_remote(L, file)) return cdl__remote_read(L, file, buf, len, off, got, err, cap);
    while (done < len) {
        const int64_t r = io->read_at(io->user, file, (cdl__u8 *)buf + done, len - done, off + done);
        if (r == -EINTR && ++eintr <= CDL_IO_EINTR_RETRIES) continue;
        if (r < 0 && r > -4096) {
            snprintf(err, cap, "%s: read of %llu bytes at offset %llu failed: %s", path,
                     (unsigned long long)(len - done), (unsigned long long)(off + done), strerror((int)-r));
            return COORDL_ERR_IO;
        }
        if (r < 0 || (uint64_t)r > len - done) {
            snprintf(err, cap, "%s: the reader returned %lld for a read of %llu bytes at offset %llu (not a "
                     "byte count up to the length, nor -errno)", path, (long long)r,
                     (unsigned long long)(len - done), (unsigned long long)(off + done));
            return COORDL_ERR_IO;
        }
        if (r == 0) break;
        done += (uint64_t)r;
        eintr = 0;
    }
    *got = done;
    return COORDL_OK;
}

/* Closes the kept file; the block's memory stays for the next one, unless
 * free_block (the thread ends). */
CDL_PRIVATE void cdl__kept_close(const coordl *L, cdl__kept_file *k) {
    if (k->f) cdl__io_close(L, k->f);
    k->f = NULL;
    k->path = NULL;
    k->size = 0;
    k->block_off = k->block_len = 0;
}

CDL_PRIVATE void cdl__kept_free(const coordl *L, cdl__kept_file *k) {
    cdl__kept_close(L, k);
    cdl__free(L, k->block);
    k->block = NULL;
    k->block_cap = 0;
}

/* A whole (text) file through the reader, NUL-terminated, into memory from
 * the allocator (list files). Open-time errors go to cdl__open_fail. */
CDL_PRIVATE coordl_status cdl__io_slurp(coordl *L, const char *path, const char *what, char **out, size_t *len) {
    char err[CDL_ERRMSG_MAX];
    void *f;
    uint64_t size, got = 0;
    *out = NULL;
    *len = 0;
    coordl_status rc = cdl__io_open(L, path, &f, &size, err, sizeof err);
    if (rc != COORDL_OK) return cdl__open_fail(rc, "source: cannot open %s %s: %s", what, path, err);
    if (size >= SIZE_MAX / 2) {
        cdl__io_close(L, f);
        return cdl__open_fail(COORDL_ERR_IO, "source: %s %s: size %llu is not plausible", what, path,
                              (unsigned long long)size);
    }
    char *buf = cdl__malloc(L, (size_t)size + 1);
    if (!buf) {
        cdl__io_close(L, f);
        return cdl__open_fail(COORDL_ERR_NOMEM, "source: out of memory for %s %s (%llu bytes)", what, path,
                              (unsigned long long)size);
    }
    rc = cdl__io_read(L, f, path, buf, size, 0, &got, err, sizeof err);
    cdl__io_close(L, f);
    if (rc != COORDL_OK) {
        cdl__free(L, buf);
        return cdl__open_fail(rc, "source: %s %s", what, err);
    }
    buf[got] = '\0';
    *out = buf;
    *len = (size_t)got;
    return COORDL_OK;
}

/* The one parser of list files (item lists, token-shard lists, tar-shard
 * lists), so they share one set of rules: a line ends at LF, trailing CRs
 * are dropped (CRLF files), empty lines are skipped, lines are numbered
 * from 1 counting every line, and a line holding a NUL byte is refused
 * (it would otherwise be cut short at the NUL and name another file). The
 * text is never modified. Returns 1 with the next non-empty line, 0 at the
 * end, -1 for a line holding a NUL (out->lineno says which). */
CDL_PRIVATE int cdl__list_next(const char *text, size_t len, size_t *pos, cdl__list_line *out) {
    while (*pos < len) {
        const char *line = text + *pos;
        const char *nl = memchr(line, '\n', len - *pos);
        size_t n = nl ? (size_t)(nl - line) : len - *pos;
        *pos += n + (nl != NULL);
        out->lineno++;
        while (n > 0 && line[n - 1] == '\r') n--;
        if (n == 0) continue;
        out->text = line;
        out->len = n;
        return memchr(line, '\0', n) ? -1 : 1;
    }
    return 0;
}

/* The path a list line names, NUL-terminated in *buf (grown): relative to
 * the list file's folder (or URL) unless absolute or a URL. Its length in
 * *path_len; 0 when memory runs out. */
CDL_PRIVATE int cdl__list_path(const coordl *L, const char *list, const char *name, size_t n, char **buf, size_t *cap,
                               size_t *path_len) {
    const char *slash = strrchr(list, '/');
    char scheme[9];
    const size_t k = n < sizeof scheme - 1 ? n : sizeof scheme - 1;
    memcpy(scheme, name, k);
    scheme[k] = '\0';
    const size_t dir_len = name[0] == '/' || !slash || cdl__remote_is_url(scheme) ? 0 : (size_t)(slash - list);
    if (!cdl__reserve(L, (void **)buf, cap, dir_len + n + 2)) return 0;
    size_t o = 0;
    if (dir_len > 0) {
        memcpy(*buf, list, dir_len);
        (*buf)[dir_len] = '/';
        o = dir_len + 1;
    }
    memcpy(*buf + o, name, n);
    (*buf)[o + n] = '\0';
    *path_len = o + n;
    return 1;
}

/* ---- src/uring.c ------------------------------------------------------- */
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
/* ---- src/index.c ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * index.c - the item table.
 *
 * Owns:  L->index: items (path, size, label), the string arena, classes,
 *        token shards and tar items; ImageFolder and list sources; the item
 *        accessors
 * Lock:  filled at open (index, tar, source), read-only after: any thread
 *        reads it without a lock; a lazy index's counts and blocks
 *        (L->index.lazy) under its own mutex
 * Calls: status, io (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */

/* ---- the source index --------------------------------------------------- */

typedef struct cdl__indexer {
    coordl *L;
    uint64_t cap_items;
} cdl__indexer;

CDL_PRIVATE int cdl__strings_append(coordl *L, const char *s, size_t n, uint64_t *off) {
    if (!cdl__reserve(L, (void **)&L->index.strings, &L->index.strings_cap, L->index.strings_len + n + 1)) return 0;
    memcpy(L->index.strings + L->index.strings_len, s, n);
    L->index.strings[L->index.strings_len + n] = '\0';
    *off = L->index.strings_len;
    L->index.strings_len += n + 1;
    return 1;
}

static int cdl__items_push(cdl__indexer *ix, uint64_t path_off, uint64_t bytes, int32_t label) {
    coordl *L = ix->L;
    if (L->index.num_items == ix->cap_items) {
        uint64_t ncap = ix->cap_items ? ix->cap_items * 2 : 1024;
        void *p = cdl__realloc(L, L->index.items, ncap * sizeof *L->index.items);
        if (!p) return 0;
        L->index.items = p;
        ix->cap_items = ncap;
    }
    cdl__item *it = &L->index.items[L->index.num_items++];
    it->path_off = path_off;
    it->bytes = bytes;
    it->label = label;
    return 1;
}

/* Files an ImageFolder-style tree contributes: image extensions, or .wav
 * for the audio pipeline; any case. */
CDL_PRIVATE int cdl__wanted_file(const coordl *L, const char *name) {
    static const char *image_exts[] = {"jpg", "jpeg", "png", "bmp", "ppm", "pgm", "tga"};
    const char *dot = strrchr(name, '.');
    if (!dot) return 0;
    if (L->cfg.pipeline == COORDL_PIPE_AUDIO) return strcasecmp(dot + 1, "wav") == 0;
    for (size_t i = 0; i < sizeof image_exts / sizeof image_exts[0]; i++)
        if (strcasecmp(dot + 1, image_exts[i]) == 0) return 1;
    return 0;
}

/* Sort items [lo, hi) by path; the arena is stable during the sort.
 * qsort has no context argument, so the arena base goes through a
 * thread-local: two threads opening handles at once do not race. */
static _Thread_local const char *cdl__sort_base_tls;
static int cdl__cmp_item_path(const void *a, const void *b) {
    const cdl__item *x = a, *y = b;
    return strcmp(cdl__sort_base_tls + x->path_off, cdl__sort_base_tls + y->path_off);
}
static void cdl__sort_items_by_path(coordl *L, uint64_t lo, uint64_t hi) {
    if (hi - lo < 2) return; /* also: an empty class has no item array yet */
    cdl__sort_base_tls = L->index.strings;
    qsort(L->index.items + lo, (size_t)(hi - lo), sizeof *L->index.items, cdl__cmp_item_path);
    cdl__sort_base_tls = NULL;
}

static int cdl__cmp_cstr_ptr(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Recursively adds image files under dir (an absolute-ish path). */
static coordl_status cdl__index_class_dir(cdl__indexer *ix, char *path, size_t path_len,
                                          size_t path_cap, int32_t label, int depth) {
    coordl *L = ix->L;
    if (depth > 32)
        return cdl__open_fail(COORDL_ERR_INVALID, "source: directories nested deeper than 32 at %s", path);
    DIR *d = opendir(path);
    if (!d) return cdl__open_fail(COORDL_ERR_IO, "cannot open directory %s: %s", path, strerror(errno));
    int dfd = dirfd(d);
    struct dirent *e;
    coordl_status rc = COORDL_OK;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        if (name[0] == '.') continue; /* ., .., hidden files */
        size_t nlen = strlen(name);
        struct stat sb;
        int is_dir = e->d_type == DT_DIR, is_reg = e->d_type == DT_REG;
        int want_file = !is_dir && cdl__wanted_file(L, name);
        if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK || want_file) {
            if (fstatat(dfd, name, &sb, 0) != 0) { /* a dangling link: the tree does not hold the file */
                cdl__log(L, COORDL_LOG_WARN, "source: %s/%s skipped: %s", path, name, strerror(errno));
                continue;
            }
            is_dir = S_ISDIR(sb.st_mode);
            is_reg = S_ISREG(sb.st_mode);
        }
        if (path_len + 1 + nlen + 1 > path_cap) {
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: path too long under %s", path);
            break;
        }
        if (is_dir) {
            path[path_len] = '/';
            memcpy(path + path_len + 1, name, nlen + 1);
            rc = cdl__index_class_dir(ix, path, path_len + 1 + nlen, path_cap, label, depth + 1);
            path[path_len] = '\0';
            if (rc != COORDL_OK) break;
        } else if (is_reg && cdl__wanted_file(L, name)) {
            uint64_t off;
            path[path_len] = '/';
            memcpy(path + path_len + 1, name, nlen + 1);
            int ok = cdl__strings_append(L, path, path_len + 1 + nlen, &off) &&
                     cdl__items_push(ix, off, (uint64_t)sb.st_size, label);
            path[path_len] = '\0';
            if (!ok) { rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing"); break; }
            L->index.dataset_bytes += (uint64_t)sb.st_size;
        }
    }
    closedir(d);
    return rc;
}

CDL_PRIVATE coordl_status cdl__index_image_folder(coordl *L, const char *root) {
    cdl__indexer ix = {L, 0};
    DIR *d = opendir(root);
    if (!d) return cdl__open_fail(COORDL_ERR_IO, "source: cannot open directory %s: %s", root, strerror(errno));
    int dfd = dirfd(d);
    char **classes = NULL;
    size_t nclasses = 0, cap = 0;
    coordl_status rc = COORDL_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        int is_dir = e->d_type == DT_DIR;
        if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) {
            struct stat sb;
            is_dir = fstatat(dfd, e->d_name, &sb, 0) == 0 && S_ISDIR(sb.st_mode);
        }
        if (!is_dir) continue;
        if (nclasses == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            char **p = cdl__realloc(L, classes, ncap * sizeof *p);
            if (!p) { rc = COORDL_ERR_NOMEM; break; }
            classes = p;
            cap = ncap;
        }
        size_t n = strlen(e->d_name);
        classes[nclasses] = cdl__malloc(L, n + 1);
        if (!classes[nclasses]) { rc = COORDL_ERR_NOMEM; break; }
        memcpy(classes[nclasses++], e->d_name, n + 1);
    }
    closedir(d);
    if (rc == COORDL_ERR_NOMEM) rc = cdl__open_fail(rc, "out of memory while listing %s", root);
    if (rc == COORDL_OK && nclasses == 0)
        rc = cdl__open_fail(COORDL_ERR_INVALID,
                            "source: %s has no class folders (expected root/<class>/<image files>)", root);
    if (rc == COORDL_OK) {
        qsort(classes, nclasses, sizeof *classes, cdl__cmp_cstr_ptr);
        size_t cap_path = 4096;
        char *path = cdl__malloc(L, cap_path);
        if (!path) rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
        for (size_t c = 0; rc == COORDL_OK && c < nclasses; c++) {
            int n = snprintf(path, cap_path, "%s/%s", root, classes[c]);
            if (n < 0 || (size_t)n >= cap_path) {
                rc = cdl__open_fail(COORDL_ERR_INVALID, "source: path too long: %s/%s", root, classes[c]);
                break;
            }
            uint64_t first = L->index.num_items;
            rc = cdl__index_class_dir(&ix, path, (size_t)n, cap_path, (int32_t)c, 0);
            if (rc == COORDL_OK) cdl__sort_items_by_path(L, first, L->index.num_items);
        }
        cdl__free(L, path);
        L->index.num_classes = (uint32_t)nclasses;
    }
    for (size_t c = 0; c < nclasses; c++) cdl__free(L, classes[c]);
    cdl__free(L, classes);
    return rc;
}

/* A list-file label is a class index: the bytes after the line's last
 * TAB, one or more ASCII digits and nothing else (no sign, no spaces, no
 * NUL), read in base 10, at most CDL_MAX_LABEL, so that the class count
 * (the largest label + 1) is itself an int32. */
#define CDL_MAX_LABEL 2147483646
static int cdl__parse_label(const char *s, size_t n, int32_t *out) {
    int64_t v = 0;
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
        if (v > CDL_MAX_LABEL) return 0;
    }
    *out = (int32_t)v;
    return 1;
}

/* A printable copy of n bytes for a message: printable ASCII as is, other
 * bytes as \xNN; cut with "..." to fit cap. */
static void cdl__quote_bytes(char *dst, size_t cap, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        const size_t w = c >= 0x20 && c < 0x7f && c != '\\' ? 1 : 4;
        if (o + w + 4 > cap) { memcpy(dst + o, "...", 3); o += 3; break; }
        if (w == 1) dst[o++] = (char)c;
        else { dst[o++] = '\\'; dst[o++] = 'x'; dst[o++] = hex[c >> 4]; dst[o++] = hex[c & 15]; }
    }
    dst[o] = '\0';
}

/* The lines of a list file: "path<TAB>label", LF or CRLF, empty lines
 * skipped. The path is everything before the last TAB (it may hold spaces
 * and tabs), relative to the list file's folder unless absolute, and must
 * name a regular file now; a malformed line fails the open naming it. */
CDL_PRIVATE coordl_status cdl__index_list_text(coordl *L, const char *list, const char *text, size_t len) {
    cdl__indexer ix = {L, 0};
    char *path = NULL;
    size_t path_cap = 0, at = 0;
    cdl__list_line ln = {0};
    int32_t max_label = -1;
    coordl_status rc = COORDL_OK;
    char shown[96];
    int got;
    while (rc == COORDL_OK && (got = cdl__list_next(text, len, &at, &ln)) != 0) {
        const char *line = ln.text;
        const size_t n = ln.len;
        const uint64_t lineno = ln.lineno;
        if (got < 0) {
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s line %llu: holds a NUL byte", list,
                                (unsigned long long)lineno);
            break;
        }
        const char *tab = NULL;
        for (size_t i = n; i > 0 && !tab; i--)
            if (line[i - 1] == '\t') tab = line + i - 1;
        const int bare = !tab && L->cfg.labels == COORDL_LABELS_BOXES; /* Darknet's train.txt: paths only */
        if (!bare && (!tab || tab == line)) {
            cdl__quote_bytes(shown, sizeof shown, line, n);
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s line %llu: expected \"path<TAB>label\", got \"%s\"",
                                list, (unsigned long long)lineno, shown);
            break;
        }
        int32_t label = 0;
        const size_t plen = bare ? n : (size_t)(tab - line), llen = bare ? 0 : n - plen - 1;
        if (!bare && !cdl__parse_label(tab + 1, llen, &label)) {
            cdl__quote_bytes(shown, sizeof shown, tab + 1, llen);
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s line %llu: label \"%s\" is not a class index "
                                "(decimal digits only, 0..%d, after the last TAB)", list,
                                (unsigned long long)lineno, shown, CDL_MAX_LABEL);
            break;
        }
        size_t path_len;
        if (!cdl__list_path(L, list, line, plen, &path, &path_cap, &path_len)) { rc = COORDL_ERR_NOMEM; break; }
        char why[CDL_ERRMSG_MAX];
        void *f;
        uint64_t size;
        if (cdl__io_open(L, path, &f, &size, why, sizeof why) != COORDL_OK) {
            cdl__quote_bytes(shown, sizeof shown, path, path_len);
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s line %llu: %s is not a readable file (%s)",
                                list, (unsigned long long)lineno, shown, why);
            break;
        }
        cdl__io_close(L, f);
        uint64_t off;
        if (!cdl__strings_append(L, path, path_len, &off) ||
            !cdl__items_push(&ix, off, size, label)) {
            rc = COORDL_ERR_NOMEM;
            break;
        }
        L->index.dataset_bytes += size;
        if (label > max_label) max_label = label;
    }
    if (rc == COORDL_ERR_NOMEM) rc = cdl__open_fail(rc, "out of memory while reading %s", list);
    cdl__free(L, path);
    L->index.num_classes = max_label < 0 ? 0 : (uint32_t)max_label + 1;
    return rc;
}

CDL_PRIVATE const cdl__shard *cdl__shard_of(const coordl *L, uint64_t id) {
    size_t lo = 0, hi = L->index.nshards;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (L->index.shards[mid].first_item <= id) lo = mid; else hi = mid;
    }
    while (lo > 0 && L->index.shards[lo].nwindows == 0) lo--;
    return &L->index.shards[lo];
}

/* ---- a lazily indexed tar source (index_state.h) --------------------------- */

CDL_PRIVATE coordl_status cdl__lazy_init(coordl *L, cdl__lazy_scan_fn scan, size_t max_resident) {
    const size_t ns = L->index.ntar_shards;
    cdl__lazy *z = cdl__calloc(L, 1, sizeof *z);
    if (!z) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    if (pthread_mutex_init(&z->mu, NULL) != 0) {
        cdl__free(L, z);
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot create a mutex");
    }
    if (pthread_cond_init(&z->cv, NULL) != 0) {
        pthread_mutex_destroy(&z->mu);
        cdl__free(L, z);
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot create a condition variable");
    }
    L->index.lazy = z; /* from here on cdl__lazy_free (via coordl_close) owns it */
    z->nshards = ns;
    z->scan = scan;
    z->max_resident = max_resident < 2 ? 2 : max_resident;
    z->count = cdl__malloc(L, (ns ? ns : 1) * sizeof *z->count);
    z->block = cdl__calloc(L, ns ? ns : 1, sizeof *z->block);
    z->used = cdl__calloc(L, ns ? ns : 1, sizeof *z->used);
    z->scanning = cdl__calloc(L, ns ? ns : 1, 1);
    z->cached = cdl__calloc(L, ns ? ns : 1, 1);
    z->resident_list = cdl__malloc(L, (z->max_resident + 1) * sizeof *z->resident_list);
    if (!z->count || !z->block || !z->used || !z->scanning || !z->cached || !z->resident_list)
        return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the lazy index of %zu shards", ns);
    for (size_t s = 0; s < ns; s++) z->count[s] = CDL_LAZY_UNKNOWN;
    return COORDL_OK;
}

CDL_PRIVATE void cdl__lazy_block_free(const coordl *L, cdl__lazy_block *b) {
    cdl__free(L, b->refs);
    cdl__free(L, b->name_offs);
    cdl__free(L, b->names);
    memset(b, 0, sizeof *b);
}

CDL_PRIVATE void cdl__lazy_free(coordl *L) {
    cdl__lazy *z = L->index.lazy;
    if (!z) return;
    for (size_t s = 0; z->block && s < z->nshards; s++) cdl__lazy_block_free(L, &z->block[s]);
    for (size_t i = 0; i < z->ninterned; i++) cdl__free(L, z->interned[i]);
    cdl__free(L, z->interned);
    cdl__free(L, z->count);
    cdl__free(L, z->block);
    cdl__free(L, z->used);
    cdl__free(L, z->scanning);
    cdl__free(L, z->cached);
    cdl__free(L, z->resident_list);
    pthread_cond_destroy(&z->cv);
    pthread_mutex_destroy(&z->mu);
    cdl__free(L, z);
    L->index.lazy = NULL;
}

/* Shard s's freshly scanned block b becomes resident (its count learned
 * if it was not known). Under z->mu. */
static void cdl__lazy_publish(const coordl *L, uint32_t s, cdl__lazy_block *b) {
    cdl__lazy *z = L->index.lazy;
    if (z->count[s] == CDL_LAZY_UNKNOWN) {
        z->count[s] = b->count;
        z->counted++;
        z->counted_items += b->count;
        for (uint32_t i = 0; i < b->count; i++) z->counted_bytes += b->refs[i].bytes;
    }
    if (b->count == 0) {
        cdl__lazy_block_free(L, b);
        return;
    }
    /* room for it: the least recently used blocks go (readers copy out
     * under this lock, so none still points into one) */
    while (z->resident >= z->max_resident) {
        size_t lru = 0;
        for (size_t i = 1; i < z->resident; i++)
            if (z->used[z->resident_list[i]] < z->used[z->resident_list[lru]]) lru = i;
        cdl__lazy_block_free(L, &z->block[z->resident_list[lru]]);
        z->resident_list[lru] = z->resident_list[--z->resident];
    }
    z->block[s] = *b;
    z->resident_list[z->resident++] = s;
    z->used[s] = ++z->tick;
}

/* Shard s's block resident, under z->mu (released while this thread scans
 * it; another thread's scan of it is waited for). A shard whose first scan
 * fails counts 0 items from then on (said once in the log): the order must
 * stay a function of the counts. A later scan that fails, or finds another
 * count (the shard changed), is an error for the item that asked. */
static coordl_status cdl__lazy_resident(const coordl *L, uint32_t s, char *err, size_t errcap, int wait) {
    cdl__lazy *z = L->index.lazy;
    for (;;) {
        if (z->block[s].refs || z->count[s] == 0) {
            z->used[s] = ++z->tick;
            return COORDL_OK;
        }
        if (!z->scanning[s]) break;
        if (!wait) return COORDL_OK; /* another thread scans it */
        pthread_cond_wait(&z->cv, &z->mu);
    }
    z->scanning[s] = 1;
    pthread_mutex_unlock(&z->mu);
    cdl__lazy_block b;
    memset(&b, 0, sizeof b);
    char why[CDL_ERRMSG_MAX];
    why[0] = '\0';
    const coordl_status rc = z->scan((coordl *)L, s, &b, why, sizeof why);
    const char *shard = L->index.strings + L->index.tar_shards[s];
    pthread_mutex_lock(&z->mu);
    z->scanning[s] = 0;
    pthread_cond_broadcast(&z->cv);
    if (rc != COORDL_OK && z->count[s] == CDL_LAZY_UNKNOWN) {
        z->count[s] = 0;
        z->counted++;
        cdl__log(L, COORDL_LOG_ERROR, "source: tar shard %s: %s; its items are left out of every epoch", shard, why);
        if (z->failed++ == 0) {
            z->first_fail_rc = rc;
            snprintf(z->first_fail, sizeof z->first_fail, "tar shard %.180s: %.260s; its items are left out of every "
                     "epoch", shard, why); /* within the buffer: the log line above has it whole */
        }
        return COORDL_OK;
    }
    if (rc != COORDL_OK) {
        snprintf(err, errcap, "%s", why);
        return rc;
    }
    if (z->count[s] != CDL_LAZY_UNKNOWN && z->count[s] != b.count) {
        snprintf(err, errcap, "tar shard %s changed since it was first indexed (%u items then, %u now)", shard,
                 z->count[s], b.count);
        cdl__lazy_block_free(L, &b);
        return COORDL_ERR_IO;
    }
    cdl__lazy_publish(L, s, &b);
    return COORDL_OK;
}

/* Open's scan of a shard (tar.c checks its labels first) kept as if the
 * sampler had asked for it. */
CDL_PRIVATE void cdl__lazy_adopt(const coordl *L, uint32_t s, cdl__lazy_block *b) {
    cdl__lazy *z = L->index.lazy;
    pthread_mutex_lock(&z->mu);
    cdl__lazy_publish(L, s, b);
    pthread_mutex_unlock(&z->mu);
}

CDL_PRIVATE coordl_status cdl__lazy_count(const coordl *L, uint32_t s, uint32_t *count, char *err, size_t errcap) {
    cdl__lazy *z = L->index.lazy;
    coordl_status rc = COORDL_OK;
    pthread_mutex_lock(&z->mu);
    if (z->count[s] == CDL_LAZY_UNKNOWN) rc = cdl__lazy_resident(L, s, err, errcap, 1);
    *count = z->count[s];
    pthread_mutex_unlock(&z->mu);
    return rc;
}

/* The set's items and data bytes, for what needs them before an epoch has
 * counted every shard (coordl_analyze's report and its warm run's cache):
 * every shard counted when there are at most `most`, else `most` shards
 * spread evenly over the set (with those already counted) and the totals
 * extrapolated from them. *counted: the shards the totals stand on; *exact:
 * that is all of them. Scans what it counts on the calling thread (most =
 * 0: none, what is known now). */
CDL_PRIVATE coordl_status cdl__lazy_census(const coordl *L, size_t most, uint64_t *items, uint64_t *bytes,
                                      uint64_t *counted, int *exact) {
    cdl__lazy *z = L->index.lazy;
    const size_t ns = z->nshards;
    char err[CDL_ERRMSG_MAX];
    uint32_t count;
    for (size_t i = 0; i < ns && i < most; i++) {
        const size_t s = ns <= most ? i : (size_t)((uint64_t)i * ns / most); /* i < most: no overflow */
        const coordl_status rc = cdl__lazy_count(L, (uint32_t)s, &count, err, sizeof err);
        if (rc != COORDL_OK)
            return cdl__open_fail(rc, "source: tar shard %s: %s", L->index.strings + L->index.tar_shards[s], err);
    }
    pthread_mutex_lock(&z->mu);
    const uint64_t n = z->counted, k = z->counted_items, b = z->counted_bytes;
    pthread_mutex_unlock(&z->mu);
    *counted = n;
    *exact = n >= ns;
    *items = *exact ? k : n ? (uint64_t)((double)k / (double)n * (double)ns + 0.5) : 0;
    *bytes = *exact ? b : n ? (uint64_t)((double)b / (double)n * (double)ns + 0.5) : 0;
    return COORDL_OK;
}

/* Shard s's block made resident ahead of need (the scan-ahead threads):
 * scanned here unless it is resident or another thread scans it. 1: its
 * count is known now (0: being scanned elsewhere, or a later scan failed). */
CDL_PRIVATE int cdl__lazy_prefetch(const coordl *L, uint32_t s) {
    cdl__lazy *z = L->index.lazy;
    char err[CDL_ERRMSG_MAX];
    pthread_mutex_lock(&z->mu);
    cdl__lazy_resident(L, s, err, sizeof err, 0);
    const int known = z->count[s] != CDL_LAZY_UNKNOWN;
    pthread_mutex_unlock(&z->mu);
    return known;
}

/* Shard s's n labels, in member order, into out (its block made resident
 * for it if need be): what the MinIO cache keeps beside a shard's entries,
 * so that a cached item needs no block. */
CDL_PRIVATE coordl_status cdl__lazy_labels(const coordl *L, uint32_t s, int32_t *out, uint32_t n) {
    cdl__lazy *z = L->index.lazy;
    char err[CDL_ERRMSG_MAX];
    pthread_mutex_lock(&z->mu);
    coordl_status rc = cdl__lazy_resident(L, s, err, sizeof err, 1);
    if (rc == COORDL_OK && (!z->block[s].refs || z->block[s].count != n)) rc = COORDL_ERR_IO; /* failed, or changed */
    for (uint32_t i = 0; rc == COORDL_OK && i < n; i++) out[i] = z->block[s].refs[i].label;
    pthread_mutex_unlock(&z->mu);
    return rc;
}

/* Every item of shard s is in the MinIO cache with its label: the items
 * need its block no more, so the scan-ahead threads leave it alone (a
 * whole set cached reads no shard again after the epoch that cached it). */
CDL_PRIVATE void cdl__lazy_mark_cached(const coordl *L, uint32_t s) {
    cdl__lazy *z = L->index.lazy;
    pthread_mutex_lock(&z->mu);
    z->cached[s] = 1;
    pthread_mutex_unlock(&z->mu);
}

/* Whether shard s's block is resident, or it has no items, or they are
 * all cached (nothing to scan ahead). */
CDL_PRIVATE int cdl__lazy_ready(const coordl *L, uint32_t s) {
    cdl__lazy *z = L->index.lazy;
    pthread_mutex_lock(&z->mu);
    const int ready = z->block[s].refs != NULL || z->count[s] == 0 || z->scanning[s] || z->cached[s];
    pthread_mutex_unlock(&z->mu);
    return ready;
}

/* A shard whose first scan failed since the last call: 1 once per such
 * shard (the message of the first one), for coordl_next to report under
 * COORDL_BAD_FAIL. */
CDL_PRIVATE int cdl__lazy_new_failure(const coordl *L, coordl_status *rc, char *msg, size_t cap) {
    cdl__lazy *z = L->index.lazy;
    pthread_mutex_lock(&z->mu);
    const int news = z->failed > z->failed_reported;
    if (news) {
        *rc = z->first_fail_rc;
        if (z->failed_reported == 0) snprintf(msg, cap, "%s", z->first_fail);
        else snprintf(msg, cap, "%llu more tar shard(s) could not be read; their items are left out of every epoch "
                      "(the log names them)", (unsigned long long)(z->failed - z->failed_reported));
        z->failed_reported = z->failed;
    }
    pthread_mutex_unlock(&z->mu);
    return news;
}

/* Whether id names an item of a shard whose count is known. */
CDL_PRIVATE int cdl__lazy_id_known(const coordl *L, uint64_t id) {
    cdl__lazy *z = L->index.lazy;
    const uint32_t s = CDL_LAZY_SHARD(id), k = CDL_LAZY_ORDINAL(id);
    if (s >= z->nshards) return 0;
    pthread_mutex_lock(&z->mu);
    const int ok = z->count[s] != CDL_LAZY_UNKNOWN && k < z->count[s];
    pthread_mutex_unlock(&z->mu);
    return ok;
}

/* Item k of shard s named into buf: "shard:member" while the shard's block
 * is resident, else "shard:#k" (its ordinal in member order). Under z->mu. */
static void cdl__lazy_name(const coordl *L, uint32_t s, uint32_t k, char *buf, size_t cap) {
    const cdl__lazy_block *b = &L->index.lazy->block[s];
    const char *shard = L->index.strings + L->index.tar_shards[s];
    if (b->refs && k < b->count) snprintf(buf, cap, "%s:%s", shard, b->names + b->name_offs[k]);
    else snprintf(buf, cap, "%s:#%u", shard, k);
}

/* Item id's record, and its "shard:member" name into name (namecap > 0),
 * its shard scanned again if its block was dropped. */
CDL_PRIVATE coordl_status cdl__lazy_ref(const coordl *L, uint64_t id, cdl__tar_ref *ref, char *name, size_t namecap,
                                        char *err, size_t errcap) {
    cdl__lazy *z = L->index.lazy;
    const uint32_t s = CDL_LAZY_SHARD(id), k = CDL_LAZY_ORDINAL(id);
    if (s >= z->nshards) {
        snprintf(err, errcap, "item %llu: no such shard", (unsigned long long)id);
        return COORDL_ERR_INVALID;
    }
    const char *shard = L->index.strings + L->index.tar_shards[s];
    pthread_mutex_lock(&z->mu);
    coordl_status rc = cdl__lazy_resident(L, s, err, errcap, 1);
    if (rc == COORDL_OK && k >= z->count[s]) {
        snprintf(err, errcap, "%s: item %u of a shard of %u", shard, k, z->count[s]);
        rc = COORDL_ERR_INVALID;
    }
    if (rc == COORDL_OK) *ref = z->block[s].refs[k];
    if (namecap) cdl__lazy_name(L, s, k, name, namecap);
    pthread_mutex_unlock(&z->mu);
    return rc;
}

/* Item id's tar record: in tar_refs, or for a lazy index copied into
 * *copy (its shard scanned again if its block was dropped); NULL when the
 * source has no tar records, or it cannot be had (*rc and err say why). */
CDL_PRIVATE const cdl__tar_ref *cdl__tar_ref_of(const coordl *L, uint64_t id, cdl__tar_ref *copy, coordl_status *rc,
                                                char *err, size_t errcap) {
    *rc = COORDL_OK;
    if (L->index.tar_refs) return &L->index.tar_refs[id];
    if (!L->index.lazy) return NULL;
    *rc = cdl__lazy_ref(L, id, copy, NULL, 0, err, errcap);
    return *rc == COORDL_OK ? copy : NULL;
}

/* coordl_item_path of a lazy item: its name, kept until close (a name is
 * not resident once its block is dropped). */
static const char *cdl__lazy_path(const coordl *L, uint64_t id) {
    cdl__lazy *z = L->index.lazy;
    char name[CDL_ERRMSG_MAX], err[CDL_ERRMSG_MAX];
    cdl__tar_ref ref;
    if (cdl__lazy_ref(L, id, &ref, name, sizeof name, err, sizeof err) != COORDL_OK) return NULL;
    const size_t n = strlen(name);
    char *copy = cdl__malloc(L, n + 1);
    if (!copy) return NULL;
    memcpy(copy, name, n + 1);
    pthread_mutex_lock(&z->mu);
    if (!cdl__reserve(L, (void **)&z->interned, &z->interned_cap, (z->ninterned + 1) * sizeof *z->interned)) {
        pthread_mutex_unlock(&z->mu);
        cdl__free(L, copy);
        return NULL;
    }
    z->interned[z->ninterned++] = copy;
    pthread_mutex_unlock(&z->mu);
    return copy;
}

/* Item id's name for a message: cdl__item_path, or for a lazy item its
 * name formatted into buf (cdl__item_path would keep a copy until close):
 * "shard:member" while its shard's block is resident, else "shard:#k" (its
 * ordinal in member order). Never a scan: a worker names every item it
 * decodes, and a cached item's shard may have no block (its rows would
 * read the whole shard again for a name that no message uses). */
CDL_PRIVATE const char *cdl__item_name(const coordl *L, uint64_t id, char *buf, size_t cap) {
    if (!L->index.lazy) return cdl__item_path(L, id);
    cdl__lazy *z = L->index.lazy;
    const uint32_t s = CDL_LAZY_SHARD(id), k = CDL_LAZY_ORDINAL(id);
    if (s >= z->nshards) {
        snprintf(buf, cap, "item %llu", (unsigned long long)id);
        return buf;
    }
    pthread_mutex_lock(&z->mu);
    cdl__lazy_name(L, s, k, buf, cap);
    pthread_mutex_unlock(&z->mu);
    return buf;
}

CDL_PRIVATE const char *cdl__item_path(const coordl *L, uint64_t id) {
    if (L->index.lazy) return cdl__lazy_path(L, id);
    if (L->index.shards) return L->index.strings + cdl__shard_of(L, id)->path_off;
    if (L->index.tar_refs) return L->index.names + L->index.name_offs[id];
    return L->index.strings + L->index.items[id].path_off;
}

CDL_PRIVATE int32_t cdl__item_label(const coordl *L, uint64_t id) {
    if (L->index.tar_refs || L->index.lazy) {
        cdl__tar_ref copy;
        char err[CDL_ERRMSG_MAX];
        coordl_status rc;
        const cdl__tar_ref *r = cdl__tar_ref_of(L, id, &copy, &rc, err, sizeof err);
        return r ? r->label : -1;
    }
    if (L->index.shards) return (int32_t)(cdl__shard_of(L, id) - L->index.shards);
    return L->index.items[id].label;
}

CDL_PRIVATE uint64_t cdl__item_bytes(const coordl *L, uint64_t id) {
    if (L->index.tar_refs || L->index.lazy) {
        cdl__tar_ref copy;
        char err[CDL_ERRMSG_MAX];
        coordl_status rc;
        const cdl__tar_ref *r = cdl__tar_ref_of(L, id, &copy, &rc, err, sizeof err);
        return r ? r->bytes : 0;
    }
    if (L->index.shards) return (uint64_t)(L->cfg.seq_len + 1) * cdl__shard_of(L, id)->tok_bytes;
    return L->index.items[id].bytes;
}

/* ---- src/tar.c --------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * tar.c - WebDataset tar shards.
 *
 * Owns:  the state of one shard scan (cdl__tar_index, on the scanning
 *        thread's stack); writes L->index at open; a lazy index's scan of
 *        one shard (cdl__tar_lazy_scan, index.c's callback)
 * Lock:  none: at open, one thread; a lazy scan writes only its own
 *        block, on any thread (index.c publishes it under its lock)
 * Calls: status, remote, io, index (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */

/* ---- WebDataset tar shards ------------------------------------------------
 * A shard is indexed from its headers (ustar, GNU long names 'L', pax
 * extended headers 'x'), read through the reader one 512-byte header at a
 * time; the only data read at open is that of the small members the index
 * needs (.cls labels, long names, pax records), each together with the
 * header after it, so image data is never read at open.
 * Consecutive members with the same key (the path up to the first dot of
 * its last component, as WebDataset groups them) form a sample; its image
 * is the first member whose extension the pipeline reads, and an item is
 * (shard, offset, size) of that member. Labels: every sample's .cls text,
 * or else (no sample has one) the first folder of the key, numbered as an
 * ImageFolder numbers its class folders; in that case items are ordered as
 * an ImageFolder of the same tree orders its files (by class, then path),
 * so a tar of a tree gives the tree's batches. With .cls labels, items are
 * in shard order, then in member order. Hidden members (a path component
 * starting with '.') are skipped, as ImageFolder skips hidden files.
 * Links are members like any other (a tar of a tree holds a file's second
 * hard link, and every symbolic link, as a link, not as data): once the
 * shard's headers are all read (a symbolic link may point forward), each
 * link is followed to the regular member it leads to, inside the same
 * shard, and the item reads that member's bytes under the link's name. A
 * hard link names an earlier member; a symbolic link's relative target is
 * taken from the link's folder, folders on its way may be links too. A
 * link that leads nowhere in the shard (an absolute target, one climbing
 * out of it, a missing member, a folder, a loop) is skipped with a warning
 * in the log, as are sparse members (their data is not the file). */
#define CDL_TAR_BLOCK 512u
#define CDL_TAR_WINDOW 4096u     /* largest small-member read (its data and the next header) */
#define CDL_TAR_NAME_MAX 4096u   /* longest member name accepted */
#define CDL_TAR_PAX_MAX (1u << 20) /* largest pax extended header accepted */
#define CDL_TAR_CLS_MAX 64u      /* a .cls member longer than this is not a class number */
#define CDL_TAR_LINK_HOPS 40u    /* links followed for one, as Linux's MAXSYMLINKS: more is a loop */
#define CDL_TAR_SKIPS_LOGGED 8u  /* skipped members named one by one; the rest are counted */
#define CDL_TAR_NONE UINT32_MAX

/* What a member is, for link resolution. */
enum { CDL_TAR_FILE = 'f', CDL_TAR_HARD = 'h', CDL_TAR_SYM = 's', CDL_TAR_DIR = 'd', CDL_TAR_OTHER = 'o' };

/* A member of the shard being scanned, kept until its links are resolved. */
typedef struct cdl__tar_entry {
    uint64_t name_off;   /* its path, normalized, in t->names             */
    uint64_t target_off; /* a link's target as stored, in t->names        */
    uint64_t hdr, data, size; /* its header; a regular member's data      */
    uint32_t order;      /* its position in the shard                      */
    uint32_t leads_to;   /* a link's regular member once resolved, or CDL_TAR_NONE */
    char kind;           /* CDL_TAR_*                                      */
} cdl__tar_entry;

/* A sample while the shards are scanned (the items are built from these
 * once every shard is indexed and the labels are known). */
typedef struct cdl__tar_sample {
    uint64_t path_off; /* "shard:member" in the string arena           */
    uint64_t offset;   /* of the image member's data in the shard      */
    uint64_t bytes;
    uint32_t shard;
    uint32_t member_off; /* the member's name: path + member_off       */
    int32_t label;       /* the .cls label, or -1                      */
    uint32_t image_link, cls_link; /* while its shard is scanned: the link
                            entry the image (or .cls) is, or CDL_TAR_NONE */
    uint32_t txt_bytes;  /* the .txt member (box labels); UINT32_MAX: none */
    uint64_t txt_offset;
} cdl__tar_sample;

typedef struct cdl__tar_index {
    coordl *L;
    /* shard being scanned */
    const char *shard;
    uint32_t shard_index;
    void *file;
    uint64_t size;
    cdl__u8 *win; /* the last window read: [win_off, win_off + win_len) */
    uint64_t win_off;
    size_t win_len;
    char *pending_name; size_t pending_cap; int have_pending_name; /* GNU 'L' or pax path */
    uint64_t pending_size; int have_pending_size;                 /* pax size            */
    int pending_sparse;                                           /* pax GNU.sparse.*    */
    char *pending_link; size_t pending_link_cap; int have_pending_link; /* GNU 'K' or pax linkpath */
    cdl__u8 *pax; size_t pax_cap;
    /* the sample being grouped */
    char *key; size_t key_len, key_cap; int in_sample;
    char *image; size_t image_cap; int has_image;
    uint64_t image_off, image_bytes;
    int32_t cls;
    uint32_t image_link, cls_link; /* the image (.cls) is a link entry   */
    uint64_t txt_off, txt_bytes; int has_txt; /* the key's .txt member (box labels) */
    char *path; size_t path_cap; /* "shard:member" being built */
    /* the shard's members by name, for its links */
    cdl__tar_entry *entries; size_t nentries, entries_cap;
    char *names; size_t names_len, names_cap;
    uint32_t *by_name; size_t by_name_cap; /* entries sorted by (name, order) */
    char *link_path, *link_work; size_t link_path_cap, link_work_cap;
    size_t nlinks, first_sample; /* in this shard */
    size_t skipped; /* links and sparse members skipped (the first few logged) */
    /* every shard's samples so far */
    cdl__tar_sample *samples; size_t nsamples, samples_cap;
    /* a lazy scan (one shard at a time, while training): member names go to
     * lz_names, not the handle's string arena, which other threads read */
    int lazy;
    char *lz_names; size_t lz_len, lz_cap;
    /* class folders seen (first components of member paths), NUL-separated */
    char *classes; size_t classes_len, classes_cap;
    size_t last_class_off; int have_last_class;
} cdl__tar_index;

CDL_PRIVATE int cdl__is_tar_name(const char *p) {
    size_t n = strlen(p);
    return n >= 4 && strcasecmp(p + n - 4, ".tar") == 0;
}

/* An octal numeric field (optionally space- or NUL-padded), or GNU's
 * base-256 (leading byte 0x80). 0 for anything else. */
static int cdl__tar_number(const cdl__u8 *f, size_t n, uint64_t *out) {
    uint64_t v = 0;
    size_t i = 0;
    if (f[0] & 0x80) {
        if (f[0] != 0x80) return 0; /* negative (0xFF) or beyond 2^88 */
        for (i = 1; i < n; i++) {
            if (v >> 56) return 0;
            v = v << 8 | f[i];
        }
        *out = v;
        return 1;
    }
    while (i < n && (f[i] == ' ' || f[i] == 0)) i++;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v >> 61) return 0;
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    for (; i < n; i++)
        if (f[i] != ' ' && f[i] != 0) return 0;
    *out = v;
    return 1;
}

/* The header's checksum: the bytes summed with the checksum field as
 * spaces, unsigned (POSIX) or signed (old writers). */
static int cdl__tar_checksum_ok(const cdl__u8 *h) {
    uint64_t stored;
    if (!cdl__tar_number(h + 148, 8, &stored)) return 0;
    uint64_t u = 0;
    int64_t sgn = 0;
    for (unsigned i = 0; i < CDL_TAR_BLOCK; i++) {
        const int c = (i >= 148 && i < 156) ? ' ' : h[i];
        u += (unsigned)c;
        sgn += (signed char)c;
    }
    return stored == u || (int64_t)stored == sgn;
}

/* Reads [off, off + len) of the shard (clipped at its end) into the
 * window. */
static coordl_status cdl__tar_fill(cdl__tar_index *t, uint64_t off, size_t len) {
    char err[CDL_ERRMSG_MAX];
    uint64_t got = 0;
    if (len > t->size - off) len = (size_t)(t->size - off);
    t->win_len = 0;
    coordl_status rc = cdl__io_read(t->L, t->file, t->shard, t->win, len, off, &got, err, sizeof err);
    if (rc != COORDL_OK) return cdl__open_fail(rc, "source: tar shard %s", err);
    t->win_off = off;
    t->win_len = (size_t)got;
    return COORDL_OK;
}

/* len bytes at off (off + len <= size): from the window when they lie in
 * it, else read (a header is one read of its 512 bytes). */
static coordl_status cdl__tar_get(cdl__tar_index *t, uint64_t off, size_t len, void *dst) {
    uint64_t got = 0;
    coordl_status rc = COORDL_OK;
    if (off >= t->win_off && off - t->win_off <= t->win_len && len <= t->win_len - (off - t->win_off)) {
        memcpy(dst, t->win + (off - t->win_off), len);
        return COORDL_OK;
    }
    if (len > CDL_TAR_WINDOW) {
        char err[CDL_ERRMSG_MAX];
        rc = cdl__io_read(t->L, t->file, t->shard, dst, len, off, &got, err, sizeof err);
        if (rc != COORDL_OK) return cdl__open_fail(rc, "source: tar shard %s", err);
    } else {
        if ((rc = cdl__tar_fill(t, off, len)) != COORDL_OK) return rc;
        got = t->win_len;
        if (got >= len) memcpy(dst, t->win, len);
    }
    if (got < len)
        return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: cut short at offset %llu (the reader "
                              "gave %llu of %zu bytes; its size was %llu at open)", t->shard,
                              (unsigned long long)(off + got), (unsigned long long)got, len,
                              (unsigned long long)t->size);
    return COORDL_OK;
}

/* The data of a small member the index needs (a .cls, a pax header, a long
 * name): read together with the header after it, one read for both. */
static coordl_status cdl__tar_get_data(cdl__tar_index *t, uint64_t data, size_t len, void *dst) {
    const uint64_t padded = ((uint64_t)len + CDL_TAR_BLOCK - 1) / CDL_TAR_BLOCK * CDL_TAR_BLOCK;
    const int in_window = data >= t->win_off && data - t->win_off <= t->win_len &&
                          len <= t->win_len - (data - t->win_off);
    if (!in_window && padded + CDL_TAR_BLOCK <= CDL_TAR_WINDOW) {
        coordl_status rc = cdl__tar_fill(t, data, (size_t)(padded + CDL_TAR_BLOCK));
        if (rc != COORDL_OK) return rc;
    }
    return cdl__tar_get(t, data, len, dst);
}

/* Keeps the first folder of a member path as a class name (the run of
 * equal names is stored once; sorted and deduplicated at the end). */
static int cdl__tar_note_class(cdl__tar_index *t, const char *name, size_t n) {
    if (t->have_last_class && strlen(t->classes + t->last_class_off) == n &&
        memcmp(t->classes + t->last_class_off, name, n) == 0)
        return 1;
    if (!cdl__reserve(t->L, (void **)&t->classes, &t->classes_cap, t->classes_len + n + 1)) return 0;
    memcpy(t->classes + t->classes_len, name, n);
    t->classes[t->classes_len + n] = '\0';
    t->last_class_off = t->classes_len;
    t->have_last_class = 1;
    t->classes_len += n + 1;
    return 1;
}

/* The sample grouped so far becomes a staged item (when it has an image). */
static coordl_status cdl__tar_flush(cdl__tar_index *t) {
    coordl *L = t->L;
    if (!t->in_sample || !t->has_image) {
        t->in_sample = 0;
        return COORDL_OK;
    }
    t->in_sample = 0;
    const size_t slen = strlen(t->shard), mlen = strlen(t->image);
    if (!cdl__reserve(L, (void **)&t->path, &t->path_cap, slen + 1 + mlen + 1) ||
        !cdl__reserve(L, (void **)&t->samples, &t->samples_cap, (t->nsamples + 1) * sizeof *t->samples))
        return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
    memcpy(t->path, t->shard, slen);
    t->path[slen] = ':';
    memcpy(t->path + slen + 1, t->image, mlen + 1);
    cdl__tar_sample *s = &t->samples[t->nsamples];
    if (t->lazy) {
        if (t->lz_len + mlen + 1 > UINT32_MAX ||
            !cdl__reserve(L, (void **)&t->lz_names, &t->lz_cap, t->lz_len + mlen + 1))
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
        memcpy(t->lz_names + t->lz_len, t->image, mlen + 1);
        s->path_off = t->lz_len;
        t->lz_len += mlen + 1;
    } else if (!cdl__strings_append(L, t->path, slen + 1 + mlen, &s->path_off)) {
        return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
    }
    s->offset = t->image_off;
    s->bytes = t->image_bytes;
    s->shard = t->shard_index;
    s->member_off = (uint32_t)(slen + 1);
    s->label = t->cls;
    s->image_link = t->image_link;
    s->cls_link = t->cls_link;
    s->txt_bytes = t->has_txt ? (uint32_t)t->txt_bytes : UINT32_MAX;
    s->txt_offset = t->has_txt ? t->txt_off : 0;
    t->nsamples++;
    return COORDL_OK;
}

/* A .cls member: decimal digits, optionally surrounded by white space. */
static coordl_status cdl__tar_read_cls(cdl__tar_index *t, const char *name, uint64_t hdr, uint64_t data,
                                       uint64_t size, int32_t *label) {
    char text[CDL_TAR_CLS_MAX + 1];
    if (size > CDL_TAR_CLS_MAX)
        return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: .cls member \"%s\" at offset %llu has "
                              "%llu bytes; expected a class number", t->shard, name, (unsigned long long)hdr,
                              (unsigned long long)size);
    coordl_status rc = cdl__tar_get_data(t, data, (size_t)size, text);
    if (rc != COORDL_OK) return rc;
    text[size] = '\0';
    size_t a = 0, b = (size_t)size;
    while (a < b && (text[a] == ' ' || text[a] == '\t' || text[a] == '\n' || text[a] == '\r')) a++;
    while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t' || text[b - 1] == '\n' || text[b - 1] == '\r' ||
                     text[b - 1] == '\0')) b--;
    uint64_t v = 0;
    size_t i = a;
    for (; i < b && text[i] >= '0' && text[i] <= '9' && v < INT32_MAX; i++) v = v * 10 + (uint64_t)(text[i] - '0');
    if (i == a || i != b || v >= INT32_MAX) {
        text[b] = '\0';
        return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: .cls member \"%s\" at offset %llu: "
                              "\"%s\" is not a class number (0..2147483646)", t->shard, name,
                              (unsigned long long)hdr, text + a);
    }
    *label = (int32_t)v;
    return COORDL_OK;
}

/* A skipped member, in the log: the first few by name, the rest counted
 * (cdl__index_tar logs how many). */
static void cdl__tar_skip(cdl__tar_index *t, const char *fmt, ...) {
    char msg[CDL_ERRMSG_MAX];
    va_list ap;
    if (t->skipped++ >= CDL_TAR_SKIPS_LOGGED) return;
    va_start(ap, fmt);
    cdl__vformat(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cdl__log(t->L, COORDL_LOG_WARN, "source: tar shard %s: %s", t->shard, msg);
}

/* A path with its empty and "." components dropped and each ".." taking
 * the component before it away: into out (cap bytes), its length in *len.
 * 0 when a ".." climbs above the shard's root, or out is too small. */
static int cdl__tar_normalize(const char *in, size_t n, char *out, size_t cap, size_t *len) {
    size_t o = 0, i = 0;
    while (i < n) {
        while (i < n && in[i] == '/') i++;
        size_t j = i;
        while (j < n && in[j] != '/') j++;
        const size_t c = j - i;
        if (c == 2 && in[i] == '.' && in[i + 1] == '.') {
            if (o == 0) return 0;
            while (o > 0 && out[o - 1] != '/') o--;
            if (o > 0) o--; /* the slash before it */
        } else if (c > 0 && !(c == 1 && in[i] == '.')) {
            if (o + 1 + c + 1 > cap) return 0;
            if (o) out[o++] = '/';
            memcpy(out + o, in + i, c);
            o += c;
        }
        i = j;
    }
    if (o + 1 > cap) return 0;
    out[o] = '\0';
    *len = o;
    return 1;
}

/* Adds s (n bytes) to the shard's name arena; its offset in *off. */
static int cdl__tar_name_add(cdl__tar_index *t, const char *s, size_t n, uint64_t *off) {
    if (!cdl__reserve(t->L, (void **)&t->names, &t->names_cap, t->names_len + n + 1)) return 0;
    memcpy(t->names + t->names_len, s, n);
    t->names[t->names_len + n] = '\0';
    *off = t->names_len;
    t->names_len += n + 1;
    return 1;
}

/* Records a member for link resolution: its normalized name, and a link's
 * target as stored. Returns its entry, or CDL_TAR_NONE when its name
 * cannot be a target (it climbs out of the shard) or memory ran out
 * (*nomem). */
static uint32_t cdl__tar_entry_add(cdl__tar_index *t, const char *name, int kind, const char *target, uint64_t hdr,
                                   uint64_t data, uint64_t size, int *nomem) {
    coordl *L = t->L;
    const size_t n = strlen(name);
    size_t len;
    *nomem = 0;
    if (t->nentries >= CDL_TAR_NONE) return CDL_TAR_NONE;
    if (!cdl__reserve(L, (void **)&t->link_path, &t->link_path_cap, n + 1) ||
        !cdl__reserve(L, (void **)&t->entries, &t->entries_cap, (t->nentries + 1) * sizeof *t->entries)) {
        *nomem = 1;
        return CDL_TAR_NONE;
    }
    if (!cdl__tar_normalize(name, n, t->link_path, t->link_path_cap, &len)) return CDL_TAR_NONE;
    cdl__tar_entry *e = &t->entries[t->nentries];
    memset(e, 0, sizeof *e);
    if (!cdl__tar_name_add(t, t->link_path, len, &e->name_off) ||
        (target && !cdl__tar_name_add(t, target, strlen(target), &e->target_off))) {
        *nomem = 1;
        return CDL_TAR_NONE;
    }
    e->kind = (char)kind;
    e->hdr = hdr;
    e->data = data;
    e->leads_to = CDL_TAR_NONE;
    e->size = size;
    e->order = (uint32_t)t->nentries;
    if (kind == CDL_TAR_HARD || kind == CDL_TAR_SYM) t->nlinks++;
    return (uint32_t)t->nentries++;
}

/* One member: class folders are noted; a file (regular, or a link to be
 * resolved once the shard is read) joins (or starts) the sample of its
 * key. kind: CDL_TAR_*; target: a link's target; sparse: a sparse member
 * (skipped, logged). */
static coordl_status cdl__tar_member(cdl__tar_index *t, char *name, int kind, const char *target, int sparse,
                                     uint64_t hdr, uint64_t data, uint64_t size) {
    coordl *L = t->L;
    int nomem;
    const uint32_t entry = cdl__tar_entry_add(t, name, sparse ? CDL_TAR_OTHER : kind, target, hdr, data, size, &nomem);
    if (nomem) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
    while (name[0] == '.' && name[1] == '/') name += 2;
    while (name[0] == '/') name++;
    size_t n = strlen(name);
    while (n > 0 && name[n - 1] == '/') name[--n] = '\0';
    if (n == 0 || name[0] == '.' || strstr(name, "/.")) return COORDL_OK; /* hidden, as in an ImageFolder */
    const char *slash = strchr(name, '/');
    if ((slash || kind == CDL_TAR_DIR) && !cdl__tar_note_class(t, name, slash ? (size_t)(slash - name) : n))
        return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
    if (sparse) {
        cdl__tar_skip(t, "sparse member \"%s\" at offset %llu skipped (coordl reads regular members only; "
                      "archive it without --sparse)", name, (unsigned long long)hdr);
        return COORDL_OK;
    }
    const int link = kind == CDL_TAR_HARD || kind == CDL_TAR_SYM;
    if (kind != CDL_TAR_FILE && !link) return COORDL_OK;
    if (link && entry == CDL_TAR_NONE) {
        cdl__tar_skip(t, "link \"%s\" at offset %llu skipped: its name climbs out of the shard", name,
                      (unsigned long long)hdr);
        return COORDL_OK;
    }
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strchr(base, '.');
    const size_t key_len = dot ? (size_t)(dot - name) : n;
    if (!t->in_sample || key_len != t->key_len || memcmp(t->key, name, key_len) != 0) {
        coordl_status rc = cdl__tar_flush(t);
        if (rc != COORDL_OK) return rc;
        if (!cdl__reserve(L, (void **)&t->key, &t->key_cap, key_len + 1))
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
        memcpy(t->key, name, key_len);
        t->key[key_len] = '\0';
        t->key_len = key_len;
        t->in_sample = 1;
        t->has_image = 0;
        t->cls = -1;
        t->image_link = t->cls_link = CDL_TAR_NONE;
        t->has_txt = 0;
    }
    if (!t->has_image && cdl__wanted_file(L, base)) {
        if (!cdl__reserve(L, (void **)&t->image, &t->image_cap, n + 1))
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
        memcpy(t->image, name, n + 1);
        t->has_image = 1;
        t->image_off = data;
        t->image_bytes = size;
        t->image_link = link ? entry : CDL_TAR_NONE;
    } else if (dot && strcasecmp(dot + 1, "cls") == 0 && t->cls < 0 && t->cls_link == CDL_TAR_NONE) {
        if (link) t->cls_link = entry; /* read once the link is resolved */
        else return cdl__tar_read_cls(t, name, hdr, data, size, &t->cls);
    } else if (dot && strcasecmp(dot + 1, "txt") == 0 && !t->has_txt) {
        /* box labels (labels = COORDL_LABELS_BOXES): located here, read
         * at the end of the index (source.c); a size no label file has is
         * kept as "too large" for that reader to name */
        t->has_txt = 1;
        t->txt_off = data;
        t->txt_bytes = size < UINT32_MAX ? size : UINT32_MAX - 1;
    }
    return COORDL_OK;
}

/* Entries by (name, order), for cdl__tar_lookup. */
static _Thread_local const cdl__tar_index *cdl__tar_entries_tls;
static int cdl__cmp_tar_entry(const void *a, const void *b) {
    const cdl__tar_index *t = cdl__tar_entries_tls;
    const cdl__tar_entry *x = &t->entries[*(const uint32_t *)a], *y = &t->entries[*(const uint32_t *)b];
    const int c = strcmp(t->names + x->name_off, t->names + y->name_off);
    if (c) return c;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The last member named path before position `before` (a hard link names
 * a member archived before it; anything else sees the shard's last one,
 * as extracting it would leave), or CDL_TAR_NONE. */
static uint32_t cdl__tar_lookup(const cdl__tar_index *t, const char *path, uint32_t before) {
    size_t lo = 0, hi = t->nentries; /* first entry after (path, before) */
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        const cdl__tar_entry *m = &t->entries[t->by_name[mid]];
        const int c = strcmp(t->names + m->name_off, path);
        if (c < 0 || (c == 0 && m->order < before)) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return CDL_TAR_NONE;
    const uint32_t e = t->by_name[lo - 1];
    return strcmp(t->names + t->entries[e].name_off, path) == 0 ? e : CDL_TAR_NONE;
}

/* t->link_path = the folder of `from` (a normalized member path; its
 * first `from_len` bytes), then target, then tail, normalized. 0 and why
 * when it cannot be a member of the shard. */
static int cdl__tar_join(cdl__tar_index *t, const char *from, size_t from_len, const char *target, const char *tail,
                         const char **why) {
    size_t dir = from_len;
    while (dir > 0 && from[dir - 1] != '/') dir--;
    const size_t tl = strlen(target), rest = strlen(tail), need = dir + tl + rest + 1;
    if (target[0] == '/') { *why = "its target is an absolute path (outside the shard)"; return 0; }
    if (tl == 0) { *why = "its target is empty"; return 0; }
    if (!cdl__reserve(t->L, (void **)&t->link_work, &t->link_work_cap, need)) {
        *why = "out of memory";
        return 0;
    }
    memcpy(t->link_work, from, dir); /* from and tail may point into link_path: copied before it may move */
    memcpy(t->link_work + dir, target, tl);
    memcpy(t->link_work + dir + tl, tail, rest);
    if (!cdl__reserve(t->L, (void **)&t->link_path, &t->link_path_cap, need)) {
        *why = "out of memory";
        return 0;
    }
    size_t len;
    if (!cdl__tar_normalize(t->link_work, dir + tl + rest, t->link_path, t->link_path_cap, &len)) {
        *why = "its target climbs out of the shard";
        return 0;
    }
    return 1;
}

/* The regular member link entry e leads to, or CDL_TAR_NONE and why. */
static uint32_t cdl__tar_follow(cdl__tar_index *t, uint32_t e, const char **why) {
    uint32_t x = e;
    unsigned hops = 0;
    for (;;) {
        const cdl__tar_entry m = t->entries[x]; /* a copy: the arenas do not move, but x changes */
        if (m.kind == CDL_TAR_FILE) return x;
        if (m.kind == CDL_TAR_DIR) {
            *why = "it leads to a folder (a tar holds the link, not the files under it)";
            return CDL_TAR_NONE;
        }
        if (m.kind != CDL_TAR_HARD && m.kind != CDL_TAR_SYM) {
            *why = "it leads to a member that is not a regular file";
            return CDL_TAR_NONE;
        }
        if (++hops > CDL_TAR_LINK_HOPS) {
            *why = "a loop of links (or a chain of more than 40)";
            return CDL_TAR_NONE;
        }
        const char *target = t->names + m.target_off;
        if (m.kind == CDL_TAR_HARD) { /* an archive path, as stored */
            size_t len;
            if (!cdl__reserve(t->L, (void **)&t->link_path, &t->link_path_cap, strlen(target) + 1)) {
                *why = "out of memory";
                return CDL_TAR_NONE;
            }
            if (!cdl__tar_normalize(target, strlen(target), t->link_path, t->link_path_cap, &len)) {
                *why = "its target climbs out of the shard";
                return CDL_TAR_NONE;
            }
        } else {
            const char *name = t->names + m.name_off;
            if (!cdl__tar_join(t, name, strlen(name), target, "", why)) return CDL_TAR_NONE;
        }
        /* a folder on the way may itself be a symbolic link */
        size_t i = 0;
        while (t->link_path[i]) {
            if (t->link_path[i] != '/') { i++; continue; }
            t->link_path[i] = '\0';
            const uint32_t y = cdl__tar_lookup(t, t->link_path, CDL_TAR_NONE);
            t->link_path[i] = '/';
            const int ykind = y == CDL_TAR_NONE ? CDL_TAR_DIR : t->entries[y].kind; /* folders need no member */
            if (ykind == CDL_TAR_DIR) {
                i++;
                continue;
            }
            if (ykind != CDL_TAR_SYM) {
                *why = "a folder on its way is a file";
                return CDL_TAR_NONE;
            }
            if (++hops > CDL_TAR_LINK_HOPS) {
                *why = "a loop of links (or a chain of more than 40)";
                return CDL_TAR_NONE;
            }
            if (!cdl__tar_join(t, t->link_path, i, t->names + t->entries[y].target_off, t->link_path + i, why))
                return CDL_TAR_NONE;
            i = 0;
        }
        x = cdl__tar_lookup(t, t->link_path, m.kind == CDL_TAR_HARD ? m.order : CDL_TAR_NONE);
        if (x == CDL_TAR_NONE) {
            *why = "no member of the shard has its target's name";
            return CDL_TAR_NONE;
        }
    }
}

/* Once the shard's headers are read: every link followed to the regular
 * member it leads to; the shard's samples whose image (or .cls) is a link
 * take that member's bytes, and those whose image leads nowhere are
 * dropped, with a warning naming each link that was skipped. */
static coordl_status cdl__tar_resolve_links(cdl__tar_index *t) {
    coordl *L = t->L;
    if (!t->nlinks) return COORDL_OK;
    if (!cdl__reserve(L, (void **)&t->by_name, &t->by_name_cap, t->nentries * sizeof *t->by_name))
        return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
    for (size_t i = 0; i < t->nentries; i++) t->by_name[i] = (uint32_t)i;
    cdl__tar_entries_tls = t;
    qsort(t->by_name, t->nentries, sizeof *t->by_name, cdl__cmp_tar_entry);
    cdl__tar_entries_tls = NULL;
    for (size_t i = 0; i < t->nentries; i++) {
        cdl__tar_entry *e = &t->entries[i];
        if (e->kind != CDL_TAR_HARD && e->kind != CDL_TAR_SYM) continue;
        const char *why = "";
        e->leads_to = cdl__tar_follow(t, (uint32_t)i, &why);
        if (e->leads_to != CDL_TAR_NONE) continue;
        if (strcmp(why, "out of memory") == 0)
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
        const char *name = t->names + e->name_off;
        if (name[0] == '.' || strstr(name, "/.")) continue; /* hidden: skipped anyway, quietly */
        cdl__tar_skip(t, "%s link \"%s\" -> \"%s\" skipped: %s", e->kind == CDL_TAR_HARD ? "hard" : "symbolic", name,
                      t->names + e->target_off, why);
    }
    size_t kept = t->first_sample;
    for (size_t i = t->first_sample; i < t->nsamples; i++) {
        cdl__tar_sample s = t->samples[i];
        if (s.image_link != CDL_TAR_NONE) {
            const uint32_t to = t->entries[s.image_link].leads_to;
            if (to == CDL_TAR_NONE) continue; /* its image leads nowhere: logged above */
            s.offset = t->entries[to].data;
            s.bytes = t->entries[to].size;
        }
        if (s.cls_link != CDL_TAR_NONE && t->entries[s.cls_link].leads_to != CDL_TAR_NONE) {
            const cdl__tar_entry *link = &t->entries[s.cls_link], *c = &t->entries[link->leads_to];
            coordl_status rc = cdl__tar_read_cls(t, t->names + link->name_off, link->hdr, c->data, c->size, &s.label);
            if (rc != COORDL_OK) return rc;
        }
        s.image_link = s.cls_link = CDL_TAR_NONE;
        t->samples[kept++] = s;
    }
    t->nsamples = kept;
    return COORDL_OK;
}

/* A pax extended header: records "<len> <key>=<value>\n"; path, linkpath
 * and size apply to the next member; GNU sparse members are skipped. */
static coordl_status cdl__tar_pax(cdl__tar_index *t, uint64_t hdr, const cdl__u8 *p, size_t n) {
    size_t at = 0;
    while (at < n) {
        if (p[at] == '\0') break; /* NUL padding after the records */
        size_t len = 0, i = at;
        while (i < n && p[i] >= '0' && p[i] <= '9' && len < n) len = len * 10 + (size_t)(p[i++] - '0');
        if (i == at || i >= n || p[i] != ' ' || len < 5 || len > n - at || p[at + len - 1] != '\n')
            return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: bad pax record in the extended "
                                  "header at offset %llu", t->shard, (unsigned long long)hdr);
        const char *kv = (const char *)p + i + 1, *end = (const char *)p + at + len - 1;
        const char *eq = memchr(kv, '=', (size_t)(end - kv));
        if (!eq)
            return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: pax record without '=' in the "
                                  "extended header at offset %llu", t->shard, (unsigned long long)hdr);
        const size_t klen = (size_t)(eq - kv), vlen = (size_t)(end - eq - 1);
        if (klen == 4 && memcmp(kv, "path", 4) == 0) {
            if (vlen >= CDL_TAR_NAME_MAX || memchr(eq + 1, '\0', vlen))
                return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: pax path of %zu bytes at offset "
                                      "%llu", t->shard, vlen, (unsigned long long)hdr);
            if (!cdl__reserve(t->L, (void **)&t->pending_name, &t->pending_cap, vlen + 1))
                return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
            memcpy(t->pending_name, eq + 1, vlen);
            t->pending_name[vlen] = '\0';
            t->have_pending_name = 1;
        } else if (klen == 4 && memcmp(kv, "size", 4) == 0) {
            uint64_t v = 0;
            size_t k = 0;
            for (; k < vlen && eq[1 + k] >= '0' && eq[1 + k] <= '9' && v < (UINT64_MAX - 9) / 10; k++)
                v = v * 10 + (uint64_t)(eq[1 + k] - '0');
            if (k == 0 || k != vlen)
                return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: bad pax size in the extended "
                                      "header at offset %llu", t->shard, (unsigned long long)hdr);
            t->pending_size = v;
            t->have_pending_size = 1;
        } else if (klen == 8 && memcmp(kv, "linkpath", 8) == 0) {
            if (vlen >= CDL_TAR_NAME_MAX || memchr(eq + 1, '\0', vlen))
                return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: pax linkpath of %zu bytes at "
                                      "offset %llu", t->shard, vlen, (unsigned long long)hdr);
            if (!cdl__reserve(t->L, (void **)&t->pending_link, &t->pending_link_cap, vlen + 1))
                return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
            memcpy(t->pending_link, eq + 1, vlen);
            t->pending_link[vlen] = '\0';
            t->have_pending_link = 1;
        } else if (klen > 11 && memcmp(kv, "GNU.sparse.", 11) == 0) {
            t->pending_sparse = 1;
            /* format 1.0 stores the member as GNUSparseFile.<pid>/<name>: the
             * real name names it in the log and notes its class folder */
            if (klen == 15 && memcmp(kv + 11, "name", 4) == 0 && vlen > 0 && vlen < CDL_TAR_NAME_MAX &&
                !memchr(eq + 1, '\0', vlen)) {
                if (!cdl__reserve(t->L, (void **)&t->pending_name, &t->pending_cap, vlen + 1))
                    return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
                memcpy(t->pending_name, eq + 1, vlen);
                t->pending_name[vlen] = '\0';
                t->have_pending_name = 1;
            }
        }
        at += len;
    }
    return COORDL_OK;
}

/* Walks one shard's headers; fails at the first thing a tar cannot be,
 * naming the shard and the offset. */
static coordl_status cdl__tar_scan(cdl__tar_index *t) {
    cdl__u8 h[CDL_TAR_BLOCK];
    uint64_t off = 0;
    coordl_status rc = COORDL_OK;
    t->win_off = 0;
    t->win_len = 0;
    t->have_pending_name = t->have_pending_size = t->pending_sparse = t->have_pending_link = 0;
    t->in_sample = 0;
    t->have_last_class = 0;
    t->nentries = t->names_len = t->nlinks = 0;
    t->first_sample = t->nsamples;
    for (;;) {
        if (t->size - off < CDL_TAR_BLOCK) {
            if (off == t->size)
                return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: ends at offset %llu without the "
                                      "end-of-archive blocks (truncated?)", t->shard, (unsigned long long)off);
            return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: truncated header at offset %llu (the "
                                  "shard has %llu bytes)", t->shard, (unsigned long long)off,
                                  (unsigned long long)t->size);
        }
        if ((rc = cdl__tar_get(t, off, CDL_TAR_BLOCK, h)) != COORDL_OK) return rc;
        unsigned nonzero = 0;
        for (unsigned i = 0; i < CDL_TAR_BLOCK && !nonzero; i++) nonzero = h[i];
        if (!nonzero) break; /* end of archive */
        if (!cdl__tar_checksum_ok(h))
            return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: bad header checksum at offset %llu "
                                  "(not a tar file, or corrupt)", t->shard, (unsigned long long)off);
        uint64_t size;
        if (!cdl__tar_number(h + 124, 12, &size))
            return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: bad size field in the header at "
                                  "offset %llu", t->shard, (unsigned long long)off);
        const int type = h[156];
        const int meta = type == 'L' || type == 'K' || type == 'x' || type == 'g';
        if (!meta && t->have_pending_size) size = t->pending_size;
        uint64_t data = off + CDL_TAR_BLOCK;
        if (type == 'S' && h[482]) { /* old GNU sparse: extension headers (a flag each at 504) precede the data */
            cdl__u8 ext[CDL_TAR_BLOCK];
            do {
                if (t->size - data < CDL_TAR_BLOCK)
                    return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: the sparse member at offset %llu "
                                          "has extension headers past the end of the shard (truncated?)", t->shard,
                                          (unsigned long long)off);
                if ((rc = cdl__tar_get(t, data, CDL_TAR_BLOCK, ext)) != COORDL_OK) return rc;
                data += CDL_TAR_BLOCK;
            } while (ext[504]);
        }
        if (size > t->size - data)
            return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: the member at offset %llu has %llu "
                                  "data bytes, past the end of the shard (%llu bytes; truncated?)", t->shard,
                                  (unsigned long long)off, (unsigned long long)size, (unsigned long long)t->size);
        const uint64_t next = data + (size + CDL_TAR_BLOCK - 1) / CDL_TAR_BLOCK * CDL_TAR_BLOCK;
        if (type == 'L') { /* GNU long name of the next member */
            if (size == 0 || size >= CDL_TAR_NAME_MAX)
                return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: GNU long name of %llu bytes at "
                                      "offset %llu", t->shard, (unsigned long long)size, (unsigned long long)off);
            if (!cdl__reserve(t->L, (void **)&t->pending_name, &t->pending_cap, (size_t)size + 1))
                return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
            if ((rc = cdl__tar_get_data(t, data, (size_t)size, t->pending_name)) != COORDL_OK) return rc;
            t->pending_name[size] = '\0'; /* the name ends at its first NUL */
            t->have_pending_name = 1;
        } else if (type == 'K') { /* GNU long link target of the next member */
            if (size == 0 || size >= CDL_TAR_NAME_MAX)
                return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: GNU long link name of %llu bytes at "
                                      "offset %llu", t->shard, (unsigned long long)size, (unsigned long long)off);
            if (!cdl__reserve(t->L, (void **)&t->pending_link, &t->pending_link_cap, (size_t)size + 1))
                return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
            if ((rc = cdl__tar_get_data(t, data, (size_t)size, t->pending_link)) != COORDL_OK) return rc;
            t->pending_link[size] = '\0';
            t->have_pending_link = 1;
        } else if (type == 'x') { /* pax extended header of the next member */
            if (size > CDL_TAR_PAX_MAX)
                return cdl__open_fail(COORDL_ERR_CORRUPT, "source: tar shard %s: pax extended header of %llu bytes "
                                      "at offset %llu", t->shard, (unsigned long long)size, (unsigned long long)off);
            if (!cdl__reserve(t->L, (void **)&t->pax, &t->pax_cap, (size_t)size + 1))
                return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", t->shard);
            if ((rc = cdl__tar_get_data(t, data, (size_t)size, t->pax)) != COORDL_OK) return rc;
            if ((rc = cdl__tar_pax(t, off, t->pax, (size_t)size)) != COORDL_OK) return rc;
        } else if (!meta) { /* 'g' (pax global) changes nothing we use */
            char name[CDL_TAR_BLOCK], target[101];
            char *nm = name;
            if (t->have_pending_name) {
                nm = t->pending_name;
            } else {
                size_t pn = 0, nn = strnlen((const char *)h, 100);
                if (memcmp(h + 257, "ustar\0", 6) == 0) { /* POSIX ustar: a prefix folder (GNU uses the room) */
                    pn = strnlen((const char *)h + 345, 155);
                    memcpy(name, h + 345, pn);
                    if (pn) name[pn++] = '/';
                }
                memcpy(name + pn, h, nn);
                name[pn + nn] = '\0';
            }
            const int kind = type == '0' || type == '\0' || type == '7' ? CDL_TAR_FILE
                             : type == '1' ? CDL_TAR_HARD : type == '2' ? CDL_TAR_SYM : type == '5' ? CDL_TAR_DIR
                             : CDL_TAR_OTHER;
            const char *tg = NULL;
            if (kind == CDL_TAR_HARD || kind == CDL_TAR_SYM) {
                const size_t tn = strnlen((const char *)h + 157, 100);
                memcpy(target, h + 157, tn);
                target[tn] = '\0';
                tg = t->have_pending_link ? t->pending_link : target;
            }
            rc = cdl__tar_member(t, nm, kind, tg, type == 'S' || t->pending_sparse, off, data, size);
            if (rc != COORDL_OK) return rc;
            t->have_pending_name = t->have_pending_size = t->pending_sparse = t->have_pending_link = 0;
        }
        off = next;
    }
    if ((rc = cdl__tar_flush(t)) != COORDL_OK) return rc;
    return cdl__tar_resolve_links(t);
}

static int cdl__cmp_cstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Sort key of a class-folder-labelled sample: class, then the member path
 * (as an ImageFolder sorts its files), then where it is. */
static _Thread_local const char *cdl__tar_sort_base_tls;
static int cdl__cmp_tar_sample(const void *a, const void *b) {
    const cdl__tar_sample *x = a, *y = b;
    if (x->label != y->label) return x->label < y->label ? -1 : 1;
    int c = strcmp(cdl__tar_sort_base_tls + x->path_off + x->member_off,
                   cdl__tar_sort_base_tls + y->path_off + y->member_off);
    if (c) return c;
    if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Labels, order and the item arrays from the staged samples. */
static coordl_status cdl__tar_finish(cdl__tar_index *t) {
    coordl *L = t->L;
    size_t with_cls = 0, first_without = SIZE_MAX;
    int32_t max_label = -1;
    for (size_t i = 0; i < t->nsamples; i++) {
        if (t->samples[i].label >= 0) {
            with_cls++;
            if (t->samples[i].label > max_label) max_label = t->samples[i].label;
        } else if (first_without == SIZE_MAX) {
            first_without = i;
        }
    }
    if (with_cls && with_cls != t->nsamples)
        return cdl__open_fail(COORDL_ERR_INVALID, "source: %s: %zu samples have a .cls label and %zu do not (the "
                              "first without: %s); label every sample, or none (then each key's class folder is its "
                              "label)", L->cfg.source, with_cls, t->nsamples - with_cls,
                              L->index.strings + t->samples[first_without].path_off);
    size_t n = t->nsamples;
    if (with_cls) {
        L->index.num_classes = (uint32_t)max_label + 1;
    } else {
        /* class folders: sorted names are labels 0..K-1 (an empty folder, a
         * directory member, still takes its label, as in an ImageFolder) */
        size_t nclasses = 0;
        for (size_t o = 0; o < t->classes_len; o += strlen(t->classes + o) + 1) nclasses++;
        const char **names = cdl__malloc(L, (nclasses ? nclasses : 1) * sizeof *names);
        if (!names) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while indexing %s", L->cfg.source);
        nclasses = 0;
        for (size_t o = 0; o < t->classes_len; o += strlen(t->classes + o) + 1) names[nclasses++] = t->classes + o;
        qsort(names, nclasses, sizeof *names, cdl__cmp_cstr);
        size_t k = 0;
        for (size_t i = 0; i < nclasses; i++)
            if (k == 0 || strcmp(names[k - 1], names[i]) != 0) names[k++] = names[i];
        nclasses = k;
        size_t kept = 0, skipped = 0;
        for (size_t i = 0; i < n; i++) {
            cdl__tar_sample s = t->samples[i];
            const char *member = L->index.strings + s.path_off + s.member_off;
            const char *slash = strchr(member, '/');
            if (!slash && L->cfg.labels == COORDL_LABELS_BOXES) { /* boxes: the .txt is the label, no class needed */
                s.label = 0;
                t->samples[kept++] = s;
                continue;
            }
            if (!slash) { skipped++; continue; } /* beside the class folders: an ImageFolder skips it too */
            size_t lo = 0, hi = nclasses, cl = strlen(member) - strlen(slash);
            while (lo < hi) { /* the class name is the member's prefix up to the slash */
                size_t mid = (lo + hi) / 2;
                int c = strncmp(names[mid], member, cl);
                if (c == 0) c = names[mid][cl] == '\0' ? 0 : 1;
                if (c < 0) lo = mid + 1; else hi = mid;
            }
            s.label = (int32_t)lo;
            t->samples[kept++] = s;
        }
        cdl__free(L, names);
        if (skipped)
            cdl__log(L, COORDL_LOG_WARN, "%s: %zu sample(s) at the top of their shard (no class folder, no .cls) "
                     "skipped, as an ImageFolder skips files beside its class folders", L->cfg.source, skipped);
        n = kept;
        L->index.num_classes = (uint32_t)nclasses;
        if (n > 1) { /* no sample at all (an empty shard): samples is NULL, which qsort may not get */
            cdl__tar_sort_base_tls = L->index.strings;
            qsort(t->samples, n, sizeof *t->samples, cdl__cmp_tar_sample);
            cdl__tar_sort_base_tls = NULL;
        }
    }
    L->index.items = cdl__malloc(L, (n ? n : 1) * sizeof *L->index.items);
    L->index.tar_items = cdl__malloc(L, (n ? n : 1) * sizeof *L->index.tar_items);
    if (!L->index.items || !L->index.tar_items) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for %zu items", n);
    for (size_t i = 0; i < n; i++) {
        const cdl__tar_sample *s = &t->samples[i];
        L->index.items[i].path_off = s->path_off;
        L->index.items[i].bytes = s->bytes;
        L->index.items[i].label = s->label;
        L->index.tar_items[i].offset = s->offset;
        L->index.tar_items[i].shard = s->shard;
        L->index.tar_items[i].txt_bytes = s->txt_bytes;
        L->index.tar_items[i].txt_offset = s->txt_offset;
        L->index.dataset_bytes += s->bytes;
    }
    L->index.num_items = n;
    return COORDL_OK;
}

/* Adds a shard path to the list the index walks (in the order given). */
static coordl_status cdl__tar_add_path(coordl *L, const char *path, size_t *cap) {
    if (L->index.ntar_shards == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        void *p = cdl__realloc(L, L->index.tar_shards, ncap * sizeof *L->index.tar_shards);
        if (!p) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
        L->index.tar_shards = p;
        *cap = ncap;
    }
    if (!cdl__strings_append(L, path, strlen(path), &L->index.tar_shards[L->index.ntar_shards]))
        return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    L->index.ntar_shards++;
    return COORDL_OK;
}

/* The shards named by the source: a .tar file, a folder of them, a glob,
 * or a list file of .tar paths (text: relative to the list's folder). */
CDL_PRIVATE coordl_status cdl__tar_list_shards(coordl *L, int kind, const char *list_text, size_t list_len) {
    const char *src = L->cfg.source;
    size_t cap = 0;
    coordl_status rc = COORDL_OK;
    char **names = NULL;
    size_t nnames = 0, names_cap = 0;
    if (kind == 1) return cdl__tar_add_path(L, src, &cap);
    if (kind == 2 || kind == 3) {
        /* a folder of shards, or a glob: sorted by strcmp, so the order does
         * not depend on the locale */
        if (kind == 2) {
            DIR *d = opendir(src);
            if (!d) return cdl__open_fail(COORDL_ERR_IO, "source: cannot list %s: %s", src, strerror(errno));
            struct dirent *e;
            while (rc == COORDL_OK && (e = readdir(d)) != NULL) {
                if (e->d_name[0] == '.' || !cdl__is_tar_name(e->d_name)) continue;
                char *p = cdl__malloc(L, strlen(src) + strlen(e->d_name) + 2);
                if (!p || !cdl__reserve(L, (void **)&names, &names_cap, (nnames + 1) * sizeof *names)) {
                    cdl__free(L, p);
                    rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
                    break;
                }
                sprintf(p, "%s/%s", src, e->d_name);
                names[nnames++] = p;
            }
            closedir(d);
        } else {
            glob_t g;
            int e = glob(src, GLOB_NOSORT, NULL, &g);
            if (e == GLOB_NOMATCH) return cdl__open_fail(COORDL_ERR_INVALID, "source: no file matches %s", src);
            if (e != 0) return cdl__open_fail(COORDL_ERR_IO, "source: cannot expand %s", src);
            for (size_t i = 0; rc == COORDL_OK && i < g.gl_pathc; i++) {
                if (!cdl__is_tar_name(g.gl_pathv[i])) {
                    rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s matches %s, which is not a .tar shard",
                                        src, g.gl_pathv[i]);
                    break;
                }
                size_t len = strlen(g.gl_pathv[i]);
                char *p = cdl__malloc(L, len + 1);
                if (!p || !cdl__reserve(L, (void **)&names, &names_cap, (nnames + 1) * sizeof *names)) {
                    cdl__free(L, p);
                    rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
                    break;
                }
                memcpy(p, g.gl_pathv[i], len + 1);
                names[nnames++] = p;
            }
            globfree(&g);
        }
        if (rc == COORDL_OK && nnames > 1) qsort(names, nnames, sizeof *names, cdl__cmp_cstr); /* none: NULL */
        for (size_t i = 0; rc == COORDL_OK && i < nnames; i++) rc = cdl__tar_add_path(L, names[i], &cap);
        for (size_t i = 0; i < nnames; i++) cdl__free(L, names[i]);
        cdl__free(L, names);
        return rc;
    }
    /* a list of shard paths, one a line */
    char *path = NULL;
    size_t pos = 0, path_cap = 0, path_len;
    cdl__list_line ln = {0};
    int got;
    while (rc == COORDL_OK && (got = cdl__list_next(list_text, list_len, &pos, &ln)) != 0) {
        if (got < 0) {
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s line %llu: holds a NUL byte", src,
                                (unsigned long long)ln.lineno);
            break;
        }
        if (!cdl__list_path(L, src, ln.text, ln.len, &path, &path_cap, &path_len)) {
            rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
            break;
        }
        if (memchr(ln.text, '\t', ln.len) || !cdl__is_tar_name(path)) {
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s line %llu: expected the path of a .tar shard", src,
                                (unsigned long long)ln.lineno);
            break;
        }
        rc = cdl__tar_add_path(L, path, &cap);
    }
    cdl__free(L, path);
    return rc;
}

/* What a scan's state holds (not the window: its owner frees it). */
static void cdl__tar_index_free(cdl__tar_index *t) {
    coordl *L = t->L;
    cdl__free(L, t->pending_name);
    cdl__free(L, t->pending_link);
    cdl__free(L, t->entries);
    cdl__free(L, t->names);
    cdl__free(L, t->by_name);
    cdl__free(L, t->link_path);
    cdl__free(L, t->link_work);
    cdl__free(L, t->pax);
    cdl__free(L, t->key);
    cdl__free(L, t->image);
    cdl__free(L, t->path);
    cdl__free(L, t->samples);
    cdl__free(L, t->classes);
    cdl__free(L, t->lz_names);
}

/* Indexes tar shards: kind 1 a .tar file, 2 a folder of them, 3 a glob,
 * 4 a list of them (its text given); shards already listed (a saved
 * index found stale) are scanned as listed. */
CDL_PRIVATE coordl_status cdl__index_tar(coordl *L, int kind, const char *list_text, size_t list_len) {
    cdl__tar_index t;
    memset(&t, 0, sizeof t);
    t.L = L;
    coordl_status rc = L->index.ntar_shards ? COORDL_OK : cdl__tar_list_shards(L, kind, list_text, list_len);
    if (rc == COORDL_OK && L->index.ntar_shards == 0)
        rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s names no .tar shards", L->cfg.source);
    if (rc == COORDL_OK && L->index.ntar_shards > UINT32_MAX)
        rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s names more than 2^32 shards", L->cfg.source);
    if (rc == COORDL_OK && !(t.win = cdl__malloc(L, CDL_TAR_WINDOW)))
        rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    /* remote shards: their bytes are asked for ahead of the scan, every
     * shard at once through the event loop (remote.c); the shards are still
     * parsed one after another, in order, so the index is the same */
    const int stream = rc == COORDL_OK && L->io == &cdl__posix_io && L->index.ntar_shards > 0;
    if (stream) {
        const char **urls = cdl__calloc(L, L->index.ntar_shards, sizeof *urls);
        if (urls) {
            for (size_t i = 0; i < L->index.ntar_shards; i++) urls[i] = L->index.strings + L->index.tar_shards[i];
            cdl__remote_scan_begin(L, urls, L->index.ntar_shards); /* copies them: the arena may move */
            cdl__free(L, urls);
        }
    }
    for (size_t i = 0; rc == COORDL_OK && i < L->index.ntar_shards; i++) {
        char err[CDL_ERRMSG_MAX];
        t.shard = L->index.strings + L->index.tar_shards[i];
        t.shard_index = (uint32_t)i;
        rc = cdl__io_open(L, t.shard, &t.file, &t.size, err, sizeof err);
        if (rc != COORDL_OK) { rc = cdl__open_fail(rc, "source: cannot open tar shard %s: %s", t.shard, err); break; }
        cdl__io_sequential(L, t.file); /* a remote shard's headers: in large ranged reads */
        /* the string arena may move while this shard's paths are added */
        char *copy = cdl__malloc(L, strlen(t.shard) + 1);
        if (!copy) {
            cdl__io_close(L, t.file);
            rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
            break;
        }
        strcpy(copy, t.shard);
        t.shard = copy;
        rc = cdl__tar_scan(&t);
        cdl__io_close(L, t.file);
        cdl__free(L, copy);
    }
    if (stream) cdl__remote_scan_end(L);
    if (rc == COORDL_OK) rc = cdl__tar_finish(&t);
    cdl__free(L, t.win);
    if (rc == COORDL_OK && t.skipped > CDL_TAR_SKIPS_LOGGED)
        cdl__log(L, COORDL_LOG_WARN, "source: %s: %zu more link or sparse members skipped (the first %u are named "
                 "above)", L->cfg.source, t.skipped - CDL_TAR_SKIPS_LOGGED, CDL_TAR_SKIPS_LOGGED);
    cdl__tar_index_free(&t);
    return rc;
}

/* llm.c token shards: a 256 x int32 header (magic, version, token
 * count), then the tokens. Items are windows of seq_len + 1 tokens at a
 * stride of seq_len; they are not materialised (a 10-billion-token corpus
 * has 10 million windows of 1024): an item id maps to its shard by a
 * binary search over the shards' first ids. */

/* ---- shards indexed as the window reaches them ------------------------------
 * (docs/shuffle.md) The shard-window order on tar shards, in one process
 * with no cache or the MinIO one, no saved index and class labels from
 * .cls members, needs no index at open: it lists the shards, scans the first one (to learn
 * that its samples carry .cls labels, and to fail early on a source that
 * is not tar shards), and leaves every other shard to the sampler, which
 * has each scanned when its window is reached (index.c keeps the counts and
 * the resident blocks). A scan here is the open's scan of one shard: the
 * same members, links and labels, so an item is what a full scan makes of
 * it; only its id differs ((shard << 32) | ordinal, not a dense number). */

/* The lazy index's scan of shard s (cdl__lazy_scan_fn): on any thread. */
static coordl_status cdl__tar_lazy_scan(coordl *L, uint32_t shard, cdl__lazy_block *out, char *err, size_t errcap) {
    cdl__tar_index t;
    memset(&t, 0, sizeof t);
    t.L = L;
    t.lazy = 1;
    t.shard_index = shard;
    char why[CDL_ERRMSG_MAX];
    const char *path = L->index.strings + L->index.tar_shards[shard]; /* the arena no longer moves */
    t.shard = path;
    coordl_status rc = (t.win = cdl__malloc(L, CDL_TAR_WINDOW)) ? COORDL_OK : COORDL_ERR_NOMEM;
    if (rc != COORDL_OK) {
        snprintf(err, errcap, "out of memory");
        return rc;
    }
    rc = cdl__io_open(L, path, &t.file, &t.size, why, sizeof why);
    if (rc != COORDL_OK) {
        snprintf(err, errcap, "cannot open it: %s", why);
    } else {
        cdl__io_sequential(L, t.file);
        cdl__open_errmsg[0] = '\0';
        rc = cdl__tar_scan(&t);
        cdl__io_close(L, t.file);
        if (rc != COORDL_OK) snprintf(err, errcap, "%s", cdl__open_errmsg[0] ? cdl__open_errmsg : coordl_strerror(rc));
    }
    if (rc == COORDL_OK && t.nsamples > UINT32_MAX - 1) {
        snprintf(err, errcap, "more than 2^32 - 2 samples in one shard");
        rc = COORDL_ERR_INVALID;
    }
    memset(out, 0, sizeof *out);
    if (rc == COORDL_OK && t.nsamples) {
        out->refs = cdl__malloc(L, t.nsamples * sizeof *out->refs);
        out->name_offs = cdl__malloc(L, t.nsamples * sizeof *out->name_offs);
        if (!out->refs || !out->name_offs) {
            cdl__lazy_block_free(L, out);
            snprintf(err, errcap, "out of memory for %zu items", t.nsamples);
            rc = COORDL_ERR_NOMEM;
        }
    }
    if (rc == COORDL_OK) {
        size_t unlabelled = 0;
        for (size_t i = 0; i < t.nsamples; i++) {
            const cdl__tar_sample *x = &t.samples[i];
            out->refs[i].offset = x->offset;
            out->refs[i].bytes = x->bytes;
            out->refs[i].shard = shard;
            out->refs[i].label = x->label;
            out->name_offs[i] = (uint32_t)x->path_off;
            unlabelled += x->label < 0;
        }
        out->count = (uint32_t)t.nsamples;
        out->names = t.lz_names; /* the block owns them now */
        t.lz_names = NULL;
        if (unlabelled)
            cdl__log(L, COORDL_LOG_WARN, "source: tar shard %s: %zu of %zu samples have no .cls member; their label "
                     "is -1 (a lazily indexed source takes labels from .cls members only)", path, unlabelled,
                     t.nsamples);
    }
    cdl__free(L, t.win);
    cdl__tar_index_free(&t);
    return rc;
}

/* Whether open may leave the shards unscanned (see above). */
CDL_PRIVATE int cdl__tar_lazy_possible(const coordl *L) {
    return L->cfg.shuffle == COORDL_SHUFFLE_SHARD_WINDOW && L->cfg.pipeline != COORDL_PIPE_TOKENS && L->cfg.pipeline != COORDL_PIPE_AUDIO &&
           L->cfg.labels == COORDL_LABELS_CLASS &&
           (L->cfg.cache_bytes == 0 || L->cfg.cache_policy == COORDL_CACHE_MINIO) && !(L->cfg.group && L->cfg.group[0]) &&
           !L->cfg.mpi_comm;
}

/* Open's part of a lazy index, the shards listed: the first shard scanned.
 * 1: lazy from here on; 0: scan every shard instead (the first shard's
 * samples carry no .cls label: their labels are class folders, numbered
 * over the whole set); < 0: an error (said through cdl__open_fail). */
CDL_PRIVATE int cdl__tar_lazy_open(coordl *L, coordl_status *rc) {
    const size_t ns = L->index.ntar_shards;
    const uint64_t width = L->cfg.shuffle_window_shards ? L->cfg.shuffle_window_shards : 8;
    /* the windows the workers, the read-ahead and the stream may be in at
     * once: the current one, the next, and the one before */
    const uint64_t resident = 3 * width + 16;
    *rc = cdl__lazy_init(L, cdl__tar_lazy_scan, (size_t)(resident < ns ? resident : ns));
    if (*rc != COORDL_OK) return -1;
    char err[CDL_ERRMSG_MAX];
    cdl__lazy_block b;
    coordl_status r = cdl__tar_lazy_scan(L, 0, &b, err, sizeof err);
    if (r != COORDL_OK) {
        *rc = cdl__open_fail(r, "source: tar shard %s: %s", L->index.strings + L->index.tar_shards[0], err);
        return -1;
    }
    int labelled = b.count > 0;
    for (uint32_t i = 0; i < b.count && labelled; i++) labelled = b.refs[i].label >= 0;
    if (!labelled) {
        cdl__lazy_block_free(L, &b);
        cdl__lazy_free(L);
        cdl__log(L, COORDL_LOG_INFO, "source: %s: the first shard's samples have no .cls labels, so every shard is "
                 "scanned at open (class-folder labels are numbered over the whole set)", L->cfg.source);
        return 0;
    }
    cdl__lazy_adopt(L, 0, &b); /* kept: epoch 0 may start there */
    cdl__log(L, COORDL_LOG_INFO, "source: %s: %zu tar shards, indexed as the shard window reaches them "
             "(docs/shuffle.md)", L->cfg.source, ns);
    return 1;
}
/* ---- src/indexfile.c --------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * indexfile.c - the saved index of a tar-shard source (cfg.index_path).
 *
 * Owns:  the index image (its format, its checksum, its checks), the
 *        packed per-item records L->index.tar_refs and the names they
 *        point to; writing index_path atomically, loading it, deciding it
 *        is stale, foreign or corrupt
 * Lock:  runs at open only; the image is read-only after (names are read
 *        by any thread without a lock)
 * Calls: status, io, tar (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */

/* ---- the image ------------------------------------------------------------
 * Every tar-shard index, scanned or loaded, ends as one image: the bytes
 * index_path holds, in this machine's byte order (a file from another
 * byte order is foreign). Layout, all offsets from the image's start:
 *
 *   header (144 bytes): magic "coordlIX", u32 byte-order mark 0x01020304,
 *     u32 version, u64 image bytes, u64 checksum (of the whole image with
 *     these 8 bytes as zeros), u64 items, u64 shards, u64 dataset bytes,
 *     u32 classes, u32 what the source was indexed for (1: WAV files, 0:
 *     images), then (offset, length) of the sections: source, shards,
 *     items, name offsets, names
 *   source: cfg.source as given (no NUL)
 *   shards: per shard u64 size, i64 mtime in ns (-1: not known: an URL or
 *     a caller's reader), u32 path bytes, u32 ETag bytes, the path, the
 *     ETag, zeros to a multiple of 8
 *   items: per item a cdl__tar_ref (24 bytes: offset, size, shard, label)
 *   name offsets: per item a u64 into names
 *   names: per item "<shard path>:<member>" and a NUL
 *
 * Loading copies the items (24 bytes each stay resident) and keeps the
 * rest mapped: coordl_item_path reads a name from the mapping, so names
 * cost page cache, not the process's memory. */
#define CDL_IX_MAGIC "coordlIX"
#define CDL_IX_BOM 0x01020304u
#define CDL_IX_VERSION 1u
#define CDL_IX_HEADER 144u
#define CDL_IX_SHARD_FIXED 24u
#define CDL_IX_MTIME_UNKNOWN (-1)
#define CDL_IX_ETAG_MAX 128u

/* Header field offsets. */
enum {
    CDL_IXH_BOM = 8, CDL_IXH_VERSION = 12, CDL_IXH_LEN = 16, CDL_IXH_SUM = 24, CDL_IXH_ITEMS = 32,
    CDL_IXH_SHARDS = 40, CDL_IXH_BYTES = 48, CDL_IXH_CLASSES = 56, CDL_IXH_AUDIO = 60, CDL_IXH_SOURCE = 64,
    CDL_IXH_SHARDSEC = 80, CDL_IXH_ITEMSEC = 96, CDL_IXH_NAMEOFFS = 112, CDL_IXH_NAMES = 128
};

static uint64_t cdl__ix_u64(const cdl__u8 *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t cdl__ix_u32(const cdl__u8 *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static void cdl__ix_put64(cdl__u8 *p, uint64_t v) { memcpy(p, &v, 8); }
static void cdl__ix_put32(cdl__u8 *p, uint32_t v) { memcpy(p, &v, 4); }

/* A 64-bit checksum, eight bytes a step (a 1M-item image is about 80 MB:
 * it must take well under the 1 s a load may take). Not cryptographic: it
 * catches a torn or damaged file, not a forged one. */
static uint64_t cdl__ix_mix(uint64_t h, const cdl__u8 *p, size_t n) {
    const uint64_t k = 0x9E3779B97F4A7C15ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        h = (h ^ cdl__ix_u64(p + i)) * k;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ p[i]) * k;
    return h;
}
CDL_PRIVATE uint64_t cdl__ix_checksum(const cdl__u8 *p, size_t n) {
    static const cdl__u8 zero[8];
    uint64_t h = cdl__ix_mix(0xC0D1D1C5ull ^ n, p, CDL_IXH_SUM);
    h = cdl__ix_mix(h, zero, 8);
    return cdl__ix_mix(h, p + CDL_IXH_SUM + 8, n - CDL_IXH_SUM - 8);
}

/* One shard record of an image, parsed (path and etag point into it). */
typedef struct cdl__ix_shard {
    uint64_t size;
    int64_t mtime_ns;
    const char *path, *etag;
    uint32_t path_len, etag_len;
} cdl__ix_shard;

/* The shard record at *pos, within [pos, end); *pos moves past it. 0 when
 * it does not fit. */
static int cdl__ix_shard_next(const cdl__u8 *p, uint64_t *pos, uint64_t end, cdl__ix_shard *s) {
    if (*pos > end || end - *pos < CDL_IX_SHARD_FIXED) return 0;
    const cdl__u8 *r = p + *pos;
    s->size = cdl__ix_u64(r);
    s->mtime_ns = (int64_t)cdl__ix_u64(r + 8);
    s->path_len = cdl__ix_u32(r + 16);
    s->etag_len = cdl__ix_u32(r + 20);
    const uint64_t body = (uint64_t)s->path_len + s->etag_len, padded = (CDL_IX_SHARD_FIXED + body + 7) / 8 * 8;
    if (s->path_len == 0 || s->etag_len >= CDL_IX_ETAG_MAX || padded > end - *pos) return 0;
    s->path = (const char *)r + CDL_IX_SHARD_FIXED;
    s->etag = s->path + s->path_len;
    if (memchr(s->path, '\0', s->path_len) || memchr(s->etag, '\0', s->etag_len)) return 0;
    *pos += padded;
    return 1;
}

/* Checks an image of n bytes for what it indexes (source, audio) and its
 * own consistency, so that nothing read from it later is out of bounds.
 * 0: sound; CDL_IX_FOREIGN: another source, pipeline, version or byte
 * order; CDL_IX_CORRUPT: damaged. why says what. Touches nothing else:
 * the fuzz target feeds it any bytes. */
CDL_PRIVATE int cdl__ix_check(const cdl__u8 *p, size_t n, const char *source, int audio, char *why, size_t cap) {
    if (n < CDL_IX_HEADER || memcmp(p, CDL_IX_MAGIC, 8) != 0) {
        snprintf(why, cap, "not a coordl index (no \"%s\" header)", CDL_IX_MAGIC);
        return CDL_IX_CORRUPT;
    }
    if (cdl__ix_u32(p + CDL_IXH_BOM) != CDL_IX_BOM) {
        snprintf(why, cap, "written on a machine of another byte order");
        return CDL_IX_FOREIGN;
    }
    if (cdl__ix_u32(p + CDL_IXH_VERSION) != CDL_IX_VERSION) {
        snprintf(why, cap, "format version %u (this coordl reads %u)", cdl__ix_u32(p + CDL_IXH_VERSION),
                 CDL_IX_VERSION);
        return CDL_IX_FOREIGN;
    }
    if (cdl__ix_u64(p + CDL_IXH_LEN) != n) {
        snprintf(why, cap, "%zu bytes, the header says %llu (cut short or appended to)", n,
                 (unsigned long long)cdl__ix_u64(p + CDL_IXH_LEN));
        return CDL_IX_CORRUPT;
    }
    if (cdl__ix_checksum(p, n) != cdl__ix_u64(p + CDL_IXH_SUM)) {
        snprintf(why, cap, "checksum mismatch (the file is damaged)");
        return CDL_IX_CORRUPT;
    }
    const uint64_t items = cdl__ix_u64(p + CDL_IXH_ITEMS), shards = cdl__ix_u64(p + CDL_IXH_SHARDS);
    uint64_t off[5], len[5];
    static const unsigned at[5] = {CDL_IXH_SOURCE, CDL_IXH_SHARDSEC, CDL_IXH_ITEMSEC, CDL_IXH_NAMEOFFS, CDL_IXH_NAMES};
    if (items > (uint64_t)INT32_MAX || shards > UINT32_MAX || shards == 0) {
        snprintf(why, cap, "implausible counts (%llu items, %llu shards)", (unsigned long long)items,
                 (unsigned long long)shards);
        return CDL_IX_CORRUPT;
    }
    for (int i = 0; i < 5; i++) {
        off[i] = cdl__ix_u64(p + at[i]);
        len[i] = cdl__ix_u64(p + at[i] + 8);
        if (off[i] < CDL_IX_HEADER || off[i] > n || len[i] > n - off[i] || ((i == 2 || i == 3) && off[i] % 8) ||
            (i == 2 && len[i] != items * sizeof(cdl__tar_ref)) || (i == 3 && len[i] != items * 8)) {
            snprintf(why, cap, "section %d out of bounds", i);
            return CDL_IX_CORRUPT;
        }
    }
    if (len[4] == 0 || p[off[4] + len[4] - 1] != '\0') {
        snprintf(why, cap, "names not NUL-terminated");
        return CDL_IX_CORRUPT;
    }
    if (len[0] != strlen(source) || memcmp(p + off[0], source, len[0]) != 0) {
        snprintf(why, cap, "indexes another source (\"%.*s\")", (int)(len[0] < 200 ? len[0] : 200),
                 (const char *)p + off[0]);
        return CDL_IX_FOREIGN;
    }
    if ((int)cdl__ix_u32(p + CDL_IXH_AUDIO) != (audio ? 1 : 0)) {
        snprintf(why, cap, "indexed for another pipeline (%s)", audio ? "images, not WAV files" : "WAV files");
        return CDL_IX_FOREIGN;
    }
    uint64_t pos = off[1];
    cdl__ix_shard s;
    for (uint64_t i = 0; i < shards; i++)
        if (!cdl__ix_shard_next(p, &pos, off[1] + len[1], &s)) {
            snprintf(why, cap, "shard record %llu malformed", (unsigned long long)i);
            return CDL_IX_CORRUPT;
        }
    const uint32_t classes = cdl__ix_u32(p + CDL_IXH_CLASSES);
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < items; i++) {
        cdl__tar_ref r;
        memcpy(&r, p + off[2] + i * sizeof r, sizeof r);
        const uint64_t name = cdl__ix_u64(p + off[3] + i * 8);
        if (r.shard >= shards || r.label < 0 || (uint32_t)r.label >= classes || name >= len[4] ||
            r.bytes > UINT64_MAX - bytes) {
            snprintf(why, cap, "item %llu malformed", (unsigned long long)i);
            return CDL_IX_CORRUPT;
        }
        bytes += r.bytes;
    }
    if (bytes != cdl__ix_u64(p + CDL_IXH_BYTES)) {
        snprintf(why, cap, "the items' sizes do not add up to the dataset's bytes");
        return CDL_IX_CORRUPT;
    }
    return 0;
}

/* What a shard is now: its size, and its mtime (a local file) or its ETag
 * (an http(s):// object). A caller's reader gives the size only. */
static coordl_status cdl__ix_stamp(const coordl *L, const char *path, uint64_t *size, int64_t *mtime_ns, char *etag,
                                   char *why, size_t cap) {
    struct stat sb;
    *mtime_ns = CDL_IX_MTIME_UNKNOWN;
    etag[0] = '\0';
    if (L->io == &cdl__posix_io && stat(path, &sb) == 0) {
        *size = (uint64_t)sb.st_size;
        *mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
        return COORDL_OK;
    }
    void *f;
    coordl_status rc = cdl__io_open(L, path, &f, size, why, cap);
    if (rc != COORDL_OK) return rc;
    cdl__io_etag(L, f, etag, CDL_IX_ETAG_MAX);
    cdl__io_close(L, f);
    return COORDL_OK;
}

/* The image of the index just scanned (items, tar_items, strings,
 * tar_shards), in *out (cdl__malloc). */
static coordl_status cdl__ix_build(coordl *L, cdl__u8 **out, size_t *out_len) {
    const cdl__index *x = &L->index;
    const size_t src_len = strlen(L->cfg.source);
    uint64_t shards_len = 0, names_len = 0;
    char (*etags)[CDL_IX_ETAG_MAX] = cdl__calloc(L, x->ntar_shards, sizeof *etags);
    uint64_t *sizes = cdl__calloc(L, x->ntar_shards, sizeof *sizes);
    int64_t *mtimes = cdl__calloc(L, x->ntar_shards, sizeof *mtimes);
    coordl_status rc = etags && sizes && mtimes ? COORDL_OK : cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; rc == COORDL_OK && i < x->ntar_shards; i++) {
        char why[CDL_ERRMSG_MAX];
        const char *path = x->strings + x->tar_shards[i];
        rc = cdl__ix_stamp(L, path, &sizes[i], &mtimes[i], etags[i], why, sizeof why);
        if (rc != COORDL_OK) rc = cdl__open_fail(rc, "index: cannot stat shard %s: %s", path, why);
        shards_len += (CDL_IX_SHARD_FIXED + strlen(path) + strlen(etags[i]) + 7) / 8 * 8;
    }
    for (uint64_t i = 0; rc == COORDL_OK && i < x->num_items; i++) names_len += strlen(x->strings + x->items[i].path_off) + 1;
    if (names_len == 0) names_len = 1;
    const uint64_t src_off = CDL_IX_HEADER, sh_off = (src_off + src_len + 7) / 8 * 8, it_off = sh_off + shards_len,
                   no_off = it_off + x->num_items * sizeof(cdl__tar_ref), nm_off = no_off + x->num_items * 8,
                   total = nm_off + names_len;
    cdl__u8 *p = rc == COORDL_OK ? cdl__calloc(L, 1, (size_t)total) : NULL;
    if (rc == COORDL_OK && !p) rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the index (%llu bytes)",
                                                   (unsigned long long)total);
    if (rc == COORDL_OK) {
        memcpy(p, CDL_IX_MAGIC, 8);
        cdl__ix_put32(p + CDL_IXH_BOM, CDL_IX_BOM);
        cdl__ix_put32(p + CDL_IXH_VERSION, CDL_IX_VERSION);
        cdl__ix_put64(p + CDL_IXH_LEN, total);
        cdl__ix_put64(p + CDL_IXH_ITEMS, x->num_items);
        cdl__ix_put64(p + CDL_IXH_SHARDS, x->ntar_shards);
        cdl__ix_put64(p + CDL_IXH_BYTES, x->dataset_bytes);
        cdl__ix_put32(p + CDL_IXH_CLASSES, x->num_classes);
        cdl__ix_put32(p + CDL_IXH_AUDIO, L->cfg.pipeline == COORDL_PIPE_AUDIO);
        const uint64_t sec[5][2] = {{src_off, src_len}, {sh_off, shards_len}, {it_off, x->num_items * sizeof(cdl__tar_ref)},
                                    {no_off, x->num_items * 8}, {nm_off, names_len}};
        static const unsigned at[5] = {CDL_IXH_SOURCE, CDL_IXH_SHARDSEC, CDL_IXH_ITEMSEC, CDL_IXH_NAMEOFFS,
                                       CDL_IXH_NAMES};
        for (int i = 0; i < 5; i++) {
            cdl__ix_put64(p + at[i], sec[i][0]);
            cdl__ix_put64(p + at[i] + 8, sec[i][1]);
        }
        memcpy(p + src_off, L->cfg.source, src_len);
        uint64_t at_sh = sh_off;
        for (size_t i = 0; i < x->ntar_shards; i++) {
            const char *path = x->strings + x->tar_shards[i];
            const uint32_t pl = (uint32_t)strlen(path), el = (uint32_t)strlen(etags[i]);
            cdl__ix_put64(p + at_sh, sizes[i]);
            cdl__ix_put64(p + at_sh + 8, (uint64_t)mtimes[i]);
            cdl__ix_put32(p + at_sh + 16, pl);
            cdl__ix_put32(p + at_sh + 20, el);
            memcpy(p + at_sh + CDL_IX_SHARD_FIXED, path, pl);
            memcpy(p + at_sh + CDL_IX_SHARD_FIXED + pl, etags[i], el);
            at_sh += (CDL_IX_SHARD_FIXED + pl + el + 7) / 8 * 8;
        }
        uint64_t name_at = 0;
        for (uint64_t i = 0; i < x->num_items; i++) {
            cdl__tar_ref r = {x->tar_items[i].offset, x->items[i].bytes, x->tar_items[i].shard, x->items[i].label};
            memcpy(p + it_off + i * sizeof r, &r, sizeof r);
            cdl__ix_put64(p + no_off + i * 8, name_at);
            const char *name = x->strings + x->items[i].path_off;
            const size_t nl = strlen(name) + 1;
            memcpy(p + nm_off + name_at, name, nl);
            name_at += nl;
        }
        cdl__ix_put64(p + CDL_IXH_SUM, cdl__ix_checksum(p, (size_t)total));
        *out = p;
        *out_len = (size_t)total;
    }
    cdl__free(L, etags);
    cdl__free(L, sizes);
    cdl__free(L, mtimes);
    return rc;
}

/* Frees the image and what points into it. */
CDL_PRIVATE void cdl__ix_release(coordl *L) {
    cdl__index *x = &L->index;
    if (x->image) {
        if (x->image_mapped) munmap(x->image, x->image_len);
        else cdl__free(L, x->image);
    }
    if (!x->tar_refs_shared) cdl__free(L, x->tar_refs);
    x->tar_refs_shared = 0;
    x->image = NULL;
    x->image_len = 0;
    x->image_mapped = 0;
    x->tar_refs = NULL;
    x->name_offs = NULL;
    x->names = NULL;
    x->names_len = 0;
}

/* L's tar index becomes the checked image p (n bytes; mapped or a
 * cdl__malloc allocation, which L then owns): the scan's arrays and
 * string arena go, the shard paths come from the image. */
CDL_PRIVATE coordl_status cdl__ix_adopt(coordl *L, cdl__u8 *p, size_t n, int mapped) {
    cdl__index *x = &L->index;
    const uint64_t items = cdl__ix_u64(p + CDL_IXH_ITEMS), shards = cdl__ix_u64(p + CDL_IXH_SHARDS);
    /* a group's index (in /dev/shm: never evicted, never re-read from a
     * slow file system) keeps its items where they are, shared by every
     * sibling; any other image's items are copied, so a training step
     * never waits on a page fault to a network file system */
    const int shared = mapped == CDL_IX_MAPPED_SHARED;
    cdl__tar_ref *refs = shared ? (cdl__tar_ref *)(void *)(p + cdl__ix_u64(p + CDL_IXH_ITEMSEC))
                                : cdl__malloc(L, (size_t)(items ? items : 1) * sizeof *refs);
    uint64_t *shard_offs = cdl__malloc(L, (size_t)shards * sizeof *shard_offs);
    char *strings = NULL;
    size_t strings_cap = 0, strings_len = 0;
    int ok = refs && shard_offs;
    uint64_t pos = cdl__ix_u64(p + CDL_IXH_SHARDSEC), end = pos + cdl__ix_u64(p + CDL_IXH_SHARDSEC + 8);
    for (uint64_t i = 0; ok && i < shards; i++) {
        cdl__ix_shard s;
        memset(&s, 0, sizeof s); /* filled: the image was checked (gcc -O3 cannot see it) */
        cdl__ix_shard_next(p, &pos, end, &s); /* checked */
        ok = cdl__reserve(L, (void **)&strings, &strings_cap, strings_len + s.path_len + 1);
        if (!ok) break;
        memcpy(strings + strings_len, s.path, s.path_len);
        strings[strings_len + s.path_len] = '\0';
        shard_offs[i] = strings_len;
        strings_len += s.path_len + 1;
    }
    if (!ok) {
        if (!shared) cdl__free(L, refs);
        cdl__free(L, shard_offs);
        cdl__free(L, strings);
        return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory loading the index of %llu items",
                              (unsigned long long)items);
    }
    if (!shared) memcpy(refs, p + cdl__ix_u64(p + CDL_IXH_ITEMSEC), (size_t)items * sizeof *refs);
    /* box labels, read once the index is made (source.c), need each
     * item's .txt member, which the image does not hold: kept from the
     * scan (a saved index is not loaded with box labels) */
    if (x->tar_items && L->cfg.labels == COORDL_LABELS_BOXES && !x->tar_txt) {
        x->tar_txt = cdl__malloc(L, (size_t)(items ? items : 1) * sizeof *x->tar_txt);
        if (!x->tar_txt) {
            if (!shared) cdl__free(L, refs);
            cdl__free(L, shard_offs);
            cdl__free(L, strings);
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the box labels' places of %llu items",
                                  (unsigned long long)items);
        }
        for (uint64_t i = 0; i < items; i++) {
            x->tar_txt[i].offset = x->tar_items[i].txt_offset;
            x->tar_txt[i].bytes = x->tar_items[i].txt_bytes;
        }
    }
    cdl__ix_release(L);
    cdl__free(L, x->items);
    cdl__free(L, x->tar_items);
    cdl__free(L, x->tar_shards);
    cdl__free(L, x->strings);
    x->items = NULL;
    x->tar_items = NULL;
    x->strings = strings;
    x->strings_len = strings_len;
    x->strings_cap = strings_cap;
    x->tar_shards = shard_offs;
    x->ntar_shards = (size_t)shards;
    x->tar_refs = refs;
    x->num_items = items;
    x->num_classes = cdl__ix_u32(p + CDL_IXH_CLASSES);
    x->dataset_bytes = cdl__ix_u64(p + CDL_IXH_BYTES);
    x->image = p;
    x->image_len = n;
    x->image_mapped = mapped != CDL_IX_HEAP;
    x->tar_refs_shared = shared;
    x->name_offs = (const uint64_t *)(const void *)(p + cdl__ix_u64(p + CDL_IXH_NAMEOFFS));
    x->names = (const char *)p + cdl__ix_u64(p + CDL_IXH_NAMES);
    x->names_len = cdl__ix_u64(p + CDL_IXH_NAMES + 8);
    /* the checks and the copy touched every page: drop them from this
     * process (the file's pages stay in the page cache); a name is read
     * back when asked for */
    if (mapped) madvise(p, n, MADV_DONTNEED);
    return COORDL_OK;
}

/* Whether the checked image p indexes the shards listed now, as they are
 * now. 0 and why when not. */
static int cdl__ix_fresh(const coordl *L, const cdl__u8 *p, char *why, size_t cap) {
    const cdl__index *x = &L->index;
    const uint64_t shards = cdl__ix_u64(p + CDL_IXH_SHARDS);
    if (shards != x->ntar_shards) {
        snprintf(why, cap, "it records %llu shards, the source names %zu now", (unsigned long long)shards,
                 x->ntar_shards);
        return 0;
    }
    uint64_t pos = cdl__ix_u64(p + CDL_IXH_SHARDSEC), end = pos + cdl__ix_u64(p + CDL_IXH_SHARDSEC + 8);
    for (size_t i = 0; i < x->ntar_shards; i++) {
        cdl__ix_shard s;
        cdl__ix_shard_next(p, &pos, end, &s); /* checked */
        const char *path = x->strings + x->tar_shards[i];
        if (strlen(path) != s.path_len || memcmp(path, s.path, s.path_len) != 0) {
            snprintf(why, cap, "shard %zu is %.150s now, it records %.*s", i, path, (int)(s.path_len < 150 ? s.path_len : 150), s.path);
            return 0;
        }
        uint64_t size;
        int64_t mtime;
        char etag[CDL_IX_ETAG_MAX], err[CDL_ERRMSG_MAX];
        if (cdl__ix_stamp(L, path, &size, &mtime, etag, err, sizeof err) != COORDL_OK) {
            snprintf(why, cap, "shard %.200s: %.200s", path, err);
            return 0;
        }
        if (size != s.size || mtime != s.mtime_ns || strlen(etag) != s.etag_len ||
            memcmp(etag, s.etag, s.etag_len) != 0) {
            snprintf(why, cap, "shard %.300s changed since it was indexed (%s)", path,
                     size != s.size ? "its size" : mtime != s.mtime_ns ? "its modification time" : "its ETag");
            return 0;
        }
    }
    return 1;
}

/* Loads index_path when it is sound and fresh. 1: loaded; 0: not (absent,
 * stale, foreign, corrupt: *why, and *absent for a missing file); -1: an
 * error that fails the open (out of memory). */
static int cdl__ix_try_file(coordl *L, const char *path, int how, int *absent, char *why, size_t cap) {
    *absent = 0;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *absent = errno == ENOENT;
        snprintf(why, cap, "%s", strerror(errno));
        return 0;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < (off_t)CDL_IX_HEADER) {
        close(fd);
        snprintf(why, cap, "corrupt: not a coordl index (a regular file of at least %u bytes)", CDL_IX_HEADER);
        return 0;
    }
    const size_t n = (size_t)sb.st_size;
    void *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(why, cap, "cannot map it: %s", strerror(errno));
        return 0;
    }
    char what[CDL_ERRMSG_MAX - 64];
    const int bad = cdl__ix_check(m, n, L->cfg.source, L->cfg.pipeline == COORDL_PIPE_AUDIO, what, sizeof what);
    if (bad) {
        snprintf(why, cap, "%s: %s", bad == CDL_IX_FOREIGN ? "foreign" : "corrupt", what);
        munmap(m, n);
        return 0;
    }
    if (!cdl__ix_fresh(L, m, what, sizeof what)) {
        snprintf(why, cap, "stale: %s", what);
        munmap(m, n);
        return 0;
    }
    if (cdl__ix_adopt(L, m, n, how) != COORDL_OK) {
        munmap(m, n);
        return -1;
    }
    return 1;
}

/* Writes the image to path atomically: a temporary beside it, fsync,
 * rename, fsync of the folder. 0 and why on failure (nothing left). */
CDL_PRIVATE int cdl__ix_write(const cdl__u8 *p, size_t n, const char *path, char *why, size_t cap) {
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%lx", path, (long)getpid(), (unsigned long)(uintptr_t)p) >= (int)sizeof tmp) {
        snprintf(why, cap, "path too long");
        return 0;
    }
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(why, cap, "cannot create %.300s: %s", tmp, strerror(errno));
        return 0;
    }
    size_t at = 0;
    while (at < n) {
        const ssize_t w = write(fd, p + at, n - at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        at += (size_t)w;
    }
    int ok = at == n;
    if (!ok) snprintf(why, cap, "cannot write %.300s: %s", tmp, strerror(errno));
    if (ok && fsync(fd) != 0) {
        snprintf(why, cap, "cannot fsync %.300s: %s", tmp, strerror(errno));
        ok = 0;
    }
    close(fd);
    if (ok && rename(tmp, path) != 0) {
        snprintf(why, cap, "cannot rename %.150s to %.150s: %s", tmp, path, strerror(errno));
        ok = 0;
    }
    if (!ok) {
        unlink(tmp);
        return 0;
    }
    /* the rename itself is durable once its folder is synced */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    const int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return 1;
}

/* Scans the listed shards and makes the result an image: written to
 * path (when given) and mapped from there, else kept in memory. */
static coordl_status cdl__ix_scan(coordl *L, int kind, const char *text, size_t len, const char *path, int how,
                                  const char *what) {
    coordl_status rc = cdl__index_tar(L, kind, text, len);
    cdl__u8 *p = NULL;
    size_t n = 0;
    if (rc == COORDL_OK) rc = cdl__ix_build(L, &p, &n);
    if (rc != COORDL_OK) return rc;
    if (path) {
        char why[CDL_ERRMSG_MAX];
        if (!cdl__ix_write(p, n, path, why, sizeof why)) {
            cdl__log(L, COORDL_LOG_WARN, "%s: %s not saved (%s); this open uses the scan", what, path, why);
        } else {
            const int fd = open(path, O_RDONLY | O_CLOEXEC);
            void *m = fd >= 0 ? mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
            if (fd >= 0) close(fd);
            /* the file is what later opens load: this one reads it too
             * (its names stay on disk), once it checks as written */
            if (m != MAP_FAILED && memcmp(m, p, CDL_IX_HEADER) == 0) {
                rc = cdl__ix_adopt(L, m, n, how);
                if (rc != COORDL_OK) munmap(m, n);
                cdl__free(L, p);
                if (rc == COORDL_OK)
                    cdl__log(L, COORDL_LOG_INFO, "%s: saved %s (%llu items, %zu shards, %zu bytes)", what, path,
                             (unsigned long long)L->index.num_items, L->index.ntar_shards, n);
                return rc;
            }
            if (m != MAP_FAILED) munmap(m, n);
        }
    }
    rc = cdl__ix_adopt(L, p, n, CDL_IX_HEAP);
    if (rc != COORDL_OK) cdl__free(L, p);
    return rc;
}

/* The file a coordinated group shares its index through when index_path
 * is not set: the first member to open scans and writes it, its siblings
 * map it (cfg.group is a checked name: no slash). 0: not a group, or
 * index_path is set (the group then shares that file the same way). */
CDL_PRIVATE int cdl__ix_group_path(const coordl *L, char *buf, size_t cap) {
    if (!L->cfg.group || !L->cfg.group[0] || (L->cfg.index_path && L->cfg.index_path[0])) return 0;
    const int n = snprintf(buf, cap, "/dev/shm/coordl-%s.index", L->cfg.group);
    return n > 0 && (size_t)n < cap;
}

/* Indexes a tar-shard source (kind and list as cdl__index_tar takes
 * them), through cfg.index_path when set: loaded when sound and fresh,
 * else scanned and saved. Processes opening at once take the lock file
 * "<index_path>.lock" while they scan, so one scans and the others load
 * what it wrote. A coordinated group without index_path does the same
 * through its file in /dev/shm (cdl__ix_group_path), whose items its
 * members map instead of copying. */
CDL_PRIVATE coordl_status cdl__index_tar_saved(coordl *L, int kind, const char *text, size_t len) {
    const char *path = L->cfg.index_path;
    const char *what = "index_path";
    int how = CDL_IX_MAPPED;
    char group_path[PATH_MAX];
    if ((!path || !path[0]) && cdl__ix_group_path(L, group_path, sizeof group_path)) {
        path = group_path;
        what = "group index";
        how = CDL_IX_MAPPED_SHARED;
    }
    coordl_status rc = cdl__tar_list_shards(L, kind, text, len);
    if (rc != COORDL_OK) return rc;
    if (L->index.ntar_shards == 0)
        return cdl__open_fail(COORDL_ERR_INVALID, "source: %s names no .tar shards", L->cfg.source);
    if (path && path[0] && L->cfg.labels == COORDL_LABELS_BOXES) {
        /* the saved index holds no .txt members: box labels need the scan */
        cdl__log(L, COORDL_LOG_INFO, "%s: %s not used with labels = COORDL_LABELS_BOXES (the shards are "
                 "scanned for their .txt members)", what, path);
        path = NULL;
    }
    if ((!path || !path[0]) && cdl__tar_lazy_possible(L)) {
        const int lazy = cdl__tar_lazy_open(L, &rc);
        if (lazy > 0) return COORDL_OK;
        if (lazy < 0) return rc;
    }
    if (!path || !path[0]) return cdl__ix_scan(L, kind, text, len, NULL, CDL_IX_HEAP, what);
    char why[CDL_ERRMSG_MAX];
    int absent;
    int got = cdl__ix_try_file(L, path, how, &absent, why, sizeof why);
    if (got > 0)
        cdl__log(L, COORDL_LOG_INFO, "%s: loaded %s (%llu items, %zu shards)", what, path,
                 (unsigned long long)L->index.num_items, L->index.ntar_shards);
    if (got) return got > 0 ? COORDL_OK : cdl__open_fail(COORDL_ERR_NOMEM, "out of memory loading %s", path);
    char lock[PATH_MAX];
    int lfd = -1;
    if (snprintf(lock, sizeof lock, "%s.lock", path) < (int)sizeof lock) {
        lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        while (lfd >= 0 && flock(lfd, LOCK_EX) != 0 && errno == EINTR) {}
    }
    if (lfd >= 0) { /* another process may have saved it while we waited */
        char why2[CDL_ERRMSG_MAX];
        int absent2;
        got = cdl__ix_try_file(L, path, how, &absent2, why2, sizeof why2);
        if (got) {
            close(lfd);
            if (got > 0) cdl__log(L, COORDL_LOG_INFO, "%s: loaded %s, saved meanwhile by another process", what, path);
            return got > 0 ? COORDL_OK : cdl__open_fail(COORDL_ERR_NOMEM, "out of memory loading %s", path);
        }
    }
    if (absent) cdl__log(L, COORDL_LOG_INFO, "%s: %s does not exist yet; scanning the shards to save it", what, path);
    else cdl__log(L, COORDL_LOG_WARN, "%s: %s not used (%s); rescanning the shards", what, path, why);
    rc = cdl__ix_scan(L, kind, text, len, path, how, what);
    if (lfd >= 0) close(lfd); /* releases the lock */
    return rc;
}

/* Removes a group's index file and its lock (the last member leaving). */
CDL_PRIVATE void cdl__ix_group_remove(const coordl *L) {
    char path[PATH_MAX], lock[PATH_MAX + 8];
    if (!cdl__ix_group_path(L, path, sizeof path)) return;
    snprintf(lock, sizeof lock, "%s.lock", path);
    unlink(path);
    unlink(lock);
}

#ifdef COORDL_MPI
/* A rank's index from the image another rank broadcast (p: cdl__malloc,
 * n bytes; L owns it on success). */
CDL_PRIVATE coordl_status cdl__index_from_image(coordl *L, cdl__u8 *p, size_t n) {
    char why[CDL_ERRMSG_MAX - 128];
    if (cdl__ix_check(p, n, L->cfg.source, L->cfg.pipeline == COORDL_PIPE_AUDIO, why, sizeof why))
        return cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: the index rank 0 sent does not fit this rank's config: %s",
                              why);
    return cdl__ix_adopt(L, p, n, CDL_IX_HEAP);
}

/* A rank's index from its node's copy of that image (p: a read-only
 * mapping of n bytes that L then owns; its items are read in place). */
CDL_PRIVATE coordl_status cdl__index_from_shared(coordl *L, cdl__u8 *p, size_t n) {
    char why[CDL_ERRMSG_MAX - 128];
    if (cdl__ix_check(p, n, L->cfg.source, L->cfg.pipeline == COORDL_PIPE_AUDIO, why, sizeof why))
        return cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: the node's copy of rank 0's index does not fit this "
                              "rank's config: %s", why);
    return cdl__ix_adopt(L, p, n, CDL_IX_MAPPED_SHARED);
}
#endif /* COORDL_MPI */
/* ---- src/source.c ------------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/*
 * source.c - token shards, the source dispatcher, reading one item.
 *
 * Owns:  the token shards' part of L->index; which indexer a source string
 *        names; the storage read of one item's bytes (whole file, tar
 *        member or token window)
 * Lock:  index writes at open only; reads are lock-free (W's buffers are
 *        its own)
 * Calls: status, remote, io, uring, index, tar, indexfile (lower layers
 *        only: src/modules.txt; tools/check-layers.py checks this line).
 */

#define CDL_SHARD_HEADER_BYTES 1024
#define CDL_SHARD_MAGIC_U16 20240520
#define CDL_SHARD_MAGIC_U32 20240801

#ifndef COORDL_NO_TOKENS
static coordl_status cdl__add_shard(coordl *L, const char *path, size_t *cap) {
    char err[CDL_ERRMSG_MAX];
    void *f;
    uint64_t shard_bytes, got = 0;
    coordl_status rc = cdl__io_open(L, path, &f, &shard_bytes, err, sizeof err);
    if (rc != COORDL_OK) return cdl__open_fail(rc, "source: cannot open token shard %s: %s", path, err);
    int32_t h[256];
    rc = cdl__io_read(L, f, path, h, sizeof h, 0, &got, err, sizeof err);
    cdl__io_close(L, f);
    if (rc != COORDL_OK) return cdl__open_fail(rc, "source: token shard %s", err);
    if (got != sizeof h)
        return cdl__open_fail(COORDL_ERR_CORRUPT, "source: token shard %s: shorter than its %d-byte header",
                              path, CDL_SHARD_HEADER_BYTES);
    uint32_t tb;
    if (h[0] == CDL_SHARD_MAGIC_U16 && h[1] == 1) tb = 2;
    else if (h[0] == CDL_SHARD_MAGIC_U32 && h[1] == 7) tb = 4;
    else
        return cdl__open_fail(COORDL_ERR_CORRUPT, "source: token shard %s: bad header (magic %d version %d; "
                              "expected 20240520/1 or 20240801/7)", path, h[0], h[1]);
    if (h[2] < 0) return cdl__open_fail(COORDL_ERR_CORRUPT, "source: token shard %s: negative token count", path);
    uint64_t ntok = (uint32_t)h[2];
    if (shard_bytes < CDL_SHARD_HEADER_BYTES + ntok * tb)
        return cdl__open_fail(COORDL_ERR_CORRUPT, "source: token shard %s: truncated body (%llu bytes; the "
                              "header promises %llu tokens = %llu bytes)", path, (unsigned long long)shard_bytes,
                              (unsigned long long)ntok, (unsigned long long)(CDL_SHARD_HEADER_BYTES + ntok * tb));
    if (L->index.nshards == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        void *p = cdl__realloc(L, L->index.shards, ncap * sizeof *L->index.shards);
        if (!p) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
        L->index.shards = p;
        *cap = ncap;
    }
    cdl__shard *sh = &L->index.shards[L->index.nshards++];
    if (!cdl__strings_append(L, path, strlen(path), &sh->path_off)) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    sh->tok_bytes = tb;
    sh->first_item = L->index.num_items;
    sh->nwindows = ntok > L->cfg.seq_len ? (ntok - 1) / L->cfg.seq_len : 0;
    L->index.num_items += sh->nwindows;
    L->index.dataset_bytes += sh->nwindows * (uint64_t)(L->cfg.seq_len + 1) * tb;
    return COORDL_OK;
}

static coordl_status cdl__index_tokens(coordl *L) {
    const char *src = L->cfg.source;
    size_t cap = 0;
    coordl_status rc = COORDL_OK;
    struct stat sb;
    if (strpbrk(src, "*?[")) {
        glob_t g;
        int e = glob(src, 0, NULL, &g);
        if (e == GLOB_NOMATCH) return cdl__open_fail(COORDL_ERR_INVALID, "source: no file matches %s", src);
        if (e != 0) return cdl__open_fail(COORDL_ERR_IO, "source: cannot expand %s", src);
        for (size_t i = 0; rc == COORDL_OK && i < g.gl_pathc; i++) rc = cdl__add_shard(L, g.gl_pathv[i], &cap);
        globfree(&g);
    } else if (stat(src, &sb) != 0 && L->io == &cdl__posix_io) {
        return cdl__open_fail(COORDL_ERR_INVALID, "source: %s does not exist (%s)", src, strerror(errno));
    } else if (stat(src, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        struct dirent **names;
        int n = scandir(src, &names, NULL, alphasort);
        if (n < 0) return cdl__open_fail(COORDL_ERR_IO, "source: cannot list %s: %s", src, strerror(errno));
        char path[PATH_MAX];
        for (int i = 0; i < n; i++) {
            struct stat fb;
            if (rc == COORDL_OK && names[i]->d_name[0] != '.' &&
                snprintf(path, sizeof path, "%s/%s", src, names[i]->d_name) < (int)sizeof path &&
                stat(path, &fb) == 0 && S_ISREG(fb.st_mode))
                rc = cdl__add_shard(L, path, &cap);
            free(names[i]);
        }
        free(names);
    } else {
        /* one shard, or a text list of shards (paths relative to it): a
         * list is text, a shard's header has NUL bytes */
        char err[CDL_ERRMSG_MAX];
        unsigned char head[CDL_SHARD_HEADER_BYTES];
        void *f;
        uint64_t src_bytes, got = 0;
        rc = cdl__io_open(L, src, &f, &src_bytes, err, sizeof err);
        if (rc != COORDL_OK) return cdl__open_fail(rc, "source: cannot open %s: %s", src, err);
        rc = cdl__io_read(L, f, src, head, sizeof head, 0, &got, err, sizeof err);
        cdl__io_close(L, f);
        if (rc != COORDL_OK) return cdl__open_fail(rc, "source: %s", err);
        char *text = NULL;
        size_t len = 0, at = 0;
        /* one shard still goes through the checks below (no window at all;
         * num_classes) */
        if (memchr(head, 0, (size_t)got)) rc = cdl__add_shard(L, src, &cap);
        else rc = cdl__io_slurp(L, src, "shard list", &text, &len);
        if (rc != COORDL_OK) return rc;
        char *path = NULL;
        size_t path_cap = 0, path_len;
        cdl__list_line ln = {0};
        int more;
        while (rc == COORDL_OK && (more = cdl__list_next(text, len, &at, &ln)) != 0) {
            if (more < 0)
                rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s line %llu: holds a NUL byte", src,
                                    (unsigned long long)ln.lineno);
            else if (!cdl__list_path(L, src, ln.text, ln.len, &path, &path_cap, &path_len))
                rc = cdl__open_fail(COORDL_ERR_NOMEM, "out of memory while reading %s", src);
            else
                rc = cdl__add_shard(L, path, &cap);
        }
        cdl__free(L, path);
        cdl__free(L, text);
    }
    if (rc == COORDL_OK && L->index.nshards == 0) rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s names no token shards", src);
    if (rc == COORDL_OK && L->index.num_items == 0)
        rc = cdl__open_fail(COORDL_ERR_INVALID, "source: the shards of %s hold no window of seq_len + 1 = %u tokens; "
                            "lower seq_len", src, L->cfg.seq_len + 1);
    L->index.num_classes = (uint32_t)L->index.nshards;
    return rc;
}
#else /* COORDL_NO_TOKENS: open refuses COORDL_PIPE_TOKENS (abi.c) */
static coordl_status cdl__index_tokens(coordl *L) {
    return cdl__open_fail(COORDL_ERR_UNSUPPORTED, "source: %s: token shards are not in this build "
                          "(COORDL_NO_TOKENS)", L->cfg.source);
}
#endif /* COORDL_NO_TOKENS */

/* A folder of tar shards: .tar files and no subfolder (a folder with
 * class folders stays an ImageFolder, whatever else it holds). */
static int cdl__is_shard_folder(const char *path) {
    DIR *d = opendir(path);
    if (!d) return 0;
    int tars = 0, dirs = 0;
    struct dirent *e;
    while (!dirs && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        int is_dir = e->d_type == DT_DIR;
        if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) {
            struct stat sb;
            is_dir = fstatat(dirfd(d), e->d_name, &sb, 0) == 0 && S_ISDIR(sb.st_mode);
        }
        dirs += is_dir;
        tars += !is_dir && cdl__is_tar_name(e->d_name);
    }
    closedir(d);
    return tars > 0 && dirs == 0;
}

/* A list of shards rather than of items: its first non-empty line has no
 * TAB and names a .tar file. */
static int cdl__is_shard_list(const char *text, size_t len) {
    size_t a = 0;
    while (a < len && (text[a] == '\n' || text[a] == '\r')) a++;
    size_t b = a;
    while (b < len && text[b] != '\n') b++;
    while (b > a && text[b - 1] == '\r') b--;
    if (b - a < 4 || memchr(text + a, '\t', b - a) || memchr(text + a, '\0', b - a)) return 0;
    return strncasecmp(text + b - 4, ".tar", 4) == 0;
}

/* What a file given as source is when it is no list: an image, a sound,
 * an archive, a token shard (by its leading bytes), or NULL. A newcomer's
 * first try is often one image; "line 1 holds a NUL byte" does not say
 * that it was the wrong kind of file. */
static const char *cdl__sniff_not_list(const unsigned char *b, size_t n) {
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return "a JPEG image";
    if (n >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0) return "a PNG image";
    if (n >= 6 && (memcmp(b, "GIF87a", 6) == 0 || memcmp(b, "GIF89a", 6) == 0)) return "a GIF image";
    if (n >= 12 && memcmp(b, "RIFF", 4) == 0 && memcmp(b + 8, "WAVE", 4) == 0) return "a WAV file";
    if (n >= 262 && memcmp(b + 257, "ustar", 5) == 0) return "a tar archive not named .tar";
    if (n >= 2 && b[0] == 0x1F && b[1] == 0x8B) return "a gzip file";
    if (n >= 4 && memcmp(b, "PK\x03\x04", 4) == 0) return "a zip file";
    if (n >= 4) {
        const uint32_t magic = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        if (magic == CDL_SHARD_MAGIC_U16 || magic == CDL_SHARD_MAGIC_U32) return "an llm.c token shard";
    }
    if (n >= 2 && b[0] == 'B' && b[1] == 'M' && memchr(b, 0, n < 64 ? n : 64)) return "a BMP image";
    return NULL;
}

/* WebDataset's brace notation, as its braceexpand does: each {a..b}
 * (numbers, zero-padded to the width of a when it has leading zeros or a
 * and b are as wide) or {x,y,z} group in turn, left to right, expanded
 * into lines of *out (paths relative to the folder before the first
 * brace unless URLs, as a list file's lines are). 0 with why set when the
 * pattern is malformed or names more than CDL_BRACE_MAX paths. */
#define CDL_BRACE_MAX 10000000u
static int cdl__brace_expand(const coordl *L, const char *pat, size_t strip, char **out, size_t *len, size_t *cap,
                             size_t *count, char *why, size_t whycap) {
    const char *open = strchr(pat, '{');
    if (!open) {
        const size_t n = strlen(pat) - strip;
        if (++*count > CDL_BRACE_MAX) {
            snprintf(why, whycap, "names more than %u paths", CDL_BRACE_MAX);
            return 0;
        }
        if (!cdl__reserve(L, (void **)out, cap, *len + n + 2)) {
            snprintf(why, whycap, "out of memory");
            return 0;
        }
        memcpy(*out + *len, pat + strip, n);
        *len += n;
        (*out)[(*len)++] = '\n';
        (*out)[*len] = '\0';
        return 1;
    }
    const char *close = strchr(open, '}');
    if (!close || memchr(open + 1, '{', (size_t)(close - open - 1))) {
        snprintf(why, whycap, "unbalanced or nested braces at offset %zu", (size_t)(open - pat));
        return 0;
    }
    const size_t pre = (size_t)(open - pat), body = (size_t)(close - open - 1), rest = strlen(close + 1);
    char *buf = cdl__malloc(L, pre + body + rest + 32);
    if (!buf) {
        snprintf(why, whycap, "out of memory");
        return 0;
    }
    memcpy(buf, pat, pre);
    int ok = 1;
    unsigned long long a, b;
    int na = 0, nb = 0;
    char dots[3] = "";
    if (sscanf(open + 1, "%llu%n..%llu%n", &a, &na, &b, &nb) == 2 && (size_t)nb == body &&
        sscanf(open + 1 + na, "%2[.]", dots) == 1) {
        const int wa = na, wb = nb - na - 2;
        const int width = open[1] == '0' || wa == wb ? wa : 0;
        if (a > b || b - a >= CDL_BRACE_MAX) {
            snprintf(why, whycap, "the range {%.*s} is empty or too large", (int)body, open + 1);
            ok = 0;
        }
        for (unsigned long long i = a; ok && i <= b; i++) {
            const int w = snprintf(buf + pre, 32, "%0*llu", width, i);
            memcpy(buf + pre + w, close + 1, rest + 1);
            ok = cdl__brace_expand(L, buf, strip, out, len, cap, count, why, whycap);
        }
    } else {
        for (const char *alt = open + 1; ok && alt <= close;) {
            const char *end = memchr(alt, ',', (size_t)(close - alt));
            if (!end) end = close;
            const size_t n = (size_t)(end - alt);
            char *nb2 = cdl__realloc(L, buf, pre + n + rest + 32);
            if (!nb2) {
                snprintf(why, whycap, "out of memory");
                ok = 0;
                break;
            }
            buf = nb2;
            memcpy(buf + pre, alt, n);
            memcpy(buf + pre + n, close + 1, rest + 1);
            ok = cdl__brace_expand(L, buf, strip, out, len, cap, count, why, whycap);
            alt = end + 1;
        }
    }
    cdl__free(L, buf);
    return ok;
}

/* --- box labels (labels = COORDL_LABELS_BOXES) ---------------------------
 * Read at open, not at fetch: a label file is a few hundred bytes beside
 * an image of tens of kilobytes, every member of a group, every MPI rank
 * and every seek needs the same boxes, and a worker then never opens a
 * second file per row. Held in the index, they need no cache entry, no
 * peer request and no read-ahead slot of their own; the row's geometry
 * moves them (plan.c) when its pixels are prepared. */

#define CDL_LABEL_FILE_MAX (1u << 20) /* bytes; a larger label file is a bad label */

/* Darknet's label path for an image: the last folder named "images" or
 * "JPEGImages" becomes "labels" (Darknet replaces the first occurrence of
 * the text anywhere, which misfires on ".../myimages/..."), and the
 * extension ".txt". Without such a folder the .txt sits beside the image. */
static int cdl__label_path(coordl *L, const char *img, char **buf, size_t *cap) {
    const size_t n = strlen(img);
    size_t cut = 0, cut_len = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && img[i - 1] != '/') continue;
        const char *end = strchr(img + i, '/');
        if (!end) break;
        const size_t len = (size_t)(end - (img + i));
        if ((len == 6 && memcmp(img + i, "images", 6) == 0) || (len == 10 && memcmp(img + i, "JPEGImages", 10) == 0)) {
            cut = i;
            cut_len = len;
        }
    }
    const char *base = strrchr(img, '/');
    base = base ? base + 1 : img;
    const char *dot = strrchr(base, '.');
    const size_t stem = dot && dot != base ? (size_t)(dot - img) : n;
    if (!cdl__reserve(L, (void **)buf, cap, n + 16)) return 0;
    char *o = *buf;
    size_t k = 0;
    if (cut_len) {
        memcpy(o, img, cut);
        memcpy(o + cut, "labels", 6);
        k = cut + 6;
        memcpy(o + k, img + cut + cut_len, stem - cut - cut_len);
        k += stem - cut - cut_len;
    } else {
        memcpy(o, img, stem);
        k = stem;
    }
    memcpy(o + k, ".txt", 5);
    return 1;
}

/* One "class cx cy w h" line (space or tab separated). Returns NULL with
 * the box in out, or why the line is bad. */
static const char *cdl__box_line(const char *line, size_t n, int32_t num_classes, float out[5]) {
    char tmp[256];
    if (n >= sizeof tmp) return "longer than 255 bytes";
    memcpy(tmp, line, n);
    tmp[n] = '\0';
    char *p = tmp, *end;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '-' && p[1] >= '0' && p[1] <= '9') return "the class is negative";
    if (*p < '0' || *p > '9') return "expected \"class cx cy w h\" (the class first, an integer)";
    errno = 0;
    const long cls = strtol(p, &end, 10);
    if (*end != ' ' && *end != '\t') return "the class is not an integer, or the line has only one field";
    if (errno || cls > INT32_MAX - 1) return "the class is out of range";
    if (num_classes > 0 && cls >= num_classes) return "the class is not below num_classes";
    out[4] = (float)cls;
    p = end;
    for (int k = 0; k < 4; k++) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) return "expected 5 fields \"class cx cy w h\", got fewer";
        const float v = strtof(p, &end);
        if (end == p || (*end && *end != ' ' && *end != '\t')) return "a coordinate is not a number";
        if (!isfinite(v)) return "a coordinate is not finite";
        if (v < 0.0f || v > 1.0f) return "a coordinate is outside [0, 1] (boxes are normalized to the image)";
        out[k] = v;
        p = end;
    }
    while (*p == ' ' || *p == '\t') p++;
    if (*p) return "more than 5 fields (expected \"class cx cy w h\")";
    return NULL;
}

/* Reads [off, off + len) of file (len = UINT64_MAX: the whole file) into
 * *buf; why says what failed. */
static int cdl__read_label(coordl *L, const char *file, uint64_t off, uint64_t len, char **buf, size_t *cap,
                           size_t *got_len, char *why, size_t whycap) {
    void *f;
    uint64_t size, got = 0;
    char err[256];
    if (cdl__io_open(L, file, &f, &size, err, sizeof err) != COORDL_OK) {
        snprintf(why, whycap, "missing label file (%s)", err);
        return 0;
    }
    if (len == UINT64_MAX) len = size, off = 0;
    if (len > CDL_LABEL_FILE_MAX || off > size || len > size - off) {
        cdl__io_close(L, f);
        snprintf(why, whycap, "%llu bytes: not a label file (at most %u)", (unsigned long long)len, CDL_LABEL_FILE_MAX);
        return 0;
    }
    if (!cdl__reserve(L, (void **)buf, cap, (size_t)len + 1)) {
        cdl__io_close(L, f);
        snprintf(why, whycap, "out of memory");
        return 0;
    }
    const coordl_status rc = cdl__io_read(L, f, file, *buf, len, off, &got, err, sizeof err);
    cdl__io_close(L, f);
    if (rc != COORDL_OK || got != len) {
        snprintf(why, whycap, "cannot read it: %s", rc != COORDL_OK ? err : "cut short");
        return 0;
    }
    (*buf)[got] = '\0';
    *got_len = (size_t)got;
    return 1;
}

static uint64_t cdl__fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Every item's boxes, from its label file (or tar .txt member). A bad
 * label (missing, empty, malformed, out of range) marks its item bad with
 * a message naming the file and line: the row is then a bad sample
 * (on_bad_sample). Fails the open only for lack of memory. */
static coordl_status cdl__index_boxes(coordl *L) {
    cdl__boxes *B = &L->index.boxes;
    const uint64_t n = L->index.num_items;
    const uint32_t max_boxes = L->cfg.max_boxes;
    B->first = cdl__malloc(L, (size_t)(n + 1) * sizeof *B->first);
    B->bad = cdl__malloc(L, (size_t)(n ? n : 1) * sizeof *B->bad);
    if (!B->first || !B->bad) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the box labels of %llu items",
                                                    (unsigned long long)n);
    size_t nbox = 0, boxcap = 0, pathcap = 0, textcap = 0;
    char *lpath = NULL, *text = NULL, why[CDL_ERRMSG_MAX - 96], first_bad[CDL_ERRMSG_MAX] = "";
    coordl_status rc = COORDL_OK;
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t i = 0; i < n && rc == COORDL_OK; i++) {
        B->first[i] = nbox;
        B->bad[i] = 0;
        const char *file;
        uint64_t off = 0, len = UINT64_MAX;
        size_t tlen = 0;
        int ok;
        if (L->index.tar_txt || L->index.tar_items) {
            const uint32_t shard = L->index.tar_refs ? L->index.tar_refs[i].shard : L->index.tar_items[i].shard;
            const uint64_t toff = L->index.tar_txt ? L->index.tar_txt[i].offset : L->index.tar_items[i].txt_offset;
            const uint32_t tbytes = L->index.tar_txt ? L->index.tar_txt[i].bytes : L->index.tar_items[i].txt_bytes;
            file = L->index.strings + L->index.tar_shards[shard];
            ok = tbytes != UINT32_MAX;
            if (!ok) snprintf(why, sizeof why, "missing label: the sample has no .txt member");
            off = toff, len = tbytes;
        } else {
            if (!cdl__label_path(L, cdl__item_path(L, i), &lpath, &pathcap)) { rc = COORDL_ERR_NOMEM; break; }
            file = lpath;
            ok = 1;
        }
        if (ok) ok = cdl__read_label(L, file, off, len, &text, &textcap, &tlen, why, sizeof why);
        size_t at = 0, kept = 0, lineno = 0;
        while (ok && at < tlen) {
            const char *line = text + at, *nl = memchr(line, '\n', tlen - at);
            size_t ll = nl ? (size_t)(nl - line) : tlen - at;
            at += ll + (nl ? 1 : 0);
            lineno++;
            if (ll && line[ll - 1] == '\r') ll--;
            size_t b = 0;
            while (b < ll && (line[b] == ' ' || line[b] == '\t')) b++;
            if (b == ll) continue; /* blank */
            if (memchr(line, '\0', ll)) {
                snprintf(why, sizeof why, "line %zu: holds a NUL byte", lineno);
                ok = 0;
                break;
            }
            float box[5];
            const char *bad = cdl__box_line(line, ll, L->cfg.num_classes, box);
            if (bad) {
                snprintf(why, sizeof why, "line %zu: %s", lineno, bad);
                ok = 0;
                break;
            }
            if (kept == max_boxes) { B->dropped++; continue; }
            if (!cdl__reserve(L, (void **)&B->box, &boxcap, (nbox + 1) * sizeof *B->box)) { rc = COORDL_ERR_NOMEM; break; }
            memcpy(B->box[nbox++], box, sizeof box);
            kept++;
        }
        if (rc != COORDL_OK) break;
        if (ok && kept == 0) {
            snprintf(why, sizeof why, "empty label file (no boxes)");
            ok = 0;
        }
        if (!ok) {
            char msg[CDL_ERRMSG_MAX];
            uint64_t soff;
            if (L->index.tar_txt || L->index.tar_items)
                snprintf(msg, sizeof msg, "%s: bad box label (.txt member): %s", cdl__item_path(L, i), why);
            else
                snprintf(msg, sizeof msg, "%s: bad box label %s: %s", cdl__item_path(L, i), file, why);
            if (!cdl__strings_append(L, msg, strlen(msg), &soff)) { rc = COORDL_ERR_NOMEM; break; }
            B->bad[i] = soff + 1;
            nbox = B->first[i]; /* a bad file's boxes are not used */
            if (B->bad_items++ == 0) snprintf(first_bad, sizeof first_bad, "%s", msg);
        }
        const uint64_t cnt = nbox - B->first[i];
        h = cdl__fnv(h, &cnt, sizeof cnt);
        const unsigned char is_bad = B->bad[i] != 0;
        h = cdl__fnv(h, &is_bad, 1);
        if (cnt) h = cdl__fnv(h, B->box[B->first[i]], (size_t)cnt * sizeof *B->box);
    }
    cdl__free(L, lpath);
    cdl__free(L, text);
    if (rc != COORDL_OK) return cdl__open_fail(rc, "out of memory while reading box labels");
    B->first[n] = nbox;
    B->hash = h;
    if (B->dropped)
        cdl__log(L, COORDL_LOG_WARN, "box labels: %llu boxes beyond max_boxes (%u) dropped (coordl_stats.boxes_dropped)",
                 (unsigned long long)B->dropped, max_boxes);
    if (B->bad_items)
        cdl__log(L, COORDL_LOG_WARN, "box labels: %llu of %llu items have a bad label, each a bad sample when "
                 "its row is prepared (on_bad_sample); the first: %s", (unsigned long long)B->bad_items,
                 (unsigned long long)n, first_bad);
    return COORDL_OK;
}

CDL_PRIVATE coordl_status cdl__index_source(coordl *L) {
    struct stat sb;
    const char *src = L->cfg.source;
    if (L->cfg.pipeline == COORDL_PIPE_TOKENS) return cdl__index_tokens(L);
    /* A path the local file system does not know may still be one the
     * trainer's reader knows (an object store key): read it as a file. A
     * glob is a pattern no file is named after; braces are WebDataset's
     * shard ranges; an http(s):// or s3:// URL is read by the remote
     * reader, and an s3:// prefix ending in '/' is listed (docs/remote.md). */
    const int local = stat(src, &sb) == 0;
    const int is_dir = local && S_ISDIR(sb.st_mode);
    const int remote = !local && L->io == &cdl__posix_io && cdl__remote_is_url(src);
    coordl_status rc;
    const size_t src_len = strlen(src);
    if (remote && strncasecmp(src, "s3://", 5) == 0 && src[src_len - 1] == '/') {
        /* s3://bucket/prefix/: every .tar object under it, listed */
        char *text = NULL, why[CDL_ERRMSG_MAX];
        size_t len = 0;
        const coordl_status lrc = cdl__remote_list(L, src, &text, &len, why, sizeof why);
        if (lrc != COORDL_OK)
            rc = cdl__open_fail(lrc, "source: %s", why);
        else if (!len)
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s: no .tar objects under this prefix", src);
        else
            rc = cdl__index_tar_saved(L, 4, text, len);
        cdl__free(L, text);
    } else if (!local && strchr(src, '{') && strchr(src, '}')) {
        char *text = NULL, why[256];
        size_t len = 0, cap = 0, count = 0;
        const char *brace = strchr(src, '{'), *slash = brace;
        while (slash > src && slash[-1] != '/') slash--;
        if (!cdl__brace_expand(L, src, cdl__remote_is_url(src) ? 0 : (size_t)(slash - src), &text, &len, &cap, &count,
                               why, sizeof why))
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s: %s", src, why);
        else if (!cdl__is_shard_list(text, len))
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s: a brace pattern must name .tar shards", src);
        else
            rc = cdl__index_tar_saved(L, 4, text, len);
        cdl__free(L, text);
    } else if (!local && !remote && strpbrk(src, "*?[")) {
        rc = cdl__index_tar_saved(L, 3, NULL, 0);
    } else if (!local && !remote && L->io == &cdl__posix_io) {
        return cdl__open_fail(COORDL_ERR_INVALID, "source: %s does not exist (%s); set cfg.source to an "
                              "ImageFolder root, a list file or tar shards", src, strerror(errno));
    } else if (!is_dir && cdl__is_tar_name(src)) {
        rc = cdl__index_tar_saved(L, 1, NULL, 0);
    } else if (is_dir) {
        rc = cdl__is_shard_folder(src) ? cdl__index_tar_saved(L, 2, NULL, 0) : cdl__index_image_folder(L, src);
    } else {
        char *text;
        size_t len;
        rc = cdl__io_slurp(L, src, "list file", &text, &len);
        const char *kind = rc == COORDL_OK ? cdl__sniff_not_list((const unsigned char *)text, len) : NULL;
        if (kind)
            rc = cdl__open_fail(COORDL_ERR_INVALID, "source: %s is %s, not a dataset; set source to an ImageFolder "
                                "root (a folder of class folders of images), a list file of \"path<TAB>label\" "
                                "lines, a .tar shard, a folder of .tar shards, a list of them, or a glob of them%s",
                                src, kind, strcmp(kind, "an llm.c token shard") == 0
                                ? " (token shards: pipeline = COORDL_PIPE_TOKENS)" : "");
        else if (rc == COORDL_OK)
            rc = cdl__is_shard_list(text, len) ? cdl__index_tar_saved(L, 4, text, len) : cdl__index_list_text(L, src, text, len);
        cdl__free(L, text);
    }
    if (rc != COORDL_OK) return rc;
    if (L->cfg.index_path && L->cfg.index_path[0] && !L->index.tar_refs)
        cdl__log(L, COORDL_LOG_INFO, "index_path: %s is not tar shards; scanned, nothing saved (a saved index "
                 "is for tar-shard sources: docs/index.md)", src);
    if (L->index.lazy) return COORDL_OK; /* counted as the shards are reached */
    if (L->index.num_items == 0)
        return cdl__open_fail(COORDL_ERR_INVALID, "source: %s holds no %s", src,
                              L->cfg.pipeline == COORDL_PIPE_AUDIO ? "WAV files (.wav)"
                              : "images (extensions .jpg .jpeg .png .bmp .ppm .pgm .tga)");
    if (L->index.num_items > (uint64_t)INT32_MAX)
        return cdl__open_fail(COORDL_ERR_INVALID, "source: more than 2^31 items");
    if (L->cfg.labels == COORDL_LABELS_BOXES) return cdl__index_boxes(L);
    return COORDL_OK;
}

/* The shard holding token window `id` (the last shard whose first id is
 * <= id and that has windows). */
/* Bytes a thread reads from a kept token shard at once (a window inside
 * the last block read is a copy). */
#define CDL_KEPT_BLOCK ((uint64_t)64 << 10)

CDL_PRIVATE coordl_status cdl__read_item(const coordl *L, cdl__kept_file *kept, uint64_t id, cdl__u8 **buf, size_t *cap, int grow,
                                    int *too_big, uint64_t *len, uint64_t *storage_bytes, char *err, size_t errcap) {
    enum { PLAIN, WINDOW, MEMBER } kind = L->index.shards ? WINDOW
                                          : L->index.tar_refs || L->index.lazy ? MEMBER : PLAIN;
    /* a token window's shard is found once: it is also its path */
    const cdl__shard *sh = kind == WINDOW ? cdl__shard_of(L, id) : NULL;
    cdl__tar_ref copy;
    coordl_status ref_rc = COORDL_OK;
    /* a lazy item's shard is scanned again here if its block was dropped */
    const cdl__tar_ref *ti = kind == MEMBER ? cdl__tar_ref_of(L, id, &copy, &ref_rc, err, errcap) : NULL;
    *len = 0;
    if (ref_rc != COORDL_OK) return ref_rc;
    /* a lazy item's messages name its shard (and the offset): its member
     * name is not resident */
    const char *path = sh ? L->index.strings + sh->path_off
                       : L->index.lazy ? L->index.strings + L->index.tar_shards[CDL_LAZY_SHARD(id)] : cdl__item_path(L, id);
    const char *file = path;
    uint64_t off = 0, want = 0;
    int whole = 0;
    char why[CDL_ERRMSG_MAX - 64];
    if (kind == WINDOW) {
        want = (uint64_t)(L->cfg.seq_len + 1) * sh->tok_bytes;
        off = CDL_SHARD_HEADER_BYTES + (id - sh->first_item) * L->cfg.seq_len * sh->tok_bytes;
    } else if (kind == MEMBER) {
        file = L->index.strings + L->index.tar_shards[ti->shard];
        off = ti->offset;
        want = ti->bytes;
    } else {
        whole = 1;
    }
    if (!whole && want > L->cfg.max_item_bytes) {
        snprintf(err, errcap, "%s: %llu bytes exceeds max_item_bytes (%llu)", path, (unsigned long long)want,
                 (unsigned long long)L->cfg.max_item_bytes);
        return COORDL_ERR_CORRUPT;
    }
    if (kind == MEMBER && want == 0) {
        snprintf(err, errcap, "%s: empty member", path);
        return COORDL_ERR_CORRUPT;
    }
    void *f;
    uint64_t size, got = 0;
    coordl_status rc = COORDL_OK;
    /* a token shard stays open for this thread's next window of it
     * (kept); a plain file or a tar shard is opened and closed each time,
     * so a file replaced or deleted after open is seen at the next read */
    const int keep = kept && kind == WINDOW;
    if (keep && kept->f && kept->path == file) {
        f = kept->f;
        size = kept->size;
    } else {
        if (keep) cdl__kept_close(L, kept);
        rc = cdl__io_open(L, file, &f, &size, why, sizeof why);
        if (rc != COORDL_OK) {
            snprintf(err, errcap, "%s: cannot open%s: %s", path, kind == MEMBER ? " the shard" : "", why);
            return rc;
        }
        if (keep) {
            kept->f = f;
            kept->path = file;
            kept->size = size;
        }
    }
/* done with f: closed unless kept; kept after a failure is closed too,
 * so the next read opens the file again */
#define CDL_DONE_WITH(failed) \
    do { if (!keep) cdl__io_close(L, f); else if (failed) cdl__kept_close(L, kept); } while (0)
    if (whole) {
        if (size > L->cfg.max_item_bytes) {
            CDL_DONE_WITH(1);
            snprintf(err, errcap, "%s: %llu bytes exceeds max_item_bytes (%llu)", path, (unsigned long long)size,
                     (unsigned long long)L->cfg.max_item_bytes);
            return COORDL_ERR_CORRUPT;
        }
        want = size;
    } else if (kind == MEMBER && (off > size || want > size - off)) {
        CDL_DONE_WITH(1);
        snprintf(err, errcap, "%s: the shard has %llu bytes now; the member's %llu bytes at offset %llu are past its "
                 "end (it shrank since indexing)", path, (unsigned long long)size, (unsigned long long)want,
                 (unsigned long long)off);
        return COORDL_ERR_IO;
    }
    if (want + 16 > *cap) {
        void *p = *buf;
        size_t c = *cap;
        if (!grow || want > SIZE_MAX / 2 || !cdl__reserve(L, &p, &c, (size_t)want + 16)) {
            CDL_DONE_WITH(0);
            if (!grow) {
                *too_big = 1;
                snprintf(err, errcap, "%s: %llu bytes do not fit the read-ahead's %zu", path,
                         (unsigned long long)want, *cap);
            } else {
                snprintf(err, errcap, "%s: out of memory for %llu bytes", path, (unsigned long long)want);
            }
            return COORDL_ERR_NOMEM;
        }
        *buf = p;
        *cap = c;
    }
    if (keep) {
        /* a token window: from the kept block when it holds it, else one
         * read of a block (64 KiB, or the window) from the window on */
        if (kept->block_len && off >= kept->block_off && off + want <= kept->block_off + kept->block_len) {
            memcpy(*buf, kept->block + (off - kept->block_off), (size_t)want);
            got = want;
        } else {
            uint64_t n = want > CDL_KEPT_BLOCK ? want : CDL_KEPT_BLOCK;
            if (off < size && n > size - off && size - off >= want) n = size - off;
            kept->block_len = 0;
            if (n > kept->block_cap) {
                void *p = kept->block;
                size_t c = kept->block_cap;
                if (!cdl__reserve(L, &p, &c, (size_t)n)) {
                    CDL_DONE_WITH(1);
                    snprintf(err, errcap, "%s: out of memory for a %llu-byte read block", path, (unsigned long long)n);
                    return COORDL_ERR_NOMEM;
                }
                kept->block = p;
                kept->block_cap = c;
            }
            rc = cdl__io_read(L, f, file, kept->block, n, off, &got, why, sizeof why);
            if (rc == COORDL_OK) {
                kept->block_off = off;
                kept->block_len = got;
                *storage_bytes += got;
                if (got > want) got = want;
                memcpy(*buf, kept->block, (size_t)got);
            }
        }
    } else {
        rc = cdl__io_read(L, f, file, *buf, want, off, &got, why, sizeof why);
        *storage_bytes += got;
    }
    CDL_DONE_WITH(rc != COORDL_OK || got != want);
#undef CDL_DONE_WITH
    if (rc != COORDL_OK) {
        if (kind == MEMBER) snprintf(err, errcap, "%s: %s", path, why); /* why names the shard */
        else snprintf(err, errcap, "%s", why);
        return rc;
    }
    if (kind == WINDOW && got != want) {
        snprintf(err, errcap, "%s: token window %llu is cut short (%llu of %llu bytes)", path,
                 (unsigned long long)(id - sh->first_item), (unsigned long long)got, (unsigned long long)want);
        return COORDL_ERR_CORRUPT;
    }
    if (kind == MEMBER && got != want) {
        snprintf(err, errcap, "%s: cut short: %llu of %llu bytes at offset %llu (the shard shrank since indexing)",
                 path, (unsigned long long)got, (unsigned long long)want, (unsigned long long)off);
        return COORDL_ERR_IO;
    }
    /* a plain file with fewer bytes than at open shrank meanwhile: decode
     * what is there */
    if (got == 0) {
        snprintf(err, errcap, "%s: empty file", path);
        return COORDL_ERR_CORRUPT;
    }
    *len = got;
    return COORDL_OK;
}

/* Starts item id's storage read without a thread: a member of a remote
 * shard goes to the event loop (remote.c), which calls done(arg, ...) on
 * its thread once the bytes are in dst (cap bytes; 16 past the item stay
 * free, as cdl__read_item leaves them). 1: submitted; 0: read it with
 * cdl__read_item (a local or caller-read file, or a check that must
 * name the item: that read says why). */
CDL_PRIVATE int cdl__read_item_async(const coordl *L, uint64_t id, cdl__u8 *dst, size_t cap, const void *owner,
                                     cdl__remote_done_fn done, void *arg) {
    if (L->index.shards) return 0;
    cdl__tar_ref copy;
    char why[CDL_ERRMSG_MAX];
    coordl_status rc;
    const cdl__tar_ref *ti = cdl__tar_ref_of(L, id, &copy, &rc, why, sizeof why);
    if (!ti) return 0; /* not a tar member, or cdl__read_item says why */
    const char *file = L->index.strings + L->index.tar_shards[ti->shard];
    const uint64_t want = ti->bytes;
    if (L->io != &cdl__posix_io || !cdl__remote_is_url(file) || want == 0 || want > L->cfg.max_item_bytes ||
        want + 16 > cap)
        return 0;
    return cdl__remote_submit(L, file, ti->offset, want, dst, owner, done, arg);
}

/* ---- local reads in flight on io_uring --------------------------------------
 * The read-ahead's reads of local files with the built-in POSIX reader
 * (docs/storage.md, "Reads in flight"): the file is opened here, on the
 * calling thread (O_NONBLOCK and fstat, as every open: a FIFO or a device
 * is refused before any read), then read with preadv2(RWF_NOWAIT), which
 * takes what the page cache holds and never waits for the device. A read
 * the page cache answered whole ends there, at the cost of a pread; what
 * is missing goes to the ring and this thread goes on. So the reads in
 * flight are the reads that miss, up to the depth: a warm epoch puts
 * none in the ring (128 buffered reads in flight on a warm page cache ran
 * at 0.6x a pread loop here), a cold one keeps the depth in flight.
 * Every check that can fail before the read (the file cannot be opened,
 * is larger than max_item_bytes or the arena's span, is empty, a tar
 * shard shrank) is left to cdl__read_item, which opens the file again and
 * says why exactly as a worker's read would. */

/* The end of an item's read: its status, and the message without the item's
 * path (the caller names the item, as cdl__ra_read_done does). */
static coordl_status cdl__item_read_end(const coordl *L, const cdl__item_aread *a, const char *file, int e,
                                        uint64_t len, uint64_t off, uint64_t got, char *err, size_t cap) {
    (void)L;
    if (e) {
        if (a->member) snprintf(err, cap, "%s: read of %llu bytes at offset %llu failed: %s", file,
                                (unsigned long long)len, (unsigned long long)off, strerror(e));
        else snprintf(err, cap, "read of %llu bytes at offset %llu failed: %s", (unsigned long long)len,
                      (unsigned long long)off, strerror(e));
        return COORDL_ERR_IO;
    }
    if (a->member && got != a->want) {
        snprintf(err, cap, "cut short: %llu of %llu bytes at offset %llu (the shard shrank since indexing)",
                 (unsigned long long)got, (unsigned long long)a->want, (unsigned long long)(off - got));
        return COORDL_ERR_IO;
    }
    if (got == 0) {
        snprintf(err, cap, "empty file");
        return COORDL_ERR_CORRUPT;
    }
    return COORDL_OK;
}

/* A tar member's place in its shard, from the index: 1 with *off and
 * *want, 0 when the index cannot say (cdl__read_item then says why). */
static int cdl__member_place(const coordl *L, uint64_t id, uint64_t *off, uint64_t *want) {
    cdl__tar_ref copy;
    char why[CDL_ERRMSG_MAX];
    coordl_status rc;
    const cdl__tar_ref *ti = cdl__tar_ref_of(L, id, &copy, &rc, why, sizeof why);
    if (!ti) return 0;
    *off = ti->offset;
    *want = ti->bytes;
    return 1;
}

static const char *cdl__item_file(const coordl *L, uint64_t id) {
    if (L->index.lazy) return L->index.strings + L->index.tar_shards[CDL_LAZY_SHARD(id)];
    if (!L->index.tar_refs) return cdl__item_path(L, id);
    return L->index.strings + L->index.tar_shards[L->index.tar_refs[id].shard];
}

/* The ring's completion of an item's read (on its thread). */
static void cdl__item_ring_done(cdl__uring_req *q, int e) {
    cdl__item_aread *a = (cdl__item_aread *)q; /* q is its first member */
    char err[CDL_ERRMSG_MAX - 64];
    err[0] = '\0';
    const coordl_status rc = cdl__item_read_end(a->L, a, cdl__item_file(a->L, a->id), e, q->len - q->got,
                                                q->off + q->got, q->got, err, sizeof err);
    cdl__io_close(a->L, a->file);
    const uint64_t got = q->got;
    /* last: the caller may reuse *a from here on */
    a->done(a->arg, rc, got, err);
}

/* Starts item id's read for the read-ahead: 0: not a read for the ring
 * (read it with cdl__read_item); 1: ended here (*rc, *len, *storage_bytes
 * and err as cdl__read_item sets them); 2: in the ring: done(arg, ...) is
 * called on the ring's thread, *a in use until then. */
CDL_PRIVATE int cdl__read_item_start(const coordl *L, cdl__uring *U, cdl__item_aread *a, uint64_t id, cdl__u8 *dst,
                                     size_t cap, coordl_status *rc, uint64_t *len, uint64_t *storage_bytes, char *err,
                                     size_t errcap, cdl__remote_done_fn done, void *arg) {
    if (!U || L->io != &cdl__posix_io || L->index.shards) return 0;
    const char *file = cdl__item_file(L, id);
    const int member = L->index.tar_refs != NULL || L->index.lazy != NULL;
    uint64_t off = 0, want = 0;
    if (member && (!cdl__member_place(L, id, &off, &want) || want == 0 || want > L->cfg.max_item_bytes)) return 0;
    if (cdl__remote_is_url(file)) return 0;
    char why[CDL_ERRMSG_MAX - 64];
    void *f;
    uint64_t size;
    if (cdl__io_open(L, file, &f, &size, why, sizeof why) != COORDL_OK) return 0;
    if (!member) {
        if (size > L->cfg.max_item_bytes) want = 0;
        else want = size;
    } else if (off > size || want > size - off) {
        want = 0;
    }
    const int fd = cdl__posix_fd(f);
    const int fl = fcntl(fd, F_GETFL);
    /* io_uring fails a read of an O_NONBLOCK file that misses the page
     * cache with EAGAIN instead of waiting for it: the flag only guarded
     * the open (a FIFO), and the file is regular */
    if (want == 0 || want + 16 > cap || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        cdl__io_close(L, f);
        return 0;
    }
    uint64_t got = 0;
    int missed = 0, e = 0;
    while (got < want) {
        struct iovec v = {dst + got, (size_t)(want - got > ((uint64_t)1 << 30) ? (uint64_t)1 << 30 : want - got)};
        const ssize_t r = preadv2(fd, &v, 1, (off_t)(off + got), RWF_NOWAIT);
        if (r > 0) got += (uint64_t)r;
        else if (r == 0) break;
        else if (errno == EINTR) continue;
        else { /* EAGAIN: not in the page cache; EOPNOTSUPP: no RWF_NOWAIT here; an error: the ring says */
            missed = 1;
            break;
        }
    }
    if (missed) {
        memset(a, 0, sizeof *a);
        a->q.fd = fd;
        a->q.dst = dst;
        a->q.len = want;
        a->q.off = off;
        a->q.got = got;
        a->q.done = cdl__item_ring_done;
        a->L = L;
        a->file = f;
        a->id = id;
        a->want = want;
        a->member = member;
        a->done = done;
        a->arg = arg;
        if (cdl__uring_submit(U, &a->q)) return 2;
        /* the ring refused it (closing): the rest here */
        uint64_t more = 0;
        if (cdl__io_read(L, f, file, dst + got, want - got, off + got, &more, why, sizeof why) != COORDL_OK) {
            cdl__io_close(L, f);
            *storage_bytes += got;
            *rc = COORDL_ERR_IO;
            if (member) snprintf(err, errcap, "%s: %s", cdl__item_path(L, id), why);
            else snprintf(err, errcap, "%s", why);
            return 1;
        }
        got += more;
    }
    cdl__io_close(L, f);
    cdl__item_aread view;
    view.member = member;
    view.want = want;
    *storage_bytes += got;
    *rc = cdl__item_read_end(L, &view, file, e, want - got, off + got, got, why, sizeof why);
    if (*rc != COORDL_OK) snprintf(err, errcap, "%s: %s", cdl__item_path(L, id), why);
    else *len = got;
    return 1;
}

/* ---- a caller's asynchronous reader (cfg.io_async) ---------------------------
 * The read-ahead's reads of items through a caller's coordl_io_async: the
 * item's place (a whole file, or a member of a tar shard) and its size come
 * from the index, so a read needs no open and no thread: one I/O thread
 * starts readahead_items of them and goes on (depth 512 = 512 reads in the
 * caller's machinery, not 512 threads inside read_at). A whole file is
 * asked for one byte more than indexed, so that a file that grew since is
 * seen (and read again through cfg.io by its worker, as a synchronous
 * read-ahead leaves an item larger than its span) instead of cut short. */

/* A read through cfg.io_async ended with `result` (the caller's done):
 * its status, checked as a synchronous read's would be, the bytes it
 * delivered, and why it failed (without the item's path: the caller names
 * the item). */
CDL_PRIVATE coordl_status cdl__read_item_result(cdl__item_aread *a, int64_t result, uint64_t *got, char *why,
                                                size_t cap) {
    const coordl *L = a->L;
    const char *file = cdl__item_file(L, a->id);
    why[0] = '\0';
    *got = 0;
    a->grew = 0;
    if (result < -4095 || result > (int64_t)a->asked) { /* neither bytes nor an errno: never trusted */
        snprintf(why, cap, "%s%sthe reader's read returned %lld for %llu bytes at offset %llu (neither a byte count "
                 "nor a negative errno)", a->member ? file : "", a->member ? ": " : "", (long long)result,
                 (unsigned long long)a->asked, (unsigned long long)a->off);
        return COORDL_ERR_IO;
    }
    if (result < 0) return cdl__item_read_end(L, a, file, (int)-result, a->asked, a->off, 0, why, cap);
    if (!a->member && (uint64_t)result > a->want) {
        a->grew = 1; /* larger than indexed: the caller reads it again through cfg.io */
        return COORDL_OK;
    }
    *got = (uint64_t)result;
    return cdl__item_read_end(L, a, file, 0, a->want, a->off + *got, *got, why, cap);
}

/* Starts item id's read through cfg.io_async into dst (cap bytes), with
 * done(a, result) at its end: 1 when started (done may run before this
 * returns: call it without a lock done takes), 0 when the item is to be
 * read through cfg.io (no io_async, a token shard, a size the index does
 * not know or that does not fit, or the reader declined it). */
CDL_PRIVATE int cdl__read_item_submit(const coordl *L, cdl__item_aread *a, uint64_t id, cdl__u8 *dst, size_t cap,
                                      coordl_io_done_fn done, void *arg) {
    const coordl_io_async *io = L->cfg.io_async;
    if (!io || L->index.shards) return 0;
    const int member = L->index.tar_refs != NULL || L->index.lazy != NULL;
    uint64_t off = 0, want = 0;
    if (member && !cdl__member_place(L, id, &off, &want)) return 0;
    if (!member) want = L->index.items[id].bytes;
    if (want == 0 || want > L->cfg.max_item_bytes || want + 16 > cap) return 0;
    memset(a, 0, sizeof *a);
    a->L = L;
    a->id = id;
    a->want = want;
    a->member = member;
    a->arg = arg;
    a->off = off;
    a->asked = member ? want : want + 1;
    return io->read(io->user, cdl__item_file(L, id), dst, a->asked, off, done, a) == 0;
}

/* An item's bytes from storage into the worker's buffer. */
CDL_PRIVATE coordl_status cdl__read_file(cdl__worker *W, uint64_t id, cdl__bytes *out) {
    uint64_t len = 0;
    int too_big = 0;
    coordl_status rc = cdl__read_item(W->L, &W->kept, id, &W->readbuf, &W->readcap, 1, &too_big, &len, &W->row.storage_bytes,
                                      W->err, sizeof W->err);
    if (rc != COORDL_OK) return rc;
    out->p = W->readbuf;
    out->len = (size_t)len;
    return COORDL_OK;
}

/* ---- src/sampler.c ----------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * sampler.c - the sampler.
 *
 * The epoch permutation is a keyed Feistel network over the next power
 * of four with cycle walking: a bijection on [0, N) computed in O(1)
 * per position from (seed, epoch), with no per-epoch array, so any
 * worker can map (epoch, position) to an item and seek is O(1). Rank r
 * of W gets positions r, r+W, ... (floor(N/W) of them). Token windows
 * in llm.c's order (token_order LLMC) map positions through shards and
 * samples instead, as llm.c's DataLoader does (below); the shard-window
 * order (shuffle = COORDL_SHUFFLE_SHARD_WINDOW) maps an epoch's global
 * positions through a shard order cut into windows (below).
 *
 * Owns:  L->sampler: items per rank per epoch, batches per epoch, llm.c's
 *        shard order tables and the shard-window order's tables
 * Lock:  the llm.c tables under their own mutex (llmc->mu), the
 *        shard-window tables under theirs (window->mu); the rest is set
 *        at open and by coordl_set under the stream's lock
 * Calls: status, rand, index (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */

/* A permutation of [0, n) keyed by (seed, stream, epoch, salt): the epoch
 * permutation of the items, and for token_order LLMC the shard order and
 * the order of a shard's samples. */
static cdl__perm cdl__perm_keyed(uint64_t n, int identity, uint64_t seed, uint64_t stream, uint64_t epoch,
                                 uint64_t salt) {
    cdl__perm p;
    memset(&p, 0, sizeof p);
    p.n = n;
    p.identity = identity;
    p.epoch = epoch;
    /* the least even bits >= 2 with 2^bits >= n (a token row asks for two
     * perms: no loop) */
    unsigned bits = p.n <= 4 ? 2u : 64u - (unsigned)__builtin_clzll(p.n - 1);
    if (bits & 1) bits++;
    p.half_bits = bits / 2;
    p.half_mask = (1ull << p.half_bits) - 1;
    if (!identity) /* an identity needs no keys (a token row asks for two perms) */
        for (uint64_t r = 0; r < 6; r++) p.keys[r] = cdl__hash4(seed, stream, epoch, salt * 8 + r);
    return p;
}

CDL_PRIVATE cdl__perm cdl__perm_for(const coordl *L, uint64_t epoch) {
    /* llm.c's order maps positions through its own tables (cdl__item_at):
     * only the epoch of this perm is read then */
    return cdl__perm_keyed(L->index.num_items, L->cfg.shuffle != COORDL_SHUFFLE_FULL || L->sampler.llmc, L->cfg.seed,
                           CDL_STREAM_PERM, epoch, 0);
}

static uint64_t cdl__perm_apply(const cdl__perm *p, uint64_t x) {
    if (p->identity) return x;
    do {
        uint64_t left = x >> p->half_bits, right = x & p->half_mask;
        for (int r = 0; r < 6; r++) {
            uint64_t f = cdl__mix64(right ^ p->keys[r]) & p->half_mask;
            uint64_t nl = right;
            right = left ^ f;
            left = nl;
        }
        x = (left << p->half_bits) | right;
    } while (x >= p->n); /* cycle walking keeps the bijection inside [0, n) */
    return x;
}

/* Where an epoch's batches stop: drop_last cuts the share at the last
 * whole batch of the current batch size, counted from where that size
 * took effect (coordl_set mid-epoch) or from the epoch's start. */
/* The position an epoch ends at (its share, less the rows a dropped last
 * batch leaves), given the geometry: where the batch size B took effect
 * (cut_epoch, cut_pos) counts from there. The one place this arithmetic
 * lives: the stream asks with its live values, the read-ahead with the
 * snapshot it took at its last restart. */
CDL_PRIVATE CDL_HOT uint64_t cdl__epoch_end_at(uint64_t share, uint64_t B, int drop_last, uint64_t cut_epoch, uint64_t cut_pos,
                                       uint64_t epoch) {
    if (share == UINT64_MAX) return UINT64_MAX; /* a lazy index, not all counted yet */
    const uint64_t from = epoch == cut_epoch ? cut_pos : 0;
    return drop_last ? from + (share - from) / B * B : share;
}

CDL_PRIVATE CDL_HOT uint64_t cdl__epoch_end(const coordl *L, uint64_t epoch) {
    /* a lazy index settles the share on another thread (UINT64_MAX before) */
    return cdl__epoch_end_at(__atomic_load_n(&L->sampler.share, __ATOMIC_RELAXED), L->cfg.batch_size, L->cfg.drop_last, L->S->cut_epoch, L->S->cut_pos,
                             epoch);
}

CDL_PRIVATE uint64_t cdl__batches_for(const coordl *L, uint64_t B) {
    const uint64_t share = __atomic_load_n(&L->sampler.share, __ATOMIC_RELAXED);
    if (share == UINT64_MAX) return 0; /* a lazy index, not all counted yet */
    return L->cfg.drop_last ? share / B : (share + B - 1) / B;
}

/* llm.c's DataLoader order (token_order = COORDL_TOKENS_LLMC). With P
 * ranks and batch size B, shard s of n_s windows holds G_s = floor(n_s /
 * (P B)) samples (llm.c's shard_num_samples: floor((tokens - 1) / (P B T))
 * is the same number); sample j is P blocks of B consecutive windows and
 * rank r takes block j P + r; windows past the last sample are dropped. An
 * epoch visits the shards in an order (identity, or a permutation keyed by
 * (seed, epoch)) and a shard's samples in an order (identity, or keyed by
 * (seed, epoch, shard)); batch k of an epoch is the k-th sample visited, so
 * a rank's share is sum(G_s) x B positions and position p is row p % B of
 * batch p / B. Finding the shard of batch k needs the prefix sums of G in
 * the epoch's shard order: computed once per epoch (O(shards)) and kept for
 * the last two epochs asked for, under a lock of this process (workers,
 * the MPI thread and the converters ask). */
static cdl__perm cdl__llmc_shard_perm(const coordl *L, uint64_t epoch) {
    return cdl__perm_keyed(L->index.nshards, !L->cfg.shuffle, L->cfg.seed, CDL_STREAM_SHARD_ORDER, epoch, 0);
}

/* The table of `epoch`, built if it is not one of the two kept. Under mu. */
CDL_PRIVATE const cdl__llmc_epoch *cdl__llmc_table(const coordl *L, uint64_t epoch) {
    cdl__llmc *M = L->sampler.llmc;
    for (int i = 0; i < 2; i++)
        if (M->ep[i].valid && (M->ep[i].epoch == epoch || !L->cfg.shuffle)) return &M->ep[i];
    cdl__llmc_epoch *e = &M->ep[M->victim];
    M->victim ^= 1u;
    cdl__perm order = cdl__llmc_shard_perm(L, epoch);
    e->prefix[0] = 0;
    for (size_t i = 0; i < L->index.nshards; i++) {
        e->order[i] = (uint32_t)cdl__perm_apply(&order, i);
        e->prefix[i + 1] = e->prefix[i] + M->samples[e->order[i]];
    }
    e->epoch = epoch;
    e->valid = 1;
    return e;
}

/* Batch k < total of `epoch`: the visiting position of its shard and the
 * sample's position within the shard (llm.c's current_shard_idx and
 * current_sample_idx before it loads the batch), and the shard. */
CDL_PRIVATE void cdl__llmc_locate(const coordl *L, uint64_t epoch, uint64_t k, uint64_t *shard_pos,
                             uint64_t *sample_pos, uint32_t *shard) {
    cdl__llmc *M = L->sampler.llmc;
    pthread_mutex_lock(&M->mu);
    const cdl__llmc_epoch *e = cdl__llmc_table(L, epoch);
    size_t lo = 0, hi = L->index.nshards; /* the last i with prefix[i] <= k */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (e->prefix[mid] <= k) lo = mid; else hi = mid;
    }
    *shard_pos = lo;
    *sample_pos = k - e->prefix[lo];
    *shard = e->order[lo];
    pthread_mutex_unlock(&M->mu);
}

/* The first window of sample position j of shard s for this rank. */
static uint64_t cdl__llmc_block_first(const coordl *L, uint64_t epoch, uint32_t s, uint64_t j) {
    const uint64_t G = L->sampler.llmc->samples[s];
    cdl__perm within = cdl__perm_keyed(G, !L->cfg.shuffle, L->cfg.seed, CDL_STREAM_SHARD_SAMPLES, epoch, s);
    const uint64_t idx = cdl__perm_apply(&within, j);
    const uint64_t B = L->cfg.batch_size;
    return L->index.shards[s].first_item + (idx * (uint64_t)L->cfg.world + (uint64_t)L->cfg.rank) * B;
}

/* Sizes the order at open (after indexing): G_s per shard and one table
 * (shuffle = 0 needs no other). */
CDL_PRIVATE coordl_status cdl__llmc_init(coordl *L) {
    cdl__llmc *M = cdl__calloc(L, 1, sizeof *M);
    if (!M) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    if (pthread_mutex_init(&M->mu, NULL) != 0) {
        cdl__free(L, M);
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot create a mutex");
    }
    L->sampler.llmc = M; /* from here on cdl__llmc_free (via coordl_close) owns it */
    M->samples = cdl__calloc(L, L->index.nshards, sizeof *M->samples);
    int ok = M->samples != NULL;
    for (int i = 0; i < 2; i++) {
        M->ep[i].order = cdl__calloc(L, L->index.nshards, sizeof *M->ep[i].order);
        M->ep[i].prefix = cdl__calloc(L, L->index.nshards + 1, sizeof *M->ep[i].prefix);
        ok = ok && M->ep[i].order && M->ep[i].prefix;
    }
    if (!ok) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    const uint64_t per_sample = (uint64_t)L->cfg.world * L->cfg.batch_size;
    for (size_t s = 0; s < L->index.nshards; s++) {
        M->samples[s] = L->index.shards[s].nwindows / per_sample;
        M->total += M->samples[s];
    }
    if (M->total == 0)
        return cdl__open_fail(COORDL_ERR_INVALID, "token_order: llm.c's order needs a shard of at least world x "
                              "batch_size x seq_len + 1 = %llu tokens; no shard of %s has that many",
                              (unsigned long long)(per_sample * L->cfg.seq_len + 1), L->cfg.source);
    pthread_mutex_lock(&M->mu);
    cdl__llmc_table(L, 0);
    pthread_mutex_unlock(&M->mu);
    return COORDL_OK;
}

CDL_PRIVATE void cdl__llmc_free(coordl *L) {
    cdl__llmc *M = L->sampler.llmc;
    if (!M) return;
    for (int i = 0; i < 2; i++) {
        cdl__free(L, M->ep[i].order);
        cdl__free(L, M->ep[i].prefix);
    }
    cdl__free(L, M->samples);
    pthread_mutex_destroy(&M->mu);
    cdl__free(L, M);
    L->sampler.llmc = NULL;
}

/* The shard-window order (shuffle = COORDL_SHUFFLE_SHARD_WINDOW). An
 * epoch visits the shards in an order keyed by (seed, epoch); that order is
 * cut into consecutive windows of `width` shards; the epoch's global
 * sequence is window 0's items in an order keyed by (seed, epoch, window),
 * then window 1's, and so on. Ranks split the global sequence exactly as
 * the full shuffle does (rank r of P takes global positions r, r + P, ...),
 * so the global batches do not depend on the rank count. Global position g
 * finds its window through the prefix sums of item counts in the epoch's
 * shard order (O(log shards)), the window's permutation gives the offset
 * inside the window, and the same prefix sums give the shard and the item
 * within it. The tables are O(shards), built once per epoch and kept for
 * the last two epochs asked for, under a lock of this process (workers,
 * the read-ahead, the MPI thread ask), as llm.c's tables are. */
static const cdl__window_epoch *cdl__window_table(const coordl *L, uint64_t epoch) {
    cdl__window *Wn = L->sampler.window;
    for (int i = 0; i < 2; i++)
        if (Wn->ep[i].valid && Wn->ep[i].epoch == epoch) return &Wn->ep[i];
    cdl__window_epoch *e = &Wn->ep[Wn->victim];
    Wn->victim ^= 1u;
    cdl__perm order = cdl__perm_keyed(Wn->nshards, 0, L->cfg.seed, CDL_STREAM_WINDOW_SHARDS, epoch, 0);
    e->prefix[0] = 0;
    e->known = Wn->nshards;
    for (size_t i = 0; i < Wn->nshards; i++) {
        e->order[i] = (uint32_t)cdl__perm_apply(&order, i);
        if (Wn->count[e->order[i]] == UINT64_MAX && e->known == Wn->nshards) e->known = i;
        e->prefix[i + 1] = e->known == Wn->nshards ? e->prefix[i] + Wn->count[e->order[i]] : e->prefix[i];
    }
    if (e->known < Wn->nshards) e->known = e->known / Wn->width * Wn->width; /* whole windows */
    e->epoch = epoch;
    e->valid = 1;
    return e;
}

/* The last visiting position i in [lo, hi) with prefix[i] <= g: the one
 * whose shard holds g (prefix[i + 1] > g, since g < prefix[hi]; an empty
 * shard's equal prefix is passed over). */
static size_t cdl__window_find(const uint64_t *prefix, size_t lo, size_t hi, uint64_t g) {
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (prefix[mid] <= g) lo = mid; else hi = mid;
    }
    return lo;
}

/* A lazy index: shard s's count into the tables (scanned if not known).
 * Not under Wn->mu. */
static void cdl__window_learn(const coordl *L, uint32_t s) {
    cdl__window *Wn = L->sampler.window;
    uint32_t count = 0;
    char err[CDL_ERRMSG_MAX];
    /* a shard that cannot be scanned counts 0 (index.c logs it); a later
     * failure of a counted shard does not change its count */
    if (cdl__lazy_count(L, s, &count, err, sizeof err) != COORDL_OK || count == CDL_LAZY_UNKNOWN) count = 0;
    pthread_mutex_lock(&Wn->mu);
    if (Wn->count[s] == UINT64_MAX) {
        Wn->count[s] = count;
        Wn->ep[0].valid = Wn->ep[1].valid = 0; /* prefix sums grow: rebuilt when next asked */
        if (--Wn->unknown == 0) {
            uint64_t total = 0;
            for (size_t i = 0; i < Wn->nshards; i++) total += Wn->count[i];
            atomic_store_explicit(&Wn->total, total, memory_order_release);
        }
    }
    pthread_mutex_unlock(&Wn->mu);
}

/* A lazy index: scans (through index.c) the shards of the windows of
 * `epoch` up to the one holding global position g, so that g maps to an item
 * or is known to be past the epoch's end. 1: it is; 0: not without a scan
 * (scan = 0 asks only). Not under Wn->mu: a scan reads storage. */
static int cdl__window_ensure(const coordl *L, uint64_t epoch, uint64_t g, int scan) {
    cdl__window *Wn = L->sampler.window;
    uint32_t pending[64];
    for (;;) {
        pthread_mutex_lock(&Wn->mu);
        const cdl__window_epoch *e = cdl__window_table(L, epoch);
        const size_t ns = Wn->nshards;
        if (e->known == ns || g < e->prefix[e->known]) {
            pthread_mutex_unlock(&Wn->mu);
            return 1;
        }
        if (!scan) {
            pthread_mutex_unlock(&Wn->mu);
            return 0;
        }
        /* the next window's shards not counted yet, up to 64 at a time */
        size_t n = 0;
        const size_t hi = Wn->width < ns - e->known ? e->known + (size_t)Wn->width : ns;
        for (size_t i = e->known; i < hi && n < 64; i++)
            if (Wn->count[e->order[i]] == UINT64_MAX) pending[n++] = e->order[i];
        /* the scan-ahead threads join in on this window (the first one
         * of a run: no item mapped yet) rather than wait for the next */
        const uint64_t w = e->known / Wn->width;
        if (!Wn->front_valid || epoch > Wn->front_epoch || (epoch == Wn->front_epoch && w > Wn->front_window)) {
            Wn->front_valid = 1;
            Wn->front_epoch = epoch;
            Wn->front_window = w;
            pthread_cond_broadcast(&Wn->ahead_cv);
        }
        pthread_mutex_unlock(&Wn->mu);
        for (size_t i = 0; i < n; i++) cdl__window_learn(L, pending[i]);
    }
}

/* The item at global position g < num_items of `epoch` (a lazy index:
 * CDL_NO_ITEM past the epoch's end, which may not have been known). */
static uint64_t cdl__window_item(const coordl *L, uint64_t epoch, uint64_t g) {
    cdl__window *Wn = L->sampler.window;
    if (Wn->lazy) cdl__window_ensure(L, epoch, g, 1);
    pthread_mutex_lock(&Wn->mu);
    const cdl__window_epoch *e = cdl__window_table(L, epoch);
    const size_t ns = Wn->nshards;
    if (Wn->lazy && g >= e->prefix[ns]) { /* every count known (ensured): past the end */
        pthread_mutex_unlock(&Wn->mu);
        return CDL_NO_ITEM;
    }
    const uint64_t w = cdl__window_find(e->prefix, 0, ns, g) / Wn->width;
    const size_t lo = (size_t)(w * Wn->width), hi = Wn->width < ns - lo ? lo + (size_t)Wn->width : ns;
    const uint64_t base = e->prefix[lo], n = e->prefix[hi] - base;
    if (Wn->lazy && (!Wn->front_valid || epoch > Wn->front_epoch || (epoch == Wn->front_epoch && w > Wn->front_window))) {
        /* the scan-ahead threads make the window after this one ready */
        Wn->front_valid = 1;
        Wn->front_epoch = epoch;
        Wn->front_window = w;
        pthread_cond_broadcast(&Wn->ahead_cv);
    }
    cdl__perm within = cdl__perm_keyed(n, 0, L->cfg.seed, CDL_STREAM_WINDOW_ITEMS, epoch, w);
    const uint64_t t = base + cdl__perm_apply(&within, g - base);
    const size_t i = cdl__window_find(e->prefix, lo, hi, t);
    const uint32_t s = e->order[i];
    const uint64_t k = Wn->lazy ? 0 : Wn->first[s] + (t - e->prefix[i]);
    const uint64_t id = Wn->lazy ? CDL_LAZY_ID(s, t - e->prefix[i]) : Wn->by_shard ? Wn->by_shard[k] : k;
    pthread_mutex_unlock(&Wn->mu);
    return id;
}

/* The shard of item i of a source with shards (tar or token shards). */
static uint32_t cdl__window_shard_of(const coordl *L, uint64_t i) {
    return L->index.tar_refs ? L->index.tar_refs[i].shard : L->index.tar_items[i].shard;
}

/* Sizes the order at open (after indexing): items per shard, where each
 * shard's ids are, and the tables of epoch 0. A source without shards (an
 * ImageFolder, a list file) is refused: its files are not shards, and a
 * window of single files would be the full shuffle at a higher cost. */
CDL_PRIVATE coordl_status cdl__window_init(coordl *L) {
    const int tokens = L->index.shards != NULL, tar = L->index.tar_shards != NULL;
    if (!tokens && !tar)
        return cdl__open_fail(COORDL_ERR_INVALID, "shuffle: COORDL_SHUFFLE_SHARD_WINDOW orders shards "
                              "(shuffle_window_shards of them per window), and %s has none (an ImageFolder or a "
                              "list of files); use COORDL_SHUFFLE_FULL, or tar shards (WebDataset) or token "
                              "shards", L->cfg.source);
    const size_t ns = tokens ? L->index.nshards : L->index.ntar_shards;
    if (ns > UINT32_MAX)
        return cdl__open_fail(COORDL_ERR_INVALID, "shuffle: COORDL_SHUFFLE_SHARD_WINDOW: %zu shards (at most 2^32)", ns);
    cdl__window *Wn = cdl__calloc(L, 1, sizeof *Wn);
    if (!Wn) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    if (pthread_mutex_init(&Wn->mu, NULL) != 0) {
        cdl__free(L, Wn);
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot create a mutex");
    }
    if (pthread_cond_init(&Wn->ahead_cv, NULL) != 0) {
        pthread_mutex_destroy(&Wn->mu);
        cdl__free(L, Wn);
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot create a condition variable");
    }
    L->sampler.window = Wn; /* from here on cdl__window_free (via coordl_close) owns it */
    if (L->cfg.shuffle_window_shards == 0) L->cfg.shuffle_window_shards = 8; /* coordl_get_config reports it */
    Wn->nshards = ns;
    Wn->width = L->cfg.shuffle_window_shards;
    Wn->count = cdl__calloc(L, ns + 1, sizeof *Wn->count);
    Wn->first = cdl__calloc(L, ns + 1, sizeof *Wn->first);
    int ok = Wn->count && Wn->first;
    for (int i = 0; i < 2; i++) {
        Wn->ep[i].order = cdl__calloc(L, ns + 1, sizeof *Wn->ep[i].order);
        Wn->ep[i].prefix = cdl__calloc(L, ns + 1, sizeof *Wn->ep[i].prefix);
        ok = ok && Wn->ep[i].order && Wn->ep[i].prefix;
    }
    if (!ok) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the shard-window order of %zu shards", ns);
    Wn->bytes = sizeof *Wn + (ns + 1) * (sizeof *Wn->count + sizeof *Wn->first) +
                2 * (ns + 1) * (sizeof *Wn->ep[0].order + sizeof *Wn->ep[0].prefix);
    const uint64_t N = L->index.num_items;
    if (L->index.lazy) { /* counted as the windows reach the shards */
        Wn->lazy = 1;
        Wn->unknown = ns;
        for (size_t s = 0; s < ns; s++) Wn->count[s] = UINT64_MAX;
    } else if (tokens) { /* a token shard's windows are consecutive ids */
        for (size_t s = 0; s < ns; s++) {
            Wn->count[s] = L->index.shards[s].nwindows;
            Wn->first[s] = L->index.shards[s].first_item;
        }
    } else {
        /* a shard's items are consecutive ids when every one of them lies in
         * [its first id, first id + count): .cls-labelled sets (shard, then
         * member order); a set labelled by class folders is ordered by class
         * and needs the ids grouped by shard */
        for (size_t s = 0; s < ns; s++) Wn->first[s] = UINT64_MAX;
        for (uint64_t i = 0; i < N; i++) {
            const uint32_t s = cdl__window_shard_of(L, i);
            Wn->count[s]++;
            if (Wn->first[s] == UINT64_MAX) Wn->first[s] = i;
        }
        int consecutive = 1;
        for (uint64_t i = 0; i < N && consecutive; i++) {
            const uint32_t s = cdl__window_shard_of(L, i);
            consecutive = i - Wn->first[s] < Wn->count[s];
        }
        if (!consecutive) {
            Wn->by_shard = cdl__malloc(L, (N ? N : 1) * sizeof *Wn->by_shard);
            if (!Wn->by_shard) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the shard-window order");
            Wn->bytes += N * sizeof *Wn->by_shard;
            uint64_t at = 0;
            for (size_t s = 0; s < ns; s++) {
                Wn->first[s] = at;
                at += Wn->count[s];
            }
            uint64_t *fill = Wn->ep[0].prefix; /* scratch: the next free entry of each shard */
            for (size_t s = 0; s < ns; s++) fill[s] = Wn->first[s];
            for (uint64_t i = 0; i < N; i++) Wn->by_shard[fill[cdl__window_shard_of(L, i)]++] = (uint32_t)i;
        } else {
            for (size_t s = 0; s < ns; s++)
                if (Wn->count[s] == 0) Wn->first[s] = 0;
        }
    }
    pthread_mutex_lock(&Wn->mu);
    cdl__window_table(L, 0);
    pthread_mutex_unlock(&Wn->mu);
    return COORDL_OK;
}

/* A lazy index: whether position pos of `epoch` (this rank's share) maps
 * without a scan; with scan, scans what it needs (see cdl__window_ensure). */
CDL_PRIVATE int cdl__sampler_known(const coordl *L, uint64_t epoch, uint64_t pos, int scan) {
    if (!L->sampler.window || !L->sampler.window->lazy) return 1;
    return cdl__window_ensure(L, epoch, pos * (uint64_t)L->cfg.world + (uint64_t)L->cfg.rank, scan);
}

/* A lazy index's scan-ahead (pool.c runs the threads): the shards of the
 * front window (the furthest an item was mapped in) and of the one after
 * it, possibly in the next epoch, whose blocks are not resident, into
 * out[0..n); waits while there are none. 0: stop. */
CDL_PRIVATE size_t cdl__sampler_ahead(const coordl *L, uint32_t *out, size_t cap) {
    cdl__window *Wn = L->sampler.window;
    pthread_mutex_lock(&Wn->mu);
    for (;;) {
        if (Wn->ahead_stop) break;
        size_t n = 0;
        if (Wn->front_valid) {
            const size_t ns = Wn->nshards;
            const uint64_t nwin = (ns + Wn->width - 1) / Wn->width;
            for (uint64_t k = 0; k < 2 && n < cap; k++) {
                uint64_t epoch = Wn->front_epoch, w = Wn->front_window + k;
                if (w >= nwin) {
                    epoch++;
                    w -= nwin;
                }
                const cdl__window_epoch *e = cdl__window_table(L, epoch);
                const size_t hi = (w + 1) * Wn->width < ns ? (size_t)((w + 1) * Wn->width) : ns;
                for (size_t i = (size_t)(w * Wn->width); i < hi && n < cap; i++)
                    if (!cdl__lazy_ready(L, e->order[i])) out[n++] = e->order[i];
            }
        }
        if (n) {
            pthread_mutex_unlock(&Wn->mu);
            return n;
        }
        pthread_cond_wait(&Wn->ahead_cv, &Wn->mu);
    }
    pthread_mutex_unlock(&Wn->mu);
    return 0;
}

/* Shard s made resident by a scan-ahead thread, its count recorded. */
CDL_PRIVATE void cdl__sampler_ahead_scan(const coordl *L, uint32_t s) {
    if (cdl__lazy_prefetch(L, s)) cdl__window_learn(L, s);
}

/* The scan-ahead threads exit (they may be mid-scan: join them after). */
CDL_PRIVATE void cdl__sampler_ahead_stop(const coordl *L) {
    cdl__window *Wn = L->sampler.window;
    if (!Wn || !Wn->lazy) return;
    pthread_mutex_lock(&Wn->mu);
    Wn->ahead_stop = 1;
    pthread_cond_broadcast(&Wn->ahead_cv);
    pthread_mutex_unlock(&Wn->mu);
}

/* A seek: the front window is found again from the next item mapped. */
CDL_PRIVATE void cdl__sampler_seeked(const coordl *L) {
    cdl__window *Wn = L->sampler.window;
    if (!Wn || !Wn->lazy) return;
    pthread_mutex_lock(&Wn->mu);
    Wn->front_valid = 0;
    pthread_mutex_unlock(&Wn->mu);
}

/* The key of item id's random augmentation (its crop, flip, ...): the id,
 * but in the shard-window order on a .cls-labelled tar set the sample's
 * place in its shard ((shard << 32) | ordinal: a lazy index's id), so a
 * run that indexed its shards lazily (one process) and one that shares a
 * full index (a group, MPI ranks, index_path) draw the same augmentation
 * for the same sample, as they visit the same samples in the same order:
 * a job resumed on another rank count gets the same pixels. */
CDL_PRIVATE uint64_t cdl__sample_key(const coordl *L, uint64_t id) {
    const cdl__window *Wn = L->sampler.window;
    if (!Wn || Wn->lazy || Wn->by_shard || !L->index.tar_refs) return id;
    const uint32_t s = L->index.tar_refs[id].shard;
    return CDL_LAZY_ID(s, id - Wn->first[s]);
}

/* Items in the set: a lazy index's once every shard is counted, else 0. */
CDL_PRIVATE uint64_t cdl__sampler_num_items(const coordl *L) {
    if (!L->index.lazy) return L->index.num_items;
    return L->sampler.window ? atomic_load_explicit(&L->sampler.window->total, memory_order_acquire) : 0;
}

/* A lazy index's share and batch count once every shard is counted (the
 * last window of epoch 0 reached): until then the share is UINT64_MAX (an
 * epoch end found by the stream) and the batch count 0. 1: they are set
 * (now or before). Under the stream's lock. */
CDL_PRIVATE int cdl__sampler_settle(coordl *L) {
    if (!L->sampler.window || !L->sampler.window->lazy) return 1;
    if (__atomic_load_n(&L->sampler.share, __ATOMIC_RELAXED) != UINT64_MAX) return 1;
    /* 0 until every shard is counted: a lazy set has items (open found
     * some in its first shard), so a known total is never 0 */
    const uint64_t total = atomic_load_explicit(&L->sampler.window->total, memory_order_acquire);
    if (total == 0) return 0;
    __atomic_store_n(&L->sampler.share, total / (uint64_t)L->cfg.world, __ATOMIC_RELAXED);
    __atomic_store_n(&L->sampler.bpe, cdl__batches_for(L, L->cfg.batch_size), __ATOMIC_RELAXED);
    return 1;
}

CDL_PRIVATE void cdl__window_free(coordl *L) {
    cdl__window *Wn = L->sampler.window;
    if (!Wn) return;
    for (int i = 0; i < 2; i++) {
        cdl__free(L, Wn->ep[i].order);
        cdl__free(L, Wn->ep[i].prefix);
    }
    cdl__free(L, Wn->count);
    cdl__free(L, Wn->first);
    cdl__free(L, Wn->by_shard);
    pthread_cond_destroy(&Wn->ahead_cv);
    pthread_mutex_destroy(&Wn->mu);
    cdl__free(L, Wn);
    L->sampler.window = NULL;
}

/* Bytes the sampler's tables hold (coordl_stats.sampler_bytes): none for
 * the full shuffle (a Feistel network's keys), O(shards) for the orders
 * that keep per-epoch shard tables. */
CDL_PRIVATE uint64_t cdl__sampler_bytes(const coordl *L) {
    uint64_t b = 0;
    if (L->sampler.window) b += L->sampler.window->bytes;
    if (L->sampler.llmc)
        b += sizeof *L->sampler.llmc + L->index.nshards * sizeof *L->sampler.llmc->samples +
             2 * (L->index.nshards * sizeof(uint32_t) + (L->index.nshards + 1) * sizeof(uint64_t));
    return b;
}

/* cdl__item_at for a thread that keeps a hint: in llm.c's order a batch's
 * rows are consecutive windows from its first, so only the batch's first
 * row locates it (the tables' lock, two searches, a permutation); the
 * others add their row (B = 128: that was 128 lock round trips a batch).
 * The hint is keyed by (epoch, batch, batch size): the order is a pure
 * function of them for a handle, so it never goes stale. */
CDL_PRIVATE uint64_t cdl__item_at_hinted(const coordl *L, const cdl__perm *p, uint64_t pos, cdl__item_hint *h) {
    if (!L->sampler.llmc || L->sampler.window) return cdl__item_at(L, p, pos);
    const uint64_t B = L->cfg.batch_size, k = pos / B;
    if (!h->valid || h->epoch != p->epoch || h->batch != k || h->batch_size != B) {
        h->first = cdl__item_at(L, p, k * B);
        h->epoch = p->epoch;
        h->batch = k;
        h->batch_size = B;
        h->valid = 1;
    }
    return h->first + pos % B;
}

/* Dataset item at position `pos` of this rank's share of an epoch. */
CDL_PRIVATE uint64_t cdl__item_at(const coordl *L, const cdl__perm *p, uint64_t pos) {
    if (L->sampler.window) return cdl__window_item(L, p->epoch, pos * (uint64_t)L->cfg.world + (uint64_t)L->cfg.rank);
    if (L->sampler.llmc) {
        const uint64_t B = L->cfg.batch_size;
        uint64_t shard_pos, sample_pos;
        uint32_t s;
        cdl__llmc_locate(L, p->epoch, pos / B, &shard_pos, &sample_pos, &s);
        return cdl__llmc_block_first(L, p->epoch, s, sample_pos) + pos % B;
    }
    return cdl__perm_apply(p, pos * (uint64_t)L->cfg.world + (uint64_t)L->cfg.rank);
}

/* ---- src/jpeg_layout.c ------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * jpeg_layout.c - the JPEG marker walk.
 *
 * Owns:  nothing: parses a JPEG's markers (frame, scans, restart interval)
 *        and sizes a rewrite's room; no libjpeg
 * Lock:  none
 * Calls: none (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */

/* --- JPEG random access: restart-marker rewrite and spliced crops -------
 * Huffman decoding is most of a JPEG decode, and the libjpeg API cannot
 * skip it for the MCUs above and beside a crop: each MCU's bits must be
 * decoded to find where the next one starts, and DC prediction chains
 * them. That is a property of the file, and the MinIO cache lets coordl
 * change the file: it holds the item's bytes for every later epoch.
 *
 * Rewrite: jpeg_read_coefficients + jpeg_write_coefficients (coefficients
 * untouched, so the pixels a decoder makes are the same) as baseline
 * Huffman with a restart marker every k MCUs, plus an APP15 segment
 * ("coordl-rst") holding where each MCU row's entropy-coded data starts.
 * DC prediction restarts at every marker, so each run of k MCUs (a
 * segment) decodes on its own. k divides the MCUs per row, so segments
 * never straddle rows; it is the smallest such divisor that keeps the
 * markers under ~3.5% of the bytes (~4.3 bytes a marker with the standard
 * tables, measured: k = 1 for ImageNet-like photos, more for 4:4:4, gray
 * and low-detail large files, which have fewer bytes per MCU).
 *
 * Splice: for a crop, a small valid JPEG is built in worker scratch: the
 * headers copied (every marker before SOS: DHT may follow SOF), the frame
 * size patched in place, DRI k, and only the segments that cover the crop,
 * their restart markers renumbered 0-7 in sequence. The stock libjpeg
 * decodes it at the sample's DCT scale and the resampler cuts the crop.
 * The spliced image's edges are image edges to libjpeg, where fancy chroma
 * upsampling replicates the edge sample; so a side gets one more MCU when
 * the crop comes within a pixel of it (tests/test_jpeg_exact.c: the result
 * is byte-identical to a full decode's crop at every scale), and a span is
 * at least two MCUs wide (libjpeg upsamples a component 2 samples wide or
 * less by replication instead).
 *
 * Tables: a source with the standard Huffman tables is rewritten with them
 * (one pass, ~1.3x a full decode); progressive, arithmetic and
 * custom-table sources, and items with no room to grow, with optimized
 * tables (two passes, ~3x; they usually come out smaller than the original).
 * A fresh compress object per rewrite: libjpeg-turbo 2.1 keeps the tables
 * a reused one holds, so a standard-table rewrite after an optimized one
 * would write a corrupt stream. */

static uint32_t cdl__be16(const cdl__u8 *p) { return (uint32_t)p[0] << 8 | p[1]; }

/* Walks a JPEG's markers up to the first SOS. Returns 0 when the bytes are
 * not a JPEG this code can rewrite or splice (only the frame types libjpeg
 * decodes to 8-bit samples, 1, 3 or 4 components). Reads nothing past len. */
CDL_PRIVATE int cdl__jpeg_walk(const cdl__u8 *p, size_t len, cdl__jpeg_layout *lay) {
    memset(lay, 0, sizeof *lay);
    if (len < 4 || p[0] != 0xFF || p[1] != 0xD8) return 0;
    size_t at = 2;
    for (;;) {
        while (at + 1 < len && p[at] == 0xFF && p[at + 1] == 0xFF) at++; /* fill bytes */
        if (at + 4 > len || p[at] != 0xFF) return 0;
        const int m = p[at + 1];
        const size_t seg = cdl__be16(p + at + 2);
        if (seg < 2 || at + 2 + seg > len) return 0;
        const cdl__u8 *q = p + at + 4;
        if (m == 0xC0 || m == 0xC1 || m == 0xC2 || m == 0xC9 || m == 0xCA) {
            if (lay->sof || seg < 8 || q[0] != 8) return 0;
            lay->sof = m;
            lay->sof_off = at;
            lay->h = cdl__be16(q + 1);
            lay->w = cdl__be16(q + 3);
            lay->ncomp = q[5];
            if (lay->w == 0 || lay->h == 0 || (lay->ncomp != 1 && lay->ncomp != 3 && lay->ncomp != 4) ||
                seg != 8 + 3u * (unsigned)lay->ncomp)
                return 0;
            int hs[4], vs[4];
            for (int c = 0; c < lay->ncomp; c++) {
                hs[c] = q[7 + 3 * c] >> 4;
                vs[c] = q[7 + 3 * c] & 15;
                if (hs[c] < 1 || hs[c] > 4 || vs[c] < 1 || vs[c] > 4) return 0;
                if (hs[c] > lay->max_h) lay->max_h = hs[c];
                if (vs[c] > lay->max_v) lay->max_v = vs[c];
            }
            for (int c = 0; c < lay->ncomp && lay->ncomp > 1; c++) {
                if (hs[c] != lay->max_h) lay->hsub = 1;
                if (hs[c] != lay->max_h || vs[c] != lay->max_v) lay->subsampled = 1;
            }
            /* a one-component scan is not interleaved: its MCU is one block */
            lay->mcu_w = lay->ncomp == 1 ? 8u : 8u * (uint32_t)lay->max_h;
            lay->mcu_h = lay->ncomp == 1 ? 8u : 8u * (uint32_t)lay->max_v;
            lay->mcus_per_row = (lay->w + lay->mcu_w - 1) / lay->mcu_w;
            lay->mcu_rows = (lay->h + lay->mcu_h - 1) / lay->mcu_h;
        } else if ((m >= 0xC3 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) || m == 0xD8 ||
                   m == 0xD9 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) {
            return 0; /* lossless, hierarchical, 12-bit-only frame types; stray markers */
        } else if (m == 0xEF && seg >= 2 + CDL_RST_HEAD && memcmp(q, CDL_RST_TAG, CDL_RST_TAG_LEN) == 0 &&
                   q[CDL_RST_TAG_LEN] == 1) {
            lay->index_off = at;
            lay->index_len = 2 + seg;
            lay->interval = (uint32_t)q[12] | (uint32_t)q[13] << 8;
        } else if (m == 0xDA) {
            lay->data_off = at + 2 + seg;
            return lay->sof != 0 && lay->data_off < len;
        }
        at += 2 + seg;
    }
}

/* The restart interval for a rewrite: the smallest divisor of the MCUs per
 * row that keeps the markers' bytes under ~3.5% of the file. */
CDL_PRIVATE uint32_t cdl__rst_interval(const cdl__jpeg_layout *lay, size_t len) {
    const uint64_t mcus = (uint64_t)lay->mcus_per_row * lay->mcu_rows;
    /* markers * 4.3 <= 0.035 * len  <=>  k >= mcus * 43 / (0.35 * len) */
    uint64_t want = (mcus * CDL_RST_BYTES_PER_MARKER_X10 * 100 + (uint64_t)len * 35 - 1) / ((uint64_t)len * 35);
    if (want < 1) want = 1;
    for (uint32_t k = (uint32_t)(want < lay->mcus_per_row ? want : lay->mcus_per_row); k < lay->mcus_per_row; k++)
        if (lay->mcus_per_row % k == 0) return k;
    return lay->mcus_per_row;
}

/* Bytes a rewrite may add to an item (room reserved at admission so the
 * rewrite fits in place), or 0 when the item is not a JPEG coordl
 * rewrites. Measured on the bench photos (bench/README.md): the standard
 * tables add 4.3 bytes a marker (at most 6.0); progressive sources grow
 * by 8-11% as baseline, arithmetic ones by 14-20%. */
CDL_PRIVATE size_t cdl__rst_room(const cdl__u8 *p, size_t len) {
#ifdef COORDL_NO_JPEGTURBO
    (void)p; (void)len;
    return 0; /* no rewrites without libjpeg */
#endif
    cdl__jpeg_layout lay;
    if (!cdl__jpeg_walk(p, len, &lay) || lay.index_off || lay.mcu_rows > CDL_RST_MAX_ROWS) return 0;
    const uint64_t markers = (uint64_t)lay.mcus_per_row * lay.mcu_rows / cdl__rst_interval(&lay, len);
    uint64_t room = markers * CDL_RST_ROOM_PER_MARKER_X10 / 10 + CDL_RST_HEAD + 4u * lay.mcu_rows + 64;
    if (lay.sof == 0xC2) room += len / 8;
    if (lay.sof == 0xC9 || lay.sof == 0xCA) room += len / 4;
    return room > UINT32_MAX / 2 ? 0 : (size_t)room;
}

/* ---- src/cache.c ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * cache.c - the MinIO cache.
 *
 * Encoded bytes of items, admitted on first read until the byte budget
 * is full, never evicted: under a fresh random permutation per epoch
 * the hit rate is then exactly the cached fraction, the best a demand
 * cache can do. One slab, space reserved by a lock-free bump counter;
 * entries hold offsets. The LRU variant (malloc per item, a mutex) is
 * only for comparison.
 *
 * Owns:  L->cache: the slab, an entry per item (state, offset, length,
 *        room, JPEG kind) and the LRU alternative; the slab's byte counts
 *        live in the stream (S) so a group shares them
 * Lock:  entries change by atomic compare-and-swap on their state and JPEG
 *        words (one writer per state change, its member recorded); readers
 *        record what they read in their member's reading[] words; the LRU
 *        has its own mutex
 * Calls: status, index, arena, jpeg_layout (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */

/* Cached JPEGs may be rewritten in place (jpeg.c: restart markers for
 * crop-only decoding), so whoever reads an entry's bytes says so first: a
 * reader records the entry in its own word of its member's reading[]
 * (lock_state.h), then checks that the entry is PRESENT; a rewrite marks
 * the entry REWRITING, then looks at every live member's records and backs
 * off if anyone reads the entry. Both sides store, then load, sequentially
 * consistent, so at least one sees the other (a reader that sees REWRITING
 * takes it as a miss). The records are plain words, not counts in the
 * entry: a member that dies, or is dropped, holds nothing (its records are
 * not looked at, and are cleared), where a count it raised would stay
 * raised for the life of a group's shared memory. */

/* A lazy index's table for item id's shard, or NULL: none made yet (or no
 * such shard, or no lazy index). */
static cdl__shard_entries *cdl__shard_table(const coordl *L, uint64_t id) {
    const uint32_t s = CDL_LAZY_SHARD(id);
    if (!L->cache.by_shard || s >= L->cache.nshards) return NULL;
    return atomic_load_explicit(&L->cache.by_shard[s], memory_order_acquire);
}

/* Item id's entry, or NULL: a lazy index's shard that holds no item yet
 * (every lookup then is a miss). */
static cdl__cache_entry *cdl__ce(const coordl *L, uint64_t id) {
    if (L->cache.entries) return &L->cache.entries[id];
    cdl__shard_entries *se = cdl__shard_table(L, id);
    const uint32_t k = CDL_LAZY_ORDINAL(id);
    return se && k < se->n ? &se->e[k] : NULL;
}

/* Item id's entry, its shard's table made first if need be (a lazy index:
 * the shard's count is known, it was scanned to read the item). */
static cdl__cache_entry *cdl__ce_make(coordl *L, uint64_t id) {
    cdl__cache_entry *ce = cdl__ce(L, id);
    const uint32_t s = CDL_LAZY_SHARD(id);
    if (ce || !L->cache.by_shard || s >= L->cache.nshards) return ce;
    uint32_t n = 0;
    char err[CDL_ERRMSG_MAX];
    if (cdl__lazy_count(L, s, &n, err, sizeof err) != COORDL_OK || n == 0 ||
        n == CDL_LAZY_UNKNOWN)
        return NULL;
    cdl__shard_entries *se = cdl__calloc(L, 1, sizeof *se + (size_t)n * (sizeof se->e[0] + sizeof *se->labels));
    cdl__shard_entries *none = NULL;
    if (!se) return NULL;
    se->n = n;
    se->labels = (int32_t *)(void *)(se->e + n);
    if (cdl__lazy_labels(L, s, se->labels, n) != COORDL_OK) { /* the shard failed or changed: not cached */
        cdl__free(L, se);
        return NULL;
    }
    if (!atomic_compare_exchange_strong(&L->cache.by_shard[s], &none, se)) cdl__free(L, se); /* another made it */
    return cdl__ce(L, id);
}

/* A lazily indexed item's label from its shard's cache table (made when
 * the shard's first item was admitted): 1, or 0 when there is none (the
 * label then comes from the shard's block, cdl__item_label). */
CDL_PRIVATE int cdl__cache_label(const coordl *L, uint64_t id, int32_t *label) {
    const cdl__shard_entries *se = cdl__shard_table(L, id);
    const uint32_t k = CDL_LAZY_ORDINAL(id);
    if (!se || k >= se->n) return 0;
    *label = se->labels[k];
    return 1;
}

/* Whether the MinIO cache is on (a table per item, or per shard). */
CDL_PRIVATE int cdl__cache_minio(const coordl *L) { return L->cache.entries != NULL || L->cache.by_shard != NULL; }

/* What a reader records for item id: never 0 (no record); two items may
 * share it (a lazy id's two halves are folded), which only makes a rewrite
 * back off for nothing. */
static uint32_t cdl__reader_tag(uint64_t id) { return (uint32_t)((id ^ (id >> 32)) % 0xFFFFFFFFu) + 1; }

/* This member's reader record k (0 <= k < CDL_MAX_READERS). */
CDL_PRIVATE _Atomic uint32_t *cdl__cache_reader(coordl *L, uint32_t k) {
    return &L->S->members[L->member.me].reading[k];
}

#ifdef COORDL_MPI /* the peer server sizes its replies by it */
/* The room item id's entry holds (its bytes never outgrow it), 0 when the
 * item is not cached. */
CDL_PRIVATE uint32_t cdl__cache_room(const coordl *L, uint64_t id) {
    const cdl__cache_entry *ce = cdl__ce(L, id);
    if (!ce) return 0;
    const uint32_t s = atomic_load_explicit(&ce->state, memory_order_acquire) & CDL_CE_STATE;
    return s == CDL_CE_PRESENT || s == CDL_CE_REWRITING ? ce->cap : 0;
}
#endif

/* Whether item id's bytes are cached (present, or being rewritten). */
CDL_PRIVATE int cdl__cache_holds(const coordl *L, uint64_t id) {
    const cdl__cache_entry *ce = cdl__ce(L, id);
    if (!ce) return 0;
    const uint32_t s = atomic_load_explicit(&ce->state, memory_order_acquire) & CDL_CE_STATE;
    return s == CDL_CE_PRESENT || s == CDL_CE_REWRITING;
}

/* Returns a pointer to the cached bytes, recorded in the caller's reader
 * word (give it back with cdl__cache_release_minio), or NULL on a miss.
 * kind: the entry's CDL_CE_PLAIN / _RST / _KEEP (a claimed entry's bytes
 * are still plain). */
CDL_PRIVATE const cdl__u8 *cdl__cache_acquire_minio(coordl *L, _Atomic uint32_t *reader, uint64_t id, uint32_t *len,
                                               int *kind, uint32_t *cap) {
    cdl__cache_entry *ce = cdl__ce(L, id);
    if (!ce) return NULL;
    atomic_store(reader, cdl__reader_tag(id)); /* then look: see the comment above */
    if ((atomic_load(&ce->state) & CDL_CE_STATE) != CDL_CE_PRESENT) {
        atomic_store_explicit(reader, 0, memory_order_release);
        return NULL;
    }
    *len = ce->len;
    if (kind) {
        const uint32_t j = atomic_load_explicit(&ce->jpeg, memory_order_relaxed) & CDL_CE_STATE;
        *kind = j == CDL_CE_CLAIMED ? CDL_CE_PLAIN : (int)j;
    }
    if (cap) *cap = ce->cap;
    return L->cache.arena.base + ce->off;
}

CDL_PRIVATE void cdl__cache_release_minio(_Atomic uint32_t *reader) {
    atomic_store_explicit(reader, 0, memory_order_release);
}

/* Admits an item read from storage. A JPEG coordl may rewrite gets room to
 * grow into (cdl__rst_room, about 3-4% of its bytes for photos), but only
 * while the budget still holds every item not yet admitted at its size as
 * read: so random access never costs the cache an item it would have held
 * (a budget of exactly the dataset holds all of it, without room). Without
 * room an item is rewritten only if it fits in place (optimized tables
 * usually make it smaller). Returns the entry's ce->jpeg, or -1 when the
 * item was not admitted. */
CDL_PRIVATE int cdl__cache_admit_minio(coordl *L, uint64_t id, const cdl__u8 *bytes, size_t len, uint32_t *cap_out) {
    if (len == 0 || len > UINT32_MAX / 2) return -1;
    /* full for this item: a lazy index makes no shard table for it */
    if (atomic_load(&L->S->cache_used) + len > L->cfg.cache_bytes) return -1;
    cdl__cache_entry *ce = cdl__ce_make(L, id);
    if (!ce) return -1;
    const uint32_t admitting = CDL_CE_ADMITTING | CDL_CE_OWNER(L->member.me);
    uint32_t expect = CDL_CE_EMPTY;
    if (!atomic_compare_exchange_strong(&ce->state, &expect, admitting)) return -1;
    const int image = cdl__pipeline_is_image(L->cfg.pipeline);
    /* a lazy index does not know the bytes still to come, so it gives no
     * JPEG rewrite room (MinIO must never lose an item to it) */
    const size_t room = L->cfg.jpeg_random_access && image && L->cache.entries ? cdl__rst_room(bytes, len) : 0;
    const uint64_t rest = L->index.dataset_bytes > atomic_load(&L->S->cache_src_bytes) + len
                              ? L->index.dataset_bytes - atomic_load(&L->S->cache_src_bytes) - len : 0;
    uint64_t used = atomic_load(&L->S->cache_used), cap;
    for (;;) {
        if (used + len > L->cfg.cache_bytes) { /* full for this item: never evict */
            expect = admitting; /* a CAS: a drop of this member may have made it LOST */
            atomic_compare_exchange_strong(&ce->state, &expect, CDL_CE_EMPTY);
            return -1;
        }
        cap = room && used + len + room + rest <= L->cfg.cache_bytes ? len + room : len;
        if (atomic_compare_exchange_weak(&L->S->cache_used, &used, used + cap)) break;
    }
    cdl__test_hook(L, "admitting");
    memcpy(L->cache.arena.base + used, bytes, len);
    ce->off = used;
    ce->len = (uint32_t)len;
    ce->cap = (uint32_t)cap;
    atomic_store_explicit(&ce->jpeg, room ? CDL_CE_PLAIN : CDL_CE_KEEP, memory_order_relaxed);
    expect = admitting;
    if (!atomic_compare_exchange_strong(&ce->state, &expect, CDL_CE_PRESENT)) return -1; /* dropped meanwhile */
    /* counted once present: a member dropped half-way counted nothing */
    if (room) atomic_fetch_add(&L->S->cache_plain_items, 1);
    atomic_fetch_add(&L->S->cache_items, 1);
    atomic_fetch_add(&L->S->cache_src_bytes, len);
    cdl__shard_entries *se = cdl__shard_table(L, id); /* a lazy index: its last item in, its block is needed no more */
    if (se && atomic_fetch_add(&se->present, 1) + 1 == se->n) cdl__lazy_mark_cached(L, CDL_LAZY_SHARD(id));
    *cap_out = (uint32_t)cap;
    return room ? CDL_CE_PLAIN : CDL_CE_KEEP;
}

#ifndef COORDL_NO_JPEGTURBO /* only JPEG rewrites claim, replace or keep entries */
/* Takes the rewrite of a PLAIN entry for this member: 1 when the caller is
 * now its one owner (finish with cdl__cache_replace_minio or
 * cdl__cache_keep_minio), 0 when it is not plain (rewritten, kept, or
 * claimed by another worker). */
CDL_PRIVATE int cdl__cache_claim_rewrite(coordl *L, uint64_t id) {
    uint32_t plain = CDL_CE_PLAIN;
    cdl__cache_entry *ce = cdl__ce(L, id);
    return ce && atomic_compare_exchange_strong(&ce->jpeg, &plain, CDL_CE_CLAIMED | CDL_CE_OWNER(L->member.me));
}

/* The claim's owner gives the rewrite back untried (PLAIN again). */
CDL_PRIVATE void cdl__cache_unclaim_rewrite(coordl *L, uint64_t id) {
    uint32_t claimed = CDL_CE_CLAIMED | CDL_CE_OWNER(L->member.me);
    cdl__cache_entry *ce = cdl__ce(L, id);
    if (ce) atomic_compare_exchange_strong(&ce->jpeg, &claimed, CDL_CE_PLAIN);
}

/* Whether a reader other than `self` reads entry id now: the records of
 * every member in the live set (and this one). */
static int cdl__cache_read_elsewhere(coordl *L, const _Atomic uint32_t *self, uint64_t id) {
    const uint32_t live = atomic_load(&L->S->live_mask) | (1u << L->member.me);
    for (int m = 0; m < CDL_MAX_MEMBERS; m++) {
        if (!(live >> m & 1u)) continue;
        const cdl__member *mb = &L->S->members[m];
        for (uint32_t k = 0; k < CDL_MAX_READERS; k++) /* 1 KiB a member, once per rewrite */
            if (&mb->reading[k] != self && atomic_load(&mb->reading[k]) == cdl__reader_tag(id)) return 1;
    }
    return 0;
}

/* The claim's owner replaces the entry's bytes by their rewrite (len <= its
 * cap), if no reader but `self` (the owner's own record, or NULL) reads
 * them. Returns 1 when replaced (now RST); 0 when another reader was
 * there: the claim is given back (PLAIN again, tried again later). */
CDL_PRIVATE int cdl__cache_replace_minio(coordl *L, const _Atomic uint32_t *self, uint64_t id, const cdl__u8 *bytes,
                                    size_t len) {
    cdl__cache_entry *ce = cdl__ce(L, id);
    if (!ce) return 0;
    const uint32_t claimed = CDL_CE_CLAIMED | CDL_CE_OWNER(L->member.me);
    const uint32_t rewriting = CDL_CE_REWRITING | CDL_CE_OWNER(L->member.me);
    if (len > ce->cap) { /* cannot happen with cdl__jpeg_rewrite's limit; never loop on it */
        cdl__cache_keep_minio(L, id);
        return 0;
    }
    if (atomic_load(&ce->jpeg) != claimed) return 0; /* a drop of this member took the claim back */
    uint32_t expect = CDL_CE_PRESENT;
    if (!atomic_compare_exchange_strong(&ce->state, &expect, rewriting)) { /* LOST after a drop of ours */
        cdl__cache_unclaim_rewrite(L, id);
        return 0;
    }
    if (cdl__cache_read_elsewhere(L, self, id)) { /* then look: see the comment above */
        expect = rewriting;
        atomic_compare_exchange_strong(&ce->state, &expect, CDL_CE_PRESENT);
        cdl__cache_unclaim_rewrite(L, id);
        return 0;
    }
    cdl__test_hook(L, "rewriting");
    memcpy(L->cache.arena.base + ce->off, bytes, len);
    ce->len = (uint32_t)len;
    /* CASes: a drop of this member meanwhile took the claim back (the bytes
     * are a whole rewrite, decodable as plain) or made the entry LOST;
     * either way nothing is counted */
    expect = claimed;
    const int mine = atomic_compare_exchange_strong(&ce->jpeg, &expect, CDL_CE_RST);
    expect = rewriting;
    const int present = atomic_compare_exchange_strong(&ce->state, &expect, CDL_CE_PRESENT);
    if (!mine || !present) return 0;
    atomic_fetch_add(&L->S->cache_rst_items, 1);
    atomic_fetch_sub(&L->S->cache_plain_items, 1);
    return 1;
}

/* The claim's owner gives the rewrite up for good: never tried again. */
CDL_PRIVATE void cdl__cache_keep_minio(coordl *L, uint64_t id) {
    uint32_t claimed = CDL_CE_CLAIMED | CDL_CE_OWNER(L->member.me);
    cdl__cache_entry *ce = cdl__ce(L, id);
    if (ce && atomic_compare_exchange_strong(&ce->jpeg, &claimed, CDL_CE_KEEP))
        atomic_fetch_sub(&L->S->cache_plain_items, 1);
}
#endif

/* Member m left the group: its reader records are cleared, its rewrite
 * claims given back, and an entry it left half-written (ADMITTING or
 * REWRITING) made LOST: its bytes are neither what was read nor a whole
 * rewrite. Under the stream's lock (the drop); O(items), once per drop. */
CDL_PRIVATE void cdl__cache_drop_member(coordl *L, int m) {
    if (!L->cache.entries || m < 0 || m >= CDL_MAX_MEMBERS) return;
    cdl__member *mb = &L->S->members[m];
    for (uint32_t k = 0; k < CDL_MAX_READERS; k++) atomic_store(&mb->reading[k], 0);
    uint64_t lost = 0;
    for (uint64_t id = 0; id < L->index.num_items; id++) {
        cdl__cache_entry *ce = &L->cache.entries[id];
        uint32_t j = CDL_CE_CLAIMED | CDL_CE_OWNER(m);
        atomic_compare_exchange_strong(&ce->jpeg, &j, CDL_CE_PLAIN);
        uint32_t s = atomic_load(&ce->state);
        const uint32_t what = s & CDL_CE_STATE;
        if ((what == CDL_CE_ADMITTING || what == CDL_CE_REWRITING) && s >> CDL_CE_OWNER_SHIFT == (uint32_t)m &&
            atomic_compare_exchange_strong(&ce->state, &s, CDL_CE_LOST)) {
            if (what == CDL_CE_REWRITING) { /* it was present, and plain */
                atomic_fetch_sub(&L->S->cache_items, 1);
                atomic_fetch_sub(&L->S->cache_plain_items, 1);
            }
            lost++;
        }
    }
    if (lost)
        cdl__log(L, COORDL_LOG_WARN, "cache: %llu item(s) that a dropped member was writing are no longer cached "
                 "(read from storage from now on)", (unsigned long long)lost);
}

static void cdl__lru_unlink(cdl__lru *c, int32_t i) {
    if (c->prev[i] >= 0) c->next[c->prev[i]] = c->next[i]; else c->head = c->next[i];
    if (c->next[i] >= 0) c->prev[c->next[i]] = c->prev[i]; else c->tail = c->prev[i];
    c->prev[i] = c->next[i] = -1;
}
static void cdl__lru_push_front(cdl__lru *c, int32_t i) {
    c->prev[i] = -1;
    c->next[i] = c->head;
    if (c->head >= 0) c->prev[c->head] = i;
    c->head = i;
    if (c->tail < 0) c->tail = i;
}

/* LRU hit: copies into dst (an evicting cache cannot lend its memory). */
CDL_PRIVATE int cdl__cache_lookup_lru(coordl *L, uint64_t id, cdl__u8 *dst, size_t cap, uint32_t *len) {
    cdl__lru *c = L->cache.lru;
    int hit = 0;
    pthread_mutex_lock(&c->mu);
    if (c->data[id] && c->len[id] <= cap) {
        memcpy(dst, c->data[id], c->len[id]);
        *len = c->len[id];
        cdl__lru_unlink(c, (int32_t)id);
        cdl__lru_push_front(c, (int32_t)id);
        hit = 1;
    }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

CDL_PRIVATE void cdl__cache_admit_lru(coordl *L, uint64_t id, const cdl__u8 *bytes, size_t len) {
    cdl__lru *c = L->cache.lru;
    if (len == 0 || len > L->cfg.cache_bytes) return;
    pthread_mutex_lock(&c->mu);
    if (!c->data[id]) {
        while (c->bytes_used + len > L->cfg.cache_bytes && c->tail >= 0) {
            int32_t victim = c->tail;
            cdl__lru_unlink(c, victim);
            c->bytes_used -= c->len[victim];
            c->items--;
            cdl__free(L, c->data[victim]);
            c->data[victim] = NULL;
        }
        cdl__u8 *copy = cdl__malloc(L, len);
        if (copy) {
            memcpy(copy, bytes, len);
            c->data[id] = copy;
            c->len[id] = (uint32_t)len;
            c->bytes_used += len;
            c->items++;
            cdl__lru_push_front(c, (int32_t)id);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* The budget in force: a MinIO budget beyond the dataset is never used,
 * so only what can fill is mapped (silently: nothing is lost); and no
 * budget may exceed 3/4 of the machine's memory (a 1 TiB cache on a 24 GiB
 * machine would only end in the OOM killer once the cache fills), which
 * is logged. A group's budget is cut further to what /dev/shm holds
 * (group.c). coordl_get_config and coordl_get_stats report the result. */
CDL_PRIVATE coordl_status cdl__cache_clamp(coordl *L) {
    uint64_t slab = L->cfg.cache_bytes;
    L->stats.st.cache_bytes_requested = slab;
    if (L->cfg.cache_policy == COORDL_CACHE_MINIO) {
        /* JPEG rewrites may use up to 1/8 more (the room jpeg_layout.c reserves:
         * 3-5% for photos, 12-25% for progressive and arithmetic sources) */
        const uint64_t most = L->index.dataset_bytes + (L->cfg.jpeg_random_access ? L->index.dataset_bytes / 8 : 0) + (64u << 20);
        if (slab > most && !L->index.lazy) slab = most; /* a lazy index does not know the set's bytes */
    }
    const long pages = sysconf(_SC_PHYS_PAGES);
    const uint64_t ram = pages > 0 ? (uint64_t)pages * cdl__page_size() : 0;
    if (ram && slab > ram / 4 * 3) {
        cdl__log(L, COORDL_LOG_WARN, "cache_bytes: %llu asked for, but this machine has %llu bytes of memory; "
                 "using %llu (3/4 of it; coordl_get_stats reports cache_bytes_budget and cache_bytes_requested)",
                 (unsigned long long)L->cfg.cache_bytes, (unsigned long long)ram,
                 (unsigned long long)(ram / 4 * 3));
        slab = ram / 4 * 3;
    }
    if (slab > SIZE_MAX / 2)
        return cdl__open_fail(COORDL_ERR_INVALID, "cache_bytes: %llu is too large for this platform",
                              (unsigned long long)slab);
    L->cfg.cache_bytes = slab;
    L->stats.st.cache_bytes_budget = slab;
    return COORDL_OK;
}

CDL_PRIVATE coordl_status cdl__cache_create(coordl *L) {
    if (L->cfg.cache_bytes == 0) return COORDL_OK;
    if (L->cfg.cache_policy == COORDL_CACHE_LRU) {
        cdl__lru *c = cdl__calloc(L, 1, sizeof *c);
        if (!c) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the LRU cache; lower cache_bytes");
        L->cache.lru = c;
        pthread_mutex_init(&c->mu, NULL);
        c->prev = cdl__malloc(L, L->index.num_items * sizeof *c->prev);
        c->next = cdl__malloc(L, L->index.num_items * sizeof *c->next);
        c->data = cdl__calloc(L, L->index.num_items, sizeof *c->data);
        c->len = cdl__calloc(L, L->index.num_items, sizeof *c->len);
        if (!c->prev || !c->next || !c->data || !c->len)
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the LRU cache; lower cache_bytes");
        for (uint64_t i = 0; i < L->index.num_items; i++) c->prev[i] = c->next[i] = -1;
        c->head = c->tail = -1;
        return COORDL_OK;
    }
    const uint64_t slab = L->cfg.cache_bytes;
    if (L->index.lazy) {
        L->cache.nshards = L->index.ntar_shards;
        L->cache.by_shard = cdl__calloc(L, L->cache.nshards ? L->cache.nshards : 1, sizeof *L->cache.by_shard);
        if (!L->cache.by_shard) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the cache's shard table");
        return cdl__arena_map(L, &L->cache.arena, (size_t)slab, 0, "cache slab", "cache_bytes");
    }
    L->cache.entries = cdl__calloc(L, L->index.num_items, sizeof *L->cache.entries);
    if (!L->cache.entries) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the cache table (one entry per item); set cache_bytes = 0 for no cache");
    return cdl__arena_map(L, &L->cache.arena, (size_t)slab, 0, "cache slab", "cache_bytes");
}

CDL_PRIVATE void cdl__cache_destroy(coordl *L) {
    if (L->cache.lru) {
        cdl__lru *c = L->cache.lru;
        if (c->data)
            for (uint64_t i = 0; i < L->index.num_items; i++) cdl__free(L, c->data[i]);
        cdl__free(L, c->prev);
        cdl__free(L, c->next);
        cdl__free(L, c->data);
        cdl__free(L, c->len);
        pthread_mutex_destroy(&c->mu);
        cdl__free(L, c);
        L->cache.lru = NULL;
    }
    cdl__arena_unmap(L, &L->cache.arena);
    if (L->cache.by_shard) {
        for (size_t s = 0; s < L->cache.nshards; s++) cdl__free(L, atomic_load(&L->cache.by_shard[s]));
        cdl__free(L, (void *)L->cache.by_shard);
        L->cache.by_shard = NULL;
    }
    if (!L->member.shm_base) cdl__free(L, L->cache.entries);
    L->cache.entries = NULL;
}

/* ---- src/peers.c ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * peers.c - the partitioned cache over MPI.
 *
 * The partitioned cache. Each rank admits the items of its share of one
 * epoch, the first whole epoch it trains (epoch 0, or the one a seek at
 * open resumes), up to its budget: which rank reads which item is a
 * pure function of the seed, the epoch and the world size, so the ranks
 * cache disjoint parts. Claims past that epoch wait for one map
 * exchange (an MPI_Allreduce over the per-item owner array), after
 * which every rank knows where each cached item lives and nothing more
 * is admitted (spare budget is left unused: the map stays exact). Every
 * rank runs exactly one exchange, at that point or at close, whichever
 * comes first, and only then the closing barrier. From then on, when a
 * slot is assigned, one request per peer asks for the rows that peer
 * holds; the reply lands in the slot's buffer; workers wait for it at
 * most peer_timeout_ms (or until close) and otherwise read storage. All
 * MPI traffic runs on one coordl thread over a duplicate of the
 * trainer's communicator; all its memory comes from the allocator hooks.
 *
 * Owns:  L->peers: who caches which item after epoch 0, the requests in
 *        flight and the replies per slot and row, the send buffers, and the
 *        peer thread
 * Lock:  the stream's lock; admit_epoch is atomic, map_ready a release
 *        store (the I/O threads read both unlocked)
 * One scan per job: cdl__peer_index lets rank 0 alone index the source
 * (scan, or load cfg.index_path) and broadcasts the index image to the
 * other ranks, so N ranks make the storage calls of one; the ranks of a
 * node share one copy of it, in /dev/shm.
 *
 * Calls: status, indexfile, source, lock, sampler, cache (lower layers
 *        only: src/modules.txt; tools/check-layers.py checks this line).
 */

#define CDL_ADMIT_CLOSED UINT64_MAX

/* Whether a storage read of `epoch` may be admitted into the cache (any
 * thread: the admission epoch moves only while no row is in flight, at a
 * seek, or closes at the exchange, when admitting more is harmless). */
CDL_PRIVATE int cdl__peer_admits(coordl *L, uint64_t epoch) {
    return atomic_load_explicit(&L->peers.admit_epoch, memory_order_relaxed) == epoch;
}

/* Whether the claims, at the end of `epoch`, must wait for the map before
 * moving on: past the admission epoch (or while the exchange runs), rows
 * would miss the peers that hold them. Under mu. */
CDL_PRIVATE int cdl__peer_claim_waits(coordl *L, uint64_t epoch) {
    const uint64_t admit = atomic_load(&L->peers.admit_epoch);
    return L->peers.comm_set && !L->peers.map_ready && (admit == CDL_ADMIT_CLOSED || epoch >= admit);
}

/* Whether rows of `epoch` may be served by peers once the map is known,
 * and it is not known yet: the read-ahead waits before reading them. The
 * admission epoch and those before it are read from storage (the claims
 * reach no later epoch before the map); while the exchange runs, every
 * epoch waits. Without the stream's lock. */
CDL_PRIVATE int cdl__peer_map_pending(coordl *L, uint64_t epoch) {
    if (!L->peers.comm_set || __atomic_load_n(&L->peers.map_ready, __ATOMIC_ACQUIRE)) return 0;
    const uint64_t admit = atomic_load(&L->peers.admit_epoch);
    return admit == CDL_ADMIT_CLOSED || epoch > admit;
}

/* The trainer asks for its first batch (coordl_next, _next_into): from
 * now on the admission epoch moves only by a seek mid-run. Under mu. */
CDL_PRIVATE CDL_HOT void cdl__peer_consumer_started(coordl *L) {
    if (L->peers.comm_set && !L->peers.consumer_started) L->peers.consumer_started = 1;
}

/* coordl_seek before the exchange: the rank caches its share of the first
 * whole epoch from the new position instead (a mid-epoch resume skips
 * the rest of that epoch). After the exchange (or once it began) the map
 * is final. Under mu. */
CDL_PRIVATE void cdl__peer_seek(coordl *L, uint64_t epoch, uint64_t batch) {
    if (!L->peers.comm_set || atomic_load(&L->peers.admit_epoch) == CDL_ADMIT_CLOSED) return;
    atomic_store(&L->peers.admit_epoch, batch == 0 ? epoch : epoch + 1);
}

#ifdef COORDL_MPI
static cdl__remote_row *cdl__peer_rows_of(const coordl *L, uint32_t s) {
    return L->peers.rows + (size_t)s * L->geom.slot_rows_cap;
}
static uint32_t *cdl__peer_asked_of(const coordl *L, uint32_t s) {
    return L->peers.asked + (size_t)s * L->geom.slot_rows_cap;
}

/* A free send buffer of at least `bytes` (the smallest that fits, else one
 * grown), marked FILLING; -1 when memory runs out. Under mu. */
static int cdl__peer_send_get(coordl *L, size_t bytes) {
    int best = -1, any = -1;
    for (size_t i = 0; i < L->peers.nsends; i++) {
        const cdl__peer_send *ps = &L->peers.sends[i];
        if (ps->state != CDL_SEND_FREE) continue;
        if (ps->cap >= bytes && (best < 0 || ps->cap < L->peers.sends[best].cap)) best = (int)i;
        if (any < 0 || ps->cap > L->peers.sends[any].cap) any = (int)i;
    }
    if (best < 0 && any < 0) {
        if (L->peers.nsends == L->peers.sends_cap) {
            size_t ncap = L->peers.sends_cap ? L->peers.sends_cap * 2 : 16;
            cdl__peer_send *q = cdl__realloc(L, L->peers.sends, ncap * sizeof *q);
            if (!q) return -1;
            L->peers.sends = q;
            L->peers.sends_cap = ncap;
        }
        memset(&L->peers.sends[L->peers.nsends], 0, sizeof *L->peers.sends);
        any = (int)L->peers.nsends++;
    }
    const int i = best >= 0 ? best : any;
    cdl__peer_send *ps = &L->peers.sends[i];
    if (!cdl__reserve(L, (void **)&ps->buf, &ps->cap, bytes)) return -1;
    ps->state = CDL_SEND_FILLING;
    return i;
}

/* Non-blocking send of a filled buffer, so no rank ever blocks in a send
 * while its peer does the same. 1: sent. Under mu. */
static int cdl__peer_isend(coordl *L, int i, MPI_Datatype type, size_t count, int dest, int tag) {
    cdl__peer_send *ps = &L->peers.sends[i];
    if (count > INT_MAX || MPI_Isend(ps->buf, (int)count, type, dest, tag, L->peers.comm, &ps->req) != MPI_SUCCESS) {
        ps->state = CDL_SEND_FREE;
        return 0;
    }
    ps->state = CDL_SEND_INFLIGHT;
    return 1;
}

/* Frees the buffers of finished sends for reuse; returns how many are
 * still in flight. Under mu. */
static size_t cdl__peer_sends_retire(coordl *L) {
    size_t inflight = 0;
    for (size_t i = 0; i < L->peers.nsends; i++) {
        cdl__peer_send *ps = &L->peers.sends[i];
        if (ps->state != CDL_SEND_INFLIGHT) continue;
        int done = 0;
        if (MPI_Test(&ps->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 1;
        if (done) ps->state = CDL_SEND_FREE;
        else inflight++;
    }
    return inflight;
}

/* Builds and sends this slot's requests: one message per peer holding
 * some of its rows: [u64 request id][u64 id]..., the id carrying the slot
 * (the reply's tag). Called when the slot is assigned. Under mu. */
CDL_PRIVATE void cdl__peer_request_slot(coordl *L, uint32_t s) {
    if (!L->peers.map_ready) return;
    cdl__slot *sl = &L->ring.slots[s];
    cdl__remote *rm = &L->peers.remote[s];
    cdl__remote_row *rows = cdl__peer_rows_of(L, s);
    uint32_t *asked = cdl__peer_asked_of(L, s);
    const int world = L->cfg.world;
    rm->gen = sl->gen;
    rm->requested = 1;
    rm->used = 0;
    rm->request_ns = cdl__now_ns();
    for (int p = 0; p < world; p++) rm->ask[p].id = rm->ask[p].n = 0;
    /* each row's item and owner once; rows grouped by owner in `asked` */
    cdl__perm perm = cdl__perm_for(L, sl->epoch);
    for (uint32_t r = 0; r < sl->n; r++) {
        cdl__remote_row *row = &rows[r];
        row->id = cdl__item_at(L, &perm, sl->pos + r);
        const int owner = L->peers.owner[row->id];
        row->state = owner >= 0 && owner != L->cfg.rank ? CDL_REMOTE_WAIT : CDL_REMOTE_NONE;
        if (row->state == CDL_REMOTE_WAIT) rm->ask[owner].n++;
    }
    uint32_t first = 0;
    for (int p = 0; p < world; p++) {
        rm->ask[p].first = first;
        first += rm->ask[p].n;
        rm->ask[p].n = 0;
    }
    for (uint32_t r = 0; r < sl->n; r++)
        if (rows[r].state == CDL_REMOTE_WAIT) {
            cdl__remote_ask *a = &rm->ask[L->peers.owner[rows[r].id]];
            asked[a->first + a->n++] = r;
        }
    for (int p = 0; p < world; p++) {
        cdl__remote_ask *a = &rm->ask[p];
        if (!a->n) continue;
        const int i = cdl__peer_send_get(L, (1 + (size_t)a->n) * sizeof(uint64_t));
        uint64_t *msg = i >= 0 ? (uint64_t *)(void *)L->peers.sends[i].buf : NULL;
        if (msg) {
            L->peers.request_seq = (L->peers.request_seq + 1) & 0xffffffffffffull;
            if (!L->peers.request_seq) L->peers.request_seq = 1; /* 0 means none */
            msg[0] = ((uint64_t)s << 48) | L->peers.request_seq;
            for (uint32_t k = 0; k < a->n; k++) msg[1 + k] = rows[asked[a->first + k]].id;
        }
        if (msg && cdl__peer_isend(L, i, MPI_UINT64_T, 1 + (size_t)a->n, p, CDL_TAG_REQ)) {
            a->id = msg[0];
            L->peers.outstanding++;
        } else { /* unsent: those rows simply come from storage, at once */
            if (i >= 0) L->peers.sends[i].state = CDL_SEND_FREE;
            for (uint32_t k = 0; k < a->n; k++) rows[asked[a->first + k]].state = CDL_REMOTE_NONE;
            a->n = 0;
        }
    }
}

/* Answers one request: [u64 request id][u32 n][per item: u64 id, u32 len]
 * then the bytes, tagged with the requester's slot; len 0 when this rank
 * does not hold the item (or holds no cache at all). */
static void cdl__peer_serve(coordl *L, int source, int count) {
    if (count < 1 || !cdl__reserve(L, (void **)&L->peers.rx, &L->peers.rxcap,
                                   (size_t)count * (sizeof(uint64_t) + sizeof(uint32_t))))
        return; /* left queued: the requester falls back after peer_timeout_ms */
    uint64_t *ids = (uint64_t *)(void *)L->peers.rx;
    MPI_Recv(ids, count, MPI_UINT64_T, source, CDL_TAG_REQ, L->peers.comm, MPI_STATUS_IGNORE);
    cdl__test_hook(L, "peer_serve");
    const uint32_t n = (uint32_t)(count - 1);
    const uint32_t slot = (uint32_t)(ids[0] >> 48);
    if (slot >= 1024) return; /* not a request coordl sent */
    size_t bytes = 12 + (size_t)n * 12;
    /* sized by each entry's room, which a JPEG rewrite (jpeg.c) never
     * outgrows; each item then copied under the server's one reader
     * record. The rooms live in the request buffer behind the ids. */
    uint32_t *rooms = (uint32_t *)(void *)(L->peers.rx + (size_t)count * sizeof(uint64_t));
    for (uint32_t i = 0; i < n; i++) {
        rooms[i] = L->cache.entries && ids[1 + i] < L->index.num_items ? cdl__cache_room(L, ids[1 + i]) : 0;
        bytes += rooms[i];
    }
    /* every request gets exactly one reply (closing counts on it): short
     * of memory for the items, a reply holding none of them */
    cdl__lock(L); /* the send buffers are shared with the requests, under mu */
    int si = cdl__peer_send_get(L, bytes);
    uint32_t nreply = n;
    if (si < 0) si = cdl__peer_send_get(L, bytes = 12), nreply = 0;
    cdl__unlock(L);
    cdl__u8 *out = si < 0 ? NULL : L->peers.sends[si].buf; /* FILLING: ours alone until sent */
    size_t at = 12 + (size_t)nreply * 12;
    uint64_t served = 0;
    if (!out) return; /* not even that: the requester gives up after peer_timeout_ms */
    memcpy(out, &ids[0], 8);
    memcpy(out + 8, &nreply, 4);
    _Atomic uint32_t *reader = cdl__cache_reader(L, CDL_READER_PEERS);
    for (uint32_t i = 0; i < nreply; i++) {
        uint32_t len = 0;
        const cdl__u8 *p = rooms[i] ? cdl__cache_acquire_minio(L, reader, ids[1 + i], &len, NULL, NULL) : NULL;
        if (!p || len > rooms[i]) len = 0; /* admitted since the sizing: not in this reply */
        memcpy(out + 12 + (size_t)i * 12, &ids[1 + i], 8);
        memcpy(out + 12 + (size_t)i * 12 + 8, &len, 4);
        if (len) { memcpy(out + at, p, len); at += len; served++; }
        if (p) cdl__cache_release_minio(reader);
    }
    cdl__lock(L);
    if (cdl__peer_isend(L, si, MPI_BYTE, at, source, CDL_TAG_RESP + (int)slot)) L->stats.st.peer_served += served;
    cdl__unlock(L);
}

/* Files the rows of a reply received at rm->buf + at0, if it answers the
 * request the slot is still waiting for. A reply that answers it but does
 * not parse fails its rows (they come from storage at once). Under mu. */
static void cdl__peer_file_reply(coordl *L, uint32_t s, int source, size_t at0, size_t count) {
    cdl__remote *rm = &L->peers.remote[s];
    cdl__slot *sl = &L->ring.slots[s];
    cdl__remote_ask *a = &rm->ask[source];
    uint64_t req = 0;
    uint32_t n = 0;
    const cdl__u8 *in = rm->buf + at0;
    if (count >= 12) {
        memcpy(&req, in, 8);
        memcpy(&n, in + 8, 4);
    }
    if (!rm->requested || !a->id || a->id != req || sl->gen != rm->gen || sl->state != CDL_SLOT_FILLING) return;
    cdl__remote_row *rows = cdl__peer_rows_of(L, s);
    const uint32_t *asked = cdl__peer_asked_of(L, s);
    int ok = n == a->n && (size_t)n * 12 + 12 <= count;
    size_t at = 12 + (size_t)n * 12;
    for (uint32_t k = 0; k < a->n; k++) {
        cdl__remote_row *row = &rows[asked[a->first + k]];
        uint64_t id = 0;
        uint32_t len = 0;
        if (ok) {
            memcpy(&id, in + 12 + (size_t)k * 12, 8);
            memcpy(&len, in + 12 + (size_t)k * 12 + 8, 4);
            ok = id == row->id && len <= count - at && at0 + at + len <= UINT32_MAX; /* offsets are 32-bit */
        }
        if (ok && len) {
            row->off = (uint32_t)(at0 + at);
            row->len = len;
            row->state = CDL_REMOTE_ARRIVED;
            at += len;
        } else {
            row->state = CDL_REMOTE_FAILED;
        }
    }
    a->id = 0;
    rm->used = at0 + count;
    cdl__broadcast(L, &L->S->ready_cv); /* workers wait there for peers */
}

/* Receives one reply straight into its slot's buffer (only this thread
 * grows that buffer or writes past `used`, and workers read only rows
 * already filed), then files it. */
static void cdl__peer_take_reply(coordl *L, int source, int tag, int count) {
    const uint32_t s = (uint32_t)(tag - CDL_TAG_RESP);
    cdl__u8 *dst = NULL;
    size_t at0 = 0;
    cdl__lock(L);
    if (s < L->ring.nslots && count >= 0) {
        cdl__remote *rm = &L->peers.remote[s];
        if (cdl__reserve(L, (void **)&rm->buf, &rm->cap, rm->used + (size_t)count + 1)) {
            at0 = rm->used;
            dst = rm->buf + at0;
        }
    }
    cdl__unlock(L);
    if (!dst) { /* consume it anyway, into the request buffer (else retried) */
        if (count < 0 || !cdl__reserve(L, (void **)&L->peers.rx, &L->peers.rxcap, (size_t)count + 1)) return;
        MPI_Recv(L->peers.rx, count, MPI_BYTE, source, tag, L->peers.comm, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(dst, count, MPI_BYTE, source, tag, L->peers.comm, MPI_STATUS_IGNORE);
    }
    cdl__lock(L);
    if (dst) cdl__peer_file_reply(L, s, source, at0, (size_t)count);
    if (L->peers.outstanding) L->peers.outstanding--;
    cdl__unlock(L);
}

/* The admission epoch has been prepared: the trainer has asked for a
 * batch (so a resume's coordl_seek, which comes before it, has set the
 * epoch), the claims have moved past it and no slot of it or before is
 * still being filled. Without the first condition a rank whose workers
 * prepared its share of epoch 0 before its trainer's seek would enter
 * that share, its peers the share of the epoch resumed at, and items in
 * neither share would come from storage in every epoch. Under mu. */
static int cdl__peer_share_prepared(coordl *L) {
    const uint64_t E = atomic_load(&L->peers.admit_epoch);
    const cdl__stream *S = L->S;
    if (E == CDL_ADMIT_CLOSED) return 1;
    if (!L->peers.consumer_started) return 0;
    if (S->claim_epoch < E || (S->claim_epoch == E && S->claim_pos < cdl__epoch_end(L, E))) return 0;
    for (uint32_t s = 0; s < L->ring.nslots; s++)
        if (L->ring.slots[s].state == CDL_SLOT_FILLING && L->ring.slots[s].epoch <= E) return 0;
    return 1;
}

/* The map exchange, run exactly once by every rank's peer thread. Each
 * rank enters its rank for the items it holds and INT32_MAX for the rest;
 * one MPI_Allreduce(MIN) in place leaves the lowest rank holding each
 * item. It needs no memory beyond the map allocated at open, so it cannot
 * fail for want of it; if MPI fails, the map is empty (every row from
 * storage), never a guess. */
static void cdl__peer_exchange_map(coordl *L) {
    int32_t *owner = L->peers.owner;
    cdl__lock(L);
    atomic_store(&L->peers.admit_epoch, CDL_ADMIT_CLOSED); /* what is cached now is final */
    cdl__unlock(L);
    for (uint64_t id = 0; id < L->index.num_items; id++)
        owner[id] = L->cache.entries && cdl__cache_holds(L, id) ? L->cfg.rank : INT32_MAX;
    int ok = 1;
    const uint64_t chunk = 1u << 30; /* counts are ints; every rank has the same num_items */
    for (uint64_t at = 0; at < L->index.num_items; at += chunk) {
        const uint64_t n = L->index.num_items - at < chunk ? L->index.num_items - at : chunk;
        ok &= MPI_Allreduce(MPI_IN_PLACE, owner + at, (int)n, MPI_INT32_T, MPI_MIN, L->peers.comm) == MPI_SUCCESS;
    }
    for (uint64_t id = 0; id < L->index.num_items; id++)
        if (!ok || owner[id] == INT32_MAX) owner[id] = -1;
    if (!ok) cdl__log(L, COORDL_LOG_WARN, "mpi: the cache map exchange failed; every miss reads storage");
    cdl__lock(L);
    __atomic_store_n(&L->peers.map_ready, 1, __ATOMIC_RELEASE); /* the read-ahead reads it without mu */
    cdl__broadcast(L, &L->S->work_cv); /* claims past the admission epoch */
    cdl__unlock(L);
}

/* The peer thread: serves requests, files replies, runs the exchange, and
 * closes in three steps, so that no message is left half-way:
 * (1) close stopped this rank's workers: it sends no new request; it
 *     waits for the replies to the requests it sent, serving meanwhile;
 * (2) it enters the barrier and goes on serving until every rank is in;
 *     then no rank has a request unanswered, so no message is left to
 *     send or receive;
 * (3) it waits for its own sends to complete and leaves.
 * A peer that never answers is waited for peer_timeout_ms in each of (1)
 * and (3); then the rank leaves anyway (its buffers in flight left to
 * MPI) rather than hang. */
static void *cdl__peer_main(void *arg) {
    coordl *L = arg;
    int exchanged = 0, barrier_started = 0, barrier_done = 0, idle_us = 100;
    uint64_t closing_ns = 0;
    MPI_Request barrier = MPI_REQUEST_NULL;
    pthread_setname_np(pthread_self(), "coordl-peer");
    for (;;) {
        int flag = 0, handled = 0;
        MPI_Status st;
        /* serve and take replies */
        for (int k = 0; k < 64; k++) {
            if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, L->peers.comm, &flag, &st) != MPI_SUCCESS || !flag) break;
            handled++;
            int count = 0;
            if (st.MPI_TAG == CDL_TAG_REQ) {
                MPI_Get_count(&st, MPI_UINT64_T, &count);
                cdl__peer_serve(L, st.MPI_SOURCE, count);
            } else if (st.MPI_TAG >= CDL_TAG_RESP && st.MPI_TAG < CDL_TAG_RESP + 1024) {
                MPI_Get_count(&st, MPI_BYTE, &count);
                cdl__peer_take_reply(L, st.MPI_SOURCE, st.MPI_TAG, count);
            } else {
                break;
            }
        }
        cdl__lock(L);
        const size_t inflight = cdl__peer_sends_retire(L);
        const uint64_t outstanding = L->peers.outstanding;
        const int closing = L->peers.closing;
        const int need_map = !exchanged && (closing || cdl__peer_share_prepared(L));
        cdl__unlock(L);
        /* every rank exchanges exactly once, before the barrier, however
         * far it got: a rank closing early contributes what it holds */
        if (need_map) {
            cdl__peer_exchange_map(L);
            exchanged = 1;
        }
        if (closing) {
            const uint64_t now = cdl__now_ns(), bound = (uint64_t)L->cfg.peer_timeout_ms * 1000000ull;
            if (!closing_ns) closing_ns = now;
            if (!barrier_started && (outstanding == 0 || now - closing_ns > bound)) {
                if (MPI_Ibarrier(L->peers.comm, &barrier) != MPI_SUCCESS) break;
                barrier_started = 1;
                closing_ns = now; /* step (3)'s bound counts from here */
            }
            if (barrier_started && !barrier_done && MPI_Test(&barrier, &barrier_done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                break;
            if (barrier_done && ((inflight == 0 && outstanding == 0) || now - closing_ns > 2 * bound)) break;
        }
        /* poll fast while traffic flows, back off to 2 ms when idle (an
         * idle 200 us poll cost 4-10% of a core per rank) */
        idle_us = handled || need_map || closing ? 100 : (idle_us < 2000 ? idle_us * 2 : 2000);
        usleep((useconds_t)idle_us);
    }
    return NULL;
}

/* Worker side: the row's bytes from a peer, if this row was asked of one,
 * waiting at most peer_timeout_ms after the request, and not past close.
 * 1: got them; 0: read storage. */
CDL_PRIVATE int cdl__peer_fetch(cdl__worker *W, uint64_t id, cdl__bytes *out) {
    coordl *L = W->L;
    if (!L->peers.comm_set || !L->peers.remote) return 0;
    const uint32_t s = W->claim->slot, r = W->claim->row;
    cdl__slot *sl = &L->ring.slots[s];
    cdl__remote *rm = &L->peers.remote[s];
    int got = 0, asked = 0;
    cdl__lock(L);
    /* the row array is re-read after each wait: only coordl_set moves it,
     * and never while a row is in flight */
#define CDL_ROW (cdl__peer_rows_of(L, s)[r])
#define CDL_SAME_BATCH (rm->requested && rm->gen == sl->gen)
    if (CDL_SAME_BATCH && CDL_ROW.state != CDL_REMOTE_NONE && CDL_ROW.id == id) {
        asked = 1;
        const uint64_t deadline = rm->request_ns + (uint64_t)L->cfg.peer_timeout_ms * 1000000ull;
        while (CDL_SAME_BATCH && CDL_ROW.state == CDL_REMOTE_WAIT && !L->pool.stop && cdl__now_ns() < deadline)
            cdl__wait_ms(L, &L->S->ready_cv, 5);
        if (CDL_SAME_BATCH && CDL_ROW.state == CDL_REMOTE_ARRIVED) {
            const size_t len = CDL_ROW.len;
            /* copy out: the slot's reply buffer may grow while we decode */
            if (cdl__reserve(L, (void **)&W->readbuf, &W->readcap, len + 16)) {
                memcpy(W->readbuf, rm->buf + CDL_ROW.off, len);
                out->p = W->readbuf;
                out->len = len;
                got = 1;
            }
        }
    }
#undef CDL_SAME_BATCH
#undef CDL_ROW
    if (got) {
        W->row.peer_hits++;
        W->row.peer_bytes += out->len;
    } else if (asked) {
        W->row.peer_fallbacks++;
    }
    cdl__unlock(L);
    return got;
}

CDL_PRIVATE coordl_status cdl__peer_open(coordl *L) {
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
        return cdl__open_fail(COORDL_ERR_UNSUPPORTED, "mpi_comm: coordl serves peers from its own thread and needs "
                              "MPI_THREAD_MULTIPLE; initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)");
    if (MPI_Comm_dup(*(const MPI_Comm *)L->cfg.mpi_comm, &L->peers.comm) != MPI_SUCCESS)
        return cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: MPI_Comm_dup failed");
    L->peers.comm_set = 1;
    /* errors come back as codes on this communicator (a failed send means
     * storage reads), never as an abort of the trainer's job */
    MPI_Comm_set_errhandler(L->peers.comm, MPI_ERRORS_RETURN);
    int rank = 0, world = 1;
    MPI_Comm_rank(L->peers.comm, &rank);
    MPI_Comm_size(L->peers.comm, &world);
    L->cfg.rank = rank;
    L->cfg.world = world;
    /* ranks sharing this node, for the default placement */
    MPI_Comm node;
    if (MPI_Comm_split_type(L->peers.comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &L->peers.node_rank);
        MPI_Comm_size(node, &L->peers.node_ranks);
        MPI_Comm_free(&node);
    }
    return COORDL_OK;
}

/* Collective, at open: rank 0 indexes the source; a tar-shard index (an
 * image: indexfile.c) is broadcast and every other rank adopts it,
 * touching no storage; any other source is indexed by each rank (only
 * tar shards have an image). A failure on rank 0, or on any rank while
 * adopting, fails every rank's open. */
#define CDL_PEER_BCAST_CHUNK ((uint64_t)1 << 30)
static coordl_status cdl__peer_index_per_node(coordl *L, size_t n);
CDL_PRIVATE coordl_status cdl__peer_index(coordl *L) {
    const int root = L->cfg.rank == 0;
    /* box labels are read by every rank from its own scan (the index image
     * holds no .txt members; the ranks compare the labels' hash at open) */
    if (L->cfg.labels == COORDL_LABELS_BOXES) return cdl__index_source(L);
    uint64_t head[3] = {0, 0, 0}; /* status, an image follows, its bytes */
    char msg[CDL_ERRMSG_MAX];
    coordl_status rc = COORDL_OK;
    memset(msg, 0, sizeof msg);
    if (root) {
        rc = cdl__index_source(L);
        head[0] = (uint64_t)(int64_t)rc;
        head[1] = rc == COORDL_OK && L->index.image;
        head[2] = head[1] ? L->index.image_len : 0;
        snprintf(msg, sizeof msg, "%s", cdl__open_errmsg);
    }
    if (MPI_Bcast(head, 3, MPI_UINT64_T, 0, L->peers.comm) != MPI_SUCCESS)
        return cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: cannot receive the index from rank 0 (MPI_Bcast failed)");
    if ((coordl_status)(int64_t)head[0] != COORDL_OK) {
        MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, 0, L->peers.comm);
        msg[sizeof msg - 1] = '\0';
        if (root) return rc;
        return cdl__open_fail((coordl_status)(int64_t)head[0], "mpi_comm: rank 0 could not index the source: %s", msg);
    }
    if (!head[1]) return root ? COORDL_OK : cdl__index_source(L);
    return cdl__peer_index_per_node(L, (size_t)head[2]);
}

/* Sends the n-byte image at p from rank 0 of comm to its other ranks. */
static int cdl__peer_bcast_bytes(cdl__u8 *p, size_t n, MPI_Comm comm) {
    for (uint64_t at = 0; at < n; at += CDL_PEER_BCAST_CHUNK) {
        const uint64_t k = n - at < CDL_PEER_BCAST_CHUNK ? n - at : CDL_PEER_BCAST_CHUNK;
        if (MPI_Bcast(p + at, (int)k, MPI_BYTE, 0, comm) != MPI_SUCCESS) return 0;
    }
    return 1;
}

/* A node's copy of the image: written by its first rank to a file in
 * /dev/shm that every rank of the node maps, then unlinked once all have
 * (the mappings stay; nothing is left behind, whatever happens later).
 * 1 and the mapping in *m on success; 0 (errno-style why) when the file
 * cannot be made: the node then falls back to a copy per rank. */
static int cdl__peer_node_file(const coordl *L, const cdl__u8 *p, size_t n, char *name, size_t cap, void **m) {
    *m = NULL;
    snprintf(name, cap, "/dev/shm/coordl-mpi-%ld-%lx.index", (long)getpid(), (unsigned long)(uintptr_t)L);
    const int fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return 0;
    size_t at = 0;
    while (at < n) {
        const ssize_t w = write(fd, p + at, n - at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        at += (size_t)w;
    }
    void *map = at == n ? mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (map == MAP_FAILED) { /* /dev/shm full: ENOSPC */
        unlink(name);
        return 0;
    }
    *m = map;
    return 1;
}

/* The image reaches each node once (rank 0 to the first rank of every
 * node, over MPI), and the ranks of a node share one copy of it: the
 * node's first rank writes it to /dev/shm and every rank of the node maps
 * that file and reads its items in place (MPI-3's shared-memory
 * communicator says which ranks share a node). Where the file cannot be
 * written (a full /dev/shm), the node's first rank sends each rank its own
 * copy, as before. Collective over the trainer's communicator. */
static coordl_status cdl__peer_index_per_node(coordl *L, size_t n) {
    const int root = L->cfg.rank == 0;
    MPI_Comm node = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
    int node_rank = 0;
    if (MPI_Comm_split_type(L->peers.comm, MPI_COMM_TYPE_SHARED, L->cfg.rank, MPI_INFO_NULL, &node) != MPI_SUCCESS ||
        MPI_Comm_rank(node, &node_rank) != MPI_SUCCESS ||
        MPI_Comm_split(L->peers.comm, node_rank == 0 ? 0 : MPI_UNDEFINED, L->cfg.rank, &leaders) != MPI_SUCCESS) {
        if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
        return cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: cannot group the ranks by node (MPI_Comm_split_type failed)");
    }
    const int leader = node_rank == 0; /* rank 0 leads its node: the ranks are ordered by rank */
    coordl_status rc = COORDL_OK;
    /* 1. rank 0 to every node's first rank */
    cdl__u8 *p = root ? (cdl__u8 *)L->index.image : leader ? cdl__malloc(L, n ? n : 1) : NULL;
    int ok = !leader || p != NULL, all = 0;
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, L->peers.comm) != MPI_SUCCESS || !all) {
        rc = cdl__open_fail(ok ? COORDL_ERR_PEER : COORDL_ERR_NOMEM, "mpi_comm: %s (%llu bytes)",
                            ok ? "a rank has no memory for the index" : "no memory for the index",
                            (unsigned long long)n);
        if (leader && !root) cdl__free(L, p);
        goto out;
    }
    if (leader) ok = cdl__peer_bcast_bytes(p, n, leaders);
    /* 2. the node's copy, named to the node's ranks ("" when not made) */
    char name[128] = "";
    void *m = NULL;
    if (leader && ok && !cdl__peer_node_file(L, p, n, name, sizeof name, &m)) {
        cdl__log(L, COORDL_LOG_WARN, "mpi: cannot write the index to /dev/shm (%s); each rank of this node gets "
                 "its own copy", strerror(errno));
        name[0] = '\0';
    }
    /* the node follows its first rank: whether it has the image, and the
     * file's name */
    int leader_ok = ok;
    if (MPI_Bcast(&leader_ok, 1, MPI_INT, 0, node) != MPI_SUCCESS ||
        MPI_Bcast(name, (int)sizeof name, MPI_CHAR, 0, node) != MPI_SUCCESS)
        leader_ok = 0;
    ok = ok && leader_ok;
    name[sizeof name - 1] = '\0';
    if (!leader && ok && name[0]) { /* 3a. map the node's copy */
        const int fd = open(name, O_RDONLY | O_CLOEXEC);
        struct stat sb;
        if (fd >= 0 && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size == n) m = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
        if (fd >= 0) close(fd);
        if (m == MAP_FAILED) m = NULL;
        ok = m != NULL;
        if (!ok) rc = cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: cannot map the node's index %s: %s", name, strerror(errno));
    } else if (ok && !name[0]) { /* 3b. the node's first rank sends each its copy */
        if (!leader) p = cdl__malloc(L, n ? n : 1);
        int mine = leader || p != NULL, node_all = 0;
        ok = MPI_Allreduce(&mine, &node_all, 1, MPI_INT, MPI_MIN, node) == MPI_SUCCESS && node_all &&
             cdl__peer_bcast_bytes(p, n, node);
        if (!mine) rc = cdl__open_fail(COORDL_ERR_NOMEM, "mpi_comm: no memory for the index (%llu bytes)",
                                       (unsigned long long)n);
    }
    /* 4. adopt: the mapping (one copy per node), else the rank's own copy */
    if (ok && m) {
        rc = cdl__index_from_shared(L, m, n); /* rank 0: replaces its own image */
        if (rc != COORDL_OK) munmap(m, n);
        if (leader && !root) cdl__free(L, p);
    } else if (ok && !root) {
        rc = cdl__index_from_image(L, p, n);
        if (rc != COORDL_OK) cdl__free(L, p);
    } else if (!root) {
        cdl__free(L, p); /* NULL, or this rank's copy */
        if (m) munmap(m, n);
        if (rc == COORDL_OK) rc = cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: the index broadcast from rank 0 failed");
    }
    ok = rc == COORDL_OK;
    /* every rank of the node has mapped it (or failed): the name goes */
    MPI_Barrier(node);
    if (leader && name[0]) unlink(name);
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, L->peers.comm) != MPI_SUCCESS || !all)
        rc = rc != COORDL_OK ? rc : cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: another rank could not adopt the "
                                                   "index rank 0 sent (see its log)");
out:
    if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
    MPI_Comm_free(&node);
    return rc;
}

/* Collective: every rank checks that all index the same dataset (the map
 * is by item id), then allocates the map and the per-slot bookkeeping and
 * starts the peer thread. */
CDL_PRIVATE coordl_status cdl__peer_start(coordl *L) {
    /* box labels are read by each rank at open: their hash too */
    uint64_t mine[3] = {L->index.num_items, L->index.dataset_bytes, L->index.boxes.hash}, lo[3], hi[3];
    if (MPI_Allreduce(mine, lo, 3, MPI_UINT64_T, MPI_MIN, L->peers.comm) != MPI_SUCCESS ||
        MPI_Allreduce(mine, hi, 3, MPI_UINT64_T, MPI_MAX, L->peers.comm) != MPI_SUCCESS)
        return cdl__open_fail(COORDL_ERR_PEER, "mpi_comm: cannot compare the ranks' datasets (MPI_Allreduce failed)");
    if (lo[2] != hi[2])
        return cdl__open_fail(COORDL_ERR_PEER, "source: the ranks read different box labels (labels = "
                              "COORDL_LABELS_BOXES); every rank must see the same label files");
    if (lo[0] != hi[0] || lo[1] != hi[1])
        return cdl__open_fail(COORDL_ERR_PEER, "source: the ranks index different datasets (%llu-%llu items, "
                              "%llu-%llu bytes); every rank must see the same files",
                              (unsigned long long)lo[0], (unsigned long long)hi[0], (unsigned long long)lo[1],
                              (unsigned long long)hi[1]);
    if (L->ring.nslots > 1024)
        return cdl__open_fail(COORDL_ERR_INVALID, "prefetch_batches: at most 1024 with mpi_comm");
    L->peers.owner = cdl__malloc(L, (size_t)L->index.num_items * sizeof *L->peers.owner);
    if (!L->peers.owner || !L->peers.remote) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the peer map");
    for (uint32_t s = 0; s < L->ring.nslots; s++) {
        cdl__remote *rm = &L->peers.remote[s]; /* allocated (zeroed) with the ring */
        rm->ask = cdl__calloc(L, (size_t)L->cfg.world, sizeof *rm->ask);
        if (!rm->ask) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the peer map");
    }
    if (pthread_create(&L->peers.thread, NULL, cdl__peer_main, L) != 0)
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot start the peer thread");
    L->peers.thread_started = 1;
    return COORDL_OK;
}

CDL_PRIVATE void cdl__peer_close(coordl *L) {
    if (L->peers.thread_started) {
        cdl__lock(L);
        L->peers.closing = 1;
        cdl__unlock(L);
        pthread_join(L->peers.thread, NULL);
        L->peers.thread_started = 0;
    }
    for (size_t i = 0; i < L->peers.nsends; i++) {
        if (L->peers.sends[i].state == CDL_SEND_INFLIGHT) {
            /* only after an MPI error ended the thread: MPI may still read
             * the buffer, so it is left to it rather than freed */
            MPI_Request_free(&L->peers.sends[i].req);
            cdl__log(L, COORDL_LOG_WARN, "mpi: a send was still in flight at close; its buffer is not freed");
            continue;
        }
        cdl__free(L, L->peers.sends[i].buf);
    }
    cdl__free(L, L->peers.sends);
    cdl__free(L, L->peers.rx);
    if (L->peers.remote) /* the arrays themselves go with the ring (cdl__ring_free) */
        for (uint32_t s = 0; s < L->ring.nslots; s++) {
            cdl__free(L, L->peers.remote[s].buf);
            cdl__free(L, L->peers.remote[s].ask);
            L->peers.remote[s].buf = NULL;
            L->peers.remote[s].ask = NULL;
            L->peers.remote[s].requested = 0;
        }
    cdl__free(L, L->peers.owner);
    L->peers.owner = NULL;
    if (L->peers.comm_set) MPI_Comm_free(&L->peers.comm);
    L->peers.comm_set = 0;
}
#endif /* COORDL_MPI */

/* ---- src/readahead.c --------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * readahead.c - read-ahead in the known order.
 *
 * Owns:  L->pool.ra: the I/O threads, their arena and the window of entries
 *        they read ahead of the workers
 * Lock:  its own mutex (R->mu); lock order: the stream's lock, then this
 *        one; the I/O threads never take the stream's lock
 * Calls: status, placement, arena, remote, io, uring, index, source, sampler,
 *        cache, peers (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */

/* ---- read-ahead in the known order ----------------------------------------
 * The permutation of every epoch is known, so the items the workers will
 * claim next are known: a few I/O threads keep up to readahead_items of
 * them in flight ahead of the claims, in claim order, reading through the
 * reader into one arena (a byte ring bounded by readahead_bytes, allocated
 * at open: nothing per item). A worker that claims a row takes its entry:
 * the bytes are there (decoded in place), or in flight (it waits for that
 * read only), or were not read ahead (a cache hit, an item a peer serves,
 * one too large for the arena, a position the read-ahead had not reached):
 * then it reads as before. Entries and arena space are handed out in
 * position order and freed in that order once their rows are prepared.
 * A seek or coordl_set restarts it at the new position (a new generation:
 * reads still in flight finish into their own space and are dropped); a
 * coordl_set of the output size alone keeps what it has read (the items at
 * each position are the same).
 * Private loaders only: in a coordinated group the rows are claimed by
 * every member's workers, and each member reading ahead would read every
 * item k times. Lock order: the stream's lock, then this one; the I/O
 * threads never take the stream's lock. */

static int cdl__pos_before(uint64_t e1, uint64_t p1, uint64_t e2, uint64_t p2) {
    return e1 < e2 || (e1 == e2 && p1 < p2);
}

/* cdl__epoch_end on the snapshot taken at the last restart. */
static uint64_t cdl__ra_epoch_end(const cdl__readahead *R, uint64_t epoch) {
    uint64_t share = R->share;
    if (share == UINT64_MAX) { /* a lazy index: its end, once every shard is counted */
        const uint64_t n = cdl__sampler_num_items(R->L);
        if (n) share = n / (uint64_t)R->L->cfg.world;
    }
    return cdl__epoch_end_at(share, R->batch_size, R->drop_last, R->cut_epoch, R->cut_pos, epoch);
}

/* Frees the entries at the tail that are done with, and their bytes. */
static void cdl__ra_trim(cdl__readahead *R) {
    int freed = 0;
    while (R->tail < R->head) {
        cdl__ra_entry *x = &R->e[R->tail % R->depth];
        const int done = x->state == CDL_RA_TAKEN || (x->stale && x->state != CDL_RA_READING);
        if (!done) break;
        R->atail = x->end;
        x->state = CDL_RA_FREE;
        x->stale = 0;
        R->tail++;
        freed++;
    }
    if (R->tail == R->head) R->atail = R->ahead; /* nothing in use */
    /* The I/O threads waiting for room are woken once half the window is
     * free, entries and bytes, not per freed entry: they then refill half
     * the window in one go, and the worker or trainer thread that frees an
     * entry makes no system call and causes no context switch for the
     * other entries (issue 23: a wake per row cost a token batch a context
     * switch per row). Nothing waits on it meanwhile: a position not yet
     * read ahead is read by whoever claims it. */
    if (freed && R->room_waiters && R->head - R->tail <= R->depth / 2 && R->ahead - R->atail <= R->bytes / 2)
        pthread_cond_broadcast(&R->room_cv);
}

/* Whether item id will not come from storage: in the cache, or (MPI) on a
 * peer that serves it (once the map is known, rows claimed from then on
 * ask the peers, whatever the epoch). */
static int cdl__ra_not_from_storage(const coordl *L, uint64_t id) {
    /* an entry being rewritten (jpeg.c) is held too, its rewrite long
     * done by the time its row is claimed */
    if (cdl__cache_minio(L) && cdl__cache_holds(L, id)) return 1;
    if (L->cache.lru) {
        pthread_mutex_lock(&L->cache.lru->mu);
        const int held = L->cache.lru->data[id] != NULL;
        pthread_mutex_unlock(&L->cache.lru->mu);
        if (held) return 1;
    }
#ifdef COORDL_MPI
    if (L->peers.comm_set && __atomic_load_n(&L->peers.map_ready, __ATOMIC_ACQUIRE)) {
        const int owner = L->peers.owner[id];
        if (owner >= 0 && owner != L->cfg.rank) return 1;
    }
#endif
    return 0;
}

static void *cdl__ra_main(void *arg);

/* An asynchronous read ended (remote.c's event-loop thread): the entry is
 * done as a synchronous read's would be. */
static void cdl__ra_read_done(void *arg, coordl_status status, uint64_t got, const char *err) {
    cdl__ra_entry *x = arg;
    cdl__readahead *R = x->ra;
    pthread_mutex_lock(&R->mu);
    R->async_reads--;
    R->reads++;
    R->read_ns += cdl__now_ns() - x->t0;
    x->len = got;
    x->storage_bytes = got;
    x->status = status;
    if (status != COORDL_OK) snprintf(x->err, sizeof x->err, "%s: %s", cdl__item_path(R->L, x->id), err);
    x->state = status == COORDL_OK ? CDL_RA_DONE : CDL_RA_FAILED;
    pthread_cond_broadcast(&R->done_cv);
    if (x->stale) cdl__ra_trim(R);
    pthread_mutex_unlock(&R->mu);
}

/* A read through the caller's cfg.io_async ended (coordl_io_done_fn, on
 * the caller's thread): ended as any asynchronous read, under the lock,
 * checks included, so that a close that gave up on it (R->abandoned) is
 * seen before anything of the handle is touched. */
static void cdl__ra_user_done(void *token, int64_t result) {
    cdl__item_aread *a = token;
    cdl__ra_entry *x = a->arg;
    cdl__readahead *R = x->ra;
    pthread_mutex_lock(&R->mu);
    R->user_reads--;
    R->user_last_ns = cdl__now_ns(); /* coordl_close's bound runs from the last start or end */
    if (R->abandoned) { /* the handle is gone; R and the arena were left for this */
        pthread_mutex_unlock(&R->mu);
        return;
    }
    if (R->user_reads == 0 && R->stop) pthread_cond_broadcast(&R->room_cv); /* coordl_close waits */
    uint64_t got;
    char why[CDL_ERRMSG_MAX - 64];
    const coordl_status status = cdl__read_item_result(a, result, &got, why, sizeof why);
    R->async_reads--;
    R->reads++;
    R->read_ns += cdl__now_ns() - x->t0;
    x->len = got;
    x->storage_bytes = got;
    x->status = status;
    if (status != COORDL_OK) snprintf(x->err, sizeof x->err, "%s: %s", cdl__item_path(R->L, x->id), why);
    /* larger than indexed: its worker reads it through cfg.io */
    x->state = a->grew ? CDL_RA_SKIPPED : status == COORDL_OK ? CDL_RA_DONE : CDL_RA_FAILED;
    pthread_cond_broadcast(&R->done_cv);
    if (x->stale) cdl__ra_trim(R);
    pthread_mutex_unlock(&R->mu);
}

/* readahead_items is the number of reads in flight (issue 24): with a
 * synchronous reader that takes one thread per read, so the I/O threads
 * grow, one at a time, while every one of them is inside the reader and
 * the window has room, up to readahead_threads (by default the depth).
 * On a fast store reads rarely overlap and the pool stays small; a store
 * with 10 ms reads grows it to the depth (remote items take no thread:
 * cdl__read_item_async). Small stacks: a thread
 * only calls the reader. Under R->mu; 0 when a thread could not start
 * (the others go on: fewer reads in flight, nothing lost). */
enum { CDL_RA_STACK_BYTES = 256 * 1024 };

static int cdl__ra_grow(cdl__readahead *R) {
    if (R->stop || R->nthreads >= R->max_threads) return 0;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return 0;
    size_t stack = CDL_RA_STACK_BYTES;
    if (stack < (size_t)PTHREAD_STACK_MIN) stack = (size_t)PTHREAD_STACK_MIN;
    (void)pthread_attr_setstacksize(&attr, stack);
    const int e = pthread_create(&R->threads[R->nthreads], &attr, cdl__ra_main, R);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        R->max_threads = R->nthreads; /* the system refuses more: stop trying */
        return 0;
    }
    R->nthreads++;
    return 1;
}

static void *cdl__ra_main(void *arg) {
    cdl__readahead *R = arg;
    coordl *L = R->L;
    cdl__perm perm;
    cdl__kept_file kept; /* this thread's open shard */
    memset(&kept, 0, sizeof kept);
    uint64_t perm_epoch = UINT64_MAX;
    char name[16];
    snprintf(name, sizeof name, "coordl-io");
    pthread_setname_np(pthread_self(), name);
    pthread_mutex_lock(&R->mu);
    while (!R->stop) {
        if (R->paused || R->head - R->tail >= R->depth) {
            R->room_waiters++;
            pthread_cond_wait(&R->room_cv, &R->mu);
            R->room_waiters--;
            continue;
        }
        /* the next position, never one a worker has already claimed */
        if (cdl__pos_before(R->next_epoch, R->next_pos, R->front_epoch, R->front_pos)) {
            R->next_epoch = R->front_epoch;
            R->next_pos = R->front_pos;
        }
        uint64_t epoch = R->next_epoch, pos = R->next_pos;
        if (pos >= cdl__ra_epoch_end(R, epoch)) {
            epoch++;
            pos = 0;
        }
        /* partitioned cache: past the admission epoch a peer may serve the
         * item; wait for the map of who holds what before reading any of it
         * (the claims wait for it there too) */
        if (cdl__peer_map_pending(L, epoch)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 5000000L;
            if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
            pthread_cond_timedwait(&R->room_cv, &R->mu, &ts);
            continue;
        }
        if (epoch != perm_epoch) {
            perm = cdl__perm_for(L, epoch);
            perm_epoch = epoch;
        }
        if (!cdl__sampler_known(L, epoch, pos, 0)) {
            /* a lazy index: the shards of the window ahead are scanned
             * here, without the lock the workers take their entries under */
            pthread_mutex_unlock(&R->mu);
            cdl__sampler_known(L, epoch, pos, 1);
            pthread_mutex_lock(&R->mu);
            continue;
        }
        const uint64_t id = cdl__item_at(L, &perm, pos);
        if (id == CDL_NO_ITEM) continue; /* past a lazy epoch's end, now known */
        /* the cache first: a lazily indexed item's size needs its shard's
         * block, which a cached shard no longer keeps */
        const int cached = cdl__ra_not_from_storage(L, id);
        const uint64_t want = cached ? 0 : cdl__item_bytes(L, id), need = (want + 16 + 63) / 64 * 64;
        const int skip = cached || want == 0 || want > L->cfg.max_item_bytes || need > R->bytes;
        /* arena space, contiguous: a span that would cross the end starts
         * over at the beginning (the rest of the lap is left unused) */
        if (R->tail == R->head) /* empty: start a fresh lap, so any item that fits the arena fits now */
            R->ahead = R->atail = (R->ahead + R->bytes - 1) / R->bytes * R->bytes;
        uint64_t start = R->ahead, end = R->ahead;
        if (!skip) {
            if (start % R->bytes + need > R->bytes) start += R->bytes - start % R->bytes;
            end = start + need;
            if (end - R->atail > R->bytes) { /* full: wait for the workers to free some */
                R->room_waiters++;
                pthread_cond_wait(&R->room_cv, &R->mu);
                R->room_waiters--;
                continue;
            }
        }
        R->next_epoch = epoch;
        R->next_pos = pos + 1;
        cdl__ra_entry *x = &R->e[R->head++ % R->depth];
        x->gen = R->gen;
        x->stale = 0;
        x->epoch = epoch;
        x->pos = pos;
        x->id = id;
        x->start = start;
        x->end = end;
        x->len = x->storage_bytes = 0;
        x->status = COORDL_OK;
        x->err[0] = '\0';
        R->ahead = end;
        if (skip) {
            x->state = CDL_RA_SKIPPED;
            R->skips++;
            continue;
        }
        x->state = CDL_RA_READING;
        x->ra = R;
        x->t0 = cdl__now_ns();
        x->user_read = 0;
        /* a remote item: a transfer on the event loop, not a thread; this
         * thread goes on to the next position (depth 512 = 512 transfers) */
        if (cdl__read_item_async(L, id, R->base + start % R->bytes, (size_t)(end - start), R, cdl__ra_read_done, x)) {
            R->async_reads++;
            continue;
        }
        /* a caller's asynchronous reader: started here, and this thread
         * goes on; outside the lock, since its done may run before its
         * read returns (and takes the lock) */
        if (L->cfg.io_async) {
            x->user_read = 1;
            R->async_reads++;
            R->user_reads++;
            R->user_last_ns = cdl__now_ns();
            pthread_mutex_unlock(&R->mu);
            /* one caller of read at a time, as coordl.h promises, though a
             * declined read's blocking fallback may have grown the pool */
            pthread_mutex_lock(&R->submit_mu);
            const int sent = cdl__read_item_submit(L, &x->aread, id, R->base + start % R->bytes, (size_t)(end - start),
                                                   cdl__ra_user_done, x);
            pthread_mutex_unlock(&R->submit_mu);
            pthread_mutex_lock(&R->mu);
            if (sent) {
                /* at most: some may be done already */
                if (R->user_reads > R->max_user_reads) R->max_user_reads = R->user_reads;
                continue;
            }
            R->async_reads--; /* declined: read through cfg.io below */
            R->user_reads--;
            x->user_read = 0;
        }
        if (++R->reading == R->nthreads && R->head - R->tail < R->depth) (void)cdl__ra_grow(R);
        if ((uint64_t)R->reading > R->max_reading) R->max_reading = (uint64_t)R->reading;
        if (R->uring) R->async_reads++; /* before the ring can end it (cdl__ra_read_done) */
        pthread_mutex_unlock(&R->mu);
        cdl__u8 *dst = R->base + start % R->bytes;
        size_t cap = (size_t)(end - start);
        uint64_t len = 0, sbytes = 0;
        int too_big = 0;
        const uint64_t t0 = cdl__now_ns();
        coordl_status rc = COORDL_OK;
        /* a local file with the built-in reader: what the page cache lacks
         * goes to the ring, and this thread goes on (docs/storage.md) */
        const int how = cdl__read_item_start(L, R->uring, &x->aread, id, dst, cap, &rc, &len, &sbytes, x->err,
                                             sizeof x->err, cdl__ra_read_done, x);
        if (how == 0)
            rc = cdl__read_item(L, &kept, id, &dst, &cap, 0, &too_big, &len, &sbytes, x->err, sizeof x->err);
        const uint64_t t1 = cdl__now_ns();
        pthread_mutex_lock(&R->mu);
        R->reading--;
        if (how == 2) continue; /* the ring's now: cdl__ra_read_done ends it */
        if (R->uring) R->async_reads--;
#ifdef COORDL_DEBUG
        /* the entry stays this read's until the read ends: nobody frees or
         * reuses an entry (or its bytes) while its read is in flight */
        cdl__debug_assert(L, x->state == CDL_RA_READING && x->start == start && x->id == id,
                          "read-ahead: an entry was freed or reused while its read was in flight");
#endif
        R->reads++;
        R->read_ns += t1 - t0;
        x->len = len;
        x->storage_bytes = sbytes;
        x->status = rc;
        /* an item larger now than indexed: its worker reads it */
        x->state = too_big ? CDL_RA_SKIPPED : rc == COORDL_OK ? CDL_RA_DONE : CDL_RA_FAILED;
        pthread_cond_broadcast(&R->done_cv);
        if (x->stale) cdl__ra_trim(R);
    }
    pthread_mutex_unlock(&R->mu);
    cdl__kept_free(L, &kept);
    return NULL;
}

/* Stops issuing new reads until the restart (a seek or set is under way;
 * reads in flight finish). Under the stream's lock. */
CDL_PRIVATE void cdl__ra_pause(coordl *L) {
    cdl__readahead *R = L->pool.ra;
    if (!R) return;
    pthread_mutex_lock(&R->mu);
    R->paused = 1;
    pthread_mutex_unlock(&R->mu);
}

/* Restarts at the stream's claim position, with the stream's geometry:
 * entries not taken are dropped (those still being read when their read
 * ends). With keep (the positions ahead hold the same items as before: an
 * output-size change), and the snapshot the epoch ends come from
 * unchanged, what was read ahead of the claim position stays: a Darknet
 * resize every 10 batches would otherwise read up to readahead_items items
 * again each time. Called under the stream's lock, when no row is in
 * flight. */
CDL_PRIVATE void cdl__ra_restart(coordl *L, int keep) {
    cdl__readahead *R = L->pool.ra;
    if (!R) return;
    pthread_mutex_lock(&R->mu);
    keep = keep && R->batch_size == L->cfg.batch_size && R->drop_last == L->cfg.drop_last &&
           R->share == L->sampler.share && R->cut_epoch == L->S->cut_epoch && R->cut_pos == L->S->cut_pos;
    R->paused = 0;
    if (keep) {
        /* the claims go back to the consumer's position: entries there and
         * beyond are taken as they are claimed again; any before it could
         * never be */
        for (uint64_t i = R->tail; i < R->head; i++) {
            cdl__ra_entry *x = &R->e[i % R->depth];
            if (cdl__pos_before(x->epoch, x->pos, L->S->claim_epoch, L->S->claim_pos)) x->stale = 1;
        }
        cdl__ra_trim(R);
        R->front_epoch = L->S->claim_epoch; /* the next read stays after the kept entries */
        R->front_pos = L->S->claim_pos;
        pthread_cond_broadcast(&R->room_cv);
        pthread_mutex_unlock(&R->mu);
        return;
    }
    R->gen++;
    for (uint64_t i = R->tail; i < R->head; i++) R->e[i % R->depth].stale = 1;
    cdl__ra_trim(R);
    R->next_epoch = R->front_epoch = L->S->claim_epoch;
    R->next_pos = R->front_pos = L->S->claim_pos;
    R->batch_size = L->cfg.batch_size;
    R->drop_last = L->cfg.drop_last;
    R->share = L->sampler.share;
    R->cut_epoch = L->S->cut_epoch;
    R->cut_pos = L->S->cut_pos;
    pthread_cond_broadcast(&R->room_cv);
    pthread_mutex_unlock(&R->mu);
}

/* The entry read ahead for the row at (epoch, pos) holding item id, or
 * NULL; marks every position up to it as claimed. */
CDL_PRIVATE cdl__ra_entry *cdl__ra_take(coordl *L, uint64_t epoch, uint64_t pos, uint64_t id) {
    cdl__readahead *R = L->pool.ra;
    cdl__ra_entry *found = NULL;
    if (!R) return NULL;
    pthread_mutex_lock(&R->mu);
    if (cdl__pos_before(R->front_epoch, R->front_pos, epoch, pos + 1)) {
        R->front_epoch = epoch;
        R->front_pos = pos + 1;
    }
    for (uint64_t i = R->tail; i < R->head && !found; i++) {
        cdl__ra_entry *x = &R->e[i % R->depth];
        if (!x->stale && x->gen == R->gen && x->epoch == epoch && x->pos == pos && x->id == id &&
            x->state != CDL_RA_TAKEN)
            found = x;
    }
    if (found && found->state == CDL_RA_SKIPPED) { /* nothing to wait for */
        found->state = CDL_RA_TAKEN;
        cdl__ra_trim(R);
        found = NULL;
    }
    pthread_mutex_unlock(&R->mu);
    return found;
}

/* Waits for a taken entry's read; its bytes or its error. Returns 1 with
 * *out set, 0 when the worker must read the item itself (the read-ahead
 * skipped it after all), or -1 with the read's status in *rc. */
CDL_PRIVATE int cdl__ra_wait(cdl__worker *W, cdl__ra_entry *x, cdl__bytes *out, coordl_status *rc) {
    cdl__readahead *R = W->L->pool.ra;
    const uint64_t t0 = cdl__now_ns();
    pthread_mutex_lock(&R->mu);
    const int waited = x->state == CDL_RA_READING;
    int state = CDL_RA_READING, closing = 0;
    while ((state = x->state) == CDL_RA_READING) {
        if (!x->user_read) { /* ours (a thread, the ring, the event loop): bounded, and ended at close */
            pthread_cond_wait(&R->done_cv, &R->mu);
            continue;
        }
        if ((closing = R->closing) != 0) break;
        /* a caller's io_async read: its done is the caller's to call, so
         * the wait is bounded (io_timeout_ms from its start); past it the
         * row is read through cfg.io, and the entry, still in flight, is
         * freed when the done comes (cdl__ra_release) */
        const uint64_t bound = (uint64_t)(W->L->cfg.io_timeout_ms ? W->L->cfg.io_timeout_ms : 30000) * 1000000u,
                       now = cdl__now_ns();
        if (now - x->t0 >= bound) {
            if (R->user_timeouts++ == 0) /* the first: a stuck reader is the caller's to know of */
                cdl__log(W->L, COORDL_LOG_WARN, "%s: its read through io_async had no done within io_timeout_ms (%u "
                         "ms); read through io instead (said once per handle)", cdl__item_path(W->L, x->id),
                         W->L->cfg.io_timeout_ms ? W->L->cfg.io_timeout_ms : 30000u);
            break;
        }
        const uint64_t left = x->t0 + bound - now;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t)(left / 1000000000u);
        ts.tv_nsec += (long)(left % 1000000000u);
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&R->done_cv, &R->mu, &ts);
    }
    pthread_mutex_unlock(&R->mu);
    if (waited) W->row.readahead_wait_ns += cdl__now_ns() - t0;
    if (state == CDL_RA_READING) {
        if (!closing) return 0; /* timed out: read it through cfg.io */
        snprintf(W->err, sizeof W->err, "%s: the handle is closing while its read is in flight",
                 cdl__item_path(W->L, x->id));
        *rc = COORDL_ERR_IO;
        return -1;
    }
    if (state == CDL_RA_SKIPPED) return 0;
    W->row.storage_bytes += x->storage_bytes;
    if (state == CDL_RA_FAILED) {
        snprintf(W->err, sizeof W->err, "%s", x->err);
        *rc = x->status;
        return -1;
    }
    W->row.readahead_hits++;
    out->p = R->base + x->start % R->bytes;
    out->len = (size_t)x->len;
    return 1;
}

/* The row is prepared: its entry's bytes may be reused. A read still in
 * flight (the row came from the cache or a peer after all) is left to
 * finish into its own bytes: the entry is freed when it ends. */
CDL_PRIVATE void cdl__ra_release(coordl *L, cdl__ra_entry *x) {
    cdl__readahead *R = L->pool.ra;
    if (!R || !x) return;
    pthread_mutex_lock(&R->mu);
    if (x->state == CDL_RA_READING) x->stale = 1;
    else x->state = CDL_RA_TAKEN;
    cdl__ra_trim(R);
    pthread_mutex_unlock(&R->mu);
}

/* Sizes and starts the read-ahead (after the ring, before the workers). */
CDL_PRIVATE coordl_status cdl__ra_start(coordl *L) {
    const uint32_t depth = L->cfg.readahead_items;
    if (depth == 0 || L->cfg.group) return COORDL_OK;
    cdl__readahead *R = cdl__calloc(L, 1, sizeof *R);
    if (!R) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the read-ahead");
    L->pool.ra = R;
    R->L = L;
    R->depth = depth;
    R->e = cdl__calloc(L, depth, sizeof *R->e);
    if (!R->e) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for %u read-ahead entries; lower readahead_items", depth);
    R->bytes = (size_t)L->cfg.readahead_bytes; /* the ring: exactly the bound */
    R->map_bytes = cdl__round_up(R->bytes, cdl__page_size());
    void *p = mmap(NULL, R->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot map %zu bytes for the read-ahead: %s; lower "
                              "readahead_bytes (or readahead_items; 0 = off)", R->map_bytes, strerror(errno));
    R->base = p;
    /* its first lap touches every page: in 4 KiB pages that was most of a
     * cold epoch's loss at depth 512 (64 MiB, ~0.25 s of an I/O thread) */
    cdl__arena_advise_huge(p, R->map_bytes);
    cdl__placement_bind_memory(L, p, R->map_bytes);
    if (pthread_mutex_init(&R->mu, NULL) != 0 || pthread_mutex_init(&R->submit_mu, NULL) != 0 ||
        pthread_cond_init(&R->room_cv, NULL) != 0 || pthread_cond_init(&R->done_cv, NULL) != 0)
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot initialise the read-ahead's lock");
    R->cut_epoch = UINT64_MAX;
    R->batch_size = L->cfg.batch_size;
    R->drop_last = L->cfg.drop_last;
    R->share = L->sampler.share;
    R->cut_epoch = L->S->cut_epoch;
    R->cut_pos = L->S->cut_pos;
    R->next_epoch = R->front_epoch = L->consumer.cur_epoch;
    R->next_pos = R->front_pos = L->consumer.cur_pos;
    R->max_threads = (int)L->cfg.readahead_threads;
    /* local files through the built-in reader: reads in flight in one
     * io_uring, so one I/O thread (it opens each file and submits); token
     * windows keep their shard open per thread, and a caller's reader is
     * a blocking call: those keep the threads */
    if (L->io == &cdl__posix_io && !L->index.shards) R->uring = cdl__uring_start(L, depth);
    if (R->uring) R->max_threads = 1;
    R->threads = cdl__calloc(L, (size_t)R->max_threads, sizeof *R->threads);
    if (!R->threads) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the read-ahead threads; lower readahead_threads");
    pthread_mutex_lock(&R->mu);
    const int started = cdl__ra_grow(R); /* the first; the rest as reads wait */
    pthread_mutex_unlock(&R->mu);
    if (!started) return cdl__open_fail(COORDL_ERR_NOMEM, "cannot start a read-ahead thread; lower readahead_threads");
    return COORDL_OK;
}

/* The handle is closing: workers waiting for a read stop waiting (the
 * read may be a caller's that never ends: io_async). Before the workers
 * are joined. */
CDL_PRIVATE void cdl__ra_closing(coordl *L) {
    cdl__readahead *R = L->pool.ra;
    if (!R) return;
    pthread_mutex_lock(&R->mu);
    R->closing = 1;
    pthread_cond_broadcast(&R->done_cv);
    pthread_mutex_unlock(&R->mu);
}

/* Whether coordl_close has begun (a row that failed for it is not
 * substituted). */
CDL_PRIVATE int cdl__ra_is_closing(coordl *L) {
    cdl__readahead *R = L->pool.ra;
    if (!R) return 0;
    pthread_mutex_lock(&R->mu);
    const int closing = R->closing;
    pthread_mutex_unlock(&R->mu);
    return closing;
}

/* Waits for the done of every read a caller's coordl_io_async has in
 * flight (their bytes land in the arena): 1 when none is left; 0 when
 * none ended for io_timeout_ms (logged: the caller's reader is stuck). */
static int cdl__ra_user_reads_end(cdl__readahead *R) {
    coordl *L = R->L;
    const uint64_t bound_ns = (uint64_t)(L->cfg.io_timeout_ms ? L->cfg.io_timeout_ms : 30000) * 1000000u;
    pthread_mutex_lock(&R->mu);
    const uint64_t began = cdl__now_ns();
    if (R->user_last_ns < began) R->user_last_ns = began; /* never less than the bound from now */
    while (R->user_reads) {
        const uint64_t now = cdl__now_ns(), since = R->user_last_ns;
        if (now - since >= bound_ns) {
            const uint64_t left = R->user_reads;
            R->abandoned = 1; /* a late done touches nothing but R */
            pthread_mutex_unlock(&R->mu);
            cdl__log(L, COORDL_LOG_ERROR, "coordl_close: %llu read(s) started through io_async had no done within "
                     "io_timeout_ms (%u ms); their buffers (the read-ahead's %zu bytes) stay mapped and are leaked, "
                     "so that a late read writes into memory nobody reuses", (unsigned long long)left,
                     L->cfg.io_timeout_ms ? L->cfg.io_timeout_ms : 30000u, R->map_bytes);
            return 0;
        }
        /* a done restarts the bound (cdl__ra_user_done): a slow reader
         * still ending reads is waited for */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&R->room_cv, &R->mu, &ts);
    }
    pthread_mutex_unlock(&R->mu);
    return 1;
}

/* Stops the I/O threads (after the workers: a worker may wait on a read)
 * and frees everything. */
CDL_PRIVATE void cdl__ra_stop(coordl *L) {
    cdl__readahead *R = L->pool.ra;
    if (!R) return;
    if (R->threads) {
        pthread_mutex_lock(&R->mu);
        R->stop = 1;
        pthread_cond_broadcast(&R->room_cv);
        pthread_mutex_unlock(&R->mu);
        for (int i = 0; i < R->nthreads; i++) pthread_join(R->threads[i], NULL);
        /* transfers still in flight write into the arena: ended first */
        if (!cdl__ra_user_reads_end(R)) {
            /* a caller's reader that never called done: its read may yet
             * write into the arena and call cdl__ra_user_done, so the
             * arena and R stay (a leak, said) rather than be reused */
            L->pool.ra = NULL;
            return;
        }
        cdl__remote_cancel(L, R);
        cdl__uring_stop(L, R->uring);
        R->uring = NULL;
        pthread_mutex_destroy(&R->mu);
        pthread_mutex_destroy(&R->submit_mu);
        pthread_cond_destroy(&R->room_cv);
        pthread_cond_destroy(&R->done_cv);
    }
    cdl__uring_stop(L, R->uring); /* made, but no thread started: nothing in it */
    R->uring = NULL;
    if (R->base) munmap(R->base, R->map_bytes);
    cdl__free(L, R->threads);
    cdl__free(L, R->e);
    cdl__free(L, R);
    L->pool.ra = NULL;
}

/* ---- src/fetch.c ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * fetch.c - where a row's bytes come from.
 *
 * The one place bytes come from: the cache, else a peer, else storage
 * (which admits into the cache): the row's item read ahead by the I/O
 * threads into their arena, or read now into the worker's buffer.
 *
 * Owns:  nothing of its own: a worker's reader record on a cache entry
 *        (W->reader, W->held) between fetch and fetch_done
 * Lock:  none (entries by their atomic state; read-ahead by its mutex)
 * Calls: status, index, source, cache, peers, readahead (lower layers only:
 *        src/modules.txt; tools/check-layers.py checks this line).
 */

/* Bytes of item id into *out. A MinIO hit lends the cache's own bytes:
 * the worker's reader record holds the entry (W->held) until
 * cdl__fetch_done. W->fetch_kind says whether the bytes are a JPEG rewrite
 * (jpeg.c), or may become one. */
CDL_PRIVATE coordl_status cdl__fetch(cdl__worker *W, uint64_t id, cdl__bytes *out) {
    coordl *L = W->L;
    uint64_t t0 = cdl__now_ns();
    coordl_status rc = COORDL_OK;
    int hit = 0;
    W->held = 0;
    W->fetch_kind = -1;
    if (cdl__cache_minio(L) && W->reader) {
        uint32_t len;
        const cdl__u8 *p = cdl__cache_acquire_minio(L, W->reader, id, &len, &W->fetch_kind, &W->fetch_cap);
        if (p) { out->p = p; out->len = len; hit = 1; W->held = id + 1; }
    } else if (L->cache.lru) {
        uint32_t len;
        size_t need = cdl__item_bytes(L, id) + 16;
        if (cdl__reserve(L, (void **)&W->readbuf, &W->readcap, need) &&
            cdl__cache_lookup_lru(L, id, W->readbuf, W->readcap, &len)) {
            out->p = W->readbuf; out->len = len; hit = 1;
        }
    }
    uint64_t t1 = cdl__now_ns();
    if (hit) {
        W->row.cache_hits++;
        W->row.cache_hit_bytes += out->len;
        W->row.read_cache_ns += t1 - t0;
    } else
#ifdef COORDL_MPI
    if (cdl__peer_fetch(W, id, out)) {
        W->row.read_cache_ns += t1 - t0;
        t1 = cdl__now_ns();
    } else
#endif
    {
        /* the row's item read ahead (or in flight), else read now */
        int ahead = 0;
        if (W->ra_entry && W->ra_entry->id == id) ahead = cdl__ra_wait(W, W->ra_entry, out, &rc);
        if (ahead == 0) rc = cdl__read_file(W, id, out);
        /* partitioned: only the rank's share of one epoch is admitted,
         * before the map exchange, so the exchanged map stays exact */
        const int may_admit = !L->peers.comm_set || cdl__peer_admits(L, W->claim->epoch);
        if (rc == COORDL_OK) {
            W->row.cache_misses++;
            W->row.storage_reads++;
            if (cdl__cache_minio(L) && may_admit) W->fetch_kind = cdl__cache_admit_minio(L, id, out->p, out->len, &W->fetch_cap);
            else if (L->cache.lru) cdl__cache_admit_lru(L, id, out->p, out->len);
        }
        uint64_t t2 = cdl__now_ns();
        W->row.read_cache_ns += t1 - t0; /* the lookup that missed */
        W->row.read_storage_ns += t2 - t1;
        t1 = t2;
    }
    if (rc == COORDL_OK) W->row.fetch_bytes += out->len;
    W->row.read_ns += t1 - t0;
    return rc;
}

CDL_PRIVATE void cdl__fetch_done(cdl__worker *W) {
    if (W->held) cdl__cache_release_minio(W->reader);
    W->held = 0;
}

/* ---- src/plan.c -------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * plan.c - a sample's crop geometry.
 *
 * The crop is drawn before decoding, from (seed, epoch, item) and the
 * image size alone, so the decoder can decode only what the crop needs.
 * Geometry is in source pixels; the resampler maps output pixel centres
 * into it (PIL/torchvision convention: pixel x covers [x, x+1)).
 * Darknet's crop keeps Darknet's convention instead (an affine map of
 * pixel indices, sampled point-wise) so its pixels are Darknet's.
 *
 * Owns:  nothing: the crop, flip, scale and colour jitter are drawn from
 *        (seed, epoch, item) before decoding
 * Lock:  none
 * Calls: rand, sampler (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */

/* Darknet's rand_scale (src/utils.c): a factor uniform between 1 and s,
 * inverted with p = 0.5, so in [min(s, 1/s), max(s, 1/s)] for any s > 0. */
static double cdl__rand_scale(cdl__rng *rng, double s) {
    double scale = 1.0 + (s - 1.0) * cdl__rng_uniform(rng);
    return cdl__rng_next(rng) & 1 ? scale : 1.0 / scale;
}

/* 0 and 1 turn a rand_scale setting off; every other value is a range. */
static int cdl__scale_on(float s) { return s != 0.0f && s != 1.0f; }

/* The colour draws, in Darknet's order (random_distort_image). */
static void cdl__plan_colour(const coordl *L, cdl__rng *rng, cdl__geom *g) {
    g->dhue = 0.0f;
    g->dsat = g->dexp = 1.0f;
    if (L->cfg.hue > 0.0f) g->dhue = (float)((cdl__rng_uniform(rng) * 2.0 - 1.0) * L->cfg.hue);
    if (cdl__scale_on(L->cfg.saturation)) g->dsat = (float)cdl__rand_scale(rng, L->cfg.saturation);
    if (cdl__scale_on(L->cfg.exposure)) g->dexp = (float)cdl__rand_scale(rng, L->cfg.exposure);
}

/* A crop side from a double: rounded, and clamped into int range first,
 * since an extreme ratio range (any finite ratio_min/ratio_max is valid)
 * gives sides far beyond it and converting those is undefined; anything
 * out of range is then rejected like any too-large side. */
static int cdl__side(double v) {
    v = nearbyint(v);
    return v >= (double)INT_MAX ? INT_MAX : v <= 0.0 || v != v ? 0 : (int)v;
}

/* torchvision RandomResizedCrop.get_params, then RandomHorizontalFlip. */
static void cdl__plan_train(const coordl *L, cdl__rng *rng, int W, int H, cdl__geom *g) {
    const double area = (double)W * H;
    const double lr0 = log(L->cfg.ratio_min), lr1 = log(L->cfg.ratio_max);
    int cw = 0, ch = 0, cx = 0, cy = 0, found = 0;
    for (int attempt = 0; attempt < 10 && !found; attempt++) {
        double target = area * (L->cfg.scale_min + (L->cfg.scale_max - L->cfg.scale_min) * cdl__rng_uniform(rng));
        double aspect = exp(lr0 + (lr1 - lr0) * cdl__rng_uniform(rng));
        int w = cdl__side(sqrt(target * aspect));
        int h = cdl__side(sqrt(target / aspect));
        if (w > 0 && h > 0 && w <= W && h <= H) {
            cy = (int)cdl__rng_below(rng, (uint64_t)(H - h + 1));
            cx = (int)cdl__rng_below(rng, (uint64_t)(W - w + 1));
            cw = w;
            ch = h;
            found = 1;
        }
    }
    if (!found) { /* center crop at the nearest allowed aspect ratio */
        double in_ratio = (double)W / H;
        if (in_ratio < L->cfg.ratio_min) {
            cw = W;
            ch = cdl__side(W / L->cfg.ratio_min);
        } else if (in_ratio > L->cfg.ratio_max) {
            ch = H;
            cw = cdl__side(H * L->cfg.ratio_max);
        } else {
            cw = W;
            ch = H;
        }
        if (cw < 1) cw = 1;
        if (ch < 1) ch = 1;
        if (cw > W) cw = W;
        if (ch > H) ch = H;
        cy = (H - ch) / 2;
        cx = (W - cw) / 2;
    }
    /* The flip draw comes after the crop draws, as in torchvision. */
    g->flip = L->cfg.flip ? (cdl__rng_uniform(rng) < 0.5) : 0;
    /* Darknet's extras draw after everything torchvision draws, so turning
     * them on leaves the crop and flip of every item unchanged. */
    g->angle = 0.0f;
    g->daspect = 1.0;
    g->darknet = 0;
    if (cdl__scale_on(L->cfg.aspect)) { /* stretch the crop's width, same centre */
        g->daspect = cdl__rand_scale(rng, L->cfg.aspect);
        int nw = (int)nearbyint(cw * g->daspect);
        nw = nw < 1 ? 1 : nw > W ? W : nw;
        int nx = cx + (cw - nw) / 2;
        cx = nx < 0 ? 0 : nx + nw > W ? W - nw : nx;
        cw = nw;
    }
    cdl__plan_colour(L, rng, g);
    if (L->cfg.rotate_deg > 0.0f)
        g->angle = (float)((cdl__rng_uniform(rng) * 2.0 - 1.0) * L->cfg.rotate_deg * 3.14159265358979 / 180.0);
    g->x0 = cx; g->y0 = cy; g->sw = cw; g->sh = ch;
    g->clip_x0 = cx; g->clip_y0 = cy; g->clip_x1 = cx + cw; g->clip_y1 = cy + ch;
}

static void cdl__affine_clip(cdl__geom *g, int W, int H, int x0, int y0, int x1, int y1);

/* Darknet's classifier crop: random_augment_args + rotate_crop_image
 * (src/image.c) as train_classifier drives them (min = min_ratio x size,
 * max = max_ratio x size), then the flip and random_distort_image, the
 * draws in Darknet's order. Darknet's quirks are kept: the shorter side is
 * min(h, (int)(w x aspect)), pixel x sits at coordinate x (the image centre
 * is w / 2), and taps outside the image read black. Darknet's offset range
 * uses the output width for dy as well (its crops are square); here dy
 * uses out_h. No DCT scaling: the window is sampled at full resolution, as
 * Darknet does, so the pixels are Darknet's. */
static void cdl__plan_darknet(const coordl *L, cdl__rng *rng, int W, int H, cdl__geom *g) {
    const int w = (int)g->out_w, h = (int)g->out_h;
    int lo = (int)(L->geom.crop_min_ratio * (float)w), hi = (int)(L->geom.crop_max_ratio * (float)w);
    if (lo < 1) lo = 1;
    if (hi < lo) hi = lo;
    const double a = cdl__scale_on(L->cfg.aspect) ? cdl__rand_scale(rng, L->cfg.aspect) : 1.0;
    const int r = lo + (int)cdl__rng_below(rng, (uint64_t)(hi - lo + 1));
    int shorter = H < W * a ? H : (int)(W * a);
    if (shorter < 1) shorter = 1;
    const double sc = (double)r / shorter;
    const double rad = L->cfg.rotate_deg > 0.0f
        ? (cdl__rng_uniform(rng) * 2.0 - 1.0) * L->cfg.rotate_deg * 3.14159265358979 / 180.0 : 0.0;
    double dx = (W * sc / a - w) / 2.0, dy = (H * sc - h) / 2.0;
    dx = (cdl__rng_uniform(rng) * 2.0 - 1.0) * dx;
    dy = (cdl__rng_uniform(rng) * 2.0 - 1.0) * dy;
    g->flip = L->cfg.flip ? (cdl__rng_uniform(rng) < 0.5) : 0;
    cdl__plan_colour(L, rng, g);
    g->angle = (float)rad;
    g->daspect = a;
    g->darknet = 1;
    /* rx = cos X - sin Y + W/2, ry = sin X + cos Y + H/2 with
     * X = (x - w/2 + dx) a / s, Y = (y - h/2 + dy) / s */
    const double c = cos(rad), sn = sin(rad), X0 = (-w / 2.0 + dx) * a / sc, Y0 = (-h / 2.0 + dy) / sc;
    g->m[0] = c * a / sc; g->m[1] = -sn / sc; g->m[2] = c * X0 - sn * Y0 + W / 2.0;
    g->m[3] = sn * a / sc; g->m[4] = c / sc; g->m[5] = sn * X0 + c * Y0 + H / 2.0;
    cdl__affine_clip(g, W, H, 0, 0, w, h);
}

/* The clip rectangle of an affine geometry whose output pixels [x0, x1) x
 * [y0, y1) sample the image: every tap lies in the box of the four
 * corners' taps (one pixel of slack for rounding); the part inside the
 * image is decoded. */
static void cdl__affine_clip(cdl__geom *g, int W, int H, int x0, int y0, int x1, int y1) {
    double x_min = 1e300, x_max = -1e300, y_min = 1e300, y_max = -1e300;
    for (int k = 0; k < 4; k++) {
        const double x = k & 1 ? x1 - 1 : x0, y = k & 2 ? y1 - 1 : y0;
        const double rx = g->m[0] * x + g->m[1] * y + g->m[2], ry = g->m[3] * x + g->m[4] * y + g->m[5];
        x_min = rx < x_min ? rx : x_min; x_max = rx > x_max ? rx : x_max;
        y_min = ry < y_min ? ry : y_min; y_max = ry > y_max ? ry : y_max;
    }
    const double bx0 = floor(x_min) - 1, bx1 = floor(x_max) + 3, by0 = floor(y_min) - 1, by1 = floor(y_max) + 3;
    g->clip_x0 = bx0 < 0 ? 0 : bx0 > W ? W : (int)bx0;
    g->clip_x1 = bx1 < 0 ? 0 : bx1 > W ? W : (int)bx1;
    g->clip_y0 = by0 < 0 ? 0 : by0 > H ? H : (int)by0;
    g->clip_y1 = by1 < 0 ? 0 : by1 > H ? H : (int)by1;
    if (g->clip_x1 <= g->clip_x0 || g->clip_y1 <= g->clip_y0) { /* nothing inside: all black */
        g->clip_x0 = g->clip_y0 = 0;
        g->clip_x1 = g->clip_y1 = 1;
    }
    g->x0 = g->clip_x0; g->y0 = g->clip_y0;
    g->sw = g->clip_x1 - g->clip_x0; g->sh = g->clip_y1 - g->clip_y0;
}

/* COORDL_PIPE_EVAL: resize the shorter side to S = out * 256 / 224, then
 * center crop. COORDL_PIPE_EXACT: resize to just cover the output (the
 * side that binds gets the output's size), then center crop, so an image
 * of the output size maps pixel for pixel (scale 1, offset 0: the
 * filter's one non-zero tap has weight 1). Expressed as a fixed source
 * rectangle over the whole (unclipped) image. */
static void cdl__plan_eval(int W, int H, int exact, cdl__geom *g) {
    const uint32_t out_w = g->out_w, out_h = g->out_h;
    uint32_t out_max = out_w > out_h ? out_w : out_h;
    double S = floor(out_max * 256.0 / 224.0 + 0.5);
    double rw, rh; /* torchvision Resize(int): long side = int(S * long / short) */
    if (exact) { /* integer products: exact in doubles */
        if ((double)W * out_h >= (double)H * out_w) { rh = out_h; rw = floor((double)W * out_h / H); }
        else { rw = out_w; rh = floor((double)H * out_w / W); }
    } else if (W <= H) { rw = S; rh = floor(S * H / W); } else { rh = S; rw = floor(S * W / H); }
    if (rw < out_w) rw = out_w;
    if (rh < out_h) rh = out_h;
    double top = nearbyint((rh - out_h) / 2.0), left = nearbyint((rw - out_w) / 2.0);
    double sx = W / rw, sy = H / rh;
    g->x0 = left * sx; g->y0 = top * sy;
    g->sw = out_w * sx; g->sh = out_h * sy;
    g->clip_x0 = 0; g->clip_y0 = 0; g->clip_x1 = W; g->clip_y1 = H;
    g->flip = 0;
    g->dhue = 0.0f;
    g->dsat = g->dexp = 1.0f;
    g->angle = 0.0f;
    g->daspect = 1.0;
    g->darknet = 0;
}

/* A canvas geometry: the image scaled to pw x ph output pixels with its
 * corner at output pixel (ox, oy), grey around it. Output pixel X samples
 * source x = (X - ox) W / pw, Darknet's place_image (pixel x at
 * coordinate x). */
static void cdl__place(cdl__geom *g, int W, int H, int ox, int oy, int pw, int ph) {
    const int w = (int)g->out_w, h = (int)g->out_h;
    if (pw < 1) pw = 1;
    if (ph < 1) ph = 1;
    g->darknet = 1;
    g->canvas = 1;
    g->px0 = ox; g->py0 = oy; g->px1 = ox + pw; g->py1 = oy + ph;
    g->m[0] = (double)W / pw; g->m[1] = 0.0; g->m[2] = -(double)ox * W / pw;
    g->m[3] = 0.0; g->m[4] = (double)H / ph; g->m[5] = -(double)oy * H / ph;
    const int x0 = ox > 0 ? ox : 0, y0 = oy > 0 ? oy : 0;
    const int x1 = ox + pw < w ? ox + pw : w, y1 = oy + ph < h ? oy + ph : h;
    if (x1 > x0 && y1 > y0) cdl__affine_clip(g, W, H, x0, y0, x1, y1);
    else cdl__affine_clip(g, W, H, 0, 0, 1, 1); /* placed outside: only grey */
}

/* Darknet's float rand_uniform(lo, hi) (src/utils.c), bounds swapped when
 * reversed, from coordl's counter-based stream. */
static double cdl__uniform_between(cdl__rng *rng, double lo, double hi) {
    if (hi < lo) { const double t = lo; lo = hi; hi = t; }
    return lo + (hi - lo) * cdl__rng_uniform(rng);
}

/* COORDL_CROP_DARKNET_BOXES: load_data_detection (pjreddie/darknet
 * src/data.c), the draws in its order: the jittered aspect, the scale
 * (coordl's place_scale range; Darknet fixes it at 1), the offset, the
 * colour (random_distort_image), the flip. place_image takes the size and
 * offset as ints: those ints place the pixels, and the boxes follow the
 * same ints (Darknet moves its boxes by the unrounded floats, up to a
 * pixel away from its pixels). */
static void cdl__plan_darknet_boxes(const coordl *L, cdl__rng *rng, int W, int H, cdl__geom *g) {
    const double w = g->out_w, h = g->out_h;
    const double dw = L->cfg.jitter * W, dh = L->cfg.jitter * H;
    double new_ar = W / (double)H;
    if (L->cfg.jitter > 0.0f) {
        const double aw = W + cdl__uniform_between(rng, -dw, dw);
        const double ah = H + cdl__uniform_between(rng, -dh, dh);
        new_ar = aw / ah;
    }
    const double smin = L->cfg.place_scale_min > 0.0f ? L->cfg.place_scale_min : 1.0;
    const double smax = L->cfg.place_scale_max > 0.0f ? L->cfg.place_scale_max : 1.0;
    const double scale = smin < smax ? cdl__uniform_between(rng, smin, smax) : smin;
    double nw, nh;
    if (new_ar < 1) { nh = scale * h; nw = nh * new_ar; }
    else { nw = scale * w; nh = nw / new_ar; }
    const double dx = cdl__uniform_between(rng, 0, w - nw), dy = cdl__uniform_between(rng, 0, h - nh);
    cdl__plan_colour(L, rng, g);
    g->flip = L->cfg.flip ? (int)(cdl__rng_next(rng) & 1) : 0;
    g->angle = 0.0f;
    g->daspect = 1.0;
    cdl__place(g, W, H, (int)dx, (int)dy, (int)nw, (int)nh);
}

/* COORDL_PIPE_EVAL with boxes: Darknet's letterbox_image: the image
 * resized keeping its aspect to fit the output (integer sides), centred,
 * grey around it; no flip, no colour. */
static void cdl__plan_letterbox(int W, int H, cdl__geom *g) {
    const int w = (int)g->out_w, h = (int)g->out_h;
    int pw, ph;
    if ((double)w / W < (double)h / H) { pw = w; ph = (int)((double)H * w / W); }
    else { ph = h; pw = (int)((double)W * h / H); }
    g->flip = 0;
    g->dhue = 0.0f;
    g->dsat = g->dexp = 1.0f;
    g->angle = 0.0f;
    g->daspect = 1.0;
    cdl__place(g, W, H, (w - pw) / 2, (h - ph) / 2, pw, ph);
}

/* COORDL_CROP_SSD: SSD's data augmentation sampler (Liu et al. 2016;
 * torchvision's RandomIoUCrop draws the same options), from coordl's
 * counter-based stream: an option out of {the whole image, a minimum IoU
 * of 0.1, 0.3, 0.5, 0.7, 0.9, any crop}; for the others up to 50 trials of
 * a crop of 0.3..1 of each side with aspect w/h in [0.5, 2] at a random
 * place, kept when the centre of some box lies in it and that box's IoU
 * with the crop is at least the minimum; the whole image when no trial
 * passes (or the item has no box). Then colour and flip as the other
 * crops draw them. The crop is resized to the output, as SSD does. */
static double cdl__iou(double ax0, double ay0, double ax1, double ay1, double bx0, double by0, double bx1, double by1) {
    const double iw = (ax1 < bx1 ? ax1 : bx1) - (ax0 > bx0 ? ax0 : bx0);
    const double ih = (ay1 < by1 ? ay1 : by1) - (ay0 > by0 ? ay0 : by0);
    if (iw <= 0 || ih <= 0) return 0.0;
    const double inter = iw * ih;
    return inter / ((ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter);
}

static void cdl__plan_ssd(const coordl *L, cdl__rng *rng, uint64_t id, int W, int H, cdl__geom *g) {
    static const double min_iou[7] = {-1.0, 0.1, 0.3, 0.5, 0.7, 0.9, 0.0}; /* -1: the whole image */
    const cdl__boxes *B = &L->index.boxes;
    /* SSD's zoom-out (ssd_expand): the image at (ox, oy) on a grey canvas
     * of CW x CH; the crop is drawn on the canvas. Its draws come first
     * and only when it is on, so the crops without it stay as they were. */
    int CW = W, CH = H, ox = 0, oy = 0, expanded = 0;
    if (L->cfg.ssd_expand > 1.0f && cdl__rng_uniform(rng) < 0.5) {
        const double r = 1.0 + (L->cfg.ssd_expand - 1.0) * cdl__rng_uniform(rng);
        CW = cdl__side(W * r);
        CH = cdl__side(H * r);
        if (CW < W) CW = W;
        if (CH < H) CH = H;
        ox = (int)(cdl__rng_uniform(rng) * (CW - W + 1));
        oy = (int)(cdl__rng_uniform(rng) * (CH - H + 1));
        expanded = CW > W || CH > H;
    }
    const double option = min_iou[cdl__rng_below(rng, 7)];
    int cx = 0, cy = 0, cw = CW, ch = CH;
    if (option >= 0.0 && B->first && B->first[id] < B->first[id + 1]) {
        for (int trial = 0; trial < 50; trial++) {
            const int w = cdl__side(CW * (0.3 + 0.7 * cdl__rng_uniform(rng)));
            const int h = cdl__side(CH * (0.3 + 0.7 * cdl__rng_uniform(rng)));
            const double tx = cdl__rng_uniform(rng), ty = cdl__rng_uniform(rng);
            if (w < 1 || h < 1 || w > CW || h > CH || (double)w / h < 0.5 || (double)w / h > 2.0) continue;
            const int x = (int)(tx * (CW - w + 1)), y = (int)(ty * (CH - h + 1));
            int ok = 0;
            for (uint64_t k = B->first[id]; k < B->first[id + 1] && !ok; k++) {
                const float *b = B->box[k];
                const double bx = ox + b[0] * W, by = oy + b[1] * H, bw = b[2] * W, bh = b[3] * H;
                if (bx <= x || bx >= x + w || by <= y || by >= y + h) continue; /* centre outside */
                ok = cdl__iou(x, y, x + w, y + h, bx - bw / 2, by - bh / 2, bx + bw / 2, by + bh / 2) >= option;
            }
            if (ok) {
                cx = x; cy = y; cw = w; ch = h;
                break;
            }
        }
    }
    cdl__plan_colour(L, rng, g);
    g->flip = L->cfg.flip ? (cdl__rng_uniform(rng) < 0.5) : 0;
    g->angle = 0.0f;
    g->daspect = 1.0;
    g->centre_rule = 1;
    if (expanded) { /* the crop of the canvas, resized: the image placed on a grey output */
        const double sx = (double)g->out_w / cw, sy = (double)g->out_h / ch;
        cdl__place(g, W, H, (int)floor((ox - cx) * sx), (int)floor((oy - cy) * sy), (int)nearbyint(W * sx),
                   (int)nearbyint(H * sy));
        return;
    }
    g->darknet = 0;
    g->x0 = cx; g->y0 = cy; g->sw = cw; g->sh = ch;
    g->clip_x0 = cx; g->clip_y0 = cy; g->clip_x1 = cx + cw; g->clip_y1 = cy + ch;
}

CDL_PRIVATE void cdl__plan(const coordl *L, uint32_t out_w, uint32_t out_h, uint64_t epoch, uint64_t id, int W, int H,
                           cdl__geom *g) {
    memset(g, 0, sizeof *g);
    g->out_w = out_w;
    g->out_h = out_h;
    if (L->cfg.pipeline == COORDL_PIPE_EVAL && L->cfg.labels == COORDL_LABELS_BOXES) {
        cdl__plan_letterbox(W, H, g);
    } else if (L->cfg.pipeline == COORDL_PIPE_EVAL || L->cfg.pipeline == COORDL_PIPE_EXACT) {
        cdl__plan_eval(W, H, L->cfg.pipeline == COORDL_PIPE_EXACT, g);
    } else {
        /* keyed by the sample (sampler.c: the same in a lazy and a full index) */
        cdl__rng rng = cdl__rng_for(L->cfg.seed, CDL_STREAM_CROP, epoch, cdl__sample_key(L, id));
        if (L->cfg.train_crop == COORDL_CROP_DARKNET) cdl__plan_darknet(L, &rng, W, H, g);
        else if (L->cfg.train_crop == COORDL_CROP_DARKNET_BOXES) cdl__plan_darknet_boxes(L, &rng, W, H, g);
        else if (L->cfg.train_crop == COORDL_CROP_SSD) cdl__plan_ssd(L, &rng, id, W, H, g);
        else cdl__plan_train(L, &rng, W, H, g);
    }
}

/* Where source x (image pixels, continuous: pixel i covers [i, i + 1))
 * lands in the output, as a fraction of the output width, before the
 * flip: the inverse of the geometry's map (rotation is refused with
 * boxes, so the map is an axis-aligned scale and shift). An affine
 * geometry samples pixel indices (output pixel X reads source index
 * m0 X + m2), so centre maps to centre: the half pixels on both sides. */
static double cdl__map_x(const cdl__geom *g, double sx) {
    return g->darknet ? ((sx - 0.5 - g->m[2]) / g->m[0] + 0.5) / g->out_w : (sx - g->x0) / g->sw;
}
static double cdl__map_y(const cdl__geom *g, double sy) {
    return g->darknet ? ((sy - 0.5 - g->m[5]) / g->m[4] + 0.5) / g->out_h : (sy - g->y0) / g->sh;
}

static float cdl__unit(double v) { return v < 0.0 ? 0.0f : v > 1.0 ? 1.0f : (float)v; }

/* Item id's boxes through geometry g (drawn for an iw x ih image) into
 * out (max_boxes x 5 floats, zeroed first): each box's edges mapped,
 * flipped with the pixels, clipped to the output, and dropped when under
 * 0.001 of a side (Darknet's fill_truth_detection rule). Returns the
 * boxes kept. The geometry is the one the pixels use, drawn before
 * decoding, so the boxes are the same whatever decodes the pixels. */
CDL_PRIVATE uint32_t cdl__boxes_map(const coordl *L, const cdl__geom *g, int iw, int ih, uint64_t id, void *out) {
    const cdl__boxes *B = &L->index.boxes;
    memset(out, 0, (size_t)L->cfg.max_boxes * 5 * sizeof(float));
    uint32_t kept = 0;
    for (uint64_t k = B->first[id]; k < B->first[id + 1] && kept < L->cfg.max_boxes; k++) {
        const float *b = B->box[k];
        double l = cdl__map_x(g, ((double)b[0] - b[2] / 2.0) * iw), r = cdl__map_x(g, ((double)b[0] + b[2] / 2.0) * iw);
        const double t = cdl__map_y(g, ((double)b[1] - b[3] / 2.0) * ih), bo = cdl__map_y(g, ((double)b[1] + b[3] / 2.0) * ih);
        /* SSD keeps a box only when its centre lies in the crop */
        if (g->centre_rule && ((l + r) / 2.0 <= 0.0 || (l + r) / 2.0 >= 1.0 || (t + bo) / 2.0 <= 0.0 ||
                               (t + bo) / 2.0 >= 1.0))
            continue;
        if (g->flip) {
            const double fl = 1.0 - r;
            r = 1.0 - l;
            l = fl;
        }
        const float L0 = cdl__unit(l), R0 = cdl__unit(r), T0 = cdl__unit(t), B0 = cdl__unit(bo);
        const float bw = R0 - L0, bh = B0 - T0;
        if (bw < 0.001f || bh < 0.001f) continue;
        const float o[5] = {(L0 + R0) / 2.0f, (T0 + B0) / 2.0f, bw, bh, b[4]};
        memcpy((unsigned char *)out + (size_t)kept * sizeof o, o, sizeof o); /* the place may be unaligned (U8 rows) */
        kept++;
    }
    return kept;
}

/* A worker's plan for the row it prepares: the geometry, and with box
 * labels the row's boxes through it, written into the row's place (a
 * substitute item's plan writes over a failed one's). */
CDL_PRIVATE void cdl__plan_row(cdl__worker *W, uint64_t epoch, uint64_t id, int iw, int ih, cdl__geom *g) {
    const coordl *L = W->L;
    cdl__plan(L, W->claim->out_w, W->claim->out_h, epoch, id, iw, ih, g);
    if (!L->geom.box_rows || !W->targets) return;
    W->nboxes = cdl__boxes_map(L, g, iw, ih, id, W->targets);
}

#ifndef COORDL_NO_JPEGTURBO /* libjpeg's DCT scaling */
/* DCT scaling: the largest 1/d (d in 1, 2, 4, 8) whose scaled source
 * rectangle still covers the output; 3/8..7/8 have no SIMD path in
 * libjpeg-turbo 2.1 and are slower than a full decode, so they are not
 * used. */
CDL_PRIVATE int cdl__choose_dct_denominator(const cdl__geom *g) {
    if (g->darknet) return 1;
    int d = 8;
    while (d > 1 && (g->sw / d < g->out_w || g->sh / d < g->out_h)) d /= 2;
    return d;
}

/* Maps geometry in full-size pixels to an image decoded at 1/d whose size
 * is (sw, sh) (libjpeg rounds scaled sizes up). */
CDL_PRIVATE void cdl__geom_scale(cdl__geom *g, int d, int scaled_w, int scaled_h) {
    if (d == 1) return;
    g->x0 /= d; g->y0 /= d; g->sw /= d; g->sh /= d;
    g->clip_x0 /= d; g->clip_y0 /= d;
    g->clip_x1 = (g->clip_x1 + d - 1) / d;
    g->clip_y1 = (g->clip_y1 + d - 1) / d;
    if (g->clip_x1 > scaled_w) g->clip_x1 = scaled_w;
    if (g->clip_y1 > scaled_h) g->clip_y1 = scaled_h;
    if (g->clip_x1 <= g->clip_x0) g->clip_x1 = g->clip_x0 + 1;
    if (g->clip_y1 <= g->clip_y0) g->clip_y1 = g->clip_y0 + 1;
}
#endif

/* ---- src/resample.c ---------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * resample.c - resampling and the fused resize/flip/normalize pass.
 *
 * Separable antialiased bilinear (a triangle filter widened by the
 * shrink factor: PIL's and torchvision's antialias=True), with
 * per-sample coefficient tables of a fixed tap count K (zero-padded) so
 * the loops have no data-dependent bounds. Vertical pass first: it runs
 * over contiguous bytes and vectorizes; the horizontal pass then runs
 * on out_h rows only, 4-wide over RGB(+1) per tap. The flip is folded
 * into the horizontal table; normalization happens at the final store.
 *
 * Owns:  nothing of its own: the filter tables live in the worker's
 *        scratch; whether to use AVX2 is chosen at open (L->geom.avx2)
 * Lock:  none
 * Calls: status, worker (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */

static double cdl__triangle(double x) {
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Builds taps for `out` outputs sampling [x0, x0 + span) clipped to
 * [clip0, clip1). K is the largest number of non-zero taps any output
 * needs; shorter tap lists are zero-padded (and shifted left at the right
 * edge) so every output reads exactly K source pixels inside the clip.
 * Returns 0 on allocation failure. */
#define CDL_MAX_TAPS 512
static int cdl__axis_build(cdl__worker *W, cdl__axis *ax, int32_t **startbuf, size_t *startcap,
                           float **wbuf, size_t *wcap, int out, double x0, double span,
                           int clip0, int clip1, int flip) {
    const double scale = span / out;
    const double fscale = scale > 1.0 ? scale : 1.0;
    const double support = fscale; /* triangle support 1, widened */
    int bound = (int)ceil(support) * 2 + 1;
    if (bound > CDL_MAX_TAPS) bound = CDL_MAX_TAPS;
    if (!cdl__reserve(W->L, (void **)startbuf, startcap, (size_t)out * sizeof(int32_t)) ||
        !cdl__reserve(W->L, (void **)wbuf, wcap, (size_t)out * (size_t)bound * sizeof(float)))
        return 0;
    /* Pass 1: each output's non-zero taps, written at stride `bound`. */
    int K = 1;
    for (int i = 0; i < out; i++) {
        const double center = x0 + (i + 0.5) * scale;
        int xmin = (int)floor(center - support + 0.5);
        int xmax = (int)floor(center + support + 0.5);
        if (xmin < clip0) xmin = clip0;
        if (xmax > clip1) xmax = clip1;
        if (xmax - xmin > bound) xmax = xmin + bound;
        double wk[CDL_MAX_TAPS], sum = 0.0;
        int n = 0, first = -1, last = -1;
        for (int x = xmin; x < xmax; x++, n++) {
            wk[n] = cdl__triangle((x - center + 0.5) / fscale);
            sum += wk[n];
            if (wk[n] > 0.0) { if (first < 0) first = n; last = n; }
        }
        float *w = *wbuf + (size_t)i * bound;
        if (first < 0 || sum <= 0.0) { /* degenerate: nearest pixel */
            int x = (int)floor(center);
            xmin = x < clip0 ? clip0 : x >= clip1 ? clip1 - 1 : x;
            w[0] = 1.0f;
            n = 1;
        } else {
            for (int k = first; k <= last; k++) w[k - first] = (float)(wk[k] / sum);
            xmin += first;
            n = last - first + 1;
        }
        (*startbuf)[i] = xmin;
        if (n > K) K = n;
        /* remember n in the unused tail of the row: bound >= n */
        if (n < bound) w[bound - 1] = (float)n;
    }
    if (K > clip1 - clip0) K = clip1 - clip0;
    /* Pass 2: compact to stride K, zero-pad, shift starts to stay inside
     * the clip, fold the flip into the output order. Rows are rewritten in
     * increasing i and the destination index o*K <= i*bound only when not
     * flipped, so a flipped table goes through the end of the buffer. */
    if (!cdl__reserve(W->L, (void **)wbuf, wcap, ((size_t)out * bound + (size_t)out * K) * sizeof(float)))
        return 0;
    float *packed = *wbuf + (size_t)out * bound;
    for (int i = 0; i < out; i++) {
        const float *w = *wbuf + (size_t)i * bound;
        int n = K == bound ? bound : (int)w[bound - 1];
        if (n > K || n < 1) n = K;
        int start = (*startbuf)[i];
        int shift = 0;
        if (start > clip1 - K) { shift = start - (clip1 - K); start = clip1 - K; }
        float *d = packed + (size_t)(flip ? out - 1 - i : i) * K;
        for (int k = 0; k < K; k++) d[k] = 0.0f;
        for (int k = 0; k < n && k + shift < K; k++) d[k + shift] = w[k];
        (*startbuf)[i] = start;
    }
    /* flip the starts too, in place */
    if (flip)
        for (int i = 0, j = out - 1; i < j; i++, j--) {
            int32_t t = (*startbuf)[i];
            (*startbuf)[i] = (*startbuf)[j];
            (*startbuf)[j] = t;
        }
    ax->K = K;
    ax->start = *startbuf;
    ax->w = packed;
    ax->lo = clip1;
    ax->hi = clip0;
    for (int i = 0; i < out; i++) {
        if (ax->start[i] < ax->lo) ax->lo = ax->start[i];
        if (ax->start[i] + K > ax->hi) ax->hi = ax->start[i] + K;
    }
    return 1;
}

typedef float cdl__v4 __attribute__((vector_size(16)));

static cdl__v4 cdl__v4_load(const float *p) {
    cdl__v4 v;
    memcpy(&v, p, sizeof v); /* unaligned load (movups) */
    return v;
}
static void cdl__v4_store(float *p, cdl__v4 v) { memcpy(p, &v, sizeof v); }

/* Bytes to floats. gcc -O2 does not vectorize this (its "very cheap" cost
 * model rejects the epilogue), so SSE2 is spelled out where available. */
static void cdl__u8_to_f32(const cdl__u8 *restrict src, float *restrict dst, size_t n) {
    size_t i = 0;
#if defined(__SSE2__)
    const __m128i zero = _mm_setzero_si128();
    for (; i + 16 <= n; i += 16) {
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        __m128i lo = _mm_unpacklo_epi8(b, zero), hi = _mm_unpackhi_epi8(b, zero);
        _mm_storeu_ps(dst + i, _mm_cvtepi32_ps(_mm_unpacklo_epi16(lo, zero)));
        _mm_storeu_ps(dst + i + 4, _mm_cvtepi32_ps(_mm_unpackhi_epi16(lo, zero)));
        _mm_storeu_ps(dst + i + 8, _mm_cvtepi32_ps(_mm_unpacklo_epi16(hi, zero)));
        _mm_storeu_ps(dst + i + 12, _mm_cvtepi32_ps(_mm_unpackhi_epi16(hi, zero)));
    }
#endif
    for (; i < n; i++) dst[i] = (float)src[i];
}

/* AVX2 versions of the three inner loops, chosen at open when the CPU has
 * AVX2 (runtime dispatch: the library is built for the baseline x86-64,
 * SSE2). They do the same IEEE operations in the same order on each lane
 * (a multiply, then an add: no FMA, which would round once instead of
 * twice), so their output is bit-identical to the SSE2 path's and batches
 * do not depend on the CPU. COORDL_NO_AVX2=1 in the environment at open
 * keeps the SSE2 path (for comparing them). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CDL_HAVE_AVX2 1
#define CDL_AVX2 __attribute__((target("avx2")))

CDL_AVX2 static void cdl__u8_to_f32_avx2(const cdl__u8 *restrict src, float *restrict dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)));
    }
    for (; i < n; i++) dst[i] = (float)src[i];
}

/* Eight outputs at a time: pixel i's four lanes (R G B, next R) in the low
 * half of a register and pixel i + 4's in the high half, so four registers
 * hold eight pixels and a per-half 4x4 transpose turns them into eight R,
 * eight G and eight B for three stores. The weights come spread for that:
 * w8[((g * 4 + q) * K + k) * 8 ..] = w[i + q][k] x 4, w[i + q + 4][k] x 4
 * for the group of eight outputs i = 8g (one load a tap, no shuffles). */
CDL_AVX2 static void cdl__axis_spread_avx2(const cdl__axis *ax, int out, float *w8) {
    const int K = ax->K;
    for (int i = 0; i + 8 <= out; i += 8)
        for (int q = 0; q < 4; q++)
            for (int k = 0; k < K; k++) {
                float *d = w8 + ((size_t)((i / 8) * 4 + q) * (size_t)K + (size_t)k) * 8;
                const float a = ax->w[(size_t)(i + q) * K + k], b = ax->w[(size_t)(i + q + 4) * K + k];
                d[0] = d[1] = d[2] = d[3] = a;
                d[4] = d[5] = d[6] = d[7] = b;
            }
}

#define CDL_HPASS8_BODY(KK)                                                              \
    for (; i + 8 <= out_w; i += 8) {                                                     \
        __m256 acc[4];                                                                   \
        for (int q = 0; q < 4; q++) {                                                    \
            const float *w8 = ax->w8 + (size_t)((i / 8) * 4 + q) * (size_t)(KK) * 8;      \
            const float *pa = frow + (size_t)(ax->start[i + q] - ax->lo) * 3;            \
            const float *pb = frow + (size_t)(ax->start[i + q + 4] - ax->lo) * 3;        \
            __m256 a = _mm256_mul_ps(_mm256_loadu2_m128(pb, pa), _mm256_loadu_ps(w8));   \
            for (int k = 1; k < (KK); k++)                                               \
                a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_loadu2_m128(pb + 3 * k, pa + 3 * k), \
                                                   _mm256_loadu_ps(w8 + 8 * k)));        \
            acc[q] = a;                                                                  \
        }                                                                                \
        const __m256 t0 = _mm256_unpacklo_ps(acc[0], acc[1]), t1 = _mm256_unpacklo_ps(acc[2], acc[3]); \
        const __m256 t2 = _mm256_unpackhi_ps(acc[0], acc[1]), t3 = _mm256_unpackhi_ps(acc[2], acc[3]); \
        _mm256_storeu_ps(dst + i, _mm256_shuffle_ps(t0, t1, 0x44));                     \
        _mm256_storeu_ps(dst + plane + i, _mm256_shuffle_ps(t0, t1, 0xEE));             \
        _mm256_storeu_ps(dst + 2 * plane + i, _mm256_shuffle_ps(t2, t3, 0x44));         \
    }
CDL_AVX2 static void cdl__hpass_row_avx2(const float *frow, const cdl__axis *ax, int out_w, size_t plane,
                                         float *restrict dst) {
    int i = 0;
    switch (ax->K) {
    case 1: CDL_HPASS8_BODY(1) break;
    case 2: CDL_HPASS8_BODY(2) break;
    case 3: CDL_HPASS8_BODY(3) break;
    case 4: CDL_HPASS8_BODY(4) break;
    case 5: CDL_HPASS8_BODY(5) break;
    case 6: CDL_HPASS8_BODY(6) break;
    default: { const int K = ax->K; CDL_HPASS8_BODY(K) } break;
    }
    for (; i < out_w; i++) { /* the last outputs, one at a time as in SSE2 */
        const int K = ax->K;
        const float *wx = ax->w + (size_t)i * K;
        const float *p = frow + (size_t)(ax->start[i] - ax->lo) * 3;
        __m128 a = _mm_mul_ps(_mm_loadu_ps(p), _mm_set1_ps(wx[0]));
        for (int k = 1; k < K; k++) a = _mm_add_ps(a, _mm_mul_ps(_mm_loadu_ps(p + 3 * k), _mm_set1_ps(wx[k])));
        float v[4];
        _mm_storeu_ps(v, a);
        dst[i] = v[0];
        dst[plane + i] = v[1];
        dst[2 * plane + i] = v[2];
    }
}
#undef CDL_HPASS8_BODY

#define CDL_VPASS8_BODY(KK)                                                              \
    for (; x + 8 <= n; x += 8) {                                                         \
        __m256 a = _mm256_mul_ps(_mm256_loadu_ps(rows[0] + x), _mm256_set1_ps(w[0]));    \
        for (int k = 1; k < (KK); k++)                                                   \
            a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_loadu_ps(rows[k] + x), _mm256_set1_ps(w[k]))); \
        _mm256_storeu_ps(acc + x, a);                                                    \
    }
CDL_AVX2 static void cdl__vpass_row_avx2(const float *const *rows, const float *w, int K, size_t n, float *acc) {
    size_t x = 0;
    switch (K) {
    case 1: CDL_VPASS8_BODY(1) break;
    case 2: CDL_VPASS8_BODY(2) break;
    case 3: CDL_VPASS8_BODY(3) break;
    case 4: CDL_VPASS8_BODY(4) break;
    case 5: CDL_VPASS8_BODY(5) break;
    case 6: CDL_VPASS8_BODY(6) break;
    default: CDL_VPASS8_BODY(K) break;
    }
    for (; x < n; x += 4) { /* n is a multiple of 4 */
        __m128 a = _mm_mul_ps(_mm_loadu_ps(rows[0] + x), _mm_set1_ps(w[0]));
        for (int k = 1; k < K; k++) a = _mm_add_ps(a, _mm_mul_ps(_mm_loadu_ps(rows[k] + x), _mm_set1_ps(w[k])));
        _mm_storeu_ps(acc + x, a);
    }
}
#undef CDL_VPASS8_BODY

/* F32 planes: y = x * scale + bias, eight at a time. */
CDL_AVX2 static void cdl__scale_bias_avx2(const float *src, float *dst, int n, float sc, float bi) {
    int x = 0;
    const __m256 s = _mm256_set1_ps(sc), b = _mm256_set1_ps(bi);
    for (; x + 8 <= n; x += 8) _mm256_storeu_ps(dst + x, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(src + x), s), b));
    for (; x < n; x++) dst[x] = src[x] * sc + bi;
}
#endif

/* Horizontal pass of one source row, already in floats (pixel 0 = source
 * column ax->lo, one zero pixel of padding after the last), into three
 * planar rows (R, G, B; `plane` floats apart). Four lanes per tap: R G B
 * and the next pixel's R, ignored. Specialised on the tap count so the
 * inner loop is unrolled for the common K (2-6 taps). */
#define CDL_HPASS_BODY(KK)                                                     \
    for (int i = 0; i < out_w; i++) {                                          \
        const float *wx = ax->w + (size_t)i * (KK);                            \
        const float *p = frow + (size_t)(ax->start[i] - ax->lo) * 3;           \
        cdl__v4 acc = cdl__v4_load(p) * wx[0];                                 \
        for (int k = 1; k < (KK); k++) acc += cdl__v4_load(p + (size_t)k * 3) * wx[k]; \
        dst[i] = acc[0];                                                       \
        dst[plane + i] = acc[1];                                               \
        dst[2 * plane + i] = acc[2];                                           \
    }
static void cdl__hpass_row(const float *frow, const cdl__axis *ax, int out_w, size_t plane,
                           float *restrict dst) {
    switch (ax->K) {
    case 1: CDL_HPASS_BODY(1) break;
    case 2: CDL_HPASS_BODY(2) break;
    case 3: CDL_HPASS_BODY(3) break;
    case 4: CDL_HPASS_BODY(4) break;
    case 5: CDL_HPASS_BODY(5) break;
    case 6: CDL_HPASS_BODY(6) break;
    default: { const int K = ax->K; CDL_HPASS_BODY(K) } break;
    }
}
#undef CDL_HPASS_BODY

/* acc = sum_k w[k] * rows[k] over n floats, n a multiple of 4. */
#define CDL_VPASS_BODY(KK)                                                     \
    for (size_t x = 0; x < n; x += 4) {                                        \
        cdl__v4 a = cdl__v4_load(rows[0] + x) * w[0];                          \
        for (int k = 1; k < (KK); k++) a += cdl__v4_load(rows[k] + x) * w[k];  \
        cdl__v4_store(acc + x, a);                                             \
    }
static void cdl__vpass_row(const float *const *rows, const float *w, int K, size_t n, float *acc) {
    switch (K) {
    case 1: CDL_VPASS_BODY(1) break;
    case 2: CDL_VPASS_BODY(2) break;
    case 3: CDL_VPASS_BODY(3) break;
    case 4: CDL_VPASS_BODY(4) break;
    case 5: CDL_VPASS_BODY(5) break;
    case 6: CDL_VPASS_BODY(6) break;
    default: CDL_VPASS_BODY(K) break;
    }
}
#undef CDL_VPASS_BODY

/* A float in 0..255 as the 8-bit value a U8 layout stores: rounded half
 * up, clamped. */
static cdl__u8 cdl__to_u8(float v) {
    float f = v + 0.5f;
    f = f < 0.0f ? 0.0f : f > 255.0f ? 255.0f : f;
    return (cdl__u8)f;
}

/* channels = 1: one plane of BT.601 luma, Y = (299 R + 587 G + 114 B +
 * 500) / 1000 over the 8-bit R, G, B the RGB layouts would store. Integer
 * arithmetic on the stored values, so a grey row is the luma of the RGB
 * row of the same run byte for byte (and a grey source, R = G = B, keeps
 * its values); float layouts normalize Y with mean[0] and std[0]. */
static void cdl__store_row_grey(const coordl *L, const cdl__geom *g, const float *v, size_t plane, int j, void *dst) {
    const int out_w = (int)g->out_w;
    const size_t at = (size_t)j * out_w;
    const int u8 = L->cfg.layout == COORDL_U8_NHWC || L->cfg.layout == COORDL_U8_NCHW;
    for (int i = 0; i < out_w; i++) {
        const unsigned y = (299u * cdl__to_u8(v[i]) + 587u * cdl__to_u8(v[plane + i]) +
                            114u * cdl__to_u8(v[2 * plane + i]) + 500u) / 1000u;
        if (u8) ((cdl__u8 *)dst)[at + i] = (cdl__u8)y;
        else ((float *)dst)[at + i] = (float)y * L->geom.norm_scale[0] + L->geom.norm_bias[0];
    }
}

/* Writes one output row from planar R, G, B floats in 0..255 (`plane`
 * floats apart) in the configured layout. */
static void cdl__store_row(const coordl *L, const cdl__geom *g, const float *v, size_t plane, int j, void *dst) {
    const int out_w = (int)g->out_w;
    const size_t oplane = (size_t)out_w * g->out_h;
    if (L->cfg.channels == 1) {
        cdl__store_row_grey(L, g, v, plane, j, dst);
        return;
    }
    switch (L->cfg.layout) {
    case COORDL_F32_NCHW:
        for (int c = 0; c < 3; c++) {
            const float *src = v + (size_t)c * plane;
            float *d = (float *)dst + (size_t)c * oplane + (size_t)j * out_w;
            const float sc = L->geom.norm_scale[c], bi = L->geom.norm_bias[c];
#ifdef CDL_HAVE_AVX2
            if (L->geom.avx2) {
                cdl__scale_bias_avx2(src, d, out_w, sc, bi);
                continue;
            }
#endif
            int x = 0;
            for (; x + 4 <= out_w; x += 4) cdl__v4_store(d + x, cdl__v4_load(src + x) * sc + bi);
            for (; x < out_w; x++) d[x] = src[x] * sc + bi;
        }
        break;
    case COORDL_F32_NHWC: {
        float *d = (float *)dst + (size_t)j * out_w * 3;
        for (int i = 0; i < out_w; i++)
            for (int c = 0; c < 3; c++) d[3 * i + c] = v[(size_t)c * plane + i] * L->geom.norm_scale[c] + L->geom.norm_bias[c];
        break;
    }
    default: {
        const int nhwc = L->cfg.layout == COORDL_U8_NHWC;
        cdl__u8 *d = (cdl__u8 *)dst;
        for (int c = 0; c < 3; c++)
            for (int i = 0; i < out_w; i++) {
                size_t at = nhwc ? ((size_t)j * out_w + i) * 3 + c : (size_t)c * oplane + (size_t)j * out_w + i;
                d[at] = cdl__to_u8(v[(size_t)c * plane + i]);
            }
        break;
    }
    }
}

/* Darknet's distort_image on one planar row (0..255 floats), step for
 * step (src/image.c: rgb_to_hsv, scale_image_channel on S and V, the hue
 * shifted and wrapped once, hsv_to_rgb, constrain_image): S and V are not
 * clamped before the conversion back, the RGB result is (to [0, 255]). */
static void cdl__color_jitter_row(float *r, float *g, float *b, int n, float dhue, float dsat, float dexp) {
    for (int i = 0; i < n; i++) {
        float R = r[i] / 255.0f, G = g[i] / 255.0f, B = b[i] / 255.0f;
        float mx = R > G ? (R > B ? R : B) : (G > B ? G : B);
        float mn = R < G ? (R < B ? R : B) : (G < B ? G : B);
        float d = mx - mn, h = 0.0f, s = 0.0f, v = mx;
        if (mx != 0.0f) {
            s = d / mx;
            if (d > 0.0f) { /* Darknet divides 0 by 0 here; with S = 0 the hue is never used */
                if (R == mx) h = (G - B) / d;
                else if (G == mx) h = 2.0f + (B - R) / d;
                else h = 4.0f + (R - G) / d;
                if (h < 0.0f) h += 6.0f;
                h = h / 6.0f;
            }
        }
        s *= dsat;
        v *= dexp;
        h += dhue;
        if (h > 1.0f) h -= 1.0f;
        if (h < 0.0f) h += 1.0f;
        if (s == 0.0f) {
            R = G = B = v;
        } else {
            float h6 = 6.0f * h;
            int k = (int)floorf(h6);
            float f = h6 - (float)k, p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
            switch (k) {
            case 0: R = v; G = t; B = p; break;
            case 1: R = q; G = v; B = p; break;
            case 2: R = p; G = v; B = t; break;
            case 3: R = p; G = q; B = v; break;
            case 4: R = t; G = p; B = v; break;
            default: R = v; G = p; B = q; break;
            }
        }
        R = R < 0.0f ? 0.0f : R > 1.0f ? 1.0f : R;
        G = G < 0.0f ? 0.0f : G > 1.0f ? 1.0f : G;
        B = B < 0.0f ? 0.0f : B > 1.0f ? 1.0f : B;
        r[i] = R * 255.0f; g[i] = G * 255.0f; b[i] = B * 255.0f;
    }
}

/* Output row j of the image in `img` (3 planes of out_h rows of `plane`
 * floats) rotated by `angle` about the centre, bilinear. Darknet's
 * rotate_image fills outside with black; coordl extends the edges instead,
 * so rotated crops have no black corners for the model to learn. */
static void cdl__rotate_row(const float *img, size_t plane, int out_w, int out_h, float angle, int j, float *acc) {
    const float cx = (out_w - 1) * 0.5f, cy = (out_h - 1) * 0.5f, c = cosf(angle), s = sinf(angle);
    const size_t psz = plane * (size_t)out_h;
    for (int i = 0; i < out_w; i++) {
        float x = c * (i - cx) + s * (j - cy) + cx, y = -s * (i - cx) + c * (j - cy) + cy;
        int x0 = (int)floorf(x), y0 = (int)floorf(y);
        float fx = x - x0, fy = y - y0;
        for (int ch = 0; ch < 3; ch++) {
            const float *P = img + ch * psz;
            float v = 0.0f;
            for (int dy = 0; dy < 2; dy++)
                for (int dx = 0; dx < 2; dx++) {
                    int xx = x0 + dx, yy = y0 + dy;
                    xx = xx < 0 ? 0 : xx >= out_w ? out_w - 1 : xx;
                    yy = yy < 0 ? 0 : yy >= out_h ? out_h - 1 : yy;
                    v += (dx ? fx : 1 - fx) * (dy ? fy : 1 - fy) * P[(size_t)yy * plane + xx];
                }
            acc[ch * plane + i] = v;
        }
    }
}

/* Colour jitter (if any) and the store, for one finished output row. */
static void cdl__finish_row(const coordl *L, const cdl__geom *g, float *acc, size_t plane, int j, void *dst) {
    if (g->dhue != 0.0f || g->dsat != 1.0f || g->dexp != 1.0f)
        cdl__color_jitter_row(acc, acc + plane, acc + 2 * plane, (int)g->out_w, g->dhue, g->dsat, g->dexp);
    cdl__store_row(L, g, acc, plane, j, dst);
}

/* COORDL_CROP_DARKNET: Darknet's rotate_crop_image then flip_image (and
 * for a canvas, COORDL_CROP_DARKNET_BOXES and the letterbox, place_image
 * with grey outside the placed image), per output pixel: the source point of the affine map, bilinear over the four
 * pixels around it (floor, floor + 1), a pixel outside the image reading
 * 0. The decoded region is the clip rectangle [ax->lo, ax->hi) x [ay->lo,
 * ay->hi): every tap inside the image lies in it. */
static void cdl__resample_darknet(coordl *L, cdl__worker *W, const cdl__u8 *src, size_t stride, int sx0,
                                  int sy0, const cdl__axis *ax, const cdl__axis *ay, const cdl__geom *g, void *dst) {
    const int out_w = (int)g->out_w, out_h = (int)g->out_h;
    const size_t plane = cdl__round_up((size_t)out_w, 4);
    float *acc = W->tmp;
    const int x_lo = ax->lo, x_hi = ax->hi, y_lo = ay->lo, y_hi = ay->hi;
    for (int j = 0; j < out_h; j++) {
        for (int i = 0; i < out_w; i++) {
            const int x = g->flip ? out_w - 1 - i : i;
            const float rx = (float)(g->m[0] * x + g->m[1] * j + g->m[2]);
            const float ry = (float)(g->m[3] * x + g->m[4] * j + g->m[5]);
            const int ix = (int)floorf(rx), iy = (int)floorf(ry);
            const float fx = rx - (float)ix, fy = ry - (float)iy;
            float v0 = 0.0f, v1 = 0.0f, v2 = 0.0f;
            if (g->canvas && (x < g->px0 || x >= g->px1 || j < g->py0 || j >= g->py1)) {
                v0 = v1 = v2 = 127.5f; /* the grey canvas around a placed image */
            } else if (ix >= x_lo && ix + 1 < x_hi && iy >= y_lo && iy + 1 < y_hi) {
                const cdl__u8 *p = src + (size_t)(iy - sy0) * stride + (size_t)(ix - sx0) * 3, *q = p + stride;
                const float w00 = (1 - fy) * (1 - fx), w10 = (1 - fy) * fx, w01 = fy * (1 - fx), w11 = fy * fx;
                v0 = w00 * p[0] + w01 * q[0] + w10 * p[3] + w11 * q[3];
                v1 = w00 * p[1] + w01 * q[1] + w10 * p[4] + w11 * q[4];
                v2 = w00 * p[2] + w01 * q[2] + w10 * p[5] + w11 * q[5];
            } else {
                for (int t = 0; t < 4; t++) {
                    const int px = ix + (t & 1), py = iy + (t >> 1);
                    if (px < x_lo || px >= x_hi || py < y_lo || py >= y_hi) continue;
                    const float wt = ((t & 1) ? fx : 1 - fx) * ((t >> 1) ? fy : 1 - fy);
                    const cdl__u8 *p = src + (size_t)(py - sy0) * stride + (size_t)(px - sx0) * 3;
                    v0 += wt * p[0];
                    v1 += wt * p[1];
                    v2 += wt * p[2];
                }
            }
            acc[i] = v0;
            acc[plane + i] = v1;
            acc[2 * plane + i] = v2;
        }
        cdl__finish_row(L, g, acc, plane, j, dst);
    }
}

/* src: decoded RGB region whose pixel (0,0) is source pixel (sx0, sy0),
 * `stride` bytes per row. Each source row the vertical taps need is
 * converted to floats and filtered horizontally once, into a window of
 * K_y planar rows (source-row starts are monotone in the output row);
 * then the vertical pass runs over contiguous floats and the store
 * normalizes into the batch row. */
CDL_PRIVATE void cdl__resample(coordl *L, cdl__worker *W, const cdl__u8 *src, size_t stride, int sx0,
                          int sy0, const cdl__axis *ax, const cdl__axis *ay, const cdl__geom *g, void *dst) {
    if (g->darknet) {
        cdl__resample_darknet(L, W, src, stride, sx0, sy0, ax, ay, g, dst);
        return;
    }
    const int out_w = (int)g->out_w, out_h = (int)g->out_h, Ky = ay->K;
    const size_t plane = cdl__round_up((size_t)out_w, 4), rowf = 3 * plane;
    const size_t cols = (size_t)(ax->hi - ax->lo) * 3;
    float *window = W->tmp;                   /* Ky rows of rowf floats    */
    float *acc = window + (size_t)Ky * rowf;  /* one output row            */
    float *frow = acc + rowf;                 /* one source row, as floats */
    int32_t *window_row = W->window_row;      /* source row in each slot   */
    const float *rows[CDL_MAX_TAPS];
    frow[cols] = frow[cols + 1] = frow[cols + 2] = frow[cols + 3] = 0.0f;
    for (int k = 0; k < Ky; k++) window_row[k] = -1;
    for (int j = 0; j < out_h; j++) {
        for (int k = 0; k < Ky; k++) {
            const int r = ay->start[j] + k;
            const int slot = r % Ky;
            float *h = window + (size_t)slot * rowf;
            if (window_row[slot] != r) {
                const cdl__u8 *s = src + (size_t)(r - sy0) * stride + (size_t)(ax->lo - sx0) * 3;
#ifdef CDL_HAVE_AVX2
                if (ax->w8) {
                    cdl__u8_to_f32_avx2(s, frow, cols);
                    cdl__hpass_row_avx2(frow, ax, out_w, plane, h);
                } else
#endif
                {
                    cdl__u8_to_f32(s, frow, cols);
                    cdl__hpass_row(frow, ax, out_w, plane, h);
                }
                window_row[slot] = r;
            }
            rows[k] = h;
        }
#ifdef CDL_HAVE_AVX2
        if (L->geom.avx2) cdl__vpass_row_avx2(rows, ay->w + (size_t)j * Ky, Ky, rowf, acc);
        else
#endif
            cdl__vpass_row(rows, ay->w + (size_t)j * Ky, Ky, rowf, acc);
        if (g->angle != 0.0f) { /* keep the whole image: rotation reads across rows */
            float *img = W->rot;
            float *tmp_rows[3] = {img + (size_t)j * plane, img + (size_t)(out_h + j) * plane,
                                  img + (size_t)(2 * out_h + j) * plane};
            for (int c = 0; c < 3; c++) memcpy(tmp_rows[c], acc + (size_t)c * plane, plane * sizeof(float));
        } else {
            cdl__finish_row(L, g, acc, plane, j, dst);
        }
    }
    if (g->angle != 0.0f)
        for (int j = 0; j < out_h; j++) {
            cdl__rotate_row(W->rot, plane, out_w, out_h, g->angle, j, acc);
            cdl__finish_row(L, g, acc, plane, j, dst);
        }
}

/* Bytes of the resampling window for these tables: K_y + 1 float rows of
 * the output width and one float row of the source span. It grows with
 * the crop's width in source pixels, so it counts in the decode budget
 * (jpeg.c). */
CDL_PRIVATE uint64_t cdl__window_bytes(const cdl__geom *g, const cdl__axis *ax, const cdl__axis *ay) {
    const uint64_t rowf = 3 * cdl__round_up((size_t)g->out_w, 4);
    const uint64_t cols = (uint64_t)(ax->hi - ax->lo) * 3 + 8;
    return (((uint64_t)ay->K + 1) * rowf + cols) * sizeof(float);
}

/* Builds both tables for geometry g (in decoded-image pixels) and makes
 * room for the resampling window. */
CDL_PRIVATE coordl_status cdl__tables_for(cdl__worker *W, const cdl__geom *g, cdl__axis *ax, cdl__axis *ay) {
    coordl *L = W->L;
    if (g->darknet) { /* no tables: the region to decode, one row of floats */
        memset(ax, 0, sizeof *ax);
        memset(ay, 0, sizeof *ay);
        ax->lo = g->clip_x0; ax->hi = g->clip_x1;
        ay->lo = g->clip_y0; ay->hi = g->clip_y1;
        if (!cdl__reserve(L, (void **)&W->tmp, &W->tmpcap, 3 * cdl__round_up((size_t)g->out_w, 4) * sizeof(float)))
            return cdl__worker_error(W, COORDL_ERR_NOMEM, "out of memory for a resampling window; lower out_w/out_h or max_pixels");
        return COORDL_OK;
    }
    if (!cdl__axis_build(W, ax, &W->xstart, &W->xstartcap, &W->xw, &W->xwcap, (int)g->out_w,
                         g->x0, g->sw, g->clip_x0, g->clip_x1, g->flip) ||
        !cdl__axis_build(W, ay, &W->ystart, &W->ystartcap, &W->yw, &W->ywcap, (int)g->out_h,
                         g->y0, g->sh, g->clip_y0, g->clip_y1, 0))
        return cdl__worker_error(W, COORDL_ERR_NOMEM, "out of memory for resampling tables; lower out_w/out_h");
    ax->w8 = ay->w8 = NULL;
#ifdef CDL_HAVE_AVX2
    if (L->geom.avx2 && g->out_w >= 8) {
        if (!cdl__reserve(L, (void **)&W->xw8, &W->xw8cap, (size_t)g->out_w * (size_t)ax->K * 4 * sizeof(float)))
            return cdl__worker_error(W, COORDL_ERR_NOMEM, "out of memory for resampling tables; lower out_w/out_h");
        cdl__axis_spread_avx2(ax, (int)g->out_w, W->xw8);
        ax->w8 = W->xw8;
    }
#endif
    const size_t rowf = 3 * cdl__round_up((size_t)g->out_w, 4);
    const uint64_t window = cdl__window_bytes(g, ax, ay);
    if (window > L->cfg.max_decode_bytes)
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "resampling a crop %d source pixels wide needs %llu bytes, "
                                 "over max_decode_bytes (%llu)", ax->hi - ax->lo, (unsigned long long)window,
                                 (unsigned long long)L->cfg.max_decode_bytes);
    if (!cdl__reserve(L, (void **)&W->tmp, &W->tmpcap, (size_t)window) ||
        !cdl__reserve(L, (void **)&W->window_row, &W->window_rowcap, (size_t)ay->K * sizeof(int32_t)) ||
        (g->angle != 0.0f && !cdl__reserve(L, (void **)&W->rot, &W->rotcap, rowf * g->out_h * sizeof(float))))
        return cdl__worker_error(W, COORDL_ERR_NOMEM, "out of memory for a resampling window; lower out_w/out_h or max_pixels");
    return COORDL_OK;
}

/* Whether this process resamples with the AVX2 loops: the CPU has them and
 * COORDL_NO_AVX2=1 is not set (the SSE2 loops' output is the same). Read
 * once, at open. */
CDL_PRIVATE int cdl__resample_use_avx2(void) {
#ifdef CDL_HAVE_AVX2
    const char *no_avx2 = getenv("COORDL_NO_AVX2");
    return __builtin_cpu_supports("avx2") && !(no_avx2 && no_avx2[0] == '1');
#else
    return 0;
#endif
}
/* ---- src/image.c ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * image.c - decode limits and stb_image.
 *
 * Owns:  the decode bounds every decoder applies, and stb's allocations
 *        during one decode call (a budget reached through one thread-local
 *        pointer, set and cleared within the call)
 * Lock:  none: everything is per call, in the calling worker's thread
 * Calls: status, worker, plan, resample (lower layers only:
 *        src/modules.txt; tools/check-layers.py checks this line).
 */

/* stb_image is compiled into this translation unit with static linkage so
 * that a trainer that also uses stb_image gets no symbol clash. libjpeg
 * handles JPEG unless COORDL_NO_JPEGTURBO is defined. Only the formats
 * coordl documents are compiled in (PNG, BMP, binary PPM/PGM, TGA; JPEG
 * only without libjpeg): GIF, PSD, PIC and HDR bytes are refused, not
 * decoded, whatever the file is named. stb's allocations go through the
 * handle's allocator hooks and the decode budget (below). */
#ifndef COORDL_NO_STB
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO
#define STBI_NO_HDR
#define STBI_NO_LINEAR
#define STBI_NO_PSD
#define STBI_NO_PIC
#define STBI_NO_GIF
#ifndef COORDL_NO_JPEGTURBO
#define STBI_NO_JPEG
#endif
#define STBI_MAX_DIMENSIONS CDL_MAX_SIDE
static void *cdl__stb_malloc(size_t n);
static void *cdl__stb_realloc(void *p, size_t n);
static void cdl__stb_free(void *p);
#define STBI_MALLOC(n) cdl__stb_malloc(n)
#define STBI_REALLOC(p, n) cdl__stb_realloc(p, n)
#define STBI_FREE(p) cdl__stb_free(p)
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif
#if defined(COORDL_STB_IMAGE_H)
#include COORDL_STB_IMAGE_H
#elif defined(COORDL_STB_UPSTREAM)
#include "stb_image.h"
#else
#include <stb/stb_image.h>
#endif
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#endif /* COORDL_NO_STB */
#if defined(__GNUC__) && !defined(__clang__) && !defined(COORDL_NO_STB)
/* stb_image.h declares stbi_set_unpremultiply_on_load_thread static without
 * defining it under STB_IMAGE_STATIC (its definition is misspelled
 * stbi__unpremultiply_on_load_thread); gcc warns at the end of the file, so
 * it cannot be scoped to the include. Only gcc builds with stb carry it:
 * clang and COORDL_NO_STB builds still report coordl.c's own unused
 * functions (make test-switches builds both with -Werror). */
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
/* --- what is decoded, and within which bounds --------------------------
 * Only the documented formats are decoded: JPEG (libjpeg; stb's JPEG
 * decoder only under COORDL_NO_JPEGTURBO), PNG, BMP, binary PPM/PGM and
 * TGA (stb_image, every other stb decoder compiled out). A file in another
 * format coordl knows by its signature is COORDL_ERR_UNSUPPORTED naming
 * the format; bytes no decoder recognises are COORDL_ERR_CORRUPT. Before
 * any pixel is decoded the header must give each side in 1..CDL_MAX_SIDE
 * and at most max_pixels, and the decode's memory (the decoder's buffers,
 * coordl's decoded region and resampling window) must fit
 * max_decode_bytes; otherwise the item is a bad sample. */

static const char *cdl__unsupported_format(const cdl__u8 *p, size_t n) {
#define CDL_SIG(off, lit) (n >= (off) + sizeof(lit) - 1 && memcmp(p + (off), lit, sizeof(lit) - 1) == 0)
    if (CDL_SIG(0, "GIF87a") || CDL_SIG(0, "GIF89a")) return "GIF";
    if (CDL_SIG(0, "8BPS")) return "PSD";
    if (CDL_SIG(0, "#?RADIANCE") || CDL_SIG(0, "#?RGBE")) return "Radiance HDR";
    if (CDL_SIG(0, "\x53\x80\xf6\x34")) return "Softimage PIC";
    if (CDL_SIG(0, "RIFF") && CDL_SIG(8, "WEBP")) return "WebP";
    if (CDL_SIG(0, "II*\0") || CDL_SIG(0, "MM\0*")) return "TIFF";
    if (CDL_SIG(0, "\0\0\0\x0cjP  ") || CDL_SIG(0, "\xff\x4f\xff\x51")) return "JPEG 2000";
    if (CDL_SIG(0, "\xff\x0a") || CDL_SIG(0, "\0\0\0\x0cJXL ")) return "JPEG XL";
    if (CDL_SIG(4, "ftyp")) return "ISO media (HEIF/AVIF)";
    if (n >= 2 && p[0] == 'P' && (p[1] == '1' || p[1] == '2' || p[1] == '3' || p[1] == '4' || p[1] == '7'))
        return "ASCII, bitmap or PAM netpbm (only binary P5/P6 are read)";
#undef CDL_SIG
    return NULL;
}

CDL_PRIVATE coordl_status cdl__check_image_size(cdl__worker *W, const char *path, int64_t iw, int64_t ih) {
    if (iw < 1 || ih < 1 || iw > CDL_MAX_SIDE || ih > CDL_MAX_SIDE)
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: image size %lldx%lld is not decodable (each side "
                                 "must be 1..%d)", path, (long long)iw, (long long)ih, CDL_MAX_SIDE);
    if ((uint64_t)iw * (uint64_t)ih > W->L->cfg.max_pixels)
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: %lldx%lld pixels exceeds max_pixels (%llu)", path,
                                 (long long)iw, (long long)ih, (unsigned long long)W->L->cfg.max_pixels);
    return COORDL_OK;
}

CDL_PRIVATE coordl_status cdl__over_decode_limit(cdl__worker *W, const char *path, const char *what, uint64_t need) {
    return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: decoding needs %s%llu bytes, over max_decode_bytes (%llu)",
                             path, what, (unsigned long long)need, (unsigned long long)W->L->cfg.max_decode_bytes);
}

/* A resampling error (resample knows no path) gets the file's name. */
CDL_PRIVATE coordl_status cdl__name_error(cdl__worker *W, const char *path, coordl_status rc) {
    char msg[CDL_ERRMSG_MAX];
    memcpy(msg, W->err, sizeof msg);
    return cdl__worker_error(W, rc, "%s: %s", path, msg);
}

#ifndef COORDL_NO_STB
/* --- stb_image's memory ------------------------------------------------
 * STBI_MALLOC/REALLOC/FREE (defined above, before stb_image.h) are these functions: every block
 * comes from the handle's allocator hooks and counts against the budget of
 * the stb call in progress, which refuses (stb then fails "outofmem") what
 * would pass its limit. stb has no context argument, so the budget reaches
 * them through a thread-local pointer set only around a call into stb
 * (cdl__stb_enter/leave) and NULL otherwise, when every allocation is
 * refused: a trainer's own stb_image is a separate copy and never comes
 * here. Each block carries its size and handle in a header. */
typedef union cdl__stb_block cdl__stb_block;

typedef struct cdl__stb_budget {
    const coordl *L;
    uint64_t limit, used, peak;
    uint64_t refused; /* the total an allocation would have reached; 0: none */
    cdl__stb_block *live; /* every block of this call not yet freed */
} cdl__stb_budget;

static _Thread_local cdl__stb_budget *cdl__stb_active;

union cdl__stb_block {
    struct {
        size_t size;
        const coordl *L;
        cdl__stb_block *prev, *next; /* in its call's live list; NULL after the call */
    } h;
    max_align_t align;
};

static void cdl__stb_enter(cdl__stb_budget *b, const coordl *L, uint64_t limit) {
    b->L = L;
    b->limit = limit;
    b->used = b->peak = b->refused = 0;
    b->live = NULL;
    cdl__stb_active = b;
}

static void cdl__stb_unlink(cdl__stb_budget *b, cdl__stb_block *k) {
    if (k->h.prev) k->h.prev->h.next = k->h.next; else if (b->live == k) b->live = k->h.next;
    if (k->h.next) k->h.next->h.prev = k->h.prev;
    k->h.prev = k->h.next = NULL;
}

/* Ends the call: every block stb still holds except `keep` (the image the
 * call returns, or NULL) is freed. stb 2.27 leaks on some failure paths
 * (stbi__convert_16_to_8 keeps the 16-bit image when the 8-bit one is
 * refused: fuzz_image found it), so whatever stb forgets comes back here,
 * and a failed decode can never leak. */
static void cdl__stb_leave(cdl__stb_budget *b, void *keep) {
    cdl__stb_block *kept = keep ? (cdl__stb_block *)keep - 1 : NULL;
    if (kept) cdl__stb_unlink(b, kept);
    while (b->live) {
        cdl__stb_block *k = b->live;
        cdl__stb_unlink(b, k);
        b->used -= k->h.size;
        cdl__free(k->h.L, k);
    }
    cdl__stb_active = NULL;
}

static int cdl__stb_grant(cdl__stb_budget *b, size_t more) {
    if (more > b->limit - b->used || more > SIZE_MAX - sizeof(cdl__stb_block)) {
        b->refused = b->used + more < b->used ? UINT64_MAX : b->used + more;
        return 0;
    }
    return 1;
}

/* Blocks are zeroed: stb leaves the rows of a truncated uncompressed TGA
 * unwritten (fuzz_image found it), and uninitialized heap must never reach
 * a batch. Zeros make such an image the same on every run. */
static void *cdl__stb_malloc(size_t n) {
    cdl__stb_budget *b = cdl__stb_active;
    if (!b || !cdl__stb_grant(b, n)) return NULL;
    cdl__stb_block *k = cdl__malloc(b->L, sizeof *k + n);
    if (!k) return NULL;
    memset(k + 1, 0, n);
    k->h.size = n;
    k->h.L = b->L;
    k->h.prev = NULL;
    k->h.next = b->live;
    if (b->live) b->live->h.prev = k;
    b->live = k;
    b->used += n;
    if (b->used > b->peak) b->peak = b->used;
    return k + 1;
}

static void cdl__stb_free(void *p) {
    if (!p) return;
    cdl__stb_block *k = (cdl__stb_block *)p - 1;
    if (cdl__stb_active) { /* a block of the call in progress (a kept image is unlinked at leave) */
        cdl__stb_unlink(cdl__stb_active, k);
        cdl__stb_active->used -= k->h.size;
    }
    cdl__free(k->h.L, k);
}

static void *cdl__stb_realloc(void *p, size_t n) {
    if (!p) return cdl__stb_malloc(n);
    cdl__stb_budget *b = cdl__stb_active;
    cdl__stb_block *k = (cdl__stb_block *)p - 1;
    const size_t old = k->h.size;
    if (!b || (n > old && !cdl__stb_grant(b, n - old))) return NULL;
    cdl__stb_block *prev = k->h.prev, *next = k->h.next;
    const int head = b->live == k;
    cdl__stb_block *nk = cdl__realloc(b->L, k, sizeof *nk + n);
    if (!nk) return NULL; /* k is untouched, still in the list */
    if (n > old) memset((cdl__u8 *)(nk + 1) + old, 0, n - old);
    nk->h.size = n;
    if (prev) prev->h.next = nk;
    if (next) next->h.prev = nk;
    if (head) b->live = nk;
    b->used = b->used - old + n;
    if (b->used > b->peak) b->peak = b->used;
    return nk + 1;
}

/* stb 2.27 reads the numbers of a PNM header into an int with no overflow
 * check (undefined behaviour from the tenth digit; fuzz_image found it).
 * The header's three numbers are scanned here first, token for token as
 * stb scans them (whitespace, '#' comments to the end of the line), and a
 * number of more than 9 digits is refused before stb sees it. */
static int cdl__pnm_numbers_fit(const cdl__u8 *p, size_t n) {
    if (n < 2 || p[0] != 'P' || (p[1] != '5' && p[1] != '6')) return 1; /* not a PNM stb reads */
    size_t i = 2;
    for (int k = 0; k < 3; k++) {
        for (;;) {
            while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\v' || p[i] == '\f' ||
                             p[i] == '\r'))
                i++;
            if (i >= n || p[i] != '#') break;
            while (i < n && p[i] != '\n' && p[i] != '\r') i++;
        }
        size_t digits = 0;
        while (i < n && p[i] >= '0' && p[i] <= '9') i++, digits++;
        if (digits > 9) return 0;
    }
    return 1;
}

/* stb 2.27 computes idata + 0 on a null idata when a PNG's first IDAT
 * chunk is empty (undefined behaviour; fuzz_image found it). Real encoders
 * do not write one; the chunks are walked as stb walks them (length, type,
 * data, CRC) up to the first IDAT, and a file whose first IDAT is empty is
 * refused. */
static int cdl__png_first_idat_ok(const cdl__u8 *p, size_t n) {
    static const cdl__u8 sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n < 8 || memcmp(p, sig, 8) != 0) return 1;
    for (size_t at = 8; at + 8 <= n;) {
        const uint64_t len = (uint64_t)p[at] << 24 | (uint64_t)p[at + 1] << 16 | (uint64_t)p[at + 2] << 8 | p[at + 3];
        if (memcmp(p + at + 4, "IDAT", 4) == 0) return len != 0;
        if (len > n - at - 8) return 1; /* cut short: stb fails on its own */
        at += 12 + (size_t)len;
    }
    return 1;
}

/* The size (and channels, if comp is not NULL) in an stb-decodable
 * header, checked; refuses formats coordl does not decode. */
CDL_PRIVATE coordl_status cdl__stb_header(cdl__worker *W, const char *path, const cdl__bytes *in, int *iw, int *ih,
                                     int *comp) {
    const char *other = cdl__unsupported_format(in->p, in->len);
    if (other)
        return cdl__worker_error(W, COORDL_ERR_UNSUPPORTED, "%s: %s images are not decoded (coordl reads JPEG, PNG, "
                                 "BMP, binary PPM/PGM and TGA)", path, other);
    if (in->len > INT_MAX) return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: too large for stb_image", path);
    if (!cdl__pnm_numbers_fit(in->p, in->len))
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: PPM/PGM header number of more than 9 digits", path);
    if (!cdl__png_first_idat_ok(in->p, in->len))
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: PNG whose first IDAT chunk is empty", path);
    cdl__stb_budget b;
    int channels = 0, ok;
    *iw = *ih = 0;
    cdl__stb_enter(&b, W->L, W->L->cfg.max_decode_bytes);
    ok = stbi_info_from_memory(in->p, (int)in->len, iw, ih, &channels);
    cdl__stb_leave(&b, NULL);
    if (comp) *comp = channels;
    if (!ok)
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: not a recognised image (%s)", path,
                                 stbi_failure_reason());
    return cdl__check_image_size(W, path, *iw, *ih);
}
#else /* COORDL_NO_STB: JPEG only. Every other image is refused, naming the switch. */
CDL_PRIVATE coordl_status cdl__stb_header(cdl__worker *W, const char *path, const cdl__bytes *in, int *iw, int *ih,
                                     int *comp) {
    const char *other = cdl__unsupported_format(in->p, in->len);
    *iw = *ih = 0;
    if (comp) *comp = 0;
    return cdl__worker_error(W, COORDL_ERR_UNSUPPORTED, "%s: %s; this build decodes only JPEG (coordl.c was "
                             "compiled with COORDL_NO_STB, without stb_image)", path,
                             other ? other : "not a JPEG");
}
#endif /* COORDL_NO_STB */

#ifndef COORDL_NO_STB
/* stb's pixels in the file's own channel count (1 gray, 2 gray + alpha,
 * 3 RGB, 4 RGBA) to RGB, in place, growing the block through the budget:
 * gray is replicated, alpha dropped. coordl asks stb for the file's own
 * channels and converts here because stb 2.27's conversion of 16-bit PGM
 * to another channel count reads past its buffer (fuzz_image found it). */
static cdl__u8 *cdl__stb_to_rgb(cdl__u8 *img, size_t pixels, int comp) {
    if (comp == 4) { /* shrinks: forward */
        for (size_t i = 0; i < pixels; i++) {
            img[3 * i] = img[4 * i];
            img[3 * i + 1] = img[4 * i + 1];
            img[3 * i + 2] = img[4 * i + 2];
        }
        return img;
    }
    cdl__u8 *p = cdl__stb_realloc(img, pixels * 3);
    if (!p) {
        cdl__stb_free(img);
        return NULL;
    }
    for (size_t i = pixels; i-- > 0;) { /* grows: backward, so no source byte is overwritten before it is read */
        const cdl__u8 v = p[(size_t)comp * i];
        p[3 * i] = p[3 * i + 1] = p[3 * i + 2] = v;
    }
    return p;
}

/* stb 2.27 keeps the palette of a PNG or BMP in an uninitialized stack
 * array and looks pixel indices up in it unchecked: an index past the
 * file's palette copies stack contents into the image (fuzz_image found it;
 * a 2-entry PLTE and index 255 gave 0xAA bytes from an earlier call). An
 * index past the palette is an error by both formats' specifications, and
 * encoders often write short palettes for images that never use them. So a
 * paletted PNG or BMP with fewer than 256 entries is handed to stb with its
 * palette padded to 256 black entries: the same pixels for every valid
 * file, and black, the same on every run, for an index past the palette.
 * Returns a padded copy from the stb budget (stbi_image_free it), NULL when
 * the file needs none (*refused: the budget refused the copy). */

static uint32_t cdl__crc32(const cdl__u8 *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xffffffffu;
}

static uint32_t cdl__be32(const cdl__u8 *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

enum { CDL_PAD_NONE = 0, CDL_PAD_COPY, CDL_PAD_CORRUPT, CDL_PAD_NOMEM };

static int cdl__pad_palette(const cdl__u8 *p, size_t n, cdl__u8 **out, size_t *out_len) {
    static const cdl__u8 sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    *out = NULL;
    if (n >= 33 && memcmp(p, sig, 8) == 0 && memcmp(p + 12, "IHDR", 4) == 0 && p[25] == 3) {
        /* colour type 3: the first PLTE chunk, wherever it is */
        for (size_t at = 8; at + 8 <= n;) {
            const uint32_t len = cdl__be32(p + at);
            if (len > n - at - 8) return CDL_PAD_NONE; /* cut short: stb fails on its own */
            if (memcmp(p + at + 4, "IEND", 4) == 0) return CDL_PAD_NONE;
            if (memcmp(p + at + 4, "PLTE", 4) != 0) {
                at += 12 + (size_t)len;
                continue;
            }
            if (len >= 768 || len % 3 != 0 || len + 12 > n - at) return CDL_PAD_NONE; /* full, or refused by stb */
            const size_t old = (size_t)len + 12, grown = 768 + 12; /* the chunk with its CRC */
            cdl__u8 *q = cdl__stb_malloc(n - old + grown);
            if (!q) return CDL_PAD_NOMEM;
            cdl__u8 *c = q + at;
            memcpy(q, p, at);
            c[0] = 0; c[1] = 0; c[2] = 768 >> 8; c[3] = 768 & 255;
            memcpy(c + 4, "PLTE", 4);
            memcpy(c + 8, p + at + 8, len);
            memset(c + 8 + len, 0, 768 - len);
            const uint32_t crc = cdl__crc32(c + 4, 4 + 768);
            c[776] = (cdl__u8)(crc >> 24); c[777] = (cdl__u8)(crc >> 16);
            c[778] = (cdl__u8)(crc >> 8); c[779] = (cdl__u8)crc;
            memcpy(c + grown, p + at + old, n - at - old);
            *out = q;
            *out_len = n - old + grown;
            return CDL_PAD_COPY;
        }
        return CDL_PAD_NONE;
    }
    if (n >= 2 && p[0] == 'B' && p[1] == 'M') {
        /* as stb reads it: the palette right after the header, its size
         * from the pixel offset, entries of 3 bytes (OS/2 header) or 4;
         * stb reads 0 past the end of the file, and so does this */
        cdl__u8 h[30] = {0};
        memcpy(h, p, n < sizeof h ? n : sizeof h);
        const uint32_t off = cdl__le32(h + 10), hsz = cdl__le32(h + 14);
        if (hsz != 12 && hsz != 40 && hsz != 56 && hsz != 108 && hsz != 124) return CDL_PAD_NONE; /* refused by stb */
        const uint32_t bpp = hsz == 12 ? cdl__le16(h + 24) : cdl__le16(h + 28), k = hsz == 12 ? 3 : 4;
        if (bpp >= 16 || off > (uint32_t)INT_MAX) return CDL_PAD_NONE; /* no palette, or refused by stb */
        /* stb's count, in its int arithmetic: (off - 38) / 3 truncated for
         * OS/2, (off - 14 - hsz) >> 2 (a floor) otherwise */
        const int64_t d = hsz == 12 ? (int64_t)off - 38 : (int64_t)off - 14 - hsz;
        const int64_t psize = hsz == 12 ? d / 3 : d >= 0 ? d / 4 : -((-d + 3) / 4);
        if (psize < 0) return CDL_PAD_CORRUPT; /* stb would read no entry and then use them all */
        const uint64_t end = 14u + hsz + (uint64_t)psize * k; /* entries follow the header */
        if (psize == 0 || psize >= 256 || end > n) return CDL_PAD_NONE; /* refused by stb, full, or cut short */
        const size_t add = (size_t)(256 - psize) * k;
        if (off > (uint32_t)INT_MAX - add) return CDL_PAD_NONE;
        cdl__u8 *q = cdl__stb_malloc(n + add);
        if (!q) return CDL_PAD_NOMEM;
        memcpy(q, p, (size_t)end);
        memset(q + end, 0, add);
        memcpy(q + end + add, p + end, n - (size_t)end);
        const uint32_t noff = off + (uint32_t)add;
        q[10] = (cdl__u8)noff; q[11] = (cdl__u8)(noff >> 8); q[12] = (cdl__u8)(noff >> 16); q[13] = (cdl__u8)(noff >> 24);
        *out = q;
        *out_len = n + add;
        return CDL_PAD_COPY;
    }
    return CDL_PAD_NONE;
}

/* PNG, BMP, binary PPM/PGM, TGA (and JPEG without libjpeg): the header is
 * checked and the crop drawn first; stb then decodes the whole image into
 * a buffer it allocates under the budget left after coordl's window. */
CDL_PRIVATE coordl_status cdl__decode_stb(cdl__worker *W, const char *path, const cdl__bytes *in,
                                     uint64_t epoch, uint64_t id, void *dst) {
    coordl *L = W->L;
    const uint64_t t0 = cdl__now_ns();
    int iw, ih, channels;
    coordl_status rc = cdl__stb_header(W, path, in, &iw, &ih, &channels);
    if (rc != COORDL_OK) return rc;
    cdl__geom g;
    cdl__plan_row(W, epoch, id, iw, ih, &g);
    cdl__axis ax, ay;
    rc = cdl__tables_for(W, &g, &ax, &ay);
    if (rc != COORDL_OK) return cdl__name_error(W, path, rc);
    /* stb's output in the file's channels, then RGB when that differs */
    const uint64_t pixels = (uint64_t)iw * (uint64_t)ih, window = cdl__window_bytes(&g, &ax, &ay);
    const uint64_t image = pixels * (uint64_t)(channels > 0 ? channels : 3) + (channels != 3 ? pixels * 3 : 0);
    if (image + window > L->cfg.max_decode_bytes) return cdl__over_decode_limit(W, path, "at least ", image + window);
    cdl__stb_budget b;
    int w2 = 0, h2 = 0, comp = 0;
    cdl__stb_enter(&b, L, L->cfg.max_decode_bytes - window);
    cdl__u8 *padded = NULL, *img = NULL;
    size_t plen = 0;
    const int pad = cdl__pad_palette(in->p, in->len, &padded, &plen);
    if (pad == CDL_PAD_CORRUPT)
        rc = cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: BMP pixel offset inside its header", path);
    else if (pad == CDL_PAD_NONE || (pad == CDL_PAD_COPY && plen <= INT_MAX))
        img = stbi_load_from_memory(padded ? padded : in->p, padded ? (int)plen : (int)in->len, &w2, &h2, &comp, 0);
    cdl__stb_free(padded);
    if (img && (w2 != iw || h2 != ih || comp < 1 || comp > 4)) { /* never resample past the buffer */
        stbi_image_free(img);
        img = NULL;
        b.refused = 0;
        rc = cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: the decoder gave %dx%d x %d for a %dx%d header", path, w2,
                               h2, comp, iw, ih);
    }
    if (img && comp != 3) img = cdl__stb_to_rgb(img, (size_t)pixels, comp);
    cdl__stb_leave(&b, img);
    if (!img) {
        if (rc != COORDL_OK) return rc;
        if (b.refused) return cdl__over_decode_limit(W, path, "more than ", b.refused + window);
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: cannot decode: %s", path, stbi_failure_reason());
    }
    const uint64_t t1 = cdl__now_ns();
    W->row.decode_ns += t1 - t0;
    /* straight from stb's buffer: the resampler reads no byte past a row's
     * last pixel */
    cdl__resample(L, W, img, (size_t)iw * 3, 0, 0, &ax, &ay, &g, dst);
    stbi_image_free(img);
    W->row.augment_ns += cdl__now_ns() - t1;
    return COORDL_OK;
}
#else
CDL_PRIVATE coordl_status cdl__decode_stb(cdl__worker *W, const char *path, const cdl__bytes *in,
                                     uint64_t epoch, uint64_t id, void *dst) {
    int iw, ih;
    (void)epoch, (void)id, (void)dst;
    return cdl__stb_header(W, path, in, &iw, &ih, NULL);
}
#endif /* COORDL_NO_STB */
/* ---- src/jpeg.c -------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * jpeg.c - libjpeg decode and JPEG random access.
 *
 * Owns:  the worker's libjpeg objects (W->jd, W->jc and their error
 *        managers); ROI and DCT-scaled decode, restart-marker rewrites and
 *        spliced crops
 * Lock:  none: a worker's decoder is its own
 * Calls: status, worker, jpeg_layout, plan, resample, image (lower layers
 *        only: src/modules.txt; tools/check-layers.py checks this line).
 */

#ifndef COORDL_NO_JPEGTURBO
CDL_PRIVATE void cdl__jpeg_scan_limit(j_common_ptr cinfo) {
    if (cinfo->is_decompressor && ((j_decompress_ptr)cinfo)->input_scan_number > CDL_JPEG_MAX_SCANS) {
        struct cdl__jpeg_err *e = (struct cdl__jpeg_err *)cinfo->err;
        snprintf(e->msg, sizeof e->msg, "more than %d scans", CDL_JPEG_MAX_SCANS);
        longjmp(e->jump, 1);
    }
}

/* What libjpeg will allocate for this decode beyond small tables: the
 * whole-image coefficient arrays of a multi-scan (progressive or
 * non-interleaved) file, 128 bytes per block, and its strip buffers (a
 * few block rows across the image; an estimate). After
 * jpeg_calc_output_dimensions. */
static uint64_t cdl__jpeg_need(j_decompress_ptr jd) {
    uint64_t need = 0;
    for (int c = 0; c < jd->num_components; c++) {
        const jpeg_component_info *ci = &jd->comp_info[c];
        if (jpeg_has_multiple_scans(jd)) {
            const uint64_t bw = (ci->width_in_blocks + (JDIMENSION)ci->h_samp_factor - 1) / (JDIMENSION)ci->h_samp_factor *
                                (JDIMENSION)ci->h_samp_factor;
            const uint64_t bh = (ci->height_in_blocks + (JDIMENSION)ci->v_samp_factor - 1) / (JDIMENSION)ci->v_samp_factor *
                                (JDIMENSION)ci->v_samp_factor;
            need += bw * bh * sizeof(JBLOCK);
        }
        need += (uint64_t)ci->width_in_blocks * DCTSIZE * (uint64_t)ci->v_samp_factor * DCTSIZE * 3;
    }
    need += (uint64_t)jd->output_width * 4 * (uint64_t)jd->max_v_samp_factor * DCTSIZE * 2;
    return need;
}

CDL_PRIVATE void cdl__jpeg_error_exit(j_common_ptr cinfo) {
    struct cdl__jpeg_err *e = (struct cdl__jpeg_err *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, e->msg);
    longjmp(e->jump, 1);
}

CDL_PRIVATE void cdl__jpeg_emit_message(j_common_ptr cinfo, int level) {
    struct cdl__jpeg_err *e = (struct cdl__jpeg_err *)cinfo->err;
    if (level >= 0) return; /* trace messages */
    int code = cinfo->err->msg_code;
    /* Data that ends early or is damaged would otherwise decode as grey:
     * report it as a corrupt sample. Extraneous bytes are harmless. */
    if (code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER || code == JWRN_HUFF_BAD_CODE ||
        code == JWRN_MUST_RESYNC) {
        if (!e->fatal_warning) (*cinfo->err->format_message)(cinfo, e->msg);
        e->fatal_warning = 1;
    }
    if (code != JWRN_EXTRANEOUS_DATA) e->guessed = 1;
    cinfo->err->num_warnings++;
}

static int cdl__jpeg_has_eoi(const cdl__u8 *p, size_t len, size_t from) {
    /* 0xFF 0xD9 cannot occur inside entropy-coded data (0xFF is stuffed),
     * so its absence after the first scan means the file was cut short. */
    for (size_t i = len; i >= from + 2; i--)
        if (p[i - 2] == 0xFF && p[i - 1] == 0xD9) return 1;
    return 0;
}

static void cdl__cmyk_row_to_rgb(const cdl__u8 *in, cdl__u8 *out, int n, int inverted) {
    for (int x = 0; x < n; x++) {
        int c = in[4 * x], m = in[4 * x + 1], y = in[4 * x + 2], k = in[4 * x + 3];
        if (!inverted) { c = 255 - c; m = 255 - m; y = 255 - y; k = 255 - k; }
        /* now "ink absent" values: R = (255 - C)(255 - K) / 255 */
        out[3 * x] = (cdl__u8)((c * k + 127) / 255);
        out[3 * x + 1] = (cdl__u8)((m * k + 127) / 255);
        out[3 * x + 2] = (cdl__u8)((y * k + 127) / 255);
    }
}

/* Pixels of context the chroma upsampler reads around a decoded region
 * (after jpeg_calc_output_dimensions). libjpeg-turbo's fancy upsampling
 * (h2v1, h2v2) takes each output pixel from its chroma sample and the
 * nearest neighbouring one, so an edge pixel needs the chroma sample one
 * output pixel beyond it; jpeg_skip_scanlines into the middle of a chroma
 * row pair needs one row more. Measured over every region of 4:2:0, 4:2:2,
 * 4:4:0, 4:1:1, 4:4:4, gray, CMYK and YCCK sources at each DCT scale: 2
 * pixels make every region equal to a full decode's, 1 left 0.1% of them
 * off (tests/test_jpeg_exact.c). At 1/8 libjpeg does not upsample fancily
 * (and at 1/2 and 1/4 4:2:0 chroma comes out of the IDCT at full size), so
 * no context is needed there; the margin is kept for every scale below 1/8
 * since it costs one more iMCU only when the crop ends near one. */
static int cdl__jpeg_context_margin(const struct jpeg_decompress_struct *jd, int d) {
    if (d >= 8) return 0;
    for (int c = 0; c < jd->num_components; c++)
        if (jd->comp_info[c].h_samp_factor != jd->max_h_samp_factor ||
            jd->comp_info[c].v_samp_factor != jd->max_v_samp_factor)
            return 2;
    return 0;
}

/* A component's DCT scaled size and the smallest one (after
 * jpeg_calc_output_dimensions), under either libjpeg API. */
#if JPEG_LIB_VERSION >= 70
#define CDL_JPEG_SCALED_W(ci) ((ci)->DCT_h_scaled_size)
#define CDL_JPEG_SCALED_H(ci) ((ci)->DCT_v_scaled_size)
#define CDL_JPEG_MIN_SCALED_W(jd) ((jd)->min_DCT_h_scaled_size)
#define CDL_JPEG_MIN_SCALED_H(jd) ((jd)->min_DCT_v_scaled_size)
#else
#define CDL_JPEG_SCALED_W(ci) ((ci)->DCT_scaled_size)
#define CDL_JPEG_SCALED_H(ci) ((ci)->DCT_scaled_size)
#define CDL_JPEG_MIN_SCALED_W(jd) ((jd)->min_DCT_scaled_size)
#define CDL_JPEG_MIN_SCALED_H(jd) ((jd)->min_DCT_scaled_size)
#endif

/* Whether jpeg_crop_scanline gives a full decode's pixels for this layout
 * at this scale (after jpeg_calc_output_dimensions); where it does not,
 * a plain decode takes the whole width. The rule is measured, not
 * derived: with libjpeg-turbo 2.1, over every 3- and 4-component layout
 * with sampling factors 1..4 (311 and 68 of them) at each DCT scale,
 * random crops widened by cdl__jpeg_context_margin came out equal to a
 * full decode except where
 *  - components are upsampled by two different ratios (luma 4x1 with
 *    chroma 2x1 and 1x1: 1 crop in 700 off even at 1/1), or
 *  - fancy upsampling is on (below 1/8) and a component is both enlarged
 *    by the IDCT and still upsampled: 4x2 (4:1:0) and 2x4 luma at 1/2
 *    and 1/4 (chroma comes out of the IDCT at twice its size, then is
 *    upsampled 2x1): most crops off, by up to a whole colour.
 * The rule below refuses both; it also refuses some layouts that were
 * exact (4x1 with chroma 2x2 at 1/1), which costs only speed.
 * jpeg_skip_scanlines was exact in every case. tests/test_jpeg_exact.c
 * holds the layouts found in files. */
static int cdl__jpeg_crop_is_exact(const struct jpeg_decompress_struct *jd) {
    const int min_w = CDL_JPEG_MIN_SCALED_W(jd), min_h = CDL_JPEG_MIN_SCALED_H(jd);
    int up_h = 0, up_v = 0; /* the factors of the upsampled components */
    for (int c = 0; c < jd->num_components; c++) {
        const jpeg_component_info *ci = &jd->comp_info[c];
        if (ci->h_samp_factor == jd->max_h_samp_factor && ci->v_samp_factor == jd->max_v_samp_factor) continue;
        if (up_h && (ci->h_samp_factor != up_h || ci->v_samp_factor != up_v)) return 0;
        up_h = ci->h_samp_factor;
        up_v = ci->v_samp_factor;
        const int sw = CDL_JPEG_SCALED_W(ci), sh = CDL_JPEG_SCALED_H(ci);
        const int enlarged = sw > min_w || sh > min_h;
        const int upsampled = ci->h_samp_factor * sw != jd->max_h_samp_factor * min_w ||
                              ci->v_samp_factor * sh != jd->max_v_samp_factor * min_h;
        if (min_w > 1 && enlarged && upsampled) return 0;
    }
    return 1;
}

/* The body that may longjmp: only plain locals that are not changed after
 * setjmp, per C11 7.13.2.1. */
/* A libjpeg destination that writes into worker scratch and stops the
 * rewrite (through the error handler) when the output outgrows the room
 * the item has: nothing is allocated behind coordl's back. */
CDL_PRIVATE void cdl__jdest_init(j_compress_ptr c) {
    struct cdl__jdest *d = (struct cdl__jdest *)c->dest;
    d->pub.next_output_byte = d->buf;
    d->pub.free_in_buffer = d->cap;
}
CDL_PRIVATE boolean cdl__jdest_full(j_compress_ptr c) {
    ((struct cdl__jdest *)c->dest)->overflow = 1;
    ERREXIT(c, JERR_BUFFER_SIZE);
    return FALSE;
}
CDL_PRIVATE void cdl__jdest_term(j_compress_ptr c) { (void)c; }

/* The Huffman tables a baseline source uses are libjpeg's standard ones
 * (what jpeg_copy_critical_parameters put in the fresh compress object):
 * then a standard-table rewrite reproduces the source's code lengths. */
static int cdl__same_huff(const JHUFF_TBL *a, const JHUFF_TBL *b) {
    if (!a || !b || memcmp(a->bits, b->bits, sizeof a->bits) != 0) return 0;
    int n = 0;
    for (int i = 1; i <= 16; i++) n += a->bits[i];
    return n <= 256 && memcmp(a->huffval, b->huffval, (size_t)n) == 0;
}
static int cdl__standard_tables(const struct jpeg_decompress_struct *jd, const struct jpeg_compress_struct *jc) {
    if (jd->progressive_mode || jd->arith_code) return 0;
    for (int c = 0; c < jd->num_components; c++) {
        const jpeg_component_info *s = &jd->comp_info[c], *t = &jc->comp_info[c];
        if (s->dc_tbl_no < 0 || s->dc_tbl_no >= NUM_HUFF_TBLS || s->ac_tbl_no < 0 || s->ac_tbl_no >= NUM_HUFF_TBLS ||
            t->dc_tbl_no < 0 || t->dc_tbl_no >= NUM_HUFF_TBLS || t->ac_tbl_no < 0 || t->ac_tbl_no >= NUM_HUFF_TBLS ||
            !cdl__same_huff(jd->dc_huff_tbl_ptrs[s->dc_tbl_no], jc->dc_huff_tbl_ptrs[t->dc_tbl_no]) ||
            !cdl__same_huff(jd->ac_huff_tbl_ptrs[s->ac_tbl_no], jc->ac_huff_tbl_ptrs[t->ac_tbl_no]))
            return 0;
    }
    return 1;
}

/* Fills the row index of a rewrite in W->rw: walks every segment, checking
 * each restart marker's number, so that a splice can trust the layout. */
static int cdl__rst_index(cdl__u8 *p, size_t len, cdl__jpeg_layout *lay) {
    if (!cdl__jpeg_walk(p, len, lay) || !lay->index_off || lay->interval == 0 ||
        lay->mcus_per_row % lay->interval != 0)
        return 0;
    const uint32_t segs_per_row = lay->mcus_per_row / lay->interval;
    const uint64_t nseg = (uint64_t)segs_per_row * lay->mcu_rows;
    if (lay->index_len != 4 + CDL_RST_HEAD + 4u * (size_t)lay->mcu_rows) return 0;
    cdl__u8 *tab = p + lay->index_off + 4 + CDL_RST_HEAD;
    size_t at = lay->data_off;
    uint64_t seg = 0;
    for (uint32_t r = 0; r < lay->mcu_rows; r++) {
        const uint64_t off = at - lay->data_off;
        if (off > UINT32_MAX) return 0;
        for (int b = 0; b < 4; b++) tab[4 * r + (uint32_t)b] = (cdl__u8)(off >> (8 * b));
        for (uint32_t s = 0; s < segs_per_row; s++, seg++) {
            for (;;) {
                const cdl__u8 *q = at < len ? memchr(p + at, 0xFF, len - at) : NULL;
                if (!q || q + 1 >= p + len) return 0;
                at = (size_t)(q - p);
                if (q[1] == 0x00) { at += 2; continue; }
                const int want = seg + 1 == nseg ? 0xD9 : 0xD0 + (int)(seg & 7);
                if (q[1] != want) return 0;
                at += 2;
                break;
            }
        }
    }
    return at == len;
}

/* Starts an image on a fresh decompress object. libjpeg keeps the
 * Huffman and quantization tables an image defines in the object for the
 * next one (for abbreviated streams), and fills only empty Huffman slots
 * with the standard tables: so on a reused object a file that uses a table
 * it does not define (Motion-JPEG style, which a fresh object reads with
 * the standard table, or an error for a quantization table) decoded with
 * whatever the worker's previous image had defined, and batches depended
 * on which worker decoded what before (CI's fuzz_random_access found it:
 * a spliced crop's optimized DC table 1 decoding the next file). A
 * destroy and create costs 0.08 us here and reuses the memory just
 * freed; bench/compare_revs.sh showed no change in images/s. Call after setjmp: creating can fail (out of memory), and a half
 * made object is one jpeg_abort and jpeg_destroy accept. */
static void cdl__jpeg_fresh_decoder(cdl__worker *W) {
    struct jpeg_progress_mgr *const progress = W->jd.progress; /* the scan limit (decode.c) */
    jpeg_destroy_decompress(&W->jd);
    jpeg_create_decompress(&W->jd); /* keeps W->jd.err */
    W->jd.progress = progress;
}

/* Whether every coefficient of the image fits what a baseline rewrite can
 * code: |AC| <= 1023 (a 10-bit category) and DC in [-1024, 1023], so that
 * any DC difference, whatever the restart markers around it, is at most
 * 11 bits. A file can hold more: its differences are each legal while the
 * DC values they add up to drift past the range, and a progressive or
 * arithmetic-coded file has no such bound at all. libjpeg decodes such
 * values, but its encoder writes a category with no
 * Huffman code without complaint, and the rewrite would decode to other
 * pixels (CI's fuzz_random_access found it in a grey 50x50 file). Only
 * the blocks the image holds: jpeg_write_coefficients makes the padding
 * blocks of the edge MCUs itself. */
static int cdl__coefficients_codable(struct jpeg_decompress_struct *jd, jvirt_barray_ptr *coefs) {
    for (int c = 0; c < jd->num_components; c++) {
        const jpeg_component_info *ci = &jd->comp_info[c];
        for (JDIMENSION r = 0; r < ci->height_in_blocks; r++) {
            JBLOCKARRAY row = (*jd->mem->access_virt_barray)((j_common_ptr)jd, coefs[c], r, 1, FALSE);
            unsigned out_of_range = 0;
            for (JDIMENSION b = 0; b < ci->width_in_blocks; b++) {
                const JCOEF *k = row[0][b];
                out_of_range |= (unsigned)((int)k[0] + 1024) > 2047u;
                for (int i = 1; i < DCTSIZE2; i++) out_of_range |= (unsigned)((int)k[i] + 1023) > 2046u;
            }
            if (out_of_range) return 0;
        }
    }
    return 1;
}

/* Rewrites the JPEG src into W->rw (see above). `room`: the most bytes the
 * result may take; `small`: use optimized tables whatever the source's (the
 * item has no room to grow). Returns the rewritten length and its layout
 * in *got, or 0 when the source cannot be rewritten (corrupt, unsupported,
 * or too big for the room: then *too_big). */
CDL_PRIVATE size_t cdl__jpeg_rewrite(cdl__worker *W, const cdl__u8 *src, size_t len, size_t room, int small,
                                cdl__jpeg_layout *got, int *too_big) {
    coordl *L = W->L;
    struct jpeg_decompress_struct *jd = &W->jd;
    struct jpeg_compress_struct *jc = &W->jc;
    cdl__jpeg_layout lay;
    *too_big = 0;
    if (!cdl__jpeg_walk(src, len, &lay) || lay.index_off || lay.mcu_rows > CDL_RST_MAX_ROWS ||
        (uint64_t)lay.w * lay.h > L->cfg.max_pixels)
        return 0;
    const uint32_t k = cdl__rst_interval(&lay, len);
    const size_t idx_len = CDL_RST_HEAD + 4u * (size_t)lay.mcu_rows;
    if (!cdl__reserve(L, (void **)&W->rw, &W->rwcap, room + 16) ||
        !cdl__reserve(L, (void **)&W->rwidx, &W->rwidxcap, idx_len))
        return 0;
    memset(W->rwidx, 0, idx_len);
    memcpy(W->rwidx, CDL_RST_TAG, CDL_RST_TAG_LEN);
    W->rwidx[CDL_RST_TAG_LEN] = 1; /* version */
    W->rwidx[12] = (cdl__u8)(k & 0xFF);
    W->rwidx[13] = (cdl__u8)(k >> 8);
    W->rwidx[14] = (cdl__u8)(lay.mcu_rows & 0xFF);
    W->rwidx[15] = (cdl__u8)(lay.mcu_rows >> 8);
    W->jdest.buf = W->rw;
    W->jdest.cap = room;
    W->jdest.overflow = 0;
    W->jerr.fatal_warning = 0;
    W->jerr.guessed = 0;
    W->jc_live = 0;
    if (setjmp(W->jerr.jump)) {
        if (W->jc_live) jpeg_destroy_compress(jc);
        W->jc_live = 0;
        jpeg_abort_decompress(jd);
        *too_big = W->jdest.overflow;
        return 0;
    }
    cdl__jpeg_fresh_decoder(W);
    jpeg_mem_src(jd, src, (unsigned long)len);
    jpeg_read_header(jd, TRUE);
    if (jd->image_width != lay.w || jd->image_height != lay.h || jd->num_components != lay.ncomp ||
        jd->data_precision != 8)
        longjmp(W->jerr.jump, 1);
    /* the whole image's coefficients, within max_decode_bytes like a decode */
    uint64_t need = room;
    for (int c = 0; c < jd->num_components; c++)
        need += (uint64_t)(jd->comp_info[c].width_in_blocks + 4) * (jd->comp_info[c].height_in_blocks + 4) *
                sizeof(JBLOCK);
    if (need > L->cfg.max_decode_bytes) longjmp(W->jerr.jump, 1);
    const uint64_t left = L->cfg.max_decode_bytes - room;
    jd->mem->max_memory_to_use = left > (uint64_t)LONG_MAX ? LONG_MAX : (long)left;
    jvirt_barray_ptr *coefs = jpeg_read_coefficients(jd);
    /* Any warning, not only those that make a decode fail: libjpeg made
     * something up (data ending early read as zeros, a bad arithmetic
     * code ending its segment, a scan out of order), and a plain ROI
     * decode that stops above the damage never sees it. A rewrite would
     * write the guess into the file as data, so such a file stays as it
     * is. Extraneous bytes between segments are the one exception: the
     * decoder has finished the segment's blocks and skips them, and the
     * rewrite just leaves them out. */
    if (W->jerr.fatal_warning || W->jerr.guessed || !coefs) longjmp(W->jerr.jump, 1);
    if (!cdl__coefficients_codable(jd, coefs)) longjmp(W->jerr.jump, 1);
    jc->err = &W->jerr.pub;
    jpeg_create_compress(jc);
    W->jc_live = 1;
    jc->dest = &W->jdest.pub;
    jpeg_copy_critical_parameters(jd, jc);
    /* the colour interpretation stays: a CMYK file without an Adobe
     * marker holds plain ink amounts, with one inverted (coordl's rule) */
    if (jd->jpeg_color_space == JCS_CMYK) jc->write_Adobe_marker = jd->saw_Adobe_marker;
    jc->optimize_coding = (boolean)(small || !cdl__standard_tables(jd, jc));
    jc->restart_interval = k;
    jpeg_write_coefficients(jc, coefs);
    jpeg_write_marker(jc, JPEG_APP0 + 15, W->rwidx, (unsigned)idx_len);
    jpeg_finish_compress(jc);
    const size_t out = W->jdest.cap - W->jdest.pub.free_in_buffer;
    jpeg_destroy_compress(jc);
    W->jc_live = 0;
    jpeg_abort_decompress(jd);
    if (!cdl__rst_index(W->rw, out, got) || got->w != lay.w || got->h != lay.h || got->ncomp != lay.ncomp ||
        got->mcu_w != lay.mcu_w || got->mcu_h != lay.mcu_h || got->interval != k ||
        (got->sof != 0xC0 && got->sof != 0xC1))
        return 0;
    return out;
}

/* Builds in W->splice a JPEG of the segments of the rewritten item p that
 * cover pixels [x0, x1) x [y0, y1) of its decode at 1/d (see above), and
 * says where the span starts in those pixels. Returns its length, or 0
 * when p's segments are not where its index says (then the caller decodes
 * p as a plain JPEG: it is one). */
static size_t cdl__jpeg_splice(cdl__worker *W, const cdl__u8 *p, size_t len, const cdl__jpeg_layout *lay, int d,
                               int x0, int x1, int y0, int y1, int *ox, int *oy) {
    const uint32_t k = lay->interval, spr = lay->mcus_per_row / k;
    const int smw = (int)lay->mcu_w / d, smh = (int)lay->mcu_h / d; /* MCU at 1/d */
    /* one pixel of upsampling context, where the image has it */
    const int m = lay->subsampled && d < 8 ? 1 : 0;
    x0 = x0 > m ? x0 - m : 0;
    y0 = y0 > m ? y0 - m : 0;
    x1 += m;
    y1 += m;
    uint32_t s0 = (uint32_t)(x0 / smw) / k, s1 = ((uint32_t)((x1 + smw - 1) / smw) + k - 1) / k;
    uint32_t r0 = (uint32_t)(y0 / smh), r1 = (uint32_t)((y1 + smh - 1) / smh);
    if (s1 > spr) s1 = spr;
    if (r1 > lay->mcu_rows) r1 = lay->mcu_rows;
    /* libjpeg upsamples a component at most 2 samples wide by replication,
     * not fancily: keep the span 2 MCUs wide (or the whole width) */
    const uint64_t seg_w = (uint64_t)k * lay->mcu_w;
    const uint64_t min_w = lay->hsub && d < 8 ? (2 * lay->mcu_w < lay->w ? 2 * lay->mcu_w : lay->w) : 1;
    for (;;) {
        const uint64_t a = s0 * seg_w, b = s1 * seg_w < lay->w ? s1 * seg_w : lay->w;
        if (b - a >= min_w || (s0 == 0 && s1 == spr)) break;
        if (s1 < spr) s1++; else s0--;
    }
    if (s0 >= s1 || r0 >= r1) return 0;
    const uint32_t px0 = (uint32_t)(s0 * seg_w), py0 = r0 * lay->mcu_h;
    const uint32_t px1 = s1 * seg_w < lay->w ? (uint32_t)(s1 * seg_w) : lay->w;
    const uint32_t py1 = r1 * lay->mcu_h < lay->h ? r1 * lay->mcu_h : lay->h;
    const uint64_t total = (uint64_t)(s1 - s0) * (r1 - r0);
    /* headers + entropy bytes of the span + EOI: never more than len */
    const size_t cap = len + 16;
    if (!cdl__reserve(W->L, (void **)&W->splice, &W->splicecap, cap)) return 0;
    cdl__u8 *out = W->splice;
    size_t o = 0;
    out[o++] = 0xFF;
    out[o++] = 0xD8;
    const size_t hdr_end = lay->data_off; /* through the SOS header */
    memcpy(out + o, p + 2, lay->index_off - 2);
    o += lay->index_off - 2;
    memcpy(out + o, p + lay->index_off + lay->index_len, hdr_end - lay->index_off - lay->index_len);
    o += hdr_end - lay->index_off - lay->index_len;
    const size_t sof = lay->sof_off > lay->index_off ? lay->sof_off - lay->index_len : lay->sof_off;
    out[sof + 5] = (cdl__u8)((py1 - py0) >> 8);
    out[sof + 6] = (cdl__u8)(py1 - py0);
    out[sof + 7] = (cdl__u8)((px1 - px0) >> 8);
    out[sof + 8] = (cdl__u8)(px1 - px0);
    const cdl__u8 *tab = p + lay->index_off + 4 + CDL_RST_HEAD;
    uint64_t g = 0;
    for (uint32_t r = r0; r < r1; r++) {
        size_t at = lay->data_off + ((size_t)tab[4 * r] | (size_t)tab[4 * r + 1] << 8 |
                                     (size_t)tab[4 * r + 2] << 16 | (size_t)tab[4 * r + 3] << 24);
        for (uint32_t s = 0; s < s1; s++) {
            const size_t start = at;
            for (;;) { /* the marker that ends this segment (0xFF00 is a stuffed byte) */
                const cdl__u8 *q = at < len ? memchr(p + at, 0xFF, len - at) : NULL;
                if (!q || q + 1 >= p + len) return 0;
                at = (size_t)(q - p);
                if (q[1] == 0x00) { at += 2; continue; }
                if (!((q[1] >= 0xD0 && q[1] <= 0xD7) || q[1] == 0xD9)) return 0;
                break;
            }
            if (s >= s0) {
                if (o + (at - start) + 4 > cap) return 0;
                memcpy(out + o, p + start, at - start);
                o += at - start;
                if (++g < total) {
                    out[o++] = 0xFF;
                    out[o++] = (cdl__u8)(0xD0 + ((g - 1) & 7));
                }
            }
            at += 2;
        }
    }
    out[o++] = 0xFF;
    out[o++] = 0xD9;
    *ox = (int)(px0 / (uint32_t)d);
    *oy = (int)(py0 / (uint32_t)d);
    return o;
}

/* A decode's error exits (libjpeg's errors longjmp to W->jerr.jump; each
 * entry below sets it before its first libjpeg call). */
static coordl_status cdl__jpeg_failed(cdl__worker *W, const char *path) {
    jpeg_abort_decompress(&W->jd);
    if (W->jerr.pub.msg_code == JERR_NO_BACKING_STORE) /* over max_memory_to_use */
        return cdl__over_decode_limit(W, path, "more than ", W->L->cfg.max_decode_bytes);
    return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: not a decodable JPEG: %s", path, W->jerr.msg);
}

/* The decode both entries share, once W->jd has read a header (the item's
 * own, or a splice's) and the crop's tables are made: budget libjpeg's
 * memory, decode the rows and columns the resampler reads, and resample
 * them into dst. (ox, oy): where the decoded image's pixel (0, 0) lies in
 * the whole image at 1/d (a splice starts at the crop's segments; a plain
 * decode at 0, 0). The exactness rule lives here: a plain decode widens
 * the region by the chroma upsampler's context (cdl__jpeg_context_margin)
 * so its edge pixels equal a full decode's; a splice carries that margin
 * in the segments it kept. */
static coordl_status cdl__jpeg_decode_crop(cdl__worker *W, const char *path, void *dst, const cdl__geom *g,
                                           const cdl__axis *ax, const cdl__axis *ay, int d, int ox, int oy,
                                           int spliced, int cmyk, uint64_t t0, uint64_t cpu0) {
    coordl *L = W->L;
    struct jpeg_decompress_struct *jd = &W->jd;
    /* Memory, before libjpeg allocates any: coordl's region (the crop's
     * columns, widened to whole iMCUs by jpeg_crop_scanline, times its
     * rows) and window, plus libjpeg's need. libjpeg's own allocations
     * cannot go through the hooks; max_memory_to_use makes it fail (no
     * backing store) rather than realize coefficient arrays past what is
     * left of the budget. */
    const int crop_exact = spliced || cdl__jpeg_crop_is_exact(jd);
    {
        const uint64_t imcu = (uint64_t)jd->max_h_samp_factor * DCTSIZE;
        uint64_t cols = (uint64_t)(ax->hi - ax->lo) + 2 * imcu;
        if (cols > jd->output_width || !crop_exact) cols = jd->output_width;
        /* rows: a splice's from its top; the ROI's 2 rows of context */
        const uint64_t rows = (uint64_t)(spliced ? ay->hi - oy : ay->hi - ay->lo + 2);
        const uint64_t region = cols * 3 * rows + 64 + (cmyk ? cols * 4 + 64 : 0);
        const uint64_t window = cdl__window_bytes(g, ax, ay), need = cdl__jpeg_need(jd) + region + window;
        const uint64_t limit = L->cfg.max_decode_bytes;
        if (need > limit) {
            jpeg_abort_decompress(jd);
            return cdl__over_decode_limit(W, path, "", need);
        }
        const uint64_t left = limit - region - window;
        jd->mem->max_memory_to_use = left > (uint64_t)LONG_MAX ? LONG_MAX : (long)left;
    }
    jpeg_start_decompress(jd);
    /* The region the resampler reads, widened where the chroma upsampler
     * needs context: decoded to end exactly at the crop, libjpeg treats the
     * region's edge as the image's and replicates the edge chroma sample,
     * so edge pixels differed from a full decode (by up to ~15 levels) for
     * 4:2:0 and 4:2:2 sources. A splice has its margins already. */
    const int m = spliced ? 0 : cdl__jpeg_context_margin(jd, d);
    const int x0 = ax->lo - ox > m ? ax->lo - ox - m : 0, y0 = spliced ? 0 : ay->lo > m ? ay->lo - m : 0;
    const int x1 = ax->hi - ox + m < (int)jd->output_width ? ax->hi - ox + m : (int)jd->output_width;
    JDIMENSION xoff = (JDIMENSION)x0, cw = (JDIMENSION)(x1 - x0);
    if (spliced || !crop_exact) xoff = 0, cw = jd->output_width; /* a splice is the crop's columns already */
    else if (cw < jd->output_width) jpeg_crop_scanline(jd, &xoff, &cw);
    const size_t stride = (size_t)cw * 3;
    const int rows = ay->hi - oy - y0;
    if (!cdl__reserve(L, (void **)&W->pix, &W->pixcap, stride * (size_t)rows + 64) ||
        (cmyk && !cdl__reserve(L, (void **)&W->row4, &W->row4cap, (size_t)cw * 4 + 64))) {
        jpeg_abort_decompress(jd);
        return cdl__worker_error(W, COORDL_ERR_NOMEM, "%s: out of memory for the decoded region; lower max_decode_bytes or max_pixels", path);
    }
    if (y0 > 0) jpeg_skip_scanlines(jd, (JDIMENSION)y0);
    for (int r = 0; r < rows;) {
        cdl__u8 *target = cmyk ? W->row4 : W->pix + (size_t)r * stride;
        JSAMPROW rowp[1] = {target};
        JDIMENSION got = jpeg_read_scanlines(jd, rowp, 1);
        if (got != 1) break;
        if (cmyk) cdl__cmyk_row_to_rgb(W->row4, W->pix + (size_t)r * stride, (int)cw, jd->saw_Adobe_marker);
        r++;
    }
    const int complete = jd->output_scanline >= (JDIMENSION)(ay->hi - oy);
    jpeg_abort_decompress(jd); /* rows below the crop are never decoded */
    if (W->jerr.fatal_warning || !complete)
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: corrupt JPEG data: %s", path,
                                 W->jerr.fatal_warning ? W->jerr.msg : "rows missing");
    uint64_t t1 = cdl__now_ns();
    W->row.decode_ns += t1 - t0;
    W->row.jpeg_spliced += (uint64_t)spliced;
    cdl__budget_decode(W, spliced, cdl__thread_cpu_ns() - cpu0);
    cdl__resample(L, W, W->pix, stride, ox + (int)xoff, oy + y0, ax, ay, g, dst);
    W->row.augment_ns += cdl__now_ns() - t1;
    return COORDL_OK;
}

/* The image's size within the decode bounds, else the decode ends. */
static coordl_status cdl__jpeg_check_size(cdl__worker *W, const char *path, int iw, int ih) {
    const coordl_status rc = cdl__check_image_size(W, path, iw, ih);
    if (rc != COORDL_OK) jpeg_abort_decompress(&W->jd);
    return rc;
}

/* Sets the output of a read header: 1/d DCT scaling, RGB (CMYK kept for
 * cdl__cmyk_row_to_rgb), the exact IDCT, no block smoothing. Returns
 * whether it is CMYK. Block smoothing is libjpeg's guess at the AC
 * coefficients a progressive file that ends early (fewer scans than it
 * needs) does not hold, made from the neighbouring blocks' DC values: a
 * crop's edge blocks (ROI or spliced) have other neighbours than in a
 * full decode, and a rewrite, baseline, has nothing left to guess, so
 * with it the same file gave other pixels with random access on. coordl
 * decodes the coefficients a file holds. */
static int cdl__jpeg_set_output(struct jpeg_decompress_struct *jd, int d) {
    const int cmyk = jd->jpeg_color_space == JCS_CMYK || jd->jpeg_color_space == JCS_YCCK;
    jd->scale_num = 1;
    jd->scale_denom = (unsigned)d;
    jd->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    jd->dct_method = JDCT_ISLOW;
    jd->do_block_smoothing = FALSE;
    jpeg_calc_output_dimensions(jd);
    return cmyk;
}

/* A plain JPEG (the bytes as read): its header, the crop drawn on its
 * size, the DCT scale, then only the crop's region decoded (ROI). */
static coordl_status cdl__decode_jpeg_plain(cdl__worker *W, const char *path, const cdl__bytes *in, uint64_t epoch,
                                            uint64_t id, void *dst) {
    struct jpeg_decompress_struct *jd = &W->jd;
    const uint64_t t0 = cdl__now_ns(), cpu0 = cdl__thread_cpu_ns();
    W->jerr.fatal_warning = 0;
    if (setjmp(W->jerr.jump)) return cdl__jpeg_failed(W, path);
    W->jerr.pub.msg_code = 0;
    cdl__jpeg_fresh_decoder(W);
    jpeg_mem_src(jd, in->p, (unsigned long)in->len);
    jpeg_read_header(jd, TRUE);
    const int iw = (int)jd->image_width, ih = (int)jd->image_height;
    coordl_status rc = cdl__jpeg_check_size(W, path, iw, ih);
    if (rc != COORDL_OK) return rc;
    if (!cdl__jpeg_has_eoi(in->p, in->len, in->len - jd->src->bytes_in_buffer)) {
        jpeg_abort_decompress(jd);
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: truncated JPEG (no end-of-image marker)", path);
    }
    cdl__geom g;
    cdl__plan_row(W, epoch, id, iw, ih, &g);
    const int d = cdl__choose_dct_denominator(&g);
    const int cmyk = cdl__jpeg_set_output(jd, d);
    cdl__geom_scale(&g, d, (int)jd->output_width, (int)jd->output_height);
    cdl__axis ax, ay;
    if ((rc = cdl__tables_for(W, &g, &ax, &ay)) != COORDL_OK) {
        jpeg_abort_decompress(jd);
        return cdl__name_error(W, path, rc);
    }
    return cdl__jpeg_decode_crop(W, path, dst, &g, &ax, &ay, d, 0, 0, 0, cmyk, t0, cpu0);
}

/* A restart-marker rewrite (its layout in rst): the crop drawn on the
 * size the layout records, then only the segments covering the crop
 * spliced into a JPEG of their own and decoded. Returns 0 when no splice
 * can be made (the caller decodes the bytes as a plain JPEG), else 1 with
 * the decode's status in *rc. */
static int cdl__decode_jpeg_spliced(cdl__worker *W, const char *path, const cdl__bytes *in, uint64_t epoch,
                                    uint64_t id, void *dst, const cdl__jpeg_layout *rst, coordl_status *rc) {
    struct jpeg_decompress_struct *jd = &W->jd;
    const uint64_t t0 = cdl__now_ns(), cpu0 = cdl__thread_cpu_ns();
    W->jerr.fatal_warning = 0;
    if (setjmp(W->jerr.jump)) {
        *rc = cdl__jpeg_failed(W, path);
        return 1;
    }
    W->jerr.pub.msg_code = 0;
    const int iw = (int)rst->w, ih = (int)rst->h;
    if ((*rc = cdl__jpeg_check_size(W, path, iw, ih)) != COORDL_OK) return 1;
    cdl__geom g;
    cdl__plan_row(W, epoch, id, iw, ih, &g);
    const int d = cdl__choose_dct_denominator(&g);
    /* libjpeg's scaled size: jdiv_round_up(w, d) */
    cdl__geom_scale(&g, d, (iw + d - 1) / d, (ih + d - 1) / d);
    cdl__axis ax, ay;
    if ((*rc = cdl__tables_for(W, &g, &ax, &ay)) != COORDL_OK) {
        *rc = cdl__name_error(W, path, *rc);
        return 1;
    }
    int ox = 0, oy = 0; /* where the splice's pixel (0, 0) is, at 1/d */
    const size_t n = cdl__jpeg_splice(W, in->p, in->len, rst, d, ax.lo, ax.hi, ay.lo, ay.hi, &ox, &oy);
    if (!n) return 0;
    cdl__jpeg_fresh_decoder(W);
    jpeg_mem_src(jd, W->splice, (unsigned long)n);
    jpeg_read_header(jd, TRUE);
    const int cmyk = cdl__jpeg_set_output(jd, d);
    if ((int)jd->output_width < ax.hi - ox || (int)jd->output_height < ay.hi - oy) {
        *rc = cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: spliced crop is %ux%u, short of the crop", path,
                                jd->output_width, jd->output_height);
        jpeg_abort_decompress(jd);
        *rc = cdl__name_error(W, path, *rc);
        return 1;
    }
    *rc = cdl__jpeg_decode_crop(W, path, dst, &g, &ax, &ay, d, ox, oy, 1, cmyk, t0, cpu0);
    return 1;
}

/* Decodes what the sample needs and resamples it into dst. rst: the
 * layout of a restart-marker rewrite (in holds one): then only the crop's
 * segments are decoded, spliced into a JPEG of their own; a rewrite no
 * splice can be made of is decoded as the plain JPEG it also is. */
CDL_PRIVATE coordl_status cdl__decode_jpeg(cdl__worker *W, const char *path, const cdl__bytes *in,
                                      uint64_t epoch, uint64_t id, void *dst, const cdl__jpeg_layout *rst) {
    coordl_status rc;
    if (rst && cdl__decode_jpeg_spliced(W, path, in, epoch, id, dst, rst, &rc)) return rc;
    return cdl__decode_jpeg_plain(W, path, in, epoch, id, dst);
}

#endif
/* ---- src/audio.c ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * audio.c - WAV audio.
 *
 * Owns:  nothing: parses a WAV and crops audio_samples frames at an offset
 *        drawn from (seed, epoch, item)
 * Lock:  none
 * Calls: rand, worker (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */

#ifndef COORDL_NO_AUDIO

static const char *cdl__wav_parse(const cdl__u8 *p, size_t len, cdl__wav *w) {
    memset(w, 0, sizeof *w);
    if (len < 12 || memcmp(p, "RIFF", 4) != 0 || memcmp(p + 8, "WAVE", 4) != 0) return "not a RIFF/WAVE file";
    int have_fmt = 0;
    uint32_t block_align = 0;
    size_t at = 12;
    while (at + 8 <= len) {
        const cdl__u8 *ck = p + at;
        uint64_t size = cdl__le32(ck + 4);
        if (memcmp(ck, "fmt ", 4) == 0) {
            if (size < 16 || at + 8 + size > len) return "truncated fmt chunk";
            w->format = cdl__le16(ck + 8);
            w->channels = cdl__le16(ck + 10);
            w->rate = cdl__le32(ck + 12);
            block_align = cdl__le16(ck + 20);
            w->bits = cdl__le16(ck + 22);
            if (w->format == 0xFFFE) {
                if (size < 40) return "truncated WAVE_FORMAT_EXTENSIBLE fmt chunk";
                w->format = cdl__le16(ck + 32); /* first two bytes of the subformat GUID */
            }
            have_fmt = 1;
        } else if (memcmp(ck, "data", 4) == 0) {
            if (!have_fmt) return "data chunk before the fmt chunk";
            if (at + 8 + size > len) return "truncated data chunk";
            if (!((w->format == 1 && w->bits == 16) || (w->format == 3 && w->bits == 32)))
                return "unsupported sample format (coordl reads 16-bit PCM and 32-bit float)";
            if (w->channels == 0 || w->rate == 0 || block_align != w->channels * (w->bits / 8))
                return "inconsistent fmt chunk";
            w->data = ck + 8;
            w->frames = size / block_align;
            return NULL;
        }
        at += 8 + size + (size & 1);
    }
    return have_fmt ? "no data chunk" : "no fmt chunk";
}

/* The item's length in output samples (after resampling to audio_rate),
 * from the header alone: the crop is drawn on it before anything is
 * converted. */
CDL_PRIVATE coordl_status cdl__wav_open(cdl__worker *W, const char *path, const cdl__bytes *in, cdl__wav *wav,
                                   uint64_t *n_out) {
    const char *why = cdl__wav_parse(in->p, in->len, wav);
    if (why) return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: %s", path, why);
    const uint32_t out_rate = W->L->cfg.audio_rate ? W->L->cfg.audio_rate : wav->rate;
    /* frames < 2^31 (a 32-bit data size over >= 2 bytes a frame), so the
     * product stays below 2^63 */
    *n_out = out_rate == wav->rate ? wav->frames : wav->frames * out_rate / wav->rate;
    return COORDL_OK;
}

/* Frame f as one mono sample: the mean of its channels. */
static float cdl__wav_mono(const cdl__wav *w, uint64_t f) {
    const uint32_t ch = w->channels, bps = w->bits / 8;
    const cdl__u8 *s = w->data + f * ch * bps;
    float acc = 0.0f;
    for (uint32_t c = 0; c < ch; c++, s += bps) {
        if (w->format == 1) {
            acc += (float)(int16_t)cdl__le16(s) / 32768.0f;
        } else {
            float v;
            uint32_t u = cdl__le32(s);
            memcpy(&v, &u, 4);
            acc += v;
        }
    }
    return ch == 1 ? acc : acc / (float)ch;
}

/* Crop offset for an item of n samples: uniform from (seed, epoch, item). */
CDL_PRIVATE uint64_t cdl__audio_offset(const coordl *L, uint64_t epoch, uint64_t id, uint64_t n) {
    if (n <= L->cfg.audio_samples) return 0;
    cdl__rng rng = cdl__rng_for(L->cfg.seed, CDL_STREAM_CROP, epoch, id);
    return cdl__rng_below(&rng, n - L->cfg.audio_samples + 1);
}

/* Only the window the crop keeps is converted: output sample i (absolute,
 * in the resampled signal) is the linear interpolation at i * rate_in /
 * rate_out between two source frames, each the mean of its channels. The
 * work is the source samples (frames x channels) the window reads, known
 * before reading any and bounded by max_audio_samples; no buffer is
 * needed beyond the row itself. */
CDL_PRIVATE coordl_status cdl__decode_wav(cdl__worker *W, const char *path, const cdl__bytes *in, uint64_t epoch,
                                     uint64_t id, void *dst) {
    coordl *L = W->L;
    const uint64_t t0 = cdl__now_ns();
    cdl__wav wav;
    uint64_t n = 0;
    coordl_status rc = cdl__wav_open(W, path, in, &wav, &n);
    if (rc != COORDL_OK) return rc;
    const uint64_t S = L->cfg.audio_samples, off = cdl__audio_offset(L, epoch, id, n);
    const uint64_t take = n - off < S ? n - off : S;
    const uint32_t out_rate = L->cfg.audio_rate ? L->cfg.audio_rate : wav.rate;
    const double step = (double)wav.rate / out_rate;
    uint64_t frames_read = take;
    if (take > 0 && out_rate != wav.rate) {
        /* each output reads 2 frames; neighbours share them */
        uint64_t first = (uint64_t)((double)off * step), last = (uint64_t)((double)(off + take - 1) * step) + 1;
        if (last >= wav.frames) last = wav.frames - 1;
        if (first > last) first = last;
        frames_read = last - first + 1 < 2 * take ? last - first + 1 : 2 * take;
    }
    if (frames_read * wav.channels > L->cfg.max_audio_samples)
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: the crop reads %llu source samples (%llu frames x %u "
                                 "channels), over max_audio_samples (%llu)", path,
                                 (unsigned long long)(frames_read * wav.channels), (unsigned long long)frames_read,
                                 wav.channels, (unsigned long long)L->cfg.max_audio_samples);
    float *out = dst;
    if (out_rate == wav.rate) {
        for (uint64_t i = 0; i < take; i++) out[i] = cdl__wav_mono(&wav, off + i);
    } else {
        uint64_t have[2] = {UINT64_MAX, UINT64_MAX}; /* the last two frames converted */
        float val[2] = {0.0f, 0.0f};
        for (uint64_t i = 0; i < take; i++) {
            const double x = (double)(off + i) * step;
            const uint64_t i0 = (uint64_t)x;
            const double fr = x - (double)i0;
            const uint64_t fa = i0 < wav.frames ? i0 : wav.frames - 1;
            const uint64_t fb = i0 + 1 < wav.frames ? i0 + 1 : wav.frames - 1;
            float ab[2];
            for (int k = 0; k < 2; k++) {
                const uint64_t f = k ? fb : fa;
                if (f == have[1]) ab[k] = val[1];
                else if (f == have[0]) ab[k] = val[0];
                else {
                    have[0] = have[1];
                    val[0] = val[1];
                    have[1] = f;
                    val[1] = ab[k] = cdl__wav_mono(&wav, f);
                }
            }
            out[i] = (float)(ab[0] + (ab[1] - ab[0]) * fr);
        }
    }
    for (uint64_t i = take; i < S; i++) out[i] = 0.0f;
    W->row.decode_ns += cdl__now_ns() - t0; /* conversion and crop are one pass */
    return COORDL_OK;
}
#else /* COORDL_NO_AUDIO: open refuses COORDL_PIPE_AUDIO (abi.c), so
        * nothing calls these; they keep the callers' code the same. */
CDL_PRIVATE coordl_status cdl__wav_open(cdl__worker *W, const char *path, const cdl__bytes *in, cdl__wav *wav,
                                   uint64_t *n_out) {
    (void)in;
    memset(wav, 0, sizeof *wav);
    *n_out = 0;
    return cdl__worker_error(W, COORDL_ERR_UNSUPPORTED, "%s: audio is not in this build (COORDL_NO_AUDIO)", path);
}
CDL_PRIVATE uint64_t cdl__audio_offset(const coordl *L, uint64_t epoch, uint64_t id, uint64_t n) {
    (void)L, (void)epoch, (void)id, (void)n;
    return 0;
}
CDL_PRIVATE coordl_status cdl__decode_wav(cdl__worker *W, const char *path, const cdl__bytes *in, uint64_t epoch,
                                     uint64_t id, void *dst) {
    cdl__wav wav;
    uint64_t n;
    (void)epoch, (void)id, (void)dst;
    return cdl__wav_open(W, path, in, &wav, &n);
}
#endif /* COORDL_NO_AUDIO */
/* ---- src/decode.c ------------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/*
 * decode.c - the per-item decode dispatch.
 *
 * JPEG (recognised by content, jpeg.c): read the header, draw the crop,
 * pick the DCT scale, decode only the crop's columns and rows, then
 * resample straight into the batch row; a cached JPEG may be rewritten
 * with restart markers, then only the segments that cover the crop are
 * decoded. Other formats: stb_image (image.c), full decode. Here: which
 * decoder an item goes to, token windows, and the rewrite budget.
 *
 * Owns:  nothing of its own: chooses the decoder for an item, widens token
 *        windows, and keeps the JPEG rewrite budget in the worker's scratch
 * Lock:  none (cache entries by their atomic state)
 * Calls: status, worker, index, jpeg_layout, cache, fetch, image, jpeg,
 *        audio (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */

#ifndef COORDL_NO_TOKENS
/* Tokens: widen the window into inputs and targets (shifted by one). */
static coordl_status cdl__decode_tokens(cdl__worker *W, const cdl__bytes *in, void *dst) {
    coordl *L = W->L;
    const uint32_t T = L->cfg.seq_len;
    int32_t *inputs = dst, *targets = W->targets;
    const size_t tb = in->len / (T + 1);
    uint64_t t0 = cdl__now_ns();
    /* one loop per token width and array, with no branch inside: the
     * compiler vectorizes them (a B = 128 batch is 8,000 tokens) */
    if (tb == 2) {
        for (uint32_t t = 0; t < T; t++) {
            uint16_t u;
            memcpy(&u, in->p + 2 * (size_t)t, 2);
            inputs[t] = u;
        }
        if (targets)
            for (uint32_t t = 0; t < T; t++) {
                uint16_t u;
                memcpy(&u, in->p + 2 * (size_t)(t + 1), 2);
                targets[t] = u;
            }
    } else {
        for (uint32_t t = 0; t < T; t++) {
            uint32_t u;
            memcpy(&u, in->p + 4 * (size_t)t, 4);
            inputs[t] = (int32_t)u;
        }
        if (targets)
            for (uint32_t t = 0; t < T; t++) {
                uint32_t u;
                memcpy(&u, in->p + 4 * (size_t)(t + 1), 4);
                targets[t] = (int32_t)u;
            }
    }
    W->row.decode_ns += cdl__now_ns() - t0;
    return COORDL_OK;
}
#else /* COORDL_NO_TOKENS: open refuses COORDL_PIPE_TOKENS (abi.c) */
static coordl_status cdl__decode_tokens(cdl__worker *W, const cdl__bytes *in, void *dst) {
    (void)in, (void)dst;
    return cdl__worker_error(W, COORDL_ERR_UNSUPPORTED, "tokens are not in this build (COORDL_NO_TOKENS)");
}
#endif /* COORDL_NO_TOKENS */

#ifndef COORDL_NO_JPEGTURBO /* else stb's JPEG decoder takes them */
static int cdl__is_jpeg(const cdl__bytes *in) {
    return in->len >= 3 && in->p[0] == 0xFF && in->p[1] == 0xD8 && in->p[2] == 0xFF;
}
#endif

/* The size an image's header gives, checked like a decode would (format,
 * sides, max_pixels); for coordl_sample_transform. */
CDL_PRIVATE coordl_status cdl__image_size(cdl__worker *W, const char *path, const cdl__bytes *in, int *iw, int *ih) {
    *iw = *ih = 0;
#ifndef COORDL_NO_JPEGTURBO
    if (cdl__is_jpeg(in)) {
        /* the JPEG header, with a throwaway decompressor */
        struct jpeg_decompress_struct jd;
        coordl_status rc;
        jd.err = jpeg_std_error(&W->jerr.pub);
        W->jerr.pub.error_exit = cdl__jpeg_error_exit;
        W->jerr.pub.emit_message = cdl__jpeg_emit_message; /* libjpeg's own prints warnings on stderr */
        jpeg_create_decompress(&jd);
        if (setjmp(W->jerr.jump) == 0) {
            jpeg_mem_src(&jd, in->p, (unsigned long)in->len);
            jpeg_read_header(&jd, TRUE);
            *iw = (int)jd.image_width;
            *ih = (int)jd.image_height;
            rc = cdl__check_image_size(W, path, *iw, *ih);
        } else {
            rc = cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s: not a decodable JPEG: %s", path, W->jerr.msg);
        }
        jpeg_destroy_decompress(&jd);
        return rc;
    }
#endif
    return cdl__stb_header(W, path, in, iw, ih, NULL);
}

/* Decode and augment the bytes of item `id` (named path) into dst. */
static coordl_status cdl__decode_item(cdl__worker *W, const char *path, uint64_t epoch, uint64_t id,
                                      const cdl__bytes *in, void *dst) {
    switch (W->L->cfg.pipeline) {
    case COORDL_PIPE_TOKENS: return cdl__decode_tokens(W, in, dst);
    case COORDL_PIPE_AUDIO: return cdl__decode_wav(W, path, in, epoch, id, dst);
    default: break;
    }
#ifndef COORDL_NO_JPEGTURBO
    if (cdl__is_jpeg(in)) return cdl__decode_jpeg(W, path, in, epoch, id, dst, NULL);
#endif
    return cdl__decode_stb(W, path, in, epoch, id, dst);
}

/* The worker's JPEG decompressor, created once and reused. */
CDL_PRIVATE void cdl__worker_decoder_init(cdl__worker *W) {
#ifndef COORDL_NO_JPEGTURBO
    W->jd.err = jpeg_std_error(&W->jerr.pub);
    W->jerr.pub.error_exit = cdl__jpeg_error_exit;
    W->jerr.pub.emit_message = cdl__jpeg_emit_message;
    jpeg_create_decompress(&W->jd);
    W->jprogress.progress_monitor = cdl__jpeg_scan_limit;
    W->jd.progress = &W->jprogress;
    W->jd_ready = 1;
    W->jdest.pub.init_destination = cdl__jdest_init; /* rewrites write into W->rw (jpeg.c) */
    W->jdest.pub.empty_output_buffer = cdl__jdest_full;
    W->jdest.pub.term_destination = cdl__jdest_term;
#else
    (void)W;
#endif
}

#ifndef COORDL_NO_JPEGTURBO
/* Whether this worker may spend a rewrite now (its budget: worker.c). */
static int cdl__rewrite_allowed(const cdl__worker *W) {
    return cdl__budget_allows(W, W->L->cfg.jpeg_random_access ? W->L->cfg.jpeg_rewrite_budget : 0.0);
}

/* The outcome of a rewrite: made (and in the cache, or not yet: a reader
 * was there), or given up for good (the item stays as read). */
enum { CDL_REWRITE_GIVEN_UP = 0, CDL_REWRITE_CACHED = 1, CDL_REWRITE_NOT_YET = 2 };

/* Rewrites item id (its bytes in *in, fetched by W; W owns the entry's
 * rewrite claim) with restart markers and puts the rewrite in the cache in
 * place of the bytes. When the rewrite was made *in points to it (in
 * W->rw) and *lay holds its layout; otherwise the item stays as it was,
 * marked never to be tried again. Returns a CDL_REWRITE_* outcome. */
static int cdl__rewrite_item(cdl__worker *W, uint64_t id, cdl__bytes *in, cdl__jpeg_layout *lay, int idle) {
    coordl *L = W->L;
    const uint64_t t0 = cdl__now_ns(), cpu0 = cdl__thread_cpu_ns();
    int outcome = CDL_REWRITE_GIVEN_UP;
    int too_big = 0;
    /* no room reserved: only a rewrite that fits in place, so the smaller
     * optimized tables */
    const size_t n = cdl__jpeg_rewrite(W, in->p, in->len, W->fetch_cap, W->fetch_cap <= in->len, lay, &too_big);
    if (n) {
        /* a reader elsewhere (the same item in another epoch, another
         * member): it stays plain for now and is tried again later */
        outcome = CDL_REWRITE_NOT_YET;
        if (cdl__cache_replace_minio(L, W->held ? W->reader : NULL, id, W->rw, n)) {
            outcome = CDL_REWRITE_CACHED;
            W->row.jpeg_rewrites++;
            W->row.jpeg_rewrites_idle += (uint64_t)idle;
        }
        in->p = W->rw;
        in->len = n;
    } else {
        cdl__cache_keep_minio(L, id);
        W->row.jpeg_rewrite_failures++;
        cdl__log(L, COORDL_LOG_DEBUG, "%s: kept as it is, not rewritten for random access (%s)",
                 cdl__item_path(L, id), too_big ? "the rewrite outgrows its room in the cache" : "cannot rewrite it");
    }
    W->row.jpeg_rewrite_ns += cdl__now_ns() - t0;
    if (!idle) cdl__budget_rewrite(W, cdl__thread_cpu_ns() - cpu0); /* idle time is free */
    return outcome;
}

/* Idle time (no slot to fill: the ring is full, the trainer is the
 * bottleneck): rewrites one cached JPEG not rewritten yet, found from this
 * handle's cursor and claimed (one owner per rewrite), with no lock held.
 * Its counters go into *done. Returns 1 when an entry was settled (rewritten
 * or given up: more may remain), 0 when no work was done: none is left
 * unclaimed, or a reader was on the one tried (the worker then sleeps
 * until the next row; a loop here would spin a core while the trainer
 * idles). */
CDL_PRIVATE int cdl__rewrite_idle(cdl__worker *W, cdl__counters *done) {
    coordl *L = W->L;
    memset(done, 0, sizeof *done);
    if (!L->cache.entries || !W->reader || !L->cfg.jpeg_random_access || atomic_load(&L->S->cache_plain_items) == 0)
        return 0;
    for (uint64_t tries = 0; tries < L->index.num_items; tries++) {
        const uint64_t id = atomic_fetch_add(&L->cache.idle_cursor, 1) % L->index.num_items;
        if (atomic_load_explicit(&L->cache.entries[id].jpeg, memory_order_relaxed) != CDL_CE_PLAIN ||
            !cdl__cache_claim_rewrite(L, id))
            continue;
        uint32_t len, cap;
        int kind;
        const cdl__u8 *p = cdl__cache_acquire_minio(L, W->reader, id, &len, &kind, &cap);
        if (!p) { /* being admitted: not plain bytes yet */
            cdl__cache_unclaim_rewrite(L, id);
            continue;
        }
        W->held = id + 1;
        W->fetch_kind = kind;
        W->fetch_cap = cap;
        cdl__bytes in = {p, len};
        cdl__jpeg_layout lay;
        memset(&W->row, 0, sizeof W->row);
        const int outcome = cdl__rewrite_item(W, id, &in, &lay, 1);
        *done = W->row;
        cdl__fetch_done(W);
        return outcome != CDL_REWRITE_NOT_YET;
    }
    return 0;
}
#endif

/* Decodes and augments the fetched bytes of item `id` into dst: a cached
 * JPEG rewrite through a spliced crop, a plain cached JPEG rewritten first
 * when the budget allows, everything else as cdl__decode_item does. */
static coordl_status cdl__prepare_item_bytes(cdl__worker *W, uint64_t epoch, uint64_t id, void *dst,
                                             cdl__bytes *in) {
    coordl *L = W->L;
    const char *path = cdl__item_name(L, id, W->item_name, sizeof W->item_name);
#ifndef COORDL_NO_JPEGTURBO
    if (L->cfg.pipeline != COORDL_PIPE_TOKENS && L->cfg.pipeline != COORDL_PIPE_AUDIO && cdl__is_jpeg(in)) {
        cdl__jpeg_layout lay;
        if (W->fetch_kind == CDL_CE_RST && cdl__jpeg_walk(in->p, in->len, &lay) && lay.index_off)
            return cdl__decode_jpeg(W, path, in, epoch, id, dst, &lay);
        if (W->fetch_kind == CDL_CE_PLAIN && cdl__rewrite_allowed(W) && cdl__cache_claim_rewrite(L, id) &&
            cdl__rewrite_item(W, id, in, &lay, 0) != CDL_REWRITE_GIVEN_UP)
            return cdl__decode_jpeg(W, path, in, epoch, id, dst, &lay);
    }
#endif
    return cdl__decode_item(W, path, epoch, id, in, dst);
}

/* Fetch, decode and augment item `id` into dst. */
CDL_PRIVATE coordl_status cdl__prepare_item(cdl__worker *W, uint64_t epoch, uint64_t id, void *dst) {
    cdl__bytes in = {NULL, 0};
#ifndef COORDL_NO_JPEGTURBO
    const int budget = W->L->cfg.jpeg_random_access && W->L->cache.entries;
#else
    const int budget = 0; /* no rewrites without libjpeg: nothing to account */
#endif
    const uint64_t cpu0 = budget ? cdl__thread_cpu_ns() : 0, rw0 = W->budget.rewrite_cpu;
    const uint64_t bad_label = W->L->index.boxes.bad ? W->L->index.boxes.bad[id] : 0;
    if (bad_label) /* found at open (source.c): a bad sample like a corrupt image, nothing fetched */
        return cdl__worker_error(W, COORDL_ERR_CORRUPT, "%s", W->L->index.strings + bad_label - 1);
    coordl_status rc = cdl__fetch(W, id, &in);
    if (rc == COORDL_OK) rc = cdl__prepare_item_bytes(W, epoch, id, dst, &in);
    cdl__fetch_done(W);
    if (budget) cdl__budget_row(W, cdl__thread_cpu_ns() - cpu0 - (W->budget.rewrite_cpu - rw0));
    return rc;
}

/* ---- src/config.c ------------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/*
 * config.c - configuration: defaults, validation, output geometry.
 *
 * Owns:  L->cfg (the effective settings), L->conf (the strings it points
 *        into) and L->geom (the output geometry derived from it)
 * Lock:  set at open; coordl_set changes geometry fields under the stream's
 *        lock with the stream paused
 * Calls: status (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */

/* Shape of one row: images c x h x w (c = channels); tokens 1 x 1 x seq_len; audio
 * 1 x 1 x audio_samples. */
CDL_PRIVATE CDL_HOT void cdl__row_shape(const coordl *L, uint32_t out_w, uint32_t out_h, uint32_t *c, uint32_t *h,
                           uint32_t *w) {
    switch (L->cfg.pipeline) {
    case COORDL_PIPE_TOKENS: *c = 1; *h = 1; *w = L->cfg.seq_len; break;
    case COORDL_PIPE_AUDIO: *c = 1; *h = 1; *w = L->cfg.audio_samples; break;
    default: *c = L->cfg.channels; *h = out_h; *w = out_w; break;
    }
}

/* Bytes of one data row at an output size: the row's shape times the
 * element size. The one place a row's size is computed (open, coordl_set,
 * the ring's sizing). */
CDL_PRIVATE size_t cdl__row_bytes_at(const coordl *L, uint32_t out_w, uint32_t out_h) {
    uint32_t c, h, w;
    cdl__row_shape(L, out_w, out_h, &c, &h, &w);
    return (size_t)c * h * w * L->geom.elem_bytes;
}

CDL_PRIVATE coordl_config cdl__config_default(void) {
    coordl_config c;
    memset(&c, 0, sizeof c);
    c.pipeline = COORDL_PIPE_TRAIN;
    c.batch_size = 32;
    c.shuffle = COORDL_SHUFFLE_FULL;
    c.out_w = c.out_h = 224;
    c.layout = COORDL_F32_NCHW;
    c.mean[0] = 0.485f; c.mean[1] = 0.456f; c.mean[2] = 0.406f;
    c.std[0] = 0.229f; c.std[1] = 0.224f; c.std[2] = 0.225f;
    c.scale_min = 0.08f; c.scale_max = 1.0f;
    c.ratio_min = 3.0f / 4.0f; c.ratio_max = 4.0f / 3.0f;
    c.flip = 1;
    c.cache_policy = COORDL_CACHE_MINIO;
    c.cache_pin = COORDL_PIN_TRY;
    c.prefetch_batches = 4;
    c.seq_len = 1024;
    c.group_size = 1;
    c.group_timeout_ms = 10000;
    c.peer_timeout_ms = 2000;
    c.audio_samples = 16000;
    c.numa_node = -1;
    c.bind = 1;
    c.rank = 0;
    c.world = 1;
    c.on_bad_sample = COORDL_BAD_FAIL;
    c.max_pixels = 100000000ull;
    c.max_item_bytes = 256ull << 20;
    c.max_decode_bytes = CDL_DEFAULT_MAX_DECODE_BYTES;
    c.max_audio_samples = CDL_DEFAULT_MAX_AUDIO_SAMPLES;
    c.log = cdl__default_log;
    c.log_level = COORDL_LOG_WARN;
    c.jpeg_random_access = 1;
    c.jpeg_rewrite_budget = 0.08f;
    c.readahead_items = 32;
    c.io_timeout_ms = 30000;
    return c;
}

/* What a row looks like, derived from a validated config: layout forced by
 * the pipeline, element and row sizes, Darknet crop ratios, normalization.
 * coordl_open runs it; so do the fuzz harnesses, to prepare rows exactly as
 * a worker does. */
CDL_PRIVATE void cdl__output_setup(coordl *L) {
    if (L->cfg.pipeline == COORDL_PIPE_TOKENS) L->cfg.layout = COORDL_I32;
    if (L->cfg.pipeline == COORDL_PIPE_AUDIO) L->cfg.layout = COORDL_F32;
    if (L->cfg.channels == 0) L->cfg.channels = 3; /* the default: RGB (image rows only read it) */
    L->geom.elem_bytes = (L->cfg.layout == COORDL_U8_NHWC || L->cfg.layout == COORDL_U8_NCHW) ? 1 : 4;
    L->geom.row_bytes = cdl__row_bytes_at(L, L->cfg.out_w, L->cfg.out_h);
    L->geom.target_row_bytes = L->cfg.pipeline == COORDL_PIPE_TOKENS ? (size_t)L->cfg.seq_len * sizeof(int32_t) : 0;
    if (L->cfg.labels == COORDL_LABELS_BOXES) { /* the targets area holds a row's boxes */
        if (L->cfg.max_boxes == 0) L->cfg.max_boxes = 90;
        L->geom.box_rows = 1;
        L->geom.target_row_bytes = (size_t)L->cfg.max_boxes * 5 * sizeof(float);
    }
    if (L->cfg.train_crop == COORDL_CROP_DARKNET) { /* Darknet's parse_net_options defaults */
        if (L->cfg.min_crop == 0) L->cfg.min_crop = L->cfg.out_w;
        if (L->cfg.max_crop == 0) L->cfg.max_crop = 2 * L->cfg.out_w > L->cfg.min_crop ? 2 * L->cfg.out_w : L->cfg.min_crop;
        L->geom.crop_min_ratio = (float)L->cfg.min_crop / (float)L->cfg.out_w;
        L->geom.crop_max_ratio = (float)L->cfg.max_crop / (float)L->cfg.out_w;
    }
    for (int c = 0; c < 3; c++) {
        L->geom.norm_scale[c] = 1.0f / (255.0f * L->cfg.std[c]);
        L->geom.norm_bias[c] = -L->cfg.mean[c] / L->cfg.std[c];
    }
}

/* A group's name names its files (/dev/shm/coordl-<name> and its index):
 * letters, digits, '.', '_', '-', not starting with a dot. */
static int cdl__group_name_ok(const char *g) {
    size_t n = strlen(g);
    if (n == 0 || n > 200) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = g[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return g[0] != '.';
}

CDL_PRIVATE coordl_status cdl__validate(const coordl_config *c) {
#define CDL_BAD(...) return cdl__open_fail(COORDL_ERR_INVALID, __VA_ARGS__)
    if (!c->source || !c->source[0]) CDL_BAD("source: not set; give an ImageFolder root or a list file");
    if (c->pipeline < COORDL_PIPE_TRAIN || c->pipeline > COORDL_PIPE_EXACT)
        CDL_BAD("pipeline: %d is not a known pipeline", (int)c->pipeline);
    if (c->pipeline == COORDL_PIPE_TOKENS && (c->seq_len == 0 || c->seq_len > (1u << 24)))
        CDL_BAD("seq_len: %u is out of range (1..16777216)", c->seq_len);
    if (c->token_order != COORDL_TOKENS_WINDOWS && c->token_order != COORDL_TOKENS_LLMC)
        CDL_BAD("token_order: %d is not a known order (COORDL_TOKENS_WINDOWS or COORDL_TOKENS_LLMC)", c->token_order);
    if (c->shuffle != COORDL_SHUFFLE_OFF && c->shuffle != COORDL_SHUFFLE_FULL && c->shuffle != COORDL_SHUFFLE_SHARD_WINDOW)
        CDL_BAD("shuffle: %d is not a known order (COORDL_SHUFFLE_OFF 0, COORDL_SHUFFLE_FULL 1 or "
                "COORDL_SHUFFLE_SHARD_WINDOW 2)", c->shuffle);
    if (c->shuffle == COORDL_SHUFFLE_SHARD_WINDOW && c->token_order == COORDL_TOKENS_LLMC)
        CDL_BAD("shuffle: COORDL_SHUFFLE_SHARD_WINDOW with token_order = COORDL_TOKENS_LLMC: llm.c's order already "
                "visits the shards in a shuffled order, a batch being consecutive windows of one shard; use "
                "shuffle = COORDL_SHUFFLE_FULL (llm.c's shuffle) or token_order = COORDL_TOKENS_WINDOWS");
    if (c->token_order == COORDL_TOKENS_LLMC && c->pipeline != COORDL_PIPE_TOKENS)
        CDL_BAD("token_order: COORDL_TOKENS_LLMC orders token windows; set pipeline = COORDL_PIPE_TOKENS");
    if (c->pipeline == COORDL_PIPE_AUDIO && (c->audio_samples == 0 || c->audio_samples > (1u << 28)))
        CDL_BAD("audio_samples: %u is out of range (1..2^28)", c->audio_samples);
    if (cdl__pipeline_is_image(c->pipeline) && c->layout > COORDL_U8_NCHW)
        CDL_BAD("layout: %d is not an image layout", (int)c->layout);
    if (c->batch_size == 0) CDL_BAD("batch_size: must be at least 1");
    if (c->out_w == 0 || c->out_h == 0) CDL_BAD("out_w/out_h: output size %ux%u must be at least 1x1", c->out_w, c->out_h);
    if ((uint64_t)c->out_w * c->out_h > (1u << 26)) CDL_BAD("out_w/out_h: output size %ux%u is too large", c->out_w, c->out_h);
    /* the ring is sized for the largest output coordl_set may ask for:
     * bounded like out_w/out_h (and coordl_set), so the row size cannot wrap */
    if (c->max_out_w > 65535 || c->max_out_h > 65535)
        CDL_BAD("max_out_w/max_out_h: %ux%u is out of range (0 = out_w/out_h, else up to 65535)", c->max_out_w, c->max_out_h);
    if ((uint64_t)(c->max_out_w > c->out_w ? c->max_out_w : c->out_w) * (c->max_out_h > c->out_h ? c->max_out_h : c->out_h) > (1u << 26))
        CDL_BAD("max_out_w/max_out_h: largest output size %ux%u is too large", c->max_out_w > c->out_w ? c->max_out_w : c->out_w,
                c->max_out_h > c->out_h ? c->max_out_h : c->out_h);
    if (c->layout < COORDL_F32_NCHW || c->layout > COORDL_F32) CDL_BAD("layout: %d is not a known layout", (int)c->layout);
    for (int i = 0; i < 3; i++) {
        if (!(c->std[i] > 0.0f) && !(c->std[i] < 0.0f)) CDL_BAD("std[%d]: must be non-zero", i);
        if (!isfinite(c->mean[i]) || !isfinite(c->std[i])) CDL_BAD("mean/std[%d]: must be finite", i);
    }
    if (!(c->scale_min > 0.0f) || !(c->scale_min <= c->scale_max) || c->scale_max > 1.0f)
        CDL_BAD("scale_min/scale_max: need 0 < scale_min <= scale_max <= 1 (got %g, %g)", c->scale_min, c->scale_max);
    if (!(c->ratio_min > 0.0f) || !(c->ratio_min <= c->ratio_max) || !isfinite(c->ratio_max))
        CDL_BAD("ratio_min/ratio_max: need 0 < ratio_min <= ratio_max (got %g, %g)", c->ratio_min, c->ratio_max);
    if (c->threads < 0 || c->threads > 1024) CDL_BAD("threads: %d is out of range (0 = usable cores, max 1024)", c->threads);
    if (c->prefetch_batches == 0 || c->prefetch_batches > 1024) CDL_BAD("prefetch_batches: %u is out of range (1..1024)", c->prefetch_batches);
    if (c->reserve_cores < 0) CDL_BAD("reserve_cores: %d must not be negative", c->reserve_cores);
    if (c->bind != 0 && c->bind != 1) CDL_BAD("bind: %d must be 0 or 1", c->bind);
    if (c->numa_node < -1) CDL_BAD("numa_node: %d is not a node (-1 leaves it unset)", c->numa_node);
    if (c->group && !cdl__group_name_ok(c->group))
        CDL_BAD("group: \"%.200s\" is not a valid name (1-200 of A-Z a-z 0-9 . _ -, no slash, not starting with a "
                "dot)", c->group);
    if (c->group && (c->group_size < 1 || c->group_size > CDL_MAX_MEMBERS))
        CDL_BAD("group_size: %d is out of range (1..%d)", c->group_size, CDL_MAX_MEMBERS);
    if (c->group && (c->group_timeout_ms < 1 || c->group_timeout_ms > 3600000))
        CDL_BAD("group_timeout_ms: %d is out of range (1..3600000)", c->group_timeout_ms);
    if (c->mpi_comm && (c->peer_timeout_ms < 1 || c->peer_timeout_ms > 3600000))
        CDL_BAD("peer_timeout_ms: %d is out of range (1..3600000)", c->peer_timeout_ms);
    if (c->world < 1) CDL_BAD("world: must be at least 1 (got %d)", c->world);
    if (c->rank < 0 || c->rank >= c->world) CDL_BAD("rank: %d is outside [0, world=%d)", c->rank, c->world);
    if (c->on_bad_sample != COORDL_BAD_FAIL && c->on_bad_sample != COORDL_BAD_SUBSTITUTE)
        CDL_BAD("on_bad_sample: %d is not a known policy", (int)c->on_bad_sample);
    if (c->cache_policy != COORDL_CACHE_MINIO && c->cache_policy != COORDL_CACHE_LRU)
        CDL_BAD("cache_policy: %d is not a known policy", (int)c->cache_policy);
    if (c->cache_pin < COORDL_PIN_TRY || c->cache_pin > COORDL_PIN_REQUIRED)
        CDL_BAD("cache_pin: %d is not a known mode", (int)c->cache_pin);
    if (!(c->hue >= 0.0f && c->hue <= 0.5f)) CDL_BAD("hue: %g must be in [0, 0.5] (a fraction of the colour wheel)", c->hue);
    /* rand_scale settings: s and 1/s are the same range, so 0.01..100 */
    if (!(c->saturation == 0.0f || (c->saturation >= 0.01f && c->saturation <= 100.0f)))
        CDL_BAD("saturation: %g must be 0 (off) or in [0.01, 100] (a factor between 1/s and s; 1: off)", c->saturation);
    if (!(c->exposure == 0.0f || (c->exposure >= 0.01f && c->exposure <= 100.0f)))
        CDL_BAD("exposure: %g must be 0 (off) or in [0.01, 100] (a factor between 1/s and s; 1: off)", c->exposure);
    if (!(c->rotate_deg >= 0.0f && c->rotate_deg <= 180.0f)) CDL_BAD("rotate_deg: %g must be in [0, 180]", c->rotate_deg);
    if (c->jpeg_random_access != 0 && c->jpeg_random_access != 1)
        CDL_BAD("jpeg_random_access: %d must be 0 or 1", c->jpeg_random_access);
    if (!(c->jpeg_rewrite_budget >= 0.0f && c->jpeg_rewrite_budget <= 1.0f))
        CDL_BAD("jpeg_rewrite_budget: %g must be in [0, 1] (a fraction of worker time)", c->jpeg_rewrite_budget);
    if (!(c->aspect == 0.0f || (c->aspect >= 0.01f && c->aspect <= 100.0f)))
        CDL_BAD("aspect: %g must be 0 (off) or in [0.01, 100] (a factor between 1/s and s; 1: off)", c->aspect);
    if (c->train_crop != COORDL_CROP_RESIZED && c->train_crop != COORDL_CROP_DARKNET &&
        c->train_crop != COORDL_CROP_DARKNET_BOXES && c->train_crop != COORDL_CROP_SSD)
        CDL_BAD("train_crop: %d is not a known crop (COORDL_CROP_RESIZED, COORDL_CROP_DARKNET, "
                "COORDL_CROP_DARKNET_BOXES or COORDL_CROP_SSD)", c->train_crop);
    /* object detection */
    if (c->labels != COORDL_LABELS_CLASS && c->labels != COORDL_LABELS_BOXES)
        CDL_BAD("labels: %d is not COORDL_LABELS_CLASS or COORDL_LABELS_BOXES", c->labels);
    if (c->labels == COORDL_LABELS_BOXES && !cdl__pipeline_is_image(c->pipeline))
        CDL_BAD("labels: COORDL_LABELS_BOXES is for image pipelines (TRAIN, EVAL, EXACT)");
    if (c->ssd_expand != 0.0f && !(c->ssd_expand >= 1.0f && c->ssd_expand <= 16.0f))
        CDL_BAD("ssd_expand: %g is out of range (0 = off, else 1..16)", (double)c->ssd_expand);
    if (c->train_crop == COORDL_CROP_SSD && c->labels != COORDL_LABELS_BOXES)
        CDL_BAD("train_crop: COORDL_CROP_SSD needs labels = COORDL_LABELS_BOXES (its crops are drawn by their "
                "overlap with the boxes)");
    if (c->labels == COORDL_LABELS_BOXES && c->rotate_deg != 0.0f)
        CDL_BAD("rotate_deg: %g with labels = COORDL_LABELS_BOXES: a rotated box is no longer an axis-aligned "
                "box; set rotate_deg = 0", c->rotate_deg);
    if (c->max_boxes > 4096) CDL_BAD("max_boxes: %u is out of range (0 = 90, at most 4096)", c->max_boxes);
    if (!(c->jitter >= 0.0f && c->jitter <= 0.9f)) CDL_BAD("jitter: %g must be in [0, 0.9] (0: off)", c->jitter);
    if (!(c->place_scale_min == 0.0f || (c->place_scale_min >= 0.05f && c->place_scale_min <= 4.0f)) ||
        !(c->place_scale_max == 0.0f || (c->place_scale_max >= 0.05f && c->place_scale_max <= 4.0f)) ||
        (c->place_scale_min ? c->place_scale_min : 1.0f) > (c->place_scale_max ? c->place_scale_max : 1.0f))
        CDL_BAD("place_scale_min/place_scale_max: need 0 (= 1) or 0.05..4 each, min <= max (got %g, %g)",
                c->place_scale_min, c->place_scale_max);
    if (c->num_classes < 0) CDL_BAD("num_classes: %d must not be negative (0: no bound)", (int)c->num_classes);
    if (c->train_crop == COORDL_CROP_DARKNET && (c->min_crop > 65535 || c->max_crop > 65535 ||
                                                (c->max_crop && c->min_crop > c->max_crop)))
        CDL_BAD("min_crop/max_crop: need min_crop <= max_crop <= 65535 (got %u, %u; 0 = Darknet's defaults out_w "
                "and 2 x out_w)", c->min_crop, c->max_crop);
    if (c->max_pixels == 0) CDL_BAD("max_pixels: must be at least 1");
    if (c->max_item_bytes == 0) CDL_BAD("max_item_bytes: must be at least 1");
    int hooks = (c->allocator.malloc_fn != NULL) + (c->allocator.realloc_fn != NULL) + (c->allocator.free_fn != NULL);
    if (hooks != 0 && hooks != 3) CDL_BAD("allocator: set all of malloc_fn, realloc_fn and free_fn, or none");
    if (c->readahead_items > 4096) CDL_BAD("readahead_items: %u is out of range (0 = off, at most 4096)", c->readahead_items);
    if (c->readahead_threads > 4096) CDL_BAD("readahead_threads: %u is out of range (0 = the depth, at most 4096)", c->readahead_threads);
    if (c->io && (!c->io->open || !c->io->read_at || !c->io->close))
        CDL_BAD("io: set all of open, read_at and close (or io = NULL for the built-in POSIX reader)");
    if (c->io_async && !c->io_async->read)
        CDL_BAD("io_async: set read (or io_async = NULL: a caller's reader then takes an I/O thread per read in flight)");
    if (c->io_async && !c->io)
        CDL_BAD("io_async needs io: the index scan, list files and the items a worker reads itself go through io's "
                "open, read_at and close");
    /* channels: a row's colour planes (image pipelines) */
    if (c->channels != 0 && c->channels != 1 && c->channels != 3)
        CDL_BAD("channels: %u is not 1 (grey), 3 (RGB) or 0 (the default, 3)", c->channels);
    if (c->channels != 0 && !cdl__pipeline_is_image(c->pipeline))
        CDL_BAD("channels: %u is for image pipelines; leave it 0 for tokens and audio", c->channels);
#undef CDL_BAD
    return COORDL_OK;
}

/* Copies the config and its strings (the caller's may go away after
 * open) into a fresh handle. */
/* ---- src/stream.c ------------------------------------------------------ */
/* SPDX-License-Identifier: MIT */
/*
 * stream.c - the ring and the stream state machine.
 *
 * The stream is one state machine over the ring's slots, owned here.
 * Each transition runs under the stream's lock and ends with
 * cdl__stream_check (COORDL_DEBUG builds assert the invariants):
 *   claim     a worker takes the next row: a snapshot of all it needs
 *   complete  the row counts only if slot and member generations match
 *   take      the consumer's next batch; its handle carries slot + gen
 *   release   a no-op unless the handle's generation matches
 *   drop      a member generation leaves: its marks and bits go
 *   repair    after a lock holder died: finish, recount from the marks
 *   pause / restart   seek and set: wait for rows in flight, resume
 * Workers only claim, prepare with no lock held, and complete. The ring
 * allocator sizes every per-slot array (CDL_RING_ARRAYS).
 *
 * Owns:  L->ring and the transitions of *L->S: assign, claim, complete,
 *        take, release, drop, repair, pause and restart (COORDL_DEBUG
 *        asserts the invariants after each)
 * Lock:  the stream's lock (lock module) around every transition
 * Calls: status, arena, lock, sampler, peers, readahead, config (lower
 *        layers only: src/modules.txt; tools/check-layers.py checks this
 *        line).
 */

/* --- the ring allocator ----------------------------------------------- */

/* Every array with an entry per slot or per row of a slot, as
 * X(owning member of coordl, its field, element type, CDL_PER_SLOT or
 * CDL_PER_ROW, shared).
 * cdl__ring_alloc sizes them all: per-slot arrays once (nslots never
 * changes), per-row arrays (nslots x slot_rows_cap entries, zeroed) at open
 * and again whenever coordl_set grows the ring; cdl__ring_free frees them.
 * shared = 1: in a group the array is the shm object's (group.c), not
 * allocated. Another section's per-slot state (the MPI peers' per-row
 * offsets, lengths and states) goes in CDL_RING_ARRAYS_PEER, defined before
 * this point: it is then sized, grown and freed with the ring, and can
 * never be smaller than the ring it describes. */
#ifndef CDL_RING_ARRAYS_PEER
#define CDL_RING_ARRAYS_PEER(X)
#endif
#define CDL_RING_ARRAYS(X)                 \
    X(ring, slots, cdl__slot, CDL_PER_SLOT, 1)   \
    X(ring, row_state, uint32_t, CDL_PER_ROW, 1) \
    CDL_RING_ARRAYS_PEER(X)

/* Bytes of one ring slot holding rows_cap rows in data_cap data bytes:
 * data, labels, ids, (tokens) targets or (boxes) boxes, and (boxes) the
 * rows' box counts, each 64-byte aligned. */
CDL_PRIVATE size_t cdl__ring_slot_bytes(const coordl *L, uint32_t rows_cap, size_t data_cap, size_t *data,
                                   size_t *labels, size_t *ids) {
    const size_t B = rows_cap, align = 64;
    *data = cdl__round_up(data_cap, align);
    *labels = cdl__round_up(B * sizeof(int32_t), align);
    *ids = cdl__round_up(B * sizeof(uint64_t), align);
    return *data + *labels + *ids + cdl__round_up(B * L->geom.target_row_bytes, align) +
           (L->geom.box_rows ? cdl__round_up(B * sizeof(uint32_t), align) : 0);
}

/* Points every slot at its part of the ring arena, and frees it. */
CDL_PRIVATE void cdl__ring_layout(coordl *L) {
    size_t data, labels, ids;
    const size_t per_slot = cdl__ring_slot_bytes(L, L->geom.slot_rows_cap, L->geom.slot_data_cap, &data, &labels, &ids);
    for (uint32_t s = 0; s < L->ring.nslots; s++) {
        cdl__slot *sl = &L->ring.slots[s];
        sl->data_off = s * per_slot;
        sl->labels_off = s * per_slot + data;
        sl->ids_off = s * per_slot + data + labels;
        sl->targets_off = s * per_slot + data + labels + ids;
        sl->nboxes_off = sl->targets_off + cdl__round_up((size_t)L->geom.slot_rows_cap * L->geom.target_row_bytes, 64);
        sl->state = CDL_SLOT_FREE;
        sl->gen++;
    }
    L->S->slots_free = L->ring.nslots;
}

/* Maps the ring arena for rows_cap rows and data_cap data bytes per slot,
 * and allocates the per-row arrays (and the first time the per-slot ones).
 * The new arrays are allocated first; the old arena is unmapped before the
 * new one is mapped (growing never holds both). On failure the old arrays
 * stay installed and the arena is gone: coordl_set then maps the old size
 * again. In a group the arena and the shared arrays are the shm object's:
 * only the private arrays are allocated. */
CDL_PRIVATE coordl_status cdl__ring_alloc(coordl *L, uint32_t rows_cap, size_t data_cap) {
    const int in_group = L->member.shm_base != NULL;
    const uint64_t nslots = L->ring.nslots, nrows = nslots * rows_cap;
    size_t data, labels, ids;
    const size_t per_slot = cdl__ring_slot_bytes(L, rows_cap, data_cap, &data, &labels, &ids);
    if (nslots == 0 || rows_cap == 0 || per_slot > SIZE_MAX / nslots || nrows > SIZE_MAX / sizeof(uint64_t))
        return cdl__open_fail(COORDL_ERR_INVALID, "batch ring too large (%llu slots of %u rows)",
                              (unsigned long long)nslots, rows_cap);
    struct {
#define CDL_RING_NEW_FIELD(o, f, type, per, shared) type *f;
        CDL_RING_ARRAYS(CDL_RING_NEW_FIELD)
#undef CDL_RING_NEW_FIELD
        int unused;
    } nw;
    memset(&nw, 0, sizeof nw);
    int ok = 1;
#define CDL_RING_NEW_ALLOC(o, f, type, per, shared)                                               \
    if (ok && !((shared) && in_group) && ((per) == CDL_PER_ROW || !L->o.f)) {                    \
        nw.f = cdl__calloc(L, (size_t)((per) == CDL_PER_ROW ? nrows : nslots), sizeof(type)); \
        ok = nw.f != NULL;                                                                     \
    }
    CDL_RING_ARRAYS(CDL_RING_NEW_ALLOC)
#undef CDL_RING_NEW_ALLOC
    coordl_status rc = ok ? COORDL_OK : cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the batch ring's tables; lower "
                                                "prefetch_batches or batch_size (max_batch_size)");
    if (rc == COORDL_OK && !in_group) {
        cdl__arena_unmap(L, &L->ring.arena);
        rc = cdl__arena_map(L, &L->ring.arena, per_slot * nslots, 1, "batch ring",
                            "prefetch_batches, batch_size (max_batch_size) or out_w/out_h (max_out_w/max_out_h)");
    }
    if (rc != COORDL_OK) {
#define CDL_RING_NEW_FREE(o, f, type, per, shared) cdl__free(L, nw.f);
        CDL_RING_ARRAYS(CDL_RING_NEW_FREE)
#undef CDL_RING_NEW_FREE
        return rc;
    }
#define CDL_RING_INSTALL(o, f, type, per, shared) \
    if (nw.f) {                                \
        cdl__free(L, L->o.f);                    \
        L->o.f = nw.f;                           \
    }
    CDL_RING_ARRAYS(CDL_RING_INSTALL)
#undef CDL_RING_INSTALL
    L->geom.slot_rows_cap = rows_cap;
    L->geom.slot_data_cap = data_cap;
    if (!in_group) cdl__ring_layout(L);
    return COORDL_OK;
}

/* Unregisters and unmaps the arena and frees the private arrays (before a
 * group is left: which arrays are shared depends on it). */
CDL_PRIVATE void cdl__ring_free(coordl *L) {
    const int in_group = L->member.shm_base != NULL;
    cdl__arena_unmap(L, &L->ring.arena);
#define CDL_RING_FREE(o, f, type, per, shared) \
    if (!((shared) && in_group)) {          \
        cdl__free(L, L->o.f);                 \
        L->o.f = NULL;                        \
    }
    CDL_RING_ARRAYS(CDL_RING_FREE)
#undef CDL_RING_FREE
}

/* --- slots, members, marks -------------------------------------------- */

static cdl__u8 *cdl__slot_data(const coordl *L, const cdl__slot *s) { return L->ring.arena.base + s->data_off; }
static int32_t *cdl__slot_labels(const coordl *L, const cdl__slot *s) {
    return (int32_t *)(void *)(L->ring.arena.base + s->labels_off);
}
static uint64_t *cdl__slot_ids(const coordl *L, const cdl__slot *s) {
    return (uint64_t *)(void *)(L->ring.arena.base + s->ids_off);
}
static uint32_t *cdl__slot_rows(const coordl *L, const cdl__slot *s) {
    return L->ring.row_state + (size_t)(s - L->ring.slots) * L->geom.slot_rows_cap;
}

static uint32_t cdl__mark_for(int m, uint64_t gen) {
    return (uint32_t)((gen & CDL_MARK_GEN_MASK) << 6) | (uint32_t)(m + 1);
}

/* Member m is in the group with generation gen. */
CDL_PRIVATE CDL_HOT int cdl__member_is(const cdl__stream *S, int m, uint64_t gen) {
    return m >= 0 && m < CDL_MAX_MEMBERS && (atomic_load(&S->live_mask) >> m & 1u) &&
           atomic_load(&S->members[m].gen) == gen;
}

/* This handle is still the member generation it joined as. */
CDL_PRIVATE CDL_HOT int cdl__member_current(const coordl *L) { return cdl__member_is(L->S, L->member.me, L->member.my_gen); }

/* A claim mark whose member generation is no longer in the group. */
static int cdl__mark_stale(const cdl__stream *S, uint32_t mark) {
    if (mark == CDL_ROW_FREE || mark == CDL_ROW_DONE) return 0;
    const int m = (int)(mark & 63u) - 1;
    if (m < 0 || m >= CDL_MAX_MEMBERS || !(atomic_load(&S->live_mask) >> m & 1u)) return 1;
    return (atomic_load(&S->members[m].gen) & CDL_MARK_GEN_MASK) != (uint64_t)(mark >> 6);
}

/* Members that consume batches of `epoch`: in the group, and joined no
 * later than that epoch. Under mu. */
static uint32_t cdl__consumers_of(const coordl *L, uint64_t epoch) {
    const uint32_t live = atomic_load(&L->S->live_mask);
    uint32_t m = 0;
    for (int i = 0; i < CDL_MAX_MEMBERS; i++)
        if ((live >> i & 1u) && L->S->members[i].start_epoch <= epoch) m |= 1u << i;
    return m;
}

CDL_PRIVATE CDL_HOT cdl__epoch_counters *cdl__epoch_entry(coordl *L, uint64_t epoch) {
    cdl__epoch_counters *e = &L->stats.epochs[epoch % CDL_EPOCH_STATS_KEPT];
    if (!e->used || e->epoch != epoch) {
        memset(e, 0, sizeof *e);
        e->used = 1;
        e->epoch = epoch;
        e->s.epoch = epoch;
    }
    return e;
}

/* A finished row's counters into the handle's and its epoch's totals. */
static void cdl__counters_add(coordl *L, uint64_t epoch, const cdl__counters *c) {
    cdl__epoch_counters *ec = cdl__epoch_entry(L, epoch);
    (void)ec;
#define CDL_COUNTER_ADD(name, row, in_stats, ep) \
    CDL_IF_##row(CDL_IF_##in_stats(L->stats.st.name += c->name;) CDL_IF_##ep(ec->s.name += c->name;))
    CDL_COUNTERS(CDL_COUNTER_ADD)
#undef CDL_COUNTER_ADD
}

/* --- invariants -------------------------------------------------------- */

/* The stream's invariants: rows claimed equal rows marked, rows in flight
 * equal claimed minus done, a READY slot has every row done and is held
 * only by members still in the group, every mark belongs to a member
 * generation in the group, no assignment is left half-done, and this
 * consumer's count of held batches matches the slots. 1 when they hold,
 * else 0 and the first broken one in why. Under mu. COORDL_DEBUG builds
 * check them after every transition; tests that include coordl.c call it
 * in any build (hence "unused" where neither does). */
#if defined(__GNUC__)
__attribute__((unused))
#endif
static int cdl__stream_invariants(const coordl *L, char *why, size_t cap) {
    const cdl__stream *S = L->S;
    const uint32_t live = atomic_load(&S->live_mask);
    uint64_t inflight = 0;
    uint32_t held = 0, nfree = 0;
#define CDL_BROKEN(...) do { snprintf(why, cap, __VA_ARGS__); return 0; } while (0)
    if (S->assign.slot != 0) CDL_BROKEN("the assignment of slot %u was left half-done", S->assign.slot - 1);
    for (uint32_t s = 0; s < L->ring.nslots; s++) {
        const cdl__slot *sl = &L->ring.slots[s];
        const uint32_t *rows = cdl__slot_rows(L, sl);
        nfree += sl->state == CDL_SLOT_FREE;
        if (sl->state == CDL_SLOT_FREE) continue;
        if (sl->state != CDL_SLOT_FILLING && sl->state != CDL_SLOT_READY) CDL_BROKEN("slot %u: state %d", s, sl->state);
        if (sl->n == 0 || sl->n > L->geom.slot_rows_cap) CDL_BROKEN("slot %u: %u rows (capacity %u)", s, sl->n, L->geom.slot_rows_cap);
        uint32_t marked = 0, done = 0;
        for (uint32_t r = 0; r < sl->n; r++) {
            marked += rows[r] != CDL_ROW_FREE;
            done += rows[r] == CDL_ROW_DONE;
            if (cdl__mark_stale(S, rows[r]))
                CDL_BROKEN("slot %u row %u: mark %#x belongs to member %d generation %u, which is not in the group",
                           s, r, rows[r], (int)(rows[r] & 63u) - 1, rows[r] >> 6);
        }
        if (marked != sl->rows_claimed) CDL_BROKEN("slot %u: %u rows claimed but %u marked", s, sl->rows_claimed, marked);
        if (done != sl->rows_done) CDL_BROKEN("slot %u: %u rows done but %u marked done", s, sl->rows_done, done);
        if (sl->state == CDL_SLOT_FILLING) {
            inflight += marked - done;
            continue;
        }
        if (done != sl->n) CDL_BROKEN("slot %u is READY with %u of %u rows done", s, done, sl->n);
        if ((sl->need_mask | sl->taken_mask | sl->done_mask) & ~live)
            CDL_BROKEN("slot %u: consumer bits %#x/%#x/%#x of members not in the group (%#x)", s, sl->need_mask,
                       sl->taken_mask, sl->done_mask, live);
        if ((sl->done_mask & sl->need_mask) == sl->need_mask)
            CDL_BROKEN("slot %u is READY though every consumer released it", s);
        if (sl->taken_mask & ~sl->done_mask & L->member.bit) held++;
    }
    if (nfree != S->slots_free) CDL_BROKEN("%u slots counted free, but %u are FREE", S->slots_free, nfree);
    if (inflight != S->inflight)
        CDL_BROKEN("%u rows counted in flight, but claimed minus done is %llu", S->inflight, (unsigned long long)inflight);
    if (L->member.me >= 0 && cdl__member_current(L) && held != L->consumer.held)
        CDL_BROKEN("this consumer counts %u held batches, the slots say %u", L->consumer.held, held);
#undef CDL_BROKEN
    return 1;
}

#ifdef COORDL_DEBUG

CDL_PRIVATE void cdl__stream_check(const coordl *L, const char *transition) {
    char why[256], msg[320];
    cdl__assert_locked(L);
    if (!cdl__stream_invariants(L, why, sizeof why)) {
        snprintf(msg, sizeof msg, "stream invariant broken after %s: %s", transition, why);
        cdl__debug_assert(L, 0, msg);
    }
}
#endif

/* --- transitions ------------------------------------------------------- */

#ifdef COORDL_MPI
#endif

/* Carries out the recorded assignment S->assign (idempotent: repair runs
 * it again when its holder died half-way). Under mu. */
static void cdl__slot_assign(coordl *L) {
    cdl__stream *S = L->S;
    cdl__slot *sl = &L->ring.slots[S->assign.slot - 1];
    sl->gen++;
    sl->epoch = S->assign.epoch;
    sl->pos = S->assign.pos;
    sl->index = S->assign.index;
    sl->n = S->assign.n;
    sl->out_w = L->cfg.out_w;
    sl->out_h = L->cfg.out_h;
    sl->row_bytes = L->geom.row_bytes;
    sl->rows_claimed = sl->rows_done = 0;
    sl->need_mask = sl->taken_mask = sl->done_mask = 0;
    sl->status = COORDL_OK;
    sl->err_row = UINT32_MAX;
    sl->errmsg[0] = '\0';
    memset(cdl__slot_rows(L, sl), 0, (size_t)L->geom.slot_rows_cap * sizeof(uint32_t));
    if (sl->state == CDL_SLOT_FREE) S->slots_free--; /* a repair may run it again */
    sl->state = CDL_SLOT_FILLING;
    S->claim_epoch = S->assign.epoch;
    S->claim_pos = S->assign.pos + S->assign.n;
    S->claim_index = S->assign.index + 1;
    S->assign.slot = 0;
}

/* The oldest FILLING slot with an unclaimed row, else a FREE slot given
 * the next batch of the stream; NULL when the ring is full. Under mu. */
static cdl__slot *cdl__slot_to_fill(coordl *L) {
    cdl__stream *S = L->S;
    cdl__slot *best = NULL;
    for (uint32_t s = 0; s < L->ring.nslots; s++) {
        cdl__slot *c = &L->ring.slots[s];
        if (c->state == CDL_SLOT_FILLING && c->rows_claimed < c->n &&
            (!best || c->epoch < best->epoch || (c->epoch == best->epoch && c->pos < best->pos)))
            best = c;
    }
    if (best) return best;
    for (uint32_t s = 0; s < L->ring.nslots; s++) {
        cdl__slot *sl = &L->ring.slots[s];
        if (sl->state != CDL_SLOT_FREE) continue;
        uint64_t epoch = S->claim_epoch, pos = S->claim_pos, index = S->claim_index;
        uint64_t end = cdl__epoch_end(L, epoch);
        if (end == UINT64_MAX) {
            /* a lazy index whose shards are not all counted: the batch's
             * last row either maps or lies past the end, which is known
             * from then on (the scan-ahead threads keep the next window
             * scanned, so this rarely reads a shard under the lock); a
             * consumer waiting at the end learns it */
            cdl__sampler_known(L, epoch, pos + L->cfg.batch_size - 1, 1);
            if (cdl__sampler_settle(L)) {
                end = cdl__epoch_end(L, epoch);
                cdl__broadcast(L, &S->ready_cv);
            }
        }
        if (pos >= end) {
            /* partitioned cache: past the cached epoch, wait for the map */
            if (cdl__peer_claim_waits(L, epoch)) return NULL;
            epoch++;
            pos = 0;
            index = 0;
            end = cdl__epoch_end(L, epoch);
        }
        const uint64_t left = end - pos;
        /* the intent first, committed by setting assign.slot last: a member
         * killed in the middle leaves either nothing or a whole intent for
         * cdl__stream_repair to carry out */
        S->assign.epoch = epoch;
        S->assign.pos = pos;
        S->assign.index = index;
        S->assign.n = (uint32_t)(left < L->cfg.batch_size ? left : L->cfg.batch_size);
        S->assign.slot = s + 1;
        cdl__slot_assign(L);
#ifdef COORDL_MPI
        /* ask peers for their rows now, before any worker needs them */
        cdl__peer_request_slot(L, s);
#endif
        return sl;
    }
    return NULL;
}

/* Work a woken worker could claim now: an unclaimed row or a free slot. */
static int cdl__stream_has_work(const coordl *L) {
    for (uint32_t s = 0; s < L->ring.nslots; s++) {
        const cdl__slot *sl = &L->ring.slots[s];
        if (sl->state == CDL_SLOT_FREE || (sl->state == CDL_SLOT_FILLING && sl->rows_claimed < sl->n)) return 1;
    }
    return 0;
}

/* A slot whose every consumer has released it is free again, under a new
 * generation. One waiting worker is woken, not all: the one that claims a
 * row wakes the next while work remains (cdl__stream_claim). And only once
 * half the ring is free, not at every release: the woken worker then fills
 * several slots in one go, and the releases in between cost the consumer
 * no system call and no preemption by the worker it wakes (the trainer's
 * time inside coordl_release/next_into; issue #14). A consumer about to
 * wait for a batch wakes a worker itself (cdl__consumer_next), so a free
 * slot below the mark never strands it. With wake = 0 the caller wakes it
 * after unlocking (cdl__signal_unlocked), so the woken worker does not
 * block at once on the lock its waker still holds. Returns 1 when the slot
 * was freed and a worker is to be woken. */
static CDL_HOT int cdl__slot_free_if_done(coordl *L, cdl__slot *sl, int wake) {
    if (sl->state != CDL_SLOT_READY || (sl->done_mask & sl->need_mask) != sl->need_mask) return 0;
    sl->state = CDL_SLOT_FREE;
    sl->gen++;
    if (++L->S->slots_free < (L->ring.nslots + 1) / 2) return 0;
    if (wake) cdl__signal(L, &L->S->work_cv);
    return 1;
}

static CDL_HOT void cdl__slot_maybe_free(coordl *L, cdl__slot *sl) { (void)cdl__slot_free_if_done(L, sl, 1); }

/* Every row done: the batch goes to every member that consumes its epoch. */
static void cdl__slot_ready(coordl *L, cdl__slot *sl) {
    sl->state = CDL_SLOT_READY;
    sl->need_mask = cdl__consumers_of(L, sl->epoch);
    sl->taken_mask = sl->done_mask = 0;
    cdl__broadcast(L, &L->S->ready_cv); /* every member's consumer, and workers waiting for peers */
    cdl__slot_maybe_free(L, sl);        /* nobody left to consume it */
}

/* try_claim: marks the next row as this member generation's and fills c
 * with a snapshot of everything its preparer needs; 0 when no row can be
 * claimed now (nothing to fill, paused, stopping). Under mu. */
CDL_PRIVATE int cdl__stream_try_claim(coordl *L, cdl__claim *c) {
    cdl__stream *S = L->S;
    if (L->pool.stop || S->paused || S->broken || !S->started || !cdl__member_current(L)) return 0;
    cdl__slot *sl = cdl__slot_to_fill(L);
    if (!sl) return 0;
    uint32_t *rows = cdl__slot_rows(L, sl);
    /* rows are claimed in order, so the first free one is usually at
     * rows_claimed; a drop may free rows below it: the scan wraps (which
     * row a claim gets changes nothing in the batch). rows_claimed < n:
     * one is free. A scan from row 0 cost B/2 steps a claim: a quarter
     * of a token batch's time at B = 128. */
    uint32_t row = sl->rows_claimed;
    while (rows[row] != CDL_ROW_FREE) row = row + 1 == sl->n ? 0 : row + 1;
    c->slot = (uint32_t)(sl - L->ring.slots);
    c->row = row;
    c->slot_gen = sl->gen;
    c->mark = cdl__mark_for(L->member.me, L->member.my_gen);
    c->epoch = sl->epoch;
    c->pos = sl->pos + row;
    c->out_w = sl->out_w;
    c->out_h = sl->out_h;
    c->row_bytes = sl->row_bytes;
    c->data_off = sl->data_off + (size_t)row * sl->row_bytes;
    c->targets_off = sl->targets_off + (size_t)row * L->geom.target_row_bytes;
    rows[row] = c->mark;
    sl->rows_claimed++;
    S->inflight++;
    /* pass the baton: a worker may sleep while work remains (none to wake
     * in a private loader without workers: its consumer prepares) */
    if ((L->pool.nworkers > 0 || L->cfg.group) && cdl__stream_has_work(L)) cdl__signal(L, &S->work_cv);
    cdl__stream_check(L, "claim");
    return 1;
}

/* claim: a worker's try_claim, waiting for work. Returns 1 with a row
 * claimed, 0 when the worker should exit, 2 (only when `idle` allows) when
 * there is no slot to fill and cached JPEGs wait for a rewrite: the worker
 * does one with no lock held and claims again (idle time, decode.c).
 * Under mu (the waits release it). */
CDL_PRIVATE int cdl__stream_claim(coordl *L, cdl__claim *c, int idle) {
    cdl__stream *S = L->S;
    for (;;) {
        if (L->pool.stop) return 0;
        if (S->paused || S->broken || !S->started || !cdl__member_current(L)) {
            cdl__wait(L, &S->work_cv);
            continue;
        }
        if (cdl__stream_try_claim(L, c)) return 1;
        /* not stopped nor paused (checked above, under mu): no slot to fill */
        if (idle && L->cache.entries && L->cfg.jpeg_random_access && atomic_load(&S->cache_plain_items) > 0)
            return 2;
        const uint64_t t0 = cdl__now_ns();
        cdl__wait(L, &S->work_cv);
        L->stats.st.wait_slot_ns += cdl__now_ns() - t0;
    }
}

/* complete: the row counts only if nothing reset it meanwhile: this member
 * generation is still in the group and its mark still on the row, and the
 * slot still holds that assignment. Otherwise a drop already put the row
 * back (and took it out of the rows in flight), so nothing changes. The
 * work is counted in the stats either way: it was done. Under mu. */
CDL_PRIVATE void cdl__stream_complete(coordl *L, const cdl__claim *c, const cdl__counters *counters,
                                 const cdl__row_result *r) {
    cdl__stream *S = L->S;
    cdl__slot *sl = &L->ring.slots[c->slot];
    uint32_t *rows = cdl__slot_rows(L, sl);
    cdl__counters_add(L, c->epoch, counters);
    if (cdl__member_current(L) && sl->gen == c->slot_gen && sl->state == CDL_SLOT_FILLING && rows[c->row] == c->mark) {
        if (r->staged) {
            memcpy(L->ring.arena.base + c->data_off, r->staged, c->row_bytes);
            if (r->staged_targets) memcpy(L->ring.arena.base + c->targets_off, r->staged_targets, L->geom.target_row_bytes);
        }
        cdl__slot_ids(L, sl)[c->row] = r->id;
        cdl__slot_labels(L, sl)[c->row] = r->label;
        if (L->geom.box_rows) /* the counts of a row's boxes (boxes: targets area) */
            ((uint32_t *)(void *)(L->ring.arena.base + sl->nboxes_off))[c->row] = r->nboxes;
        if (r->status != COORDL_OK && c->row < sl->err_row) {
            sl->err_row = c->row;
            sl->status = r->status;
            snprintf(sl->errmsg, sizeof sl->errmsg, "%s", r->errmsg);
        }
        rows[c->row] = CDL_ROW_DONE; /* the marks are the truth repair reads: first */
        S->inflight--;
        if (++sl->rows_done == sl->n) cdl__slot_ready(L, sl);
    }
    if (S->paused && S->inflight == 0) cdl__broadcast(L, &S->idle_cv);
    cdl__stream_check(L, "complete");
}

/* The READY slot holding this consumer's next batch, or -1. Slots are
 * mostly assigned in ring order, so the search starts at the slot after
 * the last one taken: a ready batch then costs one slot's lines, not
 * every slot's (issue 23: after the trainer's step they are cold). At
 * most one slot matches, wherever the search starts. Under mu. */
CDL_PRIVATE CDL_HOT int cdl__stream_find(const coordl *L) {
    const uint32_t n = L->ring.nslots;
    const uint32_t first = L->consumer.next_slot < n ? L->consumer.next_slot : 0;
    for (uint32_t k = 0; k < n; k++) {
        const uint32_t s = first + k < n ? first + k : first + k - n;
        const cdl__slot *c = &L->ring.slots[s];
        if (c->state == CDL_SLOT_READY && c->epoch == L->consumer.cur_epoch && c->pos == L->consumer.cur_pos &&
            (c->need_mask & L->member.bit) && !(c->taken_mask & L->member.bit))
            return (int)s;
    }
    return -1;
}

static CDL_HOT void cdl__fill_batch(coordl *L, const cdl__slot *sl, uint32_t slot_index, coordl_batch *out) {
    out->n = sl->n;
    out->data = cdl__slot_data(L, sl);
    out->data_bytes = (size_t)sl->n * sl->row_bytes;
    out->labels = cdl__slot_labels(L, sl);
    out->ids = cdl__slot_ids(L, sl);
    out->targets = L->geom.target_row_bytes && !L->geom.box_rows
        ? (int32_t *)(void *)(L->ring.arena.base + sl->targets_off) : NULL;
    out->boxes = L->geom.box_rows ? (const float *)(const void *)(L->ring.arena.base + sl->targets_off) : NULL;
    out->nboxes = L->geom.box_rows ? (const uint32_t *)(const void *)(L->ring.arena.base + sl->nboxes_off) : NULL;
    out->epoch = sl->epoch;
    out->index = sl->index;
    cdl__row_shape(L, sl->out_w, sl->out_h, &out->c, &out->h, &out->w);
    out->layout = L->cfg.layout;
    out->slot_ = slot_index + 1; /* 0 marks a batch that holds no slot */
    out->gen_ = (uint32_t)sl->gen;
}

/* take: the consumer takes its next batch from slot s. A batch whose rows
 * failed is skipped (released at once) and its status returned. Under mu. */
CDL_PRIVATE CDL_HOT coordl_status cdl__stream_take(coordl *L, uint32_t s, coordl_batch *out) {
    cdl__slot *sl = &L->ring.slots[s];
    L->consumer.cur_pos += sl->n;
    L->consumer.cur_index++;
    L->consumer.next_slot = s + 1 < L->ring.nslots ? s + 1 : 0;
    cdl__epoch_entry(L, sl->epoch)->s.batches++;
    sl->taken_mask |= L->member.bit;
    const coordl_status rc = sl->status;
    if (rc != COORDL_OK) {
        snprintf(L->errmsg, sizeof L->errmsg, "%s", sl->errmsg);
        sl->done_mask |= L->member.bit;
        cdl__slot_maybe_free(L, sl);
    } else {
        L->consumer.held++;
        L->stats.st.batches++;
        cdl__fill_batch(L, sl, s, out);
    }
    cdl__stream_check(L, "take");
    return rc;
}

/* Whether this member still holds batch b: its generation still in the
 * group, the slot READY with b's generation, taken and not yet released
 * by it. What coordl_next_into checks after copying with the lock
 * released: a member dropped meanwhile lost the slot, which may have been
 * refilled while it was copied. Under mu. */
CDL_PRIVATE CDL_HOT int cdl__stream_holds(const coordl *L, const coordl_batch *b) {
    if (b->slot_ == 0 || b->slot_ > L->ring.nslots) return 0;
    const cdl__slot *sl = &L->ring.slots[b->slot_ - 1];
    return cdl__member_current(L) && sl->state == CDL_SLOT_READY && (uint32_t)sl->gen == b->gen_ &&
           (sl->taken_mask & L->member.bit) && !(sl->done_mask & L->member.bit);
}

/* release: only the batch the handle names, slot and generation; a stale
 * copy of a released batch (the slot has moved on), a batch of a dropped
 * member generation, or a second release is a no-op. Returns 1 when it
 * freed the slot and half the ring is free: the caller then wakes one
 * worker once it has unlocked (cdl__signal_unlocked). Under mu. */
CDL_PRIVATE CDL_HOT int cdl__stream_release(coordl *L, const coordl_batch *b) {
    if (b->slot_ == 0 || b->slot_ > L->ring.nslots) return 0;
    cdl__slot *sl = &L->ring.slots[b->slot_ - 1];
    if (!cdl__stream_holds(L, b)) return 0;
    sl->done_mask |= L->member.bit;
    L->consumer.held--;
    const int freed = cdl__slot_free_if_done(L, sl, 0);
    cdl__stream_check(L, "release");
    return freed;
}

/* Recomputes everything that follows from the marks and the member set:
 * marks of member generations no longer in the group are freed, claimed,
 * done and in-flight counts recounted, fully done slots made READY,
 * consumer bits of departed members cleared and slots nobody needs freed.
 * Idempotent; the core of drop and repair. Under mu. */
static void cdl__stream_recount(coordl *L) {
    cdl__stream *S = L->S;
    const uint32_t live = atomic_load(&S->live_mask);
    uint32_t inflight = 0;
    for (uint32_t s = 0; s < L->ring.nslots; s++) {
        cdl__slot *sl = &L->ring.slots[s];
        sl->need_mask &= live;
        sl->taken_mask &= live;
        sl->done_mask &= live;
        if (sl->state == CDL_SLOT_FILLING) {
            uint32_t *rows = cdl__slot_rows(L, sl);
            uint32_t claimed = 0, done = 0;
            for (uint32_t r = 0; r < sl->n; r++) {
                if (cdl__mark_stale(S, rows[r])) rows[r] = CDL_ROW_FREE;
                claimed += rows[r] != CDL_ROW_FREE;
                done += rows[r] == CDL_ROW_DONE;
            }
            sl->rows_claimed = claimed;
            sl->rows_done = done;
            inflight += claimed - done;
            if (done == sl->n) cdl__slot_ready(L, sl);
        } else {
            cdl__slot_maybe_free(L, sl);
        }
    }
    S->inflight = inflight;
    /* a member killed between a slot's state and this count leaves it
     * off: recounted from the states, like the rows */
    uint32_t nfree = 0;
    for (uint32_t s = 0; s < L->ring.nslots; s++) nfree += L->ring.slots[s].state == CDL_SLOT_FREE;
    S->slots_free = nfree;
}

/* drop: member m of generation gen leaves the stream (dropped by another
 * member, or its own close). It gets a new generation and leaves the live
 * set first, so its marks and handles are stale from then on; then the
 * recount frees its claimed rows and clears its consumer bits. A process
 * killed in the middle leaves nothing repair cannot finish. Under mu. */
CDL_PRIVATE void cdl__stream_drop_member(coordl *L, int m, uint64_t gen) {
    cdl__stream *S = L->S;
    if (!cdl__member_is(S, m, gen)) return;
    atomic_fetch_add(&S->members[m].gen, 1);
    atomic_fetch_and(&S->live_mask, ~(1u << m));
    cdl__stream_recount(L);
    cdl__broadcast(L, &S->work_cv);
    cdl__broadcast(L, &S->ready_cv);
    cdl__broadcast(L, &S->idle_cv);
    cdl__stream_check(L, "drop member");
}

/* repair: the lock came back EOWNERDEAD. The dead holder's assignment is
 * finished and the rest recounted from the marks, which every transition
 * writes first. The holder itself (if still that generation) is flagged
 * dead, not dropped here: dropping, and saying so, belongs to the member
 * threads (whichever thread locked next, a query included, only repairs),
 * and one of them drops it within a heartbeat period. */
CDL_PRIVATE void cdl__stream_repair(coordl *L, int dead, uint64_t dead_gen) {
    cdl__stream *S = L->S;
    if (S->assign.slot > 0 && S->assign.slot <= L->ring.nslots) cdl__slot_assign(L);
    S->assign.slot = 0;
    if (dead >= 0 && cdl__member_is(S, dead, dead_gen)) atomic_store(&S->members[dead].died_holding_lock, 1u);
    cdl__stream_recount(L);
    cdl__broadcast(L, &S->work_cv);
    cdl__broadcast(L, &S->ready_cv);
    cdl__broadcast(L, &S->idle_cv);
    cdl__stream_check(L, "repair");
}

/* pause: no new claims; waits until no row is in flight. Under mu. */
CDL_PRIVATE void cdl__stream_pause(coordl *L) {
    L->S->paused = 1;
    cdl__ra_pause(L); /* no new reads of positions about to be dropped */
    while (L->S->inflight > 0) cdl__wait(L, &L->S->idle_cv);
    cdl__stream_check(L, "pause");
}

/* restart: frees every slot not held by the caller (a new generation for
 * each) and restarts the claims at the consumer's position. same_order: the
 * positions from there on hold the items they held before (only the output
 * size changed), so the read-ahead keeps what it has read. Under mu,
 * paused. */
CDL_PRIVATE void cdl__stream_restart(coordl *L, int same_order) {
    for (uint32_t s = 0; s < L->ring.nslots; s++) {
        cdl__slot *sl = &L->ring.slots[s];
        const int held = sl->state == CDL_SLOT_READY && (sl->taken_mask & ~sl->done_mask & L->member.bit);
        if (!held && sl->state != CDL_SLOT_FREE) {
            sl->state = CDL_SLOT_FREE;
            sl->gen++;
            L->S->slots_free++;
        }
    }
    L->S->claim_epoch = L->consumer.cur_epoch;
    L->S->claim_pos = L->consumer.cur_pos;
    L->S->claim_index = L->consumer.cur_index;
    L->S->paused = 0;
    cdl__ra_restart(L, same_order); /* the read-ahead follows the claims */
    cdl__broadcast(L, &L->S->work_cv);
    cdl__stream_check(L, "restart");
}

/* A stream block with a robust mutex and monotonic condition variables;
 * process-shared (with a liveness lock per member) in a group's object. */
CDL_PRIVATE coordl_status cdl__stream_init(cdl__stream *S, int pshared) {
    pthread_mutexattr_t ma;
    pthread_condattr_t ca;
    memset(S, 0, sizeof *S);
    if (pthread_mutexattr_init(&ma) != 0 || pthread_condattr_init(&ca) != 0)
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot initialise the stream's lock");
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pshared) {
        pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
        pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    }
    int e = pthread_mutex_init(&S->mu, &ma);
    for (int m = 0; !e && pshared && m < CDL_MAX_MEMBERS; m++) e = pthread_mutex_init(&S->members[m].alive, &ma);
    if (!e) e = pthread_cond_init(&S->work_cv.cv, &ca);
    if (!e) e = pthread_cond_init(&S->ready_cv.cv, &ca);
    if (!e) e = pthread_cond_init(&S->idle_cv.cv, &ca);
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_destroy(&ca);
    if (e) return cdl__open_fail(COORDL_ERR_NOMEM, "cannot initialise the stream's lock: %s", strerror(e));
    S->cut_epoch = UINT64_MAX;
    S->lock_owner = -1;
    return COORDL_OK;
}

/* ---- src/pool.c -------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * pool.c - the worker pool.
 *
 * Owns:  L->pool: the worker threads, the consumer's helper scratch, the
 *        stop flag, and a lazy index's scan-ahead threads
 * Lock:  the stream's lock for claims and stop; each worker's scratch is
 *        its own
 * Calls: status, rand, placement, lock, io, index, sampler, cache, readahead,
 *        decode, stream (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */

/* --- workers ------------------------------------------------------------ */

/* A bad row's message ends with what on_bad_sample did and what it can
 * do instead: the first thing a newcomer whose loop stopped on a damaged
 * file needs to read. The reason (naming the file) is cut, never the hint. */
static void cdl__bad_row_hint(cdl__worker *W, int tried) {
    char hint[256];
    if (W->L->cfg.on_bad_sample == COORDL_BAD_SUBSTITUTE && tried == 0)
        snprintf(hint, sizeof hint, " [on_bad_sample = COORDL_BAD_SUBSTITUTE, but the dataset has no other item "
                 "to stand in; this batch is skipped, the next coordl_next returns the one after it]");
    else if (W->L->cfg.on_bad_sample == COORDL_BAD_SUBSTITUTE)
        snprintf(hint, sizeof hint, " [on_bad_sample = COORDL_BAD_SUBSTITUTE: none of %d substitute items "
                 "decoded either; this batch is skipped, the next coordl_next returns the one after it]", tried);
    else
        snprintf(hint, sizeof hint, " [on_bad_sample = COORDL_BAD_FAIL: this batch is skipped, the next "
                 "coordl_next returns the one after it; set on_bad_sample = COORDL_BAD_SUBSTITUTE to fill a bad "
                 "item's row from another item and keep the batch]");
    const size_t hlen = strlen(hint), room = sizeof W->err - 1 - hlen;
    size_t len = strlen(W->err);
    if (len > room) len = room;
    memcpy(W->err + len, hint, hlen + 1);
}

/* Prepare one row, substituting bad items when configured. Returns the
 * row's status; sets *row_id to the item actually used. */
static coordl_status cdl__prepare_row(cdl__worker *W, uint64_t epoch, uint64_t id, uint64_t pos,
                                      void *dst, uint64_t *row_id) {
    coordl *L = W->L;
    coordl_status rc = cdl__prepare_item(W, epoch, id, dst);
    *row_id = id;
    if (rc == COORDL_OK || rc == COORDL_ERR_NOMEM) return rc;
    if (L->cfg.on_bad_sample != COORDL_BAD_SUBSTITUTE) {
        cdl__bad_row_hint(W, 0);
        return rc;
    }
    if (cdl__ra_is_closing(L)) return rc; /* its read was cut by coordl_close: nobody takes the row */
    int tried = 0;
    for (int attempt = 0; attempt < CDL_SUBSTITUTE_TRIES; attempt++) {
        W->row.bad_samples++;
        cdl__log(L, COORDL_LOG_WARN, "bad sample substituted: %s", W->err);
        const uint64_t draw = cdl__hash4(L->cfg.seed, CDL_STREAM_SUBST, epoch, pos * CDL_SUBSTITUTE_TRIES + (uint64_t)attempt);
        uint64_t sub;
        if (L->index.lazy) { /* a lazy index: another item of the same shard (its count is known) */
            uint32_t count = 0;
            char why[CDL_ERRMSG_MAX];
            if (cdl__lazy_count(L, CDL_LAZY_SHARD(id), &count, why, sizeof why) != COORDL_OK || count == 0 ||
                count == CDL_LAZY_UNKNOWN)
                break;
            uint32_t j = (uint32_t)(draw % count);
            if (j == CDL_LAZY_ORDINAL(id)) j = (j + 1) % count;
            sub = CDL_LAZY_ID(CDL_LAZY_SHARD(id), j);
        } else {
            sub = draw % L->index.num_items;
            if (sub == id) sub = (sub + 1) % L->index.num_items;
        }
        if (sub == id) break; /* a one-item dataset has nothing to substitute */
        rc = cdl__prepare_item(W, epoch, sub, dst);
        *row_id = sub;
        tried++;
        if (rc == COORDL_OK) return rc;
    }
    if (rc != COORDL_ERR_NOMEM) cdl__bad_row_hint(W, tried);
    return rc;
}

/* Prepares a claimed row with no lock held: straight into its place in the
 * ring for a private loader (nothing else touches a claimed row there), or
 * into the worker's staging buffer in a group, copied in by complete only
 * if the claim still holds (a member stopped mid-row, dropped and resumed
 * would otherwise write into a slot that by then holds another batch). */
CDL_PRIVATE void cdl__worker_prepare(cdl__worker *W, const cdl__claim *c, cdl__row_result *r) {
    coordl *L = W->L;
    const int staged = L->cfg.group != NULL;
    cdl__u8 *dst = staged ? W->stage : L->ring.arena.base + c->data_off;
    int32_t *targets = NULL;
    if (L->geom.target_row_bytes)
        targets = (int32_t *)(void *)(staged ? W->stage + c->row_bytes : L->ring.arena.base + c->targets_off);
    memset(&W->row, 0, sizeof W->row);
    W->row.items = 1;
    W->targets = targets;
    W->nboxes = 0;
    W->claim = c;
    cdl__perm perm = cdl__perm_for(L, c->epoch);
    const uint64_t id = cdl__item_at_hinted(L, &perm, c->pos, &W->item_hint);
    W->ra_entry = cdl__ra_take(L, c->epoch, c->pos, id);
    r->status = cdl__prepare_row(W, c->epoch, id, c->pos, dst, &r->id);
    cdl__ra_release(L, W->ra_entry); /* decoded: its bytes may be reused */
    W->ra_entry = NULL;
    if (r->status != COORDL_OK) { /* never hand out stale pixels */
        memset(dst, 0, c->row_bytes);
        if (targets) memset(targets, 0, L->geom.target_row_bytes);
    }
    int32_t cached_label; /* a lazily indexed item's, kept by the cache: its shard needs no rescan */
    r->label = cdl__cache_label(L, r->id, &cached_label) ? cached_label : cdl__item_label(L, r->id);
    r->nboxes = r->status == COORDL_OK ? W->nboxes : 0; /* boxes: plan.c wrote them with the geometry */
    r->staged = staged ? dst : NULL;
    r->staged_targets = staged ? targets : NULL;
    r->errmsg = W->err;
    W->claim = NULL;
}

/* Names the worker so that tools (top -H, /proc/<pid>/task) show it. Its
 * affinity was set at creation (cdl__pool_start), so it allocates its
 * scratch already on its own node (first touch). */
static void cdl__worker_bind(cdl__worker *W) {
    char name[16];
    snprintf(name, sizeof name, "coordl-w%d", W->index);
    pthread_setname_np(pthread_self(), name);
}

/* A worker: claim, prepare with no lock held, complete; with nothing to
 * claim, rewrite cached JPEGs while there are any (once it finds none, not
 * again before its next row). */
static void *cdl__worker_main(void *arg) {
    cdl__worker *W = arg;
    coordl *L = W->L;
    cdl__claim c;
    cdl__row_result r;
    int idle = 1, got;
    cdl__worker_bind(W);
#if defined(__linux__) && defined(SCHED_BATCH)
    /* Workers are throughput threads: under SCHED_BATCH (same CPU share,
     * no privilege needed) a woken worker does not preempt the thread that
     * woke it, so the trainer is not pushed off its core inside a coordl
     * call or an OpenMP region; the worker runs at the next tick instead.
     * Best effort: a refusal leaves the default policy. */
    struct sched_param sp;
    memset(&sp, 0, sizeof sp);
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
#endif
    cdl__lock(L);
    while ((got = cdl__stream_claim(L, &c, idle)) != 0) {
        cdl__unlock(L);
        if (got == 2) {
#ifndef COORDL_NO_JPEGTURBO
            cdl__counters done;
            idle = cdl__rewrite_idle(W, &done);
            cdl__lock(L);
            L->stats.st.jpeg_rewrites += done.jpeg_rewrites;
            L->stats.st.jpeg_rewrites_idle += done.jpeg_rewrites_idle;
            L->stats.st.jpeg_rewrite_ns += done.jpeg_rewrite_ns;
            L->stats.st.jpeg_rewrite_failures += done.jpeg_rewrite_failures;
#else
            idle = 0;
            cdl__lock(L);
#endif
            continue;
        }
        idle = 1;
        cdl__test_hook(L, "row_claimed");
        cdl__worker_prepare(W, &c, &r);
        cdl__test_hook(L, "row_written");
        cdl__lock(L);
        cdl__stream_complete(L, &c, &W->row, &r);
    }
    cdl__unlock(L);
    return NULL;
}

static void cdl__worker_free(coordl *L, cdl__worker *W) {
    cdl__kept_free(L, &W->kept);
    cdl__free(L, W->readbuf);
    cdl__free(L, W->pix);
    cdl__free(L, W->row4);
    cdl__free(L, W->tmp);
    cdl__free(L, W->rot);
    cdl__free(L, W->stage);
    cdl__free(L, W->window_row);
    cdl__free(L, W->xstart);
    cdl__free(L, W->xw);
    cdl__free(L, W->xw8);
    cdl__free(L, W->ystart);
    cdl__free(L, W->yw);
    cdl__free(L, W->rw);
    cdl__free(L, W->rwidx);
    cdl__free(L, W->splice);
#ifndef COORDL_NO_JPEGTURBO
    if (W->jd_ready) jpeg_destroy_decompress(&W->jd);
#endif
}

/* The PUs this process's workers use: all the chosen ones, or, for a
 * member of a coordinated group with the default placement, its own slice
 * of the physical cores (the members' workers together form one pool over
 * the machine instead of k pools piled on the first cores). */
static void cdl__pool_pus(const coordl *L, int *first, int *count) {
    const cdl__placement *P = &L->place;
    *first = 0;
    *count = P->nworker_pus;
    if (L->cfg.group && L->cfg.group_size > 1 && L->member.me >= 0 && !L->cfg.cpuset && L->cfg.numa_node < 0 &&
        !L->cfg.pci_bus_id && P->ncores > 0) {
        const int k = L->cfg.group_size, m = L->member.me % k;
        int lo = P->ncores * m / k, hi = P->ncores * (m + 1) / k;
        if (hi <= lo) { lo = m % P->ncores; hi = lo + 1; }
        *first = lo;
        *count = hi - lo; /* worker_pus starts with one PU per core, in core order */
    }
}

/* Starts a worker on its PU: binding at creation rather than from inside
 * the thread means open returns with every worker placed, and no scratch
 * page is ever touched elsewhere. */
static int cdl__worker_start(cdl__worker *W, int bind, int *bound) {
    int e = EINVAL;
    *bound = 0;
    if (bind && W->pu >= 0 && W->pu < CPU_SETSIZE) {
        pthread_attr_t attr;
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(W->pu, &set);
        if (pthread_attr_init(&attr) == 0) {
            if (pthread_attr_setaffinity_np(&attr, sizeof set, &set) == 0)
                e = pthread_create(&W->thread, &attr, cdl__worker_main, W);
            pthread_attr_destroy(&attr);
        }
        *bound = e == 0;
    }
    if (!*bound) e = pthread_create(&W->thread, NULL, cdl__worker_main, W);
    return e;
}

/* A lazy index's scan-ahead thread: makes the shards of the window after
 * the one the order is in resident before a worker, the read-ahead or the
 * stream's assignment (under its lock) would wait for their scan. With two
 * of them a window's shards are scanned two at a time. */
static void *cdl__scan_ahead_main(void *arg) {
    coordl *L = arg;
    uint32_t shards[64];
    pthread_setname_np(pthread_self(), "coordl-index");
    size_t n;
    while ((n = cdl__sampler_ahead(L, shards, 64)) > 0)
        for (size_t i = 0; i < n; i++) cdl__sampler_ahead_scan(L, shards[i]);
    return NULL;
}

CDL_PRIVATE coordl_status cdl__pool_start(coordl *L) {
    const cdl__placement *P = &L->place;
    int first, count;
    cdl__pool_pus(L, &first, &count);
    int n = L->cfg.threads > 0 ? L->cfg.threads : (first || count != P->nworker_pus ? count : P->ncores);
    if (n < 1) n = 1;
    L->stats.st.threads_requested = (uint32_t)L->cfg.threads;
    /* More workers than 4 per processing unit only add switches and
     * scratch memory (each holds decode buffers): 1000 threads on 2 cores
     * is a typo or a config from another machine. Say what runs instead. */
    const int pus = P->nworker_pus + P->nreserved > 0 ? P->nworker_pus + P->nreserved : 1;
    if (n > 4 * pus) {
        cdl__log(L, COORDL_LOG_WARN, "threads: %d asked for, but this process may use %d processing unit%s; "
                 "running %d workers (at most 4 per unit; coordl_get_stats reports threads and threads_requested)",
                 n, pus, pus == 1 ? "" : "s", 4 * pus);
        n = 4 * pus;
    }
    /* Token windows by default have no worker threads: a batch is a copy of
     * B x (T + 1) tokens already in memory (read ahead, or cached), cheaper
     * on the trainer's own thread inside coordl_next than a hand-off to a
     * worker and back (issue 23: a hand-off cost 60-70 us and 3 context
     * switches a batch; the copy costs a few microseconds). */
    if (L->cfg.pipeline == COORDL_PIPE_TOKENS && L->cfg.threads == 0) n = 0;
    if (n > 0) {
        L->pool.workers = cdl__calloc(L, (size_t)n, sizeof *L->pool.workers);
        if (!L->pool.workers) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for %d workers; lower threads", n);
    }
    for (int i = 0; i < n; i++) {
        cdl__worker *W = &L->pool.workers[i];
        W->L = L;
        W->index = i;
        W->reader = i < CDL_READER_HELPER ? cdl__cache_reader(L, (uint32_t)i) : NULL; /* beyond: reads miss */
        W->pu = count > 0 ? P->worker_pus[first + i % count] : -1;
        if (i < 64) L->stats.st.worker_cpu[i] = W->pu;
        /* a group stages each row (coordl_set cannot change its size) */
        if (L->cfg.group && !cdl__reserve(L, (void **)&W->stage, &W->stagecap, L->geom.row_bytes + L->geom.target_row_bytes + 16))
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the workers' staging rows; lower threads "
                                  "or out_w/out_h");
        cdl__worker_decoder_init(W);
    }
    for (int i = n; i < 64; i++) L->stats.st.worker_cpu[i] = -1;
    if (L->cfg.pipeline == COORDL_PIPE_TOKENS) { /* the consumer's own scratch (cdl__consumer_help) */
        L->pool.helper = cdl__calloc(L, 1, sizeof *L->pool.helper);
        if (!L->pool.helper) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
        L->pool.helper->L = L;
        L->pool.helper->index = n;
        L->pool.helper->reader = cdl__cache_reader(L, CDL_READER_HELPER);
        L->pool.helper->pu = -1;
        if (L->cfg.group && !cdl__reserve(L, (void **)&L->pool.helper->stage, &L->pool.helper->stagecap,
                                          L->geom.row_bytes + L->geom.target_row_bytes + 16))
            return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the consumer's staging row");
    }
    const int listed = n < count ? n : count;
    cdl__format_pu_list(P->worker_pus + first, listed, L->stats.st.placement_cpus, sizeof L->stats.st.placement_cpus);
    cdl__format_pu_list(P->reserved_pus, P->nreserved, L->stats.st.reserved_cpus, sizeof L->stats.st.reserved_cpus);
    L->stats.st.placement_node = P->node;
    L->stats.st.placement_nodes = (uint32_t)P->nnodes;
    L->pool.nworkers = n;
    const int bind = L->cfg.bind && !P->simulate;
    for (int i = 0; i < n; i++) {
        int bound, e = cdl__worker_start(&L->pool.workers[i], bind, &bound);
        if (e != 0) return cdl__open_fail(COORDL_ERR_NOMEM, "cannot start worker thread %d: %s; lower threads", i, strerror(e));
        L->pool.workers[i].started = 1;
        L->stats.st.threads_bound += (uint32_t)bound;
    }
    L->stats.st.threads = (uint32_t)n;
    if (L->index.lazy && L->sampler.window) {
        for (int i = 0; i < CDL_SCAN_AHEAD_THREADS; i++) {
            const int e = pthread_create(&L->pool.ahead[i], NULL, cdl__scan_ahead_main, L);
            if (e != 0) return cdl__open_fail(COORDL_ERR_NOMEM, "cannot start a scan-ahead thread: %s", strerror(e));
            L->pool.nahead++;
        }
    }
    return COORDL_OK;
}

CDL_PRIVATE void cdl__pool_stop(coordl *L) {
    if (L->pool.nahead) { /* first: one may be mid-scan, through the readers the others close */
        cdl__sampler_ahead_stop(L);
        for (int i = 0; i < L->pool.nahead; i++) pthread_join(L->pool.ahead[i], NULL);
        L->pool.nahead = 0;
    }
    if (!L->pool.workers && !L->pool.helper) {
        cdl__ra_stop(L);
        return;
    }
    cdl__lock(L);
    L->pool.stop = 1;
    cdl__broadcast(L, &L->S->work_cv);
    cdl__unlock(L);
    cdl__ra_closing(L); /* a worker waiting for a read stops waiting */
    for (int i = 0; i < L->pool.nworkers; i++)
        if (L->pool.workers[i].started) pthread_join(L->pool.workers[i].thread, NULL);
    for (int i = 0; i < L->pool.nworkers; i++) cdl__worker_free(L, &L->pool.workers[i]);
    cdl__free(L, L->pool.workers);
    L->pool.workers = NULL;
    if (L->pool.helper) {
        cdl__worker_free(L, L->pool.helper);
        cdl__free(L, L->pool.helper);
        L->pool.helper = NULL;
    }
    cdl__ra_stop(L); /* after the workers: one may wait for a read */
}

/* ---- src/group.c ------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * group.c - the coordinated group.
 *
 * Sibling processes that open with the same `group` share one stream:
 * a POSIX shm object holds a header (layout version and geometry, the
 * config fields that change batch content), the stream block (robust
 * process-shared mutex, members), the slots, the row marks, the MinIO
 * cache (entries and slab) and the ring. Every member's workers claim
 * rows from it, so each batch is prepared once; every member consumes
 * every batch; a slot is reused when all live members released it.
 * A member is (index, generation). Its liveness is a robust mutex its
 * member thread holds for its whole life (the kernel hands it over as
 * EOWNERDEAD when the process dies, in any PID namespace) and a
 * heartbeat that thread refreshes; that thread is also the one place
 * where members that died or fell silent are dropped. The object is
 * created with O_EXCL, mode 0600; an existing one is used only if it
 * belongs to this user and cdl__group_validate accepts its bytes.
 *
 * Owns:  L->member: this process's identity in the stream, its shm mapping
 *        and its member thread (heartbeats, liveness, dropping the dead);
 *        the layout and validation of the shm object
 * Lock:  the stream's lock for membership changes; each member's liveness
 *        mutex (robust, held for its life); member.mu for the member
 *        thread's stop flag
 * Calls: status, arena, lock, indexfile, cache, stream (lower layers only:
 *        src/modules.txt; tools/check-layers.py checks this line).
 */

#define CDL_GROUP_MAGIC 0x636f6f72646c4731ull /* "coordlG1" */
#define CDL_GROUP_VERSION 7 /* 3: cache entries hold room and JPEG rewrites;
                               4: a holder found dead is flagged, and dropped
                               by the member threads;
                               5: cache readers recorded per member, one
                               owner per rewrite;
                               6: slots hold box counts (object detection);
                               7: the stream counts its free slots (its
                                  fields after inflight moved) */
#define CDL_GROUP_FIELDS 64
#define CDL_GROUP_MAX_SLOTS 1024 /* prefetch_batches' bound */

typedef struct cdl__group_field {
    char name[24];
    uint64_t value;
} cdl__group_field;

typedef struct cdl__group_header {
    uint64_t magic;
    uint32_t version;
    _Atomic uint32_t ready;   /* set last by the creator                  */
    _Atomic uint32_t retired; /* unlinked (stale or last member gone): set
                                 and unlinked under the object's lock, so
                                 two processes never both unlink a name   */
    uint32_t nfields;
    uint32_t timeout_ms;      /* group_timeout_ms: one value for the group
                                 (the creator's), outside the compared
                                 geometry: a member with another one
                                 adopts it                                 */
    uint64_t total_bytes;
    cdl__group_field fields[CDL_GROUP_FIELDS];
    /* geometry: what the parts below were sized from, and the sizes of
     * this build's structures (a build with another layout is refused) */
    uint64_t nslots, rows_cap, num_items, cache_bytes;
    uint64_t slot_stride, slot_data_cap, row_bytes, target_row_bytes;
    uint64_t stream_bytes, slot_bytes, entry_bytes;
    uint64_t stream_off, slots_off, rows_off, entries_off, slab_off, ring_off;
} cdl__group_header;

static uint64_t cdl__hash_bytes(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t cdl__float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Every setting that changes what a batch holds or how the shared memory
 * is laid out, by name, so a mismatch can say which. */
static uint32_t cdl__group_fields(const coordl *L, cdl__group_field *f) {
    const coordl_config *c = &L->cfg;
    uint32_t n = 0;
    /* more fields than the header holds would be a layout change: the
     * test suite's groups fail on the bound (never a write past it) */
#define CDL_F(nm, v) do { if (n < CDL_GROUP_FIELDS) { snprintf(f[n].name, sizeof f[n].name, "%s", nm); \
                              f[n].value = (uint64_t)(v); } n++; } while (0)
    CDL_F("source", cdl__hash_bytes(c->source, strlen(c->source)));
    CDL_F("pipeline", c->pipeline); CDL_F("batch_size", c->batch_size); CDL_F("drop_last", c->drop_last);
    CDL_F("shuffle", c->shuffle); CDL_F("seed", c->seed); CDL_F("out_w", c->out_w); CDL_F("out_h", c->out_h);
    CDL_F("layout", c->layout);
    for (int i = 0; i < 3; i++) { CDL_F(i == 0 ? "mean[0]" : i == 1 ? "mean[1]" : "mean[2]", cdl__float_bits(c->mean[i])); }
    for (int i = 0; i < 3; i++) { CDL_F(i == 0 ? "std[0]" : i == 1 ? "std[1]" : "std[2]", cdl__float_bits(c->std[i])); }
    CDL_F("scale_min", cdl__float_bits(c->scale_min)); CDL_F("scale_max", cdl__float_bits(c->scale_max));
    CDL_F("ratio_min", cdl__float_bits(c->ratio_min)); CDL_F("ratio_max", cdl__float_bits(c->ratio_max));
    CDL_F("flip", c->flip); CDL_F("hue", cdl__float_bits(c->hue)); CDL_F("saturation", cdl__float_bits(c->saturation));
    CDL_F("exposure", cdl__float_bits(c->exposure)); CDL_F("rotate_deg", cdl__float_bits(c->rotate_deg));
    CDL_F("aspect", cdl__float_bits(c->aspect)); CDL_F("max_out_w", c->max_out_w); CDL_F("max_out_h", c->max_out_h);
    CDL_F("max_batch_size", c->max_batch_size); CDL_F("seq_len", c->seq_len); CDL_F("audio_samples", c->audio_samples);
    CDL_F("audio_rate", c->audio_rate); CDL_F("cache_bytes", c->cache_bytes); CDL_F("cache_policy", c->cache_policy);
    CDL_F("prefetch_batches", c->prefetch_batches); CDL_F("rank", c->rank); CDL_F("world", c->world);
    CDL_F("on_bad_sample", c->on_bad_sample); CDL_F("max_pixels", c->max_pixels);
    CDL_F("max_item_bytes", c->max_item_bytes); CDL_F("group_size", c->group_size);
    CDL_F("max_decode_bytes", c->max_decode_bytes); CDL_F("max_audio_samples", c->max_audio_samples);
    CDL_F("token_order", c->token_order); CDL_F("train_crop", c->train_crop);
    CDL_F("min_crop", c->min_crop); CDL_F("max_crop", c->max_crop);
    CDL_F("jpeg_random_access", c->jpeg_random_access); /* decides the cache's room */
    CDL_F("channels", c->channels); /* resolved: 0 was made 3 */
    CDL_F("dataset items", L->index.num_items); CDL_F("dataset bytes", L->index.dataset_bytes);
    /* object detection: the settings, and the boxes every member read */
    CDL_F("labels", c->labels); CDL_F("max_boxes", c->max_boxes); CDL_F("jitter", cdl__float_bits(c->jitter));
    CDL_F("place_scale_min", cdl__float_bits(c->place_scale_min));
    CDL_F("place_scale_max", cdl__float_bits(c->place_scale_max));
    CDL_F("num_classes", c->num_classes); CDL_F("box labels", L->index.boxes.hash);
    CDL_F("ssd_expand", cdl__float_bits(c->ssd_expand));
    /* resolved (0 was made 8); the other orders ignore it */
    CDL_F("shuffle_window_shards", c->shuffle == COORDL_SHUFFLE_SHARD_WINDOW ? c->shuffle_window_shards : 0);
#undef CDL_F
    return n;
}

/* The object this member would create: header, geometry and the parts'
 * offsets, from the config (the same for every member, since the fields
 * that decide them are compared). */
static void cdl__group_want(const coordl *L, cdl__group_header *h);

/* A group's cache lives in /dev/shm: a budget the file system cannot hold
 * beside the ring would fail the open (or, worse, the tmpfs later). Cut it
 * to what /dev/shm's size leaves after the ring and the tables, and say
 * so. The size, not the free space, decides: it is the same for every
 * member of the machine, so every member cuts the compared cache_bytes
 * alike (whether the object then fits the free space is checked when it
 * is created). */
static void cdl__group_fit_shm(coordl *L, cdl__group_header *want) {
    struct statvfs vs;
    if (L->cfg.cache_bytes == 0 || statvfs("/dev/shm", &vs) != 0) return;
    const uint64_t shm = (uint64_t)vs.f_blocks * vs.f_frsize;
    if (shm == 0 || want->total_bytes <= shm) return;
    const uint64_t rest = want->total_bytes - L->cfg.cache_bytes; /* ring, tables, their rounding */
    const uint64_t page = cdl__page_size();
    const uint64_t fits = shm > rest + page ? (shm - rest - page) / page * page : 0;
    cdl__log(L, COORDL_LOG_WARN, "group %s: cache_bytes %llu does not fit /dev/shm (%llu bytes) beside the ring "
             "and tables (%llu); using %llu (coordl_get_stats reports cache_bytes_budget)", L->cfg.group,
             (unsigned long long)L->cfg.cache_bytes, (unsigned long long)shm, (unsigned long long)rest,
             (unsigned long long)fits);
    L->cfg.cache_bytes = fits;
    L->stats.st.cache_bytes_budget = fits;
    cdl__group_want(L, want);
}

static void cdl__group_want(const coordl *L, cdl__group_header *h) {
    const size_t page = cdl__page_size();
    size_t data, labels, ids;
    memset(h, 0, sizeof *h);
    h->magic = CDL_GROUP_MAGIC;
    h->version = CDL_GROUP_VERSION;
    h->nfields = cdl__group_fields(L, h->fields);
    h->timeout_ms = (uint32_t)L->cfg.group_timeout_ms;
    h->nslots = L->ring.nslots;
    h->rows_cap = L->geom.slot_rows_cap;
    h->num_items = L->index.num_items;
    h->cache_bytes = L->cfg.cache_bytes;
    h->slot_stride = cdl__ring_slot_bytes(L, L->geom.slot_rows_cap, L->geom.slot_data_cap, &data, &labels, &ids);
    h->slot_data_cap = L->geom.slot_data_cap;
    h->row_bytes = L->geom.row_bytes;
    h->target_row_bytes = L->geom.target_row_bytes;
    h->stream_bytes = sizeof(cdl__stream);
    h->slot_bytes = sizeof(cdl__slot);
    h->entry_bytes = sizeof(cdl__cache_entry);
    uint64_t at = cdl__round_up(sizeof *h, 64);
    h->stream_off = at;
    at = cdl__round_up(at + sizeof(cdl__stream), 64);
    h->slots_off = at;
    at = cdl__round_up(at + L->ring.nslots * sizeof(cdl__slot), 64);
    h->rows_off = at;
    at = cdl__round_up(at + (uint64_t)L->ring.nslots * L->geom.slot_rows_cap * sizeof(uint32_t), 64);
    h->entries_off = at;
    at = cdl__round_up(at + (L->cfg.cache_bytes ? L->index.num_items * sizeof(cdl__cache_entry) : 0), page);
    h->slab_off = at;
    at = cdl__round_up(at + L->cfg.cache_bytes, page);
    h->ring_off = at;
    at = cdl__round_up(at + h->slot_stride * L->ring.nslots, page);
    h->total_bytes = at;
}

/* --- validation of a mapped object ------------------------------------- */

/* [off, off + count x each) lies in [*end, size), aligned, with no
 * overflow; *end moves past it (the parts are in order, disjoint). */
static int cdl__group_region_ok(uint64_t off, uint64_t count, uint64_t each, uint64_t align, uint64_t size,
                                uint64_t *end) {
    uint64_t len;
    if (__builtin_mul_overflow(count, each, &len)) return 0;
    if (off % align != 0 || off < *end || off > size || len > size - off) return 0;
    *end = off + len;
    return 1;
}

static int cdl__group_field_value(const cdl__group_header *h, const char *name, uint64_t *v) {
    for (uint32_t i = 0; i < h->nfields && i < CDL_GROUP_FIELDS; i++)
        if (strcmp(h->fields[i].name, name) == 0) { *v = h->fields[i].value; return 1; }
    return 0;
}

/* Whether the slots hold box counts (labels = COORDL_LABELS_BOXES). */
static int cdl__group_box_rows(const cdl__group_header *h) {
    uint64_t v = 0;
    return cdl__group_field_value(h, "labels", &v) && v == COORDL_LABELS_BOXES;
}

static int cdl__cstr_ok(const char *s, size_t cap) { return memchr(s, '\0', cap) != NULL; }

/* The layout part: header, geometry and every part of the object. */
static int cdl__group_validate_layout(const cdl__group_header *h, uint64_t size, char *why, size_t cap) {
#define CDL_REJECT(...) do { snprintf(why, cap, __VA_ARGS__); return 0; } while (0)
    if (h->magic != CDL_GROUP_MAGIC) CDL_REJECT("not a coordl group object (bad magic)");
    if (h->version != CDL_GROUP_VERSION)
        CDL_REJECT("layout version %u, this library uses %u", h->version, CDL_GROUP_VERSION);
    if (h->total_bytes != size)
        CDL_REJECT("the header says %llu bytes, the object has %llu", (unsigned long long)h->total_bytes,
                   (unsigned long long)size);
    if (h->nfields > CDL_GROUP_FIELDS) CDL_REJECT("%u config fields (at most %d)", h->nfields, CDL_GROUP_FIELDS);
    for (uint32_t i = 0; i < h->nfields; i++)
        if (!cdl__cstr_ok(h->fields[i].name, sizeof h->fields[i].name)) CDL_REJECT("config field %u has no name", i);
    if (h->stream_bytes != sizeof(cdl__stream) || h->slot_bytes != sizeof(cdl__slot) ||
        h->entry_bytes != sizeof(cdl__cache_entry))
        CDL_REJECT("made by a build with other structure sizes");
    if (h->nslots < 1 || h->nslots > CDL_GROUP_MAX_SLOTS) CDL_REJECT("%llu slots", (unsigned long long)h->nslots);
    if (h->rows_cap < 1 || h->rows_cap > UINT32_MAX) CDL_REJECT("%llu rows per slot", (unsigned long long)h->rows_cap);
    uint64_t rows_bytes, targets_bytes, need;
    if (__builtin_mul_overflow(h->row_bytes, h->rows_cap, &rows_bytes) || rows_bytes > h->slot_data_cap)
        CDL_REJECT("rows of %llu bytes do not fit a slot's %llu data bytes", (unsigned long long)h->row_bytes,
                   (unsigned long long)h->slot_data_cap);
    if (__builtin_mul_overflow(h->target_row_bytes, h->rows_cap, &targets_bytes) ||
        __builtin_add_overflow(h->slot_data_cap, targets_bytes, &need) ||
        __builtin_add_overflow(need, h->rows_cap * (sizeof(int32_t) + sizeof(uint64_t)), &need) ||
        __builtin_add_overflow(need, cdl__group_box_rows(h) ? h->rows_cap * sizeof(uint32_t) : 0, &need) ||
        h->slot_stride < need)
        CDL_REJECT("a ring slot of %llu bytes cannot hold its rows", (unsigned long long)h->slot_stride);
    if (h->timeout_ms < 1 || h->timeout_ms > 3600000) CDL_REJECT("group_timeout_ms of %u ms", h->timeout_ms);
    uint64_t end = sizeof *h;
    if (!cdl__group_region_ok(h->stream_off, 1, sizeof(cdl__stream), 64, size, &end)) CDL_REJECT("stream block outside the object");
    if (!cdl__group_region_ok(h->slots_off, h->nslots, sizeof(cdl__slot), 64, size, &end)) CDL_REJECT("slots outside the object");
    if (!cdl__group_region_ok(h->rows_off, h->nslots * h->rows_cap, sizeof(uint32_t), 64, size, &end))
        CDL_REJECT("row marks outside the object");
    if (!cdl__group_region_ok(h->entries_off, h->cache_bytes ? h->num_items : 0, sizeof(cdl__cache_entry), 64, size, &end))
        CDL_REJECT("cache entries outside the object");
    if (!cdl__group_region_ok(h->slab_off, 1, h->cache_bytes, 64, size, &end)) CDL_REJECT("cache slab outside the object");
    if (!cdl__group_region_ok(h->ring_off, h->nslots, h->slot_stride, 64, size, &end)) CDL_REJECT("ring outside the object");
    return 1;
}

/* The contents part: every value later used as an index, a length or a
 * loop bound. Under the object's lock when the object is live. */
static int cdl__group_validate_contents(const cdl__u8 *b, const cdl__group_header *h, char *why, size_t cap) {
    uint64_t world = 0, rank = 0;
    if (!cdl__group_field_value(h, "world", &world) || !cdl__group_field_value(h, "rank", &rank) || world < 1 ||
        rank >= world)
        CDL_REJECT("no valid rank and world among the config fields");
    const uint64_t share = h->num_items / world;
    cdl__stream S;
    memcpy(&S, b + h->stream_off, sizeof S);
    if (S.assign.slot > h->nslots) CDL_REJECT("a pending assignment names slot %u", S.assign.slot);
    if (S.assign.slot && (S.assign.n < 1 || S.assign.n > h->rows_cap || S.assign.pos > share ||
                          S.assign.n > share - S.assign.pos))
        CDL_REJECT("a pending assignment of %u rows at %llu", S.assign.n, (unsigned long long)S.assign.pos);
    if (S.cut_pos > share) CDL_REJECT("batch size cut at %llu of %llu", (unsigned long long)S.cut_pos, (unsigned long long)share);
    if (atomic_load(&S.cache_used) > h->cache_bytes) CDL_REJECT("cache use beyond its budget");
    size_t data, labels, ids;
    data = cdl__round_up((size_t)h->slot_data_cap, 64);
    labels = cdl__round_up((size_t)h->rows_cap * sizeof(int32_t), 64);
    ids = cdl__round_up((size_t)h->rows_cap * sizeof(uint64_t), 64);
    for (uint64_t s = 0; s < h->nslots; s++) {
        cdl__slot sl;
        memcpy(&sl, b + h->slots_off + s * sizeof sl, sizeof sl);
        const uint64_t base = s * h->slot_stride;
        if (sl.data_off != base || sl.labels_off != base + data || sl.ids_off != base + data + labels ||
            sl.targets_off != base + data + labels + ids ||
            sl.nboxes_off != sl.targets_off + cdl__round_up((size_t)(h->rows_cap * h->target_row_bytes), 64))
            CDL_REJECT("slot %llu points outside its part of the ring", (unsigned long long)s);
        if (sl.state != CDL_SLOT_FREE && sl.state != CDL_SLOT_FILLING && sl.state != CDL_SLOT_READY)
            CDL_REJECT("slot %llu is in state %d", (unsigned long long)s, sl.state);
        if (sl.state == CDL_SLOT_FREE) continue;
        if (sl.n < 1 || sl.n > h->rows_cap || sl.rows_claimed > sl.n || sl.rows_done > sl.n ||
            sl.row_bytes != h->row_bytes || sl.pos > share || sl.n > share - sl.pos)
            CDL_REJECT("slot %llu: %u rows of %llu bytes at %llu", (unsigned long long)s, sl.n,
                       (unsigned long long)sl.row_bytes, (unsigned long long)sl.pos);
        if (sl.status < COORDL_ERR_UNSUPPORTED || sl.status > COORDL_END_OF_EPOCH || !cdl__cstr_ok(sl.errmsg, sizeof sl.errmsg))
            CDL_REJECT("slot %llu holds a bad status or message", (unsigned long long)s);
    }
    for (uint64_t i = 0; h->cache_bytes && i < h->num_items; i++) {
        const cdl__cache_entry *ce = (const cdl__cache_entry *)(const void *)(b + h->entries_off) + i;
        uint32_t state, len, room, jpeg;
        uint64_t off;
        memcpy(&state, (const cdl__u8 *)ce + offsetof(cdl__cache_entry, state), sizeof state);
        memcpy(&len, (const cdl__u8 *)ce + offsetof(cdl__cache_entry, len), sizeof len);
        memcpy(&off, (const cdl__u8 *)ce + offsetof(cdl__cache_entry, off), sizeof off);
        memcpy(&room, (const cdl__u8 *)ce + offsetof(cdl__cache_entry, cap), sizeof room);
        memcpy(&jpeg, (const cdl__u8 *)ce + offsetof(cdl__cache_entry, jpeg), sizeof jpeg);
        /* the low bytes are the states; a writing member's index above */
        if ((state & CDL_CE_STATE) > CDL_CE_LOST || state >> CDL_CE_OWNER_SHIFT >= CDL_MAX_MEMBERS ||
            (jpeg & CDL_CE_STATE) > CDL_CE_CLAIMED || jpeg >> CDL_CE_OWNER_SHIFT >= CDL_MAX_MEMBERS)
            CDL_REJECT("cache entry %llu is in state %u/%u", (unsigned long long)i, state, jpeg);
        const uint32_t held = state & CDL_CE_STATE;
        if ((held == CDL_CE_PRESENT || held == CDL_CE_REWRITING) &&
            (len == 0 || len > room || off > h->cache_bytes || room > h->cache_bytes - off))
            CDL_REJECT("cache entry %llu points outside the slab", (unsigned long long)i);
    }
    return 1;
#undef CDL_REJECT
}

/* Checks a group object's bytes before anything in them is trusted: the
 * header (magic, version, this build's structure sizes), every part
 * (stream, slots, row marks, cache entries, slab, ring) inside `size`
 * bytes, in order, without overflow; and with `contents`, every value the
 * code later uses as an index, a length or a loop bound (slot states, row
 * counts and offsets, the pending assignment, stream positions, cache
 * entries, message strings). A pure function of the bytes: it takes no
 * lock, writes nothing and needs no alignment, so a fuzz harness can call
 * it on any input (#include "coordl.c"). Returns 1, or 0 with the first
 * problem in why. */
static int cdl__group_validate(const void *base, uint64_t size, int contents, char *why, size_t why_cap) {
    cdl__group_header h;
    if (!base || size < sizeof h) {
        snprintf(why, why_cap, "%llu bytes: smaller than a group header", (unsigned long long)size);
        return 0;
    }
    memcpy(&h, base, sizeof h);
    if (!cdl__group_validate_layout(&h, size, why, why_cap)) return 0;
    return !contents || cdl__group_validate_contents(base, &h, why, why_cap);
}

/* --- liveness ------------------------------------------------------------ */

enum { CDL_MEMBER_ALIVE = 0, CDL_MEMBER_DEAD, CDL_MEMBER_SILENT };

/* Whether member m lives. Its member thread holds members[m].alive for the
 * member's whole life: a trylock that gets EOWNERDEAD means the holder
 * died (the lock is made consistent and released, ready for the next
 * member at this index); EBUSY means held; free means the member thread has
 * not taken it yet (just joined), and the heartbeat decides. A heartbeat
 * older than timeout_ns is silence (stopped or hung). Pids play no part:
 * they mean nothing across PID namespaces. Takes no stream lock. */
static int cdl__member_probe(cdl__stream *S, int m, uint64_t now, uint64_t timeout_ns, int patient) {
    if (atomic_load(&S->members[m].died_holding_lock)) return CDL_MEMBER_DEAD;
    pthread_mutex_t *alive = &S->members[m].alive;
    int e = pthread_mutex_trylock(alive);
    /* EBUSY may be another prober's moment: where a wrong "alive" would
     * cost (the lock-free stale check of an object of other settings,
     * which several openers may run at once), look again a few times */
    for (int again = 0; patient && e == EBUSY && again < 4; again++) {
        usleep(200);
        e = pthread_mutex_trylock(alive);
    }
    if (e == EOWNERDEAD) {
        (void)cdl__mutex_held(alive, e); /* consistent again, for the index's next member */
        pthread_mutex_unlock(alive);
        return CDL_MEMBER_DEAD;
    }
    if (e == ENOTRECOVERABLE) return CDL_MEMBER_DEAD;
    if (e == 0) pthread_mutex_unlock(alive);
    const uint64_t hb = atomic_load(&S->members[m].heartbeat_ns);
    return now > hb && now - hb > timeout_ns ? CDL_MEMBER_SILENT : CDL_MEMBER_ALIVE;
}

/* The group's liveness timeout (the object's, once attached). */
static uint64_t cdl__group_timeout_ns(const coordl *L) { return (uint64_t)L->member.timeout_ms * 1000000ull; }

/* This member's heartbeat (while it is still the generation it joined as). */
static void cdl__group_beat(coordl *L, uint64_t now) {
    if (cdl__member_current(L)) atomic_store(&L->S->members[L->member.me].heartbeat_ns, now);
}

/* The member thread's stream lock: polled, beating while it waits. A
 * member thread blocked on the lock would fall silent while its process
 * lives: a holder stopped (SIGSTOP, a debugger, a suspended job) for
 * longer than group_timeout_ms would, once continued, find every member
 * that waited for it silent and drop them all. A lock held for
 * microseconds is had at the first try or after a yield. */
static void cdl__lock_beating(coordl *L) {
    int e;
    while ((e = cdl__mutex_lock_until(&L->S->mu, cdl__now_ns() + 10000000ull)) == ETIMEDOUT)
        cdl__group_beat(L, cdl__now_ns()); /* every 10 ms of waiting */
    cdl__lock_acquired(L, e);
}

/* Why a member leaves: it died or fell silent (dropped by another member),
 * or it leaves itself (close, or open giving up). */
enum { CDL_MEMBER_LEAVES = 100 };

/* The one way a member leaves the stream: member m of generation gen is
 * dropped if it still is that generation (and, when judged silent, still
 * silent), and what it held goes back: its claimed rows and consumer bits
 * (stream) and its cache reader records, rewrite claims and half-written
 * entries (cache). Logs why unless it leaves itself. Under mu. */
static void cdl__group_drop(coordl *L, int m, uint64_t gen, int how) {
    cdl__stream *S = L->S;
    if (!cdl__member_is(S, m, gen)) return;
    if (how == CDL_MEMBER_SILENT) { /* it may have spoken since the probe */
        const uint64_t now = cdl__now_ns(), hb = atomic_load(&S->members[m].heartbeat_ns);
        if (!(now > hb && now - hb > cdl__group_timeout_ns(L))) return;
    }
    if (how != CDL_MEMBER_LEAVES)
        cdl__log(L, COORDL_LOG_WARN, "group %s: member %d (pid %d) %s; its work is taken over", L->cfg.group, m,
                 (int)atomic_load(&S->members[m].pid),
                 how == CDL_MEMBER_SILENT                        ? "fell silent for longer than group_timeout_ms"
                 : atomic_load(&S->members[m].died_holding_lock) ? "died holding the group's lock"
                                                                 : "died");
    cdl__stream_drop_member(L, m, gen);
    cdl__cache_drop_member(L, m);
}

/* Probes every other member in the live set and drops those that died or
 * fell silent; returns how many are alive. locked: the caller holds mu
 * (close, or an opener before it joins); otherwise mu is taken, beating
 * while waiting, only to drop (the member thread). Not patient: under the
 * lock only member threads probe at the same moment, and they belong to a
 * live group anyway; a wait here would hold up every member's workers. */
static int cdl__group_sweep(coordl *L, int locked) {
    cdl__stream *S = L->S;
    const uint64_t now = cdl__now_ns();
    int alive = 0;
    for (int m = 0; m < CDL_MAX_MEMBERS; m++) {
        if (m == L->member.me || !(atomic_load(&S->live_mask) >> m & 1u)) continue;
        const uint64_t gen = atomic_load(&S->members[m].gen);
        const int how = cdl__member_probe(S, m, now, cdl__group_timeout_ns(L), 0);
        if (how == CDL_MEMBER_ALIVE) {
            alive++;
            continue;
        }
        if (!locked) cdl__lock_beating(L);
        cdl__group_drop(L, m, gen, how);
        if (!locked) cdl__unlock(L);
    }
    return alive;
}

/* One round of the member thread: this member's heartbeat, then every
 * other member that died or fell silent is dropped. The only place where
 * members are reaped. */
static void cdl__group_reap(coordl *L) {
    if (!cdl__member_current(L)) return; /* a dropped member reaps nobody */
    cdl__group_beat(L, cdl__now_ns());
    cdl__test_hook(L, "heartbeat");
    cdl__group_sweep(L, 0);
}

/* The member thread: holds this member's liveness lock for the member's
 * life and every period (a quarter of group_timeout_ms, at most 50 ms)
 * beats and reaps. Once this member has been dropped it gives the lock up,
 * so that its index can serve a new member. */
static void *cdl__member_main(void *arg) {
    coordl *L = arg;
    cdl__stream *S = L->S;
    pthread_setname_np(pthread_self(), "coordl-member");
    pthread_mutex_t *alive = &S->members[L->member.me].alive;
    int held = cdl__mutex_held(alive, pthread_mutex_lock(alive)); /* a dead predecessor at this index */
    long period_ms = (long)(L->member.timeout_ms / 4);
    period_ms = period_ms < 1 ? 1 : period_ms > 50 ? 50 : period_ms;
    cdl__group_beat(L, cdl__now_ns()); /* alive from here, however long open waited for the lock */
    pthread_mutex_lock(&L->member.mu);
    L->member.running = 1; /* open waits for this: from now on a death is seen at once */
    pthread_cond_broadcast(&L->member.cv);
    while (!L->member.stop) {
        pthread_mutex_unlock(&L->member.mu);
        cdl__group_reap(L);
        if (held && !cdl__member_current(L)) {
            pthread_mutex_unlock(alive);
            held = 0;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += period_ms * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_mutex_lock(&L->member.mu);
        if (!L->member.stop) pthread_cond_timedwait(&L->member.cv, &L->member.mu, &ts);
    }
    pthread_mutex_unlock(&L->member.mu);
    if (held) pthread_mutex_unlock(alive);
    return NULL;
}

static coordl_status cdl__member_thread_start(coordl *L) {
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) return cdl__open_fail(COORDL_ERR_NOMEM, "cannot start the member thread");
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int e = pthread_mutex_init(&L->member.mu, NULL);
    if (!e) e = pthread_cond_init(&L->member.cv, &ca);
    pthread_condattr_destroy(&ca);
    if (e) return cdl__open_fail(COORDL_ERR_NOMEM, "cannot start the member thread: %s", strerror(e));
    L->member.sync_ready = 1;
    e = pthread_create(&L->member.thread, NULL, cdl__member_main, L);
    if (e) return cdl__open_fail(COORDL_ERR_NOMEM, "cannot start the member thread: %s", strerror(e));
    L->member.thread_started = 1;
    /* until it holds the liveness lock, only the heartbeat would tell this
     * member's death: open returns after that window, not within it */
    pthread_mutex_lock(&L->member.mu);
    while (!L->member.running) pthread_cond_wait(&L->member.cv, &L->member.mu);
    pthread_mutex_unlock(&L->member.mu);
    return COORDL_OK;
}

CDL_PRIVATE void cdl__member_thread_stop(coordl *L) {
    if (L->member.thread_started) {
        pthread_mutex_lock(&L->member.mu);
        L->member.stop = 1;
        pthread_cond_signal(&L->member.cv);
        pthread_mutex_unlock(&L->member.mu);
        pthread_join(L->member.thread, NULL);
        L->member.thread_started = 0;
    }
    if (L->member.sync_ready) {
        pthread_mutex_destroy(&L->member.mu);
        pthread_cond_destroy(&L->member.cv);
        L->member.sync_ready = 0;
    }
}

/* --- creating, finding and joining the object ------------------------- */

/* Retires a mapped object: under its own lock, the first process to find
 * it not yet retired marks it and unlinks its name; anyone later sees the
 * mark and leaves the name alone (it may already be a new object's). A
 * lock not had within a second is left alone (the object stays). */
static void cdl__group_retire(const char *name, cdl__group_header *h, cdl__stream *os) {
    if (cdl__mutex_held(&os->mu, cdl__mutex_lock_until(&os->mu, cdl__now_ns() + 1000000000ull))) {
        if (!atomic_load(&h->retired)) {
            atomic_store(&h->retired, 1u);
            shm_unlink(name);
        }
        pthread_mutex_unlock(&os->mu);
    }
}

/* Points the handle at the parts of a mapped object. */
static void cdl__group_attach(coordl *L, cdl__group_header *h) {
    cdl__u8 *base = (cdl__u8 *)h;
    if (h->timeout_ms != (uint32_t)L->cfg.group_timeout_ms)
        cdl__log(L, COORDL_LOG_INFO, "group %s: members are judged silent after the group's group_timeout_ms of %u ms "
                 "(set by the member that created it; this one asked for %d ms)", L->cfg.group, h->timeout_ms,
                 L->cfg.group_timeout_ms);
    L->member.timeout_ms = h->timeout_ms;
    L->S = (cdl__stream *)(void *)(base + h->stream_off);
    L->ring.slots = (cdl__slot *)(void *)(base + h->slots_off);
    L->ring.row_state = (uint32_t *)(void *)(base + h->rows_off);
    if (L->cfg.cache_bytes) {
        L->cache.entries = (cdl__cache_entry *)(void *)(base + h->entries_off);
        L->cache.arena.base = base + h->slab_off;
        L->cache.arena.bytes = L->cfg.cache_bytes;
        L->cache.arena.borrowed = 1;
    }
    L->ring.arena.base = base + h->ring_off;
    L->ring.arena.bytes = h->total_bytes - h->ring_off;
    L->ring.arena.borrowed = 1;
}

static void cdl__group_detach(coordl *L, void *p, uint64_t bytes) {
    munmap(p, bytes);
    L->S = NULL;
    L->ring.slots = NULL;
    L->ring.row_state = NULL;
    L->cache.entries = NULL;
    memset(&L->cache.arena, 0, sizeof L->cache.arena);
    memset(&L->ring.arena, 0, sizeof L->ring.arena);
}

/* Joins the stream as a new generation of a free index: one not in the
 * group whose liveness lock nobody holds (a dropped member's process may
 * still be alive, stopped, and hold its own). Under mu. */
static coordl_status cdl__group_join(coordl *L, uint64_t start_epoch) {
    cdl__stream *S = L->S;
    int me = -1;
    for (int m = 0; m < CDL_MAX_MEMBERS && me < 0; m++) {
        if (atomic_load(&S->live_mask) >> m & 1u) continue;
        if (cdl__mutex_held(&S->members[m].alive, pthread_mutex_trylock(&S->members[m].alive))) {
            pthread_mutex_unlock(&S->members[m].alive);
            me = m;
        }
    }
    if (me < 0)
        return cdl__open_fail(COORDL_ERR_GROUP, "group %s: full (%d members, and no free member index)",
                              L->cfg.group, __builtin_popcount(atomic_load(&S->live_mask)));
    cdl__member *M = &S->members[me];
    L->member.me = me;
    L->member.bit = 1u << me;
    L->member.my_gen = atomic_load(&M->gen) + 1;
    atomic_store(&M->gen, L->member.my_gen);
    atomic_store(&M->pid, (int32_t)getpid());
    atomic_store(&M->died_holding_lock, 0u);
    atomic_store(&M->heartbeat_ns, cdl__now_ns());
    M->start_epoch = start_epoch;
    atomic_fetch_or(&S->live_mask, L->member.bit);
    /* from here a death holding the lock drops this member at once */
    S->lock_owner = me;
    S->lock_owner_gen = L->member.my_gen;
    L->consumer.cur_epoch = start_epoch;
    return COORDL_OK;
}

/* Creates the object with O_EXCL (never opening one another process made)
 * and joins it as its first member before publishing it (ready = 1), so a
 * visible object with no live member is always a stale one. *exists: the
 * name is taken. On success the object is mapped and attached. */
static coordl_status cdl__group_create(coordl *L, const cdl__group_header *want, int *exists) {
    const char *g = L->cfg.group;
    *exists = 0;
    int fd = shm_open(L->member.shm_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == EEXIST) { *exists = 1; return COORDL_OK; }
        return cdl__open_fail(COORDL_ERR_IO, "group %s: shm_open %s: %s", g, L->member.shm_name, strerror(errno));
    }
    struct statvfs vs;
    if (statvfs("/dev/shm", &vs) == 0 && (uint64_t)vs.f_bavail * vs.f_frsize < want->total_bytes) {
        close(fd);
        shm_unlink(L->member.shm_name);
        return cdl__open_fail(COORDL_ERR_NOMEM, "group %s: needs %llu bytes of /dev/shm (cache %llu, ring %llu, "
                              "tables %llu) but %llu are free; lower cache_bytes or enlarge /dev/shm", g,
                              (unsigned long long)want->total_bytes, (unsigned long long)L->cfg.cache_bytes,
                              (unsigned long long)(want->total_bytes - want->ring_off),
                              (unsigned long long)want->slab_off,
                              (unsigned long long)((uint64_t)vs.f_bavail * vs.f_frsize));
    }
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)want->total_bytes) == 0)
        p = mmap(NULL, want->total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(L->member.shm_name);
        return cdl__open_fail(COORDL_ERR_NOMEM, "group %s: cannot size or map %llu bytes of shared memory: %s; lower "
                              "cache_bytes, prefetch_batches or batch_size", g, (unsigned long long)want->total_bytes, strerror(e));
    }
    cdl__group_header *h = p;
    *h = *want;
    cdl__group_attach(L, h);
    coordl_status rc = cdl__stream_init(L->S, 1);
    if (rc != COORDL_OK) {
        cdl__group_detach(L, h, want->total_bytes);
        shm_unlink(L->member.shm_name);
        return rc;
    }
    cdl__ring_layout(L);
    L->member.shm_base = h;
    L->member.shm_bytes = want->total_bytes;
    rc = cdl__group_join(L, 0);
    if (rc != COORDL_OK) return rc;
    L->S->lock_owner = -1;
    L->S->started = L->cfg.group_size == 1;
    atomic_store(&h->ready, 1u);
    return COORDL_OK;
}

/* Opens and maps the existing object once its creator has published it.
 * Refuses an object of another user, or not a regular file, or open to
 * other users: such an object was not made by this user's coordl, and its
 * contents cannot be trusted. *retry: it vanished, or its creator died
 * while setting it up (then its name is unlinked if it still names it). */
static coordl_status cdl__group_map_existing(coordl *L, uint64_t deadline, void **out, uint64_t *bytes, int *retry) {
    const char *g = L->cfg.group;
    *retry = 0;
    *out = NULL;
    int fd = shm_open(L->member.shm_name, O_RDWR | O_CLOEXEC, 0); /* glibc adds O_NOFOLLOW */
    if (fd < 0) {
        if (errno == ENOENT) { *retry = 1; return COORDL_OK; }
        return cdl__open_fail(COORDL_ERR_GROUP, "group %s: cannot open /dev/shm%s: %s", g, L->member.shm_name, strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 077)) {
        const int bad_owner = sb.st_uid != geteuid();
        close(fd);
        if (bad_owner)
            return cdl__open_fail(COORDL_ERR_GROUP, "group %s: /dev/shm%s belongs to uid %u, not to this process's uid %u: "
                                  "another user made it, and coordl does not use another user's object; remove it "
                                  "(as its owner or root) or pick another group name", g, L->member.shm_name,
                                  (unsigned)sb.st_uid, (unsigned)geteuid());
        return cdl__open_fail(COORDL_ERR_GROUP, "group %s: /dev/shm%s is not a private regular file (mode %04o); "
                              "coordl did not make it: remove it or pick another group name", g, L->member.shm_name,
                              (unsigned)(sb.st_mode & 07777));
    }
    void *p = MAP_FAILED;
    for (;;) {
        if (fstat(fd, &sb) == 0 && (uint64_t)sb.st_size >= sizeof(cdl__group_header)) {
            p = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p != MAP_FAILED && atomic_load(&((cdl__group_header *)p)->ready)) break;
            if (p != MAP_FAILED) munmap(p, (size_t)sb.st_size);
            p = MAP_FAILED;
        }
        if (cdl__now_ns() > deadline) break;
        usleep(2000);
    }
    close(fd);
    if (p == MAP_FAILED) { /* its creator died while setting it up */
        struct stat now_sb;
        int fd2 = shm_open(L->member.shm_name, O_RDWR | O_CLOEXEC, 0);
        if (fd2 >= 0) {
            if (fstat(fd2, &now_sb) == 0 && now_sb.st_ino == sb.st_ino) shm_unlink(L->member.shm_name);
            close(fd2);
        }
        *retry = 1;
        return COORDL_OK;
    }
    *out = p;
    *bytes = (uint64_t)sb.st_size;
    return COORDL_OK;
}

/* Live members of an attached object, probed without its lock and
 * without dropping anyone. */
static int cdl__group_probe_alive(coordl *L) {
    const uint64_t now = cdl__now_ns();
    int alive = 0;
    for (int m = 0; m < CDL_MAX_MEMBERS; m++)
        if ((atomic_load(&L->S->live_mask) >> m & 1u) &&
            cdl__member_probe(L->S, m, now, cdl__group_timeout_ns(L), 1) == CDL_MEMBER_ALIVE)
            alive++;
    return alive;
}

/* The object's settings equal this member's (a config field by name), and
 * so does its geometry. */
static coordl_status cdl__group_compare(coordl *L, const cdl__group_header *got, const cdl__group_header *want) {
    const char *g = L->cfg.group;
    for (uint32_t i = 0; i < want->nfields; i++)
        if (i >= got->nfields || strcmp(got->fields[i].name, want->fields[i].name) != 0 ||
            got->fields[i].value != want->fields[i].value)
            return cdl__open_fail(COORDL_ERR_GROUP, "group %s: %s differs from the group's (this member %llu, the "
                                  "group %llu); members must open with the same settings", g, want->fields[i].name,
                                  (unsigned long long)want->fields[i].value,
                                  (unsigned long long)(i < got->nfields ? got->fields[i].value : 0));
    const size_t geometry = sizeof *want - offsetof(cdl__group_header, nslots);
    if (got->total_bytes != want->total_bytes ||
        memcmp((const cdl__u8 *)got + offsetof(cdl__group_header, nslots),
               (const cdl__u8 *)want + offsetof(cdl__group_header, nslots), geometry) != 0)
        return cdl__open_fail(COORDL_ERR_GROUP, "group %s: the shared layout differs (%llu bytes, expected %llu)", g,
                              (unsigned long long)got->total_bytes, (unsigned long long)want->total_bytes);
    return COORDL_OK;
}

/* Attaches to the existing object: validated (layout, then contents under
 * its lock), stale members dropped (an object none of whose members lives
 * is retired: *retry), settings compared. Returns with the lock held and
 * the object attached, ready for cdl__group_join. */
static coordl_status cdl__group_attach_existing(coordl *L, const cdl__group_header *want, uint64_t deadline,
                                                int *retry) {
    const char *g = L->cfg.group;
    void *p = NULL;
    uint64_t bytes = 0;
    char why[200];
    coordl_status rc = cdl__group_map_existing(L, deadline, &p, &bytes, retry);
    if (rc != COORDL_OK || *retry) return rc;
    if (!cdl__group_validate(p, bytes, 0, why, sizeof why)) {
        munmap(p, bytes);
        return cdl__open_fail(COORDL_ERR_GROUP, "group %s: /dev/shm%s is not a usable coordl group object (%s); "
                              "if no process uses it, remove it (rm /dev/shm%s) or pick another group name", g,
                              L->member.shm_name, why, L->member.shm_name);
    }
    cdl__group_header *h = p;
    cdl__group_attach(L, h);
    L->member.me = -1;
    if (h->nslots != L->ring.nslots || h->rows_cap != L->geom.slot_rows_cap || h->num_items != L->index.num_items ||
        h->cache_bytes != L->cfg.cache_bytes) {
        /* Another geometry: this member's repair and recount would index the
         * object wrongly, so it neither locks nor drops anyone; an object
         * with no member alive is retired, else the settings differ. */
        if (cdl__group_probe_alive(L) == 0) {
            cdl__log(L, COORDL_LOG_WARN, "group %s: %s was left by a crashed run; replacing it", g, L->member.shm_name);
            cdl__group_retire(L->member.shm_name, h, L->S);
            cdl__group_detach(L, p, bytes);
            *retry = 1;
            return COORDL_OK;
        }
        rc = cdl__group_compare(L, h, want);
        cdl__group_detach(L, p, bytes);
        return rc;
    }
    /* the contents are checked under the lock, before repair may act on
     * them after a holder died; the lock is waited for within the open's
     * deadline (a damaged object's may never come free) */
    int e = cdl__mutex_lock_until(&L->S->mu, deadline);
    if (e != 0 && e != EOWNERDEAD) {
        cdl__group_detach(L, p, bytes);
        return cdl__open_fail(COORDL_ERR_TIMEOUT, "group %s: the lock of /dev/shm%s did not come free within "
                              "group_timeout_ms (%d ms): a member may be stopped while holding it, or the object "
                              "is damaged (%s)", g, L->member.shm_name, L->cfg.group_timeout_ms, strerror(e));
    }
    if (!cdl__group_validate(p, bytes, 1, why, sizeof why)) {
        (void)cdl__mutex_held(&L->S->mu, e); /* left as found: nothing repaired */
        pthread_mutex_unlock(&L->S->mu);
        cdl__group_detach(L, p, bytes);
        return cdl__open_fail(COORDL_ERR_GROUP, "group %s: /dev/shm%s is not a usable coordl group object (%s); "
                              "if no process uses it, remove it (rm /dev/shm%s) or pick another group name", g,
                              L->member.shm_name, why, L->member.shm_name);
    }
    cdl__lock_acquired(L, e);
    /* stale first: an object whose every recorded member is gone is
     * replaced whatever settings it was made with */
    if (cdl__group_sweep(L, 1) == 0 || atomic_load(&h->retired)) {
        if (!atomic_load(&h->retired))
            cdl__log(L, COORDL_LOG_WARN, "group %s: %s was left by a crashed run; replacing it", g, L->member.shm_name);
        if (!atomic_load(&h->retired)) {
            atomic_store(&h->retired, 1u);
            shm_unlink(L->member.shm_name);
        }
        cdl__unlock(L);
        cdl__group_detach(L, p, bytes);
        *retry = 1;
        return COORDL_OK;
    }
    rc = cdl__group_compare(L, h, want);
    if (rc != COORDL_OK) {
        cdl__unlock(L);
        cdl__group_detach(L, p, bytes);
        return rc;
    }
    L->member.shm_base = h;
    L->member.shm_bytes = bytes;
    return COORDL_OK;
}

/* Waits (bounded by the deadline) until group_size members have joined. */
static coordl_status cdl__group_wait_started(coordl *L, uint64_t deadline) {
    cdl__stream *S = L->S;
    while (!S->started) {
        if (!cdl__member_current(L))
            return cdl__open_fail(COORDL_ERR_GROUP, "group %s: dropped while waiting for the other members",
                                  L->cfg.group);
        if (cdl__now_ns() > deadline) {
            const int have = __builtin_popcount(atomic_load(&S->live_mask));
            cdl__group_drop(L, L->member.me, L->member.my_gen, CDL_MEMBER_LEAVES);
            return cdl__open_fail(COORDL_ERR_TIMEOUT, "group %s: only %d of group_size %d members joined within "
                                  "group_timeout_ms (%d ms)", L->cfg.group, have, L->cfg.group_size,
                                  L->cfg.group_timeout_ms);
        }
        const uint64_t left_ms = (deadline - cdl__now_ns()) / 1000000ull + 1;
        cdl__wait_ms(L, &S->ready_cv, left_ms > 1000 ? 1000 : (int)left_ms); /* a join wakes it; the deadline too */
    }
    return COORDL_OK;
}

/* Page-locks the mapping per cache_pin and registers its cache slab and
 * ring with the pin callback (once per process; unregistered before the
 * unmap). */
static void cdl__group_pin(coordl *L) {
    cdl__group_header *h = L->member.shm_base;
    if (L->cfg.cache_pin != COORDL_PIN_OFF) {
#ifdef MLOCK_ONFAULT
        if (mlock2(h, L->member.shm_bytes, MLOCK_ONFAULT) == 0) L->stats.st.pinned_bytes = L->member.shm_bytes;
#endif
    }
    if (L->cfg.cache_bytes)
        cdl__arena_borrow(L, &L->cache.arena, (cdl__u8 *)h + h->slab_off, (size_t)L->cfg.cache_bytes, "cache slab");
    cdl__arena_borrow(L, &L->ring.arena, (cdl__u8 *)h + h->ring_off, (size_t)(h->total_bytes - h->ring_off),
                      "batch ring");
}

/* Creates or joins the group's object, starts the member thread and waits
 * for group_size members. */
CDL_PRIVATE coordl_status cdl__group_open(coordl *L) {
    const char *g = L->cfg.group;
    /* the name was checked with the config (config.c): it names files */
    if (L->cfg.cache_policy == COORDL_CACHE_LRU)
        return cdl__open_fail(COORDL_ERR_UNSUPPORTED, "group: cache_policy LRU cannot be shared; use MinIO");
    snprintf(L->member.shm_name, sizeof L->member.shm_name, "/coordl-%s", g);
    cdl__group_header want;
    cdl__group_want(L, &want);
    cdl__group_fit_shm(L, &want);
    L->member.timeout_ms = (uint32_t)L->cfg.group_timeout_ms; /* the object's, once attached */
    /* how long this member waits to open is its own setting */
    const uint64_t deadline = cdl__now_ns() + (uint64_t)L->cfg.group_timeout_ms * 1000000ull;
    int creator = 0, attached = 0;
    /* members racing to replace a stale object retry until one of them
     * has created the new one; bounded by group_timeout_ms */
    for (int attempt = 0; !attached && (attempt < 8 || cdl__now_ns() < deadline) && attempt < 100000; attempt++) {
        int exists = 0, retry = 0;
        coordl_status rc = cdl__group_create(L, &want, &exists);
        if (rc != COORDL_OK) return rc;
        if (!exists) {
            creator = attached = 1;
            break;
        }
        rc = cdl__group_attach_existing(L, &want, deadline, &retry);
        if (rc != COORDL_OK) return rc;
        if (retry) {
            usleep(1000);
            continue;
        }
        attached = 1; /* holding the lock */
    }
    if (!attached) return cdl__open_fail(COORDL_ERR_GROUP, "group %s: could not create or join %s", g, L->member.shm_name);
    cdl__group_pin(L);
    cdl__stream *S = L->S;
    coordl_status rc = COORDL_OK;
    if (creator) {
        cdl__lock(L);
    } else if (S->started && !L->cfg.group_late_join) {
        rc = cdl__open_fail(COORDL_ERR_GROUP, "group %s: already started with %d members; set group_late_join "
                            "to join at the next epoch", g, __builtin_popcount(atomic_load(&S->live_mask)));
    } else if (!S->started && __builtin_popcount(atomic_load(&S->live_mask)) >= L->cfg.group_size) {
        rc = cdl__open_fail(COORDL_ERR_GROUP, "group %s: full (%d members)", g,
                            __builtin_popcount(atomic_load(&S->live_mask)));
    } else {
        /* a late member starts with the first epoch nobody has begun */
        rc = cdl__group_join(L, S->started ? S->claim_epoch + 1 : 0);
        if (rc == COORDL_OK && !S->started && __builtin_popcount(atomic_load(&S->live_mask)) >= L->cfg.group_size)
            S->started = 1;
        cdl__broadcast(L, &S->ready_cv);
        cdl__broadcast(L, &S->work_cv);
    }
    /* the private ring arrays (MPI's per-row bookkeeping) and the ring's
     * geometry are set before the member thread exists: it reads them when
     * it drops a dead member's rows */
    if (rc == COORDL_OK) rc = cdl__ring_alloc(L, L->geom.slot_rows_cap, L->geom.slot_data_cap);
    if (rc == COORDL_OK) {
        cdl__test_hook(L, "joined");
        rc = cdl__member_thread_start(L);
    }
    if (rc == COORDL_OK) rc = cdl__group_wait_started(L, deadline);
    if (rc == COORDL_OK) cdl__stream_check(L, "join");
    cdl__unlock(L);
    if (rc == COORDL_OK)
        cdl__log(L, COORDL_LOG_INFO, "group %s: %s as member %d of %d", g, creator ? "created" : "joined", L->member.me,
                 L->cfg.group_size);
    return rc;
}

/* Leaves the group (if still in it); the last member out removes the
 * object; then the member thread stops and the mapping goes. */
CDL_PRIVATE void cdl__group_leave(coordl *L) {
    cdl__group_header *h = L->member.shm_base;
    if (!h) return;
    if (L->S && L->member.me >= 0) {
        cdl__lock(L);
        if (cdl__member_current(L)) {
            cdl__group_drop(L, L->member.me, L->member.my_gen, CDL_MEMBER_LEAVES);
            cdl__group_sweep(L, 1); /* members that died since the last round are not "still in" */
        }
        /* the last one out retires the name under the lock, so a process
         * joining right now sees `retired` and starts over */
        if (atomic_load(&L->S->live_mask) == 0 && !atomic_load(&h->retired)) {
            atomic_store(&h->retired, 1u);
            shm_unlink(L->member.shm_name);
            cdl__ix_group_remove(L); /* the index the group shared */
        }
        cdl__unlock(L);
    }
    cdl__member_thread_stop(L);
    cdl__group_detach(L, h, L->member.shm_bytes);
    L->member.shm_base = NULL;
}

/* ---- src/api.c --------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * api.c - the public API.
 *
 * Owns:  L->consumer: the consumer thread's position and stall timing;
 *        coordl_open, next, release, seek, set, stats, close
 * Lock:  the stream's lock for everything shared; the consumer fields are
 *        the calling thread's (the API is single-consumer)
 * Calls: status, placement, lock, remote, io, uring, index, indexfile,
 *        source, sampler, cache, peers, readahead, plan, resample, audio,
 *        decode, config, stream, pool, group (lower layers only:
 *        src/modules.txt; tools/check-layers.py checks this line).
 */

static coordl_status cdl__open_handle(const coordl_config *cfg, coordl **out) {
    coordl_allocator a = cfg->allocator;
    if (!a.malloc_fn) {
        a.malloc_fn = cdl__default_malloc;
        a.realloc_fn = cdl__default_realloc;
        a.free_fn = cdl__default_free;
    }
    coordl *L = a.malloc_fn(a.user, sizeof *L);
    if (!L) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory for the handle");
    memset(L, 0, sizeof *L);
    pthread_mutex_init(&L->api_reader.mu, NULL); /* coordl_close destroys it */
    L->alloc = a;
    L->cfg = *cfg;
    L->io = cfg->io ? cfg->io : &cdl__posix_io;
    L->member.me = -1;
    *out = L;
    L->geom.avx2 = cdl__resample_use_avx2();
    L->lock_repair = cdl__stream_repair;
    /* limits added after 0.3.0: 0 (a caller that predates them) = default */
    if (!L->cfg.max_decode_bytes) L->cfg.max_decode_bytes = CDL_DEFAULT_MAX_DECODE_BYTES;
    if (!L->cfg.max_audio_samples) L->cfg.max_audio_samples = CDL_DEFAULT_MAX_AUDIO_SAMPLES;
    /* Strings are copied: the caller's config may go away after open. */
    size_t slen = strlen(cfg->source);
    L->conf.source_copy = cdl__malloc(L, slen + 1);
    if (!L->conf.source_copy) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    memcpy(L->conf.source_copy, cfg->source, slen + 1);
    /* a folder's trailing '/' goes; an s3:// prefix keeps it: it asks for
     * a listing (docs/remote.md) */
    if (strncasecmp(L->conf.source_copy, "s3://", 5) != 0)
        while (slen > 1 && L->conf.source_copy[slen - 1] == '/') L->conf.source_copy[--slen] = '\0';
    L->cfg.source = L->conf.source_copy;
    if (cfg->group) {
        size_t glen = strlen(cfg->group);
        L->conf.group_copy = cdl__malloc(L, glen + 1);
        if (!L->conf.group_copy) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
        memcpy(L->conf.group_copy, cfg->group, glen + 1);
        L->cfg.group = L->conf.group_copy;
    }
    if (cfg->topology) { /* kept: coordl_get_config says what the cpuset indexes */
        size_t tlen = strlen(cfg->topology);
        L->conf.topology_copy = cdl__malloc(L, tlen + 1);
        if (!L->conf.topology_copy) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
        memcpy(L->conf.topology_copy, cfg->topology, tlen + 1);
        L->cfg.topology = L->conf.topology_copy;
    }
    return COORDL_OK;
}

/* From the indexed dataset: the rank's share, batches per epoch, the row
 * sizes and the ring's capacity (the largest sizes coordl_set may ask for
 * without reallocating it). */
static coordl_status cdl__open_geometry(coordl *L) {
    L->sampler.share = L->sampler.llmc ? L->sampler.llmc->total * L->cfg.batch_size : L->index.num_items / (uint64_t)L->cfg.world;
    if (L->index.lazy) L->sampler.share = UINT64_MAX; /* known once every shard is counted (cdl__sampler_settle) */
    L->sampler.bpe = cdl__batches_for(L, L->cfg.batch_size);
    if (L->index.lazy) {
        /* nothing to check before the shards are counted */
    } else if (L->sampler.share == 0)
        return cdl__open_fail(COORDL_ERR_INVALID, "world: %d ranks but only %llu items; every rank needs at least "
                              "one item per epoch", L->cfg.world, (unsigned long long)L->index.num_items);
    else if (L->sampler.bpe == 0)
        return cdl__open_fail(COORDL_ERR_INVALID, "batch_size: %u is larger than this rank's %llu items per epoch "
                              "with drop_last; lower batch_size", L->cfg.batch_size, (unsigned long long)L->sampler.share);
    cdl__output_setup(L);
    const uint32_t mw = L->cfg.max_out_w > L->cfg.out_w ? L->cfg.max_out_w : L->cfg.out_w;
    const uint32_t mh = L->cfg.max_out_h > L->cfg.out_h ? L->cfg.max_out_h : L->cfg.out_h;
    L->geom.slot_rows_cap = L->cfg.max_batch_size > L->cfg.batch_size ? L->cfg.max_batch_size : L->cfg.batch_size;
    const size_t max_row = cdl__row_bytes_at(L, mw, mh); /* mw x mh <= 2^26 (cdl__validate) */
    if (max_row > SIZE_MAX / L->geom.slot_rows_cap)
        return cdl__open_fail(COORDL_ERR_INVALID, "max_batch_size: %u rows of %zu bytes do not fit this platform",
                              L->geom.slot_rows_cap, max_row);
    L->geom.slot_data_cap = (size_t)L->geom.slot_rows_cap * max_row;
    L->ring.nslots = L->cfg.prefetch_batches;
    /* read-ahead as it will run (coordl_get_config reports it) */
    if (L->cfg.group) L->cfg.readahead_items = 0;
    /* token windows read by the trainer's thread (no workers): a window is
     * a read call on a shard kept open, and the kernel's file read-ahead
     * keeps a shard's pages ahead; I/O threads would only add a wake-up
     * per half window (issue 23: context switches per run within 2x of
     * llm.c's own loader) */
    if (L->cfg.pipeline == COORDL_PIPE_TOKENS && L->cfg.threads == 0) L->cfg.readahead_items = 0;
    if (L->cfg.readahead_items == 0) {
        L->cfg.readahead_threads = 0;
        L->cfg.readahead_bytes = 0;
    } else {
        /* the depth is the reads in flight: up to one I/O thread each,
         * started as reads wait (readahead.c) */
        if (L->cfg.readahead_threads == 0 || L->cfg.readahead_threads > L->cfg.readahead_items)
            L->cfg.readahead_threads = L->cfg.readahead_items;
        if (L->cfg.readahead_bytes == 0) {
            /* twice the depth's worth of mean items, 4..64 MiB (every page
             * of it is touched once per lap: no bigger than it needs) */
            const uint64_t mean = L->index.num_items ? L->index.dataset_bytes / L->index.num_items : 0;
            uint64_t b = 2 * (uint64_t)L->cfg.readahead_items * (mean + 64);
            if (b < ((uint64_t)4 << 20)) b = (uint64_t)4 << 20;
            if (b > ((uint64_t)64 << 20)) b = (uint64_t)64 << 20;
            const uint64_t small = L->index.dataset_bytes + ((uint64_t)1 << 20);
            L->cfg.readahead_bytes = small < b ? small : b;
        }
        if (L->cfg.readahead_bytes > SIZE_MAX / 4)
            return cdl__open_fail(COORDL_ERR_INVALID, "readahead_bytes: %llu is too large for this platform",
                                  (unsigned long long)L->cfg.readahead_bytes);
    }
    L->stats.st.dataset_bytes = L->index.dataset_bytes;
    return COORDL_OK;
}

/* A private stream: this process is the only member (index 0). */
static coordl_status cdl__open_private_stream(coordl *L) {
    L->S = cdl__calloc(L, 1, sizeof *L->S);
    coordl_status rc = L->S ? cdl__stream_init(L->S, 0) : cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    if (rc != COORDL_OK) return rc;
    L->member.me = 0;
    L->member.bit = 1;
    L->member.my_gen = 1;
    atomic_store(&L->S->members[0].gen, 1);
    atomic_store(&L->S->members[0].pid, (int32_t)getpid());
    atomic_store(&L->S->live_mask, 1u);
    L->S->started = 1;
    rc = cdl__cache_create(L);
    if (rc == COORDL_OK) rc = cdl__ring_alloc(L, L->geom.slot_rows_cap, L->geom.slot_data_cap);
    return rc;
}

static void cdl__open_log(coordl *L) {
    cdl__log(L, COORDL_LOG_INFO, "opened %s: %llu items, %u classes, %llu batches/epoch, %d workers, "
             "cache %llu bytes", L->cfg.source, (unsigned long long)L->index.num_items, L->index.num_classes,
             /* a lazy index's workers may have settled it already */
             (unsigned long long)__atomic_load_n(&L->sampler.bpe, __ATOMIC_RELAXED), L->pool.nworkers,
             (unsigned long long)L->cfg.cache_bytes);
    char node[32];
    if (L->place.node >= 0) snprintf(node, sizeof node, "node %d", L->place.node);
    else snprintf(node, sizeof node, "%d nodes (interleaved)", L->place.nnodes);
    cdl__log(L, COORDL_LOG_INFO, "placement%s: workers on PUs %s%s%s; memory on %s, %s; "
             "%llu bytes page-locked", L->place.simulate ? " (simulated topology, nothing bound)" : "",
             L->stats.st.placement_cpus, L->stats.st.reserved_cpus[0] ? "; reserved for the trainer: PUs " : "",
             L->stats.st.reserved_cpus, node, L->stats.st.memory_bound ? "bound" : "not bound",
             (unsigned long long)L->stats.st.pinned_bytes);
}

CDL_PRIVATE coordl_status cdl__open(const coordl_config *cfg, coordl **out) {
    cdl__open_errmsg[0] = '\0';
    if (out) *out = NULL;
    if (!cfg || !out) return cdl__open_fail(COORDL_ERR_INVALID, "coordl_open: cfg and out must not be NULL");
    coordl_status rc = cdl__validate(cfg);
    if (rc != COORDL_OK) return rc;
    coordl *L = NULL;
    rc = cdl__open_handle(cfg, &L);
    if (rc == COORDL_OK && L->cfg.mpi_comm) {
#ifdef COORDL_MPI
        rc = cdl__peer_open(L);
#else
        rc = cdl__open_fail(COORDL_ERR_UNSUPPORTED, "mpi_comm: this build has no MPI; build with COORDL_MPI "
                            "(make MPI=1)");
#endif
    }
#ifdef COORDL_MPI
    /* one scan per job: rank 0 indexes, the others receive its index */
    if (rc == COORDL_OK && L->peers.comm_set && L->cfg.world > 1) rc = cdl__peer_index(L);
    else
#endif
    if (rc == COORDL_OK) rc = cdl__index_source(L);
    if (rc == COORDL_OK && L->cfg.pipeline == COORDL_PIPE_TOKENS && L->cfg.token_order == COORDL_TOKENS_LLMC)
        rc = cdl__llmc_init(L);
    if (rc == COORDL_OK && L->cfg.shuffle == COORDL_SHUFFLE_SHARD_WINDOW) rc = cdl__window_init(L);
    if (rc == COORDL_OK) rc = cdl__open_geometry(L);
    if (rc == COORDL_OK) rc = cdl__placement_choose(L, &L->place);
    if (rc == COORDL_OK) {
        L->place.memory_bound_all = L->cfg.bind && !L->place.simulate;
        rc = cdl__cache_clamp(L);
    }
    if (rc == COORDL_OK && L->cfg.group) {
        L->place.memory_bound_all = 0; /* the shm object is placed by first touch */
        rc = cdl__group_open(L); /* allocates the ring's private arrays */
    } else if (rc == COORDL_OK) {
        rc = cdl__open_private_stream(L);
    }
#ifdef COORDL_MPI
    /* before the workers: they read the peer bookkeeping */
    if (rc == COORDL_OK && L->peers.comm_set) rc = cdl__peer_start(L);
#endif
    if (rc == COORDL_OK) {
        L->stats.st.memory_bound = L->place.memory_bound_all;
        if (L->place.pin_failed)
            cdl__log(L, COORDL_LOG_WARN, "cache and batch ring are not page-locked (%s); using pageable "
                     "memory (raise RLIMIT_MEMLOCK or grant CAP_IPC_LOCK to pin them)", L->place.pin_error);
        rc = cdl__ra_start(L);
        if (rc == COORDL_OK) rc = cdl__pool_start(L);
    }
    if (rc != COORDL_OK) {
        char keep[CDL_ERRMSG_MAX];
        memcpy(keep, cdl__open_errmsg, sizeof keep);
        coordl_close(L);
        memcpy(cdl__open_errmsg, keep, sizeof keep);
        return rc;
    }
    cdl__open_log(L);
    L->consumer.last_return_ns = 0;
    /* the placement strings were consumed by open; drop the caller's
     * pointers so nothing can read them after the caller frees them (the
     * topology points to the handle's copy) */
    L->cfg.cpuset = L->cfg.pci_bus_id = NULL;
    L->cfg.index_path = NULL;
    *out = L;
    return COORDL_OK;
}

/* The consumer's time inside coordl_next (and coordl_next_into, the same
 * call with a copy) counts as stall: the trainer waits for its batch
 * there and nowhere else. The time between the end of one such call and
 * the start of the next is compute, whatever else the trainer calls in
 * between (release, seek, set are its own work, not a wait for data). The
 * stall goes to `epoch`'s counters, the compute to the epoch of the call
 * before it. cdl__consumer_time, at the end of each such call under mu,
 * counts up to now and returns now; cdl__consumer_done, after the unlock,
 * keeps the rest (the unlock, a wake-up, the thread preempted meanwhile)
 * as the tail that the next call moves into the counters
 * (coordl_get_stats adds it meanwhile). */
static CDL_HOT uint64_t cdl__consumer_time(coordl *L, uint64_t t_enter, uint64_t epoch) {
    const uint64_t now = cdl__now_ns();
    const uint64_t tail = atomic_exchange(&L->consumer.stall_tail_ns, 0);
    if (tail) {
        L->stats.st.stall_ns += tail;
        cdl__epoch_entry(L, L->consumer.stall_tail_epoch)->s.stall_ns += tail;
    }
    if (L->consumer.last_return_ns && t_enter > L->consumer.last_return_ns) {
        const uint64_t compute = t_enter - L->consumer.last_return_ns;
        L->stats.st.compute_ns += compute;
        cdl__epoch_entry(L, L->consumer.stall_tail_epoch)->s.compute_ns += compute;
    }
    L->stats.st.stall_ns += now - t_enter;
    cdl__epoch_entry(L, epoch)->s.stall_ns += now - t_enter;
    return now;
}

static CDL_HOT void cdl__consumer_done(coordl *L, uint64_t counted_until, uint64_t epoch) {
    const uint64_t end = cdl__now_ns();
    L->consumer.stall_tail_epoch = epoch;
    atomic_store(&L->consumer.stall_tail_ns, end > counted_until ? end - counted_until : 0);
    L->consumer.last_return_ns = end;
}

/* While its next batch is not ready the consumer of a token pipeline
 * prepares rows itself, as a worker would (claim, prepare, complete): a
 * window is a copy of a few hundred bytes, so doing it is cheaper than
 * waiting for a worker that the trainer's own threads or other processes
 * keep off the cores. A private loader claims up to CDL_HELP_ROWS rows of
 * one slot in one critical section and completes them in another (issue
 * 23: two lock round trips a row made a B = 128 batch cost 2.3x llm.c's
 * loader); a group stages each row in the one staging buffer, so it goes
 * row by row. 1 when it prepared a row. Under mu (released while the rows
 * are prepared). */
enum { CDL_HELP_ROWS = 64 };

static int cdl__consumer_help(coordl *L) {
    cdl__worker *H = L->pool.helper;
    cdl__claim c[CDL_HELP_ROWS];
    cdl__row_result r[CDL_HELP_ROWS];
    cdl__counters sum;
    char first_err[CDL_ERRMSG_MAX];
    if (!H || !cdl__stream_try_claim(L, &c[0])) return 0;
    const int most = L->cfg.group ? 1 : CDL_HELP_ROWS;
    int n = 1;
    while (n < most) {
        const cdl__slot *sl = &L->ring.slots[c[0].slot];
        if (sl->gen != c[0].slot_gen || sl->rows_claimed >= sl->n || !cdl__stream_try_claim(L, &c[n])) break;
        n++;
    }
    cdl__unlock(L);
    memset(&sum, 0, sizeof sum);
    first_err[0] = '\0';
    for (int i = 0; i < n; i++) {
        cdl__worker_prepare(H, &c[i], &r[i]);
#define CDL_COUNTER_SUM(name, per_row, in_stats, ep) CDL_IF_##per_row(sum.name += H->row.name;)
        CDL_COUNTERS(CDL_COUNTER_SUM)
#undef CDL_COUNTER_SUM
        /* the worker's message buffer is the next row's: keep the first
         * failed row's (the slot records only its lowest failed row) */
        if (r[i].status != COORDL_OK && !first_err[0]) snprintf(first_err, sizeof first_err, "%s", r[i].errmsg);
        r[i].errmsg = first_err;
    }
    cdl__lock(L);
    cdl__counters none;
    memset(&none, 0, sizeof none);
    for (int i = 0; i < n; i++) cdl__stream_complete(L, &c[i], i == 0 ? &sum : &none, &r[i]);
    return 1;
}

/* coordl_next under mu: the end of an epoch, or the next batch in order
 * (waiting for it). *epoch: the epoch the call's time belongs to. */
/* The consumer is at the end of its epoch: the next call starts the next. */
static CDL_HOT coordl_status cdl__consumer_epoch_ended(coordl *L, coordl_batch *out) {
    out->epoch = L->consumer.cur_epoch;
    L->consumer.cur_epoch++;
    L->consumer.cur_pos = 0;
    L->consumer.cur_index = 0;
    return COORDL_END_OF_EPOCH;
}

static CDL_HOT coordl_status cdl__consumer_next(coordl *L, coordl_batch *out, uint64_t *epoch) {
    cdl__stream *S = L->S;
    memset(out, 0, sizeof *out);
    L->errmsg[0] = '\0';
    *epoch = L->consumer.cur_epoch;
    cdl__peer_consumer_started(L);
    coordl_status lazy_rc;
    if (L->index.lazy && L->cfg.on_bad_sample == COORDL_BAD_FAIL &&
        cdl__lazy_new_failure(L, &lazy_rc, L->errmsg, sizeof L->errmsg))
        return lazy_rc; /* a shard the order left out: said once; the next call goes on */
    if (L->consumer.cur_pos >= cdl__epoch_end(L, L->consumer.cur_epoch)) return cdl__consumer_epoch_ended(L, out);
    if (S->broken) {
        snprintf(L->errmsg, sizeof L->errmsg, "the batch ring could not be reallocated by coordl_set; "
                 "close this handle");
        return COORDL_ERR_NOMEM;
    }
    if (L->consumer.held >= L->ring.nslots) {
        snprintf(L->errmsg, sizeof L->errmsg, "all %u batch slots are held; release a batch before "
                 "asking for the next (or raise prefetch_batches)", L->ring.nslots);
        return COORDL_ERR_INVALID;
    }
    for (;;) {
        if (!cdl__member_current(L)) {
            snprintf(L->errmsg, sizeof L->errmsg, "group %s: this member was dropped from the group "
                     "(no heartbeat within group_timeout_ms); close and reopen", L->cfg.group ? L->cfg.group : "");
            return COORDL_ERR_GROUP;
        }
        const int s = cdl__stream_find(L);
        if (s >= 0) return cdl__stream_take(L, (uint32_t)s, out);
        /* a lazy index's epoch end, learned while this call waited */
        if (L->consumer.cur_pos >= cdl__epoch_end(L, L->consumer.cur_epoch)) return cdl__consumer_epoch_ended(L, out);
        if (cdl__consumer_help(L)) continue;
        cdl__signal(L, &S->work_cv); /* below the release mark a worker may sleep */
        cdl__wait(L, &S->ready_cv);
    }
}

CDL_PRIVATE CDL_HOT coordl_status cdl__next(coordl *L, coordl_batch *out) {
    if (!L || !out) return COORDL_ERR_INVALID;
    const uint64_t t0 = cdl__now_ns();
    uint64_t epoch;
    cdl__lock(L);
    const coordl_status rc = cdl__consumer_next(L, out, &epoch);
    const uint64_t counted = cdl__consumer_time(L, t0, epoch);
    cdl__unlock(L);
    cdl__consumer_done(L, counted, epoch);
    return rc;
}

CDL_HOT void coordl_release(coordl *L, coordl_batch *b) {
    if (!L || !b || b->slot_ == 0) return;
    cdl__test_hook(L, "release");
    cdl__lock(L);
    const int freed = cdl__stream_release(L, b);
    cdl__unlock(L);
    if (freed) cdl__signal_unlocked(L, &L->S->work_cv);
    b->slot_ = 0;
}

CDL_HOT coordl_status coordl_next_into(coordl *L, void *data, size_t data_bytes, void *labels_or_targets,
                               size_t label_bytes) {
    if (!L || !data) return COORDL_ERR_INVALID;
    const uint64_t t0 = cdl__now_ns();
    uint64_t epoch = L->consumer.cur_epoch;
    coordl_batch b;
    coordl_status rc = COORDL_OK;
    cdl__lock(L);
    const uint64_t end = cdl__epoch_end(L, L->consumer.cur_epoch);
    if (L->consumer.cur_pos < end) {
        /* Check sizes against the batch that comes next, before taking it,
         * so that a too-small buffer consumes nothing. */
        const uint64_t left = end - L->consumer.cur_pos;
        const size_t n = (size_t)(left < L->cfg.batch_size ? left : L->cfg.batch_size);
        const size_t need_data = n * L->geom.row_bytes;
        const size_t need_labels = n * (L->geom.target_row_bytes ? L->geom.target_row_bytes : sizeof(int32_t));
        if (data_bytes < need_data || (labels_or_targets && label_bytes < need_labels)) {
            snprintf(L->errmsg, sizeof L->errmsg, "coordl_next_into: the next batch needs %zu data bytes "
                     "and %zu %s bytes; got %zu and %zu", need_data, need_labels,
                     L->geom.box_rows ? "box" : L->geom.target_row_bytes ? "target" : "label", data_bytes, label_bytes);
            rc = COORDL_ERR_INVALID;
        }
    }
    if (rc == COORDL_OK) rc = cdl__consumer_next(L, &b, &epoch);
    if (rc != COORDL_OK) {
        const uint64_t counted = cdl__consumer_time(L, t0, epoch);
        cdl__unlock(L);
        cdl__consumer_done(L, counted, epoch);
        return rc;
    }
    /* The batch is held, so the workers need not wait for the copy: its
     * slot is not reused while this member holds it. But a group may drop
     * this member meanwhile (silent past group_timeout_ms: stopped,
     * descheduled), and then the slot goes back to the ring and may be
     * refilled under the copy. So, as a seqlock's reader: copy, then check
     * under the lock that the batch is still this member's (generation,
     * slot generation, its taken bit); the check and the release are one
     * critical section, so nothing can reuse the slot between them. */
    cdl__unlock(L);
    cdl__test_hook(L, "copying");
    /* what goes to labels_or_targets: boxes (Darknet's truth rows, then
     * the counts if they fit), token targets, or labels */
    size_t label_copy = 0, counts_copy = 0;
    if (labels_or_targets) {
        if (b.boxes) {
            label_copy = (size_t)b.n * L->geom.target_row_bytes;
            if (label_bytes - label_copy >= (size_t)b.n * sizeof(uint32_t)) counts_copy = (size_t)b.n * sizeof(uint32_t);
        } else {
            label_copy = b.targets ? (size_t)b.n * L->geom.target_row_bytes : (size_t)b.n * sizeof(int32_t);
        }
    }
    memcpy(data, b.data, b.data_bytes);
    if (label_copy)
        memcpy(labels_or_targets, b.boxes ? (const void *)b.boxes : b.targets ? (const void *)b.targets
                                                                           : (const void *)b.labels, label_copy);
    if (counts_copy) memcpy((unsigned char *)labels_or_targets + label_copy, b.nboxes, counts_copy);
    cdl__lock(L);
    const int held = cdl__stream_holds(L, &b);
    const int freed = held ? cdl__stream_release(L, &b) : 0;
    if (!held) {
        L->consumer.held--; /* the drop took the slot; this handle's count is its own */
        snprintf(L->errmsg, sizeof L->errmsg, "group %s: this member was dropped from the group while "
                 "coordl_next_into copied a batch (no heartbeat within group_timeout_ms); the copy is void "
                 "(zeroed); close and reopen", L->cfg.group ? L->cfg.group : "");
    }
    const uint64_t counted = cdl__consumer_time(L, t0, epoch);
    cdl__unlock(L);
    if (freed) cdl__signal_unlocked(L, &L->S->work_cv);
    cdl__consumer_done(L, counted, epoch);
    if (!held) { /* never hand out rows that may mix two batches */
        memset(data, 0, b.data_bytes);
        if (label_copy) memset(labels_or_targets, 0, label_copy + counts_copy);
        return COORDL_ERR_GROUP;
    }
    return COORDL_OK;
}

coordl_status coordl_seek(coordl *L, uint64_t epoch, uint64_t batch) {
    if (!L) return COORDL_ERR_INVALID;
    if (L->cfg.group) {
        snprintf(L->errmsg, sizeof L->errmsg, "coordl_seek: a coordinated group shares one stream; members cannot "
                 "seek alone");
        return COORDL_ERR_UNSUPPORTED;
    }
    cdl__lock(L);
    if (L->index.lazy && L->sampler.bpe == 0) {
        /* a lazy index not all counted: the batch's first row must map
         * (this counts the shards of its epoch up to it) */
        cdl__sampler_known(L, epoch, batch * L->cfg.batch_size, 1);
        cdl__sampler_settle(L);
    }
    /* still unknown after that: the first row maps, so it is before the end */
    const int count_known = !(L->index.lazy && L->sampler.bpe == 0);
    if (count_known && batch >= L->sampler.bpe) {
        snprintf(L->errmsg, sizeof L->errmsg, "coordl_seek: batch %llu is not below batches_per_epoch (%llu)",
                 (unsigned long long)batch, (unsigned long long)L->sampler.bpe);
        cdl__unlock(L);
        return COORDL_ERR_INVALID;
    }
    cdl__stream_pause(L);
    L->consumer.cur_epoch = epoch;
    L->consumer.cur_pos = batch * L->cfg.batch_size;
    L->consumer.cur_index = batch;
    L->S->cut_epoch = UINT64_MAX; /* whole epochs of the current size again */
    L->S->cut_pos = 0;
    cdl__peer_seek(L, epoch, batch);
    cdl__sampler_seeked(L);
    cdl__stream_restart(L, 0);
    cdl__unlock(L);
    return COORDL_OK;
}

/* An error of coordl_from_llmc / coordl_to_llmc: the detail goes to
 * coordl_errmsg(L). They take a const handle because they only read it;
 * the handle itself is never const (coordl_open allocates it). */
static coordl_status cdl__llmc_fail(const coordl *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (L) cdl__vformat(((coordl *)(uintptr_t)L)->errmsg, sizeof L->errmsg, fmt, ap);
    va_end(ap);
    return COORDL_ERR_INVALID;
}

coordl_status coordl_from_llmc(const coordl *L, uint64_t epoch, uint64_t shard_idx, uint64_t sample_idx,
                               uint64_t *out_epoch, uint64_t *out_batch) {
    if (!L) return COORDL_ERR_INVALID;
    if (!L->sampler.llmc)
        return cdl__llmc_fail(L, "coordl_from_llmc: llm.c positions need token_order = COORDL_TOKENS_LLMC");
    if (!out_epoch || !out_batch) return cdl__llmc_fail(L, "coordl_from_llmc: out_epoch and out_batch must not be NULL");
    if (shard_idx >= L->index.nshards)
        return cdl__llmc_fail(L, "coordl_from_llmc: shard_idx %llu is not below the %zu shards",
                              (unsigned long long)shard_idx, L->index.nshards);
    cdl__llmc *M = L->sampler.llmc;
    pthread_mutex_lock(&M->mu);
    const cdl__llmc_epoch *e = cdl__llmc_table(L, epoch);
    const uint64_t first = e->prefix[shard_idx], count = e->prefix[shard_idx + 1] - first;
    pthread_mutex_unlock(&M->mu);
    if (sample_idx > count)
        return cdl__llmc_fail(L, "coordl_from_llmc: sample_idx %llu is above the %llu samples at shard position "
                              "%llu of epoch %llu (is epoch the one the position belongs to, that of the last "
                              "batch taken: (k - 1) / coordl_batches_per_epoch after k batches?)",
                              (unsigned long long)sample_idx, (unsigned long long)count,
                              (unsigned long long)shard_idx, (unsigned long long)epoch);
    const uint64_t batch = first + sample_idx;
    *out_epoch = batch < M->total ? epoch : epoch + 1;
    *out_batch = batch < M->total ? batch : 0;
    return COORDL_OK;
}

coordl_status coordl_to_llmc(const coordl *L, uint64_t epoch, uint64_t batch, uint64_t *shard_idx,
                             uint64_t *sample_idx) {
    if (!L) return COORDL_ERR_INVALID;
    if (!L->sampler.llmc)
        return cdl__llmc_fail(L, "coordl_to_llmc: llm.c positions need token_order = COORDL_TOKENS_LLMC");
    if (!shard_idx || !sample_idx) return cdl__llmc_fail(L, "coordl_to_llmc: shard_idx and sample_idx must not be NULL");
    if (batch >= L->sampler.llmc->total)
        return cdl__llmc_fail(L, "coordl_to_llmc: batch %llu is not below coordl_batches_per_epoch (%llu)",
                              (unsigned long long)batch, (unsigned long long)L->sampler.llmc->total);
    uint32_t shard;
    cdl__llmc_locate(L, epoch, batch, shard_idx, sample_idx, &shard);
    return COORDL_OK;
}

/* coordl_set's checks: the new (w, h, B) for parameter p, or an error. */
static coordl_status cdl__set_sizes(coordl *L, coordl_param p, int64_t value, uint32_t *w, uint32_t *h, uint32_t *B) {
    const int image = cdl__pipeline_is_image(L->cfg.pipeline);
    switch (p) {
    case COORDL_PARAM_OUT_W:
    case COORDL_PARAM_OUT_H:
    case COORDL_PARAM_OUT_SIZE:
        if (!image || value < 1 || value > 65535) {
            snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: %s %lld is out of range (1..65535, image "
                     "pipelines only)", p == COORDL_PARAM_OUT_W ? "out_w" : p == COORDL_PARAM_OUT_H ? "out_h"
                     : "out size", (long long)value);
            return COORDL_ERR_INVALID;
        }
        if (p != COORDL_PARAM_OUT_H) *w = (uint32_t)value;
        if (p != COORDL_PARAM_OUT_W) *h = (uint32_t)value;
        if ((uint64_t)*w * *h > (1u << 26)) {
            snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: output size %ux%u is too large", *w, *h);
            return COORDL_ERR_INVALID;
        }
        return COORDL_OK;
    case COORDL_PARAM_BATCH_SIZE:
        if (L->sampler.llmc) {
            snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: llm.c's token order cuts every shard into "
                     "samples of world x batch_size windows at open; the batch size cannot change");
            return COORDL_ERR_INVALID;
        }
        if (value < 1 || value > UINT32_MAX || (L->cfg.drop_last && (uint64_t)value > L->sampler.share)) {
            snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: batch_size %lld is out of range (1..%llu)",
                     (long long)value, (unsigned long long)(L->cfg.drop_last ? L->sampler.share : UINT32_MAX));
            return COORDL_ERR_INVALID;
        }
        *B = (uint32_t)value;
        return COORDL_OK;
    default:
        snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: unknown parameter %d", (int)p);
        return COORDL_ERR_INVALID;
    }
}

/* Grows the ring for B rows of row_bytes (paused, nothing held): through
 * the ring allocator, falling back to the old size when the new one cannot
 * be mapped; the handle is broken only when not even that maps again. */
static coordl_status cdl__set_grow_ring(coordl *L, uint32_t B, size_t row_bytes) {
    const size_t old_cap = L->geom.slot_data_cap;
    const uint32_t old_rows = L->geom.slot_rows_cap;
    const uint32_t rows = B > old_rows ? B : old_rows;
    if (row_bytes > SIZE_MAX / rows) {
        snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: %u rows of %zu bytes do not fit this platform", rows, row_bytes);
        return COORDL_ERR_INVALID;
    }
    const size_t cap = (size_t)rows * row_bytes > old_cap ? (size_t)rows * row_bytes : old_cap;
    if (cdl__ring_alloc(L, rows, cap) == COORDL_OK) return COORDL_OK;
    snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: %.400s", cdl__open_errmsg);
    if (cdl__ring_alloc(L, old_rows, old_cap) != COORDL_OK) L->S->broken = 1;
    return COORDL_ERR_NOMEM;
}

coordl_status coordl_set(coordl *L, coordl_param p, int64_t value) {
    if (!L) return COORDL_ERR_INVALID;
    if (L->cfg.group) {
        snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: a coordinated group shares one stream; set the sizes "
                 "at open");
        return COORDL_ERR_UNSUPPORTED;
    }
    uint32_t w = L->cfg.out_w, h = L->cfg.out_h, B = L->cfg.batch_size;
    coordl_status rc = cdl__set_sizes(L, p, value, &w, &h, &B);
    if (rc != COORDL_OK) return rc;
    const size_t row_bytes = cdl__row_bytes_at(L, w, h);
    const int grow = B > L->geom.slot_rows_cap || (size_t)B * row_bytes > L->geom.slot_data_cap;
    cdl__lock(L);
    if (grow && L->consumer.held > 0) {
        snprintf(L->errmsg, sizeof L->errmsg, "coordl_set: %ux%u x %u rows needs a bigger ring while %u "
                 "batch(es) are held; release them first, or set max_out_w/max_out_h/max_batch_size at "
                 "open", w, h, B, L->consumer.held);
        cdl__unlock(L);
        return COORDL_ERR_INVALID;
    }
    cdl__stream_pause(L);
    const uint32_t old_B = L->cfg.batch_size;
    if (grow) rc = cdl__set_grow_ring(L, B, row_bytes);
    if (rc == COORDL_OK) {
        L->cfg.out_w = w;
        L->cfg.out_h = h;
        if (B != L->cfg.batch_size) {
            L->S->cut_epoch = L->consumer.cur_epoch;
            L->S->cut_pos = L->consumer.cur_pos;
        }
        L->cfg.batch_size = B;
        L->geom.row_bytes = row_bytes;
        L->sampler.bpe = cdl__batches_for(L, B);
    }
    /* a broken handle stays paused and every later coordl_next reports it;
     * a new output size alone leaves every position's item as it was, so
     * what was read ahead stays */
    if (!L->S->broken) cdl__stream_restart(L, L->cfg.batch_size == old_B);
    cdl__unlock(L);
    return rc;
}

/* Queries ("any thread") read what workers and coordl_set write under the
 * stream's lock, so they take it too. */
CDL_PRIVATE void cdl__get_stats(const coordl *L, coordl_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!L) return;
    coordl *M = (coordl *)L; /* the mutex is the only thing touched */
    cdl__lock(M);
    *out = L->stats.st;
    out->stall_ns += atomic_load(&M->consumer.stall_tail_ns); /* the consumer's last call, not yet moved in */
    out->group_members = (uint32_t)__builtin_popcount(atomic_load(&M->S->live_mask));
    cdl__unlock(M);
    if (cdl__cache_minio(L)) {
        out->cache_bytes_used = atomic_load(&M->S->cache_used);
        out->cache_items = atomic_load(&M->S->cache_items);
        out->cache_item_bytes = atomic_load(&M->S->cache_src_bytes);
        out->jpeg_rewritten_items = atomic_load(&M->S->cache_rst_items);
    } else if (L->cache.lru) {
        pthread_mutex_lock(&L->cache.lru->mu);
        out->cache_bytes_used = out->cache_item_bytes = L->cache.lru->bytes_used;
        out->cache_items = L->cache.lru->items;
        pthread_mutex_unlock(&L->cache.lru->mu);
    }
    out->items_prepared = out->items;
    out->boxes_dropped = L->index.boxes.dropped; /* read-only after open */
    out->bad_labels = L->index.boxes.bad_items;
    out->sampler_bytes = cdl__sampler_bytes(L); /* fixed at open */
    if (L->index.lazy) { /* a lazy index's: once every shard is counted (the first epoch read) */
        uint64_t items, bytes, counted;
        int exact;
        if (cdl__lazy_census(L, 0, &items, &bytes, &counted, &exact) == COORDL_OK && exact) out->dataset_bytes = bytes;
    }
    if (L->pool.ra) {
        pthread_mutex_lock(&L->pool.ra->mu);
        out->readahead_reads = L->pool.ra->reads;
        out->readahead_read_ns = L->pool.ra->read_ns;
        out->readahead_skips = L->pool.ra->skips;
        out->readahead_io_threads = (uint32_t)L->pool.ra->nthreads;
        out->readahead_max_in_flight = L->pool.ra->max_reading;
        if (L->pool.ra->max_user_reads > out->readahead_max_in_flight) /* cfg.io_async */
            out->readahead_max_in_flight = L->pool.ra->max_user_reads;
        out->readahead_uring = L->pool.ra->uring != NULL;
        out->readahead_late_reads = L->pool.ra->user_timeouts > UINT32_MAX ? UINT32_MAX
                                                                            : (uint32_t)L->pool.ra->user_timeouts;
        cdl__uring_counters uc;
        cdl__uring_counters_get(L->pool.ra->uring, &uc);
        out->readahead_ring_reads = uc.reads;
        if (uc.max_in_flight > out->readahead_max_in_flight) out->readahead_max_in_flight = uc.max_in_flight;
        pthread_mutex_unlock(&L->pool.ra->mu);
    }
    cdl__remote_counters rc;
    cdl__remote_counters_get(L, &rc);
    out->remote_requests = rc.requests;
    out->remote_retries = rc.retries;
    out->remote_bytes = rc.bytes;
    out->remote_max_in_flight = rc.max_in_flight;
    if (out->stall_ns + out->compute_ns) out->stall_fraction = (double)out->stall_ns / (double)(out->stall_ns + out->compute_ns);
    if (out->read_storage_ns) out->storage_mb_per_s = out->storage_bytes / 1e6 / (out->read_storage_ns / 1e9);
    if (out->items) {
        out->bytes_per_item = (double)(out->cache_hit_bytes + out->storage_bytes) / (double)out->items;
        out->prep_us_per_item = (out->read_ns + out->decode_ns + out->augment_ns) / 1e3 / (double)out->items;
    }
}

CDL_PRIVATE coordl_status cdl__get_epoch_stats(const coordl *L, uint64_t epoch, coordl_epoch_stats *out) {
    if (!L || !out) return COORDL_ERR_INVALID;
    coordl *M = (coordl *)L;
    coordl_status rc = COORDL_ERR_INVALID;
    cdl__lock(M);
    const cdl__epoch_counters *e = &L->stats.epochs[epoch % CDL_EPOCH_STATS_KEPT];
    if (e->used && e->epoch == epoch) {
        *out = e->s;
        rc = COORDL_OK;
    }
    cdl__unlock(M);
    if (rc == COORDL_OK && out->stall_ns + out->compute_ns)
        out->stall_fraction = (double)out->stall_ns / (double)(out->stall_ns + out->compute_ns);
    return rc;
}

/* The settings L runs with: the config as open resolved it, and as
 * coordl_set changed it since (under the lock, like the stats). */
CDL_PRIVATE void cdl__get_config(const coordl *L, coordl_config *out) {
    coordl *M = (coordl *)L; /* the mutex is the only thing touched */
    cdl__lock(M);
    *out = L->cfg;
    cdl__unlock(M);
    out->threads = L->pool.nworkers;
    out->prefetch_batches = L->ring.nslots;
    /* the placement chosen, in the terms of the inputs: the PUs the workers
     * run on (reserve_cores already left out) and the memory's node (-1:
     * several, interleaved); the pci_bus_id it came from is resolved */
    out->cpuset = L->stats.st.placement_cpus;
    out->numa_node = L->stats.st.placement_node;
    out->pci_bus_id = NULL;
}

uint64_t coordl_num_items(const coordl *L) { return L ? cdl__sampler_num_items(L) : 0; }

uint64_t coordl_batches_per_epoch(const coordl *L) {
    if (!L) return 0;
    coordl *M = (coordl *)L;
    cdl__lock(M);
    const uint64_t bpe = L->sampler.bpe; /* coordl_set changes it */
    cdl__unlock(M);
    return bpe;
}

uint32_t coordl_num_classes(const coordl *L) { return L ? L->index.num_classes : 0; }

/* Whether id is an item of L (a lazy index's: of a shard counted yet). */
static int cdl__id_valid(const coordl *L, uint64_t id) {
    return L->index.lazy ? cdl__lazy_id_known(L, id) : id < L->index.num_items;
}

const char *coordl_item_path(const coordl *L, uint64_t id) {
    if (!L || !cdl__id_valid(L, id)) return NULL;
    return cdl__item_path(L, id);
}

int32_t coordl_item_label(const coordl *L, uint64_t id) {
    if (!L || !cdl__id_valid(L, id)) return -1;
    return cdl__item_label(L, id);
}

/* coordl_sample_transform's item bytes: the cache's, where they are cached
 * (an item deleted from storage since still answers), else storage's. A
 * MinIO hit is read in place through the API's reader record, held (with
 * L->api_reader.mu) until cdl__transform_done; nothing is admitted (a
 * diagnostic call must not change what the cache holds). */
static coordl_status cdl__transform_bytes(cdl__worker *W, uint64_t id, cdl__bytes *in) {
    coordl *L = W->L;
    if (cdl__cache_minio(L)) {
        uint32_t len;
        pthread_mutex_lock(&L->api_reader.mu);
        _Atomic uint32_t *reader = cdl__cache_reader(L, CDL_READER_API);
        const cdl__u8 *p = cdl__cache_acquire_minio(L, reader, id, &len, NULL, NULL);
        if (p) {
            W->reader = reader;
            W->held = id + 1;
            in->p = p;
            in->len = len;
            return COORDL_OK;
        }
        pthread_mutex_unlock(&L->api_reader.mu);
    } else if (L->cache.lru) {
        uint32_t len;
        const size_t need = cdl__item_bytes(L, id) + 16;
        if (cdl__reserve(L, (void **)&W->readbuf, &W->readcap, need) &&
            cdl__cache_lookup_lru(L, id, W->readbuf, W->readcap, &len)) {
            in->p = W->readbuf;
            in->len = len;
            return COORDL_OK;
        }
    }
    return cdl__read_file(W, id, in);
}

static void cdl__transform_done(cdl__worker *W) {
    if (W->held) {
        cdl__cache_release_minio(W->reader);
        pthread_mutex_unlock(&W->L->api_reader.mu);
        W->held = 0;
    }
    cdl__free(W->L, W->readbuf);
}

/* The transform of item id in epoch from the item's header bytes in. */
static coordl_status cdl__transform_of(cdl__worker *W, uint64_t epoch, uint64_t id, const cdl__bytes *in,
                                       coordl_transform *out) {
    coordl *L = W->L;
    if (L->cfg.pipeline == COORDL_PIPE_AUDIO) {
        /* audio: the crop window in (resampled) samples, from the header */
        cdl__wav wav;
        uint64_t n = 0;
        coordl_status rc = cdl__wav_open(W, cdl__item_name(L, id, W->item_name, sizeof W->item_name), in, &wav, &n);
        if (rc != COORDL_OK) return rc;
        out->image_w = (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n);
        out->image_h = 1;
        out->x = (double)cdl__audio_offset(L, epoch, id, n);
        out->w = L->cfg.audio_samples;
        out->h = 1;
        return COORDL_OK;
    }
    if (L->cfg.pipeline == COORDL_PIPE_TOKENS) {
        out->image_w = L->cfg.seq_len + 1;
        out->image_h = 1;
        out->w = L->cfg.seq_len + 1;
        out->h = 1;
        return COORDL_OK;
    }
    int iw = 0, ih = 0;
    coordl_status rc = cdl__image_size(W, cdl__item_name(L, id, W->item_name, sizeof W->item_name), in, &iw, &ih);
    if (rc != COORDL_OK) return rc;
    cdl__geom g;
    cdl__lock(L); /* the plan reads the output size coordl_set writes */
    cdl__plan(L, L->cfg.out_w, L->cfg.out_h, epoch, id, iw, ih, &g);
    cdl__unlock(L);
    out->image_w = (uint32_t)iw;
    out->image_h = (uint32_t)ih;
    out->x = g.x0; out->y = g.y0; out->w = g.sw; out->h = g.sh;
    if (g.darknet) { /* the window's footprint, centred where the row's centre reads */
        const double cx = g.out_w / 2.0, cy = g.out_h / 2.0;
        const double fw = g.out_w * sqrt(g.m[0] * g.m[0] + g.m[3] * g.m[3]);
        const double fh = g.out_h * sqrt(g.m[1] * g.m[1] + g.m[4] * g.m[4]);
        out->x = g.m[0] * cx + g.m[1] * cy + g.m[2] - fw / 2.0;
        out->y = g.m[3] * cx + g.m[4] * cy + g.m[5] - fh / 2.0;
        out->w = fw;
        out->h = fh;
    }
    out->flip = g.flip;
    out->angle = g.angle * 180.0 / 3.14159265358979;
    out->aspect = g.daspect;
    out->saturation = g.dsat;
    out->exposure = g.dexp;
    out->hue = g.dhue;
    return COORDL_OK;
}

/* Any thread: the item is read through the cache like a worker's (the
 * API's own reader record), and a failure's detail goes to L->errmsg
 * under the stream's lock (the consumer's calls write it under that lock). */
CDL_PRIVATE coordl_status cdl__sample_transform(coordl *L, uint64_t epoch, uint64_t id, coordl_transform *out) {
    if (!L) return COORDL_ERR_INVALID;
    if (!out || !cdl__id_valid(L, id)) {
        cdl__lock(L);
        if (!out) snprintf(L->errmsg, sizeof L->errmsg, "coordl_sample_transform: out must not be NULL");
        else snprintf(L->errmsg, sizeof L->errmsg, "coordl_sample_transform: item %llu is not below num_items "
                      "(%llu)", (unsigned long long)id, (unsigned long long)L->index.num_items);
        cdl__unlock(L);
        return COORDL_ERR_INVALID;
    }
    memset(out, 0, sizeof *out);
    /* A throwaway worker: this is a diagnostic call, not the hot path. */
    cdl__worker W;
    memset(&W, 0, sizeof W);
    W.L = L;
    cdl__bytes in = {NULL, 0};
    coordl_status rc = cdl__transform_bytes(&W, id, &in);
    if (rc == COORDL_OK) rc = cdl__transform_of(&W, epoch, id, &in, out);
    cdl__transform_done(&W);
    if (rc != COORDL_OK) {
        if (!W.err[0]) snprintf(W.err, sizeof W.err, "%.400s: %s", cdl__item_name(L, id, W.item_name, sizeof W.item_name),
                                      coordl_strerror(rc));
        cdl__lock(L);
        snprintf(L->errmsg, sizeof L->errmsg, "coordl_sample_transform: %.480s", W.err);
        cdl__unlock(L);
        memset(out, 0, sizeof *out);
    }
    return rc;
}


const char *coordl_errmsg(const coordl *L) { return L ? L->errmsg : cdl__open_errmsg; }

const char *coordl_strerror(coordl_status s) {
    switch (s) {
#define CDL_STATUS_CASE(name, value, text) case COORDL_##name: return text;
        COORDL_STATUS_MAP(CDL_STATUS_CASE)
#undef CDL_STATUS_CASE
    default: return "unknown status";
    }
}

void coordl_close(coordl *L) {
    if (!L) return;
    if (L->S) cdl__pool_stop(L);
#ifdef COORDL_MPI
    cdl__peer_close(L);
#endif
    cdl__remote_destroy(L); /* after the workers and the read-ahead: no reader is left */
    cdl__cache_destroy(L);
    cdl__ring_free(L); /* before the group is left: it knows which arrays are shared */
    if (L->member.shm_base) {
        cdl__group_leave(L);
    } else if (L->S) {
        pthread_mutex_destroy(&L->S->mu);
        pthread_cond_destroy(&L->S->work_cv.cv);
        pthread_cond_destroy(&L->S->ready_cv.cv);
        pthread_cond_destroy(&L->S->idle_cv.cv);
        cdl__free(L, L->S);
    }
    cdl__member_thread_stop(L); /* a group whose open failed before it was left */
    cdl__free(L, L->index.items);
    cdl__free(L, L->index.tar_items);
    cdl__free(L, L->index.tar_txt);
    cdl__free(L, L->index.boxes.box);
    cdl__free(L, L->index.boxes.first);
    cdl__free(L, L->index.boxes.bad);
    cdl__free(L, L->index.tar_shards);
    cdl__ix_release(L);
    cdl__lazy_free(L);
    cdl__llmc_free(L);
    cdl__window_free(L);
    cdl__free(L, L->index.shards);
    cdl__free(L, L->index.strings);
    cdl__free(L, L->conf.source_copy);
    cdl__free(L, L->conf.group_copy);
    cdl__free(L, L->conf.topology_copy);
    cdl__placement_free(L, &L->place);
    pthread_mutex_destroy(&L->api_reader.mu);
    coordl_allocator a = L->alloc;
    a.free_fn(a.user, L);
}

int coordl_libversion_number(void) { return COORDL_VERSION_NUMBER; }

const coordl_io *coordl_io_posix(void) { return &cdl__posix_io; }

/* ---- src/analyzer.c ---------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * analyzer.c - DS-Analyzer.
 *
 * The differential protocol of the paper, on the public API: the same
 * step over a batch held in memory (no stall), over a fully cached
 * dataset (prep stall only), and cold (fetch and prep stall); then a
 * what-if model fitted on those rates. Uses only handles it opens.
 *
 * Owns:  nothing per handle: the stats JSON, and the differential protocol,
 *        which opens handles of its own
 * Lock:  none beyond the handles it opens
 * Calls: status, lock, io, index, stream (lower layers only:
 *        src/modules.txt; tools/check-layers.py checks this line).
 */

/* snprintf into a running buffer that keeps counting past its end. */
typedef struct cdl__json {
    char *buf;
    size_t cap, len;
} cdl__json;

static void cdl__jsonf(cdl__json *j, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *at = j->len < j->cap ? j->buf + j->len : NULL;
    size_t room = j->len < j->cap ? j->cap - j->len : 0;
    int n = vsnprintf(at, room, fmt, ap);
    va_end(ap);
    if (n > 0) j->len += (size_t)n;
}

/* JSON has no inf or nan: write null for them. */
static void cdl__json_num(cdl__json *j, const char *key, double v, int comma) {
    if (isfinite(v)) cdl__jsonf(j, "\"%s\":%.6g%s", key, v, comma ? "," : "");
    else cdl__jsonf(j, "\"%s\":null%s", key, comma ? "," : "");
}

static size_t cdl__json_finish(cdl__json *j) {
    if (j->cap) j->buf[j->len < j->cap ? j->len : j->cap - 1] = '\0';
    return j->len;
}

size_t coordl_stats_json(const coordl *L, char *buf, size_t cap) {
    cdl__json j = {buf, buf ? cap : 0, 0};
    coordl_stats s;
    coordl_get_stats(L, &s);
    /* the kept epochs, copied under the lock the workers write them under */
    cdl__epoch_counters epochs[CDL_EPOCH_STATS_KEPT];
    memset(epochs, 0, sizeof epochs);
    if (L) {
        coordl *M = (coordl *)L;
        cdl__lock(M);
        memcpy(epochs, L->stats.epochs, sizeof epochs);
        cdl__unlock(M);
    }
    cdl__jsonf(&j, "{");
#define CDL_JSON_STAT(name, row, in_stats, epoch) \
    CDL_IF_##in_stats(cdl__jsonf(&j, "\"" #name "\":%llu,", (unsigned long long)s.name);)
    CDL_COUNTERS(CDL_JSON_STAT)
#undef CDL_JSON_STAT
    cdl__jsonf(&j, "\"placement_cpus\":\"%s\",\"reserved_cpus\":\"%s\",\"placement_node\":%d,"
               "\"placement_nodes\":%u,\"memory_bound\":%d,", s.placement_cpus, s.reserved_cpus,
               s.placement_node, s.placement_nodes, s.memory_bound);
    cdl__json_num(&j, "storage_mb_per_s", s.storage_mb_per_s, 1);
    cdl__json_num(&j, "bytes_per_item", s.bytes_per_item, 1);
    cdl__json_num(&j, "prep_us_per_item", s.prep_us_per_item, 1);
    cdl__json_num(&j, "stall_fraction", s.stall_fraction, 1);
    cdl__jsonf(&j, "\"boxes_dropped\":%llu,\"bad_labels\":%llu,", (unsigned long long)s.boxes_dropped,
               (unsigned long long)s.bad_labels);
    /* the order in force (docs/shuffle.md) and what its tables hold */
    cdl__jsonf(&j, "\"shuffle\":%d,\"shuffle_window_shards\":%u,\"sampler_bytes\":%llu,", L ? L->cfg.shuffle : 0,
               L && L->cfg.shuffle == COORDL_SHUFFLE_SHARD_WINDOW ? L->cfg.shuffle_window_shards : 0u,
               (unsigned long long)s.sampler_bytes);
    cdl__jsonf(&j, "\"epochs\":[");
    /* oldest first */
    uint64_t newest = 0;
    for (int k = 0; k < CDL_EPOCH_STATS_KEPT; k++)
        if (epochs[k].used && epochs[k].epoch > newest) newest = epochs[k].epoch;
    const uint64_t from = newest >= CDL_EPOCH_STATS_KEPT ? newest - CDL_EPOCH_STATS_KEPT + 1 : 0;
    int first = 1;
    for (uint64_t e = from; e <= newest; e++) {
        const cdl__epoch_counters *ec = &epochs[e % CDL_EPOCH_STATS_KEPT];
        if (!ec->used || ec->epoch != e) continue;
        const coordl_epoch_stats *es = &ec->s;
        cdl__jsonf(&j, "%s{\"epoch\":%llu", first ? "" : ",", (unsigned long long)es->epoch);
#define CDL_JSON_EPOCH(name, row, in_stats, epoch) \
    CDL_IF_##epoch(cdl__jsonf(&j, ",\"" #name "\":%llu", (unsigned long long)es->name);)
        CDL_COUNTERS(CDL_JSON_EPOCH)
#undef CDL_JSON_EPOCH
        const uint64_t spent = es->stall_ns + es->compute_ns;
        cdl__jsonf(&j, ",");
        cdl__json_num(&j, "stall_fraction", spent ? (double)es->stall_ns / (double)spent : 0.0, 0);
        cdl__jsonf(&j, "}");
        first = 0;
    }
    cdl__jsonf(&j, "]}");
    return cdl__json_finish(&j);
}

/* coordl_analyze_opts_default: the defaults, spelled out (0 in a field
 * still means its default, so a memset struct keeps working). */
#define CDL_ANALYZE_MAX_REPEAT 9
#define CDL_ANALYZE_CENSUS_SHARDS 64 /* a lazily indexed set of more is sampled (coordl_report) */
CDL_PRIVATE void cdl__analyze_opts_default(coordl_analyze_opts *o) {
    memset(o, 0, sizeof *o);
    o->batches = 50;
    o->synthetic_step_ms = 10.0;
    o->repeat = 1;
}

#ifndef COORDL_NO_ANALYZER
/* Evicts the dataset's files from the page cache, so the next read comes
 * from storage (posix_fadvise needs no privilege, unlike drop_caches). */
static void cdl__drop_page_cache(const coordl *L) {
    if (L->io != &cdl__posix_io) return; /* a custom reader's caches are its own */
    const size_t n = L->index.shards ? L->index.nshards : L->index.tar_shards ? L->index.ntar_shards : (size_t)L->index.num_items;
    for (size_t i = 0; i < n; i++) {
        const char *path = L->index.shards ? L->index.strings + L->index.shards[i].path_off
                         : L->index.tar_shards ? L->index.strings + L->index.tar_shards[i] : cdl__item_path(L, i);
        const char *why; /* a file that cannot be opened has nothing cached */
        void *f;
        uint64_t size;
        if (cdl__posix_open_why(path, &f, &size, &why) == 0) {
            posix_fadvise(cdl__posix_fd(f), 0, 0, POSIX_FADV_DONTNEED);
            cdl__posix_close(NULL, f);
        }
    }
}

typedef struct cdl__stepper {
    coordl_step_fn fn;
    void *user;
    double sleep_ms;
    uint64_t cpu_ns; /* the calling thread's CPU time inside steps */
} cdl__stepper;

static int cdl__step(cdl__stepper *st, const coordl_batch *b) {
    uint64_t c0 = cdl__thread_cpu_ns();
    int stop = 0;
    if (st->fn) {
        stop = st->fn(st->user, b);
    } else {
        struct timespec ts;
        double s = st->sleep_ms / 1e3;
        ts.tv_sec = (time_t)s;
        ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    }
    st->cpu_ns += cdl__thread_cpu_ns() - c0;
    return stop;
}

static void cdl__progress(const coordl_analyze_opts *o, const char *fmt, ...) {
    if (!o->progress) return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    o->progress(o->progress_user, line);
}

/* Times `batches` batches through the step on an open loader; the clock
 * starts at open (the caller passes t_open), as a trainer's would. */
static coordl_status cdl__timed_run(coordl *L, cdl__stepper *st, uint64_t batches, uint64_t t_open,
                                    coordl_run_report *out) {
    coordl_stats s0, s1;
    coordl_get_stats(L, &s0);
    uint64_t done = 0, images = 0;
    coordl_status rc = COORDL_OK;
    while (done < batches) {
        coordl_batch b;
        rc = coordl_next(L, &b);
        if (rc == COORDL_END_OF_EPOCH) continue;
        if (rc != COORDL_OK) break;
        int stop = cdl__step(st, &b);
        images += b.n;
        done++;
        coordl_release(L, &b);
        if (stop) break;
    }
    double secs = (cdl__now_ns() - t_open) / 1e9;
    coordl_get_stats(L, &s1);
    out->seconds = secs;
    out->images = images;
    out->images_per_s = secs > 0 ? images / secs : 0.0;
    out->stall_fraction = secs > 0 ? (s1.stall_ns - s0.stall_ns) / 1e9 / secs : 0.0;
    if (out->stall_fraction > 1.0) out->stall_fraction = 1.0;
    return rc == COORDL_END_OF_EPOCH ? COORDL_OK : rc;
}

/* The analyzer has no handle between its runs: it allocates through the
 * config's hooks directly (the defaults when none are set). */
static coordl_allocator cdl__analyze_allocator(const coordl_config *c) {
    coordl_allocator a = c->allocator;
    if (!a.malloc_fn || !a.realloc_fn || !a.free_fn) {
        a.malloc_fn = cdl__default_malloc;
        a.realloc_fn = cdl__default_realloc;
        a.free_fn = cdl__default_free;
    }
    return a;
}
static void *cdl__amalloc(const coordl_allocator *a, size_t n) { return a->malloc_fn(a->user, n ? n : 1); }
static void cdl__afree(const coordl_allocator *a, void *p) {
    if (p) a->free_fn(a->user, p);
}

/* The report's whatif array carries, in front of it, the allocator that
 * coordl_report_free must return it to. */
typedef union cdl__whatif_head {
    coordl_allocator alloc;
    max_align_t align_;
} cdl__whatif_head;

static double cdl__memcpy_mb_per_s(const coordl_allocator *al) {
    const size_t n = 32u << 20;
    char *a = cdl__amalloc(al, n), *b = cdl__amalloc(al, n);
    if (!a || !b) { cdl__afree(al, a); cdl__afree(al, b); return 0.0; }
    memset(a, 1, n);
    memset(b, 2, n); /* first touch outside the timing */
    uint64_t t0 = cdl__now_ns();
    for (int i = 0; i < 4; i++) memcpy(b, a, n);
    double secs = (cdl__now_ns() - t0) / 1e9;
    volatile char sink = b[n - 1];
    (void)sink;
    cdl__afree(al, a);
    cdl__afree(al, b);
    return secs > 0 ? 4.0 * n / 1e6 / secs : 0.0;
}

/* I/O threads a read-ahead of depth d runs (the default, as at open). */
CDL_PRIVATE uint32_t cdl__ra_threads_for(uint32_t depth) { return depth; }

/* The model (see coordl.h): the lowest of what the trainer ingests, the
 * workers' CPU, the reads (waited for by the workers, or kept in flight
 * by the read-ahead: depth and I/O threads), the aggregate storage
 * bandwidth and the cache's memory bandwidth. */
CDL_PRIVATE coordl_whatif cdl__report_predict_ra(const coordl_report *r, double f, int threads, double storage_mb_per_s,
                                            uint32_t depth, uint32_t io_threads) {
    coordl_whatif w;
    memset(&w, 0, sizeof w);
    f = f < 0 ? 0 : f > 1 ? 1 : f;
    if (threads < 1) threads = 1;
    w.cache_fraction = f;
    w.threads = threads;
    const double item = r->mean_item_bytes > 0 ? r->mean_item_bytes : 1.0;
    const double per_core = r->prep_images_per_s_per_core;
    /* one read's time: measured, or (a report without it) from the
     * reader's bandwidth */
    double read_s = r->read_latency_ms > 0 ? r->read_latency_ms / 1e3
                  : r->reader_mb_per_s > 0 ? item / (r->reader_mb_per_s * 1e6) : 0.0;
    const double ra_reads = depth ? (double)(depth < io_threads ? depth : io_threads) : 0.0;
    const double reads_in_flight = ra_reads + threads; /* the workers read what it did not */
    /* the aggregate bandwidth: asked for, as given; else one reader's times
     * the reads that can be in flight */
    double agg = storage_mb_per_s;
    if (!(agg > 0)) {
        const double reader = r->reader_mb_per_s > 0 ? r->reader_mb_per_s : read_s > 0 ? item / read_s / 1e6 : 0.0;
        agg = reader * reads_in_flight;
    }
    w.storage_mb_per_s = agg;
    /* CPU for prep: the worker threads, up to the cores the trainer's own
     * step leaves free (a CPU-bound step holds one core; a GPU-like one
     * that sleeps holds none) */
    double cores = r->cores_for_prep;
    double cpu = per_core * (threads < cores ? threads : cores);
    /* The reads: c = reads the read-ahead keeps in flight (0: off) deliver
     * c / read_s items/s; the workers read the rest themselves, waiting a
     * read each. If the read-ahead alone keeps up, the workers only
     * prepare (the CPU bound below); else the workers' time goes to
     * preparing every item and reading what the read-ahead did not:
     * threads = R / prep + ((1 - f) R - c / read_s) read_s, so
     * R = (threads + c) / (1 / prep + (1 - f) read_s). */
    const double c = ra_reads;
    const double per_item_s = (per_core > 0 ? 1.0 / per_core : 0.0) + (1.0 - f) * read_s;
    double reads_limit = per_item_s > 0 ? (threads + c) / per_item_s : INFINITY;
    if (c > 0 && f < 1.0 && read_s > 0 && c / ((1.0 - f) * read_s) > reads_limit)
        reads_limit = c / ((1.0 - f) * read_s);
    double storage = f < 1.0 && agg > 0 ? agg * 1e6 / ((1.0 - f) * item) : INFINITY;
    double memory = f > 0.0 && r->memory_mb_per_s > 0 ? r->memory_mb_per_s * 1e6 / (f * item) : INFINITY;
    double p = r->ingest_images_per_s;
    if (cpu < p) p = cpu;
    if (reads_limit < p) p = reads_limit;
    if (storage < p) p = storage;
    if (memory < p) p = memory;
    w.predicted_images_per_s = p;
    w.predicted_stall_fraction = r->ingest_images_per_s > 0 ? 1.0 - p / r->ingest_images_per_s : 0.0;
    if (w.predicted_stall_fraction < 0) w.predicted_stall_fraction = 0;
    return w;
}

/* At the depth and I/O threads the measured runs used. */
CDL_PRIVATE coordl_whatif cdl__report_predict(const coordl_report *r, double f, int threads, double storage_mb_per_s) {
    return cdl__report_predict_ra(r, f, threads, storage_mb_per_s, r->readahead_items,
                                  r->readahead_threads ? r->readahead_threads : cdl__ra_threads_for(r->readahead_items));
}

/* (1) synthetic: one real batch, copied out of a loader of its own, then
 * stepped over o->batches times (the trainer with no data stall). Also
 * fills the dataset's figures and *usable (cores the placement offers). */
static coordl_status cdl__analyze_synthetic(const coordl_config *cfg, const coordl_allocator *al, cdl__stepper *st,
                                            const coordl_analyze_opts *o, coordl_report *r, int *usable) {
    coordl_config c = *cfg;
    coordl *L = NULL;
    coordl_status rc;
    c.cache_bytes = 0;
    cdl__progress(o, "synthetic: preparing one batch");
    if ((rc = coordl_open(&c, &L)) != COORDL_OK) return rc;
    coordl_batch b0;
    if ((rc = coordl_next(L, &b0)) != COORDL_OK) {
        coordl_close(L);
        return cdl__open_fail(rc, "coordl_analyze: the first batch failed");
    }
    coordl_batch fake = b0;
    size_t tbytes = b0.targets ? (size_t)b0.n * L->geom.target_row_bytes : 0;
    void *data = cdl__amalloc(al, b0.data_bytes), *targets = cdl__amalloc(al, tbytes);
    int32_t *labels = cdl__amalloc(al, b0.n * sizeof(int32_t));
    uint64_t *ids = cdl__amalloc(al, b0.n * sizeof(uint64_t));
    if (!data || !labels || !ids || !targets) {
        cdl__afree(al, data); cdl__afree(al, labels); cdl__afree(al, ids); cdl__afree(al, targets);
        coordl_close(L);
        return cdl__open_fail(COORDL_ERR_NOMEM, "coordl_analyze: out of memory");
    }
    memcpy(data, b0.data, b0.data_bytes);
    memcpy(labels, b0.labels, b0.n * sizeof(int32_t));
    memcpy(ids, b0.ids, b0.n * sizeof(uint64_t));
    if (tbytes) memcpy(targets, b0.targets, tbytes);
    fake.data = data; fake.labels = labels; fake.ids = ids; fake.targets = b0.targets ? targets : NULL;
    fake.slot_ = 0;
    coordl_release(L, &b0);
    r->dataset_items = L->index.num_items;
    r->dataset_bytes = L->index.dataset_bytes;
    r->dataset_shards_sampled = 0;
    if (L->index.lazy) { /* no count yet: the warm run's cache and the what-if need one */
        uint64_t counted;
        int exact;
        rc = cdl__lazy_census(L, CDL_ANALYZE_CENSUS_SHARDS, &r->dataset_items, &r->dataset_bytes, &counted, &exact);
        if (rc != COORDL_OK) {
            cdl__afree(al, data); cdl__afree(al, labels); cdl__afree(al, ids); cdl__afree(al, targets);
            coordl_close(L);
            return rc;
        }
        r->dataset_shards_sampled = exact ? 0 : counted;
        if (r->dataset_shards_sampled)
            cdl__progress(o, "dataset: about %llu items, %.1f MB (extrapolated from %llu of %zu shards)",
                          (unsigned long long)r->dataset_items, (double)r->dataset_bytes / 1e6,
                          (unsigned long long)r->dataset_shards_sampled, L->index.ntar_shards);
    }
    r->mean_item_bytes = r->dataset_items ? (double)r->dataset_bytes / (double)r->dataset_items : 0.0;
    r->threads = L->pool.nworkers;
    *usable = L->place.ncores > 0 ? L->place.ncores + L->place.nreserved : 1;
    coordl_close(L);
    uint64_t t0 = cdl__now_ns(), images = 0;
    st->cpu_ns = 0;
    for (uint64_t i = 0; i < o->batches; i++) {
        images += fake.n;
        if (cdl__step(st, &fake)) break;
    }
    double secs = (cdl__now_ns() - t0) / 1e9;
    r->step_ms = o->batches ? secs * 1e3 / (double)o->batches : 0.0;
    r->synthetic.seconds = secs;
    r->synthetic.images = images;
    r->synthetic.images_per_s = secs > 0 ? images / secs : 0.0;
    r->synthetic.stall_fraction = 0.0;
    /* the step's own CPU use: a CPU-bound step holds a core */
    double busy = secs > 0 ? st->cpu_ns / 1e9 / secs : 0.0;
    r->cores_for_prep = *usable - busy;
    if (r->cores_for_prep < 0.5) r->cores_for_prep = 0.5;
    cdl__afree(al, data); cdl__afree(al, labels); cdl__afree(al, ids); cdl__afree(al, targets);
    cdl__progress(o, "synthetic: %.1f images/s (the trainer alone)", r->synthetic.images_per_s);
    return COORDL_OK;
}

/* (2) warm: every timed batch's items in the cache (a first pass fills
 * it, a seek goes back); measures the prep rate per core. */
static coordl_status cdl__analyze_warm(const coordl_config *cfg, cdl__stepper *st, const coordl_analyze_opts *o,
                                       coordl_report *r) {
    coordl_config c = *cfg;
    coordl *L = NULL;
    coordl_status rc;
    /* an extrapolated size may fall short of the timed batches' items */
    c.cache_bytes = r->dataset_bytes + (r->dataset_shards_sampled ? r->dataset_bytes / 4 : 0) + (1u << 20);
    cdl__progress(o, "warm: filling the cache");
    if ((rc = coordl_open(&c, &L)) != COORDL_OK) return rc;
    coordl_run_report fill;
    rc = cdl__timed_run(L, st, o->batches, cdl__now_ns(), &fill);
    if (rc == COORDL_OK) rc = coordl_seek(L, 0, 0);
    coordl_stats s0, s1;
    coordl_get_stats(L, &s0);
    uint64_t t0 = cdl__now_ns();
    if (rc == COORDL_OK) rc = cdl__timed_run(L, st, o->batches, t0, &r->warm);
    coordl_get_stats(L, &s1);
    uint64_t worker_ns = (s1.read_ns - s0.read_ns) + (s1.decode_ns - s0.decode_ns) + (s1.augment_ns - s0.augment_ns);
    uint64_t items = s1.items - s0.items;
    r->prep_images_per_s_per_core = worker_ns ? items / (worker_ns / 1e9) : 0.0;
    coordl_close(L);
    if (rc != COORDL_OK) return cdl__open_fail(rc, "coordl_analyze: warm run failed");
    cdl__progress(o, "warm: %.1f images/s, stall %.1f%%", r->warm.images_per_s, 100 * r->warm.stall_fraction);
    return COORDL_OK;
}

/* (3) cold: the page cache dropped for the dataset's files, no coordl
 * cache; measures one read's time and one reader's storage bandwidth,
 * with the configured read-ahead. */
static coordl_status cdl__analyze_cold(const coordl_config *cfg, cdl__stepper *st, const coordl_analyze_opts *o,
                                       coordl_report *r) {
    coordl_config c = *cfg;
    coordl *L = NULL;
    coordl_status rc;
    c.cache_bytes = 0;
    if ((rc = coordl_open(&c, &L)) != COORDL_OK) return rc;
    /* the workers started at open; pause them while the page cache is
     * dropped, so nothing they read stays cached */
    cdl__lock(L);
    cdl__stream_pause(L);
    cdl__unlock(L);
    cdl__progress(o, "cold: dropping the page cache for %llu items", (unsigned long long)L->index.num_items);
    cdl__drop_page_cache(L);
    cdl__lock(L);
    cdl__stream_restart(L, 0); /* nothing read before the drop is kept */
    cdl__unlock(L);
    coordl_stats s0, s1;
    coordl_get_stats(L, &s0);
    rc = cdl__timed_run(L, st, o->batches, cdl__now_ns(), &r->cold);
    coordl_get_stats(L, &s1);
    uint64_t sb = s1.storage_bytes - s0.storage_bytes, sns = s1.read_storage_ns - s0.read_storage_ns;
    const uint64_t reads = s1.storage_reads - s0.storage_reads;
    const uint64_t ra_reads = s1.readahead_reads - s0.readahead_reads, ra_ns = s1.readahead_read_ns - s0.readahead_read_ns;
    r->readahead_items = L->cfg.readahead_items;
    r->readahead_threads = L->cfg.readahead_threads;
    /* one read's time: the I/O threads' when they read (the workers'
     * wait for a read ahead is not a read's time), else the workers' */
    if (ra_reads) r->read_latency_ms = ra_ns / 1e6 / (double)ra_reads;
    else if (reads) r->read_latency_ms = sns / 1e6 / (double)reads;
    const double per_read = reads ? (double)sb / (double)reads : r->mean_item_bytes;
    r->reader_mb_per_s = r->read_latency_ms > 0 ? per_read / 1e6 / (r->read_latency_ms / 1e3) : 0.0;
    /* aggregate: every reader in flight at once (the workers, or the
     * read-ahead's reads) */
    const double in_flight = (r->readahead_items
        ? (r->readahead_items < r->readahead_threads ? r->readahead_items : r->readahead_threads) : 0) +
        (double)L->pool.nworkers;
    r->storage_mb_per_s = r->reader_mb_per_s * in_flight;
    coordl_close(L);
    if (rc != COORDL_OK) return cdl__open_fail(rc, "coordl_analyze: cold run failed");
    cdl__progress(o, "cold: %.1f images/s, stall %.1f%%, storage %.1f MB/s per reader, %.2f ms per read, "
                  "read-ahead %u", r->cold.images_per_s, 100 * r->cold.stall_fraction, r->reader_mb_per_s,
                  r->read_latency_ms, r->readahead_items);
    return COORDL_OK;
}

/* The paper's differential split, from the time per image of each run:
 * the slowdown that preparing (warm - synthetic) and fetching (cold -
 * warm) add, as shares of the cold run's time. A run faster than the one
 * it is compared with is noise, not a negative cost: the slowdown is 0
 * and marked within noise, so that no report reads it as a measured 0%. */
static void cdl__analyze_split(coordl_report *r) {
    const double ts = r->synthetic.images_per_s > 0 ? 1.0 / r->synthetic.images_per_s : 0.0;
    const double tw = r->warm.images_per_s > 0 ? 1.0 / r->warm.images_per_s : 0.0;
    const double tc = r->cold.images_per_s > 0 ? 1.0 / r->cold.images_per_s : 0.0;
    if (tc > 0) {
        double prep = tw > ts ? (tw - ts) / tc : 0.0, fetch = tc > tw ? (tc - tw) / tc : 0.0;
        if (prep > 1) prep = 1;
        if (prep + fetch > 1) fetch = 1 - prep;
        r->prep_slowdown_fraction = r->prep_stall_fraction = prep;
        r->fetch_slowdown_fraction = r->fetch_stall_fraction = fetch;
        r->prep_within_noise = tw > 0 && tw < ts;
        r->fetch_within_noise = tc < tw;
    }
    r->ingest_images_per_s = r->synthetic.images_per_s;
}

static void cdl__analyze_recommend(coordl_report *r, int skip_cold);

/* The what-if grid (cache fractions x thread counts) and the smallest
 * cache, then the fewest threads, whose predicted stall is under 3%. */
static coordl_status cdl__analyze_whatif(const coordl_allocator *al, const coordl_analyze_opts *o, int usable,
                                         coordl_report *r) {
    static const double default_fractions[] = {0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};
    const double *fr = o->whatif_cache_fractions ? o->whatif_cache_fractions : default_fractions;
    size_t nfr = o->whatif_cache_fractions ? o->n_whatif_cache_fractions : 11;
    int default_threads[64];
    size_t nth = o->n_whatif_threads;
    const int *th = o->whatif_threads;
    if (!th) {
        nth = 0;
        for (int t = 1; t <= 2 * usable && nth < 64; t++) default_threads[nth++] = t;
        th = default_threads;
    }
    if (nfr * nth > (SIZE_MAX - sizeof(cdl__whatif_head)) / sizeof *r->whatif)
        return cdl__open_fail(COORDL_ERR_INVALID, "coordl_analyze: too many what-if points");
    cdl__whatif_head *head = cdl__amalloc(al, sizeof *head + nfr * nth * sizeof *r->whatif);
    if (!head) return cdl__open_fail(COORDL_ERR_NOMEM, "coordl_analyze: out of memory for %zu what-if points; "
                                     "lower n_whatif_cache_fractions or n_whatif_threads", nfr * nth);
    head->alloc = *al;
    r->whatif = (coordl_whatif *)(void *)(head + 1);
    for (size_t t = 0; t < nth; t++)
        for (size_t k = 0; k < nfr; k++) {
            r->whatif[r->n_whatif].cache_fraction = fr[k];
            r->whatif[r->n_whatif++].threads = th[t];
        }
    cdl__analyze_recommend(r, o->skip_cold);
    return COORDL_OK;
}

/* The grid's predictions from the report's inputs, and the smallest
 * cache, then the fewest threads, predicted under 3% stall; the read-ahead
 * depth likewise (again after a median of several analyses). */
static void cdl__analyze_recommend(coordl_report *r, int skip_cold) {
    r->recommend_threads = -1;
    r->recommend_cache_fraction = -1;
    for (size_t i = 0; i < r->n_whatif; i++) {
        coordl_whatif w = cdl__report_predict(r, r->whatif[i].cache_fraction, r->whatif[i].threads, 0);
        r->whatif[i] = w;
        if (w.predicted_stall_fraction < 0.03 &&
            (r->recommend_threads < 0 || w.cache_fraction < r->recommend_cache_fraction ||
             (w.cache_fraction == r->recommend_cache_fraction && w.threads < r->recommend_threads))) {
            r->recommend_cache_fraction = w.cache_fraction;
            r->recommend_threads = w.threads;
        }
    }
    /* the read-ahead depth: the smallest whose rate (cold, the measured
     * worker threads) is within 3% of the deepest's */
    r->recommend_readahead_items = -1;
    if (!skip_cold) {
        const double best = cdl__report_predict_ra(r, 0.0, r->threads, 0, 4096, cdl__ra_threads_for(4096)).predicted_images_per_s;
        for (uint32_t d = 0; d <= 4096; d = d ? 2 * d : 1) {
            const double v = cdl__report_predict_ra(r, 0.0, r->threads, 0, d, cdl__ra_threads_for(d)).predicted_images_per_s;
            if (v >= 0.97 * best) {
                r->recommend_readahead_items = (int32_t)d;
                break;
            }
        }
    }
}

/* One analysis: synthetic, warm, cold, then the split and the what-if
 * model fitted on them. */
static coordl_status cdl__analyze_once(const coordl_config *cfg, const coordl_allocator *al, cdl__stepper *st,
                                       const coordl_analyze_opts *o, coordl_report *r) {
    memset(r, 0, sizeof *r);
    r->recommend_threads = -1;
    r->recommend_cache_fraction = -1;
    r->recommend_readahead_items = -1;
    int usable = 1;
    coordl_status rc = cdl__analyze_synthetic(cfg, al, st, o, r, &usable);
    if (rc == COORDL_OK) rc = cdl__analyze_warm(cfg, st, o, r);
    if (rc != COORDL_OK) return rc;
    r->memory_mb_per_s = cdl__memcpy_mb_per_s(al);
    if (o->skip_cold) r->cold = r->warm;
    else if ((rc = cdl__analyze_cold(cfg, st, o, r)) != COORDL_OK) return rc;
    cdl__analyze_split(r);
    return cdl__analyze_whatif(al, o, usable, r);
}

static int cdl__cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The median of one double field over n reports. */
static double cdl__median_field(const coordl_report *reps, size_t n, size_t off) {
    double x[CDL_ANALYZE_MAX_REPEAT];
    for (size_t k = 0; k < n; k++) memcpy(&x[k], (const char *)&reps[k] + off, sizeof x[k]);
    qsort(x, n, sizeof *x, cdl__cmp_double);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

/* The run (at offset off) of median images/s over n reports. */
static coordl_run_report cdl__median_run(const coordl_report *reps, size_t n, size_t off) {
    const coordl_run_report *p[CDL_ANALYZE_MAX_REPEAT];
    for (size_t k = 0; k < n; k++) p[k] = (const coordl_run_report *)(const void *)((const char *)&reps[k] + off);
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && p[k]->images_per_s < p[k - 1]->images_per_s; k--) {
            const coordl_run_report *t = p[k];
            p[k] = p[k - 1];
            p[k - 1] = t;
        }
    return *p[(n - 1) / 2];
}

/* The analyses' median into reps[0]: each run the one of median images/s,
 * each model input and slowdown the median (within noise when most
 * analyses found it so); the grid is predicted again from those inputs
 * and the recommendations chosen again by the same rule. */
static void cdl__analyze_median(coordl_report *reps, size_t n, int skip_cold) {
    coordl_report *r = &reps[0];
    if (n < 2) return;
#define CDL_MED(field) const double med_##field = cdl__median_field(reps, n, offsetof(coordl_report, field))
    CDL_MED(prep_slowdown_fraction); CDL_MED(fetch_slowdown_fraction); CDL_MED(ingest_images_per_s);
    CDL_MED(prep_images_per_s_per_core); CDL_MED(storage_mb_per_s); CDL_MED(memory_mb_per_s);
    CDL_MED(reader_mb_per_s); CDL_MED(cores_for_prep); CDL_MED(read_latency_ms); CDL_MED(step_ms);
#undef CDL_MED
    const coordl_run_report syn = cdl__median_run(reps, n, offsetof(coordl_report, synthetic));
    const coordl_run_report warm = cdl__median_run(reps, n, offsetof(coordl_report, warm));
    const coordl_run_report cold = cdl__median_run(reps, n, offsetof(coordl_report, cold));
    size_t prep_noise = 0, fetch_noise = 0;
    for (size_t k = 0; k < n; k++) {
        prep_noise += reps[k].prep_within_noise != 0;
        fetch_noise += reps[k].fetch_within_noise != 0;
    }
    r->synthetic = syn;
    r->warm = warm;
    r->cold = cold;
    r->prep_slowdown_fraction = r->prep_stall_fraction = med_prep_slowdown_fraction;
    r->fetch_slowdown_fraction = r->fetch_stall_fraction = med_fetch_slowdown_fraction;
    r->prep_within_noise = 2 * prep_noise > n;
    r->fetch_within_noise = 2 * fetch_noise > n;
    r->ingest_images_per_s = med_ingest_images_per_s;
    r->prep_images_per_s_per_core = med_prep_images_per_s_per_core;
    r->storage_mb_per_s = med_storage_mb_per_s;
    r->memory_mb_per_s = med_memory_mb_per_s;
    r->reader_mb_per_s = med_reader_mb_per_s;
    r->cores_for_prep = med_cores_for_prep;
    r->read_latency_ms = med_read_latency_ms;
    r->step_ms = med_step_ms;
    cdl__analyze_recommend(r, skip_cold);
}

/* Writes n bytes of text to path; 0, or an errno. */
static int cdl__write_text(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "w");
    if (!f) return errno ? errno : EIO;
    const int e = fwrite(text, 1, n, f) == n ? 0 : errno ? errno : EIO;
    return fclose(f) != 0 && e == 0 ? (errno ? errno : EIO) : e;
}

/* opts.json_path / opts.svg_path: the report as JSON and as the figure. */
static coordl_status cdl__analyze_files(const coordl_allocator *al, const coordl_analyze_opts *o,
                                        const coordl_report *r) {
    for (int k = 0; k < 2; k++) {
        const char *path = k == 0 ? o->json_path : o->svg_path;
        if (!path) continue;
        const size_t n = k == 0 ? cdl__report_json(r, NULL, 0) : cdl__report_svg(r, NULL, 0, NULL, 0);
        char *text = cdl__amalloc(al, n + 1);
        if (!text) return cdl__open_fail(COORDL_ERR_NOMEM, "coordl_analyze: out of memory for the report");
        if (k == 0) cdl__report_json(r, text, n + 1);
        else cdl__report_svg(r, NULL, 0, text, n + 1);
        const int e = cdl__write_text(path, text, n);
        cdl__afree(al, text);
        if (e) return cdl__open_fail(COORDL_ERR_IO, "coordl_analyze: %s %s: %s", k == 0 ? "json_path" : "svg_path",
                                     path, strerror(e));
    }
    return COORDL_OK;
}

/* The differential protocol, opts.repeat times (the median), then the
 * files asked for. */
CDL_PRIVATE coordl_status cdl__analyze(const coordl_config *cfg, coordl_step_fn step_fn, void *user,
                                  const coordl_analyze_opts *opts_in, coordl_report *r) {
    if (!cfg || !r) return cdl__open_fail(COORDL_ERR_INVALID, "coordl_analyze: cfg and report must not be NULL");
    memset(r, 0, sizeof *r);
    coordl_analyze_opts o;
    cdl__analyze_opts_default(&o);
    if (opts_in) o = *opts_in;
    if (o.batches == 0) o.batches = 50;
    if (!(o.synthetic_step_ms > 0)) o.synthetic_step_ms = 10.0;
    if (o.repeat == 0) o.repeat = 1;
    if (o.repeat > CDL_ANALYZE_MAX_REPEAT)
        return cdl__open_fail(COORDL_ERR_INVALID, "coordl_analyze: repeat %u is out of range (1..%d)", o.repeat,
                              CDL_ANALYZE_MAX_REPEAT);
    cdl__stepper st = {step_fn, user, o.synthetic_step_ms, 0};
    const coordl_allocator al = cdl__analyze_allocator(cfg);
    coordl_report reps[CDL_ANALYZE_MAX_REPEAT];
    coordl_status rc = COORDL_OK;
    uint32_t done = 0;
    for (; done < o.repeat && rc == COORDL_OK; done++) {
        if (o.repeat > 1) cdl__progress(&o, "analysis %u/%u", done + 1, o.repeat);
        rc = cdl__analyze_once(cfg, &al, &st, &o, &reps[done]);
    }
    if (rc == COORDL_OK) cdl__analyze_median(reps, done, o.skip_cold);
    for (uint32_t k = 1; k < done; k++) cdl__report_free(&reps[k]); /* the median keeps reps[0]'s grid */
    if (rc != COORDL_OK) {
        cdl__report_free(&reps[0]);
        return rc;
    }
    *r = reps[0];
    r->batches = o.batches;
    r->batch_size = cfg->batch_size;
    r->out_w = cfg->out_w;
    r->out_h = cfg->out_h;
    r->repeat = o.repeat;
    snprintf(r->source, sizeof r->source, "%s", cfg->source ? cfg->source : "");
    if (o.step_name) snprintf(r->step_name, sizeof r->step_name, "%s", o.step_name);
    else if (step_fn) snprintf(r->step_name, sizeof r->step_name, "step_fn");
    else snprintf(r->step_name, sizeof r->step_name, "sleep %g ms", o.synthetic_step_ms);
    return cdl__analyze_files(&al, &o, r);
}

CDL_PRIVATE size_t cdl__report_json(const coordl_report *r, char *buf, size_t cap) {
    cdl__json j = {buf, buf ? cap : 0, 0};
    const coordl_run_report *runs[3] = {&r->synthetic, &r->warm, &r->cold};
    static const char *names[3] = {"synthetic", "warm", "cold"};
    cdl__jsonf(&j, "{\"runs\":{");
    for (int i = 0; i < 3; i++) {
        cdl__jsonf(&j, "\"%s\":{", names[i]);
        cdl__json_num(&j, "images_per_s", runs[i]->images_per_s, 1);
        cdl__json_num(&j, "stall_fraction", runs[i]->stall_fraction, 1);
        cdl__json_num(&j, "seconds", runs[i]->seconds, 1);
        cdl__jsonf(&j, "\"images\":%llu}%s", (unsigned long long)runs[i]->images, i < 2 ? "," : "");
    }
    cdl__jsonf(&j, "},");
    /* "stall" is time waiting in coordl_next (the runs' stall_fraction);
     * the differential split is a slowdown, with its noise flag */
    cdl__json_num(&j, "prep_slowdown_fraction", r->prep_slowdown_fraction, 1);
    cdl__json_num(&j, "fetch_slowdown_fraction", r->fetch_slowdown_fraction, 1);
    cdl__jsonf(&j, "\"prep_within_noise\":%s,\"fetch_within_noise\":%s,", r->prep_within_noise ? "true" : "false",
               r->fetch_within_noise ? "true" : "false");
    cdl__jsonf(&j, "\"settings\":{\"source\":\"");
    for (const char *c = r->source; *c; c++) { /* a JSON string: quote, backslash and controls escaped */
        if (*c == '"' || *c == '\\') cdl__jsonf(&j, "\\%c", *c);
        else if ((unsigned char)*c < 0x20) cdl__jsonf(&j, "\\u%04x", (unsigned)(unsigned char)*c);
        else cdl__jsonf(&j, "%c", *c);
    }
    cdl__jsonf(&j, "\",\"batch_size\":%u,\"out_w\":%u,\"out_h\":%u,\"batches\":%llu,\"repeat\":%u,",
               r->batch_size, r->out_w, r->out_h, (unsigned long long)r->batches, r->repeat);
    cdl__json_num(&j, "step_ms", r->step_ms, 1);
    cdl__jsonf(&j, "\"step\":\"");
    for (const char *c = r->step_name; *c; c++) {
        if (*c == '"' || *c == '\\') cdl__jsonf(&j, "\\%c", *c);
        else if ((unsigned char)*c < 0x20) cdl__jsonf(&j, "\\u%04x", (unsigned)(unsigned char)*c);
        else cdl__jsonf(&j, "%c", *c);
    }
    cdl__jsonf(&j, "\"},");
    cdl__jsonf(&j, "\"model\":{");
    cdl__json_num(&j, "ingest_images_per_s", r->ingest_images_per_s, 1);
    cdl__json_num(&j, "prep_images_per_s_per_core", r->prep_images_per_s_per_core, 1);
    cdl__json_num(&j, "cores_for_prep", r->cores_for_prep, 1);
    cdl__json_num(&j, "storage_mb_per_s", r->storage_mb_per_s, 1);
    cdl__json_num(&j, "reader_mb_per_s", r->reader_mb_per_s, 1);
    cdl__json_num(&j, "memory_mb_per_s", r->memory_mb_per_s, 1);
    cdl__json_num(&j, "mean_item_bytes", r->mean_item_bytes, 1);
    cdl__json_num(&j, "read_latency_ms", r->read_latency_ms, 1);
    cdl__jsonf(&j, "\"readahead_items\":%u,\"readahead_threads\":%u,", r->readahead_items, r->readahead_threads);
    cdl__jsonf(&j, "\"dataset_items\":%llu,\"dataset_bytes\":%llu,\"dataset_shards_sampled\":%llu,\"threads\":%d},",
               (unsigned long long)r->dataset_items, (unsigned long long)r->dataset_bytes,
               (unsigned long long)r->dataset_shards_sampled, r->threads);
    cdl__jsonf(&j, "\"whatif\":[");
    for (size_t i = 0; i < r->n_whatif; i++) {
        const coordl_whatif *w = &r->whatif[i];
        cdl__jsonf(&j, "%s{", i ? "," : "");
        cdl__json_num(&j, "cache_fraction", w->cache_fraction, 1);
        cdl__jsonf(&j, "\"threads\":%d,", w->threads);
        cdl__json_num(&j, "storage_mb_per_s", w->storage_mb_per_s, 1);
        cdl__json_num(&j, "predicted_images_per_s", w->predicted_images_per_s, 1);
        cdl__json_num(&j, "predicted_stall_fraction", w->predicted_stall_fraction, 0);
        cdl__jsonf(&j, "}");
    }
    cdl__jsonf(&j, "],\"recommendation\":");
    if (r->recommend_threads > 0) {
        cdl__jsonf(&j, "{");
        cdl__json_num(&j, "cache_fraction", r->recommend_cache_fraction, 1);
        cdl__jsonf(&j, "\"threads\":%d}", r->recommend_threads);
    } else {
        cdl__jsonf(&j, "null");
    }
    cdl__jsonf(&j, ",\"recommend_readahead_items\":%d", r->recommend_readahead_items);
    cdl__jsonf(&j, "}");
    return cdl__json_finish(&j);
}

/* ---- the report as an SVG figure (coordl_report_svg) ------------------ */

static const char *const cdl__palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                      "#9467bd", "#8c564b", "#e377c2", "#17becf"};
#define CDL_NPAL (sizeof cdl__palette / sizeof *cdl__palette)
#define CDL_MAX_CURVES 8

#define CDL_C_COMPUTE "#4c78a8"
#define CDL_C_PREP "#f58518"
#define CDL_C_FETCH "#e45756"
#define CDL_INGEST_STYLE "stroke=\"#555\" stroke-width=\"1.5\" stroke-dasharray=\"2 3\""


/* s as XML character data: & < > " ' escaped, control characters and
 * bytes that are not valid UTF-8 replaced by '?', so the figure stays
 * valid XML whatever the source path holds. */
static void cdl__xml_text(cdl__json *svg, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        const unsigned c = *p;
        const int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = len > 0;
        for (int k = 1; ok && k < len; k++) ok = (p[k] & 0xC0) == 0x80;
        if (!ok) {
            cdl__jsonf(svg, "?");
            p++;
            continue;
        }
        if (len > 1) {
            cdl__jsonf(svg, "%.*s", len, (const char *)p);
            p += len;
            continue;
        }
        switch (c) {
        case '&': cdl__jsonf(svg, "&amp;"); break;
        case '<': cdl__jsonf(svg, "&lt;"); break;
        case '>': cdl__jsonf(svg, "&gt;"); break;
        case '"': cdl__jsonf(svg, "&quot;"); break;
        case '\'': cdl__jsonf(svg, "&apos;"); break;
        default: cdl__jsonf(svg, "%c", c < 0x20 && c != '\t' ? '?' : (char)c);
        }
        p++;
    }
}

static const char *cdl__thr_word(int t) { return t == 1 ? "thread" : "threads"; }

static double cdl__clamp01(double v) { return !(v > 0) ? 0 : v > 1 ? 1 : v; }

/* "12.3%", or "within noise" when the run compared was the faster one. */
static void cdl__slowdown_text(char *buf, size_t cap, double fraction, int within_noise) {
    if (within_noise) snprintf(buf, cap, "within noise");
    else snprintf(buf, cap, "%.1f%%", 100 * fraction);
}

static int cdl__cmp_int(const void *x, const void *y) {
    const int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* The thread counts the figure draws: those of the what-if grid and of the
 * runs, at most CDL_MAX_CURVES spread over the grid (keeping the runs'
 * count and 1, or 2 when the runs had 1). Returns how many. */
static size_t cdl__curve_threads(const coordl_report *r, int *tl) {
    int all[64 + 1];
    size_t n = 0;
    for (size_t i = 0; i <= r->n_whatif; i++) {
        const int t = i < r->n_whatif ? r->whatif[i].threads : r->threads;
        int seen = t <= 0;
        for (size_t k = 0; k < n && !seen; k++) seen = all[k] == t;
        if (!seen && n < sizeof all / sizeof *all) all[n++] = t;
    }
    qsort(all, n, sizeof *all, cdl__cmp_int);
    if (n <= CDL_MAX_CURVES) {
        memcpy(tl, all, n * sizeof *tl);
        return n;
    }
    const int must[2] = {r->threads > 0 ? r->threads : 1, r->threads > 1 ? 1 : 2};
    size_t nk = 0;
    for (size_t m = 0; m < 2; m++)
        if (nk == 0 || tl[0] != must[m]) tl[nk++] = must[m];
    for (size_t k = 0; nk < CDL_MAX_CURVES && k < CDL_MAX_CURVES; k++) {
        const int t = all[(k * (n - 1) + (CDL_MAX_CURVES - 1) / 2) / (CDL_MAX_CURVES - 1)];
        int seen = 0;
        for (size_t q = 0; q < nk; q++) seen |= tl[q] == t;
        if (!seen) tl[nk++] = t;
    }
    qsort(tl, nk, sizeof *tl, cdl__cmp_int);
    return nk;
}

/* A "nice" tick step (1, 2 or 5 x 10^k) for about `ticks` ticks up to max. */
static double cdl__nice_step(double max, int ticks)
{
    if (!(max > 0))
        return 1;
    double raw = max / ticks, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

static void cdl__fmt_tick(char *buf, size_t cap, double v, double stepv)
{
    if (stepv >= 1 || v == 0)
        snprintf(buf, cap, "%.0f", v);
    else if (stepv >= 0.1)
        snprintf(buf, cap, "%.1f", v);
    else
        snprintf(buf, cap, "%.2g", v);
}

static void cdl__svg_text(cdl__json *svg, double x, double y, const char *anchor, const char *style,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void cdl__svg_text(cdl__json *svg, double x, double y, const char *anchor, const char *style,
                     const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    cdl__jsonf(svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s%s%s>", x, y, anchor,
            style ? " style=\"" : "", style ? style : "", style ? "\"" : "");
    cdl__xml_text(svg, buf);
    cdl__jsonf(svg, "%s", "</text>\n");
}

/* Curves of several thread counts often coincide (all at the trainer's
 * rate): later ones are drawn thinner and dashed on top of earlier ones, so
 * every colour stays visible. */
static double cdl__curve_width(size_t j, size_t n)
{
    return 2.0 + 1.5 * (double)(n - 1 - j) / (n > 1 ? (double)(n - 1) : 1.0) * 2.0;
}

static const char *cdl__curve_dash(size_t j)
{
    static const char *const d[] = {"", " stroke-dasharray=\"10 5\"", " stroke-dasharray=\"3 4\"",
                                    " stroke-dasharray=\"14 4 3 4\""};
    return d[j % 4];
}

/* The figure: the runs' time split, and the what-if curves (thread counts
 * `tl`, measured points `m`). */
static void cdl__svg_figure(cdl__json *svg, const coordl_report *r, const int *tl, size_t nt,
                            const coordl_measured *m, size_t nv)
{
    const double W = 980, H = 840;
    cdl__jsonf(svg, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" "
               "font-size=\"13\">\n",
               W, H, W, H);
    cdl__jsonf(svg, "<title>");
    cdl__xml_text(svg, "DS-Analyzer report: ");
    cdl__xml_text(svg, r->source);
    cdl__jsonf(svg, "</title>\n<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", W, H);

    /* title */
    cdl__svg_text(svg, 20, 30, "start", "font-size:18px;font-weight:bold", "DS-Analyzer: %s", r->source);
    cdl__svg_text(svg, 20, 52, "start", "fill:#444",
             "%s%llu items, %.1f MB; batch %u, %ux%u crops, trainer step %.3g ms (%s), %d loader %s, "
             "%llu batches per run, median of %d", r->dataset_shards_sampled ? "about " : "",
             (unsigned long long)r->dataset_items, (double)r->dataset_bytes / 1e6, r->batch_size,
             r->out_w, r->out_h, r->step_ms, r->step_name, r->threads,
             cdl__thr_word(r->threads), (unsigned long long)r->batches, r->repeat);

    if (r->recommend_threads > 0)
        cdl__svg_text(svg, 20, 74, "start", "font-weight:bold",
                 "recommendation: cache %.0f%% of the dataset, %d loader %s (predicted stall under 3%%)",
                 100 * r->recommend_cache_fraction, r->recommend_threads,
                 cdl__thr_word(r->recommend_threads));
    else
        cdl__svg_text(svg, 20, 74, "start", "font-weight:bold",
                 "recommendation: none of the what-if grid gets the predicted stall under 3%%");

    /* ---- panel 1: where the time goes, per run ---- */
    const double px0 = 220, px1 = 680, py0 = 128, bar_h = 34, gap = 20;
    cdl__svg_text(svg, 20, 108, "start", "font-size:15px;font-weight:bold",
             "1. Where the trainer's time goes (differential runs)");
    const coordl_run_report *runs[3] = {&r->synthetic, &r->warm, &r->cold};
    static const char *const run_name[3] = {"synthetic (trainer only)", "warm (all in cache)",
                                            "cold (nothing cached)"};
    double per100[3], seg[3][3]; /* [run][compute, prep, fetch] seconds per 100 batches */
    double maxt = 0;
    for (int i = 0; i < 3; i++) {
        per100[i] = runs[i]->images_per_s > 0 ? 100.0 * r->batch_size / runs[i]->images_per_s : 0;
        maxt = fmax(maxt, per100[i]);
    }
    double ps = cdl__clamp01(r->prep_slowdown_fraction), fs = cdl__clamp01(r->fetch_slowdown_fraction);
    if (ps + fs > 1) {
        double k = 1 / (ps + fs);
        ps *= k;
        fs *= k;
    }
    /* synthetic: all compute; cold: its time split by the report's
     * fractions; warm: the same prep slowdown (seconds) as the cold run */
    seg[0][0] = per100[0], seg[0][1] = 0, seg[0][2] = 0;
    seg[2][1] = ps * per100[2], seg[2][2] = fs * per100[2];
    seg[2][0] = per100[2] - seg[2][1] - seg[2][2];
    seg[1][1] = fmin(seg[2][1], per100[1]), seg[1][2] = 0;
    seg[1][0] = per100[1] - seg[1][1];
    double xstep = cdl__nice_step(maxt, 5), xmax = xstep * ceil(maxt / xstep);
    if (!(xmax > 0))
        xmax = 1;
    double py_axis = py0 + 3 * (bar_h + gap) - gap + 12;
    /* grid and ticks */
    for (double t = 0; t <= xmax + xstep * 1e-6; t += xstep) {
        double x = px0 + (px1 - px0) * t / xmax;
        char lab[32];
        cdl__fmt_tick(lab, sizeof lab, t, xstep);
        cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x,
                py0 - 6, x, py_axis);
        cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", x,
                py_axis, x, py_axis + 5);
        cdl__svg_text(svg, x, py_axis + 19, "middle", NULL, "%s", lab);
    }
    cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", px0,
            py_axis, px1, py_axis);
    cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", px0,
            py0 - 6, px0, py_axis);
    cdl__svg_text(svg, (px0 + px1) / 2, py_axis + 40, "middle", NULL,
             "time (seconds per 100 batches of %u images)", r->batch_size);
    static const char *const seg_col[3] = {CDL_C_COMPUTE, CDL_C_PREP, CDL_C_FETCH};
    for (int i = 0; i < 3; i++) {
        double y = py0 + i * (bar_h + gap), x = px0;
        cdl__svg_text(svg, px0 - 10, y + bar_h / 2 + 5, "end", NULL, "%s", run_name[i]);
        for (int s = 0; s < 3; s++) {
            double w = (px1 - px0) * fmax(0, seg[i][s]) / xmax;
            if (w <= 0)
                continue;
            cdl__jsonf(svg, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                    x, y, w, bar_h, seg_col[s]);
            x += w;
        }
        cdl__svg_text(svg, x + 8, y + bar_h / 2 - 2, "start", NULL, "%.0f images/s",
                 runs[i]->images_per_s);
        cdl__svg_text(svg, x + 8, y + bar_h / 2 + 13, "start", "font-size:11px;fill:#555",
                 "stall %.1f%% (time waiting in coordl_next)", 100 * runs[i]->stall_fraction);
    }
    /* legend */
    static const char *const seg_name[3] = {"compute (trainer step)", "prep slowdown (decode, augment)",
                                            "fetch slowdown (storage)"};
    double ly = py_axis + 62;
    for (int s = 0; s < 3; s++) {
        double lx = px0 + s * 230;
        cdl__jsonf(svg, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/>\n", lx,
                ly - 11, seg_col[s]);
        cdl__svg_text(svg, lx + 20, ly, "start", NULL, "%s", seg_name[s]);
    }
    char prep_s[48], fetch_s[48];
    cdl__slowdown_text(prep_s, sizeof prep_s, r->prep_slowdown_fraction, r->prep_within_noise);
    cdl__slowdown_text(fetch_s, sizeof fetch_s, r->fetch_slowdown_fraction, r->fetch_within_noise);
    cdl__svg_text(svg, px0, ly + 22, "start", "font-size:11px;fill:#555",
             "prep slowdown = warm - synthetic, fetch slowdown = cold - warm (time per image); "
             "cold run: prep %s, fetch %s", prep_s, fetch_s);

    /* ---- panel 2: what-if curves ---- */
    const double qx0 = 90, qx1 = 660, qy0 = 450, qy1 = 760;
    cdl__svg_text(svg, 20, qy0 - 26, "start", "font-size:15px;font-weight:bold",
             "2. What-if: predicted throughput by cache size and loader threads");
    double ymaxv = r->ingest_images_per_s;
    for (size_t j = 0; j < nt; j++)
        for (int k = 0; k <= 100; k++)
            ymaxv = fmax(ymaxv, cdl__report_predict(r, k / 100.0, tl[j], 0).predicted_images_per_s);
    for (size_t i = 0; i < nv; i++)
        ymaxv = fmax(ymaxv, m[i].images_per_s);
    if (!(ymaxv > 0) || !isfinite(ymaxv))
        ymaxv = 1;
    double ystep = cdl__nice_step(ymaxv * 1.05, 6), ymax = ystep * ceil(ymaxv * 1.05 / ystep);
#define QX(fr) (qx0 + (qx1 - qx0) * (fr))
#define QY(val) (qy1 - (qy1 - qy0) * fmin(fmax((val) / ymax, 0), 1.02))
    for (double t = 0; t <= ymax + ystep * 1e-6; t += ystep) {
        char lab[32];
        cdl__fmt_tick(lab, sizeof lab, t, ystep);
        cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                qx0, QY(t), qx1, QY(t));
        cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n",
                qx0 - 5, QY(t), qx0, QY(t));
        cdl__svg_text(svg, qx0 - 8, QY(t) + 4, "end", NULL, "%s", lab);
    }
    for (int k = 0; k <= 100; k += 10) {
        cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n",
                QX(k / 100.0), qy0, QX(k / 100.0), qy1);
        cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n",
                QX(k / 100.0), qy1, QX(k / 100.0), qy1 + 5);
        cdl__svg_text(svg, QX(k / 100.0), qy1 + 19, "middle", NULL, "%d", k);
    }
    cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", qx0,
            qy1, qx1, qy1);
    cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", qx0,
            qy0, qx0, qy1);
    cdl__svg_text(svg, (qx0 + qx1) / 2, qy1 + 42, "middle", NULL,
             "cache size (%% of the dataset's %.1f MB, MinIO)", (double)r->dataset_bytes / 1e6);
    cdl__jsonf(svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f %.1f)\">"
               "throughput (images/s)</text>\n",
            28.0, (qy0 + qy1) / 2, 28.0, (qy0 + qy1) / 2);
    /* one curve per thread count */
    for (size_t j = 0; j < nt; j++) {
        cdl__jsonf(svg, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\"%s points=\"",
                cdl__palette[j % CDL_NPAL], cdl__curve_width(j, nt), cdl__curve_dash(j));
        for (int k = 0; k <= 100; k++) {
            double y = cdl__report_predict(r, k / 100.0, tl[j], 0).predicted_images_per_s;
            cdl__jsonf(svg, "%s%.1f,%.1f", k ? " " : "", QX(k / 100.0), QY(isfinite(y) ? y : 0));
        }
        cdl__jsonf(svg, "\"/>\n");
    }
    /* the trainer's ingestion rate: the ceiling */
    cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" " CDL_INGEST_STYLE "/>\n",
            qx0, QY(r->ingest_images_per_s), qx1, QY(r->ingest_images_per_s));
    /* validation: measured points, with a thin line to the prediction */
    for (size_t i = 0; i < nv; i++) {
        const double measured = m[i].images_per_s;
        const double predicted = cdl__report_predict(r, m[i].cache_fraction, m[i].threads, 0).predicted_images_per_s;
        const double error = measured > 0 ? (predicted - measured) / measured : 0.0;
        size_t j = 0;
        while (j < nt && tl[j] != m[i].threads)
            j++;
        const char *col = j < nt ? cdl__palette[j % CDL_NPAL] : "#000";
        double x = QX(m[i].cache_fraction);
        cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"1\"/>\n",
                x, QY(predicted), x, QY(measured), col);
        cdl__jsonf(svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"%s\" stroke=\"#000\" "
                   "stroke-width=\"1.5\"/>\n",
                x, QY(measured), col);
        double pct = 100 * error;
        cdl__svg_text(svg, x + 9, QY(measured) + (measured < predicted ? 14 : -6), "start",
                 "font-size:11px", "%+.0f%%", fabs(pct) < 0.5 ? 0.0 : pct);
    }
    /* legend */
    double lx = qx1 + 25, ly2 = qy0 + 4;
    cdl__svg_text(svg, lx, ly2, "start", "font-weight:bold", "legend");
    ly2 += 22;
    for (size_t j = 0; j < nt; j++, ly2 += 20) {
        cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"%.1f\"%s/>\n",
                lx, ly2 - 4, lx + 30, ly2 - 4, cdl__palette[j % CDL_NPAL], cdl__curve_width(j, nt), cdl__curve_dash(j));
        cdl__svg_text(svg, lx + 38, ly2, "start", NULL, "%d loader %s (predicted)", tl[j], cdl__thr_word(tl[j]));
    }
    cdl__jsonf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" " CDL_INGEST_STYLE "/>\n",
            lx, ly2 - 4, lx + 30, ly2 - 4);
    cdl__svg_text(svg, lx + 38, ly2, "start", NULL, "trainer ingest rate (%.0f/s)", r->ingest_images_per_s);
    ly2 += 20;
    if (nv) {
        cdl__jsonf(svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"#bbb\" stroke=\"#000\" "
                   "stroke-width=\"1.5\"/>\n",
                lx + 13, ly2 - 4);
        cdl__svg_text(svg, lx + 38, ly2, "start", NULL, "measured (validation)");
        cdl__svg_text(svg, lx + 38, ly2 + 15, "start", "font-size:11px;fill:#555",
                 "label: (predicted - measured) / measured");
        ly2 += 36;
    }
    cdl__svg_text(svg, lx, ly2 + 6, "start", "font-size:11px;fill:#555", "model: min(ingest,");
    cdl__svg_text(svg, lx, ly2 + 21, "start", "font-size:11px;fill:#555", "  prep/core x threads,");
    cdl__svg_text(svg, lx, ly2 + 36, "start", "font-size:11px;fill:#555",
             "  storage / ((1 - cache) x item))");
#undef QX
#undef QY
    cdl__jsonf(svg, "%s", "</svg>\n");
}


CDL_PRIVATE size_t cdl__report_svg(const coordl_report *r, const coordl_measured *m, size_t nm, char *buf, size_t cap) {
    cdl__json svg = {buf, buf ? cap : 0, 0};
    int tl[CDL_MAX_CURVES];
    const size_t nt = cdl__curve_threads(r, tl);
    cdl__svg_figure(&svg, r, tl, nt, m, m ? nm : 0);
    return cdl__json_finish(&svg);
}

CDL_PRIVATE void cdl__report_free(coordl_report *r) {
    if (!r) return;
    if (r->whatif) {
        cdl__whatif_head *head = (cdl__whatif_head *)(void *)r->whatif - 1;
        const coordl_allocator al = head->alloc;
        al.free_fn(al.user, head);
    }
    r->whatif = NULL;
    r->n_whatif = 0;
}

#else /* COORDL_NO_ANALYZER: the differential protocol and the what-if model
        * are left out; the stats and coordl_stats_json are the loader's. */
CDL_PRIVATE coordl_whatif cdl__report_predict(const coordl_report *r, double f, int threads, double storage_mb_per_s) {
    coordl_whatif w;
    (void)r, (void)f, (void)threads, (void)storage_mb_per_s;
    memset(&w, 0, sizeof w);
    return w;
}

CDL_PRIVATE uint32_t cdl__ra_threads_for(uint32_t depth) { return depth; }

CDL_PRIVATE coordl_whatif cdl__report_predict_ra(const coordl_report *r, double f, int threads, double storage_mb_per_s,
                                            uint32_t depth, uint32_t io_threads) {
    (void)depth, (void)io_threads;
    return cdl__report_predict(r, f, threads, storage_mb_per_s);
}

CDL_PRIVATE coordl_status cdl__analyze(const coordl_config *cfg, coordl_step_fn step_fn, void *user,
                                  const coordl_analyze_opts *opts_in, coordl_report *r) {
    (void)cfg, (void)step_fn, (void)user, (void)opts_in;
    memset(r, 0, sizeof *r);
    r->recommend_threads = -1;
    r->recommend_cache_fraction = -1;
    r->recommend_readahead_items = -1;
    return cdl__open_fail(COORDL_ERR_UNSUPPORTED, "coordl_analyze: DS-Analyzer is not in this build (coordl.c "
                          "was compiled with COORDL_NO_ANALYZER)");
}

CDL_PRIVATE size_t cdl__report_json(const coordl_report *r, char *buf, size_t cap) {
    cdl__json j = {buf, buf ? cap : 0, 0};
    (void)r;
    cdl__jsonf(&j, "{\"error\":\"DS-Analyzer is not in this build (COORDL_NO_ANALYZER)\"}");
    return cdl__json_finish(&j);
}

CDL_PRIVATE size_t cdl__report_svg(const coordl_report *r, const coordl_measured *m, size_t nm, char *buf, size_t cap) {
    cdl__json j = {buf, buf ? cap : 0, 0};
    (void)r, (void)m, (void)nm;
    cdl__jsonf(&j, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"600\" height=\"40\"><text x=\"10\" y=\"25\">"
               "DS-Analyzer is not in this build (COORDL_NO_ANALYZER)</text></svg>\n");
    return cdl__json_finish(&j);
}

CDL_PRIVATE void cdl__report_free(coordl_report *r) {
    if (!r) return;
    r->whatif = NULL; /* this build never allocates one */
    r->n_whatif = 0;
}
#endif /* COORDL_NO_ANALYZER */

/* ---- src/abi.c --------------------------------------------------------- */
/* SPDX-License-Identifier: MIT */
/*
 * abi.c - the stable ABI.
 *
 * Every public struct crosses the boundary with the caller's sizeof
 * (coordl.h, "Stable ABI"). Inputs are copied over the library's
 * defaults, outputs are filled in a full struct and copied back cut to
 * the caller's size; the sections above only ever see full structs.
 * The plain names are also exported, for binaries built against 0.3.0.
 *
 * Owns:  nothing: sized entry points that copy each public struct with the
 *        caller's sizeof, and the 0.3.0 symbols
 * Lock:  none
 * Calls: status, config, api, analyzer (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */

/* Sizes of the public structs in 0.3.0, the last release without sizes:
 * the end of each struct's last 0.3.0 field, rounded up to the struct's
 * alignment then (its widest members: 8-byte integers, doubles,
 * pointers). */
#define CDL__MAX(a, b) ((a) > (b) ? (a) : (b))
#define CDL__V030_ALIGN CDL__MAX(CDL__MAX(_Alignof(uint64_t), _Alignof(double)), _Alignof(void *))
#define CDL__V030_SIZE(type, last_field)                                                                \
    ((offsetof(type, last_field) + sizeof(((type *)0)->last_field) + CDL__V030_ALIGN - 1) /              \
     CDL__V030_ALIGN * CDL__V030_ALIGN)
#define CDL__V030_CONFIG CDL__V030_SIZE(coordl_config, pin_user)
#define CDL__V030_BATCH CDL__V030_SIZE(coordl_batch, slot_)
#define CDL__V030_STATS CDL__V030_SIZE(coordl_stats, prep_us_per_item)
#define CDL__V030_EPOCH_STATS CDL__V030_SIZE(coordl_epoch_stats, batches)
#define CDL__V030_TRANSFORM CDL__V030_SIZE(coordl_transform, angle)
#define CDL__V030_ANALYZE_OPTS CDL__V030_SIZE(coordl_analyze_opts, progress_user)
#define CDL__V030_REPORT CDL__V030_SIZE(coordl_report, recommend_threads)
#if defined(__x86_64__) && defined(__LP64__)
/* the sizes the 0.3.0 header gives on x86-64 (tests/abi checks them at run
 * time on every platform) */
_Static_assert(CDL__V030_CONFIG == 352 && CDL__V030_BATCH == 88 && CDL__V030_STATS == 776 &&
               CDL__V030_EPOCH_STATS == 112 && CDL__V030_TRANSFORM == 56 &&
               CDL__V030_ANALYZE_OPTS == 72 && CDL__V030_REPORT == 224,
               "a public struct's 0.3.0 fields moved: fields are appended at the end, never reordered");
#endif

/* An input struct: the caller's first src_size bytes over dst, which holds
 * the defaults. A caller with a newer header may pass a larger struct; its
 * extra bytes must be zero (fields this library does not know, unset). */
static coordl_status cdl__struct_in(void *dst, size_t dst_size, const void *src, size_t src_size,
                                    size_t min_size, const char *type) {
    if (src_size < min_size)
        return cdl__open_fail(COORDL_ERR_INVALID, "%s: size %zu is smaller than any release's layout (%zu); "
                              "pass sizeof(%s)", type, src_size, min_size, type);
    if (src_size > dst_size) {
        const unsigned char *extra = (const unsigned char *)src + dst_size;
        for (size_t i = 0; i < src_size - dst_size; i++)
            if (extra[i])
                return cdl__open_fail(COORDL_ERR_UNSUPPORTED, "%s: the caller's header (%zu bytes) sets a field "
                                      "at byte %zu that this library (%s, %zu bytes) does not know; link a "
                                      "newer coordl", type, src_size, dst_size + i, COORDL_VERSION, dst_size);
    }
    memcpy(dst, src, src_size < dst_size ? src_size : dst_size);
    return COORDL_OK;
}

/* An output struct: the first dst_size bytes of the library's full struct;
 * bytes beyond it (a caller with a newer header) are zeroed. */
static CDL_HOT void cdl__struct_out(void *dst, size_t dst_size, const void *src, size_t src_size) {
    size_t n = dst_size < src_size ? dst_size : src_size;
    memcpy(dst, src, n);
    if (dst_size > n) memset((unsigned char *)dst + n, 0, dst_size - n);
}

void coordl_config_init_sized(coordl_config *cfg, size_t cfg_size) {
    if (!cfg) return;
    coordl_config d = cdl__config_default();
    cdl__struct_out(cfg, cfg_size, &d, sizeof d);
}

/* A config that asks for a part this build left out (platform.h's
 * switches) is refused at open, naming the switch. */
static coordl_status cdl__parts_check(const coordl_config *c) {
#ifdef COORDL_NO_AUDIO
    if (c->pipeline == COORDL_PIPE_AUDIO)
        return cdl__open_fail(COORDL_ERR_UNSUPPORTED, "pipeline: COORDL_PIPE_AUDIO is not in this build (coordl.c "
                              "was compiled with COORDL_NO_AUDIO)");
#endif
#ifdef COORDL_NO_TOKENS
    if (c->pipeline == COORDL_PIPE_TOKENS || c->token_order == COORDL_TOKENS_LLMC)
        return cdl__open_fail(COORDL_ERR_UNSUPPORTED, "pipeline: COORDL_PIPE_TOKENS is not in this build (coordl.c "
                              "was compiled with COORDL_NO_TOKENS)");
#endif
    (void)c;
    return COORDL_OK;
}

coordl_status coordl_open_sized(const coordl_config *cfg, size_t cfg_size, coordl **out) {
    cdl__open_errmsg[0] = '\0';
    if (out) *out = NULL;
    if (!cfg || !out) return cdl__open_fail(COORDL_ERR_INVALID, "coordl_open: cfg and out must not be NULL");
    coordl_config c = cdl__config_default();
    coordl_status rc = cdl__struct_in(&c, sizeof c, cfg, cfg_size, CDL__V030_CONFIG, "coordl_config");
    if (rc == COORDL_OK) rc = cdl__parts_check(&c);
    return rc == COORDL_OK ? cdl__open(&c, out) : rc;
}

CDL_HOT coordl_status coordl_next_sized(coordl *L, coordl_batch *out, size_t out_size) {
    if (!L || !out) return COORDL_ERR_INVALID;
    if (out_size < CDL__V030_BATCH) {
        /* the batch could not be released: its slot_ would not fit */
        snprintf(L->errmsg, sizeof L->errmsg, "coordl_next: batch size %zu is smaller than any release's "
                 "coordl_batch (%zu); pass sizeof(coordl_batch)", out_size, (size_t)CDL__V030_BATCH);
        return COORDL_ERR_INVALID;
    }
    coordl_batch b;
    coordl_status rc = cdl__next(L, &b);
    cdl__struct_out(out, out_size, &b, sizeof b);
    return rc;
}

void coordl_get_stats_sized(const coordl *L, coordl_stats *out, size_t out_size) {
    if (!out) return;
    coordl_stats s;
    cdl__get_stats(L, &s);
    cdl__struct_out(out, out_size, &s, sizeof s);
}

coordl_status coordl_get_epoch_stats_sized(const coordl *L, uint64_t epoch, coordl_epoch_stats *out,
                                           size_t out_size) {
    if (!L || !out) return COORDL_ERR_INVALID;
    coordl_epoch_stats e;
    coordl_status rc = cdl__get_epoch_stats(L, epoch, &e);
    if (rc == COORDL_OK) cdl__struct_out(out, out_size, &e, sizeof e);
    return rc;
}

coordl_status coordl_get_config_sized(const coordl *L, coordl_config *out, size_t out_size) {
    if (!L || !out) return COORDL_ERR_INVALID;
    coordl_config c;
    cdl__get_config(L, &c);
    cdl__struct_out(out, out_size, &c, sizeof c);
    return COORDL_OK;
}

coordl_status coordl_sample_transform_sized(coordl *L, uint64_t epoch, uint64_t id, coordl_transform *out,
                                            size_t out_size) {
    if (!L || !out) return COORDL_ERR_INVALID;
    coordl_transform t;
    coordl_status rc = cdl__sample_transform(L, epoch, id, &t);
    cdl__struct_out(out, out_size, &t, sizeof t);
    return rc;
}

coordl_status coordl_analyze_sized(const coordl_config *cfg, size_t cfg_size, coordl_step_fn step_fn, void *user,
                                   const coordl_analyze_opts *opts, size_t opts_size, coordl_report *report,
                                   size_t report_size) {
    cdl__open_errmsg[0] = '\0';
    if (!cfg || !report) return cdl__open_fail(COORDL_ERR_INVALID, "coordl_analyze: cfg and report must not be NULL");
    if (report_size < CDL__V030_REPORT)
        return cdl__open_fail(COORDL_ERR_INVALID, "coordl_report: size %zu is smaller than any release's layout "
                              "(%zu); pass sizeof(coordl_report)", report_size, (size_t)CDL__V030_REPORT);
    coordl_config c = cdl__config_default();
    coordl_status rc = cdl__struct_in(&c, sizeof c, cfg, cfg_size, CDL__V030_CONFIG, "coordl_config");
    if (rc != COORDL_OK) return rc;
    coordl_analyze_opts o;
    cdl__analyze_opts_default(&o);
    if (opts && (rc = cdl__struct_in(&o, sizeof o, opts, opts_size, CDL__V030_ANALYZE_OPTS,
                                     "coordl_analyze_opts")) != COORDL_OK)
        return rc;
    coordl_report r;
    rc = cdl__analyze(&c, step_fn, user, opts ? &o : NULL, &r);
    cdl__struct_out(report, report_size, &r, sizeof r);
    return rc;
}

void coordl_analyze_opts_init_sized(coordl_analyze_opts *opts, size_t opts_size) {
    if (!opts) return;
    coordl_analyze_opts d;
    cdl__analyze_opts_default(&d);
    cdl__struct_out(opts, opts_size, &d, sizeof d);
}

/* A report the caller passes back: its fields, the rest zero. Reports are
 * filled by coordl_analyze, so a larger one's extra bytes are this
 * library's zeros. */
static void cdl__report_in(coordl_report *full, const coordl_report *r, size_t r_size) {
    memset(full, 0, sizeof *full);
    memcpy(full, r, r_size < sizeof *full ? r_size : sizeof *full);
}

coordl_whatif coordl_report_predict_sized(const coordl_report *r, size_t r_size, double cache_fraction, int threads,
                                          double storage_mb_per_s) {
    coordl_report full;
    if (r) cdl__report_in(&full, r, r_size);
    else memset(&full, 0, sizeof full);
    return cdl__report_predict(&full, cache_fraction, threads, storage_mb_per_s);
}

coordl_whatif coordl_report_predict_readahead_sized(const coordl_report *r, size_t r_size, double cache_fraction,
                                                    int threads, double storage_mb_per_s, uint32_t readahead_items) {
    coordl_report full;
    if (r) cdl__report_in(&full, r, r_size);
    else memset(&full, 0, sizeof full);
    return cdl__report_predict_ra(&full, cache_fraction, threads, storage_mb_per_s, readahead_items,
                                  cdl__ra_threads_for(readahead_items));
}

size_t coordl_report_json_sized(const coordl_report *r, size_t r_size, char *buf, size_t cap) {
    coordl_report full;
    if (r) cdl__report_in(&full, r, r_size);
    else memset(&full, 0, sizeof full);
    return cdl__report_json(&full, buf, cap);
}

size_t coordl_report_svg_sized(const coordl_report *r, size_t r_size, const coordl_measured *measured,
                               size_t n_measured, char *buf, size_t cap) {
    coordl_report full;
    if (r) cdl__report_in(&full, r, r_size);
    else memset(&full, 0, sizeof full);
    return cdl__report_svg(&full, measured, n_measured, buf, cap);
}

void coordl_report_free_sized(coordl_report *r, size_t r_size) {
    if (!r || r_size < CDL__V030_REPORT) return;
    coordl_report full;
    cdl__report_in(&full, r, r_size);
    cdl__report_free(&full);
    /* write back only what the caller has (the freed array's fields are
     * 0.3.0 fields) */
    memcpy(r, &full, r_size < sizeof full ? r_size : sizeof full);
}

/* The 0.3.0 ABI: what binaries built against the 0.3.0 header call. That
 * header declared these names as functions taking structs of 0.3.0's size;
 * the current header turns the names into macros over the `_sized` calls,
 * so the definitions below name them in parentheses. coordl_config_default
 * returned the config by value: the caller reserved 0.3.0's size for it, so
 * the 0.3.0 symbol returns exactly that many bytes (a struct of that size
 * is returned through memory on every ABI, whatever its field types). */
typedef struct cdl__config_v030 {
    unsigned char bytes[CDL__V030_CONFIG];
} cdl__config_v030;

COORDL_API cdl__config_v030 (coordl_config_default)(void);
COORDL_API coordl_status (coordl_open)(const coordl_config *cfg, coordl **out);
COORDL_API coordl_status (coordl_next)(coordl *L, coordl_batch *out);
COORDL_API void (coordl_get_stats)(const coordl *L, coordl_stats *out);
COORDL_API coordl_status (coordl_get_epoch_stats)(const coordl *L, uint64_t epoch, coordl_epoch_stats *out);
COORDL_API coordl_status (coordl_sample_transform)(coordl *L, uint64_t epoch, uint64_t id, coordl_transform *out);
COORDL_API coordl_status (coordl_analyze)(const coordl_config *cfg, coordl_step_fn step_fn, void *user,
                                          const coordl_analyze_opts *opts, coordl_report *report);
COORDL_API coordl_whatif (coordl_report_predict)(const coordl_report *r, double cache_fraction, int threads,
                                                 double storage_mb_per_s);
COORDL_API size_t (coordl_report_json)(const coordl_report *r, char *buf, size_t cap);
COORDL_API void (coordl_report_free)(coordl_report *r);

cdl__config_v030 (coordl_config_default)(void) {
    coordl_config d = cdl__config_default();
    cdl__config_v030 v;
    memcpy(v.bytes, &d, sizeof v.bytes);
    return v;
}

coordl_status (coordl_open)(const coordl_config *cfg, coordl **out) {
    return coordl_open_sized(cfg, CDL__V030_CONFIG, out);
}

CDL_HOT coordl_status (coordl_next)(coordl *L, coordl_batch *out) { return coordl_next_sized(L, out, CDL__V030_BATCH); }

void (coordl_get_stats)(const coordl *L, coordl_stats *out) { coordl_get_stats_sized(L, out, CDL__V030_STATS); }

coordl_status (coordl_get_epoch_stats)(const coordl *L, uint64_t epoch, coordl_epoch_stats *out) {
    return coordl_get_epoch_stats_sized(L, epoch, out, CDL__V030_EPOCH_STATS);
}

coordl_status (coordl_sample_transform)(coordl *L, uint64_t epoch, uint64_t id, coordl_transform *out) {
    return coordl_sample_transform_sized(L, epoch, id, out, CDL__V030_TRANSFORM);
}

coordl_status (coordl_analyze)(const coordl_config *cfg, coordl_step_fn step_fn, void *user,
                               const coordl_analyze_opts *opts, coordl_report *report) {
    return coordl_analyze_sized(cfg, CDL__V030_CONFIG, step_fn, user, opts, CDL__V030_ANALYZE_OPTS, report,
                                CDL__V030_REPORT);
}

coordl_whatif (coordl_report_predict)(const coordl_report *r, double cache_fraction, int threads,
                                      double storage_mb_per_s) {
    return coordl_report_predict_sized(r, CDL__V030_REPORT, cache_fraction, threads, storage_mb_per_s);
}

size_t (coordl_report_json)(const coordl_report *r, char *buf, size_t cap) {
    return coordl_report_json_sized(r, CDL__V030_REPORT, buf, cap);
}

void (coordl_report_free)(coordl_report *r) { coordl_report_free_sized(r, CDL__V030_REPORT); }
