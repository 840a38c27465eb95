/*
 * tu_virtual_tar.h - a virtual WebDataset tar set served by a coordl_io:
 * nshards shards of per_shard samples, each a .cls member (label (7 k + i)
 * mod 1000 for sample i of shard k) and a .jpg member (one small JPEG
 * shared by all), generated on the fly from the offset asked for, so a
 * 100M-sample set (20,000 shards x 5,000) costs no disk and no memory.
 * Files: "<root>/list.txt" lists "<root>/shard-NNNNN.tar". Counts opens and
 * reads (safe from coordl's threads).
 *
 * Header-only (static functions), for tests and benchmarks:
 *     tu_vtar v;
 *     tu_vtar_init(&v, "/virt", 20000, 5000, jpg, jpg_len);
 *     cfg.io = &v.table; cfg.source = v.list_path;
 */
#ifndef COORDL_TU_VIRTUAL_TAR_H
#define COORDL_TU_VIRTUAL_TAR_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coordl.h"


typedef struct tu_vtar {
    coordl_io table; /* pass &v.table as cfg.io */
    char root[256], list_path[300];
    uint32_t nshards, per_shard;
    uint8_t jpg[4096];
    size_t jpg_len;
    uint32_t sample_blocks; /* a sample's 512-byte blocks: the .cls header
                               and data, the .jpg header and data       */
    char *list;
    size_t list_len;
    int64_t fail_shard; /* this shard's open fails with EIO; -1: none */
    long read_delay_ns; /* slept in every read_at (storage latency)      */
    _Atomic uint64_t opens, shard_opens, reads;
    _Atomic uint8_t *opened;       /* per shard: opened at least once     */
    char (*first_opener)[16];      /* per shard: the name of the thread that
                                      opened it first                      */
    _Atomic uint64_t shards_opened; /* distinct shards opened            */
} tu_vtar;

static uint32_t tu_vtar_label(uint32_t shard, uint32_t i) { return (uint32_t)(((uint64_t)shard * 7 + i) % 1000); }

