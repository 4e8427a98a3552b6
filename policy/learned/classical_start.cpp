#include "policy/learned/classical_start.h"

#include <algorithm>

#include <fmt/format.h>

#include "graphs/error.h"
#include "policy/placer.h"
#include "policy/rl/pg.h"

namespace placelab::learned {

std::vector<std::string> classical_placers(std::string_view policy, std::string_view key, std::string_view list) {
  std::vector<std::string> names = policy::split_placer_names(list);
  for (const std::string& name : names) {
    try {
      policy::make_placer(name);
    } catch (const Error& e) {  // lists the known placers; say which option named it
      throw Error(fmt::format("placer {} options: \"{}\": {}", policy, key, e.what()));
    }
    if (rl::is_learned_policy(name))
      throw Error(fmt::format("placer {} options: \"{}\" names the learned placer \"{}\"; use classical ones such as "
                              "\"heft,metis\"", policy, key, name));
  }
  return names;
}

ClassicalStart best_classical_start(const rl::Task& task, const std::vector<std::string>& placers,
                                    std::string_view policy) {
  if (placers.empty()) throw Error(fmt::format("{}: no classical placer to start from", policy));
  const Problem& problem = *task.problem;
  std::vector<std::vector<int32_t>> candidates;
  for (const std::string& name : placers)
    candidates.push_back(policy::make_placer(name)->place(policy::PlaceRequest{*task.simulator}).device_of);
  const rl::Evaluation evaluation = rl::evaluate(task, candidates);
  ClassicalStart out;
  out.index = static_cast<size_t>(std::max_element(evaluation.reward.begin(), evaluation.reward.end()) -
                                  evaluation.reward.begin());
  out.reward = evaluation.reward[out.index];
  out.units.resize(static_cast<size_t>(problem.num_units()));
  for (int32_t u = 0; u < problem.num_units(); ++u) {
    const int32_t d = candidates[out.index][static_cast<size_t>(problem.units().ops(u)[0])];
    if (!problem.allowed()(u, d))
      throw Error(fmt::format("{}: placer \"{}\" put unit {} on device {}, which it may not use", policy,
                              placers[out.index], u, d));
    out.units[static_cast<size_t>(u)] = d;
  }
  return out;
}

}  // namespace placelab::learned
