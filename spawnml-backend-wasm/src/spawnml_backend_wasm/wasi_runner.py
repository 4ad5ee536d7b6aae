"""``wasi-run.wasm``: a WASI command that runs an exported model under the wasmtime CLI.

The exported ``model.wasm`` has no imports and no I/O; a host writes its weights and inputs
into its memory. This module is that host for WASI runtimes, so the model runs with no
Python and no JavaScript::

    wasmtime run --dir MODEL_DIR::model --dir IN_DIR::in --dir OUT_DIR::out \\
        --preload model=MODEL_DIR/model.wasm MODEL_DIR/wasi-run.wasm

It imports the model's memory and ABI functions (``--preload`` links them), finds its three
preopened directories by their guest names, streams ``model/model.weights`` and each input's
``in/<name>.bin`` through a 1 MiB buffer of its own memory into the model's memory, calls
``load``, ``set_input`` and ``run``, writes each output to ``out/<name>.bin`` and prints one
JSON line with the load and run times. Any failure (a missing directory or file, an ABI
error code) prints ``spawnml: error: ...`` with the module's own message and exits with 1.
File names are the tensor names with characters outside ``[A-Za-z0-9_.-]`` replaced by
``_`` (as ``run.mjs`` names them).
"""

from __future__ import annotations

import re

from .export import ABI_VERSION, _wat_string

_SCRATCH = 0  # iovec (8), count (4), fd (4), clock (8), prestat (8), dir name (32..127)
_TEXT = 128  # the message or JSON line being built (up to 896 bytes)
_STRINGS = 1024  # constant strings
_BUFFER = 65536  # the I/O buffer
_BUFFER_BYTES = 1 << 20
_PAGES = (_BUFFER + _BUFFER_BYTES) // 65536

_WASI = {
    "path_open": "(param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)",
    "fd_read": "(param i32 i32 i32 i32) (result i32)",
    "fd_write": "(param i32 i32 i32 i32) (result i32)",
    "fd_close": "(param i32) (result i32)",
    "fd_prestat_get": "(param i32 i32) (result i32)",
    "fd_prestat_dir_name": "(param i32 i32 i32) (result i32)",
    "clock_time_get": "(param i32 i64 i32) (result i32)",
    "proc_exit": "(param i32)",
}
_MODEL = {
    "abi_version": "(result i32)",
    "weights_ptr": "(result i32)",
    "weights_size": "(result i32)",
    "load": "(param i32) (result i32)",
    "input_ptr": "(param i32) (result i32)",
    "input_size": "(param i32) (result i32)",
    "set_input": "(param i32 i32) (result i32)",
    "output_ptr": "(param i32) (result i32)",
    "output_size": "(param i32) (result i32)",
    "run": "(result i32)",
    "error_message": "(param i32) (result i32)",
}
_USAGE = ("run as: wasmtime run --dir MODEL_DIR::model --dir IN_DIR::in --dir OUT_DIR::out "
          "--preload model=MODEL_DIR/model.wasm MODEL_DIR/wasi-run.wasm")  # fmt: skip

