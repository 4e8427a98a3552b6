// The Placeto learner (see placeto.h and docs/learned.md "placeto").
// Legend: U = units, D = devices, H = hidden width, T = moves of an episode, F = constant node features.
#include "policy/learned/placeto.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "policy/classic/units.h"
#include "policy/learned/classical_start.h"
#include "policy/learned/learners.h"
#include "policy/nn/optim.h"
#include "policy/placer.h"
#include "policy/rl/pg.h"

namespace placelab::learned {

namespace ad = autodiff;
using ad::Tensor;

namespace {

// Constant node features: unit_x, pair_x of the unit's current device, visited, current.
constexpr int kNodeFeatures = kUnitFeatures + kPairFeatures + 2;
// Per-device features of a move: pair_x of the current unit on the device, whether the unit is there now,
// the device's share of the placed compute, its memory use over capacity, and the share of the unit's
// traffic (bytes to or from neighbour units) that is on the device.
constexpr int kMoveFeatures = kPairFeatures + 4;
// Memory over capacity is capped here so that badly out-of-memory devices do not dominate the input.
constexpr double kMaxMemoryRatio = 4;
// Tasks whose derived structures are cached (a trainer cycles a small family).
constexpr size_t kMaxCachedTasks = 64;
// embed_every = 0 (auto) spreads this many GNN passes over an episode: recomputing before every move makes
// an episode's tape grow as U^2 (a 2,783-unit NMT graph needed > 24 GB at 4 episodes).
constexpr int64_t kAutoEmbeddings = 64;
// A training step whose estimated tape exceeds this fails up front with the option that shrinks it.
constexpr double kMaxTapeBytes = 16.0 * (1ull << 30);

[[noreturn]] void fail_option(std::string_view key, const nlohmann::json& value, std::string_view expected) {
  throw Error(fmt::format("placeto options: \"{}\" is {}, expected {}", key, value.dump(), expected));
}

// Moves between two GNN passes of an episode of `moves` moves.
int64_t embed_interval(const PlacetoOptions& o, int64_t moves) {
  return o.embed_every > 0 ? o.embed_every : std::max<int64_t>(1, (moves + kAutoEmbeddings - 1) / kAutoEmbeddings);
}

// Throws before a training step whose tape would not fit: each GNN pass records about (3 + 5 rounds)
// [U, H] float tensors, and all of a step's episodes stay on the tape until the backward pass.
void check_tape_size(const PlacetoOptions& o, int64_t units, int64_t moves, const std::string& task) {
  const int64_t every = embed_interval(o, moves);
  const int64_t passes = (moves + every - 1) / every;
  const double bytes = static_cast<double>(o.episodes) * static_cast<double>(passes) * static_cast<double>(units) *
                       static_cast<double>(o.hidden) * static_cast<double>(3 + 5 * o.rounds) * sizeof(float);
  if (bytes > kMaxTapeBytes)
    throw Error(fmt::format("placeto: a training step on \"{}\" ({} units, {} GNN passes per episode, {} episodes) "
                            "would record about {:.0f} GiB of autodiff tape; set \"embed_every\" to {} or more "
                            "(or 0, automatic), or lower \"episodes\"",
                            task, units, passes, o.episodes, bytes / (1ull << 30),
                            static_cast<int64_t>(std::ceil(static_cast<double>(moves) * bytes / kMaxTapeBytes /
                                                           static_cast<double>(passes)))));
}

}  // namespace

PlacetoOptions placeto_options_from_json(const nlohmann::json& options) {
  policy::check_options("placeto", options,
                        {"hidden", "type_dim", "rounds", "episodes", "embed_every", "lr", "gamma", "baseline_decay",
                         "entropy", "grad_clip", "normalize", "initial"});
  PlacetoOptions o;
  auto positive = [&](std::string_view key, int64_t fallback, int64_t max_value = policy::kMaxCountOption) {
    const int64_t v = policy::option_int("placeto", options, key, fallback, max_value);
    if (v < 1) fail_option(key, options.at(std::string(key)), "an integer >= 1");
    return v;
  };
  o.hidden = positive("hidden", o.hidden, policy::kMaxWidthOption);
  o.type_dim = positive("type_dim", o.type_dim, policy::kMaxWidthOption);
  o.rounds = policy::option_int("placeto", options, "rounds", o.rounds);
  o.episodes = positive("episodes", o.episodes);
  o.embed_every = policy::option_int("placeto", options, "embed_every", o.embed_every);
  if (o.embed_every < 0) fail_option("embed_every", options.at("embed_every"), "an integer >= 0 (0: automatic)");
  o.lr = policy::option_number("placeto", options, "lr", o.lr);
  o.gamma = policy::option_number("placeto", options, "gamma", o.gamma);
  if (o.gamma > 1) fail_option("gamma", options.at("gamma"), "a number in [0, 1]");
  o.baseline_decay = policy::option_number("placeto", options, "baseline_decay", o.baseline_decay);
  if (o.baseline_decay >= 1) fail_option("baseline_decay", options.at("baseline_decay"), "a number in [0, 1)");
  o.entropy = policy::option_number("placeto", options, "entropy", o.entropy);
  o.grad_clip = policy::option_number("placeto", options, "grad_clip", o.grad_clip);
  if (auto it = options.find("normalize"); it != options.end()) {
    if (!it->is_boolean()) fail_option("normalize", *it, "true or false");
    o.normalize = it->get<bool>();
  }
  if (auto it = options.find("initial"); it != options.end()) {
    if (!it->is_string()) fail_option("initial", *it, "\"random\", \"single\" or classical placers such as \"heft,scotch\"");
    o.initial = it->get<std::string>();
    if (o.initial != "random" && o.initial != "single" && classical_placers("placeto", "initial", o.initial).empty())
      fail_option("initial", *it, "\"random\", \"single\" or classical placers such as \"heft,scotch\"");
  }
  return o;
}

nlohmann::json to_json(const PlacetoOptions& o) {
  return {{"hidden", o.hidden},
          {"type_dim", o.type_dim},
          {"rounds", o.rounds},
          {"episodes", o.episodes},
          {"embed_every", o.embed_every},
          {"lr", o.lr},
          {"gamma", o.gamma},
          {"baseline_decay", o.baseline_decay},
          {"entropy", o.entropy},
          {"grad_clip", o.grad_clip},
          {"normalize", o.normalize},
          {"initial", o.initial}};
}

// --- network ------------------------------------------------------------------------------------

/**
 * Node encoder: x0 = relu(W_in [features, type embedding, embedding of the current device]); each round
 * x = relu(W_r [x, mean over parents of x, mean over children of x]) (a down and an up pass at once).
 * Move scorer: q = W_c [x_c, parents of c, children of c, graph mean]; per device d,
 * k_d = W_k [device embedding, mean x of the units on d, move features]; logit_d = w^T relu(q + k_d).
 */
struct PlacetoLearner::Network {
  nn::Embedding type_embed;
  nn::Linear device_proj, input;
  std::vector<nn::Linear> rounds;
  nn::Linear context, device_key, out;

