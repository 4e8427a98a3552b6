// The CUDA replay kernels behind a plain C++ interface (kernels.cu is the only file nvcc compiles):
// a tiled GEMM of an op's shape, a streaming kernel sized to its bytes, an empty kernel
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

/** Side of the square output tile a block of the GEMM kernel computes, and the depth of one k step. */
inline constexpr int32_t kGemmTile = 64;
inline constexpr int32_t kGemmDepth = 16;

/** Most column tiles of one GEMM (CUDA's grid height): n at most 65535 kGemmTile. */
inline constexpr int64_t kMaxGemmColumnTiles = 65535;

/** The product a GEMM kernel runs (graphs::GemmDims, which nvcc's C++17 cannot include). */
struct GemmSize {
  int64_t batch = 0, m = 0, n = 0, k = 0;
};

/**
 * Runs `dims` (batch products of m x k by k x n) as a tiled GEMM: each block computes a kGemmTile-square
 * tile of C over k in steps of kGemmDepth (over its share of them when gemm_splits cuts k), reading each step's A and B tiles from `src` (a region of
 * `src_floats` floats, from `operands` on: tile-sized slots in turn, as the CPU kernel does) and writing
 * C's tile into `dst` (`dst_floats`); ragged edge tiles compute whole and write their valid part. Adds
 * the sum of the valid C elements to the checksum buffer.
 */
cudaError_t launch_gemm(const GemmSize& dims, const float* src, int64_t src_floats, int64_t operands, float* dst,
                        int64_t dst_floats, double* checksum, int32_t sms, cudaStream_t stream);

/** Fewest k steps (of kGemmDepth) a split of a product along k gets. */
inline constexpr int64_t kMinSplitSteps = 4;

/**
 * Parts a product is split into along k on a GPU of `sms` multiprocessors: as cuBLAS does, enough for
 * two blocks per multiprocessor when its output tiles are fewer, each of at least kMinSplitSteps steps.
 */
int64_t gemm_splits(const GemmSize& dims, int32_t sms);

/** FLOPs launch_gemm executes for `dims`: ragged tiles count whole. */
double gemm_flops_executed(const GemmSize& dims);

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
