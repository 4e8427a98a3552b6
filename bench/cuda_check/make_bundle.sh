#!/bin/bash
# Makes a self-contained bundle of the CUDA build for a GPU machine that has a CUDA driver but none of
# placelab's libraries: the placelab CLI and the replay tests, every shared library they need except
# glibc's own, the graphs and hand-made plans the check replays, and the check itself.
#   usage: make_bundle.sh BUILD_DIR DEST   (e.g. build-cuda .devbundle; DEST is replaced)
# Build first, e.g.:
#   cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLACELAB_BUILD_CUDA=ON \
#     -DCMAKE_CUDA_ARCHITECTURES=90 -DPLACELAB_BUILD_PYTHON=OFF -DPLACELAB_BUILD_BENCH=OFF \
#     -DPLACELAB_MPI=OFF -DPLACELAB_OPENBLAS=OFF
#   ninja -C build-cuda placelab placelab_replay_tests
# Extra builds to compare (placelab only) can be put in DEST/bin-old and DEST/bin-exp afterwards;
# gpu_check.py runs its comparisons with them when they are there, and cal_check.py replays the 'before'
# side with DEST/bin-old on DEST/data/old (cluster.json and p_GRAPH_PLACEMENT.json, e.g. from an earlier
# gpu_check.sh run's output and extra.tar.gz).
set -euo pipefail
BUILD=$(realpath "$1")
D=$(realpath -m "$2")
HERE=$(dirname "$(realpath "$0")")
rm -rf "$D"; mkdir -p "$D/bin" "$D/lib" "$D/data"
cp "$BUILD/cli/placelab" "$BUILD/tests/placelab_replay_tests" "$D/bin/"
strip "$D"/bin/* || true
skip='^(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|linux-vdso)\.so'
copy_needs() {  # the shared libraries of $1, but glibc's
  ldd "$1" 2>/dev/null | awk '/=>/ {print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip || $name == libopenblas.so.0 ]] && continue
    [ -e "$D/lib/$name" ] || cp -L "$path" "$D/lib/$name"
  done
}
for bin in "$D"/bin/*; do copy_needs "$bin"; done
# Reference BLAS/LAPACK (Debian's paths) instead of OpenBLAS (36 MB): only CoinUtils (the MILP placer) needs them.
if [ -e /usr/lib/x86_64-linux-gnu/lapack/liblapack.so.3 ]; then
  cp -L /usr/lib/x86_64-linux-gnu/lapack/liblapack.so.3 /usr/lib/x86_64-linux-gnu/blas/libblas.so.3 "$D/lib/"
fi
for lib in "$D"/lib/*; do copy_needs "$lib"; done
P="$D/bin/placelab"
export LD_LIBRARY_PATH="$D/lib"
"$P" graph --model resnet50 --batch 1 --image_size 32 --out "$D/data/resnet50.json"
"$P" graph --model bert --batch 1 --seq_len 32 --layers 2 --hidden 128 --heads 2 --vocab 2000 --out "$D/data/bert.json"
"$P" graph --model transformer_xl --batch 1 --seq_len 32 --mem_len 32 --layers 2 --hidden 128 --heads 2 --inner 256 \
  --vocab 2000 --out "$D/data/txl.json"
python3 "$HERE/make_plans.py" "$D/data/plans"
cp "$HERE/gpu_check.sh" "$HERE/gpu_check.py" "$HERE/cal_check.sh" "$HERE/cal_check.py" "$HERE/checklib.py" "$HERE/checklib.sh" \
  "$HERE/shape_check.sh" "$HERE/../gemm_shapes.py" "$D/"
env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$D/lib" "$P" --version
du -sh "$D"
