#ifndef CDL_HANDLE_H
#define CDL_HANDLE_H
#include "platform.h"
#include "status.h"
#include "placement.h"
#include "arena.h"
#include "lock.h"
#include "worker.h"
#include "index.h"
#include "cache.h"
#include "readahead.h"


struct coordl {
    coordl_config cfg;     /* copy; strings point into owned copies         */
    char *source_copy;
    char *group_copy;
    char *topology_copy;   /* cfg.topology after open (coordl_get_config)     */
    coordl_allocator alloc;
    const coordl_io *io;   /* cfg.io, or the built-in POSIX reader          */

    /* index */
    cdl__item *items;
    uint64_t num_items;
    char *strings;
    size_t strings_len, strings_cap;
    uint32_t num_classes;
    uint64_t dataset_bytes;
    cdl__shard *shards;    /* tokens pipeline only                         */
    size_t nshards;
    uint64_t *tar_shards;  /* tar sources: each shard's path (string arena) */
    size_t ntar_shards;
    cdl__tar_item *tar_items; /* tar sources: per item                    */
    struct cdl__llmc *llmc; /* token_order COORDL_TOKENS_LLMC (section 7)   */

    /* sampler */
    uint64_t share;        /* items per rank per epoch                      */
    uint64_t bpe;          /* batches per epoch                             */

    /* output geometry */
    size_t row_bytes;      /* bytes of one output row                       */
    size_t target_row_bytes; /* tokens: bytes of one targets row; else 0    */
    size_t slot_data_cap;  /* ring capacity per slot: data bytes, rows      */
    uint32_t slot_rows_cap;
    size_t elem_bytes;
    float norm_scale[3], norm_bias[3]; /* y = x * scale + bias             */
    float crop_min_ratio, crop_max_ratio; /* COORDL_CROP_DARKNET: min_crop and
                              max_crop over the out_w at open (Darknet's
                              min_ratio/max_ratio, floats as Darknet's)     */

    /* cache */
    cdl__arena cache_arena;        /* slab                                  */
    cdl__cache_entry *cache_entries; /* per item                            */
    cdl__lru *lru;

    /* ring: the arena and every per-slot array (CDL_RING_ARRAYS, section
     * 14), sized by cdl__ring_alloc */
    cdl__arena ring_arena;
    cdl__slot *slots;
    uint32_t *row_state;   /* slot s, row r: row_state[s * slot_rows_cap + r] */
    uint32_t nslots;

    /* stream and group */
    cdl__stream *S;        /* own memory, or the group's shm object        */
    void (*lock_repair)(coordl *L, int dead, uint64_t dead_gen); /* the stream's
                              repair, run by the lock on EOWNERDEAD (set at open) */
    int me;                /* this process's member index                  */
    uint64_t my_gen;       /* and the generation it joined with            */
    uint32_t bit;          /* 1u << me                                     */
    void *shm_base;        /* the group's mapping, or NULL                 */
    uint64_t shm_bytes;
    char shm_name[224];
    pthread_t member_thread; /* group: liveness, heartbeat, reaping (15)   */
    int member_thread_started;
    pthread_mutex_t member_mu; /* guards member_stop; member_cv wakes it   */
    pthread_cond_t member_cv;
    int member_stop;
    int member_running;     /* the member thread holds the liveness lock   */
    int member_sync_ready;  /* member_mu and member_cv initialised         */

    /* peers (COORDL_MPI; section 10) */
    int peer_comm_set, peer_map_ready, peer_closing, peer_thread_started;
    _Atomic uint64_t peer_admit_epoch; /* whose share is cached; closed
                                          (UINT64_MAX) by the map exchange */
    int node_rank, node_ranks; /* MPI ranks on this node (placement)     */
#ifdef COORDL_MPI
    MPI_Comm peer_comm;
    pthread_t peer_thread;
    int32_t *peer_owner;             /* per item: the rank caching it, -1  */
    /* per-slot and per-row peer state: ring arrays (CDL_RING_ARRAYS_PEER) */
    struct cdl__remote *remote;      /* per slot                            */
    struct cdl__remote_row *peer_rows; /* slot s, row r: [s * slot_rows_cap + r] */
    uint32_t *peer_asked;            /* same layout: rows grouped by peer   */
    struct cdl__peer_send *peer_sends; /* send buffers, reused             */
    size_t peer_nsends, peer_sends_cap;
    uint64_t peer_request_seq;
    uint64_t peer_outstanding;       /* requests sent, replies not yet in   */
    cdl__u8 *peer_rx;                /* the peer thread's request buffer    */
    size_t peer_rxcap;
#endif

    /* placement */
    cdl__placement place;
    int memory_bound_all;  /* every arena bound so far                    */
    int pin_failed;        /* some arena could not be locked (logged once) */
    char pin_error[128];

    int avx2;              /* resample with the AVX2 loops (section 12)     */
    _Atomic uint64_t idle_cursor; /* next cache entry an idle worker looks
                                     at for a JPEG rewrite (section 13)   */

    /* pool */
    cdl__readahead *ra;    /* read-ahead (section 9), or NULL             */
    cdl__worker *workers;
    cdl__worker *helper;   /* tokens: the consumer's scratch for rows it
                              prepares itself (cdl__consumer_help)          */
    int nworkers;
    int stop;                 /* this process's workers exit               */
    uint32_t held;            /* batches this consumer holds               */

    /* consumer */
    uint64_t cur_epoch, cur_pos, cur_index; /* next batch to hand out      */
    uint64_t last_return_ns; /* when the consumer's last coordl call ended */
    _Atomic uint64_t stall_tail_ns; /* its time after the last counted point */
    uint64_t stall_tail_epoch;

    /* stats (under mu) */
    coordl_stats st;
    cdl__epoch_counters epochs[CDL_EPOCH_STATS_KEPT];

    char errmsg[CDL_ERRMSG_MAX];
};
#endif /* CDL_HANDLE_H */
