#!/bin/bash
# The GPU check of the shaped replay kernels (issue 28): the CUDA GEMM kernel's tests (values, order) and
# memcheck, a full CUDA calibration with its product-shape fit, bench/gemm_shapes.py on the GPU, and
# replays of the bundle's zoo graphs (their convolutions and products carry shapes) on the calibrated GPU,
# predicted against measured. Run from the repository root of a GPU machine with the bundle of
# make_bundle.sh in .devbundle (plus gemm_shapes.py); results go to $OUT (default /tmp/shape_check_out).
#   bash .devbundle/shape_check.sh     (ends within ~LIMIT s, default 300)
# Every step is guarded by a timeout and the script keeps going after a failing step.
NAME=shape_check LIMIT=${LIMIT:-300}
source "$(dirname "$0")/checklib.sh"

nvidia-smi -L; nproc
ldd $P $B/bin/placelab_replay_tests | grep -i "not found"

# 1. The [cuda] tests twice, then the whole replay file; memcheck on the GEMM kernel's test.
run_tests 2 60
if command -v compute-sanitizer > /dev/null; then
  timeout -k 5 $(T 60) compute-sanitizer --tool memcheck $B/bin/placelab_replay_tests \
    "sim::replay::cuda: the GEMM kernel computes the product of its shape" > $W/sanitizer.txt 2>&1
  echo "sanitizer rc=$?"; tail -4 $W/sanitizer.txt
fi

# 2. A full calibration, timed: its compute curve is now the GEMM kernel's, and its shape fit.
t0=$(date +%s.%N)
timeout -k 5 $(T 90) $P calibrate --backend cuda --devices 1 --out $OUT/cluster_cuda.json --measurements $OUT/cal_cuda.json
echo "calibrate rc=$? in $(awk "BEGIN {print $(date +%s.%N) - $t0}") s"

# 3. Model shapes against the calibration (a calibration of its own inside).
timeout -k 5 $(T 120) python3 $B/gemm_shapes.py --bin $P --backend cuda --devices 1 --out-dir $OUT; echo "gemm_shapes rc=$?"

# 4. Zoo graphs on the calibrated GPU, all on gpu0: predicted against measured step and op times.
for g in resnet50 bert txl; do
  python3 -c "import json,sys; n=len(json.load(open('$B/data/$g.json'))['ops']); json.dump({'format':'placelab.placement','version':1,'device_of':[0]*n}, open('$W/p_$g.json','w'))"
  timeout -k 5 $(T 30) $P replay --graph $B/data/$g.json --cluster $OUT/cluster_cuda.json --placement $W/p_$g.json --backend cuda \
    --repeats 5 --warmup 2 --json --trace $W/trace_$g.json > $W/replay_$g.json; echo "replay $g rc=$?"
  python3 -c "import json; d=json.load(open('$W/replay_$g.json')); print('$g', 'predicted', d['predicted_step_s'], 'measured', d['measured_step_s'], 'error', d['relative_error'])"
done
tar czf $OUT/extra.tar.gz -C $W . ; ls -la $OUT
echo "elapsed $(( $(date +%s) - START )) s"
