// The webgl runtime of `spawnml export-web`: runs the exported plan (model.json) with the same
// GLSL ES 3.00 fragment shaders the Python webgl backend generated, in a WebGL2 context.
//
// Every buffer is an R32UI texture `texture_width` words wide (word i is texel
// (i % width, i / width)); a kernel is one triangle drawn over its output's rows, one fragment
// per output word. Inputs beyond the texture units are copied into one pack texture first,
// and a launch that reads its own output renders into a fresh texture that takes its place.

import { SpawnmlError, Tensor, fetchFile, toStorage } from "../spawnml.mjs";

function context(options) {
  const canvas = options.canvas ?? (typeof OffscreenCanvas !== "undefined"
    ? new OffscreenCanvas(1, 1) : document.createElement("canvas"));
  return canvas.getContext("webgl2", { antialias: false, depth: false, preserveDrawingBuffer: false });
}

export async function available(options = {}) {
  try {
    return context(options) ? true : "this browser has no WebGL2 (getContext('webgl2') returned null)";
  } catch (error) {
    return `WebGL2 is unavailable: ${error.message}`;
  }
}

export async function createSession(manifest, dir, weights, options = {}) {
  if (manifest.format !== "spawnml-webgl" || manifest.version !== 1) {
    throw new SpawnmlError(`webgl: expected a spawnml-webgl version 1 plan, got ${manifest.format} ${manifest.version}`);
  }
  const gl = context(options);
  if (!gl) throw new SpawnmlError("webgl: this browser has no WebGL2");
  for (const [name, value] of Object.entries(manifest.needs)) {
    const has = gl.getParameter(gl[name]);
    if (has < value) throw new SpawnmlError(`webgl: the model needs ${name} >= ${value}; this context has ${has}`);
  }
  const session = new WebGLSession(gl, manifest);
  try {
    await session.compile(dir, options);
    await session.loadWeights(weights);
  } catch (error) {
    session.release();
    throw error;
  }
  return session;
}

class WebGLSession {
  constructor(gl, manifest) {
    this.gl = gl;
    this.manifest = manifest;
    this.width = manifest.texture_width;
    this.textures = manifest.buffers.map((b) => this.texture(Math.ceil(Math.max(4, b.bytes) / 4)));
  }

  rows(words) { return Math.max(1, Math.ceil(words / this.width)); }

  texture(words) {
    const gl = this.gl;
    const texture = gl.createTexture();
    gl.bindTexture(gl.TEXTURE_2D, texture);
    gl.texStorage2D(gl.TEXTURE_2D, 1, gl.R32UI, this.width, this.rows(words));
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
    return { texture, rows: this.rows(words), framebuffer: null };
  }

