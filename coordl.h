/* SPDX-License-Identifier: MIT */
/*
 * coordl.h - an embedded, in-process data loader for C training engines.
 *
 * coordl feeds ready minibatches to a C trainer so that it never waits for
 * data: a pool of worker threads fetches items (from a MinIO cache of encoded
 * bytes, or from storage), decodes and augments them straight into a ring of
 * batch slots, and coordl_next() hands the slots out in order, zero copy.
 *
 * This header is the contract: if a function or type does not appear here it
 * is not part of the published API.
 *
 * Typical use:
 *
 *     coordl_config cfg = coordl_config_default();
 *     cfg.source = "/data/imagenet/train";       // ImageFolder root
 *     cfg.batch_size = 256;
 *     cfg.cache_bytes = (uint64_t)32 << 30;      // 32 GiB MinIO cache
 *     coordl *L;
 *     if (coordl_open(&cfg, &L) != COORDL_OK) {
 *         fprintf(stderr, "coordl: %s\n", coordl_errmsg(NULL));
 *         return 1;
 *     }
 *     for (int epoch = 0; epoch < epochs; epoch++) {
 *         coordl_batch b;
 *         coordl_status rc;
 *         while ((rc = coordl_next(L, &b)) == COORDL_OK) {
 *             train_step(b.data, b.labels, b.n);  // b.data: n x 3 x h x w floats
 *             coordl_release(L, &b);
 *         }
 *         if (rc != COORDL_END_OF_EPOCH) { fprintf(stderr, "%s\n", coordl_errmsg(L)); break; }
 *     }
 *     coordl_close(L);
 *
 * Thread safety, in general: a coordl handle has one consumer. coordl_next,
 * coordl_next_into, coordl_release, coordl_seek, coordl_set and coordl_close
 * must not run concurrently with each other on the same handle. The read-only
 * queries (coordl_get_stats, coordl_num_items, ...) may be called from any
 * thread at any time while the handle is open. Different handles are
 * independent: the library has no global state.
 *
 * Which calls block and which make system calls (the trainer's thread):
 *   coordl_next, coordl_next_into: a ready batch is taken without blocking
 *     and without a system call (the stream lock is uncontended or spun on
 *     for a few microseconds); a batch not ready blocks until it is (token
 *     pipelines with no worker threads prepare it on the calling thread,
 *     reading from storage only what read-ahead and the cache do not hold).
 *   coordl_release: never blocks on a batch; makes one system call (a
 *     futex wake) only when it frees half the ring and a worker is parked.
 *   coordl_seek, coordl_set: block until rows in flight are done.
 *   coordl_get_stats and the other queries: take the stream's lock for
 *     a moment (they may wait for it, never for a batch) and touch no file.
 *   coordl_open, coordl_close, coordl_analyze: block (threads, files,
 *     memory, a group's members).
 * An idle loader (ring full, trainer away, nothing to rewrite) has no
 * thread waking on a timer: workers and read-ahead threads are parked until
 * a release; a coordinated group's member thread beats and checks its
 * siblings at its own cadence (a quarter of group_timeout_ms, at most
 * 50 ms), and an MPI peer thread polls for requests.
 *
 * Build switches (define them when compiling coordl.c; the header is the
 * same in every build, and so is the set of exported functions). Each
 * leaves one part out; asking for that part answers COORDL_ERR_UNSUPPORTED
 * with a message naming the switch:
 *   COORDL_NO_HWLOC     no hwloc: workers bound by plain pthread affinity,
 *                       no NUMA placement; topology and pci_bus_id refused
 *   COORDL_NO_AUDIO     no COORDL_PIPE_AUDIO (coordl_open refuses it)
 *   COORDL_NO_TOKENS    no COORDL_PIPE_TOKENS (coordl_open refuses it)
 *   COORDL_NO_ANALYZER  no coordl_analyze (it refuses); the stats and
 *                       coordl_stats_json stay
 *   COORDL_NO_STB       no stb_image: JPEG only, through libjpeg; any other
 *                       image is a bad sample (COORDL_ERR_UNSUPPORTED)
 *   COORDL_NO_JPEGTURBO no libjpeg: JPEG through stb_image
 *   COORDL_STB_UPSTREAM stb_image.h included as "stb_image.h" (an upstream
 *                       checkout on the include path) instead of
 *                       <stb/stb_image.h>; COORDL_STB_IMAGE_H="path" names
 *                       any other
 *   COORDL_MPI          the partitioned cache over MPI (make MPI=1)
 * With COORDL_NO_HWLOC and COORDL_NO_STB, coordl.c needs no header but the
 * C library's and libjpeg's.
 */
#ifndef COORDL_H
#define COORDL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Linkage of the public functions. The shared library is built with
 * -fvisibility=hidden, so only what is marked COORDL_API is exported. A
 * trainer that vendors coordl.c into its own shared object and wants other
 * linkage defines COORDL_API before including this header. */
#ifndef COORDL_API
#if defined(__GNUC__) && __GNUC__ >= 4
#define COORDL_API extern __attribute__((visibility("default")))
#else
#define COORDL_API extern
#endif
#endif

/* Version: header and library can be checked against each other with
 * coordl_libversion_number() == COORDL_VERSION_NUMBER. The shared library's
 * soname is libcoordl.so.<major>; 0.x releases keep old binaries working
 * (see "Stable ABI" below). */
#define COORDL_VERSION_MAJOR 0
#define COORDL_VERSION_MINOR 4
#define COORDL_VERSION_PATCH 0
#define COORDL_VERSION "0.4.0"
#define COORDL_VERSION_NUMBER                                             \
    (COORDL_VERSION_MAJOR * 1000000 + COORDL_VERSION_MINOR * 1000 +       \
     COORDL_VERSION_PATCH)

/* Result codes: 0 is success, negatives are errors, a distinct positive
 * value means "no more batches in this epoch". One list makes the enum and
 * the strings of coordl_strerror(). */
#define COORDL_STATUS_MAP(X)                                                  \
    X(OK, 0, "success")                                                       \
    X(END_OF_EPOCH, 1, "end of epoch")                                        \
    X(ERR_INVALID, -1, "invalid argument or configuration")                   \
    X(ERR_NOMEM, -2, "out of memory")                                         \
    X(ERR_IO, -3, "I/O error")                                                \
    X(ERR_CORRUPT, -4, "corrupt or unsupported data")                         \
    X(ERR_GROUP, -5, "coordinated group error")                               \
    X(ERR_PEER, -6, "peer error")                                             \
    X(ERR_TIMEOUT, -7, "timed out")                                           \
    X(ERR_UNSUPPORTED, -8, "not supported by this build or platform")

typedef enum {
#define COORDL__STATUS_ENUM(name, value, text) COORDL_##name = value,
    COORDL_STATUS_MAP(COORDL__STATUS_ENUM)
#undef COORDL__STATUS_ENUM
    COORDL__STATUS_FORCE_INT = 0x7fffffff
} coordl_status;

typedef struct coordl coordl; /* opaque loader handle */

/* Stable ABI. The public structs (coordl_config, coordl_batch,
 * coordl_stats, coordl_epoch_stats, coordl_transform, coordl_analyze_opts,
 * coordl_report) grow at their end from release to release: fields are
 * appended, never reordered or removed. Every function that reads or fills
 * one of them is told the caller's sizeof: the plain names (coordl_open,
 * coordl_next, coordl_get_stats, ...) are macros that pass sizeof(struct),
 * as this header declares it, to a `_sized` entry point, so source code
 * does not change. With that size the library
 *   - never writes past the caller's struct: fields the caller's header
 *     does not have are not written;
 *   - never reads past it: fields the caller's header does not have take
 *     their defaults (what coordl_config_default gives);
 *   - refuses an input struct larger than its own whose extra bytes are not
 *     all zero (a header newer than the library, using a field the library
 *     does not know) with COORDL_ERR_UNSUPPORTED, and zeroes the extra
 *     bytes of an output struct.
 * The library also exports functions under the plain names: they are the
 * 0.3.0 ABI (structs of 0.3.0's size, which had no `_sized` calls) so that
 * binaries built against 0.3.0 keep working. Bindings (ctypes, FFI) call
 * the `_sized` functions with the size of the struct they declare.
 * Types used inside another struct, reached through one, or used as array
 * elements (coordl_allocator, coordl_io, coordl_run_report, coordl_whatif)
 * never change; a richer one would be a new type. In the input structs (coordl_config, coordl_analyze_opts) a new
 * field must not start inside the previous release's tail padding (an old
 * caller's padding bytes are not zeroed): when the struct ends in a 4-byte
 * field, pad to 8 before appending one. */

/* What the items are and how they become rows of a batch. */
typedef enum {
    COORDL_PIPE_TRAIN = 0, /* image: a random crop (train_crop: by default
                              torchvision's RandomResizedCrop, or Darknet's
                              crop) + horizontal flip                       */
    COORDL_PIPE_EVAL = 1,  /* image: resize shorter side to out*256/224, then
                              center crop out_h x out_w                       */
    COORDL_PIPE_TOKENS = 2,/* llm.c token shards: a sample is a window of
                              seq_len + 1 tokens; data = inputs, targets =
                              the same shifted by one (int32); not with
                              COORDL_NO_TOKENS                              */
    COORDL_PIPE_AUDIO = 3, /* WAV (PCM 16-bit or float, any channel count)
                              to mono float, resampled to audio_rate if set
                              (linear), random crop of audio_samples
                              (zero-padded); only the crop is converted;
                              not with COORDL_NO_AUDIO                      */
    COORDL_PIPE_EXACT = 4  /* image, no augmentation: resize the shorter
                              side to the output size (no 256/224 margin),
                              then center crop out_h x out_w. An image that
                              already has the output size comes out with
                              its stored pixels unchanged (no rescale, no
                              crop, no flip): e.g. MNIST's 28 x 28 digits
                              with out_w = out_h = 28, channels = 1 and a
                              U8 layout are the dataset's bytes           */
} coordl_pipeline;

/* Order of token windows (COORDL_PIPE_TOKENS), config field token_order.
 * A shard of n tokens holds floor((n - 1) / seq_len) windows of seq_len + 1
 * tokens, window w starting at token w * seq_len (llm.c's reading: windows
 * overlap by one token, the targets being the inputs shifted by one). */
typedef enum {
    COORDL_TOKENS_WINDOWS = 0, /* default: the windows of all shards form one
                                  stream (shards in source order), shuffled
                                  globally per epoch when shuffle = 1; rank r
                                  of P takes windows r, r + P, ...; a batch may
                                  span shards                                */
    COORDL_TOKENS_LLMC = 1     /* llm.c's DataLoader (llmc/dataloader.h): a
                                  batch is B = batch_size consecutive windows
                                  of one shard. Shard s holds G_s =
                                  floor(windows_s / (P x B)) samples and the
                                  rest of it (its tail) is dropped; sample j
                                  of a shard is P blocks of B windows, rank r
                                  taking block j x P + r. An epoch visits the
                                  shards in source order and each shard's
                                  samples in order; with shuffle = 1 the
                                  shard order and the samples within a shard
                                  are permuted per epoch from (seed, epoch)
                                  (llm.c's scheme, coordl's randomness: every
                                  rank draws the same permutations). With
                                  shuffle = 0 the batches are exactly the
                                  (inputs, targets) of llm.c's
                                  dataloader_next_batch, for any shard sizes
                                  and rank counts. Every batch is full;
                                  coordl_batches_per_epoch = sum of G_s; the
                                  batch size cannot change (coordl_set). A
                                  shard with G_s = 0 is skipped (llm.c
                                  asserts instead). See coordl_from_llmc.   */
} coordl_token_order;

