/* SPDX-License-Identifier: MIT */
/* peers.h - the partitioned cache over MPI: the types and functions other modules use (see peers.c). */
#ifndef CDL_PEERS_H
#define CDL_PEERS_H
#include "platform.h"
#include "peers_state.h"
#include "worker_state.h"

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
