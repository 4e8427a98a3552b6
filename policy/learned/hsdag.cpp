// HSDAG (Duan et al. 2024): chain-fusion coarsening of the unit graph, GCN node embeddings over
// structural features, grouping sampled from the embeddings, pooled group embeddings and a
// group-device pair policy; trained with PPO (or REINFORCE) through GroupedLearner (hdp.h).
// Legend: U = units, C = coarse nodes, G = grouper labels, Gn = non-empty groups, D = devices,
// H = hidden, S = structural features.
#include "policy/learned/hsdag.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "graphs/error.h"
#include "policy/learned/hdp.h"
#include "policy/learned/learners.h"
#include "policy/nn/graphsage.h"
#include "policy/nn/linear.h"

namespace placelab::learned {

namespace ad = autodiff;
using autodiff::Index;
using autodiff::Tensor;

UnitCoarsening fuse_unit_chains(const Problem& problem, int32_t max_chain) {
  if (max_chain < 1) throw Error(fmt::format("fuse_unit_chains: max_chain must be >= 1, got {}", max_chain));
  const int32_t n = problem.num_units();
  const ad::Csr& pred = *problem.predecessors();
  std::vector<std::vector<int32_t>> succ(static_cast<size_t>(n));
  for (int32_t u = 0; u < n; ++u)
    for (int32_t k = pred.offsets[u]; k < pred.offsets[u + 1]; ++k) succ[pred.indices[k]].push_back(u);
  const auto in_degree = [&](int32_t u) { return pred.offsets[u + 1] - pred.offsets[u]; };

  UnitCoarsening out;
  out.node_of.assign(static_cast<size_t>(n), -1);
  std::vector<std::vector<int32_t>> members;
  for (int32_t u = 0; u < n; ++u) {
    if (out.node_of[u] >= 0) continue;
    const int32_t node = static_cast<int32_t>(members.size());
    members.push_back({u});
    out.node_of[u] = node;
    for (int32_t cur = u; static_cast<int32_t>(members[node].size()) < max_chain;) {
      if (succ[cur].size() != 1) break;
      const int32_t next = succ[cur].front();
      if (out.node_of[next] >= 0 || in_degree(next) != 1 ||
          !(problem.allowed().row(cur) == problem.allowed().row(next)).all()) {
        break;
      }
      out.node_of[next] = node;
      members[node].push_back(next);
      cur = next;
    }
  }
  const int32_t nodes = static_cast<int32_t>(members.size());
  out.members = std::make_shared<ad::Csr>(ad::Csr::from_lists(n, members));

  // Coarse adjacency: edges between units of different nodes, deduplicated.
  std::vector<std::vector<int32_t>> neighbors(static_cast<size_t>(nodes)), preds(static_cast<size_t>(nodes));
  for (int32_t u = 0; u < n; ++u) {
    for (int32_t k = pred.offsets[u]; k < pred.offsets[u + 1]; ++k) {
      const int32_t a = out.node_of[pred.indices[k]], b = out.node_of[u];
      if (a == b) continue;
      preds[b].push_back(a);
      neighbors[a].push_back(b);
      neighbors[b].push_back(a);
    }
  }
  for (auto* lists : {&neighbors, &preds}) {
    for (auto& list : *lists) {
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
    }
  }
  out.neighbors = std::make_shared<ad::Csr>(ad::Csr::from_lists(nodes, neighbors));
  out.predecessors = std::make_shared<ad::Csr>(ad::Csr::from_lists(nodes, preds));
  return out;
}

namespace {

constexpr int32_t kTypeEmbed = 8;
/** Structural features of a coarse node: log in/out degree, log size, sin/cos of its position at 3 scales. */
constexpr int32_t kStructFeatures = 3 + kPositionFeatures;

/** What one call works on: the coarsening and its constant features (cheap: linear in the graph). */
struct Coarse {
  UnitCoarsening c;
  autodiff::CsrPtr propagation;  // GCN's normalised adjacency
  ad::MatrixF structure;         // [C, S]
  ad::MatrixF prior;             // [C, G]: the grouper's topological prior
};

class HsdagLearner final : public GroupedLearner {
 public:
  HsdagLearner(const nlohmann::json& options, uint64_t seed)
      : GroupedLearner("hsdag", options, {"max_chain", "gcn_layers"}, seed) {
    max_chain_ = static_cast<int32_t>(option_int("max_chain", 4));
    const auto layers = static_cast<int32_t>(option_int("gcn_layers", 2));
    opt_.algorithm = "ppo";
    const Index h = opt_.hidden;
    std::mt19937_64& rng = init_rng_;
    type_embed_ = nn::Embedding(kOpTypeBuckets, kTypeEmbed, rng);
    input_ = nn::Linear(kUnitFeatures + kTypeEmbed + kStructFeatures, h, rng);
    for (int32_t l = 0; l < layers; ++l) gcn_.emplace_back(h, h, rng);
    grouper_ = nn::Linear(h, opt_.groups, rng);
    group_ = nn::Linear(h, h, rng);
    device_ = nn::Linear(kDeviceFeatures, h, rng, false);
    device_slot_ = nn::Embedding(kDeviceSlots, h, rng);
    pair_ = nn::Linear(kPairFeatures, h, rng, false);
    score_ = nn::Linear(h, 1, rng);
    nn::ParamList<float> params;
    type_embed_.collect("type_embed", params);
    input_.collect("encoder.input", params);
    for (size_t l = 0; l < gcn_.size(); ++l) gcn_[l].collect(fmt::format("encoder.gcn{}", l), params);
    grouper_.collect("grouper", params);
    group_.collect("policy.group", params);
    device_.collect("policy.device", params);
    device_slot_.collect("policy.device_slot", params);
    pair_.collect("policy.pair", params);
    score_.collect("policy.score", params);
    set_params(std::move(params));
  }