/* The order of an epoch's items, config field shuffle. Every order gives
 * every item once per epoch (ranks: a disjoint, equal-count share of it) and
 * depends only on (seed, epoch), never on threads, cache, group or rank
 * count: rank r of P takes global positions r, r + P, ... of the one global
 * sequence, so P ranks at batch size B together hold the 1-rank batches of
 * size P x B. */
typedef enum {
    COORDL_SHUFFLE_OFF = 0,  /* index order every epoch                     */
    COORDL_SHUFFLE_FULL = 1, /* default: a fresh permutation of all items
                                per epoch (a keyed Feistel network: no
                                per-item memory)                           */
    COORDL_SHUFFLE_SHARD_WINDOW = 2 /* sharded sources (WebDataset tar
                                shards; token shards with
                                COORDL_TOKENS_WINDOWS): each epoch visits the
                                shards in a random order keyed by (seed,
                                epoch), cut into windows of
                                shuffle_window_shards shards; the epoch is
                                window 0's items in a random order keyed by
                                (seed, epoch, window), then window 1's, ...
                                A batch then reads from few shards (at most
                                2 x shuffle_window_shards when it is no
                                larger than a window's items), as
                                WebDataset's and MosaicML Streaming's
                                shuffles do; items of one window are
                                correlated in time. Costs 40 bytes per shard
                                (plus 4 per item for a tar set labelled by
                                class folders, whose ids are not grouped by
                                shard): coordl_stats.sampler_bytes. An ImageFolder or a list source has
                                no shards: COORDL_ERR_INVALID. Not with
                                token_order = COORDL_TOKENS_LLMC (llm.c's
                                order is already a shard order).
                                On tar shards with .cls labels, one
                                process, no cache or the MinIO one, and no
                                index_path, open
                                scans one shard and each other shard is
                                indexed when its window is reached: ids are
                                then (shard << 32) | ordinal, and the item
                                and batch counts read 0 until every shard
                                is counted; the batches are the same.
                                docs/shuffle.md                             */
} coordl_shuffle;

/* The random crop of COORDL_PIPE_TRAIN, config field train_crop. */
typedef enum {
    COORDL_CROP_RESIZED = 0, /* default: torchvision's RandomResizedCrop: a
                                box of area scale_min..scale_max of the
                                image and aspect ratio ratio_min..ratio_max
                                (log-uniform), resized to out_w x out_h with
                                an antialiased filter; `aspect` stretches
                                the box's width, rotate_deg rotates the row
                                about its centre with the edges extended   */
    COORDL_CROP_DARKNET = 1, /* Darknet's classifier crop (random_augment_
                                image in src/image.c): the shorter side is
                                scaled to a size uniform in [min_crop,
                                max_crop] (integers), the image stretched by
                                rand_scale(aspect), then an out_w x out_h
                                window at a random offset, rotated by a
                                uniform angle in [-rotate_deg, rotate_deg]
                                about the image centre, sampled bilinearly
                                at full resolution with black (0) outside
                                the image, as Darknet fills               */
    COORDL_CROP_DARKNET_BOXES = 2, /* Darknet's detector augmentation
                                (load_data_detection in src/data.c), for
                                labels = COORDL_LABELS_BOXES: the image's
                                aspect jittered by up to +-jitter of each
                                side, its longer side scaled to the output's
                                times a factor uniform in [place_scale_min,
                                place_scale_max] (Darknet: 1), placed at a
                                random offset on a grey (0.5) out_w x out_h
                                canvas, colour jitter (hue, saturation,
                                exposure), flip; boxes moved, scaled,
                                flipped and clipped with the pixels, and
                                dropped when under 0.001 of a side. See
                                docs/detection.md                          */
    COORDL_CROP_SSD = 3      /* SSD's sampler (Liu et al. 2016; torchvision's
                                RandomIoUCrop), for labels =
                                COORDL_LABELS_BOXES: one of {the whole
                                image, a crop whose IoU with some box is at
                                least 0.1, 0.3, 0.5, 0.7 or 0.9, any crop}
                                drawn uniformly; up to 50 trials of a crop
                                of 0.3..1 of each side, aspect w/h in
                                [0.5, 2], kept when some box's centre lies
                                in it and its IoU with such a box meets the
                                minimum (else the whole image); boxes whose
                                centre lies outside the crop dropped, the
                                rest clipped; resized to the output (the
                                aspect is not kept), colour jitter, flip;
                                with ssd_expand, SSD's zoom-out first     */
} coordl_train_crop;

/* What an item's label is, config field labels. */
typedef enum {
    COORDL_LABELS_CLASS = 0, /* default: one int32 class per item (batch.labels) */
    COORDL_LABELS_BOXES = 1  /* object detection: Darknet/YOLO label files,
                                "class cx cy w h" per line, normalized to
                                the image: for .../images/.../x.jpg (or
                                JPEGImages) the file .../labels/.../x.txt;
                                in tar shards the sample's .txt member.
                                Read and checked at coordl_open. Each row's
                                boxes follow its pixels through the crop:
                                batch.boxes and batch.nboxes. A list file's
                                lines may then be bare paths (Darknet's
                                train.txt). See docs/detection.md          */
} coordl_labels;

/* Memory layout of batch.data. */
typedef enum {
    COORDL_F32_NCHW = 0, /* float, planar, normalized: (x/255 - mean) / std
                            (channels = 1: one plane, no interleaving)    */
    COORDL_U8_NHWC = 1,  /* uint8, interleaved RGB, not normalized          */
    COORDL_F32_NHWC = 2, /* float, interleaved, normalized                  */
    COORDL_U8_NCHW = 3,  /* uint8, planar, not normalized                   */
    COORDL_I32 = 4,      /* int32 tokens (COORDL_PIPE_TOKENS; set for you)  */
    COORDL_F32 = 5       /* float samples (COORDL_PIPE_AUDIO; set for you)  */
} coordl_layout;

/* What a worker does with an item it cannot read or decode. */
typedef enum {
    COORDL_BAD_FAIL = 0,      /* coordl_next returns COORDL_ERR_CORRUPT,
                                 COORDL_ERR_IO or (an image format coordl
                                 does not decode) COORDL_ERR_UNSUPPORTED
                                 for that batch                             */
    COORDL_BAD_SUBSTITUTE = 1 /* the row is filled from a deterministic
                                 substitute item; counted in bad_samples and
                                 logged                                     */
} coordl_bad_policy;

/* Cache admission policy. MINIO is the product; LRU exists to compare. */
typedef enum {
    COORDL_CACHE_MINIO = 0, /* admit until full, never evict               */
    COORDL_CACHE_LRU = 1    /* evict least recently used (comparison only) */
} coordl_cache_policy;

/* Page-locking of the cache slab and the batch ring. */
typedef enum {
    COORDL_PIN_TRY = 0,     /* lock if allowed, else ordinary memory (logged) */
    COORDL_PIN_OFF = 1,     /* never lock                                     */
    COORDL_PIN_REQUIRED = 2 /* fail coordl_open if locking is not allowed     */
} coordl_pin_mode;

typedef enum {
    COORDL_LOG_ERROR = 0,
    COORDL_LOG_WARN = 1,
    COORDL_LOG_INFO = 2,
    COORDL_LOG_DEBUG = 3
} coordl_log_level;

/* Log callback. Called from the consumer thread, worker threads and
 * coordl's own threads (a group's member thread, the MPI peer thread),
 * possibly concurrently; msg is valid only during the call. */
typedef void (*coordl_log_fn)(void *user, coordl_log_level level,
                              const char *msg);

/* Allocation hooks for the library's ordinary allocations (handle, index,
 * per-worker scratch, every allocation of stb_image while it decodes a PNG,
 * BMP, PPM/PGM or TGA, the MPI peer thread's send and reply buffers and its
 * cache map, DS-Analyzer's buffers and the report's whatif array, which
 * coordl_report_free returns to the same hooks). All three or none.
 * They may be called from worker threads concurrently, and from the thread
 * calling coordl_sample_transform. The large arenas (cache slab, batch
 * ring) are mapped with mmap so that they can be page-locked and
 * NUMA-placed; they do not go through these hooks. libjpeg allocates with
 * malloc (it has no hook); its memory is bounded by max_decode_bytes
 * through its memory manager. */
typedef struct {
    void *(*malloc_fn)(void *user, size_t bytes);
    void *(*realloc_fn)(void *user, void *ptr, size_t bytes);
    void (*free_fn)(void *user, void *ptr);
    void *user;
} coordl_allocator;

/* Called once per arena (cache slab, batch ring) after it is mapped, so that
 * the trainer can register it with its accelerator runtime (for example
 * cudaHostRegister). Return 0 on success; a non-zero return is logged and the
 * open goes on. Called again with register_it = 0 just before the arena is
 * unmapped: every registration is matched by exactly one unregistration.
 * In a coordinated group the arenas are the cache slab and the ring inside
 * the shared object, registered once by each member (each maps them at its
 * own address). coordl_set growing the ring replaces the ring arena: the old
 * one is unregistered, then the new one registered (batch.data moves). */
typedef int (*coordl_pin_fn)(void *user, void *addr, size_t bytes,
                             int register_it);

/* Where coordl's bytes come from: a table of callbacks, as SQLite's VFS.
 * Every byte coordl reads from storage goes through it: image, audio and
 * token items, list files, token shards, tar shards and their headers.
 * (Listing a folder - an ImageFolder tree, a folder of shards, a glob -
 * still uses the local file system's readdir/glob; the files found are
 * read through the table.) cfg.io = NULL uses the built-in POSIX reader
 * (coordl_io_posix()). Use it to read from an object store, HDFS, an
 * encrypted or remote store, or to inject faults in tests.
 *
 *   open:    open `path` for reading; store an opaque handle in *file and
 *            the size in bytes in *size. Return 0, or a negative errno
 *            (-ENOENT, -EACCES, ...): coordl reports strerror of it with
 *            the path. Called once per item read (and once per file at
 *            indexing), so a remote reader may want to cache connections.
 *   read_at: read up to len bytes at offset into buf. Return the bytes
 *            read (fewer than len only at the end of the file; coordl
 *            also loops over short reads), or a negative errno. -EINTR is
 *            retried (a bounded number of times); a return above len, or
 *            a negative value that is not an errno, is treated as an I/O
 *            error naming the file, never trusted.
 *   close:   release the handle. Called exactly once per successful open.
 *   user:    passed to every callback.
 *
 * Thread safety: the callbacks are called from several threads at once
 * (worker threads, the read-ahead threads, and the thread calling
 * coordl_open or coordl_sample_transform), on different handles and on
 * the same file opened more than once; they must be safe for that. coordl
 * never uses one handle from two threads at a time. The table and `user`
 * must stay valid until coordl_close returns. */
