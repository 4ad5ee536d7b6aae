// spawnml in the browser: runs a model written by `spawnml export-web` with the kernels
// spawnml generated for WebGPU, WebGL2 or Wasm. Plain ES module, no dependencies.
//
//   import { InferenceSession, Tensor } from "./spawnml.mjs";
//   const session = await InferenceSession.create("./", { backend: ["webgpu", "webgl", "wasm"] });
//   const outputs = await session.run({ input: new Tensor("float32", data, [1, 3, 224, 224]) });
//   const scores = await outputs.logits.getData();   // outputs stay on the device until read
//
// Weights stream into the device one part at a time (never the whole file in the JS heap);
// each part's sha256 is checked against the manifest, from the network or from the Cache
// API copy kept for the next visit (a corrupt copy is dropped and fetched again). Every
// failure is a SpawnmlError that says what was expected and what was found.

export class SpawnmlError extends Error {
  constructor(message) { super(message); this.name = "SpawnmlError"; }
}

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, int32: Int32Array, uint32: Uint32Array,
  int64: BigInt64Array, uint64: BigUint64Array, int16: Int16Array, uint16: Uint16Array,
  int8: Int8Array, uint8: Uint8Array, bool: Uint8Array,
};
const CACHE = "spawnml-v1";

// A tensor: on the CPU (`data`), or on a device until `getData()` reads it back.
export class Tensor {
  constructor(type, data, dims) {
    const Array_ = ARRAYS[type];
    if (!Array_) throw new SpawnmlError(`Tensor: unknown type ${type} (known: ${Object.keys(ARRAYS).join(", ")})`);
    if (!(data instanceof Array_)) throw new SpawnmlError(`Tensor: a ${type} tensor needs a ${Array_.name}, got ${data?.constructor?.name}`);
    const size = dims.reduce((a, b) => a * b, 1);
    if (data.length !== size) throw new SpawnmlError(`Tensor: dims ${JSON.stringify(dims)} hold ${size} elements, the data has ${data.length}`);
    Object.assign(this, { type, dims: [...dims], size, location: "cpu", cpuData: data });
  }

  // A tensor living in a device buffer (`read` returns the stored bytes).
  static onDevice(info, buffer, read) {
    const t = Object.create(Tensor.prototype);
    Object.assign(t, { type: info.dtype, dims: [...info.shape], size: info.shape.reduce((a, b) => a * b, 1),
      location: "gpu-buffer", gpuBuffer: buffer, info, read });
    return t;
  }

  get data() {
    if (this.location !== "cpu") throw new SpawnmlError(`this tensor is on the device (${this.location}): read it with await tensor.getData()`);
    return this.cpuData;
  }

  async getData(release = false) {
    if (this.location === "cpu") return this.cpuData;
    if (!this.gpuBuffer) throw new SpawnmlError("this tensor was disposed");
    const data = fromStorage(await this.read(this.gpuBuffer), this.info);
    if (release) this.dispose();
    return data;
  }

  dispose() {
    this.gpuBuffer?.destroy();
    this.gpuBuffer = null;
  }
}

// A feed (Tensor or TypedArray) as the element type the backend stores `t.dtype` in.
export function toStorage(value, t) {
  // A Tensor of this module or of another export's copy of it (a page may load several).
  const tensor = value instanceof Tensor || (ArrayBuffer.isView(value?.cpuData) && Array.isArray(value?.dims));
  const data = tensor ? value.data : value;
  if (tensor && JSON.stringify(value.dims) !== JSON.stringify(t.shape)) {
    throw new SpawnmlError(`input ${t.name}: expected shape ${JSON.stringify(t.shape)}, got ${JSON.stringify(value.dims)}`);
  }
  const Array_ = ARRAYS[t.dtype];
  if (!(data instanceof Array_)) {
    throw new SpawnmlError(`input ${t.name}: expected ${t.dtype} data (a ${Array_?.name}), got ${data?.constructor?.name}`);
  }
  const size = t.shape.reduce((a, b) => a * b, 1);
  if (data.length !== size) {
    throw new SpawnmlError(`input ${t.name}: expected ${size} elements (shape ${JSON.stringify(t.shape)}), got ${data.length}`);
  }
  const storage = t.storage ?? t.dtype;
  if (storage === t.dtype) return data;
  if (data instanceof BigInt64Array || data instanceof BigUint64Array) {
    const bad = data.find((v) => v < -2147483648n || v > 2147483647n);
    if (bad !== undefined) throw new SpawnmlError(`input ${t.name}: ${bad} does not fit the backend's ${storage} storage of ${t.dtype}`);
    return ARRAYS[storage].from(data, Number);
  }
  return ARRAYS[storage].from(data);
}

