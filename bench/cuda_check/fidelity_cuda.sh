#!/bin/bash
# The GPU session's one run of issue 54: the [cuda] tests (cuBLASLt and cuDNN against CPU references, plans on
# the libraries and on the own kernel), then fidelity_cuda.py (a CUDA calibration, the PyTorch reference, five
# graphs x 30 placements on the streams of one GPU and on the host, the statistics, a Chrome trace). Run from the
# repository root of the GPU machine with the bundle of make_bundle.sh in .devbundle (carried: the device tool's
# carry [".devbundle"]); results in $OUT (default /tmp/fidelity_cuda_out): log.txt, tests.txt and the files of
# fidelity_cuda.py (summary.md, fidelity_cuda.json.gz, torch_step.json, trace.json.gz, raw.tar.gz).
#   bash bench/cuda_check/fidelity_cuda.sh            (ends within LIMIT s, default 400)
#   DRY_RUN=1 bash bench/cuda_check/fidelity_cuda.sh  (anywhere: fidelity_cuda.py --dry-run, the CPU backend)
# Every step is guarded by a timeout, and the script goes on after a failing step. Only the bundle's binaries
# see its libraries (a wrapper sets LD_LIBRARY_PATH): Python and PyTorch keep the machine's own libstdc++.
NAME=fidelity_cuda LIMIT=${LIMIT:-400}
ORIGINAL_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
source "$(dirname "$0")/checklib.sh"
source "$B/cuda_libs.sh" "$B" || { echo "the CUDA libraries are missing: nothing can run"; exit 1; }
BUNDLE_LD_LIBRARY_PATH=$LD_LIBRARY_PATH
export LD_LIBRARY_PATH=$ORIGINAL_LD_LIBRARY_PATH
printf '#!/bin/bash\nLD_LIBRARY_PATH=%q exec %q "$@"\n' "$BUNDLE_LD_LIBRARY_PATH" "$P" > $W/placelab
chmod +x $W/placelab
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
LD_LIBRARY_PATH=$BUNDLE_LD_LIBRARY_PATH ldd $P $B/bin/placelab_replay_tests | grep -i "not found"
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"

# 1. The [cuda] tests (a minute at most).
LD_LIBRARY_PATH=$BUNDLE_LD_LIBRARY_PATH timeout -k 5 $(T 90) $B/bin/placelab_replay_tests "[cuda]" --durations yes > $OUT/tests.txt 2>&1
echo "cuda tests rc=$?"; grep -E "passed|failed|FAILED|skipped" $OUT/tests.txt | tail -5

# 2. The study, within what is left (it cuts its own rounds short before its budget ends).
left=$(T 400)
timeout -k 10 $left python3 "$(dirname "$0")/fidelity_cuda.py" --bin $W/placelab --out $OUT --budget-s $((left - 15)) ${DRY_RUN:+--dry-run}
echo "fidelity_cuda rc=$?"; ls -la $OUT
echo "elapsed $(( $(date +%s) - START )) s"
