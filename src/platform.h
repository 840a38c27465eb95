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
