/* SPDX-License-Identifier: MIT */
/* placement.h - placement: cores and NUMA node(s): the types and functions other modules use (see placement.c). */
#ifndef CDL_PLACEMENT_H
#define CDL_PLACEMENT_H
#include "platform.h"
#include "placement_state.h"

/* ---- interface ---- */
CDL_PRIVATE int cdl__placement_bind_memory(coordl *L, void *p, size_t bytes);
CDL_PRIVATE void cdl__format_pu_list(const int *pus, int n, char *buf, size_t cap);
CDL_PRIVATE coordl_status cdl__placement_choose(coordl *L, cdl__placement *P);
CDL_PRIVATE void cdl__placement_free(coordl *L, cdl__placement *P);
#endif /* CDL_PLACEMENT_H */
