// The wasm runtime of `spawnml export-web`: the module of `spawnml export-wasm` (the whole
// plan, its kernels compiled to WebAssembly SIMD128) on the page's main thread.

import { SpawnmlError, Tensor, fetchFile, fromStorage, toStorage } from "../spawnml.mjs";
import { ExportedModel } from "./spawnml-model.mjs";

// The smallest module using a v128 value: validates only where SIMD128 is supported.
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2,
  1, 0, 10, 22, 1, 20, 0, 253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11]);

export async function available() {
  if (typeof WebAssembly !== "object") return "this browser has no WebAssembly";
  return WebAssembly.validate(SIMD_PROBE) ? true : "this browser's WebAssembly has no SIMD128";
}

// The manifest's tensors as toStorage/fromStorage see them: the model's dtype and the
// module's storage dtype.
const info = (t) => ({ name: t.name, dtype: t.logical ?? t.dtype, storage: t.dtype, shape: t.shape });

// The threaded module when the export has one, the page is cross-origin isolated (shared
// memory) and options.threads is not 1; else the one-thread module.
function pick(manifest, options) {
  const threaded = manifest.threaded;
  if (!threaded || options.threads === 1) return [manifest, "one thread"];
  if (!globalThis.crossOriginIsolated) {
    return [manifest, "one thread: the page is not cross-origin isolated (COOP/COEP headers), so it has no shared memory"];
  }
  return [{ ...manifest, module: threaded.module, threads: threaded.threads }, `${threaded.threads} threads`];
}

export async function createSession(manifest, dir, weights, options = {}) {
  const [chosen, threads] = pick(manifest, options);
  const moduleBytes = await (await fetchFile(new URL(chosen.module, dir), options)).arrayBuffer();
  async function* chunks() {
    for await (const part of weights) yield part.bytes;
  }
  const model = await ExportedModel.create(chosen, moduleBytes, chunks());
  return {
    loadInfo: { threads },
    async run(feeds) {
      const arrays = {};
      for (const t of manifest.inputs) arrays[t.name] = toStorage(feeds[t.name], info(t));
      const stored = await model.run(arrays);
      const outputs = {};
      for (const t of manifest.outputs) {
        const i = info(t);
        const data = fromStorage(stored[t.name].buffer, i);
        outputs[t.name] = new Tensor(i.dtype, data, t.shape);
      }
      return outputs;
    },
    release() { model.close(); },
  };
}

export { SpawnmlError };
