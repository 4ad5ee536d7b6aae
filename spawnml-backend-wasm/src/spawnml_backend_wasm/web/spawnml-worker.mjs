// One thread of a model exported with `spawnml export-wasm --threads N` (node's
// worker_threads or a browser's module Worker; spawnml-model.mjs starts N of them).
// Messages in: { module, memory } once, then { tid } per run. Messages out: { ready } once,
// then { code } per run (the module's status), or { code: -1, error } when the thread
// trapped (after abort_threads(), so no other thread is left waiting at a barrier).

let port;
if (typeof WorkerGlobalScope !== "undefined") {  // a browser
  port = { on: (f) => { self.onmessage = (event) => f(event.data); }, post: (m) => self.postMessage(m) };
} else {
  const { parentPort } = await import("node:worker_threads");
  port = { on: (f) => parentPort.on("message", f), post: (m) => parentPort.postMessage(m) };
}

let model = null;
port.on(async (message) => {
  if (message.module) {
    const instance = await WebAssembly.instantiate(message.module, { env: { memory: message.memory } });
    model = instance.exports;
    port.post({ ready: true });
    return;
  }
  try {
    port.post({ code: model.run_thread(message.tid) });
  } catch (error) {
    model.abort_threads();
    port.post({ code: -1, error: String(error) });
  }
});