  Network(const PlacetoOptions& o, std::mt19937_64& rng)
      : type_embed(kOpTypeBuckets, o.type_dim, rng),
        device_proj(kDeviceFeatures, o.hidden, rng),
        input(kNodeFeatures + o.type_dim + o.hidden, o.hidden, rng),
        context(4 * o.hidden, o.hidden, rng),
        device_key(2 * o.hidden + kMoveFeatures, o.hidden, rng),
        out(o.hidden, 1, rng) {
    for (int64_t r = 0; r < o.rounds; ++r) rounds.emplace_back(3 * o.hidden, o.hidden, rng);
  }

  void collect(nn::ParamList<float>& params) const {
    type_embed.collect("type_embed", params);
    device_proj.collect("device_proj", params);
    input.collect("input", params);
    for (size_t r = 0; r < rounds.size(); ++r) rounds[r].collect(fmt::format("round{}", r), params);
    context.collect("context", params);
    device_key.collect("device_key", params);
    out.collect("out", params);
  }
};

/** What the learner derives once per task. */
struct PlacetoLearner::TaskData {
  std::shared_ptr<const Problem> problem;  // also keeps the cache key alive
  ad::CsrPtr successors;                   // transpose of Problem::predecessors()
  std::vector<int32_t> movable;            // units with a choice of device, in topological order
  std::vector<std::vector<int32_t>> allowed;  // allowed devices per unit, by index
  std::vector<std::vector<std::pair<int32_t, double>>> traffic;  // neighbour units and bytes exchanged
  std::vector<double> capacity_bytes;
  std::vector<int32_t> start;  // the best classical placement, when "initial" names placers (made once)
};

PlacetoLearner::TaskData& PlacetoLearner::task_data(const rl::Task& task) {
  if (!task.problem)
    throw Error(fmt::format("placeto: task \"{}\" has no problem (build it with rl::make_task)", task.name));
  for (const auto& data : cache_)
    if (data->problem == task.problem) return *data;
  auto data = std::make_shared<TaskData>();
  const Problem& p = *task.problem;
  const policy::Units& units = p.units();
  const graphs::Graph& g = p.simulator().graph();
  const int32_t n = p.num_units(), devices = p.num_devices();
  data->problem = task.problem;

  const ad::Csr& pred = *p.predecessors();
  std::vector<std::vector<int32_t>> children(n);
  for (int32_t u = 0; u < n; ++u)
    for (int32_t i = pred.offsets[u]; i < pred.offsets[u + 1]; ++i) children[pred.indices[i]].push_back(u);
  data->successors = std::make_shared<ad::Csr>(ad::Csr::from_lists(n, children));

  data->allowed.resize(n);
  for (int32_t u = 0; u < n; ++u) {
    for (int32_t d = 0; d < devices; ++d)
      if (p.allowed()(u, d)) data->allowed[u].push_back(d);
    if (data->allowed[u].size() > 1) data->movable.push_back(u);
  }

  data->traffic.resize(n);
  for (graphs::EdgeId e = 0; e < g.num_edges(); ++e) {
    const int32_t a = units.unit_of(g.edge_src(e)), b = units.unit_of(g.edge_dst(e));
    if (a == b) continue;
    for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
      auto& list = data->traffic[from];
      // An init-capture: Clang before 16 cannot capture a structured binding.
      auto it = std::find_if(list.begin(), list.end(), [other = to](const auto& entry) { return entry.first == other; });
      if (it == list.end()) list.emplace_back(to, g.edge_bytes(e));
      else it->second += g.edge_bytes(e);
    }
  }
  for (int32_t d = 0; d < devices; ++d)
    data->capacity_bytes.push_back(std::max(1.0, p.simulator().cluster().device(d).memory_bytes));

