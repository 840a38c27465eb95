/* SPDX-License-Identifier: MIT */
/* handle.h - struct coordl, the composition of every module's state. It sits
 * above every module: any .c may include it, no header may. */
#ifndef CDL_HANDLE_H
#define CDL_HANDLE_H
#include "platform.h"
#include "status_state.h"
#include "placement_state.h"
#include "lock_state.h"
#include "remote_state.h"
#include "http_state.h"
#include "index_state.h"
#include "sampler_state.h"
#include "cache_state.h"
#include "peers_state.h"
#include "config_state.h"
#include "stream_state.h"
#include "pool_state.h"
#include "group_state.h"
#include "api_state.h"

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