static void tu_vtar_header(uint8_t h[512], const char *name, uint64_t size)
{
    memset(h, 0, 512);
    snprintf((char *)h, 100, "%s", name);
    memcpy(h + 100, "0000644", 8);
    memcpy(h + 108, "0000000", 8);
    memcpy(h + 116, "0000000", 8);
    snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
    memcpy(h + 136, "00000000000", 12);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

/* Block b (512 bytes) of shard k. */
static void tu_vtar_block(const tu_vtar *v, uint32_t k, uint64_t b, uint8_t out[512])
{
    const uint64_t sample = b / v->sample_blocks, part = b % v->sample_blocks;
    memset(out, 0, 512);
    if (sample >= v->per_shard) return; /* the end-of-archive blocks */
    char name[64], cls[16];
    const int cn = snprintf(cls, sizeof cls, "%u", tu_vtar_label(k, (uint32_t)sample));
    switch (part) {
    case 0:
        snprintf(name, sizeof name, "k%05u_%06llu.cls", k, (unsigned long long)sample);
        tu_vtar_header(out, name, (uint64_t)cn);
        break;
    case 1: memcpy(out, cls, (size_t)cn); break;
    case 2:
        snprintf(name, sizeof name, "k%05u_%06llu.jpg", k, (unsigned long long)sample);
        tu_vtar_header(out, name, v->jpg_len);
        break;
    default: {
        const uint64_t at = (part - 3) * 512, n = v->jpg_len - at < 512 ? v->jpg_len - at : 512;
        memcpy(out, v->jpg + at, n);
        break;
    }
    }
}

static uint64_t tu_vtar_shard_size(const tu_vtar *v)
{
    return (uint64_t)v->per_shard * v->sample_blocks * 512 + 1024;
}

static int tu_vtar_open(void *user, const char *path, void **file, uint64_t *size)
{
    tu_vtar *v = user;
    atomic_fetch_add(&v->opens, 1);
    if (strcmp(path, v->list_path) == 0) {
        *file = (void *)(uintptr_t)1;
        *size = v->list_len;
        return 0;
    }
    const size_t rl = strlen(v->root);
    unsigned k;
    char tail[8];
    if (strncmp(path, v->root, rl) != 0 || sscanf(path + rl, "/shard-%5u.ta%1s", &k, tail) != 2 || k >= v->nshards)
        return -ENOENT;
    atomic_fetch_add(&v->shard_opens, 1);
    if (atomic_exchange(&v->opened[k], 1) == 0) {
        pthread_getname_np(pthread_self(), v->first_opener[k], sizeof v->first_opener[k]);
        atomic_fetch_add(&v->shards_opened, 1); /* after the name: a reader of the count sees it */
    }
    if ((int64_t)k == v->fail_shard) return -EIO;
    *file = (void *)(uintptr_t)(k + 2);
    *size = tu_vtar_shard_size(v);
    return 0;
}

static int64_t tu_vtar_read_at(void *user, void *file, void *buf, uint64_t len, uint64_t offset)
{
    tu_vtar *v = user;
    atomic_fetch_add(&v->reads, 1);
    if (v->read_delay_ns > 0) {
        const struct timespec ts = {v->read_delay_ns / 1000000000L, v->read_delay_ns % 1000000000L};
        nanosleep(&ts, NULL);
    }
    const uintptr_t f = (uintptr_t)file;
    if (f == 1) {
        if (offset >= v->list_len) return 0;
        const uint64_t n = len < v->list_len - offset ? len : v->list_len - offset;
        memcpy(buf, v->list + offset, n);
        return (int64_t)n;
    }
    const uint32_t k = (uint32_t)(f - 2);
    const uint64_t size = tu_vtar_shard_size(v);
    if (offset >= size) return 0;
    if (len > size - offset) len = size - offset;
    uint8_t blk[512];
    uint64_t done = 0;
    while (done < len) {
        const uint64_t at = offset + done, b = at / 512, in = at % 512;
        const uint64_t n = 512 - in < len - done ? 512 - in : len - done;
        tu_vtar_block(v, k, b, blk);
        memcpy((uint8_t *)buf + done, blk + in, n);
        done += n;
    }
    return (int64_t)len;
}

static void tu_vtar_close(void *user, void *file)
{
    (void)user;
    (void)file;
}

/* 0, or -1 when the JPEG is over 4 KiB or memory runs out. */
static int tu_vtar_init(tu_vtar *v, const char *root, uint32_t nshards, uint32_t per_shard, const uint8_t *jpg,
                        size_t jpg_len)
{
    memset(v, 0, sizeof *v);
    if (jpg_len > sizeof v->jpg || strlen(root) >= sizeof v->root) return -1;
    snprintf(v->root, sizeof v->root, "%s", root);
    snprintf(v->list_path, sizeof v->list_path, "%s/list.txt", root);
    v->fail_shard = -1;
    v->nshards = nshards;
    v->per_shard = per_shard;
    memcpy(v->jpg, jpg, jpg_len);
    v->jpg_len = jpg_len;
    v->sample_blocks = 3 + (uint32_t)((jpg_len + 511) / 512);
    const size_t line = strlen(root) + 24;
    v->list = malloc((size_t)nshards * line + 1);
    v->opened = calloc(nshards ? nshards : 1, sizeof *v->opened);
    v->first_opener = calloc(nshards ? nshards : 1, sizeof *v->first_opener);
    if (!v->list || !v->opened || !v->first_opener) {
        free(v->list);
        free((void *)v->opened);
        free(v->first_opener);
        return -1;
    }
    for (uint32_t k = 0; k < nshards; k++)
        v->list_len += (size_t)snprintf(v->list + v->list_len, line, "%s/shard-%05u.tar\n", root, k);
    v->table.user = v;
    v->table.open = tu_vtar_open;
    v->table.read_at = tu_vtar_read_at;
    v->table.close = tu_vtar_close;
    return 0;
}

static void tu_vtar_destroy(tu_vtar *v)
{
    free(v->list);
    free((void *)v->opened);
    free(v->first_opener);
    v->first_opener = NULL;
    v->list = NULL;
    v->opened = NULL;
}

#endif /* COORDL_TU_VIRTUAL_TAR_H */
