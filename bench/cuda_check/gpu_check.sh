#!/bin/bash
# The CUDA replay backend's check on a GPU machine, run from the repository root with the bundle of
# make_bundle.sh in .devbundle (bin/, lib/, data/, gpu_check.py); results go to $OUT (default
# /tmp/gpu_check_out; at most 8 files: log, tests, calibrations, cluster, replays, summary and a tar
# of the rest). Put the bundle in the GPU machine's checkout as .devbundle and run
# `bash .devbundle/gpu_check.sh` from its root. Every step is guarded by a timeout and the script
# keeps going after a failing step; it ends within ~270 s.
NAME=gpu_check LIMIT=265
source "$(dirname "$0")/checklib.sh"

nvidia-smi
nvidia-smi -q > $W/nvidia-smi-q.txt 2>&1
uname -a; grep PRETTY /etc/os-release; nproc; free -g | head -2; ldd --version | head -1
ldd $P $B/bin/placelab_replay_tests | grep -i "not found"

# 1. The tests: the [cuda] ones, then the whole replay file.
timeout -k 5 $(T 60) $B/bin/placelab_replay_tests "[cuda]" --durations yes > $OUT/tests.txt 2>&1; echo "cuda tests rc=$?"
cat $OUT/tests.txt
for i in 2 3 4 5 6; do  # again: a flaky failure shows in some runs only
  echo "==== [cuda] run $i ====" >> $OUT/tests.txt
  timeout -k 5 $(T 20) $B/bin/placelab_replay_tests "[cuda]" --durations yes >> $OUT/tests.txt 2>&1; echo "cuda tests run $i rc=$?"
done
echo "==== whole replay test file ====" >> $OUT/tests.txt
timeout -k 5 $(T 60) $B/bin/placelab_replay_tests --durations yes >> $OUT/tests.txt 2>&1; echo "replay tests rc=$?"
tail -30 $OUT/tests.txt

# 2. Calibration: quick (smoke), full; bin-exp's full one (if there); the host CPU (one device).
timeout -k 5 $(T 40) $P calibrate --backend cuda --devices 1 --quick --out $W/cluster_cuda_quick.json --measurements $W/cal_cuda_quick.json; echo "cuda quick calibrate rc=$?"
timeout -k 5 $(T 60) $P calibrate --backend cuda --devices 1 --out $W/cluster_cuda.json --measurements $OUT/cal_cuda.json; echo "cuda calibrate rc=$?"
[ -x $B/bin-exp/placelab ] && timeout -k 5 $(T 60) $B/bin-exp/placelab calibrate --backend cuda --devices 1 --out $W/cluster_cuda_exp.json --measurements $W/cal_cuda_exp.json; echo "cuda calibrate (bin-exp) rc=$?"
timeout -k 5 $(T 45) $P calibrate --backend cpu --devices 1 --out $W/cluster_cpu.json --measurements $OUT/cal_cpu.json; rc=$?; echo "cpu calibrate rc=$rc"
if [ $rc != 0 ]; then
  timeout -k 5 $(T 20) $P calibrate --backend cpu --devices 1 --quick --out $W/cluster_cpu_quick.json --measurements $W/cal_cpu_quick.json; echo "cpu quick calibrate rc=$?"
fi

# 3. Link and per-op costs from hand-made plans, the cpu0 + gpu0 cluster, replays of placements.
timeout -k 5 $(T 170) python3 $B/gpu_check.py $B $OUT $W $((DEADLINE - 45)); echo "gpu_check.py rc=$?"

# 4. compute-sanitizer (memcheck) on the [cuda] test and on one mixed replay, if time is left.
if command -v compute-sanitizer > /dev/null && (($(T 100) > 20)); then
  timeout -k 5 $(T 40) compute-sanitizer --tool memcheck $B/bin/placelab_replay_tests "[cuda]" > $W/sanitizer_test.txt 2>&1; echo "sanitizer test rc=$?"
  tail -5 $W/sanitizer_test.txt
  if [ -f $W/p_bert_heft.json ]; then
    timeout -k 5 $(T 25) compute-sanitizer --tool memcheck $P replay --graph $B/data/bert.json --cluster $OUT/cluster.json --placement $W/p_bert_heft.json --backend cuda --repeats 1 --warmup 0 > $W/sanitizer_replay.txt 2>&1; echo "sanitizer replay rc=$?"
    tail -5 $W/sanitizer_replay.txt
  fi
fi

tar czf $OUT/extra.tar.gz -C $W . ; ls -la $OUT
echo "elapsed $(( $(date +%s) - START )) s"
