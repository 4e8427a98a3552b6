// What kind of work an op does, for cost models whose efficiency depends on it (calibrated efficiency
// curves, docs/simulator.md) and for the replay's kernels: a dense product, a convolution, an
// elementwise map, a reduction, or data movement. Inferred from the op's type name, so that zoo graphs,
// torch.fx imports and files written by hand all get one without saying so.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace placelab::graphs {

enum class OpClass : uint8_t {
  gemm,         // matrix products: MatMul, Linear, BatchMatMul, attention, recurrent cells
  conv,         // convolutions, depthwise ones included
  elementwise,  // one output element per input element: activations, adds, biases, optimizer updates
  reduction,    // sums over an axis: softmax, norms, means, pooling, losses
  movement,     // data movement only: concat, split, reshape, gather, pad, copies, inputs and constants
};

inline constexpr std::array<OpClass, 5> kOpClasses = {OpClass::gemm, OpClass::conv, OpClass::elementwise,
                                                      OpClass::reduction, OpClass::movement};

/** "gemm", "conv", "elementwise", "reduction" or "movement". */
std::string_view op_class_name(OpClass c);

/** The class named `name`, or nothing. */
std::optional<OpClass> parse_op_class(std::string_view name);

/**
 * The class of an op of type `type`: TensorFlow-style names (Conv2D, MatMul, BiasAdd), torch.fx ones
 * (conv2d, Linear, relu, add) and the training expansion's suffixes (MatMulGrad is a product too,
 * *Update is an elementwise optimizer step). Case-insensitive; unknown types are elementwise.
 */
OpClass op_class_of_type(std::string_view type);

/** Whether ops of class `c` are bound by arithmetic (their cost grows with FLOPs) rather than by memory. */
inline bool is_compute_class(OpClass c) { return c == OpClass::gemm || c == OpClass::conv; }

}  // namespace placelab::graphs
