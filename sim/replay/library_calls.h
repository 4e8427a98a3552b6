// What the CUDA replay asks cuBLASLt and cuDNN to run for a compute op: the calls a framework makes for
// it. A product is one batched matrix product (its gradient: the two products of dA = dC B^T and
// dB = A^T dC); a convolution (an op of class conv) is cuDNN's forward pass (its gradient: backward
// data and backward filter), its geometry recovered from the op's implicit GEMM and bytes. Plain C++,
// built with or without CUDA, so that the mapping is tested everywhere. docs/replay.md, "The CUDA backend".
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "graphs/graph.h"
#include "sim/replay/plan.h"

namespace placelab::sim::replay {

/**
 * A 2-D convolution as cuDNN runs it: NCHW input of n x c x h x w, k filters of (c / groups) x r x r,
 * stride and padding alike in both dimensions, no dilation; output n x k x out_h() x out_w().
 */
struct ConvShape {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input: batch, channels (all groups), height, width
  int64_t k = 0;                        // output channels (all groups)
  int64_t r = 1;                        // kernel side
  int64_t stride = 1, pad = 0, groups = 1;
  int64_t out_h() const { return (h + 2 * pad - r) / stride + 1; }
  int64_t out_w() const { return (w + 2 * pad - r) / stride + 1; }
  int64_t input_elements() const { return n * c * h * w; }
  int64_t filter_elements() const { return k * (c / groups) * r * r; }
  int64_t output_elements() const { return n * k * out_h() * out_w(); }
  /** 2 n k out_h out_w (c / groups) r^2: the FLOPs of each pass (forward, backward data, backward filter). */
  double flops() const;
  bool operator==(const ConvShape&) const = default;
};

/**
 * The convolution whose implicit GEMM is `dims` (m = n out_h out_w, n = k / groups, k = c / groups r^2,
 * batch = groups) and whose input, filters and output (4-byte elements) come closest to `bytes`: the
 * kernel side r in {1, 3, 5, 7, 11} that divides dims.k as r^2, stride 1, 2 or 4, "same" padding (r / 2),
 * out_h = out_w the largest side whose square divides m (n the rest). With no bytes (<= 0): r = 1, stride 1.
 * Ties go to the smaller kernel, then the smaller stride. The shape's FLOPs are always dims.flops().
 */
ConvShape conv_shape(const graphs::GemmDims& dims, double bytes);

/** Which library call: a cuBLASLt product or one of cuDNN's convolution passes. */
enum class LibraryPass : uint8_t { matmul, conv_forward, conv_backward_data, conv_backward_filter };

/** Floats an operand's start is aligned to (256 bytes, as cuBLASLt's heuristics assume and cuDNN prefers). */
inline constexpr int64_t kOperandAlignFloats = 64;

/** `floats` rounded up to kOperandAlignFloats. */
inline int64_t aligned_floats(int64_t floats) { return (floats + kOperandAlignFloats - 1) / kOperandAlignFloats * kOperandAlignFloats; }

/**
 * One call to a library: its two operands are read from a region, the second aligned_floats(first) after
 * the first, and its output written to another region.
 */
struct LibraryCall {
  LibraryPass pass = LibraryPass::matmul;
  graphs::GemmDims gemm;  // matmul: batch products of (m x k) by (k x n), column-major, C = A B
  ConvShape conv;         // the convolution passes
  /** Floats of the operands in order: A, B (matmul); x, w (forward); dy, w (backward data); x, dy (backward filter). */
  std::array<int64_t, 2> input_floats() const;
  /** Floats of the region the operands take: aligned_floats of the first plus the second. */
  int64_t input_span() const { return aligned_floats(input_floats()[0]) + input_floats()[1]; }
  /** Floats written: C, y, dx or dw. */
  int64_t output_floats() const;
  double flops() const;
  bool operator==(const LibraryCall&) const = default;
};

/** The largest tensor a cuDNN call takes (its descriptors count in int): larger convolutions run as products. */
inline constexpr int64_t kMaxCudnnElements = INT32_MAX;

/**
 * The calls for compute op `op` (its replay_dims): a product, or with `convolutions` and an op of class
 * conv with known dims, cuDNN's passes. A gradient (type ending in "Grad", from expand_training, whose
 * dims are the forward's with the batch times the backward factor) with an even batch is what a framework's
 * backward runs: two products (dA, dB) or backward data and backward filter, each half the batch. The
 * calls' FLOPs add up to the dims' FLOPs.
 */
std::vector<LibraryCall> library_calls(const PlanOp& op, bool convolutions);

}  // namespace placelab::sim::replay
