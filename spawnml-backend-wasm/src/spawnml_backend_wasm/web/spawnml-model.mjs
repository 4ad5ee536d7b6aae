// A model exported by `spawnml export-wasm` (ABI 1), in node or a browser; no dependencies.
//
//   const model = await ExportedModel.fromUrl("model/");        // a browser (fetch)
//   const model = await ExportedModel.fromDirectory("model/");  // node (fs)
//   const outputs = await model.run({ input: new Float32Array(...) }); // { name: TypedArray }
//   model.close();                                               // ends the worker threads
//
// The weights stream one chunk at a time into the module's memory (never whole in the JS
// heap); the module checks their size and checksum. Every failure throws a SpawnmlError
// that says what was expected and what was found. A module exported with --threads N runs
// on N workers (spawnml-worker.mjs) sharing its memory: node, or a cross-origin isolated page.

const ARRAYS = {
  float32: Float32Array, int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array,
  int16: Int16Array, uint16: Uint16Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array,
};

export class SpawnmlError extends Error {
  constructor(message) { super(message); this.name = "SpawnmlError"; }
}

export class ExportedModel {
  constructor(manifest, instance) {
    this.manifest = manifest;
    this.exports = instance.exports;
    this.inputNames = manifest.inputs.map((t) => t.name);
    this.outputNames = manifest.outputs.map((t) => t.name);
  }

  // Instantiate the module and load the weights from an async iterable of byte chunks.
  static async create(manifest, moduleBytes, weightChunks) {
    if (manifest.format !== "spawnml-wasm" || manifest.abi !== 1) {
      throw new SpawnmlError(`expected a spawnml-wasm ABI 1 manifest, got ${manifest.format} ABI ${manifest.abi}`);
    }
    const threads = manifest.threads ?? 1;
    let model;
    if (threads > 1) {
      if (typeof SharedArrayBuffer === "undefined") {
        throw new SpawnmlError(`this module was exported for ${threads} threads, which need shared memory; this host has none (a page must be cross-origin isolated), so export it without --threads`);
      }
      const module = await WebAssembly.compile(moduleBytes);
      const pages = manifest.memory_bytes / 65536;
      const memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
      model = new ExportedModel(manifest, await WebAssembly.instantiate(module, { env: { memory } }));
      model.threads = await Promise.all(Array.from({ length: threads }, () => Thread.start(module, memory)));
    } else {
      const { instance } = await WebAssembly.instantiate(moduleBytes, {});
      model = new ExportedModel(manifest, instance);
    }
    const e = model.exports;
    const base = e.weights_ptr(), size = e.weights_size();
    let written = 0;
    for await (const chunk of weightChunks) {
      const bytes = chunk instanceof Uint8Array ? chunk : new Uint8Array(chunk);
      const room = Math.min(bytes.length, size - written);
      if (room > 0) new Uint8Array(e.memory.buffer, base + written, room).set(bytes.subarray(0, room));
      written += bytes.length;  // counted in full: a longer file fails the size check
    }
    model.check(e.load(written), `weights: expected ${size} bytes, got ${written}`);
    return model;
  }

