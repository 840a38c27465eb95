/* SPDX-License-Identifier: MIT */
/*
 * s3.c - S3's side of remote sources: where an s3:// object is (the
 * endpoint, path- or virtual-host-style addressing), whose credentials sign
 * its requests (read from the environment as every AWS tool reads them),
 * the URL written in SigV4's canonical form, and the XML of a
 * ListObjectsV2 answer. No I/O: remote.c sends the requests.
 *
 * Owns:  a cdl__s3 (held by remote.c's event loop): the settings, read once
 *        when the loop is made and constant after; the secret goes to
 *        libcurl's signer only, never into a message, a log line or a
 *        counter
 * Lock:  none (written before the loop thread starts, read-only after)
 * Calls: status (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */
#include "platform.h"
#include "s3_state.h"
#include "s3.h"
#include "status.h"
#include "handle.h"

#ifndef COORDL_NO_REMOTE

/* ---- S3 (s3://bucket/key): addressing and signing ----------------------
 * As every AWS tool: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL names a
 * custom endpoint (an S3-compatible store), addressed path-style
 * (ENDPOINT/bucket/key); without one, AWS itself, virtual-host style
 * (https://bucket.s3.REGION.amazonaws.com/key; path-style for a bucket
 * with a dot, which the certificate's wildcard does not cover). Region:
 * AWS_REGION, AWS_DEFAULT_REGION, else us-east-1. Requests are signed
 * with SigV4 by libcurl (CURLOPT_AWS_SIGV4) when AWS_ACCESS_KEY_ID and
 * AWS_SECRET_ACCESS_KEY are set (AWS_SESSION_TOKEN adds
 * x-amz-security-token), unsigned (a public bucket) when neither is.
 * curl 7.88 signs the path and the query exactly as written and does not
 * send x-amz-content-sha256 (S3 answers 400 without it), so the URL is
 * written canonical here (each key byte but A-Za-z0-9-_.~/ percent-encoded,
 * query parameters sorted, values encoded likewise) and the header is ours
 * (UNSIGNED-PAYLOAD: every request is a GET without a body). */

