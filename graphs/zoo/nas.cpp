// Cell-based models found by architecture search: NASNet-A, AmoebaNet-A and the ENAS-like random
// cells of the "cifar10" family. All share one cell builder, a port of the cell of TensorFlow's
// slim NASNet (nasnet_utils.NasNetABaseCell), which AmoebaNet's reference code also uses; cell specs
// are written in its notation. Drop-path (a training regulariser) is left out.
// Layer (block) indices: the stem convolution is block 0, each cell the next, the head the last.
#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include "graphs/zoo/families.h"
#include "graphs/zoo/net_builder.h"

namespace placelab::graphs::zoo {

namespace {

// N = batch, H/W = spatial size, C = channels (NHWC throughout).

/** A cell in slim's notation: two operations and two input states per node. */
struct CellSpec {
  std::vector<std::string> operations;   // "separable_5x5_2", "avg_pool_3x3", "none", "1x7_7x1", ...
  std::vector<int> hiddenstate_indices;  // inputs of node i: [2i] and [2i + 1]; 0 = cell input, 1 = previous
  std::vector<int> used_hiddenstates;    // per state: 1 if it is not concatenated into the output
};

// The published cells (tensorflow/models nasnet_utils.py, tensorflow/tpu amoeba_net/model_specs.py).
const CellSpec kNasNetNormal = {{"separable_5x5_2", "separable_3x3_2", "separable_5x5_2", "separable_3x3_2",
                                 "avg_pool_3x3", "none", "avg_pool_3x3", "avg_pool_3x3", "separable_3x3_2", "none"},
                                {0, 1, 1, 1, 0, 1, 1, 1, 0, 0},
                                {1, 0, 0, 0, 0, 0, 0}};
const CellSpec kNasNetReduction = {
    {"separable_5x5_2", "separable_7x7_2", "max_pool_3x3", "separable_7x7_2", "avg_pool_3x3", "separable_5x5_2", "none",
     "avg_pool_3x3", "separable_3x3_2", "max_pool_3x3"},
    {0, 1, 0, 1, 0, 1, 3, 2, 2, 0},
    {1, 1, 1, 0, 0, 0, 0}};
const CellSpec kAmoebaNormal = {{"avg_pool_3x3", "max_pool_3x3", "separable_3x3_2", "none", "none", "avg_pool_3x3",
                                 "separable_3x3_2", "separable_5x5_2", "avg_pool_3x3", "separable_3x3_2"},
                                {0, 0, 1, 1, 0, 1, 0, 2, 5, 0},
                                {1, 0, 1, 0, 0, 1, 0}};
const CellSpec kAmoebaReduction = {
    {"separable_3x3_2", "avg_pool_3x3", "max_pool_3x3", "separable_7x7_2", "max_pool_3x3", "max_pool_3x3",
     "separable_3x3_2", "1x7_7x1", "avg_pool_3x3", "separable_7x7_2"},
    {1, 0, 0, 2, 1, 0, 4, 0, 1, 0},
    {1, 1, 0, 0, 0, 0, 0}};

/** Kernel size in an operation name: "separable_5x5_2" -> 5. */
int64_t kernel_of(const std::string& op) { return op[op.rfind('x') - 1] - '0'; }

/** Reduces H and W by `stride` without dropping pixels: two shifted strided 1x1 paths, concatenated. */
Tensor factorized_reduction(NetBuilder& b, const Tensor& x, int64_t filters, int64_t stride) {
  if (stride == 1) return b.in_scope("path", [&] { return b.batch_norm(b.conv2d(x, filters, 1, 1)); });
  Tensor path1 =
      b.in_scope("path1", [&] { return b.conv2d(b.avg_pool(x, 1, stride, Padding::valid), filters / 2, 1, 1); });
  Tensor path2 = b.in_scope("path2", [&] {
    Tensor shifted = b.op({.type = "Pad", .out = x.shape}, {x});  // pad right/bottom, drop top/left
    return b.conv2d(b.avg_pool(shifted, 1, stride, Padding::valid), filters - filters / 2, 1, 1);
  });
  return b.batch_norm(b.concat({path1, path2}));
}

class CellBuilder {
 public:
  CellBuilder(NetBuilder& b, const CellSpec& spec) : b_(b), spec_(spec) {}

