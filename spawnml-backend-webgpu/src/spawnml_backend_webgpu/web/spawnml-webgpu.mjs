// The webgpu runtime of `spawnml export-web`: runs the exported plan (model.json) with the
// same WGSL kernels the Python webgpu backend generated, on the page's WebGPU device.
//
// Every buffer of the plan is one GPUBuffer, made once; weights are written as their parts
// arrive and are verified; a run writes the feeds, encodes every launch into one command
// buffer (one compute pass per run of launches without copies) and submits it. Outputs stay
// on the device: each is copied into a GPUBuffer of its own that the returned Tensor owns.

import { SpawnmlError, Tensor, fetchFile, toStorage } from "../spawnml.mjs";

const STORAGE = 0x80, COPY_SRC = 0x04, COPY_DST = 0x08;  // GPUBufferUsage

const align4 = (n) => Math.max(4, Math.ceil(n / 4) * 4);

// True when a WebGPU device can be had here (or one was given), else the reason.
export async function available(options = {}) {
  if (options.device) return true;
  if (!globalThis.navigator?.gpu) return "this browser has no WebGPU (navigator.gpu is undefined)";
  const adapter = await navigator.gpu.requestAdapter();
  return adapter ? true : "WebGPU is present but requestAdapter() found no adapter";
}

// The limits the plan needs, checked against `device` (one the page passed in).
function checkLimits(device, needed) {
  const short = Object.entries(needed).filter(([name, value]) => device.limits[name] < value);
  if (short.length) {
    throw new SpawnmlError(`webgpu: the device's limits are too low for this model: ${short.map(([n, v]) => `${n} needs ${v}, has ${device.limits[n]}`).join("; ")}`);
  }
}

async function requestDevice(needed) {
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new SpawnmlError("webgpu: requestAdapter() found no adapter");
  const requiredLimits = {};
  for (const [name, value] of Object.entries(needed)) {
    if (adapter.limits[name] < value) {
      throw new SpawnmlError(`webgpu: this adapter's ${name} is ${adapter.limits[name]}; the model needs ${value}`);
    }
    requiredLimits[name] = Math.max(value, 1);
  }
  return adapter.requestDevice({ requiredLimits });
}

export async function createSession(manifest, dir, weights, options = {}) {
  if (manifest.format !== "spawnml-webgpu" || manifest.version !== 1) {
    throw new SpawnmlError(`webgpu: expected a spawnml-webgpu version 1 plan, got ${manifest.format} ${manifest.version}`);
  }
  const device = options.device ?? await requestDevice(manifest.limits);
  checkLimits(device, manifest.limits);
  const session = new WebGPUSession(manifest, device, !options.device);
  try {
    await session.compile(dir, options);
    await session.loadWeights(weights);
  } catch (error) {
    session.release();
    throw error;
  }
  return session;
}

class WebGPUSession {
  constructor(manifest, device, ownsDevice) {
    this.manifest = manifest;
    this.device = device;
    this.ownsDevice = ownsDevice;
    this.buffers = manifest.buffers.map((b) => device.createBuffer({
      size: Math.ceil(align4(b.bytes) / 16) * 16, usage: STORAGE | COPY_SRC | COPY_DST,
    }));
  }

  async compile(dir, options) {
    const device = this.device;
    const sources = await Promise.all(this.manifest.kernels.map(
      async (k) => (await fetchFile(new URL(k.file, dir), options)).text()));
    device.pushErrorScope("validation");
    this.pipelines = this.manifest.kernels.map((k, i) => {
      const entries = [];
      for (let b = 0; b <= k.bindings; b++) {
        entries.push({ binding: b, visibility: 4 /* COMPUTE */,
          buffer: { type: b < k.bindings ? "read-only-storage" : "storage" } });
      }
      const layout = device.createBindGroupLayout({ entries });
      const module = device.createShaderModule({ code: sources[i], label: k.file });
      return { layout, module, file: k.file, pipeline: device.createComputePipeline({
        layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
        compute: { module, entryPoint: "main" }, label: k.file,
      }) };
    });
    const error = await device.popErrorScope();
    if (error) {
      const details = [];
      for (const p of this.pipelines) {
        const info = await p.module.getCompilationInfo();
        for (const m of info.messages.filter((m) => m.type === "error")) {
          details.push(`${p.file}:${m.lineNum}:${m.linePos}: ${m.message}`);
        }
      }
      throw new SpawnmlError(`webgpu: the kernels do not compile on this device: ${error.message} ${details.join("; ")}`);
    }
    // Bind groups are made once: the buffers never change. A binding that packs several
    // inputs, or that reads the launch's own output, gets a scratch buffer filled by copies.
    this.steps = this.manifest.launches.map((launch) => {
      const copies = [];
      const resources = launch.bindings.map((b) => {
        if (b.buffer !== undefined && b.buffer !== launch.out) return this.buffers[b.buffer];
        const members = b.packed ?? [[b.buffer, 0, align4(this.manifest.buffers[b.buffer].bytes)]];
        const scratch = this.device.createBuffer({ size: align4(b.bytes ?? members[0][2]), usage: STORAGE | COPY_DST });
        this.scratch = [...(this.scratch ?? []), scratch];
        for (const [buffer, offset, bytes] of members) {
          if (bytes) copies.push([this.buffers[buffer], scratch, offset, bytes]);
        }
        return scratch;
      });
      resources.push(this.buffers[launch.out]);
      const kernel = this.pipelines[launch.kernel];
      const group = device.createBindGroup({
        layout: kernel.layout,
        entries: resources.map((buffer, binding) => ({ binding, resource: { buffer } })),
      });
      return { pipeline: kernel.pipeline, group, grid: launch.grid, copies };
    });
  }

