/* SPDX-License-Identifier: MIT */
/* tar.h - WebDataset tar shards: the types and functions other modules use (see tar.c). */
#ifndef CDL_TAR_H
#define CDL_TAR_H
#include "platform.h"

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__index_tar(coordl *L, int kind, const char *list_text, size_t list_len);
CDL_PRIVATE int cdl__is_tar_name(const char *p);
CDL_PRIVATE coordl_status cdl__tar_list_shards(coordl *L, int kind, const char *list_text, size_t list_len);
CDL_PRIVATE int cdl__tar_lazy_possible(const coordl *L);
CDL_PRIVATE int cdl__tar_lazy_open(coordl *L, coordl_status *rc);
#endif /* CDL_TAR_H */
