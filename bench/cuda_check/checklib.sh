# What gpu_check.sh, cal_check.sh and shape_check.sh share, sourced after setting NAME (the check's name) and LIMIT (its
# seconds): the bundle B, the results folder OUT (default /tmp/${NAME}_out), a work folder W, the log
# tee'd into $OUT/log.txt, the deadline, T (a step's timeout) and P (the placelab under test).
set -x
B=$PWD/.devbundle
OUT=${OUT:-/tmp/${NAME}_out}
W=/tmp/$NAME
mkdir -p "$OUT" "$W"
exec > >(tee "$OUT/log.txt") 2>&1
export LD_LIBRARY_PATH=$B/lib PYTHONUNBUFFERED=1
START=$(date +%s)
DEADLINE=$((START + LIMIT))
# T WANT: a timeout of WANT seconds, or what is left before the deadline if that is less.
T() { local r=$((DEADLINE - $(date +%s) - 3)); local w=$1; ((r < w)) && w=$r; ((w < 1)) && w=1; echo $w; }
P=$B/bin/placelab
# run_tests RUNS SECONDS: the [cuda] tests RUNS times (a flaky failure shows in some runs only), each within
# SECONDS, then the whole replay test file, into $OUT/tests.txt; prints the outcomes.
run_tests() {
  for ((i = 1; i <= $1; ++i)); do
    echo "==== [cuda] run $i ====" >> $OUT/tests.txt
    timeout -k 5 $(T $2) $B/bin/placelab_replay_tests "[cuda]" --durations yes >> $OUT/tests.txt 2>&1; echo "cuda tests run $i rc=$?"
  done
  echo "==== whole replay test file ====" >> $OUT/tests.txt
  timeout -k 5 $(T 60) $B/bin/placelab_replay_tests >> $OUT/tests.txt 2>&1; echo "replay tests rc=$?"
  grep -E "passed|failed|FAILED|skipped|Approx|with expansion" $OUT/tests.txt | head -40
}