  /** One cell of `filters` channels on `net`, with `prev` the output of the cell before `net`'s. */
  Tensor operator()(const Tensor& net, const std::optional<Tensor>& prev, int64_t filters, int64_t stride) {
    filters_ = filters;
    std::vector<Tensor> states = {
        b_.in_scope("beginning", [&] { return b_.batch_norm(b_.conv2d(b_.relu(net), filters, 1, 1)); }),
        reduce_prev(prev.value_or(net), net)};
    const size_t nodes = spec_.operations.size() / 2;
    for (size_t i = 0; i < nodes; ++i) {
      auto s = b_.scope("comb_iter_{}", i);
      std::array<Tensor, 2> branch;
      for (size_t side = 0; side < 2; ++side) {
        const int input = spec_.hiddenstate_indices[2 * i + side];
        auto side_scope = b_.scope(side == 0 ? "left" : "right");
        branch[side] =
            apply(states[static_cast<size_t>(input)], spec_.operations[2 * i + side], input < 2 ? stride : 1);
      }
      states.push_back(b_.add(branch[0], branch[1]));
    }
    return combine(states);
  }

 private:
  // Matches the previous cell's output to this cell's input size and width.
  Tensor reduce_prev(const Tensor& prev, const Tensor& net) {
    if (prev.dim(1) != net.dim(1))
      return b_.in_scope("prev", [&] { return factorized_reduction(b_, b_.relu(prev), filters_, 2); });
    if (prev.dim(-1) != filters_)
      return b_.in_scope("prev_1x1", [&] { return b_.batch_norm(b_.conv2d(b_.relu(prev), filters_, 1, 1)); });
    return prev;
  }

  Tensor apply(Tensor x, const std::string& op, int64_t stride) {
    const bool widen = x.dim(-1) != filters_;
    if (op.starts_with("separable")) {
      const int repeats = op.back() - '0';
      for (int r = 1; r <= repeats; ++r, stride = 1) {
        auto s = b_.scope("separable_{}", r);
        x = b_.batch_norm(b_.separable_conv2d(b_.relu(x), filters_, kernel_of(op), stride));
      }
    } else if (op == "none") {
      if (stride > 1 || widen) x = b_.batch_norm(b_.conv2d(b_.relu(x), filters_, 1, 1, stride));
    } else if (op.find("pool") != std::string::npos) {
      x = op.starts_with("avg") ? b_.avg_pool(x, kernel_of(op), stride) : b_.max_pool(x, kernel_of(op), stride);
      if (widen) x = b_.batch_norm(b_.conv2d(x, filters_, 1, 1));
    } else if (op == "1x7_7x1") {
      // AmoebaNet's bottleneck: 1x1 to F/4, 1x7, 7x1, 1x1 back to F, each after a Relu and before a
      // BatchNorm. (The reference strides the 1x7 along W and the 7x1 along H; both stride here.)
      const int64_t reduced = std::max<int64_t>(1, filters_ / 4);
      x = b_.batch_norm(b_.conv2d(b_.relu(x), reduced, 1, 1));
      x = b_.batch_norm(b_.conv2d(b_.relu(x), reduced, 1, 7, stride));
      x = b_.batch_norm(b_.conv2d(b_.relu(x), reduced, 7, 1));
      x = b_.batch_norm(b_.conv2d(b_.relu(x), filters_, 1, 1));
    } else {
      throw std::logic_error("zoo: unknown cell operation " + op);
    }
    return x;
  }

  // Concatenates the states no node used, reducing those of another size first.
  Tensor combine(std::vector<Tensor>& states) {
    auto s = b_.scope("cell_output");
    const Tensor& last = states.back();
    const int64_t height = last.dim(1), channels = last.dim(-1);
    std::vector<Tensor> unused;
    for (size_t i = 0; i < states.size(); ++i) {
      if (spec_.used_hiddenstates[i]) continue;
      if (states[i].dim(1) != height || states[i].dim(-1) != channels) {
        auto rs = b_.scope("reduction_{}", i);
        states[i] = factorized_reduction(b_, states[i], channels, states[i].dim(1) != height ? 2 : 1);
      }
      unused.push_back(states[i]);
    }
    return b_.concat(unused);
  }

