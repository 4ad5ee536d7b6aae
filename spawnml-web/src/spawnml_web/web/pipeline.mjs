// A pipeline page of `spawnml export-web --pipeline TASK`: the picked photo becomes an RGB
// uint8 tensor of the export's image size, and the export's plan runs the pipeline's own
// generated kernels on it (pre-processing, the model, post-processing) as one session.
// Extra stages (depth's colour map) are sessions fed with the first one's outputs, which
// stay on the device. Plain ES module, no dependencies.
//
//   import { Pipeline } from "./pipeline.mjs";
//   const pipe = await Pipeline.create("./", { backend: "webgpu" });
//   const result = await pipe.run(await Pipeline.pixels(file, pipe.size));

import { InferenceSession, SpawnmlError, Tensor } from "./spawnml.mjs";

export class Pipeline {
  constructor(index, session, stages) {
    Object.assign(this, { index, session, stages, task: index.pipeline.task, modelRuns: 0 });
    this.size = index.pipeline.image;  // [height, width]
  }

  // The export at `url` on the first backend of options.backend that works here; its
  // extra stages run on the same backend (and WebGPU device).
  static async create(url, options = {}) {
    const base = new URL(url.endsWith("/") ? url : `${url}/`, globalThis.location?.href);
    const index = await (await fetch(new URL("export.json", base))).json();
    if (!index.pipeline) throw new SpawnmlError(`${base}: not a pipeline export (no "pipeline" in export.json)`);
    const session = await InferenceSession.create(base.href, options);
    const stages = {};
    for (const name of index.pipeline.stages) {
      stages[name] = await InferenceSession.create(new URL(`${name}/`, base).href,
        { ...options, backend: session.backend, device: session.device ?? undefined });
    }
    return new Pipeline(index, session, stages);
  }

  // RGB bytes (height x width x 3) of an image (a Blob, File or URL) drawn at `size`
  // ([height, width]): pixels as stored, no colour management; a photo of another size is
  // scaled by the browser to it. `natural` is the photo's own size (for display).
  static async pixels(source, [height, width]) {
    let blob = source;
    if (!(source instanceof Blob)) {
      const response = await fetch(source);
      if (!response.ok) throw new SpawnmlError(`cannot fetch the image ${source}: HTTP ${response.status} ${response.statusText}`);
      blob = await response.blob();
    }
    const plain = { colorSpaceConversion: "none", premultiplyAlpha: "none" };
    let bitmap;
    try {
      bitmap = await createImageBitmap(blob, plain);
    } catch (error) {
      throw new SpawnmlError(`the image cannot be decoded (${error.message}): expected a PNG, JPEG, WebP or GIF, got ${blob.type || "an unknown type"}`);
    }
    const natural = [bitmap.height, bitmap.width];
    if (bitmap.width !== width || bitmap.height !== height) {
      bitmap = await createImageBitmap(blob, { ...plain, resizeWidth: width, resizeHeight: height, resizeQuality: "high" });
    }
    const canvas = new OffscreenCanvas(width, height);
    const context = canvas.getContext("2d", { willReadFrequently: true });
    context.drawImage(bitmap, 0, 0);
    const rgba = context.getImageData(0, 0, width, height, { colorSpace: "srgb" }).data;
    const rgb = new Uint8Array(width * height * 3);
    for (let i = 0, j = 0; i < rgba.length; i += 4, j += 3) {
      rgb[j] = rgba[i]; rgb[j + 1] = rgba[i + 1]; rgb[j + 2] = rgba[i + 2];
    }
    return { tensor: new Tensor("uint8", rgb, [height, width, 3]), natural };
  }

  // One run of the main stage on an image tensor; its outputs (on the device).
  async run(image) {
    this.modelRuns++;
    return this.session.run({ image });
  }

