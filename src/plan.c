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
#include "platform.h"
#include "plan_state.h"
#include "plan.h"
#include "rand.h"
#include "rand_state.h"
#include "sampler.h"
#include "worker_state.h"
#include "index_state.h"
#include "handle.h"

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

