// onnxruntime-web's wasm backend in node: the peer of spawnml's wasm backend.
//   node ort_web_bench.mjs ORT_DIR MODEL.onnx FEED.bin SHAPE(1,3,224,224) THREADS RUNS OUT.bin
// Prints one JSON line {"median_ms": ...}; writes the first output as raw float32 to OUT.bin.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [ortDir, model, feedPath, shapeText, threads, runs, outPath] = process.argv.slice(2);
const ort = await import(pathToFileURL(join(ortDir, "dist", "ort.node.min.mjs")).href)
  .catch(() => import(pathToFileURL(join(ortDir, "dist", "ort.mjs")).href));
ort.env.wasm.numThreads = Number(threads);
ort.env.wasm.simd = true;
ort.env.wasm.wasmPaths = pathToFileURL(join(ortDir, "dist") + "/").href;
const session = await ort.InferenceSession.create(readFileSync(model), {
  executionProviders: ["wasm"],
  graphOptimizationLevel: "all",
});
const raw = readFileSync(feedPath);
const data = new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);
const shape = shapeText.split(",").map(Number);
const feeds = { [session.inputNames[0]]: new ort.Tensor("float32", data, shape) };
let out;
const times = [];
for (let i = 0; i < 2 + Number(runs); i++) {
  const start = performance.now();
  out = await session.run(feeds);
  times.push(performance.now() - start);
}
const measured = times.slice(2).sort((a, b) => a - b);
const y = out[session.outputNames[0]].data;
writeFileSync(outPath, Buffer.from(y.buffer, y.byteOffset, y.byteLength));
console.log(JSON.stringify({ median_ms: measured[Math.floor(measured.length / 2)] }));
process.exit(0);