  NetBuilder& b_;
  const CellSpec& spec_;
  int64_t filters_ = 0;
};

struct NasNetwork {
  CellSpec normal, reduction;
  int64_t cells_per_stage, filters, stem_filters;
  bool imagenet_stem;               // conv 3x3/2 + two reduction cells, else one conv 3x3
  bool skip_reduction_layer_input;  // slim's flag: a normal cell after a reduction reads the cell before it
};

Graph build_nas_network(const Args& args, const NasNetwork& net) {
  NetBuilder b(std::string(args.model()));
  const int64_t size = args.integer("image_size");
  CellBuilder normal(b, net.normal), reduction(b, net.reduction);
  int32_t layer = 0;
  b.set_layer(layer);
  Tensor x = b.input("images", {args.integer("batch"), size, size, 3});
  x = b.in_scope("stem", [&] {
    return net.imagenet_stem ? b.batch_norm(b.conv2d(x, net.stem_filters, 3, 3, 2, Padding::valid))
                             : b.batch_norm(b.conv2d(x, net.stem_filters, 3, 3));
  });
  std::vector<std::optional<Tensor>> outputs = {std::nullopt, x};
  auto run_cell = [&](CellBuilder& cell, std::string_view name, const std::optional<Tensor>& prev, double scaling,
                      int64_t stride) {
    b.set_layer(++layer);
    auto s = b.scope(name);
    x = cell(x, prev, static_cast<int64_t>(static_cast<double>(net.filters) * scaling), stride);
    outputs.emplace_back(x);
  };
  if (net.imagenet_stem) {
    for (int i = 0; i < 2; ++i)
      run_cell(reduction, fmt::format("cell_stem_{}", i), outputs[outputs.size() - 2], 0.25 * (1 << i), 2);
  }
  // Reductions before cells N and 2N of 3N (slim's calc_reduction_layers with two reductions).
  double scaling = 1;
  for (int64_t i = 0; i < 3 * net.cells_per_stage; ++i) {
    std::optional<Tensor> prev = outputs[outputs.size() - 2];
    if (i > 0 && i % net.cells_per_stage == 0) {
      scaling *= 2;
      run_cell(reduction, fmt::format("reduction_cell_{}", i / net.cells_per_stage - 1), outputs[outputs.size() - 2],
               scaling, 2);
      if (!net.skip_reduction_layer_input) prev = outputs[outputs.size() - 2];
    }
    run_cell(normal, fmt::format("cell_{}", i), prev, scaling, 1);
  }
  b.set_layer(++layer);
  b.in_scope("head", [&] { return b.classifier(b.relu(x), args.integer("classes")); });
  return std::move(b).build();
}

/** An ENAS micro-search-space cell: each node adds two ops of two earlier states (Pham et al. 2018). */
CellSpec random_enas_cell(Rng& rng, int nodes) {
  static const std::vector<std::string> kOps = {"none", "separable_3x3_2", "separable_5x5_2", "avg_pool_3x3",
                                                "max_pool_3x3"};
  CellSpec spec;
  spec.used_hiddenstates.assign(static_cast<size_t>(nodes) + 2, 0);
  spec.used_hiddenstates[0] = spec.used_hiddenstates[1] = 1;  // the output concatenates loose-end nodes only
  for (int i = 0; i < nodes; ++i) {
    for (int side = 0; side < 2; ++side) {
      const auto input = static_cast<int>(rng.uniform_int(0, i + 1));
      spec.hiddenstate_indices.push_back(input);
      spec.operations.push_back(rng.pick(kOps));
      spec.used_hiddenstates[static_cast<size_t>(input)] = 1;
    }
  }
  return spec;
}

}  // namespace

Graph build_nasnet(const Args& args) {
  return build_nas_network(args, {kNasNetNormal, kNasNetReduction, args.integer("cells"), args.integer("filters"),
                                  args.integer("stem_filters"), true, true});
}

Graph build_amoebanet(const Args& args) {
  return build_nas_network(args, {kAmoebaNormal, kAmoebaReduction, args.integer("cells"), args.integer("filters"),
                                  args.integer("stem_filters"), true, false});
}

Graph build_cifar10(const Args& args) {
  Rng rng(static_cast<uint64_t>(args.integer("seed")));
  const int nodes = args.int32("nodes");
  CellSpec normal = random_enas_cell(rng, nodes);
  CellSpec reduction = random_enas_cell(rng, nodes);
  const int64_t filters = args.integer("filters");
  return build_nas_network(
      args, {std::move(normal), std::move(reduction), args.integer("cells"), filters, 3 * filters, false, false});
}

}  // namespace placelab::graphs::zoo
