// ONNX Runtime (npm onnxruntime-node, CPU) measured the way `mcpctl perf`
// measures our engine: load time, median and p90 latency on random inputs,
// peak RSS; prints one JSON object.
//   node ort_perf.js MODEL.onnx BATCH THREADS WARMUP ITERATIONS
const ort = require('onnxruntime-node');

function randomTensor(type, dims) {
  const n = dims.reduce((a, b) => a * b, 1);
  if (type === 'float32') {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = Math.random() * 2 - 1;
    return new ort.Tensor('float32', a, dims);
  }
  if (type === 'int64') return new ort.Tensor('int64', BigInt64Array.from({length: n}, () => 1n), dims);
  if (type === 'int32') return new ort.Tensor('int32', Int32Array.from({length: n}, () => 1), dims);
  if (type === 'bool') return new ort.Tensor('bool', Uint8Array.from({length: n}, () => 1), dims);
  throw new Error(`input type ${type} not supported by the bench`);
}

(async () => {
  const [model, batch, threads, warmup, iters] = process.argv.slice(2);
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all'});
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const feeds = {};
  for (const name of session.inputNames) {
    const meta = session.inputMetadata ? session.inputMetadata.find((m) => m.name === name) : null;
    let dims = meta && meta.shape ? meta.shape.map((d, i) => (typeof d === 'number' && d > 0 ? d : (i === 0 ? Number(batch) : 1))) : null;
    if (!dims) throw new Error('input metadata unavailable');
    dims[0] = Number(batch);
    feeds[name] = randomTensor(meta.type || 'float32', dims);
  }
  for (let i = 0; i < Number(warmup); i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < Number(iters); i++) {
    const s = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  times.sort((a, b) => a - b);
  const q = (p) => times[Math.min(times.length - 1, Math.floor(p * times.length))];
  console.log(JSON.stringify({load_ms: loadMs, median_ms: q(0.5), p90_ms: q(0.9),
                              peak_rss_mb: process.resourceUsage().maxRSS / 1024}));
})().catch((e) => { console.error(`ort_perf: ${e.message}`); process.exit(1); });
