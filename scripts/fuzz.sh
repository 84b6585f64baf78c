#!/bin/bash
# make fuzz: runs each libFuzzer target (built by `make fuzz-build` under .build/fuzz) for
# FUZZ_SECONDS (or FUZZ_RUNS inputs, when set), prints executions, coverage and crashes, and fails
# if any target crashed. One target after the other (the machine's cores are shared).
#   scripts/fuzz.sh [request] [config] [finish] [boxes] [marker]      (default: all)
# Seeds come from Tests/fuzz/TARGET (read only); what the fuzzer learns goes to
# .build/fuzz/corpus/TARGET and survives between runs; a crash, leak, hang (> FUZZ_TIMEOUT s) or
# out-of-memory input is written to .build/fuzz/crashes/TARGET/. To keep a crash fixed: fix the
# code, copy the input into Tests/fuzz/TARGET/ (make test replays that directory).
set -u
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${FUZZ_SECONDS:-600}
FUZZ_RUNS=${FUZZ_RUNS:-}
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-10}
FUZZ_DIR=${FUZZ_DIR:-.build/fuzz}
BIN=$FUZZ_DIR/release
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(request config finish boxes marker)

# -max_len: a request line the server would parse is at most Wire.maxLineBytes (65536); a
# config file has no limit, 16 kB is three times the shipped one. finish and boxes: whole .part
# files (the seeds, real recordings at 64x36, are under 40 kB); marker: a take marker's body (the
# finisher reads at most 4 KiB of one).
declare -A MAX_LEN=([request]=65536 [config]=16384 [finish]=262144 [boxes]=262144 [marker]=4096)

failed=0
summary=()
for t in "${targets[@]}"; do
  bin=$BIN/fuzz-$t
  [ -n "${MAX_LEN[$t]:-}" ] || { echo "unknown fuzz target '$t' (use request, config, finish, boxes or marker)"; exit 2; }
  [ -x "$bin" ] || { echo "$bin is missing: run 'make fuzz-build' first"; exit 2; }
  corpus=$FUZZ_DIR/corpus/$t crashes=$FUZZ_DIR/crashes/$t log=$FUZZ_DIR/fuzz-$t.log
  mkdir -p "$corpus" "$crashes"
  stamp=$(mktemp)
  if [ -n "$FUZZ_RUNS" ]; then limit=(-runs="$FUZZ_RUNS"); what="$FUZZ_RUNS inputs"
  else limit=(-max_total_time="$FUZZ_SECONDS"); what="${FUZZ_SECONDS}s"; fi
  echo "== fuzz-$t: $what, log $log"
  started=$SECONDS
  # AddressSanitizer includes LeakSanitizer: a leak is reported as a crash too.
  # SWIFT_BACKTRACE: Swift's crash backtracer reads memory AddressSanitizer then reports as
  # an overflow of its own; libFuzzer and ASan print the stack instead.
  SWIFT_BACKTRACE=enable=no "$bin" "${limit[@]}" -max_len="${MAX_LEN[$t]}" -timeout="$FUZZ_TIMEOUT" \
    -rss_limit_mb=2048 -print_final_stats=1 -dict="Tests/fuzz/$t.dict" \
    -artifact_prefix="$crashes/" "$corpus" "Tests/fuzz/$t" >"$log" 2>&1
  status=$?
  new=$(find "$crashes" -type f -newer "$stamp" | sort)
  rm -f "$stamp"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1)
  summary+=("fuzz-$t: ${execs:-?} executions (${rate:-?}/s) in $((SECONDS - started))s, ${cov:-no coverage line}, exit status $status")
  if [ "$status" -ne 0 ] || [ -n "$new" ]; then
    failed=1
    grep -E '^(==[0-9]+==ERROR|SUMMARY|Fatal error|.*Fatal error:|ERROR: libFuzzer)' "$log" | head -5
    for f in $new; do summary+=("  crash input: $f   (replay: $bin $f)"); done
  fi
done
echo
printf '%s\n' "${summary[@]}" | tee "$FUZZ_DIR/summary.txt"
if [ "$failed" -ne 0 ]; then
  echo "fuzzing found a problem: fix it, then copy the input into Tests/fuzz/TARGET/ as a regression"
  exit 1
fi
echo "no crash"
