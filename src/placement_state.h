/* SPDX-License-Identifier: MIT */
/* placement_state.h - placement: cores and NUMA node(s): the types placement.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; placement.h declares
 * the functions. */
#ifndef CDL_PLACEMENT_STATE_H
#define CDL_PLACEMENT_STATE_H
#include "platform.h"

#define CDL_MAX_PUS 4096

typedef struct cdl__placement {
    int *worker_pus;   /* PUs for workers, cores first, then hyper-threads */
    int nworker_pus;
    int *reserved_pus;
    int nreserved;
    int ncores;        /* non-reserved cores                              */
    int node, nnodes;  /* node of the arenas (-1: several), nodes spanned  */
    int simulate;      /* topology given: compute, bind nothing           */
    int memory_bound_all; /* every arena bound so far (arena)              */
    int pin_failed;    /* some arena could not be locked (logged once)    */
    char pin_error[128];
#ifndef COORDL_NO_HWLOC
    hwloc_topology_t topo;
    hwloc_bitmap_t nodeset;
#endif
} cdl__placement;

#endif /* CDL_PLACEMENT_STATE_H */
