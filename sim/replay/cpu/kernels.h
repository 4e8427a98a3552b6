// The CPU replay kernels: a GEMM sized to an op's FLOPs, a streaming kernel sized to its bytes and a
// copy for transfers, each over buffers a device owns. Every kernel returns a checksum of what it
// wrote, which the executor adds up and reports, so no kernel can be optimised away.
#pragma once

#include <cstdint>
#include <vector>

namespace placelab::sim::replay::cpu {

/** C (n x n) += A (n x k) * B (k x n), `reps` times: 2 n^2 k reps FLOPs. */
struct GemmShape {
  int64_t n = 0, k = 0, reps = 0;
  double flops() const { return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(reps); }
};

/** Largest n of a GEMM tile (its operands, ~200 KB, stay in the L2 cache). */
inline constexpr int64_t kMaxTile = 128;

/** The GEMM whose FLOPs are closest to `flops`: reps tiles of at most kMaxTile (zero shape for 0). */
GemmShape gemm_shape(double flops);

/** Elements a streaming kernel touches for `bytes`: each reads 4 bytes and writes 4 (0 for 0). */
int64_t stream_elements(double bytes);

/**
 * Memory a CPU replay device owns: GEMM operands (one result tile per thread of the device) and a
 * streaming arena, read-only source half and destination half, walked by a ring cursor.
 */
class DeviceMemory {
 public:
  /** `arena_bytes` split between the two halves; `threads` result tiles for parallel GEMMs. */
  explicit DeviceMemory(double arena_bytes, int32_t threads = 1);

  /** Runs part `part` (< threads) of `parts` of the GEMM's reps into that part's tile (reset first); returns its sum. */
  double gemm(const GemmShape& shape, int32_t part = 0, int32_t parts = 1);
  /** Takes `elements` positions of the ring for a streaming kernel; returns where they begin. */
  int64_t take(int64_t elements);
  /** dst[i] = 0.5 src[i] + 1 over `elements` ring positions from `begin`; returns the sum written. */
  double stream(int64_t begin, int64_t elements);
  /**
   * Copies `bytes` (whole floats) of the source half, from `*src_cursor`, into `dst`, a ring of
   * `dst_floats` floats, from `*dst_cursor`, and advances both cursors. Reads only the source half, so
   * copies may run beside this device's kernels. Returns the sum of one copied float per 4 KiB.
   */
  double copy_to(float* dst, int64_t dst_floats, int64_t* src_cursor, int64_t* dst_cursor, double bytes) const;
  /** Puts the streaming cursor back at the start (each run touches the same data). */
  void rewind() { stream_cursor_ = 0; }

  int64_t arena_floats() const { return static_cast<int64_t>(src_.size()); }

 private:
  std::vector<float> a_, b_;               // kMaxTile x 2 kMaxTile and 2 kMaxTile x kMaxTile
  std::vector<std::vector<float>> c_;      // one kMaxTile^2 result tile per thread
  std::vector<float> src_, dst_;           // the streaming arena's halves
  int64_t stream_cursor_ = 0;
};

/** The value DeviceMemory puts at position i of every buffer: small, exact in float, not constant. */
inline float pattern(int64_t i) { return static_cast<float>(i % 17) * 0.125f - 1.0f; }

}  // namespace placelab::sim::replay::cpu