  if (cache_.size() >= kMaxCachedTasks) cache_.erase(cache_.begin());
  cache_.push_back(data);
  return *data;
}

// --- learner ------------------------------------------------------------------------------------

PlacetoLearner::PlacetoLearner(const PlacetoOptions& options, uint64_t seed)
    : options_(options), seed_(seed), rng_(seed) {
  net_ = std::make_unique<Network>(options_, rng_);
  net_->collect(params_);
  nn::AdamOptions adam;
  adam.lr = options_.lr;
  optimizer_ = std::make_unique<nn::Adam>(nn::tensors_of(params_), adam);
}

PlacetoLearner::~PlacetoLearner() = default;

std::vector<int32_t> PlacetoLearner::initial_placement(const rl::Task& task, std::mt19937_64& rng) {
  const Problem& p = *task.problem;
  if (options_.initial != "random" && options_.initial != "single") {
    // Every episode refines the best classical placement: the policy learns the moves that improve on it.
    std::vector<int32_t>& start = task_data(task).start;
    if (start.empty()) start = best_classical_start(task, policy::split_placer_names(options_.initial), "placeto").units;
    return start;
  }
  std::vector<int32_t> unit_device(p.num_units());
  for (int32_t u = 0; u < p.num_units(); ++u) {
    std::vector<int32_t> allowed;
    for (int32_t d = 0; d < p.num_devices(); ++d)
      if (p.allowed()(u, d)) allowed.push_back(d);
    const int32_t choices = static_cast<int32_t>(allowed.size());
    unit_device[u] = options_.initial == "single" ? allowed.front()
                                                  : allowed[static_cast<size_t>(policy::uniform_index(rng, choices))];
  }
  return unit_device;
}

