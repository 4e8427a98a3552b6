// Placements of classical placers as the start of a learned policy: GDP's warm start (the placement it
// imitates and searches from) and Placeto's episodes when they refine a placement instead of a random one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "policy/rl/trainer.h"

namespace placelab::learned {

/**
 * The placer names of `list` ("heft,metis"), checked: each a registered placer and none a learned
 * one; errors name the policy and the option (`policy` options: "`key`": ...).
 */
std::vector<std::string> classical_placers(std::string_view policy, std::string_view key, std::string_view list);

/** The best of some classical placements of a task, by the task's reward, per unit. */
struct ClassicalStart {
  std::vector<int32_t> units;  // device of each unit
  double reward = 0;
  size_t index = 0;            // which of the placers
};

/** Runs each of `placers` on `task` (one simulation each) and returns the best placement as units. */
ClassicalStart best_classical_start(const rl::Task& task, const std::vector<std::string>& placers,
                                    std::string_view policy);

}  // namespace placelab::learned
