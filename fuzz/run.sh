#!/usr/bin/env bash
# Run every cargo-fuzz target for FUZZ_SECONDS each and print executions and
# crashes per target. Usage (from the repo root: `make fuzz`):
#   fuzz/run.sh                 fuzz each target (corpus: fuzz/corpus/<target>)
#   fuzz/run.sh regress         run each target once over fuzz/regressions/<target>
#                               (inputs of bugs found and fixed): lists any that fail again
# Env: FUZZ_SECONDS (60), FUZZ_TARGETS (all), FUZZ_JOBS (1), CARGO_LOCK (flock prefix).
set -uo pipefail
cd "$(dirname "$0")"
SECONDS_EACH=${FUZZ_SECONDS:-60}
TARGETS=${FUZZ_TARGETS:-"jsonrpc_message sse_parser arg_rules policy_loader redaction strict_json reframe"}
LOCK=${CARGO_LOCK-}
if [ -z "${CARGO_LOCK+x}" ] && command -v flock >/dev/null; then LOCK="flock /tmp/cargo-build.lock"; fi
LOGS=${FUZZ_LOGS:-target/fuzz-logs}
mkdir -p "$LOGS"

$LOCK cargo +nightly fuzz build -O >"$LOGS/build.log" 2>&1 || { tail -40 "$LOGS/build.log"; exit 2; }
BIN=target/x86_64-unknown-linux-gnu/release

if [ "${1:-}" = regress ]; then
  status=0
  for t in $TARGETS; do
    [ -d "regressions/$t" ] || continue
    for f in regressions/$t/*; do
      if "$BIN/$t" "$f" >"$LOGS/regress-$t.log" 2>&1; then
        echo "fixed      $t $f"
      else
        echo "FAILS AGAIN $t $f: $(grep -m1 -E 'panicked|ERROR' "$LOGS/regress-$t.log")"; status=1
      fi
    done
  done
  exit $status
fi

printf '%-16s %10s %12s %8s %8s\n' target seconds executions exec/s crashes
total_crashes=0
for t in $TARGETS; do
  mkdir -p "corpus/$t" "artifacts/$t"
  before=$(ls "artifacts/$t" | wc -l)
  "$BIN/$t" "corpus/$t" -artifact_prefix="artifacts/$t/" -max_total_time="$SECONDS_EACH" \
      -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
      >"$LOGS/$t.log" 2>&1
  execs=$(grep -m1 'stat::number_of_executed_units' "$LOGS/$t.log" | awk '{print $2}')
  if [ -z "$execs" ]; then execs=$(grep -oE '^#[0-9]+' "$LOGS/$t.log" | tail -1 | tr -d '#'); fi
  after=$(ls "artifacts/$t" | wc -l)
  crashes=$((after - before))
  total_crashes=$((total_crashes + crashes))
  rate=$(( ${execs:-0} / (SECONDS_EACH > 0 ? SECONDS_EACH : 1) ))
  printf '%-16s %10s %12s %8s %8s\n' "$t" "$SECONDS_EACH" "${execs:-?}" "$rate" "$crashes"
  if [ "$crashes" -gt 0 ]; then
    ls "artifacts/$t" | tail -n "$crashes" | sed "s|^|    artifacts/$t/|"
    grep -m3 -E 'panicked at|SUMMARY' "$LOGS/$t.log" | sed 's/^/    /'
  fi
done
echo "logs: fuzz/$LOGS; new corpus entries are in fuzz/corpus/ (minimize with cargo fuzz cmin before committing)"
[ "$total_crashes" -eq 0 ]
