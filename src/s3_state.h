/* SPDX-License-Identifier: MIT */
/* s3_state.h - S3's settings: the type s3.c owns (remote.c's event loop
 * holds one). */
#ifndef CDL_S3_STATE_H
#define CDL_S3_STATE_H
#include "platform.h"

#ifndef COORDL_NO_REMOTE
typedef struct cdl__s3 {
    char *endpoint;             /* AWS_ENDPOINT_URL[_S3] without a trailing
                                   '/', or NULL: AWS itself               */
    char region[64];
    char sigv4[96];             /* "aws:amz:REGION:s3"                    */
    char *key, *secret;         /* NULL: requests go unsigned             */
    struct curl_slist *headers; /* x-amz-content-sha256 (and the session
                                   token)                                 */
    char creds[200];            /* where the credentials came from, by
                                   variable names only                    */
    char bad[200];              /* a setting that cannot work, or ""      */
} cdl__s3;
#endif

#endif /* CDL_S3_STATE_H */
