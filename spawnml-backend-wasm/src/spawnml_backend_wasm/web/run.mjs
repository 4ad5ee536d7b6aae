// Run a model exported by `spawnml export-wasm` under node, with no Python:
//   node run.mjs [MODEL_DIR] [--input NAME=FILE.bin ...] [--out DIR] [--runs N]
// Inputs are raw little-endian files of the manifest's dtype and shape (zeros when not
// given); each output is written to DIR/NAME.bin. Prints one JSON line: load and run times
// (median of --runs), the module's size and the outputs written.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ExportedModel, SpawnmlError } from "./spawnml-model.mjs";

const args = process.argv.slice(2);
let dir = dirname(fileURLToPath(import.meta.url));
const inputs = {};
let out = null, runs = 1;
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--input") {
    const [name, file] = args[++i].split(/=(.*)/s);
    inputs[name] = file;
  } else if (args[i] === "--out") out = args[++i];
  else if (args[i] === "--runs") runs = Number(args[++i]);
  else dir = args[i];
}
const ARRAYS = {
  float32: Float32Array, int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array,
  int16: Int16Array, uint16: Uint16Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array,
};
try {
  let start = performance.now();
  const model = await ExportedModel.fromDirectory(dir);
  const loadMs = performance.now() - start;
  const feeds = {};
  for (const t of model.manifest.inputs) {
    const raw = t.name in inputs ? readFileSync(inputs[t.name]) : Buffer.alloc(t.bytes);
    const copy = new Uint8Array(raw).slice().buffer;
    feeds[t.name] = new ARRAYS[t.dtype](copy, 0, copy.byteLength / ARRAYS[t.dtype].BYTES_PER_ELEMENT);
  }
  const times = [];
  let outputs;
  for (let r = 0; r < runs; r++) {
    start = performance.now();
    outputs = await model.run(feeds);
    times.push(performance.now() - start);
  }
  model.close();
  times.sort((a, b) => a - b);
  const written = [];
  if (out) {
    mkdirSync(out, { recursive: true });
    for (const [name, value] of Object.entries(outputs)) {
      const file = join(out, `${name.replace(/[^A-Za-z0-9_.-]/g, "_")}.bin`);
      writeFileSync(file, new Uint8Array(value.buffer, value.byteOffset, value.byteLength));
      written.push(file);
    }
  }
  console.log(JSON.stringify({
    load_ms: loadMs, run_ms: times[Math.floor(times.length / 2)],
    module_bytes: model.manifest.module_bytes, weights_bytes: model.manifest.weights.bytes,
    threads: model.manifest.threads ?? 1,
    outputs: written,
  }));
} catch (error) {
  if (!(error instanceof SpawnmlError)) throw error;
  console.error(`spawnml: error: ${error.message}`);
  process.exit(1);
}
