// GDP / SGDP: options, the network and the embedded pre-trained checkpoint (see gdp.h; the learner is in
// gdp_learner.cpp). Legend: U = units, D = devices, h = hidden width, p = pair-MLP width, B = segments,
// L = units per segment, R = decisions of a schedule decode, F = features of a pair.
#include "policy/learned/gdp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "policy/classic/units.h"
#include "policy/learned/classical_start.h"
#include "policy/placer.h"
#include "policy/rl/pg.h"

namespace placelab::learned {
namespace {

namespace ad = autodiff;
using autodiff::Index;
using autodiff::Tensor;

constexpr const char* kName = "gdp";
constexpr Index kTopologicalPositionColumn = 6;  // of Problem::unit_x

int64_t positive_option(const nlohmann::json& options, std::string_view key, int64_t fallback,
                        int64_t max_value = policy::kMaxCountOption) {
  const int64_t value = policy::option_int(kName, options, key, fallback, max_value);
  if (value < 1) throw Error(fmt::format("placer gdp options: \"{}\" is 0, expected at least 1", key));
  return value;
}

std::string string_option(const nlohmann::json& options, std::string_view key, const std::string& fallback,
                          std::initializer_list<std::string_view> known) {
  const auto it = options.find(key);
  if (it == options.end()) return fallback;
  std::string list;
  for (std::string_view k : known) list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", k);
  if (!it->is_string() || std::find(known.begin(), known.end(), it->get<std::string>()) == known.end()) {
    throw Error(fmt::format("placer gdp options: \"{}\" is {}, expected one of {}", key, it->dump(), list));
  }
  return it->get<std::string>();
}

// [U*D, 1] pair scores (row u*D + d) -> [U, D]: one gather per device column (D is small).
Tensor pairs_to_matrix(const Tensor& scores, Index units, Index devices) {
  if (devices == 1) return scores;
  std::vector<Tensor> columns;
  columns.reserve(static_cast<size_t>(devices));
  for (Index d = 0; d < devices; ++d) {
    std::vector<int32_t> rows(static_cast<size_t>(units));
    for (Index u = 0; u < units; ++u) rows[static_cast<size_t>(u)] = static_cast<int32_t>(u * devices + d);
    columns.push_back(ad::gather_rows(scores, std::move(rows)));
  }
  return ad::concat_cols(columns);
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Options
// ------------------------------------------------------------------------------------------------

namespace {

// A comma-separated list of placer names (checked by the caller).
std::string string_list_option(const nlohmann::json& options, const char* key, const std::string& fallback) {
  const auto it = options.find(key);
  if (it == options.end()) return fallback;
  if (!it->is_string()) {
    throw Error(fmt::format("placer gdp options: \"{}\" is {}, expected a string of comma-separated placer names "
                            "such as \"heft,metis\"", key, it->dump()));
  }
  return it->get<std::string>();
}

}  // namespace

GdpOptions gdp_options_from_json(const nlohmann::json& options) {
  if (!options.is_object()) {
    throw Error(fmt::format("placer gdp options: expected a JSON object, got {}", options.dump()));
  }
  policy::check_options(kName, options,
                        {"hidden", "sage_layers", "aggregator", "segment", "attention_layers", "heads", "ff",
                         "head_hidden", "superposition", "decoder", "rollouts", "ppo_epochs", "clip", "entropy",
                         "entropy_target", "value_coef", "lr", "rl_lr", "max_grad_norm", "self_imitation", "place_samples",
                         "place_temperature", "place_starts",
                         "window_share", "decisions_per_step", "warm_start", "warm_steps", "distill_from"});
  GdpOptions o;
  o.hidden = positive_option(options, "hidden", o.hidden, policy::kMaxWidthOption);
  o.sage_layers = policy::option_int(kName, options, "sage_layers", o.sage_layers);
  o.aggregator = string_option(options, "aggregator", o.aggregator, {"mean", "max_pool"});
  o.segment = positive_option(options, "segment", o.segment);
  o.attention_layers = policy::option_int(kName, options, "attention_layers", o.attention_layers);
  o.heads = positive_option(options, "heads", o.heads, policy::kMaxWidthOption);
  o.ff = positive_option(options, "ff", o.ff, policy::kMaxWidthOption);
  o.head_hidden = positive_option(options, "head_hidden", o.head_hidden, policy::kMaxWidthOption);
  o.superposition = policy::option_bool(kName, options, "superposition", o.superposition);
  o.decoder = string_option(options, "decoder", o.decoder, {"schedule", "single_shot"});
  o.rollouts = positive_option(options, "rollouts", o.rollouts);
  o.ppo_epochs = positive_option(options, "ppo_epochs", o.ppo_epochs);
  o.clip = policy::option_number(kName, options, "clip", o.clip);
  o.entropy = policy::option_number(kName, options, "entropy", o.entropy);
  o.entropy_target = policy::option_number(kName, options, "entropy_target", o.entropy_target);
  if (o.entropy_target < 0) throw Error("placer gdp options: \"entropy_target\" is negative, expected 0 (off) or more");
  if (o.entropy_target > 0 && !(o.entropy > 0))
    throw Error("placer gdp options: \"entropy_target\" steers the \"entropy\" coefficient, which must then be above 0");
  o.value_coef = policy::option_number(kName, options, "value_coef", o.value_coef);
  o.lr = policy::option_number(kName, options, "lr", o.lr);
  o.rl_lr = policy::option_number(kName, options, "rl_lr", o.rl_lr);
  o.max_grad_norm = policy::option_number(kName, options, "max_grad_norm", o.max_grad_norm);
  o.self_imitation = policy::option_number(kName, options, "self_imitation", o.self_imitation);
  o.place_samples = policy::option_int(kName, options, "place_samples", o.place_samples);
  o.place_temperature = policy::option_number(kName, options, "place_temperature", o.place_temperature);
  if (o.place_temperature <= 0) throw Error("placer gdp options: \"place_temperature\" must be above 0");
  o.place_starts = string_list_option(options, "place_starts", o.place_starts);
  classical_placers("gdp", "place_starts", o.place_starts);
  o.decisions_per_step = policy::option_int(kName, options, "decisions_per_step", o.decisions_per_step);
  o.window_share = policy::option_number(kName, options, "window_share", o.window_share);
  if (o.window_share > 1) throw Error("placer gdp options: \"window_share\" is above 1, expected a share in [0, 1]");
  o.warm_steps = policy::option_int(kName, options, "warm_steps", o.warm_steps);
  if (o.warm_steps < 0) throw Error("placer gdp options: \"warm_steps\" is negative, expected 0 or more");
  o.distill_from = policy::option_int(kName, options, "distill_from", o.distill_from);
  o.warm_start = string_list_option(options, "warm_start", o.warm_start);
  const std::vector<std::string> warm_placers = classical_placers("gdp", "warm_start", o.warm_start);
  if (o.warm_steps > 0 && warm_placers.empty())
    throw Error("placer gdp options: \"warm_steps\" > 0 needs at least one placer in \"warm_start\"");
  if (o.hidden % o.heads != 0) {
    throw Error(
        fmt::format("placer gdp options: \"hidden\" ({}) must be a multiple of \"heads\" ({})", o.hidden, o.heads));
  }
  return o;
}

nlohmann::json to_json(const GdpOptions& o) {
  return {{"hidden", o.hidden},
          {"sage_layers", o.sage_layers},
          {"aggregator", o.aggregator},
          {"segment", o.segment},
          {"attention_layers", o.attention_layers},
          {"heads", o.heads},
          {"ff", o.ff},
          {"head_hidden", o.head_hidden},
          {"superposition", o.superposition},
          {"decoder", o.decoder},
          {"rollouts", o.rollouts},
          {"ppo_epochs", o.ppo_epochs},
          {"clip", o.clip},
          {"entropy", o.entropy},
          {"entropy_target", o.entropy_target},
          {"value_coef", o.value_coef},
          {"lr", o.lr},
          {"rl_lr", o.rl_lr},
          {"max_grad_norm", o.max_grad_norm},
          {"self_imitation", o.self_imitation},
          {"place_samples", o.place_samples},
          {"place_temperature", o.place_temperature},
          {"place_starts", o.place_starts},
          {"decisions_per_step", o.decisions_per_step},
          {"window_share", o.window_share},
          {"warm_start", o.warm_start},
          {"warm_steps", o.warm_steps},
          {"distill_from", o.distill_from}};
}

// ------------------------------------------------------------------------------------------------
// Network
// ------------------------------------------------------------------------------------------------

GdpNetwork::GdpNetwork(const GdpOptions& options, std::mt19937_64& rng)
    : options_(options), schedule_(options.decoder == "schedule") {
  const Index h = options.hidden, p = options.head_hidden;
  const auto aggregator = options.aggregator == "max_pool" ? nn::Aggregator::max_pool : nn::Aggregator::mean;
  type_embed_ = nn::Embedding(kOpTypeBuckets, h, rng);
  unit_in_ = nn::Linear(kUnitFeatures, h, rng);
  for (int64_t i = 0; i < options.sage_layers; ++i) sage_.emplace_back(h, h, aggregator, rng);
  for (int64_t i = 0; i < options.attention_layers; ++i) {
    if (options.superposition) film_.emplace_back(h, h, rng);
    blocks_.emplace_back(h, options.heads, options.ff, rng);
  }
  device_embed_ = nn::Embedding(kGdpDeviceSlots, h, rng);
  device_in_ = nn::Linear(kDeviceFeatures, h, rng);
  pair_unit_ = nn::Linear(h, p, rng);
  pair_device_ = nn::Linear(h, p, rng, false);
  pair_features_ = nn::Linear(schedule_ ? kDecisionFeatures : kPairFeatures, p, rng, false);
  if (schedule_) pair_skip_ = nn::Linear(kDecisionFeatures, 1, rng, false);
  pair_position_ = nn::Linear(2 * kGdpPositionFrequencies, p, rng, false);
  pair_out_ = nn::Linear(p, 1, rng);
  value_ = nn::Mlp({h, h, 1}, rng, nn::Activation::tanh);

  type_embed_.collect("encoder.type", params_);
  unit_in_.collect("encoder.input", params_);
  for (size_t i = 0; i < sage_.size(); ++i) sage_[i].collect(fmt::format("encoder.sage{}", i), params_);
  for (size_t i = 0; i < film_.size(); ++i) film_[i].collect(fmt::format("superposition.film{}", i), params_);
  for (size_t i = 0; i < blocks_.size(); ++i) blocks_[i].collect(fmt::format("placer.block{}", i), params_);
  device_embed_.collect("head.device_id", params_);
  device_in_.collect("head.device_input", params_);
  pair_unit_.collect("head.unit", params_);
  pair_device_.collect("head.device", params_);
  // Other names in the two decoders, so that loading one's parameters into the other names the difference.
  pair_features_.collect(schedule_ ? "head.schedule" : "head.pair", params_);
  if (schedule_) pair_skip_.collect("head.schedule_skip", params_);
  pair_position_.collect("head.position", params_);
  pair_out_.collect("head.out", params_);
  value_.collect("value", params_);
}

GdpEncoding GdpNetwork::encode(const Problem& problem) const {
  const Index units = problem.num_units(), devices = problem.num_devices(), h = options_.hidden;

  // Encoder: op type + unit features, then GraphSAGE over unit neighbourhoods.   [U, h]
  Tensor x = ad::relu(
      ad::add(type_embed_.forward(problem.unit_type()), unit_in_.forward(Tensor::leaf(problem.unit_x()))));
  for (const auto& layer : sage_) x = ad::relu(layer.forward(x, problem.neighbors()));
  const Tensor graph = ad::mean(x, 0);  // [1, h]

  // Placer: units in topological order, B segments of L rows (the last one zero-padded), each
  // attending to itself and to the previous segment's layer input (detached memory).
  const Index rows = std::min<Index>(options_.segment, units), segments = (units + rows - 1) / rows;
  const Index padded = segments * rows;
  Tensor z = padded > units ? ad::concat_rows<float>({x, Tensor::constant(padded - units, h, 0.f)}) : x;
  const autodiff::Mask mask = nn::segment_mask(segments, rows, rows, units, false);
  for (size_t l = 0; l < blocks_.size(); ++l) {
    if (!film_.empty()) z = film_[l].forward(z, graph);
    z = blocks_[l].forward(z, nn::previous_segment_memory(z, segments), segments, &mask);
  }
  if (padded > units) z = ad::slice_rows(z, 0, units);

  std::vector<int32_t> slot(static_cast<size_t>(devices));
  for (Index d = 0; d < devices; ++d) slot[static_cast<size_t>(d)] = static_cast<int32_t>(d % kGdpDeviceSlots);
  const Tensor device =
      ad::relu(ad::add(device_in_.forward(Tensor::leaf(problem.device_x())), device_embed_.forward(slot)));
  // The unit side also sees its topological position through sinusoids, so one parameter can move a
  // contiguous stretch of units to another device (the expert's and the pipeline's kind of split).
  autodiff::MatrixF position(units, 2 * kGdpPositionFrequencies);
  for (Index u = 0; u < units; ++u)
    for (Index k = 0; k < kGdpPositionFrequencies; ++k) {
      const double angle =
          std::numbers::pi * static_cast<double>(k + 1) * problem.unit_x()(u, kTopologicalPositionColumn);
      position(u, 2 * k) = static_cast<float>(std::sin(angle));
      position(u, 2 * k + 1) = static_cast<float>(std::cos(angle));
    }
  GdpEncoding out;
  out.unit_proj = ad::add(pair_unit_.forward(z), pair_position_.forward(Tensor::leaf(std::move(position))));
  out.device_proj = pair_device_.forward(device);  // [U, p], [D, p]
  // The value head reads a detached embedding: its squared error is orders of magnitude larger than
  // the policy's gradients early on and would otherwise dominate Adam's scaling of the shared encoder.
  out.value = value_.forward(ad::detach(graph));
  out.graph_embedding = graph;
  return out;
}

Tensor GdpNetwork::head_logits(const Tensor& unit_rows, const Tensor& device_proj,
                               const autodiff::MatrixF& pair_features) const {
  // score(r, d) = w^T relu(P_r + Q_d + C pair_rd + b) + c over all rows x devices, plus a bilinear term.
  const Index rows = unit_rows.rows(), devices = device_proj.rows();
  std::vector<int32_t> row_of_pair, device_of_pair;
  row_of_pair.reserve(static_cast<size_t>(rows * devices));
  device_of_pair.reserve(static_cast<size_t>(rows * devices));
  for (Index r = 0; r < rows; ++r)
    for (Index d = 0; d < devices; ++d) {
      row_of_pair.push_back(static_cast<int32_t>(r));
      device_of_pair.push_back(static_cast<int32_t>(d));
    }
  const Tensor features = Tensor::leaf(pair_features);
  const Tensor pre = ad::relu(ad::add(ad::add(ad::gather_rows(unit_rows, std::move(row_of_pair)),
                                              ad::gather_rows(device_proj, std::move(device_of_pair))),
                                      pair_features_.forward(features)));
  // Plus a bilinear unit-device term (GDP's per-device output weights, made from device embeddings),
  // which lets units with similar embeddings share a device without the pair MLP learning it.
  const float scale = 1.f / std::sqrt(static_cast<float>(options_.head_hidden));
  const Tensor bilinear = ad::mul_scalar(ad::matmul_nt(unit_rows, device_proj), scale);  // [rows, D]
  Tensor logits = ad::add(bilinear, pairs_to_matrix(pair_out_.forward(pre), rows, devices));
  if (schedule_) logits = ad::add(logits, pairs_to_matrix(pair_skip_.forward(features), rows, devices));
  return logits;
}

GdpOutput GdpNetwork::forward(const Problem& problem) const {
  if (schedule_) throw Error("gdp: forward() is the single-shot decoder's pass; this network decodes in the schedule");
  const GdpEncoding encoding = encode(problem);
  GdpOutput out;
  out.log_probs = ad::log_softmax_rows(head_logits(encoding.unit_proj, encoding.device_proj, problem.pair_x()),
                                       &problem.allowed());
  out.value = encoding.value;
  out.graph_embedding = encoding.graph_embedding;
  return out;
}

Tensor GdpNetwork::decision_log_probs(const GdpEncoding& encoding, const Decisions& decisions) const {
  if (!schedule_) throw Error("gdp: decision_log_probs() needs the schedule decoder");
  const Tensor rows = ad::gather_rows(encoding.unit_proj, decisions.unit);
  return ad::log_softmax_rows(head_logits(rows, encoding.device_proj, decisions.features), &decisions.allowed);
}

DecisionScorer GdpNetwork::scorer(const GdpEncoding& encoding) const {
  if (!schedule_) throw Error("gdp: scorer() needs the schedule decoder");
  // head_logits() for one row, in plain Eigen: the decode calls it once per unit.
  using Row = Eigen::Matrix<float, 1, Eigen::Dynamic>;
  const autodiff::MatrixF &unit = encoding.unit_proj.value(), &device = encoding.device_proj.value();
  const autodiff::MatrixF &features_w = pair_features_.weight().value(), &skip_w = pair_skip_.weight().value();
  const autodiff::MatrixF& out_w = pair_out_.weight().value();
  const float out_b = pair_out_.bias().value()(0, 0);
  const float scale = 1.f / std::sqrt(static_cast<float>(options_.head_hidden));
  return [&unit, &device, &features_w, &skip_w, &out_w, out_b, scale](int32_t u, std::span<const float> features,
                                                                         std::span<float> logits) {
    const Eigen::Map<const autodiff::MatrixF> f(features.data(), static_cast<Index>(logits.size()), kDecisionFeatures);
    const Row p = unit.row(u);
    for (Index d = 0; d < static_cast<Index>(logits.size()); ++d) {
      const Row pre = (p + device.row(d) + f.row(d) * features_w).cwiseMax(0.f);
      logits[static_cast<size_t>(d)] = scale * p.dot(device.row(d)) + (pre * out_w)(0, 0) + out_b +
                                       (f.row(d) * skip_w)(0, 0);
    }
  };
}

const nlohmann::json& pretrained_gdp_checkpoint() {
  static const nlohmann::json checkpoint = [] {
    const std::string_view text = pretrained_gdp_text();
    if (text.empty()) {
      throw Error("no pre-trained GDP checkpoint was embedded at build time: run bench/pretrain_gdp.py, which writes "
                  "policy/learned/pretrained/gdp.json, and rebuild");
    }
    return io::parse_json(text, "embedded policy/learned/pretrained/gdp.json");
  }();
  return checkpoint;
}

}  // namespace placelab::learned
