/* SPDX-License-Identifier: MIT */
/* s3.h - S3's addressing, credentials and canonical form: the functions other modules use (see s3.c). */
#ifndef CDL_S3_H
#define CDL_S3_H
#include "platform.h"
#include "s3_state.h"

/* ---- interface ---- */
#ifndef COORDL_NO_REMOTE
CDL_PRIVATE int cdl__s3_env(const coordl *L, cdl__s3 *R);
CDL_PRIVATE void cdl__s3_forget(const coordl *L, cdl__s3 *R);
CDL_PRIVATE size_t cdl__s3_pct(char *out, const char *s, size_t n, int keep_slash);
CDL_PRIVATE char *cdl__s3_url(const coordl *L, const cdl__s3 *R, const char *name, const char *key_or_null,
                              const char *query, char *why, size_t cap);
CDL_PRIVATE int cdl__s3_xml_next(const char **pos, const char *tag, char *out, size_t cap);
#endif
#endif /* CDL_S3_H */
