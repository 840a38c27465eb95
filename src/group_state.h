/* SPDX-License-Identifier: MIT */
/* group_state.h - the coordinated group: the types group.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; group.h declares
 * the functions. */
#ifndef CDL_GROUP_STATE_H
#define CDL_GROUP_STATE_H
#include "platform.h"

/* Who this process is in the stream (a private loader is a group of one,
 * member 0) and, in a group, its mapping and member thread. me/my_gen are
 * set at join, under the stream's lock, and read by every layer that
 * marks rows or records the lock's owner. */
typedef struct cdl__membership {
    int me;                /* this process's member index                  */
    uint64_t my_gen;       /* and the generation it joined with            */
    uint32_t bit;          /* 1u << me                                     */
    void *shm_base;        /* the group's mapping, or NULL                 */
    uint64_t shm_bytes;
    char shm_name[224];
    pthread_t thread;      /* group: liveness, heartbeat, reaping          */
    int thread_started;
    pthread_mutex_t mu;    /* guards stop; cv wakes the thread             */
    pthread_cond_t cv;
    int stop;
    int running;           /* the member thread holds the liveness lock    */
    int sync_ready;        /* mu and cv initialised                        */
    uint32_t timeout_ms;   /* the group's liveness timeout: the creator's
                              group_timeout_ms, held by the object, so every
                              member judges silence alike (until attached:
                              this member's own)                           */
} cdl__membership;

#endif /* CDL_GROUP_STATE_H */