  static async fromDirectory(dir) {
    const fs = await import("node:fs");
    const path = await import("node:path");
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, "model.json"), "utf8"));
    const moduleBytes = fs.readFileSync(path.join(dir, manifest.module));
    const stream = fs.createReadStream(path.join(dir, manifest.weights.file), { highWaterMark: 1 << 20 });
    return ExportedModel.create(manifest, moduleBytes, stream);
  }

  static async fromUrl(base, onProgress = () => {}) {
    const url = (name) => new URL(name, new URL(base, globalThis.location?.href ?? undefined));
    const get = async (name) => {
      const response = await fetch(url(name));
      if (!response.ok) throw new SpawnmlError(`${url(name)}: HTTP ${response.status}`);
      return response;
    };
    const manifest = await (await get("model.json")).json();
    const moduleBytes = await (await get(manifest.module)).arrayBuffer();
    const body = (await get(manifest.weights.file)).body;
    async function* chunks() {
      const reader = body.getReader();
      let seen = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        seen += value.length;
        onProgress(seen, manifest.weights.bytes);
        yield value;
      }
    }
    return ExportedModel.create(manifest, moduleBytes, chunks());
  }

  check(code, detail = "") {
    if (code === 0) return;
    const e = this.exports;
    const at = e.error_message(code);
    const bytes = new Uint8Array(e.memory.buffer, at);
    const text = new TextDecoder().decode(bytes.slice(0, bytes.indexOf(0)));  // unshared copy
    throw new SpawnmlError(detail ? `${text} (${detail})` : text);
  }

  // Run on { name: TypedArray } (every input, of its manifest dtype and element count);
  // resolves to { name: TypedArray } copies of the outputs.
  async run(feeds) {
    const e = this.exports;
    const missing = this.inputNames.filter((n) => !(n in feeds));
    const unknown = Object.keys(feeds).filter((n) => !this.inputNames.includes(n));
    if (missing.length || unknown.length) {
      throw new SpawnmlError(`feeds: expected ${JSON.stringify(this.inputNames)}, got ${JSON.stringify(Object.keys(feeds))}`);
    }
    this.manifest.inputs.forEach((t, i) => {
      const value = feeds[t.name];
      const Array_ = ARRAYS[t.dtype];
      if (!(value instanceof Array_)) {
        throw new SpawnmlError(`input ${t.name}: expected a ${Array_.name} (${t.dtype}), got ${value?.constructor?.name}`);
      }
      if (value.byteLength !== t.bytes) {
        throw new SpawnmlError(`input ${t.name}: expected ${t.bytes / Array_.BYTES_PER_ELEMENT} elements (shape ${JSON.stringify(t.shape)}), got ${value.length}`);
      }
      new Uint8Array(e.memory.buffer, e.input_ptr(i), t.bytes)
        .set(new Uint8Array(value.buffer, value.byteOffset, value.byteLength));
      this.check(e.set_input(i, value.byteLength));
    });
    if (this.threads) {
      e.reset_threads();
      const results = await Promise.all(this.threads.map((t, tid) => t.call({ tid })));
      const trapped = results.findIndex((r) => r.code === -1);
      if (trapped >= 0) throw new SpawnmlError(`thread ${trapped} trapped: ${results[trapped].error}`);
      this.check(results[0].code || (results.find((r) => r.code !== 0)?.code ?? 0));
    } else {
      this.check(e.run());
    }
    const outputs = {};
    this.manifest.outputs.forEach((t, i) => {
      const bytes = new Uint8Array(e.memory.buffer, e.output_ptr(i), e.output_size(i)).slice();
      outputs[t.name] = new ARRAYS[t.dtype](bytes.buffer);
    });
    return outputs;
  }

  // Ends the worker threads of a threaded module (a no-op otherwise).
  close() {
    for (const t of this.threads ?? []) t.terminate();
    this.threads = null;
  }
}

// A worker running spawnml-worker.mjs, in node (worker_threads) or a browser (Worker).
class Thread {
  static async start(module, memory) {
    const url = new URL("./spawnml-worker.mjs", import.meta.url);
    const t = new Thread();
    if (typeof process !== "undefined" && process.versions?.node) {
      const { Worker } = await import("node:worker_threads");
      t.worker = new Worker(url);
      t.worker.on("message", (m) => t.resolve(m));
      t.worker.on("error", (error) => t.resolve({ code: -1, error: String(error) }));
      t.node = true;
    } else {
      t.worker = new Worker(url, { type: "module" });
      t.worker.onmessage = (event) => t.resolve(event.data);
      t.worker.onerror = (event) => t.resolve({ code: -1, error: event.message });
    }
    const ready = await t.call({ module, memory });
    if (!ready.ready) throw new SpawnmlError(`a worker thread did not start: ${ready.error}`);
    return t;
  }

  // Post a message and resolve with the worker's answer (one call at a time per worker);
  // node's workers keep the process alive only while a call is in flight.
  call(message) {
    if (this.node) this.worker.ref();
    return new Promise((resolve) => {
      this.resolve = (answer) => { if (this.node) this.worker.unref(); resolve(answer); };
      this.worker.postMessage(message);
    });
  }

  terminate() { this.worker.terminate(); }
}