typedef struct coordl_io {
    void *user;
    int (*open)(void *user, const char *path, void **file, uint64_t *size);      /* 0 or -errno */
    int64_t (*read_at)(void *user, void *file, void *buf, uint64_t len, uint64_t offset); /* bytes read, or -errno */
    void (*close)(void *user, void *file);
} coordl_io;

/* Reads in flight without a thread each (issue 24): the asynchronous form
 * of a coordl_io, for a reader that can keep many reads outstanding on its
 * own machinery (an object store client on an event loop, io_uring, a
 * request queue). With cfg.io_async set, the read-ahead hands it the items
 * it reads ahead, readahead_items of them in flight at most, from one I/O
 * thread, instead of one blocking read_at per I/O thread: depth 512 is 512
 * reads, not 512 threads. Everything else (the index scan at open, list
 * files, token shards, an item a worker reads because the read-ahead did
 * not reach it, a retry of a grown file) still goes through cfg.io, which
 * must be set too. A new type, not new members of coordl_io (see "Stable
 * ABI"); it never changes.
 *
 *   read: start reading len bytes at offset of `path` into buf (an item:
 *         a whole file, path as cfg.io's open gets it, at offset 0; or a
 *         tar shard's member, at the member's offset). Return 0 when the
 *         read is started: then done(token, result) must be called exactly
 *         once, with the bytes read (fewer than len only at the end of
 *         the file) or a negative errno, from any thread, possibly before
 *         read returns. Return a negative errno when it is not started
 *         (done is never called): coordl then reads the item through cfg.io
 *         on an I/O thread (-ENOTSUP for a path this reader leaves to
 *         cfg.io, say). buf stays valid and untouched by coordl until done.
 *   done: cheap (a lock and a signal): call it from any thread (inside
 *         read too), but not under a lock the reader's read takes; never
 *         call a coordl function from it.
 *   user: passed to read.
 *
 * A result above len, or a negative value that is not an errno, is an I/O
 * error naming the item, never trusted; a file that grew since it was
 * indexed is read again through cfg.io. A worker waits io_timeout_ms at
 * most for a read's done (from its start), then reads the item through
 * cfg.io (one warning per handle); until that done comes the read-ahead
 * cannot pass its entry, and later items are read by the workers. coordl_close
 * waits for the done of every read it started (buf is coordl's memory)
 * until io_timeout_ms pass with no read started or ended (from the call
 * on), then logs an error and leaves that memory mapped rather than free
 * memory a late read would write to. Thread safety: a handle never calls
 * read from two threads at once (several handles may); the table and
 * `user` must stay valid until coordl_close returns. Private loaders only: a coordinated group
 * reads no items ahead (docs/storage.md). */
typedef void (*coordl_io_done_fn)(void *token, int64_t result);
typedef struct coordl_io_async {
    void *user;
    int (*read)(void *user, const char *path, void *buf, uint64_t len, uint64_t offset, coordl_io_done_fn done,
                void *token); /* 0: started; or -errno: not started */
} coordl_io_async;

/* Configuration. Get one from coordl_config_default() and change what you
 * need: every field has a sane default, and new fields never break callers. */
