// Parameter initialisation and the placelab.params save/load format.
#include "policy/nn/module.h"

#include <cmath>
#include <limits>
#include <unordered_map>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/json_util.h"

namespace placelab::nn {

std::string join_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

template <class T>
TensorT<T> uniform_param(Index rows, Index cols, double bound, std::mt19937_64& rng) {
  Matrix<T> value(rows, cols);
  for (Index i = 0; i < value.size(); ++i) {
    value.data()[i] = static_cast<T>((2 * autodiff::uniform01(rng) - 1) * bound);
  }
  return TensorT<T>::leaf(std::move(value), true);
}

template <class T>
TensorT<T> constant_param(Index rows, Index cols, T fill) {
  return TensorT<T>::leaf(Matrix<T>::Constant(rows, cols, fill), true);
}

template <class T>
std::vector<TensorT<T>> tensors_of(const ParamList<T>& params) {
  std::vector<TensorT<T>> out;
  out.reserve(params.size());
  for (const auto& p : params) out.push_back(p.tensor);
  return out;
}

template <class T>
int64_t parameter_count(const ParamList<T>& params) {
  int64_t count = 0;
  for (const auto& p : params) count += p.tensor.size();
  return count;
}

nlohmann::json parameters_to_json(const ParamList<float>& params) {
  io::json list = io::json::array();
  for (const auto& p : params) {
    const auto& v = p.tensor.value();
    list.push_back({{"name", p.name},
                    {"shape", {v.rows(), v.cols()}},
                    {"data", std::vector<float>(v.data(), v.data() + v.size())}});
  }
  return {{"format", "placelab.params"}, {"version", 1}, {"params", std::move(list)}};
}

void save_parameters(const std::string& path, const ParamList<float>& params) {
  io::write_json_atomic(path, parameters_to_json(params), -1);
}

void load_parameters(const std::string& path, const ParamList<float>& params) {
  parameters_from_json(io::read_json_file(path), path, params);
}

float float_from_json(const io::JsonNode& node) {
  const double v = node.as_number();
  if (!(std::abs(v) <= std::numeric_limits<float>::max())) {
    node.fail(fmt::format("is {:g}, beyond a float's range (+-{:g}); the file is damaged", v, std::numeric_limits<float>::max()));
  }
  return static_cast<float>(v);
}

void parameters_from_json(const nlohmann::json& doc, const std::string& origin, const ParamList<float>& params) {
  const io::JsonNode root(doc, origin);
  root.check_header("placelab.params", {1});
  root.check_fields({"format", "version", "params"});
  const io::JsonNode list = root.at("params");

  std::unordered_map<std::string, size_t> index_of;
  for (size_t i = 0; i < params.size(); ++i) index_of[params[i].name] = i;
  std::vector<Matrix<float>> loaded(params.size());
  std::vector<bool> seen(params.size(), false);
  for (size_t k = 0; k < list.size(); ++k) {
    const io::JsonNode entry = list.at(k);
    entry.check_fields({"name", "shape", "data"});
    const std::string name = entry.at("name").as_string();
    const auto it = index_of.find(name);
    if (it == index_of.end()) entry.fail(fmt::format("parameter '{}' is not in the model (wrong model or file?)", name));
    if (seen[it->second]) entry.fail(fmt::format("parameter '{}' appears twice", name));
    const auto& expected = params[it->second].tensor.value();
    const io::JsonNode shape = entry.at("shape");
    if (shape.size() != 2) shape.fail("must be [rows, cols]");
    const int64_t rows = shape.at(size_t{0}).as_int(), cols = shape.at(size_t{1}).as_int();
    if (rows != expected.rows() || cols != expected.cols()) {
      entry.fail(fmt::format("parameter '{}' has shape [{}, {}] in the file but the model expects [{}, {}] "
                             "(saved from a model with other sizes?)",
                             name, rows, cols, expected.rows(), expected.cols()));
    }
    const io::JsonNode data = entry.at("data");
    if (static_cast<int64_t>(data.size()) != rows * cols) {
      data.fail(fmt::format("has {} numbers, shape [{}, {}] needs {}", data.size(), rows, cols, rows * cols));
    }
    Matrix<float> value(rows, cols);
    for (size_t i = 0; i < data.size(); ++i) value.data()[i] = float_from_json(data.at(i));
    loaded[it->second] = std::move(value);
    seen[it->second] = true;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (!seen[i]) root.fail(fmt::format("parameter '{}' of the model is missing from the file", params[i].name));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    TensorT<float> tensor = params[i].tensor;
    tensor.mutable_value() = std::move(loaded[i]);
  }
}

#define PLACELAB_INSTANTIATE_MODULE(T)                                                \
  template TensorT<T> uniform_param(Index, Index, double, std::mt19937_64&);          \
  template TensorT<T> constant_param(Index, Index, T);                                \
  template std::vector<TensorT<T>> tensors_of(const ParamList<T>&);                   \
  template int64_t parameter_count(const ParamList<T>&);
PLACELAB_INSTANTIATE_MODULE(float)
PLACELAB_INSTANTIATE_MODULE(double)
#undef PLACELAB_INSTANTIATE_MODULE

}  // namespace placelab::nn
