#include <catch2/catch.hpp>

#include "graphs/op_class.h"

using namespace placelab;

TEST_CASE("graphs::op_class_of_type: products, convolutions, maps, reductions and movement from type names", "[graphs]") {
  using graphs::OpClass;
  for (const char* t : {"MatMul", "MatMulGrad", "BatchMatMul", "Linear", "linear", "addmm", "bmm", "mm",
                        "MultiheadAttention", "LSTMCell"})
    CHECK(graphs::op_class_of_type(t) == OpClass::gemm);
  for (const char* t : {"Conv2D", "Conv2DGrad", "conv2d", "Conv1d", "DepthwiseConv2dNative", "ConvTranspose2d"})
    CHECK(graphs::op_class_of_type(t) == OpClass::conv);
  for (const char* t : {"Relu", "ReluGrad", "Add", "BiasAdd", "Sigmoid", "gelu", "mul", "Conv2DUpdate", "MatMulUpdate",
                        "maximum"})
    CHECK(graphs::op_class_of_type(t) == OpClass::elementwise);
  for (const char* t : {"Softmax", "SoftmaxGrad", "BatchNorm", "LayerNorm", "Mean", "MaxPool", "AvgPool", "sum",
                        "CrossEntropyLoss", "adaptive_avg_pool2d"})
    CHECK(graphs::op_class_of_type(t) == OpClass::reduction);
  for (const char* t : {"Concat", "SplitGrad", "Variable", "Placeholder", "Const", "Embedding", "flatten", "getitem",
                        "Pad", "RelShift", "Gather", "cat"})
    CHECK(graphs::op_class_of_type(t) == OpClass::movement);
  for (graphs::OpClass c : graphs::kOpClasses) CHECK(graphs::parse_op_class(graphs::op_class_name(c)) == c);
  CHECK_FALSE(graphs::parse_op_class("matmul"));
}