typedef struct coordl_config {
    /* --- source ------------------------------------------------------- */
    const char *source;       /* ImageFolder root (root/<class>/<file>, classes
                                 sorted by name are labels 0..K-1), or a list
                                 file of "path<TAB>label" lines (paths relative
                                 to the list file's folder). Required.
                                 A list label is the text after the line's
                                 last TAB: decimal digits only (no sign, no
                                 spaces, nothing else), 0..2147483646, so
                                 the class count fits an int32; LF or CRLF;
                                 empty lines skipped; a path may hold any
                                 byte but NUL. Another line fails
                                 coordl_open (COORDL_ERR_INVALID, naming the
                                 line). Only regular files are read: a FIFO
                                 or device in place of an item, shard or
                                 list file is refused (COORDL_ERR_IO), never
                                 waited on.
                                 Or WebDataset-style tar shards: a .tar file,
                                 a folder holding .tar files and no
                                 subfolder, a glob ("/data/train-*.tar",
                                 for a path that does not exist as such), or
                                 a list file whose lines are .tar paths.
                                 Members are grouped by key (the path up to
                                 the first dot of its last component); an
                                 item is a sample's first image (audio:
                                 .wav) member; its label is the sample's
                                 .cls text, or, when no sample has a .cls,
                                 the first folder of its key numbered as an
                                 ImageFolder numbers classes (and items in an
                                 ImageFolder's order, so a tar of a tree
                                 gives the tree's batches). A corrupt or
                                 truncated shard fails coordl_open
                                 (COORDL_ERR_CORRUPT naming shard and
                                 offset). The item path is "shard:member".
                                 Shards may be remote (docs/remote.md):
                                 http(s):// URLs, s3://bucket/key, brace
                                 ranges of either, and s3://bucket/prefix/
                                 (a trailing '/': every .tar object under
                                 it, listed); s3:// reads its endpoint and
                                 credentials from the AWS_* variables. */
    coordl_pipeline pipeline; /* default COORDL_PIPE_TRAIN                   */

    /* --- batches ------------------------------------------------------ */
    uint32_t batch_size; /* rows per batch; default 32                       */
    int drop_last;       /* 1: drop an epoch's last partial batch; default 0 */
    int shuffle;         /* a coordl_shuffle: COORDL_SHUFFLE_OFF (0), _FULL
                            (1, the default: a fresh permutation per
                            epoch) or _SHARD_WINDOW (2); other values are
                            COORDL_ERR_INVALID                              */
    uint64_t seed;       /* every random choice derives from (seed, epoch,
                            item); default 0                                 */

    /* --- image output ------------------------------------------------- */
    uint32_t out_w, out_h; /* default 224 x 224                             */
    coordl_layout layout;  /* default COORDL_F32_NCHW                       */
    float mean[3], std[3]; /* default ImageNet's (0.485 0.456 0.406) and
                              (0.229 0.224 0.225); float layouts only        */
    float scale_min, scale_max; /* RandomResizedCrop area range; 0.08..1    */
    float ratio_min, ratio_max; /* aspect ratio range; 3/4..4/3             */
    int flip;                   /* horizontal flip with p = 0.5; default 1  */
    /* Darknet-style extra augmentation (train pipeline), all off by
     * default. Drawn per (seed, epoch, item) like everything else.
     * rand_scale(s) is Darknet's: a factor uniform between 1 and s,
     * inverted with p = 0.5, so it lies in [min(s, 1/s), max(s, 1/s)]:
     * 0.75 and 1/0.75 are the same setting, and only 0 and 1 are off. The
     * colour change is Darknet's distort_image: to HSV, saturation and value
     * scaled, hue shifted (wrapping), back to RGB, clamped to [0, 255]. */
    float hue;        /* hue shift uniform in [-hue, hue] (fraction of the
                         colour wheel, 0..0.5; Darknet's default 0.1)       */
    float saturation; /* scale saturation by rand_scale(saturation); 0 or
                         1 = off, else 0.01..100                            */
    float exposure;   /* same for value (brightness)                        */
    float rotate_deg; /* rotate by an angle uniform in [-rotate_deg,
                         rotate_deg] degrees: COORDL_CROP_RESIZED about the
                         crop centre, edges extended; COORDL_CROP_DARKNET
                         Darknet's rotation, black outside the image        */
    float aspect;     /* rand_scale(aspect): COORDL_CROP_RESIZED stretches
                         the crop's width by it; COORDL_CROP_DARKNET is
                         Darknet's aspect (the image stretched by it before
                         the crop); 0 or 1 = off, else 0.01..100            */
    uint32_t max_out_w, max_out_h; /* largest out size coordl_set may ask
                         for without reallocating the ring; 0 = out_w/out_h */
    uint32_t max_batch_size;       /* same for batch_size; 0 = batch_size   */

    /* --- tokens (COORDL_PIPE_TOKENS) ----------------------------------- */
    uint32_t seq_len; /* tokens per row (llm.c's T); default 1024           */

    /* --- audio (COORDL_PIPE_AUDIO) ------------------------------------- */
    uint32_t audio_samples; /* samples per row; default 16000               */
    uint32_t audio_rate;    /* resample to this rate (Hz); 0 = keep the
                               file's rate                                  */

    /* --- cache -------------------------------------------------------- */
    uint64_t cache_bytes;             /* MinIO budget of encoded bytes; 0 = no
                                         cache; default 0                    */
    coordl_cache_policy cache_policy; /* default COORDL_CACHE_MINIO          */
    coordl_pin_mode cache_pin;        /* default COORDL_PIN_TRY              */

    /* --- threads and placement (hwloc) --------------------------------- */
    int threads;               /* worker threads; 0 = one per core of the
                                  chosen set, less reserve_cores; for
                                  COORDL_PIPE_TOKENS 0 means none: a token
                                  batch is a copy of windows already in
                                  memory (read ahead or cached), made on
                                  the trainer's thread inside coordl_next,
                                  cheaper than a hand-off to a worker; set
                                  1 or more for workers. On Linux workers run under
                                  SCHED_BATCH: a woken worker does not
                                  preempt the thread that woke it (the
                                  trainer); same CPU share otherwise        */
    uint32_t prefetch_batches; /* batch slots in the ring; default 4. For
                                  token pipelines use 16 or more: their
                                  slots are small, and the depth keeps the
                                  worker ahead of a trainer that shares
                                  busy cores (bench/run.sh llmc: p99 inside
                                  coordl_next_into of milliseconds with 4
                                  slots, tens of microseconds with 16)     */
    /* Which cores and memory node the workers, the cache and the ring use,
     * in order of precedence: cpuset, numa_node, pci_bus_id, else every
     * core the process may use. Workers are bound one per core (physical
     * cores before hyper-threads); the cache slab and the ring are bound to
     * the chosen node, or interleaved when the set spans several nodes. */
    const char *cpuset;     /* OS PU indices, e.g. "0-7,16-23"; NULL: unset  */
    int numa_node;          /* OS index of a NUMA node; -1 (default): unset */
    const char *pci_bus_id; /* the accelerator the batches go to, e.g.
                               "0000:3b:00.0": its local node and cores;
                               NULL: unset                                  */
    int reserve_cores;      /* leave the first N cores of the chosen set to
                               the trainer's own threads; default 0         */
    int bind;               /* 1 (default): bind workers and memory as
                               chosen; 0: choose and report, bind nothing   */
    const char *topology;   /* NULL (default): this machine. Otherwise an
                               hwloc XML file, or "synthetic:<description>"
                               (hwloc's synthetic syntax, e.g. "synthetic:
                               package:2 core:8 pu:2"): the placement is
                               computed on that topology and reported in the
                               stats, but nothing is bound (for tests and
                               for planning a deployment)                   */

    /* --- coordinated prep (sibling processes on one machine) ----------- */
    const char *group;    /* NULL (default): a private loader. A name
                             ([A-Za-z0-9._-], at most 200 characters): the
                             processes that open with the same group share
                             one stream, one ring and one MinIO cache in a
                             POSIX shm object /coordl-<group> (mode 0600),
                             and a tar-shard source's index, scanned by the
                             first member (/dev/shm/coordl-<group>.index;
                             docs/index.md)                                 */
    int group_size;       /* members to wait for at open; default 1        */
    int group_timeout_ms; /* bound on waiting for members (and for the
                             group's lock) at open, and on a member's
                             silence (stopped, hung) before the others drop
                             it; a dropped member loses the batches it held
                             (their slots are refilled) and its next
                             coordl_next returns COORDL_ERR_GROUP; 10000  */
    int group_late_join;  /* 1: a member opening after the group started
                             joins at the next epoch boundary; 0 (default):
                             COORDL_ERR_GROUP                              */
    void (*test_hook)(void *user, const char *point); /* called at named
                             points of the protocol, for fault-injection
                             tests: by worker threads ("row_claimed",
                             "row_written", "admitting"), by the opening
                             thread holding the group's lock ("joined"),
                             by a group's member thread each round
                             ("heartbeat"), by the read-ahead's io_uring
                             completion thread before it handles a read
                             that ended ("uring_complete"), by the
                             consumer on entering
                             coordl_release ("release") and in
                             coordl_next_into after taking the batch,
                             before copying it ("copying"), and by the MPI
                             peer thread before it serves a request
                             ("peer_serve"); NULL                          */
    void *test_hook_user;

    /* --- distributed (plain ints; rank in [0, world)) ------------------ */
    int rank, world; /* each rank gets a disjoint, equal-count share of
                        every epoch; default 0, 1                            */
    /* Partitioned MinIO cache over MPI (built with COORDL_MPI, `make
     * MPI=1`). mpi_comm points to the trainer's communicator (an MPI_Comm
     * variable: cfg.mpi_comm = &comm); coordl duplicates it, takes rank and
     * world from it, never calls MPI_Init and never assumes
     * MPI_COMM_WORLD. It needs MPI_THREAD_MULTIPLE (its own thread serves
     * peers while the trainer may call MPI), else coordl_open fails with
     * COORDL_ERR_UNSUPPORTED. coordl_open and coordl_close are collective
     * over the communicator (open fails with COORDL_ERR_PEER on every rank
     * when the ranks index different datasets). Each rank caches its share
     * of the first whole epoch it trains: epoch 0, or, after coordl_seek
     * (resuming from a checkpoint), the epoch sought, or the one after it
     * when the seek lands mid-epoch; then one map exchange, and nothing
     * more is admitted. NULL (default): no peers. */
    void *mpi_comm;
    int peer_timeout_ms; /* bound on waiting for a peer's items before
                            reading them from storage; default 2000         */

    /* --- bad input ---------------------------------------------------- */
    coordl_bad_policy on_bad_sample; /* default COORDL_BAD_FAIL             */
    uint64_t max_pixels;             /* larger images are bad samples;
                                        default 100,000,000                  */
    uint64_t max_item_bytes;         /* larger files are bad samples;
                                        default 256 MiB                      */

    /* --- hooks -------------------------------------------------------- */
    coordl_log_fn log;    /* default: write to stderr                       */
    void *log_user;
    coordl_log_level log_level; /* messages above this level are dropped;
                                   default COORDL_LOG_WARN                  */
    coordl_allocator allocator; /* default: malloc/realloc/free             */
    coordl_pin_fn pin;          /* default NULL                             */
    void *pin_user;

    /* --- appended in 0.4 (fields are only ever added here, at the end) -- */
    int token_order; /* COORDL_PIPE_TOKENS: a coordl_token_order; default
                        COORDL_TOKENS_WINDOWS                                */
    int train_crop;  /* COORDL_PIPE_TRAIN: a coordl_train_crop; default
                        COORDL_CROP_RESIZED (torchvision's RandomResizedCrop) */
    uint32_t min_crop, max_crop; /* COORDL_CROP_DARKNET: the range of the
                        shorter side, in pixels at the out_w given at open
                        (Darknet's min_crop/max_crop); when coordl_set
                        changes the size both scale with out_w as Darknet's
                        train_classifier scales them (min_ratio x size).
                        0 = Darknet's defaults: out_w and 2 x out_w      */
    uint64_t max_decode_bytes; /* memory one image's decode may take: the
                                  decoder's own buffers (libjpeg's
                                  coefficient arrays and strips, stb_image's
                                  zlib and pixel buffers) plus coordl's
                                  decoded region and resampling window. A
                                  larger need, known from the header before
                                  decoding (or met by stb's allocations), is
                                  a bad sample (COORDL_ERR_CORRUPT naming the
                                  file and the limit). 0 = the default,
                                  256 MiB                                   */
    uint64_t max_audio_samples; /* COORDL_PIPE_AUDIO: source samples
                                  (frames x channels) one item's crop may
                                  read; only the kept window is converted
                                  and resampled, so this bounds the work per
                                  item whatever the file's rate or length.
                                  More is a bad sample (COORDL_ERR_CORRUPT
                                  naming the file and the limit). 0 = the
                                  default, 2^26 (about 0.1 s of work)       */
    const coordl_io *io; /* storage: the reader every storage byte goes
                            through (see coordl_io); NULL (default): the
                            built-in POSIX reader                          */
    /* JPEG random access (image pipelines, MinIO cache). A cached JPEG is
     * rewritten losslessly (coefficients untouched) as baseline Huffman
     * with restart markers and a row index, so that later epochs decode
     * only the MCUs that cover each crop (figures: bench/README.md).
     * Batches are byte-identical with it on and
     * off. Costs: a rewrite takes about 1.3x a full decode of the image
     * (3x for progressive, arithmetic and optimized-table sources), paid
     * within jpeg_rewrite_budget; rewritten items take 1-4% more cache
     * bytes, reserved only out of budget the dataset does not need (a
     * budget of exactly the dataset's size caches every item, unrewritten
     * unless the rewrite fits in place). Items not in the cache take the
     * plain path. */
    int jpeg_random_access;    /* 1 (default): rewrite cached JPEGs; 0: off */
    float jpeg_rewrite_budget; /* b: over any few seconds of a worker's CPU
                                  time, rewrites take at most b of it beyond
                                  what the converted items saved in it, so
                                  throughput stays >= (1 - b) of its speed
                                  without random access, epoch by epoch,
                                  and rises as items convert; default 0.08;
                                  1: rewrite every cached JPEG when first
                                  read; 0: only in idle time (workers that
                                  would wait for a free slot rewrite for
                                  free whatever b). Range 0..1              */
    /* Read-ahead: the items the workers will claim next are known (the
     * permutation is a pure function of seed and epoch), so I/O threads
     * keep up to readahead_items of them in flight ahead of the claims, in
     * claim order, into one arena the workers decode from: storage latency
     * is hidden without more prep threads. Cache hits and items a peer
     * serves are not read ahead. Not used in a coordinated group (each
     * member would read every item). */
    uint32_t readahead_items;   /* depth; 0 = off (workers read as they
                                   claim); default 32; at most 4096. Off
                                   for COORDL_PIPE_TOKENS with threads 0
                                   (the trainer's thread reads each window
                                   from a shard it keeps open; the kernel
                                   reads the shard's pages ahead)        */
    uint32_t readahead_threads; /* I/O threads at most (one per read in
                                   flight, started while every one is
                                   inside the reader and the window has
                                   room; 256 KiB stacks); 0 (default) =
                                   the depth; at most 4096. With io_uring
                                   (the built-in reader on local files:
                                   docs/storage.md) one I/O thread and the
                                   ring's completion thread, whatever this
                                   says                                 */
    uint64_t readahead_bytes;   /* arena bound: items in flight never take
                                   more; one larger than it is read by its
                                   worker. 0 (default) = 2 x depth x the
                                   mean item size, within 4..64 MiB (and
                                   at most the dataset + 1 MiB)           */
    /* Colour planes of an image row (image pipelines; tokens and audio
     * take 0 only). 3 = RGB; 1 = grey, one plane (a row is h x w values,
     * batch.c = 1, so a 1-channel model's input is exactly a batch):
     * the ITU-R BT.601 luma of the augmented RGB row, rounded to 8 bits,
     * Y = (299 R + 587 G + 114 B + 500) / 1000 in integers over the 8-bit
     * R, G, B a U8 layout would store; so a grey batch is the luma of
     * the RGB batch of the same run, byte for byte, and a grey image
     * (decoded as R = G = B) keeps its stored values. Float layouts
     * normalize Y with mean[0] and std[0]. The cache holds encoded items
     * either way; a coordinated group's members must agree on it.
     * 0 (default) = 3 (coordl_get_config reports 3). Appended in 0.4. */
    uint32_t channels;
    /* --- appended after 0.4.0: remote sources (docs/remote.md) --------- */
    uint32_t io_timeout_ms;     /* bounds each request to an http(s)://
                                   source: no complete answer within it is
                                   an error naming the URL (5xx and dropped
                                   connections are retried, at most 5
                                   times, each attempt so bounded); also
                                   bounds the wait for an io_async read's
                                   done (see coordl_io_async); 0 = the
                                   default, 30000                          */
    /* --- object detection (docs/detection.md); appended after 0.4 ------ */
    int labels;         /* a coordl_labels; default COORDL_LABELS_CLASS    */
    uint32_t max_boxes; /* COORDL_LABELS_BOXES: boxes per row (Darknet's
                           max_boxes / num_boxes); an item's boxes beyond
                           it are dropped at open, counted in
                           coordl_stats.boxes_dropped, logged once; 0 =
                           90 (Darknet's yolo layer default), at most 4096 */
    float jitter;       /* COORDL_CROP_DARKNET_BOXES: Darknet's jitter: the
                           new aspect is (w + u1) / (h + u2), u1, u2
                           uniform in +-jitter x w, +-jitter x h; 0 (the
                           default) = off, else up to 0.9              */
    float place_scale_min, place_scale_max; /* COORDL_CROP_DARKNET_BOXES:
                           the placed image's binding side is the output's
                           times a factor uniform in [min, max]; 0 (the
                           default) = 1 (pjreddie's Darknet); 0.05..4     */
    int32_t num_classes; /* COORDL_LABELS_BOXES: a box whose class is not
                           below it is a bad label; 0 (default) = no
                           bound (only negative classes are bad)         */
    /* --- appended after 0.4.0: a saved index (docs/index.md) ---------- */
    const char *index_path;     /* tar-shard sources: a file holding the
                                   index of the source. Absent: open scans
                                   the shards and writes it (a temporary
                                   file, fsync, rename; a lock file
                                   "<index_path>.lock" beside it makes
                                   processes opening at once scan once).
                                   Present and recording this source, its
                                   shards' names, sizes and mtimes (ETags
                                   for http(s)://): open loads it instead
                                   of scanning. Stale, foreign or corrupt:
                                   rescanned and rewritten, with a log
                                   line. Items then cost 24 resident bytes
                                   each; coordl_item_path reads names from
                                   the file, mapped (it must stay in place
                                   while the handle is open). Other
                                   sources ignore it (a log line). With
                                   mpi_comm, rank 0 alone scans or loads
                                   and the index reaches the other ranks
                                   by MPI_Bcast, whether or not index_path
                                   is set. NULL (default): scan, save
                                   nothing. Read at open only: the handle
                                   keeps no pointer to it                  */
    float ssd_expand;           /* COORDL_CROP_SSD: SSD's zoom-out: with
                                   probability 0.5 the image is placed at
                                   a uniform place on a grey (0.5) canvas
                                   whose sides are a uniform 1..ssd_expand
                                   times its own, before the crop is drawn
                                   on the canvas (SSD uses 4: small
                                   objects); 0 (default) = off; 1..16     */
    /* --- appended after 0.4.0: the shard-window order (docs/shuffle.md) */
    uint32_t shuffle_window_shards; /* shuffle = COORDL_SHUFFLE_SHARD_WINDOW:
                                   shards per window; 0 (default) = 8
                                   (coordl_get_config reports the value in
                                   force); a value of at least the shard
                                   count makes one window of the whole
                                   set. Ignored by the other orders        */
    /* --- appended after 0.4.0: reads in flight without a thread each -- */
    const coordl_io_async *io_async; /* the read-ahead's reads of items
                                   through it (see coordl_io_async): one
                                   I/O thread keeps readahead_items in
                                   flight. Needs io. NULL (default): a
                                   caller's reader takes an I/O thread per
                                   read in flight (readahead_threads)     */
} coordl_config;

