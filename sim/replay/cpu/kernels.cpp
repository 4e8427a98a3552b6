// The CPU replay kernels (see kernels.h). The GEMM is Eigen's, on the op's own shape over operands in
// the arena, so a compute-bound op runs at the rate its shape gets; the streaming kernel walks a ring
// through the arena, so a memory-bound op moves data of its own; copies bypass the copying core's caches.
#include "sim/replay/cpu/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <Eigen/Core>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "sim/replay/plan.h"

#ifdef PLACELAB_OPENBLAS
extern "C" {
void openblas_set_num_threads(int threads);
int openblas_get_num_threads(void);
}
#endif

namespace placelab::sim::replay::cpu {

BlasThreads::BlasThreads(int threads) : before_(current()) {
#ifdef PLACELAB_OPENBLAS
  openblas_set_num_threads(threads);
#else
  (void)threads;
#endif
}

BlasThreads::~BlasThreads() {
#ifdef PLACELAB_OPENBLAS
  openblas_set_num_threads(before_);
#endif
}

int BlasThreads::current() {
#ifdef PLACELAB_OPENBLAS
  return openblas_get_num_threads();
#else
  return 1;
#endif
}

namespace {

// Whole elements of `size` bytes in `bytes`, at least one when bytes > 0. Plans hold at most
// kMaxAmount bytes (validate_plan); clamping keeps the conversion to int64 defined for any input.
int64_t elements_of(double bytes, double size) {
  if (!(bytes > 0)) return 0;
  return std::max<int64_t>(1, std::llround(std::min(bytes, kMaxAmount) / size));
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Cuts `size` into the fewest pieces of at most `limit` (>= 1) and returns the piece size, a multiple of 8
// where it can be so that Eigen gets round tiles.
int64_t piece(int64_t size, int64_t limit) {
  if (size <= limit) return size;
  int64_t p = ceil_div(size, ceil_div(size, limit));
  if (p > 8 && p % 8 != 0 && p + 8 - p % 8 <= limit) p += 8 - p % 8;
  return p;
}

}  // namespace

GemmTiling gemm_tiling(const graphs::GemmDims& dims, int64_t tile_floats) {
  if (!dims.known()) return {};
  const int64_t q = std::max<int64_t>(64, tile_floats);
  GemmTiling t{.dims = dims};
  // k is cut only for products too deep for 64 columns of a tile; then n to fit B's tile, then m to fit A's and C's.
  t.depth = piece(dims.k, std::max<int64_t>(1, q / 64));
  t.cols = piece(dims.n, std::max<int64_t>(1, q / t.depth));
  t.rows = piece(dims.m, std::max<int64_t>(1, q / std::max(t.depth, t.cols)));
  t.m_tiles = ceil_div(dims.m, t.rows);
  t.n_tiles = ceil_div(dims.n, t.cols);
  t.k_tiles = ceil_div(dims.k, t.depth);
  return t;
}

int64_t stream_elements(double bytes) { return elements_of(bytes, 8); }

DeviceMemory::DeviceMemory(double arena_bytes, int32_t threads) : threads_(std::max(1, threads)) {
  const auto half = std::max<int64_t>(1024, static_cast<int64_t>(arena_bytes / 8));
  src_.resize(half);
  dst_.resize(half);
  for (size_t i = 0; i < src_.size(); ++i) src_[i] = pattern(static_cast<int64_t>(i));
  std::fill(dst_.begin(), dst_.end(), 0.0f);  // touch every page now, not in the first run
}

GemmTiling DeviceMemory::tiling(const graphs::GemmDims& dims) const {
  GemmTiling t = gemm_tiling(dims, arena_floats() / std::max(4, threads_));
  // Each thread gets a tile where the product has rows enough: halve the row blocks until it does.
  while (t.tiles() < threads_ && t.rows > 8) {
    t.rows = piece(dims.m, std::max<int64_t>(8, t.rows / 2));
    t.m_tiles = ceil_div(dims.m, t.rows);
  }
  return t;
}

int64_t DeviceMemory::tile_offset(int64_t index, int64_t tile_floats, int64_t region_floats) {
  const int64_t slots = std::max<int64_t>(1, region_floats / std::max<int64_t>(1, tile_floats));
  return (index % slots) * tile_floats;
}

int64_t DeviceMemory::take_operands(const GemmTiling& t) {
  const int64_t begin = operand_cursor_;
  operand_cursor_ = next_operands(operand_cursor_, t.dims, arena_floats() / 2);
  return begin;
}

double DeviceMemory::gemm(const GemmTiling& t, int64_t operands, int32_t part, int32_t parts) {
  // A tiles in the source half's first half, B tiles in its second, each from the op's own start (in floats).
  const int64_t half = arena_floats() / 2, slice = arena_floats() / threads_;
  const float* a_region = src_.data();
  const float* b_region = src_.data() + half;
  float* c_region = dst_.data() + part * slice;
  const int64_t a_tile = t.rows * t.depth, b_tile = t.depth * t.cols, c_tile = t.rows * t.cols;
  const int64_t a0 = operands / std::max<int64_t>(1, a_tile), b0 = operands / std::max<int64_t>(1, b_tile);  // in tiles
  double sum = 0;
  int64_t written = 0;  // this part's result tiles so far: where the next one goes in its slice
  for (int64_t tile = part; tile < t.tiles(); tile += parts) {
    const int64_t b = tile / (t.m_tiles * t.n_tiles), mi = tile / t.n_tiles % t.m_tiles, ni = tile % t.n_tiles;
    const int64_t rows = std::min(t.rows, t.dims.m - mi * t.rows), cols = std::min(t.cols, t.dims.n - ni * t.cols);
    Eigen::Map<Eigen::MatrixXf> c(c_region + tile_offset(written++, c_tile, slice), rows, cols);
    for (int64_t ki = 0; ki < t.k_tiles; ++ki) {
      const int64_t depth = std::min(t.depth, t.dims.k - ki * t.depth);
      // The same operand tile for the same (batch, row or column block, k block): reused as a real GEMM reuses it.
      Eigen::Map<const Eigen::MatrixXf> a(a_region + tile_offset(a0 + (b * t.m_tiles + mi) * t.k_tiles + ki, a_tile, half), rows, depth);
      Eigen::Map<const Eigen::MatrixXf> bm(b_region + tile_offset(b0 + (b * t.k_tiles + ki) * t.n_tiles + ni, b_tile, half), depth, cols);
      if (ki == 0) c.noalias() = a * bm;
      else c.noalias() += a * bm;
    }
    sum += static_cast<double>(c.sum());
  }
  return sum;
}

int64_t DeviceMemory::take(int64_t elements) {
  const int64_t begin = stream_cursor_;
  stream_cursor_ = (stream_cursor_ + elements) % static_cast<int64_t>(src_.size());
  return begin;
}

double DeviceMemory::stream(int64_t begin, int64_t elements) {
  const auto size = static_cast<int64_t>(src_.size());
  begin %= size;
  double sum0 = 0, sum1 = 0;
  while (elements > 0) {
    const int64_t len = std::min(elements, size - begin);
    const float* s = src_.data() + begin;
    float* d = dst_.data() + begin;
    int64_t i = 0;
    for (; i + 1 < len; i += 2) {  // two accumulators: the adds do not serialise the loop
      d[i] = 0.5f * s[i] + 1.0f;
      d[i + 1] = 0.5f * s[i + 1] + 1.0f;
      sum0 += d[i];
      sum1 += d[i + 1];
    }
    if (i < len) {
      d[i] = 0.5f * s[i] + 1.0f;
      sum0 += d[i];
    }
    begin = 0;
    elements -= len;
  }
  return sum0 + sum1;
}

namespace {

// dst[0, n) = src[0, n) with non-temporal stores where the machine has them: a transfer lands in the
// destination's memory as a device's DMA would write it, not in the copying core's caches. With cached
// stores a copy's speed depended on what the op before it left dirty in those caches (800 kB on this
// project's VM: 42.8 GB/s after nothing, 29.4 after a streaming op, 15.4 after a GEMM; non-temporal
// 24.9, 24.7 and 19.3), so the calibration's ping-pong, with nothing between its copies, priced a graph's
// copies 1.5-2.7x too fast (bench/results/fidelity.md, session 24).
void copy_floats(float* dst, const float* src, int64_t n) {
#if defined(__SSE2__)
  int64_t i = 0;
  for (; i < n && reinterpret_cast<uintptr_t>(dst + i) % 16 != 0; ++i) dst[i] = src[i];
  for (; i + 16 <= n; i += 16)
    for (int64_t j = i; j < i + 16; j += 4) _mm_stream_ps(dst + j, _mm_loadu_ps(src + j));
  for (; i < n; ++i) dst[i] = src[i];
  _mm_sfence();  // the stores are weakly ordered: done before the transfer is signalled
#else
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
#endif
}

}  // namespace

double DeviceMemory::copy_to(float* dst, int64_t dst_floats, int64_t* src_cursor, int64_t* dst_cursor,
                             double bytes) const {
  const auto size = static_cast<int64_t>(src_.size());
  int64_t left = elements_of(bytes, 4);
  double check = 0;
  while (left > 0) {
    const int64_t len = std::min({left, size - *src_cursor, dst_floats - *dst_cursor});
    copy_floats(dst + *dst_cursor, src_.data() + *src_cursor, len);
    for (int64_t i = len - 1; i >= 0; i -= 1024) check += dst[*dst_cursor + i];
    *src_cursor = (*src_cursor + len) % size;
    *dst_cursor = (*dst_cursor + len) % dst_floats;
    left -= len;
  }
  return check;
}

}  // namespace placelab::sim::replay::cpu
