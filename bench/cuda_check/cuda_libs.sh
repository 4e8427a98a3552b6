# Sourced before running a bundle's binaries (make_bundle.sh): unpacks the bundle's lib.tar.xz into its lib
# folder (once), puts that folder on LD_LIBRARY_PATH, then the folders of the CUDA libraries too large for the
# bundle (cuBLASLt, cuDNN: the sonames in the bundle's needed_cuda_libs.sh), found on this machine in order:
# $PLACELAB_CUDA_LIBS (folders, ':'-separated), the NVIDIA wheels beside PyTorch (site-packages/nvidia/*/lib,
# torch/lib), then the CUDA toolkit's folders. cuDNN loads its sub-libraries (engines, NVRTC for the
# runtime-compiled ones) by name: they come from the same folders.
#   source cuda_libs.sh BUNDLE      (fails, saying where it looked, when a library is nowhere)
_bundle=${1:-$PWD/.devbundle}
if [ ! -d "$_bundle/lib" ]; then
  mkdir -p "$_bundle/lib" && tar xJf "$_bundle/lib.tar.xz" -C "$_bundle/lib" || { echo "cuda_libs.sh: cannot unpack $_bundle/lib.tar.xz" >&2; return 1; }
fi
source "$_bundle/needed_cuda_libs.sh"
_candidates=()
[ -n "${PLACELAB_CUDA_LIBS:-}" ] && IFS=: read -r -a _candidates <<< "$PLACELAB_CUDA_LIBS"
_torch=$(python3 -c "import os, torch; print(os.path.dirname(torch.__file__))" 2>/dev/null || true)
if [ -n "$_torch" ]; then
  for _d in "$(dirname "$_torch")"/nvidia/*/lib "$_torch/lib"; do [ -d "$_d" ] && _candidates+=("$_d"); done
fi
_candidates+=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu)
_dirs=""
for _lib in $PLACELAB_NEEDED_CUDA_LIBS; do
  _found=""
  for _d in "${_candidates[@]}"; do
    if [ -e "$_d/$_lib" ]; then _found=$_d; break; fi
  done
  if [ -z "$_found" ]; then
    echo "cuda_libs.sh: $_lib is nowhere here (looked in ${_candidates[*]}); set PLACELAB_CUDA_LIBS" >&2
    return 1
  fi
  case ":$_dirs:" in *":$_found:"*) ;; *) _dirs="$_dirs:$_found" ;; esac
  echo "cuda_libs.sh: $_lib from $_found"
done
export LD_LIBRARY_PATH="$_bundle/lib$_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset _bundle _candidates _torch _dirs _lib _found _d
