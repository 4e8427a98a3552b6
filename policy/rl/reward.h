// Rewards of the learned placers, computed from the simulator's facts (the simulator itself never
// scores). This is the one place where a step time becomes a reward and memory excess a penalty.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sim/engine.h"

namespace placelab::rl {

/** What the policy is rewarded for. */
enum class Objective {
  step_time,   // one training/inference step (the makespan)
  throughput,  // pipelined: Tarnawski et al.'s max-load (time of the busiest device or link per micro-batch)
};

/** Objective by name ("step_time" or "throughput"); throws placelab::Error naming the known ones. */
Objective objective_from_name(std::string_view name);
/** "step_time" or "throughput". */
std::string_view objective_name(Objective objective);

struct RewardOptions {
  Objective objective = Objective::step_time;
  /**
   * Memory penalty: a placement whose devices exceed their memory gets
   * reward - oom_penalty * (1 + total excess bytes / total capacity bytes),
   * so any OOM is worse than every fitting placement of similar speed and a smaller excess is better.
   */
  double oom_penalty = 1.0;
};

/**
 * Reward options from JSON {"objective": NAME, "oom_penalty": x} (both optional); throws placelab::Error
 * naming `where` (e.g. "placer gdp options.reward") for unknown keys or bad values.
 */
RewardOptions reward_options_from_json(const nlohmann::json& options, const std::string& where);
/** {"objective": NAME, "oom_penalty": x}. */
nlohmann::json to_json(const RewardOptions& options);

/** What the reward is made of: the objective's cost and the memory excess under that objective's model. */
struct Score {
  double cost_s = 0;
  bool oom = false;
  double excess_bytes = 0;    // summed over devices
  double capacity_bytes = 0;  // summed over devices with a finite capacity
};
/**
 * The score of a simulated placement. step_time: makespan and the engine's memory excess;
 * throughput: max_load and its resident-memory excess (Tarnawski et al.'s memory model).
 */
Score score(const sim::Simulator& simulator, std::span<const int32_t> device_of, const sim::SimResult& result,
            const RewardOptions& options);
/** -sqrt(cost_s / reference_s) minus the memory penalty of `score` (see RewardOptions::oom_penalty). */
double reward(const Score& score, double reference_s, const RewardOptions& options);

/**
 * The objective's cost of a simulated placement, in seconds: the step time, or the max-load for the
 * throughput objective (computed from `device_of` on `simulator`).
 */
double cost_s(const sim::Simulator& simulator, std::span<const int32_t> device_of, const sim::SimResult& result,
              const RewardOptions& options);

/** -sqrt(cost_s / reference_s) minus the memory penalty; reference_s > 0 normalises across graphs. */
double reward(const sim::Simulator& simulator, std::span<const int32_t> device_of, const sim::SimResult& result,
              double reference_s, const RewardOptions& options);

}  // namespace placelab::rl