  // Depth: the colour-mapped depth (an RGB tensor) for `colormap`, from the main stage's
  // outputs, without running the model again.
  async colorize(outputs, colormap) {
    const table = this.index.pipeline.colormaps?.[colormap];
    if (!table) throw new SpawnmlError(`unknown colour map ${colormap}; known: ${Object.keys(this.index.pipeline.colormaps ?? {}).join(", ")}`);
    const coefficients = new Tensor("float32", Float32Array.from(table.flat()), [table.length, table[0].length]);
    const { rgb } = await this.stages.colorize.run({ depth: outputs.depth, stats: outputs.stats, coefficients });
    return rgb;
  }

  release() {
    for (const s of Object.values(this.stages)) s.release();
    this.session.release();
  }
}

// Softmax and the top k of a logits vector (1000 numbers: host work, as in Python).
export function topK(logits, k = 5, labels = null) {
  const values = Array.from(logits, Number);
  const max = Math.max(...values);
  const exps = values.map((v) => Math.exp(v - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((e, index) => ({ index, score: e / sum, label: labels?.[index] ?? `class_${index}` }))
    .sort((a, b) => b.score - a.score || a.index - b.index).slice(0, k);
}

// Draw an HWC uint8 image (3 or 4 channels) read back to the CPU onto a 2D canvas.
export async function drawPixels(canvas, tensor) {
  const [height, width, channels] = tensor.dims;
  const data = await tensor.getData();
  const rgba = new Uint8ClampedArray(width * height * 4);
  for (let i = 0, j = 0; j < rgba.length; i += channels, j += 4) {
    rgba[j] = data[i]; rgba[j + 1] = data[i + 1]; rgba[j + 2] = data[i + 2];
    rgba[j + 3] = channels === 4 ? data[i + 3] : 255;
  }
  Object.assign(canvas, { width, height });
  canvas.getContext("2d").putImageData(new ImageData(rgba, width, height), 0, 0);
}

// Draw an HWC RGBA uint8 image that lives in a WebGPU buffer straight onto a WebGPU
// canvas: a full-screen triangle whose fragment shader reads the buffer (no readback).
export function drawFromDevice(canvas, tensor, device) {
  const [height, width] = tensor.dims;
  const element = { int32: "i32", uint32: "u32" }[tensor.info.storage ?? tensor.type];
  if (!element || tensor.dims[2] !== 4) throw new SpawnmlError(`drawFromDevice: expected an RGBA image stored as int32 or uint32, got ${tensor.info.storage} ${JSON.stringify(tensor.dims)}`);
  Object.assign(canvas, { width, height });
  const context = canvas.getContext("webgpu");
  const format = navigator.gpu.getPreferredCanvasFormat();
  context.configure({ device, format, alphaMode: "premultiplied" });
  const module = device.createShaderModule({ code: `
@group(0) @binding(0) var<storage, read> px: array<${element}>;
@vertex fn vs(@builtin(vertex_index) i: u32) -> @builtin(position) vec4f {
  let corner = array(vec2f(-1.0, -1.0), vec2f(3.0, -1.0), vec2f(-1.0, 3.0));
  return vec4f(corner[i], 0.0, 1.0);
}
@fragment fn fs(@builtin(position) at: vec4f) -> @location(0) vec4f {
  let i = (u32(at.y) * ${width}u + u32(at.x)) * 4u;
  let c = vec4f(f32(px[i]), f32(px[i + 1u]), f32(px[i + 2u]), f32(px[i + 3u])) / 255.0;
  return vec4f(c.rgb * c.a, c.a);
}` });
  const pipeline = device.createRenderPipeline({
    layout: "auto",
    vertex: { module, entryPoint: "vs" },
    fragment: { module, entryPoint: "fs", targets: [{ format }] },
  });
  const group = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: tensor.gpuBuffer } }] });
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginRenderPass({ colorAttachments: [{ view: context.getCurrentTexture().createView(), loadOp: "clear", storeOp: "store", clearValue: [0, 0, 0, 0] }] });
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, group);
  pass.draw(3);
  pass.end();
  device.queue.submit([encoder.finish()]);
}
