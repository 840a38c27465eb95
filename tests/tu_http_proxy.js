// SPDX-License-Identifier: MIT
// tu_http_proxy.js - an event-driven HTTP/1.1 proxy in front of one server
// on 127.0.0.1 (nginx, s3rver), for tests/test_s3.c and bench/run.sh remote:
//   node tests/tu_http_proxy.js UPSTREAM_PORT [LATENCY_MS [LOG]]
// prints "port N" once listening on 127.0.0.1 (a free port). Each request
// waits LATENCY_MS (a timer, no thread) and is then forwarded as it came
// (method, path and query, headers: a signature stays valid) over
// keep-alive connections; the answer is streamed back. With LOG, each
// request's method, URL and headers are appended to that file as one JSON
// line before it is forwarded (tests/tu_sigv4_check.py reads them).
// GET /__proxy_stats answers {"requests":N,"max_in_flight":M}. Stops by
// itself when its standard input closes (unless TU_PROXY_KEEP is set).
'use strict';
const http = require('http');
const fs = require('fs');

const upstream = Number(process.argv[2]);
const latency = Number(process.argv[3] || 0);
const log = process.argv[4];
const agent = new http.Agent({keepAlive: true, maxSockets: Infinity, maxFreeSockets: 4096});
let requests = 0, inFlight = 0, maxInFlight = 0;

const server = http.createServer((req, res) => {
  if (req.url === '/__proxy_stats') {
    const body = JSON.stringify({requests, max_in_flight: maxInFlight});
    res.writeHead(200, {'Content-Length': Buffer.byteLength(body)});
    return res.end(body);
  }
  requests++;
  inFlight++;
  if (inFlight > maxInFlight) maxInFlight = inFlight;
  res.on('close', () => { inFlight--; });
  if (log) fs.appendFileSync(log, JSON.stringify({method: req.method, url: req.url, headers: req.headers}) + '\n');
  const forward = () => {
    const up = http.request({host: '127.0.0.1', port: upstream, method: req.method, path: req.url,
                             headers: req.headers, agent}, (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  };
  if (latency > 0) setTimeout(forward, latency);
  else forward();
});
server.keepAliveTimeout = 60000;
server.maxRequestsPerSocket = 0;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`port ${server.address().port}\n`);
});
if (!process.env.TU_PROXY_KEEP) { // bench/run.sh stops it by its pid instead
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('close', () => process.exit(0));
  process.stdin.resume();
}
