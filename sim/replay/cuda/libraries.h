// cuBLASLt and cuDNN behind the CUDA replay: per GPU, the libraries' handles and, per distinct call
// (sim/replay/library_calls.h), the descriptors and the algorithm the library's heuristics choose, as a
// framework does without benchmarking (PyTorch's default). Kept for the process's life: creating a
// cuDNN handle loads its engines, and a calibration runs hundreds of plans of the same calls. Without
// cuDNN in the build (PLACELAB_HAS_CUDNN unset) convolutions run as products on cuBLASLt.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "sim/replay/executor.h"
#include "sim/replay/library_calls.h"

namespace placelab::sim::replay::cuda {

/** Whether this build runs convolutions on cuDNN. */
bool has_cudnn();

/** The CUDA driver and runtime and the libraries as loaded at run time, e.g. "driver 13.0, runtime 13.0, cuBLASLt 13.1.0, cuDNN 9.19.0". */
std::string gpu_versions();

/** cuBLASLt's workspace per call (as PyTorch gives it on Hopper). */
inline constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;
/** The largest workspace a cuDNN algorithm may ask for; the heuristics' first algorithm within it runs. */
inline constexpr size_t kCudnnWorkspaceBytes = size_t{1} << 30;

/** A call with its descriptors and chosen algorithm (opaque; made by GpuLibraries::prepare). */
struct PreparedCall;

/** Workspace bytes `call` runs with. */
size_t workspace_bytes(const PreparedCall& call);

/** The call `prepared` runs. */
const LibraryCall& call_of(const PreparedCall& prepared);

/** The libraries of one GPU. */
class GpuLibraries {
 public:
  /** GPU `gpu`'s libraries, made on first use (which sets the current device to `gpu`). */
  static GpuLibraries& of(int gpu);

  /** `call` prepared for `math` (once per process); nullptr when the library has no algorithm for it. */
  const PreparedCall* prepare(const LibraryCall& call, GpuMath math);

  /**
   * Enqueues `call` on `stream` (of this GPU): operands from `src` (the second aligned_floats(first)
   * after the first), output to `dst`, with `workspace` of at least workspace_bytes(call).
   */
  void run(const PreparedCall& call, const float* src, float* dst, void* workspace, cudaStream_t stream);

  ~GpuLibraries();
  GpuLibraries(const GpuLibraries&) = delete;
  GpuLibraries& operator=(const GpuLibraries&) = delete;

 private:
  explicit GpuLibraries(int gpu);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/**
 * Runs `call` once on GPU 0 with operands `inputs` (in the call's order) and returns its output, for the
 * tests that check the libraries against CPU references. Throws placelab::Error when the library has no
 * algorithm for it.
 */
std::vector<float> run_call_once(const LibraryCall& call, GpuMath math, std::array<std::span<const float>, 2> inputs);

}  // namespace placelab::sim::replay::cuda
