// Seeded layered random DAGs for generalisation and scaling studies. Ops sit in layers of `width`;
// each op past the first layer reads one op of the layer before it (so the depth is the number of
// layers) and up to fan_in - 1 more from at most max_skip layers back. Costs are log-uniform in their
// ranges. Layer (block) index = the op's layer.
#include <algorithm>

#include "graphs/zoo/families.h"
#include "graphs/zoo/net_builder.h"

namespace placelab::graphs::zoo {

Graph build_random_dag(const Args& args) {
  const int64_t ops = args.integer("ops"), width = args.integer("width"), fan_in = args.integer("fan_in");
  const int64_t max_skip = args.integer("max_skip");
  const double min_flops = args.real("min_flops"), max_flops = args.real("max_flops");
  const double min_bytes = args.real("min_bytes"), max_bytes = args.real("max_bytes");
  const double param_prob = args.real("param_prob");
  if (min_flops > max_flops) args.fail(fmt::format("min_flops ({}) exceeds max_flops ({})", min_flops, max_flops));
  if (min_bytes > max_bytes) args.fail(fmt::format("min_bytes ({}) exceeds max_bytes ({})", min_bytes, max_bytes));

  Rng rng(static_cast<uint64_t>(args.integer("seed")));
  NetBuilder b("random_dag");
  std::vector<Tensor> tensors;
  tensors.reserve(static_cast<size_t>(ops));
  std::vector<Tensor> inputs;
  for (int64_t id = 0; id < ops; ++id) {
    const int64_t layer = id / width;
    inputs.clear();
    if (layer > 0) {
      auto random_op_of_layer = [&](int64_t l) {
        const int64_t first = l * width;
        return tensors[static_cast<size_t>(rng.uniform_int(first, std::min(first + width, ops) - 1))];
      };
      inputs.push_back(random_op_of_layer(layer - 1));
      const int64_t extra = rng.uniform_int(0, fan_in - 1);
      for (int64_t k = 0; k < extra; ++k) {
        Tensor in = random_op_of_layer(rng.uniform_int(std::max<int64_t>(0, layer - max_skip), layer - 1));
        if (std::none_of(inputs.begin(), inputs.end(), [&](const Tensor& t) { return t.op == in.op; }))
          inputs.push_back(in);
      }
    }
    const double flops = rng.log_uniform(min_flops, max_flops);
    const double out_bytes = rng.log_uniform(min_bytes, max_bytes);
    const bool has_params = rng.uniform() < param_prob;
    const double param_bytes = has_params ? rng.log_uniform(min_bytes, max_bytes) : 0;
    const std::string_view type = inputs.empty() ? "Input" : has_params ? "MatMul" : inputs.size() > 1 ? "Add" : "Relu";
    b.set_layer(static_cast<int32_t>(layer));
    // Tensors are float32, so sizes round to whole elements (at least one).
    const auto elements = std::max<int64_t>(1, std::llround(out_bytes / kFloatBytes));
    const std::string name = fmt::format("layer{}/op{}", layer, id - layer * width);
    tensors.push_back(b.op({.type = type,
                            .name = name,
                            .out = {elements},
                            .flops = flops,
                            .param_elements = std::round(param_bytes / kFloatBytes)},
                           inputs));
  }
  return std::move(b).build();
}

}  // namespace placelab::graphs::zoo
