/* SPDX-License-Identifier: MIT */
/* http.h - the event loop under remote sources: the functions other modules use (see http.c). */
#ifndef CDL_HTTP_H
#define CDL_HTTP_H
#include "platform.h"
#include "http_state.h"

/* ---- interface ---- */
#ifndef COORDL_NO_REMOTE
CDL_PRIVATE cdl__rentry *cdl__rm_lookup(cdl__rloop *R, const char *url);
CDL_PRIVATE int cdl__rm_insert(cdl__rloop *R, cdl__rentry *e);
CDL_PRIVATE void cdl__rm_wake(cdl__rloop *R);
CDL_PRIVATE void cdl__rm_free(coordl *L, cdl__rloop *R);
CDL_PRIVATE cdl__rloop *cdl__rm_get(const coordl *Lc, char *why, size_t cap);
CDL_PRIVATE void cdl__rm_enqueue(cdl__rloop *R, cdl__rreq *q);
CDL_PRIVATE coordl_status cdl__rm_sync(cdl__rloop *R, cdl__rreq *q, char *err, size_t cap);
#endif
#endif /* CDL_HTTP_H */
