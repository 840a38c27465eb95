/* SPDX-License-Identifier: MIT */
/* arena.h - arenas: offset-addressed mmap regions: the types and functions other modules use (see arena.c). */
#ifndef CDL_ARENA_H
#define CDL_ARENA_H
#include "platform.h"
#include "arena_state.h"

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__arena_map(coordl *L, cdl__arena *a, size_t bytes, int populate, const char *what,
                                         const char *lower);
CDL_PRIVATE void cdl__arena_advise_huge(void *p, size_t bytes);
CDL_PRIVATE void cdl__arena_unmap(coordl *L, cdl__arena *a);
CDL_PRIVATE void cdl__arena_borrow(coordl *L, cdl__arena *a, void *base, size_t bytes, const char *what);
#endif /* CDL_ARENA_H */
