#!/bin/bash
# Makes a bundle of the CUDA build for a GPU machine that has a CUDA driver but none of placelab's
# libraries: the placelab CLI and the replay tests, every shared library they need except glibc's own and
# the CUDA libraries too large to carry, the graphs and hand-made plans the checks replay, and the checks.
#   usage: make_bundle.sh BUILD_DIR DEST   (e.g. build/cuda .devbundle; DEST is replaced; needs patchelf)
# Build first, in the CUDA preset's own tree:
#   flock /tmp/placelab-build.lock cmake --preset cuda
#   flock /tmp/placelab-build.lock cmake --build --preset cuda -j2 --target placelab placelab_replay_tests
# The device tool carries 64 MiB in all (the repository included): the libraries travel xz-compressed
# (lib.tar.xz, OpenBLAS among them: 60 MB as files, ~12 MB packed), and cuBLASLt (541 MB) and cuDNN (its
# engines alone 245 MB) cannot travel at all. The bundle's cuda_libs.sh unpacks lib.tar.xz and finds those
# two where the GPU machine has them: $PLACELAB_CUDA_LIBS, the NVIDIA wheels beside PyTorch
# (site-packages/nvidia/*/lib, torch/lib), then the CUDA toolkit; `source` it before running the bundle's
# binaries (fidelity_cuda.sh does). They must be of this build's major versions (libcublasLt.so.13,
# libcudnn.so.9): PyTorch built for CUDA 13 ships them. The binaries' RUNPATH (this machine's folders) is
# removed, so that they load exactly what LD_LIBRARY_PATH names.
# Extra builds to compare (placelab only) can be put in DEST/bin-old and DEST/bin-exp afterwards;
# gpu_check.py runs its comparisons with them when they are there, and cal_check.py replays the 'before'
# side with DEST/bin-old on DEST/data/old (cluster.json and p_GRAPH_PLACEMENT.json, e.g. from an earlier
# gpu_check.sh run's output and extra.tar.gz).
set -euo pipefail
BUILD=$(realpath "$1")
D=$(realpath -m "$2")
HERE=$(dirname "$(realpath "$0")")
command -v patchelf > /dev/null || { echo "make_bundle: needs patchelf (apt-get install patchelf)" >&2; exit 1; }
rm -rf "$D"; mkdir -p "$D/bin" "$D/lib" "$D/data"
cp "$BUILD/cli/placelab" "$BUILD/tests/placelab_replay_tests" "$D/bin/"
strip "$D"/bin/* || true
skip='^(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|linux-vdso)\.so'
# Found on the GPU machine by cuda_libs.sh instead (and the driver's own libcuda).
external='^(libcuda\.so|libcublas\.so|libcublasLt\.so|libcudnn[a-z_]*\.so)'
copy_needs() {  # the shared libraries of $1, but glibc's and the external ones
  ldd "$1" 2>/dev/null | awk '/=>/ {print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip || $name =~ $external ]] && continue
    [ -e "$D/lib/$name" ] || cp -L "$path" "$D/lib/$name"
  done
}
for bin in "$D"/bin/*; do copy_needs "$bin"; done
for lib in "$D"/lib/*; do copy_needs "$lib"; done
cuda_dir=$(dirname "$(ldd "$D/bin/placelab" | awk '/libcublasLt/ {print $3}')")  # this machine's cuBLASLt and cuDNN
for f in "$D"/bin/* "$D"/lib/*; do patchelf --remove-rpath "$f"; done
# The external libraries the binaries name, by soname: what cuda_libs.sh must find there.
needed=$(for bin in "$D"/bin/*; do readelf -d "$bin" | awk '/NEEDED/ {gsub(/[][]/, "", $5); print $5}'; done |
         grep -E "$external" | grep -v '^libcuda\.so' | sort -u | tr '\n' ' ')
echo "PLACELAB_NEEDED_CUDA_LIBS=\"$needed\"" > "$D/needed_cuda_libs.sh"
cp "$HERE/cuda_libs.sh" "$D/"
# ldd FILE as the GPU machine would see it, with the folders $1 only: under env -i, and without this machine's
# loader cache (--inhibit-cache), which knows /usr/local/cuda; the system's own folders stay.
bare_ldd() { env -i LD_TRACE_LOADED_OBJECTS=1 LD_LIBRARY_PATH="$1" /lib64/ld-linux-x86-64.so.2 --inhibit-cache "$2"; }
# The bundle alone: every library resolves but the driver's and the external ones.
missing=$(for f in "$D"/bin/* "$D"/lib/*; do bare_ldd "$D/lib" "$f" 2>/dev/null; done |
          awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
unexpected=$(for name in $missing; do [[ $name =~ $external ]] || echo "$name"; done)
if [ -n "$unexpected" ]; then echo "make_bundle: the bundle lacks $unexpected" >&2; exit 1; fi
echo "make_bundle: not found in the bundle alone (found by cuda_libs.sh, or the driver's): $missing"
P="$D/bin/placelab"
export LD_LIBRARY_PATH="$D/lib:$cuda_dir"
"$P" graph --model resnet50 --batch 1 --image_size 32 --out "$D/data/resnet50.json"
"$P" graph --model bert --batch 1 --seq_len 32 --layers 2 --hidden 128 --heads 2 --vocab 2000 --out "$D/data/bert.json"
"$P" graph --model transformer_xl --batch 1 --seq_len 32 --mem_len 32 --layers 2 --hidden 128 --heads 2 --inner 256 \
  --vocab 2000 --out "$D/data/txl.json"
python3 "$HERE/make_plans.py" "$D/data/plans"
cp "$HERE/gpu_check.sh" "$HERE/gpu_check.py" "$HERE/cal_check.sh" "$HERE/cal_check.py" "$HERE/checklib.py" "$HERE/checklib.sh" \
  "$HERE/shape_check.sh" "$HERE/../gemm_shapes.py" "$D/"
(cd "$D/lib" && tar cJf "$D/lib.tar.xz" .)
rm -rf "$D/lib"
# As on the GPU machine: unpacked and set up by cuda_libs.sh under env -i (this machine's cuBLASLt and cuDNN
# standing in for PyTorch's there), only the driver's libcuda may be missing.
folders=$(env -i PATH=/usr/bin:/bin PLACELAB_CUDA_LIBS="$cuda_dir" bash -c 'source "$1/cuda_libs.sh" "$1" > /dev/null && echo "$LD_LIBRARY_PATH"' _ "$D")
bad=$(for f in "$D"/bin/*; do bare_ldd "$folders" "$f"; done | grep "not found" | grep -v "libcuda\.so\.1" || true)
[ -z "$bad" ] || { echo "make_bundle: still missing: $bad" >&2; exit 1; }
env -i LD_LIBRARY_PATH="$folders" "$P" --version
rm -rf "$D/lib"  # cuda_libs.sh unpacks it again on the GPU machine
du -sh "$D"; du -b "$D/lib.tar.xz" "$D"/bin/*
