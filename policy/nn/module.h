// Parameters of the neural-network layers: named registration, seeded initialisation, and the
// versioned save/load format ("placelab.params") with shape checks.
//
// Every layer is a class template on the scalar (float in the product, double in gradchecks) that
// owns its parameters as leaf tensors and lists them with collect(prefix, out), giving dotted names
// such as "encoder.sage0.neigh.weight".
#pragma once

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/autodiff/ops.h"

namespace placelab::io {
class JsonNode;
}

namespace placelab::nn {

using autodiff::Index;
using autodiff::Mask;
using autodiff::Matrix;
using autodiff::TensorT;

/** A parameter and its dotted name. */
template <class T>
struct NamedParam {
  std::string name;
  TensorT<T> tensor;
};
template <class T>
using ParamList = std::vector<NamedParam<T>>;

/** `prefix.name`, or `name` when prefix is empty. */
std::string join_name(const std::string& prefix, const std::string& name);

/** A trainable leaf with entries uniform in [-bound, bound), drawn from `rng` (PyTorch's Linear init
 *  uses bound = 1/sqrt(fan_in)). */
template <class T>
TensorT<T> uniform_param(Index rows, Index cols, double bound, std::mt19937_64& rng);
/** A trainable leaf filled with `fill`. */
template <class T>
TensorT<T> constant_param(Index rows, Index cols, T fill);

/** Just the tensors of a parameter list (optimisers take these). */
template <class T>
std::vector<TensorT<T>> tensors_of(const ParamList<T>& params);

/** Total number of scalars. */
template <class T>
int64_t parameter_count(const ParamList<T>& params);

/**
 * Writes {"format": "placelab.params", "version": 1, "params": [{"name", "shape": [r, c], "data": [...]}]}
 * atomically (temporary file and rename). Floats print with round-trip precision, so load is exact.
 */
void save_parameters(const std::string& path, const ParamList<float>& params);

/**
 * Loads values saved by save_parameters into `params`, matching by name. Throws placelab::Error naming
 * the file and parameter for a wrong format or version, a missing or unknown name, or a shape that
 * differs from the model's. Nothing is modified unless the whole file fits.
 */
void load_parameters(const std::string& path, const ParamList<float>& params);

/** The placelab.params document of `params` (what save_parameters writes; checkpoints embed it). */
nlohmann::json parameters_to_json(const ParamList<float>& params);

/**
 * Loads a placelab.params document into `params` with load_parameters' checks; `origin` names it in
 * errors (a file, or a checkpoint and its field). Nothing is modified unless the whole document fits.
 */
void parameters_from_json(const nlohmann::json& doc, const std::string& origin, const ParamList<float>& params);

/** A saved float: a JSON number within float's finite range, else an error naming it (a cast would give inf). */
float float_from_json(const io::JsonNode& node);

}  // namespace placelab::nn
