// NetBuilder: a shape-tracking layer over GraphBuilder that the zoo's generators write models with.
// Every helper adds operator-granularity ops (as a TensorFlow graph would have them) whose FLOPs,
// bytes moved, output bytes and parameter bytes follow from the input shapes, and edges that carry
// the bytes of the tensors they move. Values are float32 (4 bytes). FLOPs = 2 x multiply-adds for
// contractions; element-wise ops cost the per-element constants in `cost` below.
// Shapes: images are NHWC, sequences [B, T, C], matrices [rows, cols].
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "graphs/graph.h"

namespace placelab::graphs::zoo {

inline constexpr double kFloatBytes = 4;

using Shape = std::vector<int64_t>;

/** FLOPs per output element of the cheap ops (documented in docs/zoo.md). */
namespace cost {
inline constexpr double kElementwise = 1;     // Add, Mul, Sub, Relu, BiasAdd, Select
inline constexpr double kTranscendental = 4;  // Sigmoid, Tanh, Exp: a few FLOPs each in practice
inline constexpr double kBatchNorm = 4;       // normalise with batch statistics, scale, shift
inline constexpr double kLayerNorm = 8;       // mean, variance, normalise, scale, shift
inline constexpr double kSoftmax = 5;         // max, subtract, exp, sum, divide
inline constexpr double kGelu = 8;            // tanh approximation
}  // namespace cost

/** A value flowing between ops: the op that produces it and its float32 shape. */
struct Tensor {
  OpId op = -1;
  Shape shape;

  int64_t elements() const;
  double bytes() const { return kFloatBytes * static_cast<double>(elements()); }
  /** Size of dimension `axis`; negative counts from the end. */
  int64_t dim(int axis) const;
};

/** Padding of convolutions and pools: same (out = ceil(in / stride)) or valid (no padding). */
enum class Padding { same, valid };

/** One op as NetBuilder::op adds it; bytes_read < 0 means "its inputs plus its parameters". */
struct OpDef {
  std::string_view type;
  std::string_view name;  // default: the type
  Shape out;
  double flops = 0;
  double param_elements = 0;
  double bytes_read = -1;
  graphs::GemmDims gemm;  // the shape of its matrix products, when it computes some
};

/** The recurrent state of an LSTM layer. */
struct LstmState {
  Tensor c, h;
};

/** The shared weights of an LSTM layer: one Variable op each, read by every time step. */
struct LstmWeights {
  Tensor kernel;  // [input + hidden, 4 * hidden]
  Tensor bias;    // [4 * hidden]
};

/** Builds one model's graph: tracks tensor shapes, names ops by scope and computes every op's costs. */
class NetBuilder {
 public:
  explicit NetBuilder(std::string graph_name);

  /** Ends a name scope when it goes out of scope. */
  class [[nodiscard]] Scope {
   public:
    explicit Scope(NetBuilder& b) : b_(&b) {}
    Scope(Scope&& other) noexcept : b_(other.b_) { other.b_ = nullptr; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope& operator=(Scope&&) = delete;
    ~Scope() {
      if (b_) b_->pop_scope();
    }

   private:
    NetBuilder* b_;
  };

  /** Opens a name scope: ops added inside are named "outer/inner/Type". */
  Scope scope(std::string_view name);
  template <class... Args>
  Scope scope(fmt::format_string<Args...> format, Args&&... args) {
    return scope(std::string_view(fmt::format(format, std::forward<Args>(args)...)));
  }
  /** Runs `f` inside scope `name` and returns its result. */
  template <class F>
  auto in_scope(std::string_view name, F&& f) {
    auto s = scope(name);
    return f();
  }
  /** Ends a repeat when it goes out of scope (see repeat()). */
  class [[nodiscard]] Repeat {
   public:
    Repeat(NetBuilder& b, int64_t r, int64_t count);
    Repeat(const Repeat&) = delete;
    Repeat& operator=(const Repeat&) = delete;
    ~Repeat();

