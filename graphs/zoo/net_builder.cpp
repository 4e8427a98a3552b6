// Shape and cost arithmetic of the zoo's layer helpers; see net_builder.h for the conventions.
#include "graphs/zoo/net_builder.h"

#include <algorithm>
#include <stdexcept>

namespace placelab::graphs::zoo {

namespace {

// Shapes come from the generators' own arithmetic, so a mismatch is a bug in a generator, not
// bad user input: it throws std::logic_error rather than placelab::Error.
void require(bool ok, std::string_view what) {
  if (!ok) throw std::logic_error(fmt::format("zoo: {}", what));
}

size_t axis_index(const Shape& shape, int axis) {
  const auto rank = static_cast<int>(shape.size());
  const int a = axis < 0 ? axis + rank : axis;
  require(a >= 0 && a < rank, "axis out of range");
  return static_cast<size_t>(a);
}

double product(const Shape& shape) {
  double n = 1;
  for (int64_t d : shape) n *= static_cast<double>(d);
  return n;
}

}  // namespace

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Tensor::dim(int axis) const { return shape[axis_index(shape, axis)]; }

int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, Padding padding, int64_t dilation) {
  const int64_t span = dilation * (kernel - 1) + 1;
  const int64_t out = padding == Padding::same ? (in + stride - 1) / stride : (in - span) / stride + 1;
  require(out >= 1, fmt::format("input of size {} too small for a kernel of {} with stride {}", in, span, stride));
  return out;
}

NetBuilder::NetBuilder(std::string graph_name) : graph_(std::move(graph_name)) {}

NetBuilder::Scope NetBuilder::scope(std::string_view name) {
  prefix_sizes_.push_back(prefix_.size());
  prefix_.append(name);
  prefix_.push_back('/');
  return Scope(*this);
}

void NetBuilder::pop_scope() {
  prefix_.resize(prefix_sizes_.back());
  prefix_sizes_.pop_back();
}

std::string NetBuilder::unique_name(std::string_view name) {
  std::string full = prefix_;
  full.append(name);
  return unique_full_name(std::move(full));
}

std::string NetBuilder::unique_full_name(std::string full) {
  // TensorFlow's rule: a repeated name gets the suffix _1, _2, ...
  auto [it, fresh] = name_uses_.try_emplace(full, 0);
  if (fresh) return full;
  for (;;) {
    std::string candidate = fmt::format("{}_{}", full, ++it->second);
    if (name_uses_.try_emplace(candidate, 0).second) return candidate;
  }
}

NetBuilder::Repeat::Repeat(NetBuilder& b, int64_t r, int64_t count) : b_(&b) {
  require(b.repeat_ < 0 && r >= 0 && r < count, "repeat out of range or nested");
  if (count == 1) return;
  b.repeat_prefix_at_ = b.prefix_.size();
  scope_.emplace(b.scope(fmt::format("mb{}", r)));
  b.repeat_prefix_size_ = b.prefix_.size() - b.repeat_prefix_at_;
  b.repeat_ = r;
  if (b.weight_cursor_.size() < static_cast<size_t>(count)) b.weight_cursor_.resize(static_cast<size_t>(count), 0);
}

NetBuilder::Repeat::~Repeat() { b_->repeat_ = -1; }

Tensor NetBuilder::op_with_shared_weights(const OpDef& def, std::span<const Tensor> inputs) {
  size_t& cursor = weight_cursor_[static_cast<size_t>(repeat_)];
  if (repeat_ == 0) {
    std::string name = prefix_;
    name.erase(repeat_prefix_at_, repeat_prefix_size_);
    name += fmt::format("{}/weights", def.name.empty() ? def.type : def.name);
    const double bytes = kFloatBytes * def.param_elements;
    OpId w = graph_.add_op({.name = unique_full_name(std::move(name)), .type = "Variable",
                            .param_bytes = bytes, .layer = layer_});
    resident_.emplace(w, bytes);
    shared_weights_.push_back({w, {static_cast<int64_t>(def.param_elements)}});
  }
  require(cursor < shared_weights_.size() &&
              static_cast<double>(shared_weights_[cursor].elements()) == def.param_elements,
          "a repeat requests other weights than repeat 0");
  std::vector<Tensor> reads(inputs.begin(), inputs.end());
  reads.push_back(shared_weights_[cursor++]);
  OpDef reader = def;
  reader.param_elements = 0;
  // The default bytes read, inputs plus parameters, now counts the weights among the inputs.
  return op(reader, reads);
}

