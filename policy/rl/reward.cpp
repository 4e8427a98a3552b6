// Rewards from the simulator's facts: the objective's cost, normalised by a reference and square-rooted
// (HDP's sqrt(run time)), minus an explicit penalty when memory is exceeded.
#include "policy/rl/reward.h"

#include <cmath>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "sim/pipeline.h"

namespace placelab::rl {

Objective objective_from_name(std::string_view name) {
  if (name == "step_time") return Objective::step_time;
  if (name == "throughput") return Objective::throughput;
  throw Error(fmt::format("unknown objective \"{}\" (known: step_time, throughput)", name));
}

std::string_view objective_name(Objective objective) {
  return objective == Objective::throughput ? "throughput" : "step_time";
}

RewardOptions reward_options_from_json(const nlohmann::json& options, const std::string& where) {
  const io::JsonNode root(options, where);
  root.expect_object();
  root.check_fields({"objective", "oom_penalty"});
  RewardOptions out;
  if (root.has("objective")) {
    const std::string name = root.at("objective").as_string();
    try {
      out.objective = objective_from_name(name);
    } catch (const Error& e) {
      root.at("objective").fail(e.what());
    }
  }
  if (root.has("oom_penalty")) out.oom_penalty = root.at("oom_penalty").as_amount();
  return out;
}

nlohmann::json to_json(const RewardOptions& options) {
  return {{"objective", objective_name(options.objective)}, {"oom_penalty", options.oom_penalty}};
}

Score score(const sim::Simulator& simulator, std::span<const int32_t> device_of, const sim::SimResult& result,
            const RewardOptions& options) {
  Score out;
  const sim::Cluster& cluster = simulator.cluster();
  for (int32_t d = 0; d < cluster.num_devices(); ++d) {
    const double capacity = cluster.device(d).memory_bytes;
    if (std::isfinite(capacity)) out.capacity_bytes += capacity;
  }
  if (options.objective == Objective::throughput) {
    const sim::MaxLoadResult load = sim::max_load(simulator, device_of);
    out.cost_s = load.max_load_s;
    out.oom = !load.fits;
    for (double e : load.excess_bytes) out.excess_bytes += e;
  } else {
    out.cost_s = result.step_time_s;
    out.oom = result.oom;
    for (double e : result.device_excess_bytes) out.excess_bytes += e;
  }
  return out;
}

double reward(const Score& score, double reference_s, const RewardOptions& options) {
  if (!(reference_s > 0) || !std::isfinite(reference_s)) {
    throw Error(fmt::format("reward: reference time {} must be positive and finite", reference_s));
  }
  double r = -std::sqrt(score.cost_s / reference_s);
  if (score.oom) {
    const double ratio = score.capacity_bytes > 0 ? score.excess_bytes / score.capacity_bytes : 0;
    r -= options.oom_penalty * (1 + ratio);
  }
  return r;
}

double cost_s(const sim::Simulator& simulator, std::span<const int32_t> device_of, const sim::SimResult& result,
              const RewardOptions& options) {
  if (options.objective == Objective::throughput) return sim::max_load(simulator, device_of).max_load_s;
  return result.step_time_s;
}

double reward(const sim::Simulator& simulator, std::span<const int32_t> device_of, const sim::SimResult& result,
              double reference_s, const RewardOptions& options) {
  return reward(score(simulator, device_of, result, options), reference_s, options);
}

}  // namespace placelab::rl
