// The CUDA replay kernels behind a plain C++ interface (kernels.cu is the only file nvcc compiles):
// an FMA-chain kernel sized to an op's FLOPs, a streaming kernel sized to its bytes, an empty kernel
// (a launch), a gate kernel that holds a stream until the host opens it, and a pattern fill. Every
// kernel with work adds a checksum of its results to a checksum buffer in device memory: one atomic add
// per block into one of kChecksumSlots slots (a line apart), which the host sums.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace placelab::sim::replay::cuda {

/**
 * A device's checksum is kChecksumDoubles doubles: kChecksumSlots slots, kChecksumStride doubles (a
 * 128-byte line) apart, each block adding to slot blockIdx % kChecksumSlots; the checksum is their sum.
 * One atomic add per warp into one double cost ~1.5 ns each on an H200 (same-address atomics are
 * serialised): 8448 warps, i.e. ~12 us, for a short full-GPU op (100 MFLOP took 20 us, now 8 us),
 * mostly hidden behind the work of long ones (1 GFLOP: 24.8 us, now 23.1 us).
 */
inline constexpr int32_t kChecksumSlots = 32;
inline constexpr int32_t kChecksumStride = 16;
inline constexpr int32_t kChecksumDoubles = kChecksumSlots * kChecksumStride;

/** Grid of the compute kernel: blocks x threads threads, each running `iters` iterations of 4 FMAs. */
struct ComputeLaunch {
  int32_t blocks = 0, threads = 0;
  int64_t iters = 0;
  /** FLOPs it executes (an FMA is 2). */
  double flops() const { return 8.0 * static_cast<double>(blocks) * threads * static_cast<double>(iters); }
};

/** The launch whose FLOPs are closest to `flops` on a GPU with `sms` multiprocessors (empty for 0). */
ComputeLaunch compute_launch(double flops, int32_t sms);

/** Runs the compute kernel; adds the sum of its threads' results to the checksum buffer. */
cudaError_t launch_compute(const ComputeLaunch& launch, double* checksum, cudaStream_t stream);

/** dst[j] = 0.5 src[j] + 1 for j = (begin + i) mod size, i < elements; adds the sum written to the checksum buffer. */
cudaError_t launch_stream(const float* src, float* dst, int64_t size, int64_t begin, int64_t elements,
                          double* checksum, int32_t sms, cudaStream_t stream);

/** An empty kernel: the cost of a launch. */
cudaError_t launch_empty(cudaStream_t stream);

/** One thread that spins until *flag (mapped pinned host memory) is non-zero. */
cudaError_t launch_gate(const volatile int* flag, cudaStream_t stream);

/** data[i] = the CPU kernels' pattern(i) for i < n. */
cudaError_t launch_fill(float* data, int64_t n, cudaStream_t stream);

}  // namespace placelab::sim::replay::cuda
