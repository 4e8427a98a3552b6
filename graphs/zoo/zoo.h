// The model zoo: generators of the forward graphs that the papers place (Inception-v3, ResNet-50,
// BERT, Transformer-XL, GNMT, RNNLM, WaveNet, AmoebaNet, NASNet) and seeded synthetic families for
// generalisation studies (ENAS-like cifar10 and ptb cells, NMT variants, layered random DAGs).
// Shapes are analytic, so every op's FLOPs and bytes follow from the architecture and the batch size.
// docs/zoo.md lists every model with its parameters and totals.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "graphs/graph.h"

namespace placelab::graphs::zoo {

/** One tunable parameter of a generator, with its default. */
struct Param {
  std::string name;
  double value;
  std::string help;
};

/** A generator's name, one-line summary and parameters (in a stable order). */
struct ModelInfo {
  std::string name;
  std::string summary;
  std::vector<Param> params;
};

/** Parameter values by name; missing ones take their defaults. */
using Params = std::map<std::string, double, std::less<>>;

/** Every generator, in a stable order. */
const std::vector<ModelInfo>& models();

/** Info of one model; throws placelab::Error listing the known models for an unknown name. */
const ModelInfo& model_info(std::string_view name);

/**
 * Builds a forward graph. Unknown params or out-of-range values throw placelab::Error naming the
 * param and its valid range/known params. Integer params given non-integral values are errors.
 */
Graph make_model(std::string_view name, const Params& params = {});

}  // namespace placelab::graphs::zoo
