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
#include "platform.h"
#include "config_state.h"
#include "config.h"
#include "status.h"
#include "lock_state.h"
#include "handle.h"

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