// Stored bytes of tensor `t` as a TypedArray of its own dtype.
export function fromStorage(bytes, t) {
  const storage = ARRAYS[t.storage ?? t.dtype];
  const stored = new storage(bytes, 0, t.shape.reduce((a, b) => a * b, 1));
  if ((t.storage ?? t.dtype) === t.dtype) return stored;
  return t.dtype === "int64" ? BigInt64Array.from(stored, BigInt) : ARRAYS[t.dtype].from(stored);
}

async function openCache(options) {
  if (options.cache === false || !globalThis.caches) return null;
  try { return await caches.open(CACHE); } catch { return null; }
}

// A model file: from the network (kept in the cache for the next visit), or from the cache
// when the network fails (offline).
export async function fetchFile(url, options = {}) {
  const cache = await openCache(options);
  let response, failure;
  try {
    response = await fetch(url);
    if (response.ok) {
      if (cache) await cache.put(url, response.clone());
      return response;
    }
    failure = `HTTP ${response.status} ${response.statusText}`;
  } catch (error) {
    failure = `${error.message} (unreachable)`;
  }
  const cached = cache ? await cache.match(url) : undefined;
  if (cached) return cached;
  throw new SpawnmlError(`cannot fetch ${url}: ${failure}`);
}

const hex = (digest) => [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");

class PartMismatch extends Error {}

// The weights file as verified parts {offset, bytes} (a part at a time). The Cache API copy
// is used when present; a copy that fails a part's sha256 is deleted and fetched again,
// and parts already handed out are not repeated. `report.source` says where they came from.
export async function* weightParts(url, weights, options = {}, report = {}) {
  const cache = await openCache(options);
  let response = cache ? await cache.match(url) : undefined;
  report.source = response ? "cache" : "network";
  let next = 0;
  for (let attempt = 0; ; attempt++) {
    let stored = null;
    if (!response) {
      response = await fetchFile(url, { cache: false });
      if (cache) stored = cache.put(url, response.clone());
    }
    try {
      for await (const part of readParts(response, weights, next, options)) {
        next++;
        yield part;
      }
      await stored;
      return;
    } catch (error) {
      if (!(error instanceof PartMismatch)) throw error;
      await stored?.catch(() => {});
      if (cache) await cache.delete(url);
      if (report.source === "cache" && attempt === 0) {
        report.source = `network (the cached copy failed its sha256 check: ${error.message}; fetched again)`;
        response = null;
        continue;
      }
      throw new SpawnmlError(`weights ${url}: ${error.message}; the file is corrupt or from another export`);
    }
  }
}

async function* readParts(response, weights, skip, options) {
  const parts = weights.parts;
  if (!response.body) {  // an empty file kept by the Cache API has no body at all
    if (parts.length) throw new PartMismatch(`the response has no body, expected ${weights.bytes} bytes`);
    return;
  }
  const reader = response.body.getReader();
  let index = 0, fill = 0, seen = 0;
  let buffer = parts.length ? new Uint8Array(parts[0].bytes) : null;
  const finish = async () => {
    const part = parts[index];
    if (index >= skip) {
      const got = hex(await crypto.subtle.digest("SHA-256", buffer));
      if (got !== part.sha256) throw new PartMismatch(`part ${index} (bytes ${part.offset}-${part.offset + part.bytes}) has sha256 ${got}, expected ${part.sha256}`);
    }
    const done = { offset: part.offset, bytes: buffer, index };
    index++;
    fill = 0;
    buffer = index < parts.length ? new Uint8Array(parts[index].bytes) : null;
    return done;
  };
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    seen += value.length;
    options.onProgress?.({ loaded: seen, total: weights.bytes });
    let at = 0;
    while (at < value.length) {
      if (!buffer) throw new PartMismatch(`the file is longer than ${weights.bytes} bytes`);
      const n = Math.min(value.length - at, buffer.length - fill);
      buffer.set(value.subarray(at, at + n), fill);
      fill += n;
      at += n;
      if (fill === buffer.length) {
        const part = await finish();
        if (part.index >= skip) yield part;
      }
    }
  }
  if (index < parts.length) throw new PartMismatch(`the file ends after ${seen} bytes, expected ${weights.bytes}`);
}

