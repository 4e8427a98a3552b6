// The CPU replay kernels: a GEMM of an op's shape (or, without one, of its FLOPs), a streaming kernel
// sized to its bytes and a copy for transfers, each over buffers a device owns. Every kernel returns a checksum of what it
// wrote, which the executor adds up and reports, so no kernel can be optimised away.
#pragma once

#include <cstdint>
#include <vector>

#include "graphs/graph.h"

namespace placelab::sim::replay::cpu {

/**
 * A GEMM cut into tiles that fit a device's arena: for each of the batch products, m_tiles x n_tiles
 * output tiles of at most rows x cols, each the sum of k_tiles products over at most `depth` of k. The
 * operands are read from the arena and the result written to it, so a large product moves its data
 * through memory as a real one does, and a skinny one runs at the rate its shape allows.
 */
struct GemmTiling {
  graphs::GemmDims dims;
  int64_t rows = 0, cols = 0, depth = 0;
  int64_t m_tiles = 0, n_tiles = 0, k_tiles = 0;
  int64_t tiles() const { return dims.batch * m_tiles * n_tiles; }
  double flops() const { return dims.known() ? dims.flops() : 0; }
};

/** How `dims` is cut so that no operand tile holds more than `tile_floats` floats (zero tiling for unknown dims). */
GemmTiling gemm_tiling(const graphs::GemmDims& dims, int64_t tile_floats);

/** Elements a streaming kernel touches for `bytes`: each reads 4 bytes and writes 4 (0 for 0). */
int64_t stream_elements(double bytes);

/**
 * Memory a CPU replay device owns: an arena split into a read-only source half (GEMM operands; the source
 * of streams and copies) and a destination half (GEMM results, one slice per thread; streams' writes),
 * walked by ring cursors.
 */
class DeviceMemory {
 public:
  /** `arena_bytes` split between the two halves; `threads` slices of the destination for parallel GEMMs. */
  explicit DeviceMemory(double arena_bytes, int32_t threads = 1);

  /** The tiling of `dims` on this device: each operand tile fits a quarter of the arena and a thread's slice. */
  GemmTiling tiling(const graphs::GemmDims& dims) const;
  /**
   * Takes the operand tiles of one GEMM: where in the source half they begin, after the last GEMM's, so
   * that each op reads operands of its own (as a graph's ops read their own tensors), not ones the op
   * before left in the caches.
   */
  int64_t take_operands(const GemmTiling& tiling);
  /**
   * Runs tiles part, part + parts, ... of the GEMM (part < threads) over operands from `operands` (of
   * take_operands) and returns the sum of their results.
   */
  double gemm(const GemmTiling& tiling, int64_t operands = 0, int32_t part = 0, int32_t parts = 1);
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
  /** Puts the streaming and operand cursors back at the start (each run touches the same data). */
  void rewind() { stream_cursor_ = operand_cursor_ = 0; }

  int64_t arena_floats() const { return static_cast<int64_t>(src_.size()); }
  /** Where tile `index` of `tile_floats` floats starts in a region of `region_floats`: in turn, wrapping. */
  static int64_t tile_offset(int64_t index, int64_t tile_floats, int64_t region_floats);

 private:
  int32_t threads_;
  std::vector<float> src_, dst_;           // the arena's halves
  int64_t stream_cursor_ = 0, operand_cursor_ = 0;
};

/**
 * BLAS on `threads` threads while it lives, then as before. A replay runs with BlasThreads(1): a device's
 * products are split over its own threads_per_device threads, and a BLAS that spreads each product over
 * every core would make a device other threads than the plan gives it (with OpenBLAS's default of a
 * thread per core, two devices' products ran 2-5x slower side by side than alone on a 2-core machine,
 * while the CLI, whose policy library sets one thread at start-up, did not show it). Without OpenBLAS
 * (Eigen's own products, on the calling thread) it does nothing.
 */
class BlasThreads {
 public:
  explicit BlasThreads(int threads);
  ~BlasThreads();
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;
  /** Threads BLAS uses now (1 without OpenBLAS). */
  static int current();

 private:
  int before_;
};

/** The value DeviceMemory puts at position i of every buffer: small, exact in float, not constant. */
inline float pattern(int64_t i) { return static_cast<float>(i % 17) * 0.125f - 1.0f; }

}  // namespace placelab::sim::replay::cpu