Tensor NetBuilder::op(const OpDef& def, std::span<const Tensor> inputs) {
  if (repeat_ >= 0 && def.param_elements > 0) return op_with_shared_weights(def, inputs);
  // One edge per producer: a consumer reading several views of one tensor gets their bytes merged.
  edge_scratch_.clear();
  double input_bytes = 0;
  for (const Tensor& in : inputs) {
    require(in.op >= 0, fmt::format("{} reads an unset tensor", def.type));
    input_bytes += in.bytes();
    auto it = std::find_if(edge_scratch_.begin(), edge_scratch_.end(), [&](auto& e) { return e.first == in.op; });
    if (it == edge_scratch_.end())
      edge_scratch_.emplace_back(in.op, in.bytes());
    else
      it->second += in.bytes();
  }
  const double out_bytes = kFloatBytes * product(def.out);
  const double param_bytes = kFloatBytes * def.param_elements;
  OpId id = graph_.add_op({.name = unique_name(def.name.empty() ? def.type : def.name),
                           .type = std::string(def.type),
                           .flops = def.flops,
                           .bytes_read = def.bytes_read >= 0 ? def.bytes_read : input_bytes + param_bytes,
                           .bytes_written = out_bytes,
                           .output_bytes = out_bytes,
                           .param_bytes = param_bytes,
                           .layer = layer_,
                           .gemm = def.gemm});
  // Reading one tensor twice moves it once.
  for (auto [src, bytes] : edge_scratch_) {
    auto weights = resident_.find(src);
    const double readable = weights != resident_.end() ? weights->second : graph_.op(src).output_bytes;
    graph_.add_edge(src, id, std::min(bytes, readable));
  }
  return {id, def.out};
}

Tensor NetBuilder::input(std::string_view name, Shape shape) {
  return op({.type = "Placeholder", .name = name, .out = std::move(shape)}, {});
}

Tensor NetBuilder::constant(std::string_view name, Shape shape) {
  return op({.type = "Const", .name = name, .out = std::move(shape)}, {});
}

Tensor NetBuilder::variable(std::string_view name, Shape shape) {
  const double n = product(shape);
  return op({.type = "Variable", .name = name, .out = std::move(shape), .param_elements = n, .bytes_read = 0}, {});
}

Tensor NetBuilder::view(const Tensor& x, Shape shape) {
  Tensor v{x.op, std::move(shape)};
  require(v.elements() <= x.elements(), "a view larger than its tensor");
  return v;
}

Tensor NetBuilder::conv2d(const Tensor& x, int64_t filters, int64_t kernel_h, int64_t kernel_w, int64_t stride,
                          Padding padding, int64_t dilation, bool bias) {
  require(x.shape.size() == 4, "conv2d needs an NHWC input");
  const int64_t n = x.shape[0], c = x.shape[3];
  const int64_t h = conv_output_size(x.shape[1], kernel_h, stride, padding, dilation);
  const int64_t w = conv_output_size(x.shape[2], kernel_w, stride, padding, dilation);
  const double outputs = static_cast<double>(n * h * w * filters);
  const double weights = static_cast<double>(kernel_h * kernel_w * c * filters);
  return op({.type = "Conv2D",
             .out = {n, h, w, filters},
             .flops = 2 * outputs * static_cast<double>(kernel_h * kernel_w * c) + (bias ? outputs : 0),
             .param_elements = weights + (bias ? static_cast<double>(filters) : 0),
             .gemm = {.batch = 1, .m = n * h * w, .n = filters, .k = kernel_h * kernel_w * c}},
            {x});
}

Tensor NetBuilder::depthwise_conv2d(const Tensor& x, int64_t kernel, int64_t stride, Padding padding) {
  require(x.shape.size() == 4, "depthwise_conv2d needs an NHWC input");
  const int64_t n = x.shape[0], c = x.shape[3];
  const int64_t h = conv_output_size(x.shape[1], kernel, stride, padding);
  const int64_t w = conv_output_size(x.shape[2], kernel, stride, padding);
  const double outputs = static_cast<double>(n * h * w * c);
  return op({.type = "DepthwiseConv2dNative",
             .out = {n, h, w, c},
             .flops = 2 * outputs * static_cast<double>(kernel * kernel),
             // No gemm dims: libraries run it as a direct, memory-bound kernel, not as products of one column.
             .param_elements = static_cast<double>(kernel * kernel * c)},
            {x});
}

Tensor NetBuilder::separable_conv2d(const Tensor& x, int64_t filters, int64_t kernel, int64_t stride) {
  Tensor depthwise = depthwise_conv2d(x, kernel, stride);
  return conv2d(depthwise, filters, 1, 1);
}

