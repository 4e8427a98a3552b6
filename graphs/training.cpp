// expand_training: appends the backward and update ops of one training step to a forward graph.
#include "graphs/training.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "graphs/error.h"

namespace placelab::graphs {

namespace {

void check_factor(double value, std::string_view name) {
  if (!std::isfinite(value) || value < 0)
    throw Error(fmt::format("training options: {} is {} (must be a finite number >= 0)", name, value));
}

}  // namespace

Graph expand_training(const Graph& forward, const TrainingOptions& options) {
  check_factor(options.optimizer_state_factor, "optimizer_state_factor");
  check_factor(options.backward_flops_factor, "backward_flops_factor");
  check_factor(options.update_flops_per_param_byte, "update_flops_per_param_byte");
  const OpId n = forward.num_ops();
  int64_t next_class = 0;  // int64: the largest class may be INT32_MAX
  for (OpId f = 0; f < n; ++f) {
    if (forward.phase(f) != Phase::forward)
      throw Error(fmt::format("graph \"{}\": op {} (\"{}\") is a {} op; expand_training needs a forward-only graph",
                              forward.name(), f, forward.op_name(f), phase_name(forward.phase(f))));
    next_class = std::max(next_class, int64_t{forward.colocation(f)} + 1);
  }

  GraphBuilder builder(forward.name() + "_training");
  // Forward ops keep their ids; an op without a class gets a fresh one, shared with its backward/update.
  std::vector<int32_t> class_of(n);
  for (OpId f = 0; f < n; ++f) {
    OpSpec spec = forward.op_spec(f);
    if (spec.colocation == kNoClass) {
      if (next_class > INT32_MAX)
        throw Error(fmt::format("graph \"{}\": op \"{}\" needs a new colocation class, but class {} is already the "
                                "largest possible; number the classes from 0",
                                forward.name(), forward.op_name(f), INT32_MAX));
      spec.colocation = static_cast<int32_t>(next_class++);
    }
    class_of[f] = spec.colocation;
    builder.add_op(std::move(spec));
  }
  const double bwd = options.backward_flops_factor;
  for (OpId f = 0; f < n; ++f) {
    // Gradients w.r.t. the op's inputs (one per in-edge) and w.r.t. its weights.
    double grad_bytes = forward.param_bytes(f);
    for (EdgeId e : forward.in_edges(f)) grad_bytes += forward.edge_bytes(e);
    // The gradients of a matrix product are products of the same three matrices (dA = dC B^T, dB = A^T dC):
    // as many products of the forward's shape as the backward factor says, when that is a whole number.
    GemmDims grad_gemm;
    if (forward.gemm(f).known() && bwd == std::round(bwd) && bwd >= 1) {
      grad_gemm = forward.gemm(f);
      grad_gemm.batch *= static_cast<int64_t>(bwd);
      if (grad_gemm.batch > kMaxGemmDim) grad_gemm = {};
    }
    builder.add_op(OpSpec{.name = forward.op_name(f) + "/grad",
                          .type = forward.op_type(f) + "Grad",
                          .phase = Phase::backward,
                          .flops = bwd * forward.flops(f),
                          .bytes_read = bwd * forward.bytes_read(f),
                          .bytes_written = bwd * forward.bytes_written(f),
                          .output_bytes = grad_bytes,
                          .param_bytes = 0,
                          .temp_bytes = forward.temp_bytes(f),
                          .colocation = class_of[f],
                          .layer = forward.layer(f),
                          .pinned_kind = forward.pinned_kind(f),
                          .gemm = grad_gemm,
                          .measured_s = {}});
  }
  for (EdgeId e = 0; e < forward.num_edges(); ++e) builder.add_edge(forward.edge_spec(e));
  for (EdgeId e = 0; e < forward.num_edges(); ++e)
    builder.add_edge(n + forward.edge_dst(e), n + forward.edge_src(e), forward.edge_bytes(e));
  for (OpId f = 0; f < n; ++f) builder.add_edge(f, n + f, forward.output_bytes(f));
  for (OpId f = 0; f < n; ++f) {
    const double params = forward.param_bytes(f);
    if (params <= 0) continue;
    const double state = options.optimizer_state_factor * params;
    OpId update = builder.add_op(OpSpec{.name = forward.op_name(f) + "/update",
                                        .type = forward.op_type(f) + "Update",
                                        .phase = Phase::update,
                                        .flops = options.update_flops_per_param_byte * params,
                                        .bytes_read = 2 * params + state,  // weights, gradient, state
                                        .bytes_written = params + state,   // weights, state
                                        .output_bytes = 0,
                                        .param_bytes = state,
                                        .temp_bytes = 0,
                                        .colocation = class_of[f],
                                        .layer = forward.layer(f),
                                        .pinned_kind = forward.pinned_kind(f),
                                        .measured_s = {}});
    builder.add_edge(n + f, update, params);
  }
  try {
    return std::move(builder).build();
  } catch (const Error& e) {
    throw Error(fmt::format("expand_training of graph \"{}\": {}", forward.name(), e.what()));
  }
}

}  // namespace placelab::graphs
