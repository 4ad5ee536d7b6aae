#!/usr/bin/env bash
# Quick start 2: lint, every test of every package, then (without arguments) the conformance
# matrix on every backend, the example third-party backend's inherited tests, the example op
# plugin's tests, and spawnml-ray installed alone in a fresh venv. Ends with one summary line
# per stage; the first failing stage stops the run (the summary still prints) and the exit
# status is then 1.
# Arguments go to pytest and skip the last four steps.
# Kept in build/: pytest.log, conformance.{md,json,log} (the matrix, and the per-case log
# records such as "placement: 1 of 1 nodes do not run on cpu (...)"), example-backend.log,
# example-op.log, ray-install.log.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  echo "test: no .venv here; run scripts/setup.sh first" >&2
  exit 1
fi
mkdir -p build

summary=()  # one line per stage
failed=""   # the first stage that failed

# run_stage LOG CMD...: CMD's output on the terminal and in LOG; sets $rc and $seconds.
run_stage() {
  local log=$1 start=$SECONDS
  shift
  rc=0
  { "$@" 2>&1 | tee "$log"; } || rc=$?
  seconds=$((SECONDS - start))
}

# record NAME RC TEXT: a summary line; the first failure stops the stages that follow.
record() {
  if [ "$2" -eq 0 ]; then
    summary+=("$(printf '%-18s %s' "$1:" "$3")")
  else
    summary+=("$(printf '%-18s FAILED: %s' "$1:" "$3")")
    failed=${failed:-$1}
  fi
}

# skip_rest REASON NAME...: summary lines for stages not run.
skip_rest() {
  local reason=$1 name
  shift
  for name in "$@"; do
    summary+=("$(printf '%-18s not run (%s)' "$name:" "$reason")")
  done
}

# pytest's final line ("=== 2 failed, 1200 passed, 5 skipped in 81.2s (0:01:21) ===") as
# "2 failed, 1200 passed, 5 skipped", colours and timing removed.
pytest_counts() {
  sed 's/\x1b\[[0-9;]*m//g' "$1" |
    grep -E '^(=+ )?([0-9]+ (passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?)'\
'|no tests ran)' |
    tail -n 1 | sed -E 's/^=+ //; s/ =+$//; s/ in [0-9.]+s( \([0-9:]+\))?$//'
}

# example_stage NAME LOG SCRIPT: an example plugin's check (its pytest counts), unless a
# stage failed before.
example_stage() {
  if [ -n "$failed" ]; then
    skip_rest "$failed failed" "$1"
    return
  fi
  run_stage "$2" "$3"
  local counts
  counts=$(pytest_counts "$2")
  counts=${counts:-exit status $rc, see $2}
  record "$1" "$rc" "$counts (${seconds} s)"
}

ruff_log=$(mktemp)
trap 'rm -f "$ruff_log"' EXIT
run_stage "$ruff_log" .venv/bin/ruff check .
problems=$(sed -nE 's/^Found ([0-9]+) errors?.*/\1/p' "$ruff_log" | tail -n 1)
record ruff "$rc" "$([ "$rc" -eq 0 ] && echo ok || echo "${problems:-?} problem(s) (listed above)")"

if [ -z "$failed" ]; then
  color=()
  [ -t 1 ] && color=(--color=yes)  # tee is not a terminal: keep pytest's colours there
  run_stage build/pytest.log .venv/bin/python -m pytest ${color[@]+"${color[@]}"} "$@"
  counts=$(pytest_counts build/pytest.log)
  counts=${counts:-no summary line (exit status $rc; see build/pytest.log)}
  record pytest "$rc" "$counts (${seconds} s)"
else
  skip_rest "$failed failed" pytest
fi

if [ "$#" -ne 0 ]; then
  skip_rest "arguments go to pytest only" conformance "conformance cpu (every case)" \
    "example backend" "example op" "ray install check"
elif [ -n "$failed" ]; then
  skip_rest "$failed failed" conformance "conformance cpu (every case)" "example backend" \
    "example op" "ray install check"
else
  # Every op and the kernel suite on every backend (cuda: NVRTC compile checks). The matrix
  # is written to build/; the run fails on any cell that fails now but passed in the
  # committed matrix (docs/conformance.json); the known failures are counted, and listed
  # in build/conformance.md.
  run_stage build/conformance.txt .venv/bin/spawnml-conformance \
    --backend cpu,opencl,webgpu,webgl,wasm,cuda --compile-only cuda --onnx-node-tests \
    --max-cases 4 --quiet --summary --json build/conformance.json \
    --markdown build/conformance.md --log build/conformance.log --baseline docs/conformance.json
  # "result: passed against the baseline docs/conformance.json: 0 regressions, ..." -> "0 ..."
  result=$(sed -nE 's/^result: (passed|FAILED)( against the baseline [^ ]+)?:? ?//p' \
    build/conformance.txt | tail -n 1)
  result=${result:-no result line (exit status $rc; see above)}
  record conformance "$rc" "$result (${seconds} s; log records in build/conformance.log)"

  # Every case of every op on cpu, unsampled: the reference executor must pass all of them.
  run_stage build/conformance-cpu.txt .venv/bin/spawnml-conformance --backend cpu --quiet \
    --summary --log build/conformance-cpu.log
  result=$(sed -nE 's/^result: //p' build/conformance-cpu.txt | tail -n 1)
  record "conformance cpu (every case)" "$rc" "${result:-exit status $rc} (${seconds} s)"

  example_stage "example backend" build/example-backend.log scripts/check_example_backend.sh
  example_stage "example op" build/example-op.log scripts/check_example_op.sh

  if [ -z "$failed" ]; then
    run_stage build/ray-install.log scripts/check_ray_install.sh
    last=$(grep -v '^[[:space:]]*$' build/ray-install.log | tail -n 1)
    record "ray install check" "$rc" "$([ "$rc" -eq 0 ] && echo "ok (${seconds} s)" ||
      echo "exit status $rc (${seconds} s): ${last:-no output}")"
  else
    skip_rest "$failed failed" "ray install check"
  fi
fi

echo
echo "=== summary"
printf '%s\n' "${summary[@]}"
if [ -n "$failed" ]; then
  echo "test: FAILED ($failed)"
  exit 1
fi
echo "test: passed"