Tensor NetBuilder::batch_norm(const Tensor& x) {
  // gamma, beta, moving mean and moving variance are all resident.
  const auto channels = static_cast<double>(x.dim(-1));
  return op({.type = "BatchNorm",
             .out = x.shape,
             .flops = cost::kBatchNorm * static_cast<double>(x.elements()),
             .param_elements = 4 * channels},
            {x});
}

Tensor NetBuilder::conv_bn_relu(const Tensor& x, int64_t filters, int64_t kernel_h, int64_t kernel_w, int64_t stride,
                                Padding padding) {
  return relu(batch_norm(conv2d(x, filters, kernel_h, kernel_w, stride, padding)));
}

Tensor NetBuilder::pool(std::string_view type, const Tensor& x, int64_t kernel, int64_t stride, Padding padding) {
  require(x.shape.size() == 4, "pools need an NHWC input");
  const int64_t n = x.shape[0], c = x.shape[3];
  const int64_t h = conv_output_size(x.shape[1], kernel, stride, padding);
  const int64_t w = conv_output_size(x.shape[2], kernel, stride, padding);
  return op({.type = type, .out = {n, h, w, c}, .flops = static_cast<double>(n * h * w * c * kernel * kernel)}, {x});
}

Tensor NetBuilder::max_pool(const Tensor& x, int64_t kernel, int64_t stride, Padding padding) {
  return pool("MaxPool", x, kernel, stride, padding);
}

Tensor NetBuilder::avg_pool(const Tensor& x, int64_t kernel, int64_t stride, Padding padding) {
  return pool("AvgPool", x, kernel, stride, padding);
}

Tensor NetBuilder::global_avg_pool(const Tensor& x) {
  require(x.shape.size() == 4, "global_avg_pool needs an NHWC input");
  return op({.type = "Mean", .out = {x.shape[0], x.shape[3]}, .flops = static_cast<double>(x.elements())}, {x});
}

Tensor NetBuilder::unary(std::string_view type, const Tensor& x, double flops_per_element) {
  return op({.type = type, .out = x.shape, .flops = flops_per_element * static_cast<double>(x.elements())}, {x});
}

Tensor NetBuilder::binary(std::string_view type, const Tensor& a, const Tensor& b) {
  const Shape& out = a.elements() >= b.elements() ? a.shape : b.shape;
  return op({.type = type, .out = out, .flops = cost::kElementwise * product(out)}, {a, b});
}

Tensor NetBuilder::add_n(std::span<const Tensor> xs) {
  require(!xs.empty(), "add_n of nothing");
  const double n = static_cast<double>(xs.front().elements());
  return op({.type = "AddN", .out = xs.front().shape, .flops = n * static_cast<double>(xs.size() - 1)}, xs);
}

Tensor NetBuilder::concat(std::span<const Tensor> xs, int axis) {
  require(!xs.empty(), "concat of nothing");
  Shape out = xs.front().shape;
  const size_t a = axis_index(out, axis);
  out[a] = 0;
  for (const Tensor& x : xs) {
    require(x.shape.size() == out.size(), "concat of tensors of different rank");
    out[a] += x.shape[a];
  }
  return op({.type = "Concat", .out = std::move(out)}, xs);
}

Tensor NetBuilder::stack(std::span<const Tensor> xs) {
  require(!xs.empty(), "stack of nothing");
  Shape out = xs.front().shape;
  out.insert(out.begin() + 1, static_cast<int64_t>(xs.size()));
  return op({.type = "Pack", .out = std::move(out)}, xs);
}

std::vector<Tensor> NetBuilder::split(const Tensor& x, int64_t parts, int axis) {
  const size_t a = axis_index(x.shape, axis);
  require(parts > 0 && x.shape[a] % parts == 0, "split into unequal parts");
  Tensor whole = op({.type = "Split", .out = x.shape}, {x});
  Shape part = x.shape;
  part[a] /= parts;
  return std::vector<Tensor>(static_cast<size_t>(parts), view(whole, part));
}

Tensor NetBuilder::matmul(const Tensor& x, int64_t units) {
  const int64_t k = x.dim(-1);
  Shape out = x.shape;
  out.back() = units;
  const double rows = static_cast<double>(x.elements() / k);
  return op({.type = "MatMul",
             .out = std::move(out),
             .flops = 2 * rows * static_cast<double>(k * units),
             .param_elements = static_cast<double>(k * units),
             .gemm = {.batch = 1, .m = x.elements() / k, .n = units, .k = k}},
            {x});
}