  // Weights arrive as verified parts ({offset, bytes}); each part's bytes go to the
  // tensors they overlap, so no more than one part is ever held.
  async loadWeights(weights) {
    const tensors = this.manifest.weights.tensors;
    let t = 0;
    for await (const part of weights) {
      const start = part.offset, end = part.offset + part.bytes.length;
      while (t < tensors.length && tensors[t].offset + align4(tensors[t].bytes) <= start) t++;
      for (let i = t; i < tensors.length && tensors[i].offset < end; i++) {
        const w = tensors[i];
        const from = Math.max(start, w.offset), to = Math.min(end, w.offset + align4(w.bytes));
        if (to > from) {
          this.device.queue.writeBuffer(this.buffers[w.buffer], from - w.offset,
            part.bytes, from - start, to - from);
        }
      }
    }
  }

  get inputNames() { return this.manifest.inputs.map((t) => t.name); }
  get outputNames() { return this.manifest.outputs.map((t) => t.name); }

  // A tensor another session left on this device: fed by a copy, never read back.
  takesDevice(tensor) { return tensor.gpuBuffer != null && tensor.device === this.device; }

  async run(feeds) {
    const device = this.device;
    const encoder = device.createCommandEncoder();
    for (const t of this.manifest.inputs) {
      const feed = feeds[t.name];
      if (feed?.location === "gpu-buffer" && this.takesDevice(feed)) {
        if (feed.type !== t.dtype || JSON.stringify(feed.dims) !== JSON.stringify(t.shape)) {
          throw new SpawnmlError(`input ${t.name}: expected ${t.dtype} ${JSON.stringify(t.shape)}, got ${feed.type} ${JSON.stringify(feed.dims)}`);
        }
        encoder.copyBufferToBuffer(feed.gpuBuffer, 0, this.buffers[t.buffer], 0, align4(t.bytes));
        continue;
      }
      const data = toStorage(feed, t);
      device.queue.writeBuffer(this.buffers[t.buffer], 0, data.buffer, data.byteOffset, data.byteLength);
    }
    let pass = null;
    for (const step of this.steps) {
      if (step.copies.length) {
        pass?.end();
        pass = null;
        for (const [src, dst, offset, bytes] of step.copies) encoder.copyBufferToBuffer(src, 0, dst, offset, bytes);
      }
      pass ??= encoder.beginComputePass();
      pass.setPipeline(step.pipeline);
      pass.setBindGroup(0, step.group);
      pass.dispatchWorkgroups(...step.grid);
    }
    pass?.end();
    // Outputs are copied out of the plan's buffers: the next run reuses those.
    const outputs = {};
    for (const t of this.manifest.outputs) {
      const size = align4(t.bytes);
      const copy = device.createBuffer({ size, usage: STORAGE | COPY_SRC | COPY_DST });
      encoder.copyBufferToBuffer(this.buffers[t.buffer], 0, copy, 0, size);
      outputs[t.name] = Object.assign(Tensor.onDevice(t, copy, (buffer) => readBuffer(device, buffer, size)), { device });
    }
    device.queue.submit([encoder.finish()]);
    for (const c of this.manifest.checks) {
      const counts = new Int32Array(await readBuffer(device, this.buffers[c.buffer], c.size * 4));
      const total = counts.reduce((a, b) => a + b, 0);
      if (total) {
        for (const o of Object.values(outputs)) o.dispose();
        throw new SpawnmlError(c.message.replace("{count}", String(total)));
      }
    }
    return outputs;
  }

  release() {
    for (const b of [...(this.buffers ?? []), ...(this.scratch ?? [])]) b.destroy();
    this.buffers = [];
    this.scratch = [];
    if (this.ownsDevice) this.device.destroy();
  }
}

// The bytes of a GPUBuffer (a copy into a mappable buffer, then mapAsync).
async function readBuffer(device, buffer, size) {
  const staging = device.createBuffer({ size, usage: 0x01 /* MAP_READ */ | COPY_DST });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(buffer, 0, staging, 0, size);
  device.queue.submit([encoder.finish()]);
  await staging.mapAsync(1 /* GPUMapMode.READ */);
  const bytes = staging.getMappedRange().slice(0);
  staging.destroy();
  return bytes;
}
