#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tu_sigv4_check.py - checks the SigV4 signatures coordl sent, with botocore.

  tu_sigv4_check.py LOG SECRET [SESSION_TOKEN]

LOG holds one JSON line per request as tests/tu_http_proxy.js received it
(method, url, headers). For each, an independent implementation (botocore,
Debian's python3-botocore) recomputes the Authorization header's signature
from the request as it arrived, the secret and the date the request names;
the path and the query must also be in SigV4's canonical form (sorted
parameters, values percent-encoded but for A-Za-z0-9-_.~), which S3 rebuilds
on its side and libcurl 7.88 signs as written. Prints one line of counts;
exits 1 when any request is wrong or none was seen.
"""
import json
import re
import sys
from urllib.parse import quote, unquote, urlsplit

import botocore
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

AUTH = re.compile(r'AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([a-z0-9-]+)/s3/aws4_request, ?'
                  r'SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$')


def check(r, secret, token):
    h = r['headers']
    m = AUTH.match(h.get('authorization', ''))
    if not m:
        return 'no SigV4 Authorization header'
    key, _day, region, signed, signature = m.groups()
    signed = signed.split(';')
    need = {'host', 'x-amz-date', 'x-amz-content-sha256'} | ({'x-amz-security-token'} if token else set())
    if need - set(signed):
        return 'unsigned headers: %s' % sorted(need - set(signed))
    if token and h.get('x-amz-security-token') != token:
        return 'the session token is not the one given'
    parts = urlsplit(r['url'])
    if quote(unquote(parts.path), safe='/~') != parts.path:
        return 'path not canonical: %s' % parts.path
    if parts.query:
        pairs = [p.partition('=') for p in parts.query.split('&')]
        names = [k for k, _, _ in pairs]
        if names != sorted(names):
            return 'query parameters not sorted: %s' % parts.query
        for k, eq, v in pairs:
            if not eq or quote(unquote(v), safe='~') != v:
                return 'query value not canonical: %s' % k
    req = AWSRequest(method=r['method'], url='http://%s%s' % (h['host'], r['url']),
                     headers={k: h[k] for k in signed})
    req.context['timestamp'] = h['x-amz-date']
    signer = S3SigV4Auth(Credentials(key, secret, token), 's3', region)
    canonical = signer.canonical_request(req)
    expected = signer.signature(signer.string_to_sign(req, canonical), req)
    if expected != signature:
        return 'signature %s, botocore computes %s for\n%s' % (signature, expected, canonical)
    return None


def main():
    log, secret = sys.argv[1], sys.argv[2]
    token = sys.argv[3] if len(sys.argv) > 3 else None
    good = bad = tokens = 0
    with open(log) as f:
        for line in f:
            r = json.loads(line)
            why = check(r, secret, token)
            if why:
                bad += 1
                if bad <= 3:
                    print('sigv4: %s %s: %s' % (r['method'], r['url'], why))
            else:
                good += 1
                tokens += 'continuation-token=' in r['url']
    print('sigv4: %d requests verified by botocore %s, %d wrong, %d with a continuation token'
          % (good, botocore.__version__, bad, tokens))
    return 1 if bad or not good else 0


if __name__ == '__main__':
    sys.exit(main())