 protected:
  std::vector<GroupedRollout> sample(const Problem& problem, int32_t count, bool greedy) override {
    ad::NoGradGuard no_grad;
    const Coarse coarse = coarsen(problem);
    const Tensor z = embed(problem, coarse);
    const Tensor group_logits = grouper_logits(z, coarse);
    std::vector<GroupedRollout> out(static_cast<size_t>(count));
    for (GroupedRollout& r : out) {
      const rl::Sampled labels = choose(group_logits.value(), nullptr, greedy);
      r.label_of = labels.choice;
      const Grouping node_groups = make_grouping(r.label_of, opt_.groups);
      r.unit_groups = compose_grouping(node_groups, *coarse.c.members, problem.num_units());
      const ad::Mask allowed = group_allowed(problem, r.unit_groups);
      const rl::Sampled devices = choose(device_logits(problem, z, node_groups, r.unit_groups).value(), &allowed, greedy);
      r.group_device = devices.choice;
      for (double lp : labels.logp) r.logp += lp;
      for (double lp : devices.logp) r.logp += lp;
    }
    return out;
  }

  std::pair<Tensor, Tensor> log_probs(const Problem& problem, const std::vector<GroupedRollout>& rollouts) override {
    const Coarse coarse = coarsen(problem);
    const Tensor z = embed(problem, coarse);
    const Tensor group_lp = ad::log_softmax_rows(grouper_logits(z, coarse));
    std::vector<Tensor> logp;
    Tensor entropy = rl::entropy(group_lp);
    for (const GroupedRollout& r : rollouts) {
      const Grouping node_groups = make_grouping(r.label_of, opt_.groups);
      const ad::Mask allowed = group_allowed(problem, r.unit_groups);
      const Tensor device_lp = ad::log_softmax_rows(device_logits(problem, z, node_groups, r.unit_groups), &allowed);
      logp.push_back(ad::add(rl::log_prob(group_lp, r.label_of), rl::log_prob(device_lp, r.group_device)));
      entropy = ad::add(entropy, ad::mul_scalar(rl::entropy(device_lp), 1.0f / static_cast<float>(rollouts.size())));
    }
    return {ad::concat_rows(logp), entropy};
  }

