/* SPDX-License-Identifier: MIT */
/* sampler.h - the sampler: the types and functions other modules use (see sampler.c). */
#ifndef CDL_SAMPLER_H
#define CDL_SAMPLER_H
#include "platform.h"
#include "sampler_state.h"
#include "worker_state.h" /* cdl__item_hint */

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