/* A ready batch: a view into a ring slot, valid until coordl_release(). */
typedef struct coordl_batch {
    uint32_t n;           /* rows in this batch (the last batch of an epoch
                             may be short unless drop_last)                 */
    void *data;           /* n x c x h x w (NCHW) or n x h x w x c (NHWC)   */
    size_t data_bytes;    /* bytes of data for the n rows                   */
    int32_t *labels;      /* n class labels (tokens: the shard index)       */
    int32_t *targets;     /* tokens: n x seq_len inputs shifted by one;
                             NULL for other pipelines                       */
    uint64_t *ids;        /* n dataset item ids (see coordl_item_path)       */
    uint64_t epoch;       /* epoch this batch belongs to                    */
    uint64_t index;       /* batch index within the epoch                   */
    uint32_t c, h, w;     /* shape of one row                               */
    coordl_layout layout; /* element type and order of data                 */
    uint32_t slot_;       /* internal: ring slot, do not change             */
    uint32_t gen_;        /* internal: the slot's generation when handed
                             out, so a stale copy releases nothing; it
                             fills what was tail padding: the struct keeps
                             its size and every offset                      */
    /* --- appended after 0.4: labels = COORDL_LABELS_BOXES (else NULL) -- */
    const float *boxes;     /* n x max_boxes x 5 floats: x, y, w, h, class;
                               (x, y) the box centre, all normalized to the
                               output image (0..1, after the crop and flip),
                               the row's boxes first, the rest zero         */
    const uint32_t *nboxes; /* n: boxes in each row (0..max_boxes)          */
} coordl_batch;

/* Counters since open. Times are nanoseconds of monotonic clock. Worker
 * times are summed over all workers. */
typedef struct coordl_stats {
    uint64_t stall_ns;        /* caller's time inside coordl_next and
                                 coordl_next_into: waiting for the batch
                                 and the calls' own work (release, seek,
                                 set and every other call are not in it)  */
    uint64_t compute_ns;      /* caller's time between those calls: its
                                 step, and its release/seek/set calls      */
    uint64_t batches;         /* batches returned by coordl_next            */
    uint64_t items;           /* rows prepared by the workers               */
    uint64_t cache_hits;      /* item fetches served by the cache           */
    uint64_t cache_misses;    /* item fetches that went to storage          */
    uint64_t cache_hit_bytes; /* encoded bytes served by the cache          */
    uint64_t cache_bytes_used;  /* bytes held in the cache now              */
    uint64_t cache_items;       /* items held in the cache now              */
    uint64_t cache_bytes_budget;/* the budget in force: cache_bytes as open
                                   clamped it (a MinIO budget to what the
                                   dataset can fill, any budget to 3/4 of
                                   the machine's memory, a group's to what
                                   /dev/shm holds); see cache_bytes_requested */
    uint64_t dataset_bytes;     /* encoded bytes of the whole dataset (a set
                                   indexed as the shard window reaches it:
                                   0 until every shard is counted, by the
                                   end of the first epoch read)           */
    uint64_t storage_bytes;     /* bytes read from storage                  */
    uint64_t storage_reads;     /* files read from storage                  */
    uint64_t bad_samples;       /* rows substituted for bad items           */
    uint64_t read_ns;           /* worker time fetching (cache or storage)  */
    uint64_t read_cache_ns;     /*   of which: served by the cache          */
    uint64_t read_storage_ns;   /*   of which: read from storage            */
    uint64_t decode_ns;         /* worker time decoding                     */
    uint64_t augment_ns;        /* worker time cropping/resizing/normalizing */
    uint64_t wait_slot_ns;      /* worker time waiting for a free ring slot */
    uint32_t threads;           /* worker threads running                   */
    uint64_t pinned_bytes;      /* bytes of cache and ring page-locked      */
    /* placement chosen at open */
    char placement_cpus[128];   /* PUs the workers run on, e.g. "2-7"        */
    char reserved_cpus[128];    /* PUs left to the trainer (reserve_cores)   */
    int32_t placement_node;     /* NUMA node of the cache and ring; -1 when
                                   several (interleaved) or unknown          */
    uint32_t placement_nodes;   /* NUMA nodes the chosen set spans           */
    uint32_t threads_bound;     /* workers whose affinity was set            */
    int32_t memory_bound;       /* 1: cache and ring bound to the node(s)    */
    int32_t worker_cpu[64];     /* PU planned for worker i (first 64), bound or
                                   not (see threads_bound); -1: none         */
    uint64_t items_prepared;    /* rows this process's workers prepared (in a
                                   group: its share of the group's work)    */
    uint32_t group_members;     /* live members of the group now (1 alone)   */
    uint64_t peer_hits;         /* items served by a peer's cache (MPI)      */
    uint64_t peer_bytes;        /* bytes received from peers                 */
    uint64_t peer_fallbacks;    /* peer fetches that failed or timed out and
                                   went to storage                          */
    uint64_t peer_served;       /* items this rank served to peers           */
    /* derived, for the analysis (0 when not yet measurable) */
    double storage_mb_per_s;    /* storage bytes / storage read time, per
                                   worker (one reader's bandwidth)         */
    double bytes_per_item;      /* mean encoded bytes fetched per item      */
    double prep_us_per_item;    /* mean worker time per item (fetch, decode,
                                   augment)                                 */
    /* --- appended in 0.4: JPEG random access (jpeg_random_access) ------ */
    uint64_t jpeg_rewrites;     /* cached JPEGs rewritten with restart markers */
    uint64_t jpeg_rewrites_idle;/*   of which while workers would have idled */
    uint64_t jpeg_rewrite_ns;   /* worker time rewriting (not in read/decode/
                                   augment_ns)                              */
    uint64_t jpeg_rewrite_failures; /* rewrites that failed or did not fit:
                                   those items stay as they were            */
    uint64_t jpeg_spliced;      /* samples decoded from a spliced crop of a
                                   rewritten item                           */
    uint64_t jpeg_rewritten_items; /* items held rewritten in the cache now */
    uint64_t cache_item_bytes;  /* the cached items' bytes as read; the rest
                                   of cache_bytes_used is what rewrites
                                   added and the room kept for them         */
    /* read-ahead (appended in 0.4) */
    uint64_t readahead_reads;   /* items the read-ahead threads read        */
    uint64_t readahead_read_ns; /* their time in the reader, summed (mean
                                   per read: the storage latency)           */
    uint64_t readahead_skips;   /* positions not read ahead: cache hits,
                                   peer items, items too large              */
    uint64_t readahead_hits;    /* rows whose bytes a worker found read
                                   ahead (or in flight)                     */
    uint64_t readahead_wait_ns; /* worker time waiting for a read in flight */
    /* --- appended after 0.4.0: what is in force, and the stall as a share */
    uint64_t cache_bytes_requested; /* cache_bytes as the config asked       */
    uint32_t threads_requested; /* threads as the config asked (0: auto);
                                   `threads` is what runs: at most 4 per
                                   processing unit (a WARN log says so)     */
    uint32_t pad_;              /* zero                                      */
    double stall_fraction;      /* stall_ns / (stall_ns + compute_ns): the
                                   share of the trainer's time spent waiting
                                   in coordl_next (0 before the first call)  */
    /* --- appended after 0.4.0: remote sources (docs/remote.md) -------- */
    uint64_t remote_requests;   /* HTTP requests sent, retries included     */
    uint64_t remote_retries;    /* of them, retries (5xx, 429, dropped or
                                   cut-short connections)                   */
    uint64_t remote_bytes;      /* body bytes received                      */
    uint64_t remote_max_in_flight; /* most requests in flight at once, on
                                   the one event-loop thread                */
    uint32_t readahead_io_threads; /* I/O threads the read-ahead started    */
    uint32_t pad2_;             /* zero                                      */
    /* --- appended after 0.4: labels = COORDL_LABELS_BOXES ------------- */
    uint64_t boxes_dropped;     /* boxes beyond max_boxes, dropped at open  */
    uint64_t bad_labels;        /* items whose label file is missing, empty
                                   or malformed (found at open; each is a
                                   bad sample when its row is prepared)     */
    /* --- appended after 0.4.0: the sampler (docs/shuffle.md) --------- */
    uint64_t sampler_bytes;     /* memory the order's tables hold: 0 for
                                   COORDL_SHUFFLE_OFF and _FULL; per-shard
                                   tables for _SHARD_WINDOW and llm.c's
                                   order (fixed at open)                    */
    /* --- appended after 0.4: local reads in flight (docs/storage.md) -- */
    uint64_t readahead_max_in_flight; /* most read-ahead reads of local
                                   files in flight at once: in the
                                   io_uring, or I/O threads inside the
                                   reader, or reads started through
                                   cfg.io_async and not yet done (remote:
                                   remote_max_in_flight)                    */
    uint64_t readahead_ring_reads; /* of readahead_reads, those the page
                                   cache could not answer at once, read in
                                   the io_uring                             */
    uint32_t readahead_uring;   /* 1: the read-ahead reads local files
                                   through io_uring; 0: on I/O threads (a
                                   caller's reader, COORDL_NO_URING,
                                   COORDL_URING=0, a kernel refusing it)    */
    uint32_t readahead_late_reads; /* reads started through cfg.io_async
                                   that a worker waiting for one gave up on
                                   after io_timeout_ms: their rows were read
                                   through cfg.io, and the read-ahead waits
                                   at each until its done comes (0: the
                                   reader keeps its contract)                */
} coordl_stats;

