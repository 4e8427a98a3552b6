#include "graphs/op_class.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace placelab::graphs {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool contains_any(std::string_view s, std::initializer_list<std::string_view> parts) {
  return std::any_of(parts.begin(), parts.end(), [&](std::string_view p) { return s.find(p) != std::string_view::npos; });
}

}  // namespace

std::string_view op_class_name(OpClass c) {
  switch (c) {
    case OpClass::gemm: return "gemm";
    case OpClass::conv: return "conv";
    case OpClass::elementwise: return "elementwise";
    case OpClass::reduction: return "reduction";
    case OpClass::movement: return "movement";
  }
  return "elementwise";
}

std::optional<OpClass> parse_op_class(std::string_view name) {
  for (OpClass c : kOpClasses)
    if (op_class_name(c) == name) return c;
  return std::nullopt;
}

OpClass op_class_of_type(std::string_view type) {
  std::string t(type);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  std::string_view s = t;
  // An optimizer step reads and writes each parameter once, whatever the op it updates.
  if (ends_with(s, "update")) return OpClass::elementwise;
  if (ends_with(s, "grad")) s.remove_suffix(4);  // a gradient does the work of its op, in kind
  if (contains_any(s, {"conv"})) return OpClass::conv;
  if (contains_any(s, {"matmul", "linear", "gemm", "addmm", "bmm", "einsum", "attention", "lstm", "gru", "rnn"}) ||
      s == "mm" || s == "dense")
    return OpClass::gemm;
  if (s == "maximum" || s == "minimum" || s == "clamp" || s == "clip") return OpClass::elementwise;
  if (contains_any(s, {"concat", "cat", "split", "chunk", "reshape", "view", "flatten", "transpose", "permute",
                       "gather", "scatter", "pad", "slice", "stack", "pack", "squeeze", "expand", "repeat", "tile",
                       "copy", "identity", "placeholder", "const", "variable", "input", "output", "embedding", "shift",
                       "getitem", "getattr", "contiguous", "index", "select", "narrow", "roll", "dispatch"}))
    return OpClass::movement;
  if (contains_any(s, {"softmax", "norm", "mean", "sum", "pool", "reduce", "loss", "entropy", "max", "min", "topk",
                       "var", "std", "prod"}))
    return OpClass::reduction;
  return OpClass::elementwise;
}

}  // namespace placelab::graphs