namespace {

/** Node embeddings of one graph state and the summaries the scorer reads. */
struct Embedded {
  Tensor h;         // [U, H]
  Tensor parents;   // [U, H]: mean embedding of each unit's parents (0 for none)
  Tensor children;  // [U, H]
  Tensor graph;     // [1, H]
};

/** Placement bookkeeping of an episode, updated move by move. */
struct EpisodeState {
  std::vector<int32_t> unit_device;
  std::vector<double> load_s;       // per device: summed time of its units there
  std::vector<double> memory_bytes; // per device: summed unit memory
  double total_load_s = 0;
};

}  // namespace

PlacetoEpisode PlacetoLearner::run_episode(const rl::Task& task, std::vector<int32_t> unit_device,
                                           std::mt19937_64* rng, Tensor* step_logits, ad::Mask* step_mask) {
  const TaskData& data = task_data(task);
  const Problem& p = *task.problem;
  const policy::Units& units = p.units();
  const sim::Simulator& sim = p.simulator();
  const int32_t n = p.num_units(), devices = p.num_devices();
  const Network& net = *net_;
  if (static_cast<int32_t>(unit_device.size()) != n)
    throw Error(fmt::format("placeto: initial placement has {} units, the task \"{}\" has {}", unit_device.size(),
                            task.name, n));

  EpisodeState st;
  st.unit_device = std::move(unit_device);
  st.load_s.assign(devices, 0.0);
  st.memory_bytes.assign(devices, 0.0);
  for (int32_t u = 0; u < n; ++u) {
    const int32_t d = st.unit_device[u];
    if (d < 0 || d >= devices || !p.allowed()(u, d))
      throw Error(fmt::format("placeto: initial placement puts unit {} on device {}, which it may not use", u, d));
    st.load_s[d] += units.time_s(u, d);
    st.memory_bytes[d] += units.memory_bytes(u);
    st.total_load_s += units.time_s(u, d);
  }

  PlacetoEpisode ep;
  ep.initial = st.unit_device;
  sim::IncrementalSimulator inc(sim, p.expand(st.unit_device));
  ep.simulations = 1;
  auto score = [&](double& cost) {
    cost = rl::cost_s(sim, inc.placement(), inc.result(), task.reward);
    return rl::reward(sim, inc.placement(), inc.result(), task.reference_s, task.reward);
  };
  double current_reward = score(ep.initial_cost_s);
  ep.initial_reward = ep.best_reward = current_reward;
  ep.best_cost_s = ep.initial_cost_s;
  ep.best_fits = !inc.result().oom;
  ep.best_placement.assign(inc.placement().begin(), inc.placement().end());
  // The best placement is the cheapest that fits in memory; while none fits, the one of highest reward.
  auto improves = [&](double reward, double cost) {
    const bool fits = !inc.result().oom;
    if (fits != ep.best_fits) return fits;
    return fits ? cost < ep.best_cost_s : reward > ep.best_reward;
  };

  // Placement-independent inputs, once per episode.
  const Tensor type_e = net.type_embed.forward(p.unit_type());
  const Tensor device_e = ad::relu(net.device_proj.forward(Tensor::leaf(p.device_x())));

  auto embed = [&](int32_t current) {
    ad::MatrixF x(n, kNodeFeatures);
    for (int32_t u = 0; u < n; ++u) {
      x.row(u).head(kUnitFeatures) = p.unit_x().row(u);
      x.row(u).segment(kUnitFeatures, kPairFeatures) =
          p.pair_x().row(static_cast<ad::Index>(u) * devices + st.unit_device[u]);
      x(u, kUnitFeatures + kPairFeatures) = u < current ? 1.0f : 0.0f;
      x(u, kUnitFeatures + kPairFeatures + 1) = u == current ? 1.0f : 0.0f;
    }
    Tensor h = ad::relu(net.input.forward(
        ad::concat_cols<float>({Tensor::leaf(std::move(x)), type_e, ad::gather_rows(device_e, st.unit_device)})));
    for (const nn::Linear& round : net.rounds)
      h = ad::relu(round.forward(
          ad::concat_cols<float>({h, ad::segment_mean(h, p.predecessors()), ad::segment_mean(h, data.successors)})));
    return Embedded{h, ad::segment_mean(h, p.predecessors()), ad::segment_mean(h, data.successors), ad::mean(h, 0)};
  };

  auto logits_of = [&](const Embedded& e, int32_t c) {
    const std::vector<int32_t> at{c};
    const Tensor q = net.context.forward(ad::concat_cols<float>(
        {ad::gather_rows(e.h, at), ad::gather_rows(e.parents, at), ad::gather_rows(e.children, at), e.graph}));
    std::vector<std::vector<int32_t>> members(devices);
    for (int32_t u = 0; u < n; ++u) members[st.unit_device[u]].push_back(u);
    const auto on_device = std::make_shared<ad::Csr>(ad::Csr::from_lists(n, members));
    ad::MatrixF move(devices, kMoveFeatures);
    double traffic_total = 0;
    std::vector<double> traffic(devices, 0.0);
    for (auto [v, bytes] : data.traffic[c]) traffic[st.unit_device[v]] += bytes, traffic_total += bytes;
    for (int32_t d = 0; d < devices; ++d) {
      move.row(d).head(kPairFeatures) = p.pair_x().row(static_cast<ad::Index>(c) * devices + d);
      move(d, kPairFeatures) = st.unit_device[c] == d ? 1.0f : 0.0f;
      move(d, kPairFeatures + 1) = static_cast<float>(st.total_load_s > 0 ? st.load_s[d] / st.total_load_s : 0.0);
      move(d, kPairFeatures + 2) =
          static_cast<float>(std::min(kMaxMemoryRatio, st.memory_bytes[d] / data.capacity_bytes[d]));
      move(d, kPairFeatures + 3) = static_cast<float>(traffic_total > 0 ? traffic[d] / traffic_total : 0.0);
    }
    const Tensor k = net.device_key.forward(
        ad::concat_cols<float>({device_e, ad::segment_mean(e.h, on_device), Tensor::leaf(std::move(move))}));
    return ad::transpose(net.out.forward(ad::relu(k + q)));  // [1, D]
  };

  const int32_t steps = static_cast<int32_t>(data.movable.size());
  const int64_t every = embed_interval(options_, steps);
  std::vector<Tensor> logits_rows;
  if (step_mask) step_mask->resize(steps, devices);
  Embedded e;
  for (int32_t t = 0; t < steps; ++t) {
    const int32_t c = data.movable[t];
    if (t % every == 0) e = embed(c);
    const Tensor logits = logits_of(e, c);
    const ad::Mask allowed_row = p.allowed().row(c);
    const int32_t d = rng ? rl::sample_rows(logits.value(), &allowed_row, *rng).choice[0]
                          : rl::argmax_rows(logits.value(), &allowed_row)[0];
    if (step_logits) logits_rows.push_back(logits);
    if (step_mask) step_mask->row(t) = allowed_row;

    const int32_t from = st.unit_device[c];
    double cost = ep.costs_s.empty() ? ep.initial_cost_s : ep.costs_s.back();
    double reward = current_reward;
    if (d != from) {
      st.load_s[from] -= units.time_s(c, from);
      st.load_s[d] += units.time_s(c, d);
      st.total_load_s += units.time_s(c, d) - units.time_s(c, from);
      st.memory_bytes[from] -= units.memory_bytes(c);
      st.memory_bytes[d] += units.memory_bytes(c);
      st.unit_device[c] = d;
      inc.move(units.ops(c), d);
      ++ep.simulations;
      reward = score(cost);
    }
    ep.units.push_back(c);
    ep.devices.push_back(d);
    ep.rewards.push_back(reward - current_reward);
    ep.costs_s.push_back(cost);
    ep.step_times_s.push_back(inc.result().step_time_s);
    if (improves(reward, cost)) {
      ep.best_fits = !inc.result().oom;
      ep.best_reward = reward;
      ep.best_cost_s = cost;
      ep.best_placement.assign(inc.placement().begin(), inc.placement().end());
    }
    current_reward = reward;
  }
  if (step_logits && steps > 0) *step_logits = ad::concat_rows(logits_rows);
  ep.final_placement = st.unit_device;
  return ep;
}