# Helpers over memory $io (index 1); $model is the imported model memory (index 0).
_HELPERS = f"""
  (global $cursor (mut i32) (i32.const {_TEXT}))
  (func $put (param $p i32) (param $n i32)
    (memory.copy $io $io (global.get $cursor) (local.get $p) (local.get $n))
    (global.set $cursor (i32.add (global.get $cursor) (local.get $n))))
  (func $put_u64 (param $v i64)
    (local $t i64) (local $end i32)
    (local.set $t (local.get $v))
    (local.set $end (global.get $cursor))
    (loop $count
      (local.set $end (i32.add (local.get $end) (i32.const 1)))
      (local.set $t (i64.div_u (local.get $t) (i64.const 10)))
      (br_if $count (i64.ne (local.get $t) (i64.const 0))))
    (global.set $cursor (local.get $end))
    (local.set $t (local.get $v))
    (loop $emit
      (local.set $end (i32.sub (local.get $end) (i32.const 1)))
      (i32.store8 $io (local.get $end)
        (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $t) (i64.const 10)))))
      (local.set $t (i64.div_u (local.get $t) (i64.const 10)))
      (br_if $emit (i64.ne (local.get $t) (i64.const 0)))))
  (func $flush (param $fd i32)
    (i32.store $io (i32.const 0) (i32.const {_TEXT}))
    (i32.store $io (i32.const 4) (i32.sub (global.get $cursor) (i32.const {_TEXT})))
    (drop (call $fd_write (local.get $fd) (i32.const 0) (i32.const 1) (i32.const 8)))
    (global.set $cursor (i32.const {_TEXT})))
  (func $fail (param $code i32)
    ;; the message (already put) plus, for a code, the module's text; then exit 1
    (local $p i32) (local $c i32)
    (if (local.get $code) (then
      (local.set $p (call $error_message (local.get $code)))
      (block $done (loop $copy
        (local.set $c (i32.load8_u $model (local.get $p)))
        (br_if $done (i32.eqz (local.get $c)))
        (br_if $done (i32.ge_u (global.get $cursor) (i32.const {_STRINGS - 2})))
        (i32.store8 $io (global.get $cursor) (local.get $c))
        (global.set $cursor (i32.add (global.get $cursor) (i32.const 1)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $copy)))))
    (i32.store8 $io (global.get $cursor) (i32.const 10))
    (global.set $cursor (i32.add (global.get $cursor) (i32.const 1)))
    (call $flush (i32.const 2))
    (call $proc_exit (i32.const 1))
    (unreachable))
  (func $preopen (param $name i32) (param $len i32) (result i32)
    ;; the fd of the preopened directory whose guest name is (name, len), or -1
    (local $fd i32) (local $i i32)
    (local.set $fd (i32.const 3))
    (loop $next
      (if (call $fd_prestat_get (local.get $fd) (i32.const 24)) (then (return (i32.const -1))))
      (if (i32.and (i32.eq (i32.load $io (i32.const 28)) (local.get $len))
                   (i32.le_u (local.get $len) (i32.const 96)))
        (then
          (if (i32.eqz (call $fd_prestat_dir_name (local.get $fd) (i32.const 32)
                                                  (local.get $len)))
            (then
              (local.set $i (i32.const 0))
              (block $differs (loop $cmp
                (if (i32.eq (local.get $i) (local.get $len)) (then (return (local.get $fd))))
                (br_if $differs (i32.ne
                  (i32.load8_u $io (i32.add (i32.const 32) (local.get $i)))
                  (i32.load8_u $io (i32.add (local.get $name) (local.get $i)))))
                (local.set $i (i32.add (local.get $i) (i32.const 1)))
                (br $cmp)))))))
      (local.set $fd (i32.add (local.get $fd) (i32.const 1)))
      (br_if $next (i32.lt_u (local.get $fd) (i32.const 64))))
    (i32.const -1))
  (func $open (param $dir i32) (param $path i32) (param $len i32) (param $write i32)
    (result i32)
    ;; the fd of dir/path opened to read (or created and truncated to write), or -1
    (if (call $path_open (local.get $dir) (i32.const 0) (local.get $path) (local.get $len)
          (select (i32.const 9) (i32.const 0) (local.get $write))
          (select (i64.const 64) (i64.const 2) (local.get $write)) (i64.const 0)
          (i32.const 0) (i32.const 12))
      (then (return (i32.const -1))))
    (i32.load $io (i32.const 12)))
  (func $read_into (param $fd i32) (param $dst i32) (param $cap i32) (result i32)
    ;; reads the whole file: its first cap bytes go to model memory at dst; returns its
    ;; size (so a longer or shorter file is seen), or -1 on a read error
    (local $got i32) (local $want i32) (local $n i32)
    (loop $more
      (local.set $want (select (i32.sub (local.get $cap) (local.get $got))
                               (i32.const {_BUFFER_BYTES})
                               (i32.lt_u (i32.sub (local.get $cap) (local.get $got))
                                         (i32.const {_BUFFER_BYTES}))))
      (if (i32.ge_u (local.get $got) (local.get $cap))
        (then (local.set $want (i32.const {_BUFFER_BYTES}))))
      (i32.store $io (i32.const 0) (i32.const {_BUFFER}))
      (i32.store $io (i32.const 4) (local.get $want))
      (if (call $fd_read (local.get $fd) (i32.const 0) (i32.const 1) (i32.const 8))
        (then (return (i32.const -1))))
      (local.set $n (i32.load $io (i32.const 8)))
      (if (i32.lt_u (local.get $got) (local.get $cap))
        (then (memory.copy $model $io (i32.add (local.get $dst) (local.get $got))
                           (i32.const {_BUFFER}) (local.get $n))))
      (local.set $got (i32.add (local.get $got) (local.get $n)))
      (br_if $more (i32.ne (local.get $n) (i32.const 0))))
    (local.get $got))
  (func $write_from (param $fd i32) (param $src i32) (param $size i32) (result i32)
    ;; writes size bytes of model memory at src; 0, or -1 on a write error
    (local $done i32) (local $chunk i32)
    (block $end (loop $more
      (br_if $end (i32.ge_u (local.get $done) (local.get $size)))
      (local.set $chunk (select (i32.sub (local.get $size) (local.get $done))
                                (i32.const {_BUFFER_BYTES})
                                (i32.lt_u (i32.sub (local.get $size) (local.get $done))
                                          (i32.const {_BUFFER_BYTES}))))
      (memory.copy $io $model (i32.const {_BUFFER}) (i32.add (local.get $src) (local.get $done))
                   (local.get $chunk))
      (i32.store $io (i32.const 0) (i32.const {_BUFFER}))
      (i32.store $io (i32.const 4) (local.get $chunk))
      (if (call $fd_write (local.get $fd) (i32.const 0) (i32.const 1) (i32.const 8))
        (then (return (i32.const -1))))
      (if (i32.eqz (i32.load $io (i32.const 8))) (then (return (i32.const -1))))
      (local.set $done (i32.add (local.get $done) (i32.load $io (i32.const 8))))
      (br $more)))
    (i32.const 0))
  (func $now (result i64)
    (drop (call $clock_time_get (i32.const 1) (i64.const 1000) (i32.const 16)))
    (i64.load $io (i32.const 16)))
"""


