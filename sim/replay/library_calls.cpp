// The library calls of a compute op (see library_calls.h).
#include "sim/replay/library_calls.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <string>

#include "graphs/op_class.h"

namespace placelab::sim::replay {

namespace {

bool is_gradient(const std::string& type) {
  if (type.size() < 4) return false;
  std::string tail = type.substr(type.size() - 4);
  std::transform(tail.begin(), tail.end(), tail.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return tail == "grad";
}

/** The largest side whose square divides m (the output's height and width; m / side^2 is the batch). */
int64_t square_side(int64_t m) {
  auto side = static_cast<int64_t>(std::sqrt(static_cast<double>(m)));
  while (side > 1 && (side * side > m || m % (side * side) != 0)) --side;
  return std::max<int64_t>(1, side);
}

/** Whether every tensor of `s` fits a cuDNN descriptor, counted in double (the int64 products may overflow). */
bool fits_cudnn(const graphs::GemmDims& dims, int64_t r, int64_t stride) {
  const double g = static_cast<double>(dims.batch), m = static_cast<double>(dims.m);
  const double c = static_cast<double>(dims.k / (r * r)), s2 = static_cast<double>(stride * stride);
  const double limit = static_cast<double>(kMaxCudnnElements);
  return m * s2 * c * g <= limit && static_cast<double>(dims.n) * g * static_cast<double>(dims.k) <= limit &&
         m * static_cast<double>(dims.n) * g <= limit;
}

}  // namespace

double ConvShape::flops() const {
  return 2.0 * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(out_h()) *
         static_cast<double>(out_w()) * static_cast<double>(c / groups) * static_cast<double>(r * r);
}

ConvShape conv_shape(const graphs::GemmDims& dims, double bytes) {
  const int64_t side = square_side(dims.m), batch = dims.m / (side * side);
  int64_t best_r = 1, best_stride = 1;
  if (bytes > 0) {
    double best = std::numeric_limits<double>::infinity();
    for (int64_t r : {1, 3, 5, 7, 11}) {
      if (dims.k % (r * r) != 0) continue;
      for (int64_t stride : {1, 2, 4}) {
        // 4-byte elements: the input (its side stride times the output's), the filters and the output.
        const double c = static_cast<double>(dims.k / (r * r)), g = static_cast<double>(dims.batch);
        const double elements = static_cast<double>(dims.m) * static_cast<double>(stride * stride) * c * g +
                                static_cast<double>(dims.n) * g * static_cast<double>(dims.k) +
                                static_cast<double>(dims.m) * static_cast<double>(dims.n) * g;
        const double miss = std::abs(std::log(4 * elements / bytes));
        if (miss < best - 1e-12) best = miss, best_r = r, best_stride = stride;
      }
    }
  }
  return {.n = batch, .c = dims.k / (best_r * best_r) * dims.batch, .h = side * best_stride, .w = side * best_stride,
          .k = dims.n * dims.batch, .r = best_r, .stride = best_stride, .pad = best_r / 2, .groups = dims.batch};
}

std::array<int64_t, 2> LibraryCall::input_floats() const {
  switch (pass) {
    case LibraryPass::matmul: return {gemm.batch * gemm.m * gemm.k, gemm.batch * gemm.k * gemm.n};
    case LibraryPass::conv_forward: return {conv.input_elements(), conv.filter_elements()};
    case LibraryPass::conv_backward_data: return {conv.output_elements(), conv.filter_elements()};
    case LibraryPass::conv_backward_filter: return {conv.input_elements(), conv.output_elements()};
  }
  return {0, 0};
}

int64_t LibraryCall::output_floats() const {
  switch (pass) {
    case LibraryPass::matmul: return gemm.batch * gemm.m * gemm.n;
    case LibraryPass::conv_forward: return conv.output_elements();
    case LibraryPass::conv_backward_data: return conv.input_elements();
    case LibraryPass::conv_backward_filter: return conv.filter_elements();
  }
  return 0;
}

double LibraryCall::flops() const { return pass == LibraryPass::matmul ? gemm.flops() : conv.flops(); }

std::vector<LibraryCall> library_calls(const PlanOp& op, bool convolutions) {
  const graphs::GemmDims dims = replay_dims(op);
  if (!dims.known()) return {};
  const bool gradient = is_gradient(op.type) && dims.batch % 2 == 0;
  const int64_t batch = gradient ? dims.batch / 2 : dims.batch;
  const bool conv = convolutions && op.gemm.known() &&
                    graphs::op_class_of_type(op.type) == graphs::OpClass::conv;
  if (conv) {
    const graphs::GemmDims one{.batch = batch, .m = dims.m, .n = dims.n, .k = dims.k};
    const ConvShape shape = conv_shape(one, gradient ? op.bytes / 2 : op.bytes);
    if (fits_cudnn(one, shape.r, shape.stride)) {
      if (!gradient) return {{.pass = LibraryPass::conv_forward, .conv = shape}};
      return {{.pass = LibraryPass::conv_backward_data, .conv = shape},
              {.pass = LibraryPass::conv_backward_filter, .conv = shape}};
    }
  }
  if (!gradient) return {{.pass = LibraryPass::matmul, .gemm = dims}};
  // dA (m x k) = dC (m x n) B^T (n x k), and dB (k x n) = A^T (k x m) dC (m x n).
  return {{.pass = LibraryPass::matmul, .gemm = {.batch = batch, .m = dims.m, .n = dims.k, .k = dims.n}},
          {.pass = LibraryPass::matmul, .gemm = {.batch = batch, .m = dims.k, .n = dims.n, .k = dims.m}}};
}

}  // namespace placelab::sim::replay
