#!/usr/bin/env bash
# Installs every system package placelab needs, from Debian's apt only. Idempotent: packages
# already present are skipped, and apt is not touched at all when nothing is missing.
set -euo pipefail

packages=(
  # toolchain
  g++ cmake ninja-build pkg-config git
  # C++ libraries
  libeigen3-dev libtbb-dev nlohmann-json3-dev catch2 libfmt-dev libcli11-dev libbenchmark-dev
  coinor-libcbc-dev libmetis-dev libscotch-dev
  # data-parallel training and distributed sweeps (docs/distributed.md)
  libopenmpi-dev openmpi-bin python3-mpi4py
  # dense products of the autodiff (and, through the libblas.so.3 alternative, of Debian's numpy and torch)
  libopenblas-dev
  # Python bindings, notebooks and the PyTorch references (Debian's python at /usr/bin/python3)
  python3-dev pybind11-dev python3-numpy python3-pytest python3-matplotlib python3-pandas
  python3-nbclient python3-nbformat python3-ipykernel python3-torch python3-torchvision
  # ONNX import (placelab.from_onnx, placelab graph --onnx)
  python3-onnx
  # the CUDA build's bundle for a GPU machine (bench/cuda_check/make_bundle.sh: the binaries' RUNPATH out)
  patchelf
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
echo "install-deps: done"