def file_name(tensor_name: str) -> str:
    """The file a tensor is read from or written to: its name, made safe for paths."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", tensor_name) + ".bin"


class _Strings:
    """Constant strings laid out in memory $io from ``_STRINGS``."""

    def __init__(self) -> None:
        self.at = _STRINGS
        self.segments: list[str] = []

    def add(self, text: str) -> tuple[int, int]:
        data = text.encode()
        where = self.at
        self.segments.append(f'  (data (memory $io) (i32.const {where}) "{_wat_string(text)}")')
        self.at += len(data)
        if self.at > _BUFFER:
            raise ValueError("the runner's strings do not fit below its I/O buffer")
        return where, len(data)


def runner_text(inputs: list[str], outputs: list[str]) -> str:
    """The WAT of a WASI command that runs a model with these input and output names."""
    s = _Strings()

    def put(text: str) -> str:
        p, n = s.add(text)
        return f"(call $put (i32.const {p}) (i32.const {n}))"

    def fail_with(text: str, code: str = "(i32.const 0)") -> str:
        return f"{put('spawnml: error: ' + text)} (call $fail {code})"

    dirs = {}
    for guest in ("model", "in", "out"):
        p, n = s.add(guest)
        dirs[guest] = f"(call $preopen (i32.const {p}) (i32.const {n}))"
    body = [
        f"(if (i32.ne (call $abi_version) (i32.const {ABI_VERSION})) (then "
        f"{fail_with(f'model.wasm has another ABI version than this runner ({ABI_VERSION})')}))",
    ]
    for guest, call in dirs.items():
        body += [f"(local.set ${guest} {call})",
                 f"(if (i32.lt_s (local.get ${guest}) (i32.const 0)) (then "
                 f"{fail_with(f'no preopened directory {guest!r}; {_USAGE}')}))"]  # fmt: skip

    def read(dirvar: str, path: str, dst: str, cap: str) -> list[str]:
        p, n = s.add(path)
        shown = f"{dirvar}/{path}"
        return [
            f"(local.set $fd (call $open (local.get ${dirvar}) (i32.const {p}) (i32.const {n}) "
            "(i32.const 0)))",
            f"(if (i32.lt_s (local.get $fd) (i32.const 0)) (then "
            f"{fail_with(f'cannot open {shown}')}))",
            f"(local.set $n (call $read_into (local.get $fd) {dst} {cap}))",
            "(drop (call $fd_close (local.get $fd)))",
            f"(if (i32.lt_s (local.get $n) (i32.const 0)) (then "
            f"{fail_with(f'cannot read {shown}')}))",
        ]

    body += ["(local.set $t0 (call $now))"]
    body += read("model", "model.weights", "(call $weights_ptr)", "(call $weights_size)")
    body += ["(local.set $code (call $load (local.get $n)))",
             f"(if (local.get $code) (then {fail_with('model/model.weights: ', '(local.get $code)')}))",  # noqa: E501
             "(local.set $t1 (call $now))"]  # fmt: skip
    for i, name in enumerate(inputs):
        f = file_name(name)
        body += read("in", f, f"(call $input_ptr (i32.const {i}))",
                     f"(call $input_size (i32.const {i}))")
        body += [f"(local.set $code (call $set_input (i32.const {i}) (local.get $n)))",
                 f"(if (local.get $code) (then {fail_with(f'in/{f}: ', '(local.get $code)')}))"]
    body += ["(local.set $code (call $run))",
             f"(if (local.get $code) (then {fail_with('', '(local.get $code)')}))",
             "(local.set $t2 (call $now))"]  # fmt: skip
    for i, name in enumerate(outputs):
        f = file_name(name)
        p, n = s.add(f)
        body += [
            f"(local.set $fd (call $open (local.get $out) (i32.const {p}) (i32.const {n}) "
            "(i32.const 1)))",
            f"(if (i32.lt_s (local.get $fd) (i32.const 0)) (then "
            f"{fail_with(f'cannot create out/{f}')}))",
            f"(local.set $n (call $write_from (local.get $fd) (call $output_ptr (i32.const {i})) "
            f"(call $output_size (i32.const {i}))))",
            "(drop (call $fd_close (local.get $fd)))",
            f"(if (i32.lt_s (local.get $n) (i32.const 0)) (then "
            f"{fail_with(f'cannot write out/{f}')}))",
        ]
    body += [
        put('{"load_us": '),
        "(call $put_u64 (i64.div_u (i64.sub (local.get $t1) (local.get $t0)) (i64.const 1000)))",
        put(', "run_us": '),
        "(call $put_u64 (i64.div_u (i64.sub (local.get $t2) (local.get $t1)) (i64.const 1000)))",
        put(f', "outputs": {len(outputs)}}}\n'),
        "(call $flush (i32.const 1))",
    ]
    imports = [f'  (import "wasi_snapshot_preview1" "{n}" (func ${n} {sig}))'
               for n, sig in _WASI.items()]  # fmt: skip
    imports.append('  (import "model" "memory" (memory $model 1))')
    imports += [f'  (import "model" "{n}" (func ${n} {sig}))' for n, sig in _MODEL.items()]
    locals_ = "(local $model i32) (local $in i32) (local $out i32) (local $fd i32) " \
              "(local $n i32) (local $code i32) (local $t0 i64) (local $t1 i64) (local $t2 i64)"
    start = "\n".join(f"    {line}" for line in body)
    return "\n".join([
        "(module", *imports,
        f'  (memory $io (export "memory") {_PAGES} {_PAGES})',
        *s.segments, _HELPERS,
        f'  (func $start (export "_start") {locals_}\n{start})',
        ")",
    ])  # fmt: skip