/* Per-epoch counters (the last 16 epochs are kept). */
typedef struct coordl_epoch_stats {
    uint64_t epoch;
    uint64_t items;           /* rows prepared for this epoch               */
    uint64_t cache_hits, cache_misses;
    uint64_t cache_hit_bytes; /* encoded bytes served from the cache        */
    uint64_t fetch_bytes;     /* encoded bytes fetched (cache + storage)    */
    uint64_t storage_bytes;
    uint64_t bad_samples;
    uint64_t read_cache_ns, read_storage_ns, decode_ns, augment_ns; /* worker time */
    uint64_t stall_ns;        /* caller's time inside coordl_next (and
                                 coordl_next_into) for it                  */
    uint64_t batches;         /* batches of it handed out                  */
    /* --- appended in 0.4: JPEG random access (jpeg_random_access) ------ */
    uint64_t jpeg_rewrites;   /* cached JPEGs rewritten while preparing it  */
    uint64_t jpeg_rewrite_ns; /* worker time those rewrites took            */
    uint64_t jpeg_spliced;    /* its samples decoded from a spliced crop    */
    /* --- appended after 0.4.0 ------------------------------------------- */
    uint64_t compute_ns;      /* caller's time between coordl_next calls
                                 during it                                 */
    double stall_fraction;    /* stall_ns / (stall_ns + compute_ns)        */
} coordl_epoch_stats;

/* Fills *cfg (cfg_size bytes: the caller's sizeof(coordl_config)) with
 * every field at its default. Thread safety: any thread. */
COORDL_API void coordl_config_init_sized(coordl_config *cfg, size_t cfg_size);

/* Returns a configuration with every field at its default (compiled into
 * the caller, so the returned struct has the caller's layout).
 * Thread safety: any thread. */
static inline coordl_config coordl_config_default_inline(void) {
    coordl_config cfg;
    coordl_config_init_sized(&cfg, sizeof cfg);
    return cfg;
}
#define coordl_config_default() coordl_config_default_inline()

/* Indexes the source, allocates the cache and the batch ring, starts the
 * worker threads, and starts preparing the first batches of epoch 0.
 *   cfg: the configuration (copied; strings are copied too).
 *   cfg_size: sizeof(coordl_config) of the caller (the macro passes it).
 *   out: receives the handle, or NULL on failure.
 * Returns COORDL_OK, or COORDL_ERR_INVALID for a bad configuration (missing
 * source, empty dataset, batch_size 0, out size 0, rank outside world, ...),
 * COORDL_ERR_IO for an unreadable source, COORDL_ERR_NOMEM,
 * COORDL_ERR_UNSUPPORTED for a config that sets fields this library does
 * not know (see "Stable ABI"). On failure coordl_errmsg(NULL) on the same
 * thread says what to change.
 * Thread safety: any thread; each call makes an independent handle. */
COORDL_API coordl_status coordl_open_sized(const coordl_config *cfg, size_t cfg_size, coordl **out);
#define coordl_open(cfg, out) coordl_open_sized((cfg), sizeof(coordl_config), (out))

/* Waits for the next batch in order and hands it out (zero copy).
 *   out: receives the batch view; valid until coordl_release(L, out).
 * Returns COORDL_OK with a batch; COORDL_END_OF_EPOCH once after each
 * epoch's last batch (out->n is 0; the next call starts the next epoch);
 * COORDL_ERR_CORRUPT or COORDL_ERR_IO when the batch holds a bad item and
 * on_bad_sample is COORDL_BAD_FAIL (coordl_errmsg names the file and the
 * reason; that batch is skipped and the next call returns the batch after
 * it); COORDL_ERR_INVALID on a NULL argument.
 * Up to prefetch_batches batches may be held at once; holding more than that
 * would deadlock, so coordl_next returns COORDL_ERR_INVALID instead.
 * For COORDL_PIPE_TOKENS, while the next batch is not ready the calling
 * thread prepares its rows itself (as a worker would, same bytes) rather
 * than wait for a worker that is kept off the cores.
 * out_size is the caller's sizeof(coordl_batch) (the macro passes it).
 * Thread safety: the consumer thread of L only (see the top of this file). */
COORDL_API coordl_status coordl_next_sized(coordl *L, coordl_batch *out, size_t out_size);
#define coordl_next(L, out) coordl_next_sized((L), (out), sizeof(coordl_batch))

/* Returns a batch's slot to the ring so the workers can refill it. Batches
 * may be released in any order. Releasing a batch twice, a zeroed batch, or
 * a stale copy of a batch already released (its slot has moved on: the
 * handle carries the slot's generation in gen_) is a no-op. Reads slot_ and
 * gen_ (gen_ sits in what 0.3.0 left as tail padding, inside any release's
 * coordl_batch) and clears slot_, so it takes no size. Wakes at most one
 * worker, and only once half the ring is free (the worker then refills
 * several slots; the releases in between make no system call). Its time
 * is the trainer's (compute_ns), not stall. Thread safety: the consumer thread of L only. */
COORDL_API void coordl_release(coordl *L, coordl_batch *b);

/* Copies the next batch into caller-owned buffers (ggml-opt's
 * get_batch_host, llama.cpp token buffers) instead of handing out a view.
 *   data, data_bytes: receives n rows (data_bytes >= n x row bytes).
 *   labels_or_targets, label_bytes: receives n int32 labels, or for
 *     COORDL_PIPE_TOKENS n x seq_len int32 targets, or for labels =
 *     COORDL_LABELS_BOXES n x max_boxes x 5 floats (batch.boxes: a
 *     Darknet truth matrix, d.y) followed, when label_bytes has room for
 *     them, by n uint32 box counts (batch.nboxes); may be NULL with 0.
 * Returns as coordl_next. Buffers too small for the next batch give
 * COORDL_ERR_INVALID and nothing is written or consumed. The batch's slot is
 * released before returning. The copy runs without the stream's lock; in a
 * coordinated group a member dropped while it copies (silent past
 * group_timeout_ms) may have lost the slot to a refill, so the batch is
 * checked to be still this member's after the copy: if not, the call
 * returns COORDL_ERR_GROUP with both buffers zeroed (never rows of two
 * batches). Thread safety: the consumer thread of L. */
COORDL_API coordl_status coordl_next_into(coordl *L, void *data, size_t data_bytes,
                                          void *labels_or_targets, size_t label_bytes);

/* Runtime knobs (TurboJPEG's tj3Set style). */
typedef enum {
    COORDL_PARAM_OUT_W = 1,      /* image output width                     */
    COORDL_PARAM_OUT_H = 2,      /* image output height                    */
    COORDL_PARAM_BATCH_SIZE = 3, /* rows per batch                         */
    COORDL_PARAM_OUT_SIZE = 4    /* width and height at once (square): one
                                    pause instead of two for Darknet's
                                    random resize                          */
} coordl_param;

/* Changes a parameter from the next batch coordl_next returns on: batches
 * prepared ahead are dropped and prepared again, the stream position (the
 * next item of the epoch's permutation) is kept, and batches the caller
 * holds stay valid. A new batch size cuts the rest of the current epoch
 * into batches of the new size from the current item on; batch.index keeps
 * counting, and coordl_batches_per_epoch reports the new size's count for
 * whole epochs. Sizes beyond max_out_w / max_out_h / max_batch_size need a
 * bigger ring: it is reallocated when no batch is held, otherwise
 * COORDL_ERR_INVALID (release the held batches, or set the max_* fields).
 * Random crops and flips do not change with the output size: they are drawn
 * from (seed, epoch, item) in source pixels. A change of the output size
 * alone keeps the items read ahead (readahead_items): only the dropped
 * batches' items are read again; a new batch size restarts the read-ahead.
 * Returns COORDL_OK, or COORDL_ERR_INVALID for an unknown parameter, a value
 * out of range, or a pipeline without that parameter.
 * Thread safety: the consumer thread of L. */
COORDL_API coordl_status coordl_set(coordl *L, coordl_param p, int64_t value);

/* Repositions the stream so that the next coordl_next returns batch `batch`
 * of epoch `epoch` (O(1): no batch is replayed). Batches prepared ahead are
 * dropped; batches the caller still holds stay valid until released.
 * With mpi_comm, a seek before the cache map was exchanged (a resume right
 * after open) moves what the rank caches to its share of the first whole
 * epoch from there (see mpi_comm).
 * Returns COORDL_ERR_INVALID when batch >= coordl_batches_per_epoch(L).
 * Thread safety: the consumer thread of L only. */
COORDL_API coordl_status coordl_seek(coordl *L, uint64_t epoch, uint64_t batch);

/* llm.c positions (token_order = COORDL_TOKENS_LLMC only).
 *
 * llm.c's DataLoader keeps its place as (current_shard_idx,
 * current_sample_idx), and train_gpt2.cu checkpoints exactly that pair:
 * shard_idx is the position in the epoch's shard order (the shard index
 * itself with shuffle = 0), sample_idx the number of samples (batches)
 * already taken from that shard, so the next batch is sample sample_idx of
 * it, or the first of the next shard when sample_idx equals the shard's
 * sample count. llm.c does not record the epoch; pass the epoch the
 * position belongs to: that of the last batch taken, (k - 1) /
 * coordl_batches_per_epoch(L) after k >= 1 batches, 0 for k = 0. Not k /
 * coordl_batches_per_epoch: right after an epoch's last batch llm.c's
 * place is the end of that epoch's last shard, which still belongs to the
 * finished epoch (the next epoch's batch 0 is where it leads). With
 * shuffle = 0 every epoch's order is the same but the epoch counts in
 * coordl's (epoch, batch); with shuffle = 1 the shard order depends on it.
 *
 * coordl_from_llmc turns (epoch, shard_idx, sample_idx) into the
 * (*out_epoch, *out_batch) to give coordl_seek, after which coordl_next
 * returns the batch llm.c's dataloader_next_batch would load next; a
 * position at the end of the last shard gives (epoch + 1, 0). It returns
 * COORDL_ERR_INVALID for another token order or pipeline, a shard_idx not
 * below the number of shards, or a sample_idx above that shard's sample
 * count; coordl_errmsg(L) says which.
 *
 * coordl_to_llmc is the inverse: batch `batch` of `epoch` (the next one to
 * be handed out, e.g. b.index + 1 after the last batch the trainer took)
 * as the (shard_idx, sample_idx) llm.c's dataloader_resume takes, always
 * with sample_idx below that shard's sample count. COORDL_ERR_INVALID for
 * another order or batch >= coordl_batches_per_epoch(L) (coordl_errmsg(L)
 * says which). llm.c's own place after the k-th batch (k >= 1), which is
 * what its save_state writes, is coordl_to_llmc(L, (k - 1) / bpe, (k - 1)
 * % bpe, ...) with sample_idx + 1.
 *
 * Validation loaders: llm.c calls dataloader_reset(&val_loader) before each
 * evaluation; with coordl open the validation set with shuffle = 0 and call
 * coordl_seek(V, 0, 0) there (every epoch has the same order, so batch 0 of
 * epoch 0 is where llm.c's reset puts it).
 *
 * Thread safety: any thread, while L is open (they read the index and the
 * epoch's shard order under an internal lock); an error writes
 * coordl_errmsg(L), so a call that may fail belongs on L's consumer thread
 * (where llm.c's load_state and save_state run). */
