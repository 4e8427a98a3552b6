// The tape of placelab's reverse-mode autodiff. A Tensor is a cheap handle to a shared Node (the
// shape of MLX's array -> ArrayDesc): the node holds a row-major Eigen value, its gradient, the
// inputs it was computed from and a closure that adds its gradient into theirs. backward() sorts
// the tape iteratively and sweeps it in reverse; nothing recurses, so 50k-node graph policies with
// deep tapes neither overflow the stack on backward nor on destruction.
//
// Storage is row-major: rows are graph nodes (or sequence positions) and the row ops that GNNs and
// attention live on (gather, scatter-add, segment sums, row softmax, layer norm) then touch
// contiguous memory; it is also PyTorch's and numpy's layout, so fixtures and bindings copy flat.
//
// The core is templated on the scalar: float is the product (Tensor), double exists so that every
// op and layer can be finite-difference checked in double precision (TensorD, used by the tests).
//
// Threads: forward passes may run concurrently (rollouts, under NoGradGuard or on separate tapes),
// but backward() over tapes that share parameters must run one at a time: it accumulates into the
// shared parameters' gradients and marks nodes while sorting.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <Eigen/Core>

namespace placelab::autodiff {

/** Row-major dense matrix of scalar T: the value and gradient of every tensor. */
template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixF = Matrix<float>;
using MatrixD = Matrix<double>;
/** Keep/drop mask for softmax rows and attention (true = keep). */
using Mask = Eigen::Array<bool, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Index = Eigen::Index;

template <class T>
class TensorT;

/** One value on the tape. Users hold it through TensorT; ops fill it through make_result(). */
template <class T>
struct Node {
  Matrix<T> value;
  Matrix<T> grad;                    // empty until a gradient reaches this node
  std::vector<TensorT<T>> inputs;    // what the value was computed from (empty for leaves)
  std::function<void(Node&)> vjp;    // adds d_out (this->grad) into the inputs' grads; takes the node
                                     // as an argument so the closure never owns it (no cycles)
  const char* op = "leaf";
  bool requires_grad = false;
  uint64_t visit_mark = 0;           // topological sort bookkeeping

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  /** Iterative teardown: a long chain of sole owners is freed without recursion. */
  ~Node();
};

/** A handle to a tape node; copying it is a reference-count increment. */
template <class T>
class TensorT {
 public:
  using Scalar = T;

  TensorT() = default;
  explicit TensorT(std::shared_ptr<Node<T>> node) : node_(std::move(node)) {}

  /** A leaf holding `value`; with requires_grad it collects a gradient in backward(). */
  static TensorT leaf(Matrix<T> value, bool requires_grad = false);
  /** A leaf filled with `fill`. */
  static TensorT constant(Index rows, Index cols, T fill);

  bool defined() const { return node_ != nullptr; }
  const Matrix<T>& value() const { return node_->value; }
  /** Writable value, for optimisers and loaders; never change a value an op already read. */
  Matrix<T>& mutable_value() { return node_->value; }
  /** The gradient, or an empty matrix when none reached this tensor. */
  const Matrix<T>& grad() const { return node_->grad; }
  Matrix<T>& mutable_grad() { return node_->grad; }
  Index rows() const { return node_->value.rows(); }
  Index cols() const { return node_->value.cols(); }
  Index size() const { return node_->value.size(); }
  /** The value of a 1x1 tensor. */
  T item() const;
  bool requires_grad() const { return node_->requires_grad; }
  /** Name of the op that produced it ("leaf" for inputs and parameters). */
  const char* op() const { return node_->op; }
  /** Drops the gradient (optimisers call this after each step). */
  void zero_grad() const { node_->grad.resize(0, 0); }

  Node<T>* node() const { return node_.get(); }
  const std::shared_ptr<Node<T>>& node_ptr() const { return node_; }
  /** Moves the node pointer out, leaving this handle undefined (iterative teardown). */
  std::shared_ptr<Node<T>>&& release_ptr() { return std::move(node_); }

 private:
  std::shared_ptr<Node<T>> node_;
};

using Tensor = TensorT<float>;
using TensorD = TensorT<double>;

/** Options of backward(). */
struct BackwardOptions {
  /** Keep the interior tape (values, closures, gradients) to call backward again. */
  bool retain_graph = false;
};

/**
 * Reverse sweep from `root` (a 1x1 loss, seeded with 1, or any shape seeded with `d_root`):
 * every tensor that requires a gradient and that root depends on gets `grad += d_root/d_tensor`.
 * Unless retain_graph, the interior tape is cut as the sweep passes, so the step's memory is
 * released as soon as the caller drops its handles; leaves keep their gradients.
 */
template <class T>
void backward(const TensorT<T>& root, BackwardOptions options = {});
template <class T>
void backward(const TensorT<T>& root, const Matrix<T>& d_root, BackwardOptions options = {});

/** Cuts the tape below `root` without computing gradients (abandoned rollouts, inference). */
template <class T>
void release_tape(const TensorT<T>& root);

/** Number of tape nodes reachable from `root` (tests and diagnostics). */
template <class T>
int64_t tape_size(const TensorT<T>& root);

/** While alive on this thread, ops record no tape (inference, rollouts, target computations). */
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

/** Whether ops on this thread record a tape. */
bool grad_enabled();

/**
 * Threads of one dense product (OpenBLAS's; 1 without it). placelab starts at 1, since its own callers
 * run products from several threads at once, unless OPENBLAS_NUM_THREADS or OMP_NUM_THREADS is set.
 * Results are deterministic for a given count; another count may change their last bits.
 */
void set_blas_threads(int threads);
int blas_threads();

/** Which kernels run the dense products: "openblas (<its build config>; <CPU> kernels)", or "eigen". */
std::string blas_name();

/**
 * The result of an op: `value`, plus (when grad mode is on and some input requires a gradient)
 * its inputs and the VJP closure `vjp(Node&)`, which reads node.grad and accumulates into inputs.
 */
template <class T, class Vjp>
TensorT<T> make_result(const char* op, Matrix<T>&& value, std::vector<TensorT<T>> inputs, Vjp&& vjp) {
  auto node = std::make_shared<Node<T>>();
  node->value = std::move(value);
  node->op = op;
  bool any = false;
  if (grad_enabled()) {
    for (const auto& in : inputs) any = any || in.requires_grad();
  }
  if (any) {
    node->requires_grad = true;
    node->inputs = std::move(inputs);
    node->vjp = std::forward<Vjp>(vjp);
  }
  return TensorT<T>(std::move(node));
}

/** grad += expr (or grad = expr for the first contribution, saving a zero fill). */
template <class T, class Expr>
void accumulate(Node<T>& node, const Expr& expr) {
  if (node.grad.size() == 0) {
    node.grad.noalias() = expr;
  } else {
    node.grad.noalias() += expr;
  }
}

/** The gradient of `node`, zero-filled on first use (for scatter-style VJPs). */
template <class T>
Matrix<T>& grad_buffer(Node<T>& node) {
  if (node.grad.size() == 0) node.grad.setZero(node.value.rows(), node.value.cols());
  return node.grad;
}

}  // namespace placelab::autodiff
