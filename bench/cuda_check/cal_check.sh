#!/bin/bash
# The check of `placelab calibrate --backend cuda` (gated chains, sizes grown past the launch cost, the
# host measured with --host) on a GPU machine, run from the repository root with the bundle of
# make_bundle.sh in .devbundle (bin/ the build under test; bin-old/ optionally a build to compare with,
# and data/old/ its cluster and placements). Results go to $OUT (default /tmp/cal_check_out; at most 8
# files: log, tests, summary, calibrations, the calibrated cluster, replays and a tar of the rest).
#   bash .devbundle/cal_check.sh   (from the GPU machine's checkout; ends within ~LIMIT s, default 200)
# Every step is guarded by a timeout and the script keeps going after a failing step.
NAME=cal_check LIMIT=${LIMIT:-200}
source "$(dirname "$0")/checklib.sh"
OLD=$B/bin-old/placelab

nvidia-smi -L; nproc
ldd $P $B/bin/placelab_replay_tests | grep -i "not found"

# 1. The tests: the [cuda] ones three times (a flaky failure shows in some runs only), then the whole file.
run_tests 3 40

# 2. Calibrations, each timed: the old build (same machine: the 'before'); the new one quick with the
# host, full without, and full with the host twice (the first one's cluster is the one replayed).
cal() {  # NAME BINARY ARGS...: calibrate, timed
  local name=$1 bin=$2; shift 2
  [ -x "$bin" ] || { echo "no $bin"; return; }
  local t0=$(date +%s.%N)
  timeout -k 5 $(T 60) "$bin" calibrate --backend cuda --devices 1 "$@" --out $W/cluster_$name.json --measurements $W/cal_$name.json
  local rc=$?
  echo "calibrate $name rc=$rc in $(awk "BEGIN {print $(date +%s.%N) - $t0}") s" | tee -a $W/cal_times.txt
}
cal old $OLD
cal quick_host $P --quick --host
cal gpu $P
cal host $P --host
cal host2 $P --host
cp $W/cal_host.json $W/cluster_host.json $OUT/ 2>/dev/null
cp $W/cal_old.json $OUT/ 2>/dev/null

# 3. Chains, then replays of placements predicted on the new cluster (and the old ones on the old build).
timeout -k 5 $(T 150) python3 $B/cal_check.py $B $OUT $W $((DEADLINE - 8)); echo "cal_check.py rc=$?"

tar czf $OUT/extra.tar.gz -C $W . ; ls -la $OUT
echo "elapsed $(( $(date +%s) - START )) s"
