// Runs a model on ONNX Runtime (npm onnxruntime-node, CPU) on one float32
// .npy input and writes output 0 as a float32 .npy, for the side-by-side
// output checks (int8_check.py).
//   node ort_run.js MODEL.onnx INPUT.npy OUTPUT.npy [THREADS]
const fs = require('fs');
const ort = require('onnxruntime-node');

function readNpy(path) {
  const buf = fs.readFileSync(path);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${path}: not a .npy file`);
  const hlen = buf.readUInt16LE(8);
  const header = buf.toString('latin1', 10, 10 + hlen);
  if (!header.includes("'descr': '<f4'") || header.includes("'fortran_order': True"))
    throw new Error(`${path}: want a C-order little-endian float32 array`);
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const start = 10 + hlen;
  const data = new Float32Array(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + buf.length));
  return {shape, data};
}

function writeNpy(path, dims, data) {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${dims.join(', ')}${dims.length === 1 ? ',' : ''}), }`;
  const pad = 64 - ((10 + header.length + 1) % 64);
  header += ' '.repeat(pad % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1; head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(header, 'latin1'), Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

(async () => {
  const [model, input, output, threads] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads || 2), interOpNumThreads: 1, graphOptimizationLevel: 'all'});
  const x = readNpy(input);
  const res = await session.run({[session.inputNames[0]]: new ort.Tensor('float32', x.data, x.shape)});
  const y = res[session.outputNames[0]];
  writeNpy(output, y.dims, y.data);
})().catch((e) => { console.error(`ort_run: ${e.message}`); process.exit(1); });
