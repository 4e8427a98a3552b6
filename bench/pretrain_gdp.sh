#!/usr/bin/env bash
# Reproduces the committed pre-trained GDP checkpoint policy/learned/pretrained/gdp.json: builds
# bench/pretrain_gdp in Release and trains GDP with seed 1 for 12 minutes (entropy bonus 0.05, so the batch policy stays exploratory for fine-tuning; lr 0.001 and no warm start, the defaults when it was made) on the batch suite (9 zoo and
# synthetic graphs x v100-nvlink-2, v100-nvlink-4, k80-4; see bench/pretrain_gdp.cpp), then rebuild to
# embed it. The run is deterministic per step; a time limit makes the step count depend on the machine,
# so pass --steps N (the "step" field of the committed file) to reproduce it exactly.
#   bench/pretrain_gdp.sh [--minutes M] [--steps N] [--seed S] [--checkpoint DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${PLACELAB_BUILD_DIR:-$root/build/pretrain}"  # its own folder: it turns the Python module off
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLACELAB_BUILD_PYTHON=OFF >/dev/null
cmake --build "$build" --target pretrain_gdp -j "${PLACELAB_JOBS:-2}"
cd "$root"
"$build/bench/pretrain_gdp" --out policy/learned/pretrained/gdp.json --seed 1 --minutes 12 --options '{"entropy": 0.05, "lr": 0.001, "warm_steps": 0}' "$@"