static char *cdl__s3_strdup(const coordl *L, const char *s) {
    const size_t n = strlen(s);
    char *d = cdl__malloc(L, n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

static const char *cdl__s3_getenv(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Zeroes and frees a secret (volatile: the stores are not dropped). */
static void cdl__s3_wipe(const coordl *L, char *s) {
    if (!s) return;
    for (volatile char *p = s; *p; p++) *p = 0;
    cdl__free(L, s);
}

CDL_PRIVATE void cdl__s3_forget(const coordl *L, cdl__s3 *R) {
    cdl__free(L, R->endpoint);
    cdl__free(L, R->key);
    cdl__s3_wipe(L, R->secret);
    curl_slist_free_all(R->headers);
    R->endpoint = R->key = R->secret = NULL;
    R->headers = NULL;
}

/* Reads the S3 settings (once, as the loop is made). 0: out of memory; a
 * setting that cannot work is kept in s3_bad for the first s3:// open. */
CDL_PRIVATE int cdl__s3_env(const coordl *L, cdl__s3 *R) {
    const char *endpoint = cdl__s3_getenv("AWS_ENDPOINT_URL_S3"), *endpoint_var = "AWS_ENDPOINT_URL_S3";
    if (!endpoint) endpoint = cdl__s3_getenv(endpoint_var = "AWS_ENDPOINT_URL");
    const char *region = cdl__s3_getenv("AWS_REGION"), *region_var = "AWS_REGION";
    if (!region) region = cdl__s3_getenv(region_var = "AWS_DEFAULT_REGION");
    if (!region) region = "us-east-1", region_var = NULL;
    const char *key = cdl__s3_getenv("AWS_ACCESS_KEY_ID"), *secret = cdl__s3_getenv("AWS_SECRET_ACCESS_KEY");
    const char *token = cdl__s3_getenv("AWS_SESSION_TOKEN");
    R->bad[0] = '\0';
    if (strlen(region) >= sizeof R->region || strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(region))
        snprintf(R->bad, sizeof R->bad, "%s is not a region name (lower-case letters, digits and '-')",
                 region_var);
    else
        snprintf(R->region, sizeof R->region, "%s", region);
    snprintf(R->sigv4, sizeof R->sigv4, "aws:amz:%s:s3", R->region);
    if (endpoint) {
        if (strncasecmp(endpoint, "http://", 7) != 0 && strncasecmp(endpoint, "https://", 8) != 0)
            snprintf(R->bad, sizeof R->bad, "%s must start with http:// or https://", endpoint_var);
        if (!(R->endpoint = cdl__s3_strdup(L, endpoint))) return 0;
        for (size_t n = strlen(R->endpoint); n > 0 && R->endpoint[n - 1] == '/'; n--) R->endpoint[n - 1] = '\0';
    }
    if (!key != !secret) {
        snprintf(R->bad, sizeof R->bad, "%s is set but %s is not", key ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                 key ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
    } else if (key) {
        if (!(R->key = cdl__s3_strdup(L, key)) || !(R->secret = cdl__s3_strdup(L, secret))) return 0;
        snprintf(R->creds, sizeof R->creds, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY%s from the environment, "
                 "region %s%s%s", token ? " with AWS_SESSION_TOKEN" : "", R->region, region_var ? " from " : "",
                 region_var ? region_var : " (the default)");
    } else {
        snprintf(R->creds, sizeof R->creds, "none (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are unset: the "
                 "requests go unsigned, as to a public bucket)");
    }
    R->headers = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (!R->headers) return 0;
    if (token && key) {
        const size_t n = strlen(token) + 32;
        char *h = cdl__malloc(L, n);
        if (!h) return 0;
        snprintf(h, n, "x-amz-security-token: %s", token);
        struct curl_slist *l = curl_slist_append(R->headers, h);
        cdl__s3_wipe(L, h);
        if (!l) return 0;
    }
    return 1;
}

/* Appends s percent-encoded as SigV4 canonicalises it: every byte but
 * A-Za-z0-9-_.~ (and '/' when keep_slash) as %XX, upper-case hex. */
CDL_PRIVATE size_t cdl__s3_pct(char *out, const char *s, size_t n, int keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
            c == '.' || c == '~' || (keep_slash && c == '/')) {
            out[k++] = (char)c;
        } else {
            out[k++] = '%';
            out[k++] = hex[c >> 4];
            out[k++] = hex[c & 15];
        }
    }
    out[k] = '\0';
    return k;
}

/* The HTTP(S) URL of s3://bucket/key (key NULL: the bucket itself, for a
 * listing), with query appended as given (already canonical). Allocated
 * from L; NULL with why set. */
CDL_PRIVATE char *cdl__s3_url(const coordl *L, const cdl__s3 *R, const char *name, const char *key_or_null,
                            const char *query, char *why, size_t cap) {
    const char *bucket = name + 5, *slash = strchr(bucket, '/');
    const size_t blen = slash ? (size_t)(slash - bucket) : strlen(bucket);
    if (R->bad[0]) {
        snprintf(why, cap, "%s: %s", name, R->bad);
        return NULL;
    }
    if (blen == 0 || blen > 255 || strspn(bucket, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") < blen) {
        snprintf(why, cap, "%s: not s3://BUCKET/KEY (a bucket name of letters, digits, '.', '-' and '_')", name);
        return NULL;
    }
    const char *key = key_or_null ? key_or_null : "";
    const size_t klen = strlen(key), qlen = query ? strlen(query) : 0;
    const size_t n = (R->endpoint ? strlen(R->endpoint) : 0) + 2 * blen + strlen(R->region) + 3 * klen + qlen + 64;
    char *url = cdl__malloc(L, n);
    if (!url) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    size_t k;
    if (R->endpoint || memchr(bucket, '.', blen)) { /* path-style */
        if (R->endpoint) k = (size_t)snprintf(url, n, "%s/%.*s", R->endpoint, (int)blen, bucket);
        else k = (size_t)snprintf(url, n, "https://s3.%s.amazonaws.com/%.*s", R->region, (int)blen, bucket);
        if (key_or_null) url[k++] = '/';
    } else { /* virtual-host style */
        k = (size_t)snprintf(url, n, "https://%.*s.s3.%s.amazonaws.com/", (int)blen, bucket, R->region);
    }
    k += cdl__s3_pct(url + k, key, klen, 1);
    if (query) snprintf(url + k, n - k, "?%s", query);
    return url;
}

/* The next <tag>...</tag> of a ListObjectsV2 answer from *pos on, its
 * XML entities decoded, into out; *pos moves past it. 0 when there is no
 * more, or the text does not fit (cap: a key is 1,024 bytes at most). */
CDL_PRIVATE int cdl__s3_xml_next(const char **pos, const char *tag, char *out, size_t cap) {
    char open[48], close[48];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *a = strstr(*pos, open);
    if (!a) return 0;
    a += strlen(open);
    const char *b = strstr(a, close);
    if (!b) return 0;
    *pos = b + strlen(close);
    size_t k = 0;
    for (const char *p = a; p < b; p++) {
        unsigned long c = (unsigned char)*p;
        const int ref = *p == '&';
        if (ref) {
            const char *semi = memchr(p, ';', (size_t)(b - p));
            if (!semi) return 0;
            const size_t n = (size_t)(semi - p - 1);
            if (n == 3 && memcmp(p + 1, "amp", 3) == 0) c = '&';
            else if (n == 2 && memcmp(p + 1, "lt", 2) == 0) c = '<';
            else if (n == 2 && memcmp(p + 1, "gt", 2) == 0) c = '>';
            else if (n == 4 && memcmp(p + 1, "quot", 4) == 0) c = '"';
            else if (n == 4 && memcmp(p + 1, "apos", 4) == 0) c = '\'';
            else if (n >= 2 && p[1] == '#') c = p[2] == 'x' ? strtoul(p + 3, NULL, 16) : strtoul(p + 2, NULL, 10);
            else return 0;
            p = semi;
        }
        if (k + 5 > cap) return 0;
        if (!ref || c < 0x80) { /* raw bytes (UTF-8 already) as they are; a reference as UTF-8 */
            out[k++] = (char)c;
        } else if (c < 0x800) {
            out[k++] = (char)(0xC0 | c >> 6);
            out[k++] = (char)(0x80 | (c & 63));
        } else if (c < 0x10000) {
            out[k++] = (char)(0xE0 | c >> 12);
            out[k++] = (char)(0x80 | (c >> 6 & 63));
            out[k++] = (char)(0x80 | (c & 63));
        } else {
            out[k++] = (char)(0xF0 | (c >> 18 & 7));
            out[k++] = (char)(0x80 | (c >> 12 & 63));
            out[k++] = (char)(0x80 | (c >> 6 & 63));
            out[k++] = (char)(0x80 | (c & 63));
        }
    }
    out[k] = '\0';
    return 1;
}


#endif /* COORDL_NO_REMOTE */