  framebuffer(t) {
    const gl = this.gl;
    if (!t.framebuffer) {
      t.framebuffer = gl.createFramebuffer();
      gl.bindFramebuffer(gl.FRAMEBUFFER, t.framebuffer);
      gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, t.texture, 0);
    }
    gl.bindFramebuffer(gl.FRAMEBUFFER, t.framebuffer);
    return t.framebuffer;
  }

  program(fragment, label) {
    const gl = this.gl;
    const shader = (type, source) => {
      const s = gl.createShader(type);
      gl.shaderSource(s, source);
      gl.compileShader(s);
      if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) {
        throw new SpawnmlError(`webgl: ${label} does not compile here: ${gl.getShaderInfoLog(s)}`);
      }
      return s;
    };
    const program = gl.createProgram();
    gl.attachShader(program, shader(gl.VERTEX_SHADER, this.manifest.vertex_shader));
    gl.attachShader(program, shader(gl.FRAGMENT_SHADER, fragment));
    gl.linkProgram(program);
    if (!gl.getProgramParameter(program, gl.LINK_STATUS)) {
      throw new SpawnmlError(`webgl: ${label} does not link here: ${gl.getProgramInfoLog(program)}`);
    }
    return program;
  }

  async compile(dir, options) {
    const gl = this.gl;
    this.vao = gl.createVertexArray();
    const sources = await Promise.all(this.manifest.kernels.map(
      async (k) => (await fetchFile(new URL(k.file, dir), options)).text()));
    this.programs = this.manifest.kernels.map((k, i) => {
      const program = this.program(sources[i], k.file);
      gl.useProgram(program);
      for (let unit = 0; unit < k.units; unit++) {
        const where = gl.getUniformLocation(program, `sp_tex${unit}`);
        if (where) gl.uniform1i(where, unit);  // unused inputs are optimised away
      }
      return program;
    });
    this.copy = this.program(this.manifest.copy_shader, "the pack copy shader");
    gl.useProgram(this.copy);
    gl.uniform1i(gl.getUniformLocation(this.copy, "source"), 0);
    this.copyAt = { offset: gl.getUniformLocation(this.copy, "offset"),
      count: gl.getUniformLocation(this.copy, "count") };
  }

  write(t, bytes) {
    const gl = this.gl;
    const padded = bytes.byteLength % 4 ? new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4) : null;
    if (padded) padded.set(bytes);
    const src = padded ?? bytes;
    const words = new Uint32Array(src.buffer, src.byteOffset, src.byteLength / 4);
    const full = Math.floor(words.length / this.width), rest = words.length % this.width;
    gl.bindTexture(gl.TEXTURE_2D, t.texture);
    gl.pixelStorei(gl.UNPACK_ALIGNMENT, 4);
    if (full) gl.texSubImage2D(gl.TEXTURE_2D, 0, 0, 0, this.width, full, gl.RED_INTEGER, gl.UNSIGNED_INT, words.subarray(0, full * this.width));
    if (rest) gl.texSubImage2D(gl.TEXTURE_2D, 0, 0, full, rest, 1, gl.RED_INTEGER, gl.UNSIGNED_INT, words.subarray(full * this.width));
  }

  // Weights arrive as verified parts; each tensor is uploaded once its bytes are complete,
  // so at most one tensor (and one part) is held.
  async loadWeights(weights) {
    const tensors = this.manifest.weights.tensors;
    let t = 0, bytes = null;
    for await (const part of weights) {
      const start = part.offset, end = start + part.bytes.length;
      while (t < tensors.length && tensors[t].offset < end) {
        const w = tensors[t];
        bytes ??= new Uint8Array(w.bytes);
        const from = Math.max(start, w.offset), to = Math.min(end, w.offset + w.bytes);
        if (to > from) bytes.set(part.bytes.subarray(from - start, to - start), from - w.offset);
        if (w.offset + w.bytes > end) break;  // the rest of this tensor is in the next part
        this.write(this.textures[w.buffer], bytes);
        bytes = null;
        t++;
      }
    }
  }

  read(t, words) {
    const gl = this.gl;
    this.framebuffer(t);
    const rows = this.rows(words);
    const out = new Uint32Array(this.width * rows * 4);
    gl.readPixels(0, 0, this.width, rows, gl.RGBA_INTEGER, gl.UNSIGNED_INT, out);
    const result = new Uint32Array(words);
    for (let i = 0; i < words; i++) result[i] = out[4 * i];
    return result;
  }

  draw(program, target, viewport) {
    const gl = this.gl;
    this.framebuffer(target);
    gl.viewport(...viewport);
    gl.useProgram(program);
    gl.bindVertexArray(this.vao);
    gl.drawArrays(gl.TRIANGLES, 0, 3);
  }

  pack(launch) {
    const gl = this.gl;
    const rows = this.rows(launch.pack_words);
    if (!this.packTexture || this.packTexture.rows < rows) {
      this.releaseTexture(this.packTexture);
      this.packTexture = this.texture(launch.pack_words);
    }
    for (const [buffer, offset, words] of launch.packed) {
      gl.activeTexture(gl.TEXTURE0);
      gl.bindTexture(gl.TEXTURE_2D, this.textures[buffer].texture);
      gl.useProgram(this.copy);
      gl.uniform1i(this.copyAt.offset, offset);
      gl.uniform1i(this.copyAt.count, words);
      const first = Math.floor(offset / this.width);
      this.draw(this.copy, this.packTexture, [0, first, this.width, this.rows(offset + words) - first]);
    }
    return this.packTexture;
  }

  get inputNames() { return this.manifest.inputs.map((t) => t.name); }
  get outputNames() { return this.manifest.outputs.map((t) => t.name); }

  async run(feeds) {
    const gl = this.gl;
    for (const t of this.manifest.inputs) {
      const data = toStorage(feeds[t.name], t);
      this.write(this.textures[t.buffer], new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    }
    for (const launch of this.manifest.launches) {
      const pack = launch.packed.length ? this.pack(launch) : null;
      const units = launch.direct.map((b) => this.textures[b]);
      if (pack) units.push(pack);
      units.forEach((t, unit) => {
        gl.activeTexture(gl.TEXTURE0 + unit);
        gl.bindTexture(gl.TEXTURE_2D, t.texture);
      });
      let target = this.textures[launch.out];
      const aliased = units.includes(target);
      if (aliased) target = this.texture(target.rows * this.width);
      this.draw(this.programs[launch.kernel], target, launch.viewport);
      if (aliased) {  // the fresh texture takes the output's place
        this.releaseTexture(this.textures[launch.out]);
        this.textures[launch.out] = target;
      }
    }
    for (const c of this.manifest.checks) {
      const counts = new Int32Array(this.read(this.textures[c.buffer], c.size).buffer);
      const total = counts.reduce((a, b) => a + b, 0);
      if (total) throw new SpawnmlError(c.message.replace("{count}", String(total)));
    }
    const outputs = {};
    for (const t of this.manifest.outputs) {
      const words = Math.ceil(t.bytes / 4);
      const bytes = this.read(this.textures[t.buffer], words).buffer.slice(0, t.bytes);
      outputs[t.name] = Tensor.onDevice(t, { destroy() {} }, async () => bytes);
      outputs[t.name].location = "cpu-pinned";  // read back with the run (WebGL has no async reads)
    }
    const error = gl.getError();
    if (error) throw new SpawnmlError(`webgl: GL error 0x${error.toString(16)} during the run`);
    return outputs;
  }

  releaseTexture(t) {
    if (!t) return;
    if (t.framebuffer) this.gl.deleteFramebuffer(t.framebuffer);
    this.gl.deleteTexture(t.texture);
  }

  release() {
    for (const t of this.textures ?? []) this.releaseTexture(t);
    this.releaseTexture(this.packTexture);
    for (const p of [...(this.programs ?? []), this.copy]) if (p) this.gl.deleteProgram(p);
    this.textures = [];
    this.gl.getExtension("WEBGL_lose_context")?.loseContext();
  }
}