PlacetoEpisode PlacetoLearner::greedy_episode(const rl::Task& task, std::vector<int32_t> initial_units) {
  ad::NoGradGuard no_grad;
  return run_episode(task, std::move(initial_units), nullptr, nullptr, nullptr);
}

PlacetoEpisode PlacetoLearner::sample_episode(const rl::Task& task, std::vector<int32_t> initial_units,
                                              std::mt19937_64& rng) {
  ad::NoGradGuard no_grad;
  return run_episode(task, std::move(initial_units), &rng, nullptr, nullptr);
}

std::vector<int32_t> PlacetoLearner::place(const rl::Task& task) {
  // The seed's own draw, so placing neither depends on nor disturbs the training RNG.
  std::mt19937_64 rng(seed_);
  return greedy_episode(task, initial_placement(task, rng)).best_placement;
}

int64_t PlacetoLearner::max_episode_simulations(const rl::Task& task, int64_t episodes) {
  const TaskData& data = task_data(task);
  const bool classical = options_.initial != "random" && options_.initial != "single";
  const int64_t start = classical && data.start.empty()
                            ? static_cast<int64_t>(policy::split_placer_names(options_.initial).size())
                            : 0;
  return start + episodes * (1 + static_cast<int64_t>(data.movable.size()));
}

