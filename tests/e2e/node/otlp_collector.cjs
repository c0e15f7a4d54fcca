// A local OTLP/HTTP trace collector for the tracing e2e tests. It decodes
// each ExportTraceServiceRequest with an independent implementation (the
// protobuf classes of the npm package @opentelemetry/otlp-transformer,
// installed by tools/fetch-node-clients.sh) and appends one JSON line per
// span to OUT_FILE: ids in hex, times in nanoseconds as strings, attributes
// and the resource's attributes as plain objects.
//
//   node otlp_collector.cjs OUT_FILE [--hang]
//
// Listens on 127.0.0.1, a free port, and prints "listening PORT" first.
// With --hang it accepts connections and never answers (an unreachable
// collector that does not even refuse).
'use strict';
const fs = require('fs');
const http = require('http');
const path = require('path');

const modules = process.env.MCP_NODE_CLIENTS_DIR || path.join(__dirname, '..', '..', '..', '.cache', 'node');
const root = require(path.join(modules, 'node_modules', '@opentelemetry', 'otlp-transformer', 'build', 'src', 'generated', 'root'));
const Request = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const Response = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;

const out = process.argv[2];
const hang = process.argv.includes('--hang');

function hex(b) { return b && b.length ? Buffer.from(b).toString('hex') : ''; }

function value(v) {
  if (v == null) return null;
  if (v.stringValue != null) return v.stringValue;
  if (v.boolValue != null) return v.boolValue;
  if (v.intValue != null) return Number(v.intValue);
  if (v.doubleValue != null) return v.doubleValue;
  return null;
}

function attrs(list) {
  const o = {};
  for (const kv of list || []) o[kv.key] = value(kv.value);
  return o;
}

const server = http.createServer((req, res) => {
  if (hang) return; // never answer
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    let lines = '';
    let status = 200;
    try {
      if (req.method !== 'POST' || req.url !== '/v1/traces') throw new Error(`unexpected ${req.method} ${req.url}`);
      if (req.headers['content-type'] !== 'application/x-protobuf') throw new Error(`content-type ${req.headers['content-type']}`);
      const msg = Request.toObject(Request.decode(Buffer.concat(chunks)), { longs: String, bytes: Array, defaults: true });
      for (const rs of msg.resourceSpans) {
        const resource = attrs(rs.resource && rs.resource.attributes);
        for (const ss of rs.scopeSpans) {
          for (const s of ss.spans) {
            lines += JSON.stringify({
              trace_id: hex(s.traceId), span_id: hex(s.spanId), parent_span_id: hex(s.parentSpanId),
              trace_state: s.traceState, name: s.name, kind: s.kind, flags: s.flags,
              start: s.startTimeUnixNano, end: s.endTimeUnixNano,
              status_code: s.status ? s.status.code : 0, status_message: s.status ? s.status.message : '',
              attributes: attrs(s.attributes), resource, scope: ss.scope ? ss.scope.name : '',
            }) + '\n';
          }
        }
      }
    } catch (e) {
      lines = JSON.stringify({ error: String(e) }) + '\n';
      status = 400;
    }
    fs.appendFileSync(out, lines);
    const body = Buffer.from(Response.encode(Response.create({})).finish());
    res.writeHead(status, { 'Content-Type': 'application/x-protobuf', 'Content-Length': body.length });
    res.end(body);
  });
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
