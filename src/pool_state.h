/* SPDX-License-Identifier: MIT */
/* pool_state.h - the worker pool: the types pool.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; pool.h declares
 * the functions. */
#ifndef CDL_POOL_STATE_H
#define CDL_POOL_STATE_H
#include "platform.h"
#include "worker_state.h"
#include "readahead_state.h"

/* The pool's state: this process's workers and read-ahead (set at open,
 * stopped at close; stop is read by the workers under the stream's lock). */
/* Threads scanning a lazily indexed set's shards ahead of the order: two,
 * so one shard's scan waits on storage while another's goes on. */
#define CDL_SCAN_AHEAD_THREADS 2

typedef struct cdl__pool {
    cdl__readahead *ra;    /* read-ahead, or NULL                          */
    cdl__worker *workers;
    cdl__worker *helper;   /* tokens: the consumer's scratch for rows it
                              prepares itself (cdl__consumer_help)          */
    int nworkers;
    int stop;              /* this process's workers exit                  */
    pthread_t ahead[CDL_SCAN_AHEAD_THREADS]; /* a lazy index's scan-ahead
                              threads (cdl__scan_ahead_main)               */
    int nahead;
} cdl__pool;

#endif /* CDL_POOL_STATE_H */
