// The table of learned policies. Adding one: implement rl::Learner in policy/learned/ and add a row.
#include <algorithm>

#include <fmt/format.h>

#include "graphs/error.h"
#include "policy/learned/learners.h"
#include "policy/rl/trainer.h"

namespace placelab::rl {

const std::vector<LearnerInfo>& learners() {
  static const std::vector<LearnerInfo> table = {
      {"gdp", "GraphSAGE + segment-recurrent attention, schedule-aware decoding, PPO + self-imitation (Zhou et al.)",
       learned::make_gdp_learner},
      {"hdp", "feed-forward grouper + attentional LSTM placer over groups, REINFORCE (Mirhoseini et al. 2018)",
       learned::make_hdp_learner, learned::hdp_run_defaults},
      {"placeto", "MDP of per-unit moves, GNN with placement features, REINFORCE (Addanki et al. 2019)",
       learned::make_placeto_learner},
      {"hsdag", "chain coarsening + GCN + grouping + group-device policy, PPO (Duan et al. 2024)",
       learned::make_hsdag_learner},
  };
  return table;
}

bool is_learned_policy(std::string_view name) {
  return std::any_of(learners().begin(), learners().end(), [&](const LearnerInfo& l) { return l.name == name; });
}

const LearnerInfo& find_learner(std::string_view name, std::string_view where) {
  std::string known;
  for (const auto& info : learners()) {
    if (info.name == name) return info;
    known += (known.empty() ? "" : ", ") + info.name;
  }
  throw Error(fmt::format("{}unknown learned policy \"{}\" (known: {})", where.empty() ? "" : fmt::format("{}: ", where),
                          name, known));
}

std::unique_ptr<Learner> make_learner(std::string_view name, const nlohmann::json& options, uint64_t seed) {
  return find_learner(name).make(options, seed);
}

std::unique_ptr<Learner> make_learner(std::string_view name, nlohmann::json options, uint64_t seed, int32_t devices,
                                      int64_t steps) {
  const LearnerInfo& info = find_learner(name);
  if (info.run_defaults && (options.is_null() || options.is_object())) {
    if (options.is_null()) options = nlohmann::json::object();
    info.run_defaults(options, devices, steps);
  }
  return info.make(options, seed);
}

}  // namespace placelab::rl