int64_t PlacetoLearner::max_step_simulations(const rl::Task& task, int64_t /*step*/) {
  return max_episode_simulations(task, options_.episodes);
}

int64_t PlacetoLearner::max_place_simulations(const rl::Task& task) { return max_episode_simulations(task, 1); }

rl::StepStats PlacetoLearner::train_step(const rl::Task& task, int64_t /*step*/) {
  const TaskData& data = task_data(task);
  const size_t steps = data.movable.size();
  check_tape_size(options_, task.problem->num_units(), static_cast<int64_t>(steps), task.name);
  std::vector<double>& baseline = baseline_[task.name];
  std::vector<int64_t>& count = baseline_count_[task.name];
  baseline.resize(steps, 0.0);
  count.resize(steps, 0);

  rl::StepStats stats;
  const int64_t episodes = options_.episodes;
  const auto rows = static_cast<ad::Index>(episodes * static_cast<int64_t>(steps));
  std::vector<Tensor> logits(episodes);
  ad::Mask mask(rows, task.problem->num_devices());
  std::vector<int32_t> choices;
  std::vector<double> advantages(rows), return_sum(steps, 0.0);
  for (int64_t k = 0; k < episodes; ++k) {
    ad::Mask episode_mask;
    const PlacetoEpisode ep = run_episode(task, initial_placement(task, rng_), &rng_, &logits[k], &episode_mask);
    // Per-step returns, and advantages against the moving baselines of their step index.
    const size_t offset = static_cast<size_t>(k) * steps;
    double running = 0;
    for (size_t t = steps; t-- > 0;) {
      running = ep.rewards[t] + options_.gamma * running;
      advantages[offset + t] = running - (count[t] > 0 ? baseline[t] : 0.0);
      return_sum[t] += running;
    }
    if (steps > 0) mask.middleRows(static_cast<ad::Index>(offset), episode_mask.rows()) = episode_mask;
    choices.insert(choices.end(), ep.devices.begin(), ep.devices.end());

    const double final_reward = ep.initial_reward + std::accumulate(ep.rewards.begin(), ep.rewards.end(), 0.0);
    stats.reward_mean += final_reward / static_cast<double>(episodes);
    stats.cost_mean_s += (ep.costs_s.empty() ? ep.initial_cost_s : ep.costs_s.back()) / static_cast<double>(episodes);
    if (ep.best_fits && ep.best_cost_s < stats.best_cost_s) {
      stats.best_cost_s = ep.best_cost_s;
      stats.best_placement = ep.best_placement;
    }
    stats.rollouts += 1;
    stats.simulations += ep.simulations;
  }
  if (options_.normalize) advantages = rl::normalize(advantages);

  optimizer_->zero_grad();
  if (steps > 0) {
    const Tensor log_probs = ad::log_softmax_rows(ad::concat_rows(logits), &mask);
    const Tensor entropy = rl::entropy(log_probs);
    const Tensor pg = rl::reinforce_loss(ad::select_per_row(log_probs, choices), advantages);
    const Tensor loss = pg - entropy * static_cast<float>(options_.entropy);
    stats.loss = static_cast<double>(loss.item());
    stats.entropy = static_cast<double>(entropy.item());
    ad::backward(loss);
  }
  for (size_t t = 0; t < steps; ++t) {
    const double mean = return_sum[t] / static_cast<double>(episodes);
    baseline[t] = count[t] > 0 ? options_.baseline_decay * baseline[t] + (1 - options_.baseline_decay) * mean : mean;
    ++count[t];
  }
  if (options_.grad_clip > 0) nn::clip_grad_norm(optimizer_->params(), options_.grad_clip);
  optimizer_->step();
  optimizer_->zero_grad();
  return stats;
}