   private:
    NetBuilder* b_;
    std::optional<Scope> scope_;
  };
  /**
   * Ops added while the result lives are repeat `r` of `count` copies of the model (micro-batches): named in
   * scope "mb<r>" when count > 1, and an op with parameters then reads them from a weight op ("Variable",
   * `<op>/weights`, outside the repeat's scope) that repeat 0 made for the same op, so every repeat shares
   * them and they count once. A weight op's output is the resident weights themselves, so it holds no bytes
   * beyond its parameters; an edge from it carries the weights (a remote reader receives a copy).
   * Repeats must request weights in the same order; with count = 1 ops own their weights as usual.
   */
  Repeat repeat(int64_t r, int64_t count) { return Repeat(*this, r, count); }
  /** Model block (Graph::layer) of the ops added from now on. */
  void set_layer(int32_t layer) { layer_ = layer; }
  int32_t layer() const { return layer_; }
  int32_t num_ops() const { return graph_.num_ops(); }

  /** Adds one op reading `inputs` (one edge per producer, carrying the bytes it reads). */
  Tensor op(const OpDef& def, std::span<const Tensor> inputs);
  Tensor op(const OpDef& def, std::initializer_list<Tensor> inputs) {
    return op(def, std::span<const Tensor>(inputs.begin(), inputs.size()));
  }

  // --- sources ---
  /** A fed input ("Placeholder"). */
  Tensor input(std::string_view name, Shape shape);
  /** A constant ("Const"), e.g. a zero initial state or a mask. */
  Tensor constant(std::string_view name, Shape shape);
  /** A weight read by several ops ("Variable"): its bytes are the op's parameter bytes. */
  Tensor variable(std::string_view name, Shape shape);

  // --- views (no op: the consumer reads part of, or reinterprets, the producer's tensor) ---
  /** `x` with another shape of at most as many elements; edges from it carry the view's bytes. */
  static Tensor view(const Tensor& x, Shape shape);

  // --- convolutions and pools (NHWC) ---
  Tensor conv2d(const Tensor& x, int64_t filters, int64_t kernel_h, int64_t kernel_w, int64_t stride = 1,
                Padding padding = Padding::same, int64_t dilation = 1, bool bias = false);
  Tensor depthwise_conv2d(const Tensor& x, int64_t kernel, int64_t stride = 1, Padding padding = Padding::same);
  /** Depthwise then pointwise convolution (two ops, as slim.separable_conv2d). */
  Tensor separable_conv2d(const Tensor& x, int64_t filters, int64_t kernel, int64_t stride = 1);
  Tensor batch_norm(const Tensor& x);
  /** conv2d, then BatchNorm, then Relu. */
  Tensor conv_bn_relu(const Tensor& x, int64_t filters, int64_t kernel_h, int64_t kernel_w, int64_t stride = 1,
                      Padding padding = Padding::same);
  Tensor max_pool(const Tensor& x, int64_t kernel, int64_t stride, Padding padding = Padding::same);
  Tensor avg_pool(const Tensor& x, int64_t kernel, int64_t stride, Padding padding = Padding::same);
  /** Mean over H and W: [N, H, W, C] -> [N, C]. */
  Tensor global_avg_pool(const Tensor& x);

  // --- element-wise ---
  Tensor unary(std::string_view type, const Tensor& x, double flops_per_element);
  Tensor relu(const Tensor& x) { return unary("Relu", x, cost::kElementwise); }
  Tensor sigmoid(const Tensor& x) { return unary("Sigmoid", x, cost::kTranscendental); }
  Tensor tanh(const Tensor& x) { return unary("Tanh", x, cost::kTranscendental); }
  /** Broadcasting binary op: the output has the shape of the larger operand. */
  Tensor binary(std::string_view type, const Tensor& a, const Tensor& b);
  Tensor add(const Tensor& a, const Tensor& b) { return binary("Add", a, b); }
  Tensor mul(const Tensor& a, const Tensor& b) { return binary("Mul", a, b); }
  /** x times a constant ("Mul"), e.g. attention scaling. */
  Tensor scale(const Tensor& x) { return unary("Mul", x, cost::kElementwise); }
  /** Sum of same-shaped tensors ("AddN"). */
  Tensor add_n(std::span<const Tensor> xs);

