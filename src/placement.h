/* SPDX-License-Identifier: MIT */
/* placement.h - placement: cores and NUMA node(s): the types and functions other modules use (see placement.c). */
#ifndef CDL_PLACEMENT_H
#define CDL_PLACEMENT_H
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


/* ---- interface ---- */
CDL_PRIVATE int cdl__placement_bind_memory(coordl *L, void *p, size_t bytes);
CDL_PRIVATE void cdl__format_pu_list(const int *pus, int n, char *buf, size_t cap);
CDL_PRIVATE coordl_status cdl__placement_choose(coordl *L, cdl__placement *P);
CDL_PRIVATE void cdl__placement_free(coordl *L, cdl__placement *P);
#endif /* CDL_PLACEMENT_H */