 private:
  Coarse coarsen(const Problem& problem) const {
    Coarse out{fuse_unit_chains(problem, max_chain_), nullptr, {}, {}};
    out.propagation = nn::gcn_csr(*out.c.neighbors);
    const int32_t nodes = out.c.nodes();
    const ad::Csr& m = *out.c.members;
    const ad::Csr& pred = *out.c.predecessors;
    std::vector<int32_t> out_degree(static_cast<size_t>(nodes), 0);
    for (int32_t idx : pred.indices) ++out_degree[idx];
    std::vector<double> position(static_cast<size_t>(nodes), 0.0);
    out.structure.setZero(nodes, kStructFeatures);
    for (int32_t v = 0; v < nodes; ++v) {
      const int32_t size = m.offsets[v + 1] - m.offsets[v];
      for (int32_t k = m.offsets[v]; k < m.offsets[v + 1]; ++k) position[v] += problem.unit_x()(m.indices[k], kPositionColumn);
      position[v] /= size;
      out.structure(v, 0) = static_cast<float>(std::log1p(pred.offsets[v + 1] - pred.offsets[v]));
      out.structure(v, 1) = static_cast<float>(std::log1p(out_degree[v]));
      out.structure(v, 2) = static_cast<float>(std::log1p(size));
    }
    out.structure.rightCols(kPositionFeatures) = positional_encoding(position);
    out.prior = block_prior(position, opt_.groups, opt_.block_prior);
    return out;
  }

  /** [C, H]: GCN embeddings of the coarse nodes (input projection plus a residual over the layers). */
  Tensor embed(const Problem& problem, const Coarse& coarse) const {
    const Tensor unit_in =
        ad::concat_cols<float>({Tensor::leaf(problem.unit_x()), type_embed_.forward(problem.unit_type())});
    const Tensor x = ad::concat_cols<float>(
        {ad::segment_mean(unit_in, coarse.c.members), Tensor::leaf(coarse.structure)});
    const Tensor h0 = ad::relu(input_.forward(x));
    Tensor h = h0;
    for (const nn::Gcn& layer : gcn_) h = ad::relu(layer.forward(h, coarse.propagation));
    return ad::add(h0, h);
  }

  /** [C, G]: the grouper's logits over the node embeddings plus the topological block prior. */
  Tensor grouper_logits(const Tensor& z, const Coarse& coarse) const {
    return ad::add(grouper_.forward(z), Tensor::leaf(coarse.prior));
  }

  /** [Gn, D]: score_(relu(group_(pooled z) + device_(device_x)_d + slot_d + pair_(pair features of g on d))). */
  Tensor device_logits(const Problem& problem, const Tensor& z, const Grouping& node_groups,
                       const Grouping& unit_groups) const {
    const int32_t groups = node_groups.groups(), devices = problem.num_devices();
    const Tensor g = group_.forward(ad::segment_mean(z, node_groups.members));
    const Tensor d = ad::add(device_.forward(Tensor::leaf(problem.device_x())), device_slot_.forward(device_slots(problem)));
    const Tensor p = pair_.forward(Tensor::leaf(group_pair_x(problem, unit_groups)));
    std::vector<Tensor> columns;
    for (int32_t dev = 0; dev < devices; ++dev) {
      std::vector<int32_t> rows(static_cast<size_t>(groups));
      for (int32_t k = 0; k < groups; ++k) rows[k] = k * devices + dev;
      const Tensor hidden = ad::relu(ad::add(ad::add(g, ad::slice_rows(d, dev, 1)), ad::gather_rows(p, rows)));
      columns.push_back(score_.forward(hidden));
    }
    return ad::concat_cols(columns);
  }

  int32_t max_chain_ = 4;
  nn::Embedding type_embed_, device_slot_;
  nn::Linear input_, grouper_, group_, device_, pair_, score_;
  std::vector<nn::Gcn> gcn_;
};

}  // namespace

std::unique_ptr<rl::Learner> make_hsdag_learner(const nlohmann::json& options, uint64_t seed) {
  return std::make_unique<HsdagLearner>(options, seed);
}

}  // namespace placelab::learned