// --- state --------------------------------------------------------------------------------------

nlohmann::json PlacetoLearner::state() const {
  nlohmann::json baselines = nlohmann::json::object();
  for (const auto& [task, values] : baseline_)
    baselines[task] = {{"value", values}, {"count", baseline_count_.at(task)}};
  return {{"params", nn::parameters_to_json(params_)},
          {"optimizer", rl::optimizer_state(*optimizer_)},
          {"rng", rl::rng_state(rng_)},
          {"baselines", std::move(baselines)}};
}

void PlacetoLearner::load_state(const nlohmann::json& state) {
  auto field = [&](const nlohmann::json& j, const char* key, const std::string& where) -> const nlohmann::json& {
    if (!j.is_object() || !j.contains(key))
      throw Error(fmt::format("placeto state: {} lacks \"{}\" (not a placeto checkpoint?)", where, key));
    return j.at(key);
  };
  const nlohmann::json& params = field(state, "params", "the state");
  io::JsonNode(state, "placeto state").check_fields({"params", "optimizer", "rng", "baselines"});
  // Read everything that cannot fail half-way first.
  std::map<std::string, std::vector<double>> baseline;
  std::map<std::string, std::vector<int64_t>> baseline_count;
  const nlohmann::json& baselines = field(state, "baselines", "the state");
  if (!baselines.is_object()) throw Error("placeto state: \"baselines\" must be an object");
  for (const auto& [task, entry] : baselines.items()) {
    const std::string where = fmt::format("\"baselines\".\"{}\"", task);
    try {
      baseline[task] = field(entry, "value", where).get<std::vector<double>>();
      baseline_count[task] = field(entry, "count", where).get<std::vector<int64_t>>();
    } catch (const nlohmann::json::exception&) {
      throw Error(fmt::format("placeto state: {} must hold number arrays \"value\" and \"count\"", where));
    }
    if (baseline[task].size() != baseline_count[task].size())
      throw Error(fmt::format("placeto state: {} has {} values and {} counts", where, baseline[task].size(),
                              baseline_count[task].size()));
  }
  const nlohmann::json& rng_json = field(state, "rng", "the state");
  if (!rng_json.is_string()) throw Error("placeto state: \"rng\" must be a string");
  std::mt19937_64 rng;
  rl::load_rng_state(rng, rng_json.get<std::string>(), "placeto state: rng");

  // Parameters and optimiser: restore the old values if the optimiser state does not fit.
  std::vector<ad::MatrixF> old;
  for (const auto& param : params_) old.push_back(param.tensor.value());
  nn::parameters_from_json(params, "placeto state \"params\"", params_);
  try {
    rl::load_optimizer_state(*optimizer_, field(state, "optimizer", "the state"));
  } catch (...) {
    for (size_t i = 0; i < params_.size(); ++i) params_[i].tensor.mutable_value() = old[i];
    throw;
  }
  baseline_ = std::move(baseline);
  baseline_count_ = std::move(baseline_count);
  rng_ = rng;
}

std::unique_ptr<rl::Learner> make_placeto_learner(const nlohmann::json& options, uint64_t seed) {
  return std::make_unique<PlacetoLearner>(placeto_options_from_json(options), seed);
}

}  // namespace placelab::learned