COORDL_API coordl_status coordl_from_llmc(const coordl *L, uint64_t epoch, uint64_t shard_idx,
                                          uint64_t sample_idx, uint64_t *out_epoch, uint64_t *out_batch);
COORDL_API coordl_status coordl_to_llmc(const coordl *L, uint64_t epoch, uint64_t batch,
                                        uint64_t *shard_idx, uint64_t *sample_idx);

/* Copies the counters since open into *out (out_size: the caller's
 * sizeof(coordl_stats); the macro passes it). Thread safety: any thread. */
COORDL_API void coordl_get_stats_sized(const coordl *L, coordl_stats *out, size_t out_size);
#define coordl_get_stats(L, out) coordl_get_stats_sized((L), (out), sizeof(coordl_stats))

/* Copies the counters of one of the last 16 epochs into *out.
 * Returns COORDL_ERR_INVALID when that epoch is not (or no longer) kept.
 * Thread safety: any thread. */
COORDL_API coordl_status coordl_get_epoch_stats_sized(const coordl *L, uint64_t epoch,
                                                      coordl_epoch_stats *out, size_t out_size);
#define coordl_get_epoch_stats(L, epoch, out)                                 \
    coordl_get_epoch_stats_sized((L), (epoch), (out), sizeof(coordl_epoch_stats))

/* The settings L runs with, so a trainer can log what it actually got:
 * the configuration given to coordl_open as open resolved it, and as
 * coordl_set changed it since (out_w, out_h, batch_size). Resolved fields:
 *   threads          the worker threads started (0 resolved; 1 for token
 *                    pipelines by default);
 *   cache_bytes      the MinIO budget after clamping (to the dataset's
 *                    bytes + 64 MiB, + 1/8 of the dataset with
 *                    jpeg_random_access: the slab never exceeds what it can
 *                    hold);
 *   layout           COORDL_I32 for tokens, COORDL_F32 for audio (forced);
 *   cpuset           the PUs the workers were placed on, hwloc list syntax
 *                    (the reserved ones left out; as coordl_stats'
 *                    placement_cpus), whatever chose them;
 *   numa_node        the node of the cache and ring (-1: several, interleaved);
 *   pci_bus_id       NULL (resolved into cpuset and numa_node);
 *   prefetch_batches the ring's slots;
 *   rank, world      from the communicator when mpi_comm is set.
 * Every other field is as given. Strings (source, group, cpuset, topology)
 * point into the handle and live as long as it; hooks and user pointers
 * are the caller's own. out_size: the caller's sizeof(coordl_config) (the
 * macro passes it; see "Stable ABI").
 * Returns COORDL_OK, or COORDL_ERR_INVALID for a NULL argument.
 * Thread safety: any thread while L is open. */
COORDL_API coordl_status coordl_get_config_sized(const coordl *L, coordl_config *out, size_t out_size);
#define coordl_get_config(L, out) coordl_get_config_sized((L), (out), sizeof(coordl_config))

/* Number of items in the dataset (all ranks). A tar source indexed lazily
 * (COORDL_SHUFFLE_SHARD_WINDOW, docs/shuffle.md): 0 until every shard has
 * been counted (by the end of the first epoch read), then the count.
 * Thread safety: any thread. */
COORDL_API uint64_t coordl_num_items(const coordl *L);

/* Batches per epoch for this rank (with drop_last, only full batches); a
 * lazily indexed source: 0 until every shard has been counted.
 * Thread safety: any thread. */
COORDL_API uint64_t coordl_batches_per_epoch(const coordl *L);

/* Path of item `id` (as indexed; for a tar shard's member
 * "<shard path>:<member name>"), or NULL when id is out of range. The
 * string lives as long as the handle. A lazily indexed source's ids are
 * (shard << 32) | ordinal; its names are not resident: each call may read
 * the shard's headers again and keeps a copy of the name until close.
 * Thread safety: any thread. */
COORDL_API const char *coordl_item_path(const coordl *L, uint64_t id);

/* Label of item `id`, or -1 when id is out of range.
 * Thread safety: any thread. */
COORDL_API int32_t coordl_item_label(const coordl *L, uint64_t id);

/* Number of classes (ImageFolder, tar shards without .cls: class folders;
 * list file, tar shards with .cls: max label + 1).
 * Thread safety: any thread. */
COORDL_API uint32_t coordl_num_classes(const coordl *L);

/* Where a sample's pixels come from: the source rectangle (in the image's
 * own pixels) that the pipeline maps onto the out_w x out_h row, and
 * whether the row is mirrored. For COORDL_PIPE_TRAIN the rectangle is the
 * RandomResizedCrop box (integers), or with COORDL_CROP_DARKNET the
 * window's footprint in source pixels (see angle); for COORDL_PIPE_EVAL it is the center
 * crop of the resized image expressed in source pixels. Useful to move
 * boxes or keypoints along with the pixels. */
typedef struct coordl_transform {
    uint32_t image_w, image_h; /* size of the decoded source image         */
    double x, y, w, h;         /* source rectangle                         */
    int flip;                  /* 1: the row is mirrored left-right        */
    double angle;              /* rotation in degrees (rotate_deg), about
                                  the output's centre, applied after the
                                  resize and the flip. COORDL_CROP_DARKNET:
                                  the rectangle is rotated by angle about
                                  its own centre in source pixels (output
                                  offset (u, v) from the row's centre reads
                                  centre + R(angle) (u w / out_w, v h /
                                  out_h), R = [cos -sin; sin cos], Darknet's
                                  convention), before the flip             */
    /* appended in 0.4: the other draws of the sample (1, 1, 1, 0 when off) */
    double aspect;     /* rand_scale(aspect) as drawn                      */
    double saturation; /* rand_scale(saturation) as drawn                  */
    double exposure;   /* rand_scale(exposure) as drawn                    */
    double hue;        /* hue shift as drawn, a fraction of the wheel      */
} coordl_transform;

/* Computes the transform that item `id` gets in `epoch` (the same pure
 * function of (seed, epoch, id) the workers use). Reads the item's header
 * from the cache where the item is cached (so an item removed from storage
 * since it was cached still answers), else from storage; it admits nothing
 * into the cache. Returns COORDL_OK, COORDL_ERR_INVALID for a bad id or a
 * NULL out, or COORDL_ERR_IO / COORDL_ERR_CORRUPT for an unreadable item;
 * on every failure *out is zeroed and coordl_errmsg(L) names the item (or
 * the bad argument) and the reason.
 * Thread safety: any thread; uses no worker state. Calls on several threads
 * take turns on the cache (one reader record per handle). The error detail
 * is the handle's one coordl_errmsg: read it on the calling thread before
 * another call on L (a concurrent call on another thread may replace it). */
COORDL_API coordl_status coordl_sample_transform_sized(coordl *L, uint64_t epoch, uint64_t id,
                                                       coordl_transform *out, size_t out_size);
#define coordl_sample_transform(L, epoch, id, out)                            \
    coordl_sample_transform_sized((L), (epoch), (id), (out), sizeof(coordl_transform))

/* Detail of the last error on L (naming the file and the reason), or "" if
 * none. With L == NULL: the message of the last failed coordl_open on the
 * calling thread. The string is valid until the next call on L (or the next
 * coordl_open on this thread). Thread safety: the consumer thread of L. */
COORDL_API const char *coordl_errmsg(const coordl *L);

/* Static English text of a status code. Thread safety: any thread. */
COORDL_API const char *coordl_strerror(coordl_status s);

/* Stops the workers, unmaps everything and frees the handle. Batches still
 * held become invalid. NULL is a no-op. With mpi_comm it is collective:
 * it returns once every rank has closed (this rank serves its peers until
 * then), whenever each rank closes (before, during or after any epoch).
 * Thread safety: consumer thread. */
COORDL_API void coordl_close(coordl *L);

/* COORDL_VERSION_NUMBER of the compiled library. Thread safety: any. */
COORDL_API int coordl_libversion_number(void);

/* The built-in POSIX reader, the one cfg.io = NULL uses: open(2) with
 * O_RDONLY | O_CLOEXEC | O_NONBLOCK (opening a FIFO never blocks), then
 * fstat: anything but a regular file is refused (-EISDIR for a folder,
 * -EINVAL for a FIFO, socket or device); read_at is pread(2), looping over
 * EINTR and short reads. A custom reader can wrap it (decrypt, count,
 * inject faults). The table is constant. Thread safety: any thread. */
COORDL_API const coordl_io *coordl_io_posix(void);

/* ------------------------------------------------------------------------
 * DS-Analyzer: is the trainer waiting for data, and what would fix it?
 * ---------------------------------------------------------------------- */

/* Writes every counter of coordl_get_stats, plus the kept per-epoch
 * counters, as one JSON object into buf (NUL-terminated, truncated to cap).
 * Returns the length the full text needs (excluding the NUL), like
 * snprintf. Thread safety: any thread. */
COORDL_API size_t coordl_stats_json(const coordl *L, char *buf, size_t cap);

/* The trainer's step: consume one batch (forward, backward, update).
 * Return 0 to go on, non-zero to stop the run. */
typedef int (*coordl_step_fn)(void *user, const coordl_batch *b);

typedef struct coordl_analyze_opts {
    uint64_t batches;          /* batches timed per run; default 50          */
    double synthetic_step_ms;  /* used when step_fn is NULL: a step that
                                  takes this long (sleeping); default 10     */
    int skip_cold;             /* 1: no cold run (fetch stall not measured)  */
    const double *whatif_cache_fractions; /* NULL: 0, 0.1, ..., 1            */
    size_t n_whatif_cache_fractions;
    const int *whatif_threads;            /* NULL: 1 .. 2 x usable cores     */
    size_t n_whatif_threads;
    void (*progress)(void *user, const char *line); /* NULL: quiet           */
    void *progress_user;
    /* --- appended after 0.4.0 (zero: the default) ----------------------- */
    uint32_t repeat;           /* analyses run; the report is their median
                                  (each run the one of median images/s, each
                                  model input the median); 0: 1, at most 9 */
    uint32_t pad_;             /* zero                                       */
    const char *svg_path;      /* NULL: none; else the report as an SVG
                                  figure (coordl_report_svg) written there   */
    const char *json_path;     /* NULL: none; else coordl_report_json there  */
    const char *step_name;     /* how the figure and report name the step
                                  (NULL: "step_fn", or "sleep N ms" for the
                                  stand-in when step_fn is NULL)             */
} coordl_analyze_opts;

/* Fills *opts (opts_size bytes: the caller's sizeof) with every field at
 * its default: 50 batches, a 10 ms stand-in step, one analysis, no files.
 * Thread safety: any thread. */
COORDL_API void coordl_analyze_opts_init_sized(coordl_analyze_opts *opts, size_t opts_size);

