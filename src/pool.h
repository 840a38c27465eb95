/* SPDX-License-Identifier: MIT */
/* pool.h - the worker pool: the types and functions other modules use (see pool.c). */
#ifndef CDL_POOL_H
#define CDL_POOL_H
#include "platform.h"
#include "worker.h"
#include "readahead.h"
#include "stream.h"



/* The pool's state: this process's workers and read-ahead (set at open,
 * stopped at close; stop is read by the workers under the stream's lock). */
typedef struct cdl__pool {
    cdl__readahead *ra;    /* read-ahead, or NULL                          */
    cdl__worker *workers;
    cdl__worker *helper;   /* tokens: the consumer's scratch for rows it
                              prepares itself (cdl__consumer_help)          */
    int nworkers;
    int stop;              /* this process's workers exit                  */
} cdl__pool;

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__pool_start(coordl *L);
CDL_PRIVATE void cdl__pool_stop(coordl *L);
CDL_PRIVATE void cdl__worker_prepare(cdl__worker *W, const cdl__claim *c, cdl__row_result *r);
#endif /* CDL_POOL_H */
