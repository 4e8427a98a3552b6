// The CUDA replay kernels (see kernels.h). Sums are reduced per block (warp shuffles, then the warps'
// sums through shared memory), then one atomic add per block into one of the checksum's slots, so the
// checksum costs little next to the work.
#include "sim/replay/cuda/kernels.h"

#include <algorithm>

namespace placelab::sim::replay::cuda {

namespace {

constexpr int32_t kThreads = 256;

__device__ double warp_sum(double value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
  return value;
}

// Every thread of the block (kThreads of them) calls it once, after its work.
__device__ void add_block_sum(double value, double* checksum) {
  __shared__ double warp_sums[kThreads / 32];
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  value = warp_sum(value);
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();
  if (warp != 0) return;
  value = warp_sum(lane < blockDim.x / 32 ? warp_sums[lane] : 0.0);
  if (lane == 0) atomicAdd(checksum + (blockIdx.x % kChecksumSlots) * kChecksumStride, value);
}

// Four independent FMA chains per thread; FLOPs = 8 * iters per thread.
__global__ void compute_kernel(int64_t iters, double* checksum) {
  float a0 = threadIdx.x * 1e-3f, a1 = a0 + 1.0f, a2 = a0 + 2.0f, a3 = a0 + 3.0f;
  const float b = 0.999f, c = 1e-3f;
  for (int64_t i = 0; i < iters; ++i) {
    a0 = fmaf(a0, b, c);
    a1 = fmaf(a1, b, c);
    a2 = fmaf(a2, b, c);
    a3 = fmaf(a3, b, c);
  }
  add_block_sum(static_cast<double>(a0 + a1 + a2 + a3), checksum);
}

// Grid-stride streaming over a ring of `size` floats.
__global__ void stream_kernel(const float* src, float* dst, int64_t size, int64_t begin, int64_t elements,
                              double* checksum) {
  double sum = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t step = stride % size;  // one 64-bit modulo per thread, not one per element (emulated, slow)
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t j = (begin + i) % size; i < elements; i += stride) {
    const float v = 0.5f * src[j] + 1.0f;
    dst[j] = v;
    sum += v;
    j += step;
    if (j >= size) j -= size;
  }
  add_block_sum(sum, checksum);
}

__global__ void empty_kernel() {}

__global__ void gate_kernel(const volatile int* flag) {
  while (*flag == 0) {
  }
}

__global__ void fill_kernel(float* data, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    data[i] = static_cast<float>(i % 17) * 0.125f - 1.0f;
}

}  // namespace

ComputeLaunch compute_launch(double flops, int32_t sms) {
  if (!(flops > 0)) return {};
  // Fill the GPU (2048 threads per SM) when the op is large; small ops get fewer threads of >= 16 iterations.
  const double full = 2048.0 * std::max(1, sms);
  const double threads = std::clamp(flops / (8.0 * 16), 32.0, full);
  const auto blocks = static_cast<int32_t>(std::max(1.0, std::round(threads / kThreads)));
  const auto iters = static_cast<int64_t>(std::max(1.0, std::round(flops / (8.0 * blocks * kThreads))));
  return {blocks, kThreads, iters};
}

cudaError_t launch_compute(const ComputeLaunch& launch, double* checksum, cudaStream_t stream) {
  if (launch.blocks == 0) return cudaSuccess;
  compute_kernel<<<launch.blocks, launch.threads, 0, stream>>>(launch.iters, checksum);
  return cudaGetLastError();
}

cudaError_t launch_stream(const float* src, float* dst, int64_t size, int64_t begin, int64_t elements,
                          double* checksum, int32_t sms, cudaStream_t stream) {
  if (elements <= 0) return cudaSuccess;
  const auto blocks = static_cast<int32_t>(std::min<int64_t>(8LL * std::max(1, sms), (elements + kThreads - 1) / kThreads));
  stream_kernel<<<blocks, kThreads, 0, stream>>>(src, dst, size, begin % size, elements, checksum);
  return cudaGetLastError();
}

cudaError_t launch_empty(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t launch_gate(const volatile int* flag, cudaStream_t stream) {
  gate_kernel<<<1, 1, 0, stream>>>(flag);
  return cudaGetLastError();
}

cudaError_t launch_fill(float* data, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  fill_kernel<<<256, kThreads, 0, stream>>>(data, n);
  return cudaGetLastError();
}

}  // namespace placelab::sim::replay::cuda