Tensor NetBuilder::matmul(const Tensor& x, const Tensor& w) {
  require(w.shape.size() == 2 && w.shape[0] == x.dim(-1), "matmul with a weight of the wrong shape");
  Shape out = x.shape;
  out.back() = w.shape[1];
  const double rows = static_cast<double>(x.elements() / x.dim(-1));
  return op({.type = "MatMul",
             .out = std::move(out),
             .flops = 2 * rows * static_cast<double>(w.elements()),
             .gemm = {.batch = 1, .m = x.elements() / x.dim(-1), .n = w.shape[1], .k = w.shape[0]}},
            {x, w});
}

Tensor NetBuilder::bias_add(const Tensor& x) {
  return op({.type = "BiasAdd",
             .out = x.shape,
             .flops = static_cast<double>(x.elements()),
             .param_elements = static_cast<double>(x.dim(-1))},
            {x});
}

Tensor NetBuilder::dense(const Tensor& x, int64_t units, bool bias) {
  Tensor y = matmul(x, units);
  return bias ? bias_add(y) : y;
}

Tensor NetBuilder::batch_matmul(const Tensor& a, const Tensor& b, bool transpose_b) {
  require(a.shape.size() >= 2 && a.shape.size() == b.shape.size(), "batch_matmul of different ranks");
  const int64_t m = a.dim(-2), k = a.dim(-1);
  const int64_t kb = transpose_b ? b.dim(-1) : b.dim(-2);
  const int64_t n = transpose_b ? b.dim(-2) : b.dim(-1);
  require(k == kb, "batch_matmul with mismatched inner dimensions");
  Shape out = a.shape;
  out[out.size() - 1] = n;
  const double batches = product(out) / static_cast<double>(m * n);
  return op({.type = "BatchMatMul",
             .out = std::move(out),
             .flops = 2 * batches * static_cast<double>(m * n * k),
             .gemm = {.batch = static_cast<int64_t>(batches), .m = m, .n = n, .k = k}},
            {a, b});
}

Tensor NetBuilder::layer_norm(const Tensor& x) {
  return op({.type = "LayerNorm",
             .out = x.shape,
             .flops = cost::kLayerNorm * static_cast<double>(x.elements()),
             .param_elements = 2 * static_cast<double>(x.dim(-1))},
            {x});
}

Tensor NetBuilder::embedding(const Tensor& ids, int64_t vocab, int64_t dim) {
  Shape out = ids.shape;
  out.push_back(dim);
  // A gather reads only the rows it returns, not the whole table.
  const double out_bytes = kFloatBytes * product(out);
  return op({.type = "Embedding",
             .out = std::move(out),
             .param_elements = static_cast<double>(vocab * dim),
             .bytes_read = ids.bytes() + out_bytes},
            {ids});
}

Tensor NetBuilder::classifier(const Tensor& features, int64_t classes) {
  Tensor x = features.shape.size() == 4 ? global_avg_pool(features) : features;
  return softmax(dense(x, classes));
}

LstmWeights NetBuilder::lstm_weights(int64_t input, int64_t hidden) {
  return {variable("kernel", {input + hidden, 4 * hidden}), variable("bias", {4 * hidden})};
}

LstmState NetBuilder::lstm_cell(std::span<const Tensor> inputs, const LstmState& state, const LstmWeights& weights) {
  std::vector<Tensor> parts(inputs.begin(), inputs.end());
  parts.push_back(state.h);
  Tensor gates = matmul(concat(parts), weights.kernel);
  gates = op({.type = "BiasAdd", .out = gates.shape, .flops = static_cast<double>(gates.elements())},
             {gates, weights.bias});
  std::vector<Tensor> ijfo = split(gates, 4);
  Tensor i = in_scope("input_gate", [&] { return sigmoid(ijfo[0]); });
  Tensor j = in_scope("candidate", [&] { return tanh(ijfo[1]); });
  Tensor f = in_scope("forget_gate", [&] { return sigmoid(unary("Add", ijfo[2], cost::kElementwise)); });  // + bias
  Tensor o = in_scope("output_gate", [&] { return sigmoid(ijfo[3]); });
  Tensor c = in_scope("cell", [&] {
    Tensor kept = mul(state.c, f);
    return add(kept, mul(i, j));
  });
  Tensor h = in_scope("hidden", [&] { return mul(tanh(c), o); });
  return {c, h};
}

Graph NetBuilder::build() && { return std::move(graph_).build(); }

}  // namespace placelab::graphs::zoo
