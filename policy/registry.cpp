// The table of placers. Adding a placer: implement Placer in its own file and add one row here.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "policy/placer.h"
#include "policy/classic/exact.h"
#include "policy/classic/throughput.h"
#include "policy/classic/units.h"
#include "policy/learned/learners.h"

namespace placelab::policy {

const std::vector<std::string>& fast_placers() {
  static const std::vector<std::string> names = {"single_device", "round_robin", "random", "human_expert", "metis",
                                                 "scotch",        "heft",        "m_topo", "m_etf",        "m_sct"};
  return names;
}

const std::vector<PlacerInfo>& placers() {
  static const std::vector<PlacerInfo> table = {
      {"dp", "optimal contiguous pipelined split (max-load) by the DP over ideals of Tarnawski et al. 2020", make_dp_placer},
      {"pipedream", "PipeDream's baseline as Tarnawski et al. ran it: linearise, then the max-load DP over prefixes", make_pipedream_placer},
      {"local_search", "Tarnawski et al.'s local search: steepest single colour-class moves for max-load, restarted (seeded)", make_local_search_placer},
      {"milp", "max-load integer program of Tarnawski et al. 2020 with CBC (contiguous or not), time limit and gap", make_milp_placer},
      {"single_device", "everything on the fastest device that holds the graph (the papers' 1-GPU row)", &make_single_device_placer},
      {"round_robin", "units in topological order dealt over the devices in turn", &make_round_robin_placer},
      {"random", "uniformly random device per colocation class (seeded)", &make_random_placer},
      {"human_expert", "the papers' expert rules per zoo model (layer-wise GNMT, one-GPU CNNs, balanced blocks)", &make_human_expert_placer},
      {"metis", "METIS k-way cut: compute-balanced by device speed, fewest bytes cut (GDP's baseline)", &make_metis_placer},
      {"scotch", "Scotch mapping onto a weighted complete graph (Placeto's and Tarnawski's baseline)", &make_scotch_placer},
      {"heft", "insertion-based HEFT list scheduling (Topcuoglu et al. 2002): earliest finish time", &make_heft_placer},
      {"m_topo", "Baechi m-TOPO: topological order filling devices under memory limits (Jeon et al. 2020)", &make_m_topo_placer},
      {"m_etf", "Baechi m-ETF: earliest task first under memory limits (Jeon et al. 2020)", &make_m_etf_placer},
      {"m_sct", "Baechi m-SCT: small-communication-time LP favourite children + m-ETF (Jeon et al. 2020)", &make_m_sct_placer},
      {"exact", "the optimal placement of the units (step time, memory as a constraint): branch and bound with the engine as judge", &make_exact_placer},
      {"annealing", "simulated annealing over one-class moves with incremental re-simulation (FlexFlow's MCMC)", &make_annealing_placer},
      {"gdp", "GDP: GraphSAGE + segment-recurrent attention, all nodes in one pass, PPO; pre-trained (Zhou et al.)", [] { return learned::make_learned_placer("gdp"); }},
      {"placeto", "Placeto: MDP of per-node moves, GNN over graph + placement, REINFORCE (Addanki et al. 2019)", [] { return learned::make_learned_placer("placeto"); }},
      {"hdp", "HDP: feed-forward grouper + attentional LSTM placer, REINFORCE (Mirhoseini et al. 2018)", [] { return learned::make_learned_placer("hdp"); }},
      {"hsdag", "HSDAG: coarsening + GNN over structural features + grouping policy, end to end (Duan et al. 2024)", [] { return learned::make_learned_placer("hsdag"); }},
  };
  return table;
}

std::unique_ptr<Placer> make_placer(std::string_view name) {
  std::string known;
  for (const auto& p : placers()) {
    if (p.name == name) return p.make();
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw Error(fmt::format("unknown placer \"{}\" (known placers: {})", name, known));
}

std::vector<std::string> split_placer_names(std::string_view text) {
  std::vector<std::string> names;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    std::string name(text.substr(begin, end - begin));
    std::erase(name, ' ');
    if (!name.empty()) names.push_back(std::move(name));
    begin = end + 1;
  }
  return names;
}

void check_options(std::string_view placer, const nlohmann::json& options,
                   std::initializer_list<std::string_view> known) {
  io::JsonNode(options, fmt::format("placer {} options", placer)).check_fields(known);
}

}  // namespace placelab::policy