async function fetchJson(url, options) {
  const response = await fetchFile(url, options);
  try {
    return await response.json();
  } catch (error) {
    throw new SpawnmlError(`${url}: not valid JSON (${error.message})`);
  }
}

// A model exported by `spawnml export-web`, on one of its backends.
export class InferenceSession {
  constructor(impl, backend, manifest, load) {
    Object.assign(this, { impl, backend, manifest, load });
    this.inputNames = manifest.inputs.map((t) => t.name);
    this.outputNames = manifest.outputs.map((t) => t.name);
  }

  // `url`: the export's folder. options: backend (a name or a preference list: the first
  // that works here is used), device (a GPUDevice to share), onProgress({loaded, total}),
  // cache (false: no Cache API), threads (1: the one-thread Wasm module even where a
  // threaded one could run).
  static async create(url, options = {}) {
    const base = new URL(url.endsWith("/") ? url : `${url}/`, globalThis.location?.href);
    const index = await fetchJson(new URL("export.json", base), options);
    if (index.format !== "spawnml-web") throw new SpawnmlError(`${base}export.json: expected format spawnml-web, got ${index.format}`);
    const wanted = options.backend ? [].concat(options.backend) : index.backends;
    const reasons = [];
    for (const name of wanted) {
      if (!index.backends.includes(name)) {
        reasons.push(`${name}: not in this export (it has ${index.backends.join(", ")})`);
        continue;
      }
      const dir = new URL(`${name}/`, base);
      const manifest = await fetchJson(new URL("model.json", dir), options);
      const runtime = await import(new URL(manifest.runtime, dir).href);
      const why = await runtime.available(options);
      if (why !== true) {
        reasons.push(`${name}: ${why}`);
        continue;
      }
      const start = performance.now();
      const load = { backend: name, bytes: manifest.weights.bytes, skipped: reasons };
      const parts = weightParts(new URL(manifest.weights.file, dir), manifest.weights, options, load);
      const impl = await runtime.createSession(manifest, dir, parts, options);
      load.ms = performance.now() - start;
      Object.assign(load, impl.loadInfo ?? {});
      return new InferenceSession(impl, name, manifest, load);
    }
    throw new SpawnmlError(`no backend of [${wanted.join(", ")}] can run this model here: ${reasons.join("; ")}`);
  }

  // feeds: { name: Tensor | TypedArray } for every input; resolves to { name: Tensor }.
  async run(feeds) {
    const names = Object.keys(feeds ?? {});
    const missing = this.inputNames.filter((n) => !names.includes(n));
    const unknown = names.filter((n) => !this.inputNames.includes(n));
    if (missing.length || unknown.length) {
      throw new SpawnmlError(`feeds: expected ${JSON.stringify(this.inputNames)}, got ${JSON.stringify(names)}`);
    }
    if (!this.impl) throw new SpawnmlError("this session was released");
    // Another session's output stays on the device when this backend can read it there
    // (WebGPU, one device); otherwise it is read back once and fed from the CPU.
    const ready = {};
    for (const [name, value] of Object.entries(feeds)) {
      const elsewhere = value instanceof Tensor && value.location !== "cpu" && !this.impl.takesDevice?.(value);
      ready[name] = elsewhere ? new Tensor(value.type, await value.getData(), value.dims) : value;
    }
    return this.impl.run(ready);
  }

  // The GPUDevice a WebGPU session runs on (pass it as `device` to share it), else null.
  get device() { return this.impl?.device ?? null; }

  release() {
    this.impl?.release();
    this.impl = null;
  }
}
