// The CPU replay kernels (see kernels.h). The GEMM is Eigen's, on tiles that stay in cache, so a
// compute-bound op runs at the core's GEMM rate; the streaming kernel walks a ring larger than the
// caches, so a memory-bound op runs at memory bandwidth whatever its size.
#include "sim/replay/cpu/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <Eigen/Core>

#include "sim/replay/plan.h"

namespace placelab::sim::replay::cpu {

namespace {

// Whole elements of `size` bytes in `bytes`, at least one when bytes > 0. Plans hold at most
// kMaxAmount bytes (validate_plan); clamping keeps the conversion to int64 defined for any input.
int64_t elements_of(double bytes, double size) {
  if (!(bytes > 0)) return 0;
  return std::max<int64_t>(1, std::llround(std::min(bytes, kMaxAmount) / size));
}

}  // namespace

GemmShape gemm_shape(double flops) {
  if (!(flops > 0)) return {};
  flops = std::min(flops, kMaxAmount);  // as in elements_of: reps must fit int64
  // Full tiles are kMaxTile x kMaxTile (reps of them, k taking up the rest: 0.75 n <= k < 1.5 n); a
  // smaller op is one tile with n a multiple of 8. Eigen runs a ragged tile (n = 127) 15% slower than
  // n = 128, so sizes calibration measured at would otherwise run slower than the round sizes of real
  // models' products.
  const double tile_flops = 2.0 * kMaxTile * kMaxTile * kMaxTile;
  const auto reps = std::max<int64_t>(1, std::llround(flops / tile_flops));
  const double per_rep = flops / static_cast<double>(reps);
  int64_t n = kMaxTile;
  if (flops < tile_flops) {
    n = std::clamp<int64_t>(static_cast<int64_t>(std::cbrt(per_rep / 2)), 1, kMaxTile);
    if (n >= 8) n -= n % 8;
  }
  // k matches the FLOPs to within half a column; below (n + 8)^3 / n^2 <= 2 kMaxTile for a small op.
  const int64_t k = std::clamp<int64_t>(std::llround(per_rep / (2.0 * static_cast<double>(n * n))), 1, 2 * kMaxTile);
  return {n, k, reps};
}

int64_t stream_elements(double bytes) { return elements_of(bytes, 8); }

DeviceMemory::DeviceMemory(double arena_bytes, int32_t threads)
    : a_(kMaxTile * 2 * kMaxTile), b_(2 * kMaxTile * kMaxTile),
      c_(std::max(1, threads), std::vector<float>(kMaxTile * kMaxTile)) {
  const auto half = std::max<int64_t>(1024, static_cast<int64_t>(arena_bytes / 8));
  src_.resize(half);
  dst_.resize(half);
  for (size_t i = 0; i < a_.size(); ++i) a_[i] = pattern(static_cast<int64_t>(i));
  for (size_t i = 0; i < b_.size(); ++i) b_[i] = pattern(static_cast<int64_t>(i) + 5);
  for (size_t i = 0; i < src_.size(); ++i) src_[i] = pattern(static_cast<int64_t>(i));
  std::fill(dst_.begin(), dst_.end(), 0.0f);  // touch every page now, not in the first run
}

double DeviceMemory::gemm(const GemmShape& shape, int32_t part, int32_t parts) {
  // Part p runs reps p, p + parts, ...: n = rows of A and C, k = inner dimension, n = columns of B and C.
  const int64_t reps = shape.reps / parts + (part < shape.reps % parts ? 1 : 0);
  if (reps == 0) return 0;
  Eigen::Map<const Eigen::MatrixXf> a(a_.data(), shape.n, shape.k);
  Eigen::Map<const Eigen::MatrixXf> b(b_.data(), shape.k, shape.n);
  Eigen::Map<Eigen::MatrixXf> c(c_[part].data(), shape.n, shape.n);
  c.setZero();
  for (int64_t r = 0; r < reps; ++r) c.noalias() += a * b;
  return c.cast<double>().sum();
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

double DeviceMemory::copy_to(float* dst, int64_t dst_floats, int64_t* src_cursor, int64_t* dst_cursor,
                             double bytes) const {
  const auto size = static_cast<int64_t>(src_.size());
  int64_t left = elements_of(bytes, 4);
  double check = 0;
  while (left > 0) {
    const int64_t len = std::min({left, size - *src_cursor, dst_floats - *dst_cursor});
    std::memcpy(dst + *dst_cursor, src_.data() + *src_cursor, static_cast<size_t>(len) * sizeof(float));
    for (int64_t i = len - 1; i >= 0; i -= 1024) check += dst[*dst_cursor + i];
    *src_cursor = (*src_cursor + len) % size;
    *dst_cursor = (*dst_cursor + len) % dst_floats;
    left -= len;
  }
  return check;
}

}  // namespace placelab::sim::replay::cpu