/* The defaults as a value (compiled into the caller, so the struct has the
 * caller's layout):
 *     coordl_analyze_opts o = coordl_analyze_opts_default();
 *     o.repeat = 5; o.svg_path = "report.svg";
 *     coordl_analyze(&cfg, my_step, my_state, &o, &report);
 * Thread safety: any thread. */
static inline coordl_analyze_opts coordl_analyze_opts_default_inline(void) {
    coordl_analyze_opts o;
    coordl_analyze_opts_init_sized(&o, sizeof o);
    return o;
}
#define coordl_analyze_opts_default() coordl_analyze_opts_default_inline()

/* One measured run of the differential protocol. */
typedef struct coordl_run_report {
    double images_per_s;
    double stall_fraction;   /* time blocked in coordl_next / wall time     */
    double seconds;
    uint64_t images;
} coordl_run_report;

typedef struct coordl_whatif {
    double cache_fraction;   /* of the dataset's bytes                       */
    int threads;
    double storage_mb_per_s; /* aggregate storage bandwidth assumed          */
    double predicted_images_per_s;
    double predicted_stall_fraction;
} coordl_whatif;

typedef struct coordl_report {
    coordl_run_report synthetic, warm, cold; /* each run's stall_fraction is
                                    its share of time waiting in coordl_next,
                                    as coordl_stats.stall_fraction          */
    double prep_stall_fraction;  /* the 0.4 name of prep_slowdown_fraction  */
    double fetch_stall_fraction; /* the 0.4 name of fetch_slowdown_fraction */
    /* the model's inputs, as measured */
    double ingest_images_per_s;  /* the trainer with no data stall            */
    double prep_images_per_s_per_core;
    double storage_mb_per_s;     /* aggregate, as observed in the cold run    */
    double memory_mb_per_s;      /* cache-hit copy bandwidth                  */
    double mean_item_bytes;
    double reader_mb_per_s;      /* one worker's storage read bandwidth        */
    double cores_for_prep;       /* cores the step leaves to the workers      */
    uint64_t dataset_items;
    uint64_t dataset_bytes;
    int threads;                 /* workers used in the measured runs         */
    /* predictions */
    coordl_whatif *whatif;       /* cache fractions x thread counts           */
    size_t n_whatif;
    double recommend_cache_fraction; /* smallest cache and thread count whose */
    int recommend_threads;           /* predicted stall is under 3%; -1 when  */
                                     /* none of the grid gets there           */
    /* read-ahead (appended in 0.4) */
    double read_latency_ms;      /* one storage read in the cold run (the
                                    I/O threads' time per read, or the
                                    workers' when read-ahead is off)       */
    uint32_t readahead_items;    /* the depth the runs used (0: off)       */
    uint32_t readahead_threads;  /* the I/O threads they used              */
    int32_t recommend_readahead_items; /* smallest depth (0, 1, 2, 4, ...,
                                    4096, I/O threads min(depth, 16)) whose
                                    predicted rate without cache, at the
                                    measured worker threads, is within 3%
                                    of the deepest's; -1 without a cold run */
    /* --- appended after 0.4.0 --------------------------------------------
     * The differential split is a slowdown, not a stall (a stall is time
     * waiting in coordl_next): the share of the cold run's time per image
     * that preparing (warm - synthetic) and fetching (cold - warm) add. A
     * run faster than the one it is compared with gives a negative
     * difference: that is measurement noise, so the slowdown is 0 and
     * *_within_noise is 1 (the report says "within noise", not 0%).      */
    double prep_slowdown_fraction;  /* (warm - synthetic) time / cold time */
    double fetch_slowdown_fraction; /* (cold - warm) time / cold time      */
    int32_t prep_within_noise;      /* 1: warm ran faster than synthetic   */
    int32_t fetch_within_noise;     /* 1: cold ran faster than warm        */
    /* what was measured, for the figure */
    uint64_t batches;               /* timed batches per run               */
    uint32_t batch_size, out_w, out_h;
    uint32_t repeat;                /* analyses the median was taken over  */
    double step_ms;                 /* the step's mean time per batch,
                                       measured in the synthetic run       */
    char source[256];               /* cfg.source (cut to fit)             */
    char step_name[64];             /* opts.step_name, or what stood in    */
    /* --- appended after 0.4.0: a set indexed as the shard window reaches
     * its shards (docs/shuffle.md) has no count at open. The analysis
     * counts every shard of a set of at most 64; of a larger one, 64
     * spread over it, and dataset_items and dataset_bytes are then
     * extrapolated from them (the warm run's cache gets a quarter more). */
    uint64_t dataset_shards_sampled; /* shards the two stand on; 0: exact  */
} coordl_report;

/* A measured rate at one setting, drawn beside the prediction (e.g. the
 * validation points of coordl-analyze --validate). */
typedef struct coordl_measured {
    double cache_fraction;
    int32_t threads;
    double images_per_s;
} coordl_measured;

/* Runs the differential protocol over cfg's dataset: (1) synthetic: the
 * step on one batch held in memory, repeated (the trainer's ingestion rate,
 * no data stall); (2) warm: every item of the timed batches in coordl's
 * cache (prep-bound speed); (3) cold: the page cache dropped for the
 * dataset's files (posix_fadvise DONTNEED, no root needed) and no coordl
 * cache (fetch + prep). Then fits the what-if model: predicted images/s =
 * min(ingest, prep_per_core x threads, storage_bw / ((1 - f) x item bytes))
 * for cache fraction f (a MinIO cache's hit rate is f). step_fn NULL uses
 * opts->synthetic_step_ms. The model as coded (coordl_report_predict):
 * min(ingest, prep_per_core x min(threads, cores_for_prep),
 * threads / (1 / prep_per_core + (1 - f) x item / reader bandwidth),
 * storage_bw / ((1 - f) x item), memory_bw / (f x item)); prep_per_core is
 * measured with all `threads` workers running, so it under-predicts a
 * single worker (workers share caches and memory bandwidth).
 * recommend_threads and recommend_cache_fraction are -1 when no point of
 * the grid gets the stall under 3%. With opts->repeat > 1 the protocol
 * runs that many times and *report is their median; opts->svg_path and
 * opts->json_path receive coordl_report_svg and coordl_report_json (a file
 * that cannot be written gives COORDL_ERR_IO naming it). opts NULL: the
 * defaults (coordl_analyze_opts_default). Fills *report; free it with
 * coordl_report_free. Returns COORDL_OK or the error of the failing run
 * (coordl_errmsg(NULL) says which); COORDL_ERR_UNSUPPORTED when coordl.c
 * was built with COORDL_NO_ANALYZER. Each struct pointer is followed by
 * the caller's sizeof of it (the macro passes them).
 * Thread safety: any thread; it opens its own handles. */
COORDL_API coordl_status coordl_analyze_sized(const coordl_config *cfg, size_t cfg_size,
                                              coordl_step_fn step_fn, void *user,
                                              const coordl_analyze_opts *opts, size_t opts_size,
                                              coordl_report *report, size_t report_size);
#define coordl_analyze(cfg, step_fn, user, opts, report)                      \
    coordl_analyze_sized((cfg), sizeof(coordl_config), (step_fn), (user),     \
                         (opts), sizeof(coordl_analyze_opts), (report),       \
                         sizeof(coordl_report))

/* Predicted images/s and stall for one setting, from a report's fitted
 * inputs. storage_mb_per_s <= 0 uses the measured bandwidth. All zero
 * when built with COORDL_NO_ANALYZER. Thread safety: any thread. */
COORDL_API coordl_whatif coordl_report_predict_sized(const coordl_report *r, size_t r_size,
                                                     double cache_fraction, int threads,
                                                     double storage_mb_per_s);
#define coordl_report_predict(r, cache_fraction, threads, storage_mb_per_s)  \
    coordl_report_predict_sized((r), sizeof(coordl_report), (cache_fraction), \
                                (threads), (storage_mb_per_s))

/* The same for a read-ahead depth: readahead_items items in flight on
 * as many I/O threads (0: off). The storage side of the
 * model: a read takes read_latency_ms (t, measured); c = min(depth, I/O
 * threads) reads in flight deliver c / t items/s; the workers read the
 * rest themselves, waiting t each. So the reads allow
 * max(c / ((1 - f) t), (threads + c) / (1 / prep_per_core + (1 - f) t))
 * images/s (read-ahead off, c = 0: each worker waits for its own reads),
 * under the CPU, ingest, memory and aggregate-bandwidth bounds (the
 * measured reader bandwidth times the reads that can be in flight, c +
 * threads, when storage_mb_per_s <= 0).
 * coordl_report_predict uses the depth of the measured runs.
 * Thread safety: any thread. */
COORDL_API coordl_whatif coordl_report_predict_readahead_sized(const coordl_report *r, size_t r_size,
                                                               double cache_fraction, int threads,
                                                               double storage_mb_per_s, uint32_t readahead_items);
#define coordl_report_predict_readahead(r, cache_fraction, threads, storage_mb_per_s, readahead_items)      \
    coordl_report_predict_readahead_sized((r), sizeof(coordl_report), (cache_fraction), (threads),          \
                                          (storage_mb_per_s), (readahead_items))

/* The report as JSON (keys: runs.synthetic/warm/cold with images_per_s and
 * stall_fraction, prep_stall_fraction, fetch_stall_fraction, model, whatif
 * [{cache_fraction, threads, predicted_images_per_s, ...}],
 * recommendation). Returns the needed length like snprintf. Built with
 * COORDL_NO_ANALYZER: {"error": "..."} naming the switch.
 * Thread safety: any thread; r is only read. */
COORDL_API size_t coordl_report_json_sized(const coordl_report *r, size_t r_size, char *buf, size_t cap);
#define coordl_report_json(r, buf, cap)                                       \
    coordl_report_json_sized((r), sizeof(coordl_report), (buf), (cap))

/* The report as an SVG figure (what coordl-analyze writes as report.svg,
 * and coordl_analyze to opts.svg_path): where the trainer's time goes in
 * each run (compute, prep slowdown, fetch slowdown; each run's stall), and
 * the what-if curves by cache size and loader threads, with `measured`
 * points (n_measured of them; NULL with 0 for none) drawn against their
 * prediction. Returns the needed length like snprintf. Built with
 * COORDL_NO_ANALYZER: a small SVG saying so.
 * Thread safety: any thread; r is only read. */
COORDL_API size_t coordl_report_svg_sized(const coordl_report *r, size_t r_size, const coordl_measured *measured,
                                          size_t n_measured, char *buf, size_t cap);
#define coordl_report_svg(r, measured, n_measured, buf, cap)                  \
    coordl_report_svg_sized((r), sizeof(coordl_report), (measured), (n_measured), (buf), (cap))

/* Frees what coordl_analyze allocated inside *r (NULL is a no-op).
 * Thread safety: the thread that owns r, once nobody reads it. */
COORDL_API void coordl_report_free_sized(coordl_report *r, size_t r_size);
#define coordl_report_free(r) coordl_report_free_sized((r), sizeof(coordl_report))

#ifdef __cplusplus
}
#endif
#endif /* COORDL_H */