  // --- shape ops ---
  /** Concatenation along `axis` (negative counts from the end). */
  Tensor concat(std::span<const Tensor> xs, int axis = -1);
  Tensor concat(std::initializer_list<Tensor> xs, int axis = -1) {
    return concat(std::span<const Tensor>(xs.begin(), xs.size()), axis);
  }
  /** Stacks same-shaped tensors along a new axis 1 ("Pack"): [B, C] x T -> [B, T, C]. */
  Tensor stack(std::span<const Tensor> xs);
  /** One "Split" op into `parts` equal parts along `axis`; each part is read as a view. */
  std::vector<Tensor> split(const Tensor& x, int64_t parts, int axis = -1);

  // --- dense layers ---
  /** x [..., K] times a weight [K, units] owned by this op ("MatMul"). */
  Tensor matmul(const Tensor& x, int64_t units);
  /** x [..., K] times a shared weight tensor w [K, N] ("MatMul"). */
  Tensor matmul(const Tensor& x, const Tensor& w);
  /** MatMul, plus a "BiasAdd" owning its bias when `bias`. */
  Tensor dense(const Tensor& x, int64_t units, bool bias = true);
  /** x plus a bias vector owned by this op ("BiasAdd"). */
  Tensor bias_add(const Tensor& x);
  /** a [..., M, K] times b [..., K, N] (or [..., N, K] when transpose_b) ("BatchMatMul"). */
  Tensor batch_matmul(const Tensor& a, const Tensor& b, bool transpose_b = false);
  Tensor softmax(const Tensor& x) { return unary("Softmax", x, cost::kSoftmax); }
  Tensor layer_norm(const Tensor& x);
  /** Rows of a [vocab, dim] table owned by this op, gathered by ids ("Embedding"). */
  Tensor embedding(const Tensor& ids, int64_t vocab, int64_t dim);

  /** Image classifier head: global average pool (for NHWC input), dense with bias, softmax. */
  Tensor classifier(const Tensor& features, int64_t classes);

  // --- recurrent ---
  /** Weights of an LSTM layer (two Variable ops in the current scope). */
  LstmWeights lstm_weights(int64_t input, int64_t hidden);
  /**
   * One LSTM step in TensorFlow's pieces: Concat(inputs..., h), MatMul, BiasAdd, Split, the gates
   * (input_gate/Sigmoid, candidate/Tanh, forget_gate/Add (bias) and Sigmoid, output_gate/Sigmoid),
   * cell/Mul, Mul, Add and hidden/Tanh, Mul.
   */
  LstmState lstm_cell(std::span<const Tensor> inputs, const LstmState& state, const LstmWeights& weights);

  /** Validates and returns the graph. */
  Graph build() &&;

 private:
  friend class Scope;
  void pop_scope();
  std::string unique_name(std::string_view name);
  std::string unique_full_name(std::string full);
  /** op() for an op with parameters inside a repeat: they move to a shared weight op that it reads. */
  Tensor op_with_shared_weights(const OpDef& def, std::span<const Tensor> inputs);
  Tensor pool(std::string_view type, const Tensor& x, int64_t kernel, int64_t stride, Padding padding);

  GraphBuilder graph_;
  std::string prefix_;  // "a/b/" for scopes a, b
  std::vector<size_t> prefix_sizes_;
  std::unordered_map<std::string, int32_t> name_uses_;
  int32_t layer_ = kNoClass;
  std::vector<std::pair<OpId, double>> edge_scratch_;
  // Repeats: the current one (-1: none), where its "mb<r>/" sits in prefix_, the weight ops repeat 0 made,
  // and each repeat's position in them; resident_ holds the bytes an edge from a weight op may carry.
  int64_t repeat_ = -1;
  size_t repeat_prefix_at_ = 0, repeat_prefix_size_ = 0;
  std::vector<Tensor> shared_weights_;
  std::vector<size_t> weight_cursor_;
  std::unordered_map<OpId, double> resident_;
};

/** Output size of a convolution or pool along one spatial dimension. */
int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, Padding padding, int64_t dilation = 1);

}  // namespace placelab::graphs::zoo
