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
#include "platform.h"
#include "resample_state.h"
#include "resample.h"
#include "status.h"
#include "worker.h"
#include "worker_state.h"
#include "plan_state.h"
#include "handle.h"

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
