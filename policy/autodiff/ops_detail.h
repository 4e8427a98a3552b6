// Helpers shared by the op files (ops.cpp, ops_elementwise.cpp): argument checks, error messages and
// access to a node's inputs. Private to policy/autodiff.
#pragma once

#include <string>

#include <fmt/format.h>

#include "graphs/error.h"
#include "policy/autodiff/ops.h"

namespace placelab::autodiff::detail {

template <class T>
using Tn = TensorT<T>;

[[noreturn]] inline void fail(const char* op, const std::string& what) {
  throw Error(fmt::format("{}: {}", op, what));
}

inline std::string shape(Index r, Index c) { return fmt::format("[{}, {}]", r, c); }
template <class T>
std::string shape(const Tn<T>& x) {
  return shape(x.rows(), x.cols());
}

template <class T>
void check_defined(const char* op, const Tn<T>& x) {
  if (!x.defined()) fail(op, "input tensor is undefined (default-constructed)");
}

template <class T>
Node<T>& in(Node<T>& self, size_t i) {
  return *self.inputs[i].node();
}

template <class T>
bool wants(Node<T>& self, size_t i) {
  return self.inputs[i].requires_grad();
}

inline void check_index(const char* op, int32_t index, Index bound, size_t at) {
  if (index < 0 || index >= bound) {
    fail(op, fmt::format("index {} at position {} is outside [0, {})", index, at, bound));
  }
}

template <class T>
void check_csr(const char* op, const CsrPtr& csr, const Tn<T>& x) {
  if (!csr) fail(op, "csr is null");
  if (csr->cols != x.rows()) {
    fail(op, fmt::format("csr has {} columns but x has {} rows; build the CSR over x's rows", csr->cols, x.rows()));
  }
}

}  // namespace placelab::autodiff::detail
