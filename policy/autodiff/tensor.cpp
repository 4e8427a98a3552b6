// The tape: iterative topological sort, reversed sweep, iterative teardown.
#include "policy/autodiff/tensor.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "graphs/error.h"

#ifdef PLACELAB_OPENBLAS
extern "C" {
void openblas_set_num_threads(int threads);
int openblas_get_num_threads(void);
char* openblas_get_config(void);
char* openblas_get_corename(void);
}
#endif

namespace placelab::autodiff {
namespace {

thread_local bool t_grad_enabled = true;
std::atomic<uint64_t> g_visit_epoch{0};

#if defined(__GLIBC__)
// A training step allocates and frees buffers of hundreds of KB to MB. With glibc's defaults they are
// handed back to the kernel and faulted in again on the next step, ~20% of a step; serving blocks up to
// 32 MB from the heap and keeping up to 256 MB of it free avoids that. A malloc setting in the
// environment (GLIBC_TUNABLES, MALLOC_*_) wins; docs/autodiff.md says more.
const bool g_malloc_tuned = [] {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if ((tunables != nullptr && std::strstr(tunables, "malloc") != nullptr) ||
      std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr || std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr) {
    return false;
  }
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  return true;
}();
#endif

#ifdef PLACELAB_OPENBLAS
// One thread by default: see set_blas_threads. Runs before main, when this library is linked.
const bool g_blas_threads_set = [] {
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr && std::getenv("OMP_NUM_THREADS") == nullptr) {
    openblas_set_num_threads(1);
  }
  return true;
}();
#endif

// Producers before consumers, over nodes that require a gradient (iterative DFS post-order).
// Owning pointers: the sweep cuts consumers' input lists, which must not free unvisited nodes.
template <class T>
std::vector<std::shared_ptr<Node<T>>> topo_sort(const std::shared_ptr<Node<T>>& root) {
  const uint64_t mark = ++g_visit_epoch;
  std::vector<std::shared_ptr<Node<T>>> order;
  std::vector<std::pair<Node<T>*, size_t>> stack;
  if (root == nullptr || !root->requires_grad) return order;
  root->visit_mark = mark;
  stack.emplace_back(root.get(), 0);
  std::vector<const std::shared_ptr<Node<T>>*> owner{&root};  // parallel to stack
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      const std::shared_ptr<Node<T>>& in = node->inputs[next++].node_ptr();
      if (in->requires_grad && in->visit_mark != mark) {
        in->visit_mark = mark;
        stack.emplace_back(in.get(), 0);  // invalidates node/next; they are not used again this turn
        owner.push_back(&in);
      }
    } else {
      order.push_back(*owner.back());
      owner.pop_back();
      stack.pop_back();
    }
  }
  return order;
}

template <class T>
void cut(Node<T>& node) {
  node.vjp = nullptr;
  node.inputs.clear();
  node.grad.resize(0, 0);
}

}  // namespace

template <class T>
Node<T>::~Node() {
  // Sole-owned inputs are emptied before they die, so destruction never nests.
  std::vector<std::shared_ptr<Node<T>>> pending;
  for (auto& in : inputs) pending.push_back(in.release_ptr());
  inputs.clear();
  while (!pending.empty()) {
    std::shared_ptr<Node<T>> node = std::move(pending.back());
    pending.pop_back();
    if (node && node.use_count() == 1) {
      for (auto& in : node->inputs) pending.push_back(in.release_ptr());
      node->inputs.clear();
      node->vjp = nullptr;
    }
  }
}

template <class T>
TensorT<T> TensorT<T>::leaf(Matrix<T> value, bool requires_grad) {
  auto node = std::make_shared<Node<T>>();
  node->value = std::move(value);
  node->requires_grad = requires_grad;
  return TensorT(std::move(node));
}

template <class T>
TensorT<T> TensorT<T>::constant(Index rows, Index cols, T fill) {
  return leaf(Matrix<T>::Constant(rows, cols, fill), false);
}

template <class T>
T TensorT<T>::item() const {
  if (size() != 1) {
    throw Error(fmt::format("item: tensor from op '{}' has shape [{}, {}], expected [1, 1]", op(), rows(), cols()));
  }
  return node_->value(0, 0);
}

template <class T>
void backward(const TensorT<T>& root, BackwardOptions options) {
  if (root.size() != 1) {
    throw Error(fmt::format("backward: root from op '{}' has shape [{}, {}]; pass d_root for non-scalar roots",
                            root.op(), root.rows(), root.cols()));
  }
  backward(root, Matrix<T>(Matrix<T>::Ones(1, 1)), options);
}

template <class T>
void backward(const TensorT<T>& root, const Matrix<T>& d_root, BackwardOptions options) {
  if (d_root.rows() != root.rows() || d_root.cols() != root.cols()) {
    throw Error(fmt::format("backward: d_root has shape [{}, {}], root from op '{}' has [{}, {}]", d_root.rows(),
                            d_root.cols(), root.op(), root.rows(), root.cols()));
  }
  Node<T>& top = *root.node();
  if (!top.requires_grad) return;  // nothing on the tape asks for a gradient
  std::vector<std::shared_ptr<Node<T>>> order = topo_sort(root.node_ptr());
  accumulate(top, d_root);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node<T>& node = **it;
    if (!node.vjp) continue;  // a leaf: keeps its gradient
    if (node.grad.size() != 0) node.vjp(node);
    if (options.retain_graph) {
      node.grad.resize(0, 0);  // interior gradients never carry over to the next sweep
    } else {
      cut(node);  // frees closures, gradients and (once unheld) values
    }
  }
}

template <class T>
void release_tape(const TensorT<T>& root) {
  if (!root.defined()) return;
  for (const auto& node : topo_sort(root.node_ptr())) {
    if (node->vjp) cut(*node);
  }
}

template <class T>
int64_t tape_size(const TensorT<T>& root) {
  return static_cast<int64_t>(topo_sort(root.node_ptr()).size());
}

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }
bool grad_enabled() { return t_grad_enabled; }

void set_blas_threads(int threads) {
  if (threads < 1) throw Error(fmt::format("blas threads: {} is not a positive count (use 1 or more)", threads));
#ifdef PLACELAB_OPENBLAS
  openblas_set_num_threads(threads);
#endif
}

int blas_threads() {
#ifdef PLACELAB_OPENBLAS
  return openblas_get_num_threads();
#else
  return 1;
#endif
}

std::string blas_name() {
#ifdef PLACELAB_OPENBLAS
  return fmt::format("openblas ({}; {} kernels)", openblas_get_config(), openblas_get_corename());
#else
  return "eigen";
#endif
}

#define PLACELAB_INSTANTIATE_TAPE(T)                                                   \
  template struct Node<T>;                                                             \
  template class TensorT<T>;                                                           \
  template void backward(const TensorT<T>&, BackwardOptions);                          \
  template void backward(const TensorT<T>&, const Matrix<T>&, BackwardOptions);        \
  template void release_tape(const TensorT<T>&);                                       \
  template int64_t tape_size(const TensorT<T>&);
PLACELAB_INSTANTIATE_TAPE(float)
PLACELAB_INSTANTIATE_TAPE(double)
#undef PLACELAB_INSTANTIATE_TAPE

}  // namespace placelab::autodiff
