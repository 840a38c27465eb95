/* SPDX-License-Identifier: MIT */
/* group.h - the coordinated group: the types and functions other modules use (see group.c). */
#ifndef CDL_GROUP_H
#define CDL_GROUP_H
#include "platform.h"
#include "group_state.h"

/* ---- interface ---- */
CDL_PRIVATE void cdl__group_leave(coordl *L);
CDL_PRIVATE coordl_status cdl__group_open(coordl *L);
CDL_PRIVATE void cdl__member_thread_stop(coordl *L);
#endif /* CDL_GROUP_H */
