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

// A kGemmTile-square tile of C per block (256 threads, 4 x 4 outputs each), over k in steps of kGemmDepth
// (all of them, or the block's share of them when the product is split along k: its partial tile then
// goes to a slot of its own, and the partial sums add up to the product's):
// each step's A tile (kGemmDepth x kGemmTile, k-major) and B tile (kGemmDepth x kGemmTile) are slots of the
// source region, staged in shared memory. blockIdx.z runs over the products of a batch times the splits (in
// launches of at most 65535); blockIdx.x runs over C's row tiles, blockIdx.y over its column tiles.
constexpr int32_t kTileFloats = kGemmTile * kGemmDepth;

__device__ int64_t slot(int64_t index, int64_t slots) { return (index % slots) * kTileFloats; }

__global__ void gemm_kernel(int64_t z0, int64_t splits, int64_t m, int64_t n, int64_t k, const float* src, int64_t slots,
                            int64_t operands, float* dst, int64_t c_slots, double* checksum) {
  __shared__ __align__(16) float as[kGemmDepth][kGemmTile];
  __shared__ __align__(16) float bs[kGemmDepth][kGemmTile];
  const int64_t z = z0 + blockIdx.z, b = z / splits, split = z % splits, mi = blockIdx.x, ni = blockIdx.y;
  const int64_t m_tiles = (m + kGemmTile - 1) / kGemmTile, n_tiles = (n + kGemmTile - 1) / kGemmTile;
  const int64_t k_tiles = (k + kGemmDepth - 1) / kGemmDepth;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4] = {};
  for (int64_t ki = split * k_tiles / splits; ki < (split + 1) * k_tiles / splits; ++ki) {
    // A tiles in the first half of the slots, B tiles in the second, as the CPU kernel lays them out.
    const float* a = src + slot(operands + (b * m_tiles + mi) * k_tiles + ki, slots / 2);
    const float* bt = src + (slots / 2) * kTileFloats + slot(operands + (b * k_tiles + ki) * n_tiles + ni, slots / 2);
    for (int i = threadIdx.x; i < kTileFloats; i += blockDim.x) {
      as[i / kGemmTile][i % kGemmTile] = a[i];
      bs[i / kGemmTile][i % kGemmTile] = bt[i];
    }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < kGemmDepth; ++p) {
      const float4 a4 = *reinterpret_cast<const float4*>(&as[p][ty * 4]);
      const float4 b4 = *reinterpret_cast<const float4*>(&bs[p][tx * 4]);
      const float av[4] = {a4.x, a4.y, a4.z, a4.w}, bv[4] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
    }
    __syncthreads();
  }
  float* c = dst + ((((b * m_tiles + mi) * n_tiles + ni) * splits + split) % c_slots) * kGemmTile * kGemmTile;
  double sum = 0;
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int col = 0; col < 4; ++col) {
      const int64_t row = ty * 4 + r, column = tx * 4 + col;
      if (mi * kGemmTile + row < m && ni * kGemmTile + column < n) {
        c[row * kGemmTile + column] = acc[r][col];
        sum += acc[r][col];
      }
    }
  add_block_sum(sum, checksum);
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

int64_t gemm_splits(const GemmSize& dims, int32_t sms) {
  if (dims.batch <= 0) return 1;
  const int64_t tiles = dims.batch * ((dims.m + kGemmTile - 1) / kGemmTile) * ((dims.n + kGemmTile - 1) / kGemmTile);
  const int64_t k_tiles = (dims.k + kGemmDepth - 1) / kGemmDepth;
  const int64_t wanted = (2LL * std::max(1, sms) + tiles - 1) / tiles;
  return std::clamp<int64_t>(wanted, 1, std::max<int64_t>(1, k_tiles / kMinSplitSteps));
}

cudaError_t launch_gemm(const GemmSize& dims, const float* src, int64_t src_floats, int64_t operands, float* dst,
                        int64_t dst_floats, double* checksum, int32_t sms, cudaStream_t stream) {
  if (dims.batch <= 0) return cudaSuccess;
  const int64_t m_tiles = (dims.m + kGemmTile - 1) / kGemmTile, n_tiles = (dims.n + kGemmTile - 1) / kGemmTile;
  if (n_tiles > kMaxGemmColumnTiles) return cudaErrorInvalidConfiguration;  // gridDim.y; the executor checks plans first
  const int64_t slots = std::max<int64_t>(2, src_floats / kTileFloats);
  const int64_t c_slots = std::max<int64_t>(1, dst_floats / (kGemmTile * kGemmTile));
  const int64_t splits = gemm_splits(dims, sms), zs = dims.batch * splits;
  for (int64_t z = 0; z < zs; z += 65535) {
    const dim3 grid(static_cast<unsigned>(m_tiles), static_cast<unsigned>(n_tiles),
                    static_cast<unsigned>(std::min<int64_t>(65535, zs - z)));
    gemm_kernel<<<grid, kThreads, 0, stream>>>(z, splits, dims.m, dims.n, dims.k, src, slots, operands / kTileFloats, dst,
                                               c_slots, checksum);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

double gemm_flops_executed(const GemmSize& dims) {
  if (dims.batch <= 0) return 0;
  auto up = [](int64_t v, int64_t to) { return static_cast<double>((v + to - 1) / to * to); };
  return 2.0 * static_cast<double>(dims.batch) * up(dims.m, kGemmTile) * up(dims.n, kGemmTile) * up(dims.k, kGemmDepth);
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
