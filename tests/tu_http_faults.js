// SPDX-License-Identifier: MIT
// tu_http_faults.js - the fault-injecting HTTP server of tests/test_remote.c
// (event-driven: Node's http module, no thread per request).
//   node tests/tu_http_faults.js ROOT   -> prints "port N" once listening on
//                                          127.0.0.1 (a free port)
// GET /<mode>/<file> serves ROOT/<file> with Range support (206 and
// Content-Range), keep-alive, and the fault <mode> names:
//   ok          plain
//   flaky<N>    the first N requests for each file answer 503 SlowDown
//   s500        every request answers 500
//   s403, s404  403 AccessDenied / 404 NoSuchKey
//   short       promises the range's Content-Length, sends half, then drops
//               the connection
//   stall       sends the headers, then nothing (until the client gives up)
//   lat<MS>     answers after MS milliseconds
// GET /stats answers {"requests":N,"max_in_flight":M} counting the GETs of
// files since the last GET /reset. Stops by itself when its standard input
// closes (the test's end, whatever way it ends).
'use strict';
const http = require('http');
const fs = require('fs');
const path = require('path');

const root = process.argv[2];
let requests = 0, inFlight = 0, maxInFlight = 0;
const seen = new Map();

function xmlError(res, code, s3code) {
  const body = `<?xml version="1.0"?><Error><Code>${s3code}</Code></Error>`;
  res.writeHead(code, {'Content-Type': 'application/xml', 'Content-Length': Buffer.byteLength(body)});
  res.end(body);
}

const server = http.createServer((req, res) => {
  if (req.url === '/stats') {
    const body = JSON.stringify({requests, max_in_flight: maxInFlight});
    res.writeHead(200, {'Content-Length': Buffer.byteLength(body)});
    return res.end(body);
  }
  if (req.url === '/reset') {
    requests = 0; maxInFlight = 0; seen.clear();
    res.writeHead(200, {'Content-Length': 0});
    return res.end();
  }
  const m = /^\/([a-z0-9]+)\/(.+)$/.exec(req.url);
  if (!m) return xmlError(res, 400, 'BadPath');
  const mode = m[1], file = path.join(root, path.normalize(decodeURIComponent(m[2])));
  requests++;
  inFlight++;
  if (inFlight > maxInFlight) maxInFlight = inFlight;
  res.on('close', () => { inFlight--; });
  const n = (seen.get(file) || 0) + 1;
  seen.set(file, n);
  const flaky = /^flaky(\d+)$/.exec(mode);
  if (flaky && n <= Number(flaky[1])) return xmlError(res, 503, 'SlowDown');
  if (mode === 's500') return xmlError(res, 500, 'InternalError');
  if (mode === 's403') return xmlError(res, 403, 'AccessDenied');
  if (mode === 's404') return xmlError(res, 404, 'NoSuchKey');
  let st;
  try { st = fs.statSync(file); } catch (e) { return xmlError(res, 404, 'NoSuchKey'); }
  let a = 0, b = st.size - 1, partial = false;
  const r = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range || '');
  if (r) {
    a = Number(r[1]);
    if (r[2] !== '') b = Math.min(Number(r[2]), st.size - 1);
    if (a >= st.size) return xmlError(res, 416, 'InvalidRange');
    partial = true;
  }
  const headers = {'Content-Length': b - a + 1, 'ETag': `"${st.size}-${st.mtimeMs}"`, 'Accept-Ranges': 'bytes'};
  if (partial) headers['Content-Range'] = `bytes ${a}-${b}/${st.size}`;
  const send = () => {
    const fd = fs.openSync(file, 'r');
    const buf = Buffer.alloc(b - a + 1);
    fs.readSync(fd, buf, 0, buf.length, a);
    fs.closeSync(fd);
    res.writeHead(partial ? 206 : 200, headers);
    if (mode === 'stall') return res.flushHeaders();
    if (mode === 'short') {
      res.write(buf.subarray(0, buf.length >> 1));
      return setTimeout(() => req.socket.destroy(), 20);
    }
    res.end(buf);
  };
  const lat = /^lat(\d+)$/.exec(mode);
  if (lat) setTimeout(send, Number(lat[1]));
  else send();
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`port ${server.address().port}\n`);
});
process.stdin.on('end', () => process.exit(0));
process.stdin.on('close', () => process.exit(0));
process.stdin.resume();
