// The learned policies as Placers of the registry: start from a checkpoint (or the pre-trained GDP),
// optionally train on the request's own graph through the request's simulator, and return the better of
// the policy's placement and the best rollout seen while training.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "policy/budget.h"
#include "policy/classic/annealing.h"
#include "policy/classic/units.h"
#include "policy/learned/learners.h"
#include "policy/rl/pg.h"
#include "policy/rl/trainer.h"

namespace placelab::learned {

namespace {

// Steps of training on the request's graph when a policy starts from scratch and no "steps" is given.
// (From a checkpoint or the pre-trained GDP the default is 0: zero-shot placement.) A Placeto step is a
// whole episode (one move per unit, each re-simulated), so it gets fewer.
int64_t default_steps(const std::string& name) { return name == "placeto" ? 10 : 100; }

// What the placer's options say, split from the policy's own options.
struct LearnedOptions {
  std::string checkpoint;
  bool pretrained = true;  // gdp without a checkpoint: start from the embedded pre-trained policy
  int64_t steps = -1;  // -1: the default for the starting point
  // Budgets (policy/budget.h) of the whole call, placing included, for comparisons at equal budgets; 0: none.
  double seconds = 0;       // "seconds", or "minutes" x 60
  int64_t simulations = 0;
  bool curve = false;  // report the best cost after every training step in the info (learning curves)
  // "train": fine-tune on the request's graph (steps), then place; "anneal": place with the policy, then
  // simulated annealing from the better of that and annealing's heuristics for the rest of the budget;
  // "train_anneal": train for `train_share` of the budget, then anneal from the better of what training found
  // and the heuristics for the rest.
  std::string search = "train";
  double train_share = 0.5;
  // The annealing searches' moves: "uniform" devices, or "policy": half of them drawn from the policy's
  // device preferences (rl::Learner::device_preferences), REGAL's policy-biased search.
  std::string proposals = "uniform";
  rl::RewardOptions reward;
  nlohmann::json policy = nlohmann::json::object();
};

LearnedOptions read_options(const std::string& name, const nlohmann::json& options) {
  const std::string where = fmt::format("placer {} options", name);
  const io::JsonNode root(options, where);
  root.expect_object();
  LearnedOptions out;
  const auto flag = [&](const std::string& key, const nlohmann::json& value) {
    if (!value.is_boolean()) root.at(key).fail("must be true or false");
    return value.get<bool>();
  };
  for (const auto& [key, value] : options.items()) {
    if (key == "checkpoint") {
      out.checkpoint = root.at(key).as_string();
    } else if (key == "pretrained" && name == "gdp") {
      out.pretrained = flag(key, value);
    } else if (key == "steps") {
      out.steps = root.at(key).as_int();
      if (out.steps < 0) root.at(key).fail("must be >= 0");
    } else if (key == "seconds" || key == "minutes") {
      if (options.contains("seconds") && options.contains("minutes"))
        root.fail("gives both \"seconds\" and \"minutes\"; give one time budget");
      out.seconds = root.at(key).as_amount() * (key == "minutes" ? 60 : 1);
    } else if (key == "simulations") {
      out.simulations = root.at(key).as_int();
      if (out.simulations < 1) root.at(key).fail("must be >= 1");
    } else if (key == "curve") {
      out.curve = flag(key, value);
    } else if (key == "search") {
      out.search = root.at(key).as_string();
      if (out.search != "train" && out.search != "anneal" && out.search != "train_anneal")
        root.at(key).fail("must be \"train\", \"anneal\" or \"train_anneal\"");
    } else if (key == "proposals") {
      out.proposals = root.at(key).as_string();
      if (out.proposals != "uniform" && out.proposals != "policy")
        root.at(key).fail("must be \"uniform\" or \"policy\"");
    } else if (key == "train_share") {
      out.train_share = root.at(key).as_number();
      if (!(out.train_share > 0 && out.train_share < 1)) root.at(key).fail("must be above 0 and below 1");
    } else if (key == "reward") {
      out.reward = rl::reward_options_from_json(value, where + ".reward");
    } else {
      out.policy[key] = value;  // the learner checks their values
    }
  }
  // Unknown keys, named against both lists (the learner's own error would list only its keys).
  const nlohmann::json learner_keys = rl::make_learner(name, nlohmann::json::object(), 0)->options();
  for (const auto& [key, value] : out.policy.items()) {
    if (learner_keys.contains(key)) continue;
    std::string known =
        "checkpoint, steps, simulations, seconds, minutes, curve, search, train_share, proposals, reward";
    if (name == "gdp") known += ", pretrained";
    for (const auto& [k, v] : learner_keys.items()) known += ", " + k;
    root.fail(fmt::format("unknown field \"{}\" (known fields: {})", key, known));
  }
  if (out.search == "anneal" && out.steps > 0)
    root.at("steps").fail("trains the policy, which \"search\": \"anneal\" does not; leave out one of them");
  if (options.contains("proposals") && out.search == "train")
    root.at("proposals").fail(
        "are the moves of the annealing searches; give \"search\": \"anneal\" or \"train_anneal\"");
  if (options.contains("train_share") && out.search != "train_anneal")
    root.at("train_share").fail("is the share of \"search\": \"train_anneal\" that trains; give that search");
  return out;
}

// "search": "anneal": the policy's placement (`placed`, or the learner's own when empty), or the best of
// annealing's heuristics when that is cheaper, starts simulated annealing, which spends the rest of the budget
// (policy/classic/annealing.h): the policy proposes where the search starts, the incremental moves refine it
// at a fraction of a rollout's cost.
policy::PlaceResult anneal_search(const policy::PlaceRequest& request, policy::Budget& budget, rl::Learner& learner,
                                  const rl::Task& task, const LearnedOptions& options, std::vector<int32_t> placed) {
  policy::AnnealingStart start{"policy", placed.empty() ? learner.place(task) : std::move(placed), 0};
  start.cost = policy::annealing_cost(request.simulator.simulate(start.placement), request.cluster());
  const double policy_cost = start.cost;
  policy::AnnealingStart classical = policy::best_annealing_start(request, policy::annealing_start_placers());
  if (classical.cost < start.cost) start = std::move(classical);
  policy::AnnealingSettings settings;
  settings.curve = options.curve;
  settings.keep_late_start = true;  // a placement in hand is returned, not lost to an error, when time ran out
  if (options.proposals == "policy") {
    std::vector<std::vector<float>> preferences = learner.device_preferences(task);
    if (preferences.empty())
      throw Error(fmt::format("placer {} options: \"proposals\": \"policy\" needs a policy with device preferences "
                              "(gdp with the schedule decoder); use \"uniform\"", learner.name()));
    settings.propose = [preferences = std::move(preferences)](int32_t unit, int32_t from,
                                                              std::span<const int32_t> allowed, std::mt19937_64& rng) {
      // Half the moves uniform (so every device stays reachable), half drawn from the policy's preferences.
      const std::vector<float>& p = preferences[static_cast<size_t>(unit)];
      double total = 0;
      if (!p.empty() && policy::uniform_unit(rng) < 0.5)
        for (int32_t d : allowed) total += d == from ? 0.0 : p[static_cast<size_t>(d)];
      if (total > 0) {
        double x = policy::uniform_unit(rng) * total;
        for (int32_t d : allowed) {
          if (d == from) continue;
          x -= p[static_cast<size_t>(d)];
          if (x < 0) return d;
        }
      }
      size_t k = static_cast<size_t>(policy::uniform_index(rng, static_cast<int32_t>(allowed.size()) - 1));
      if (allowed[k] >= from) ++k;
      return allowed[k];
    };
  }
  // Cooling over what the budget leaves (the incremental simulator's first run comes first), as annealing's.
  settings.steps = options.simulations > 0 ? options.simulations - budget.used() - 1 : options.seconds > 0 ? 0 : 1000;
  if (options.simulations > 0 && settings.steps < 1) {
    throw Error(fmt::format("placer {} options: \"simulations\" is {}, but the \"anneal\" search's start took {}; "
                            "give more", learner.name(), options.simulations, budget.used() + 1));
  }
  policy::PlaceResult result = policy::anneal(request, budget, start, settings);
  result.info["anneal_start"] = result.info["start"];
  result.info["policy_cost_s"] = policy_cost;
  return result;
}

// A learner of policy `name` restored from checkpoint `doc` (read from `origin`); options given with the
// placer override the saved ones (the learner rejects those that change its architecture on load).
std::unique_ptr<rl::Learner> restore(const std::string& name, const nlohmann::json& doc, const std::string& origin,
                                     const nlohmann::json& overrides, uint64_t seed) {
  rl::check_checkpoint(doc, origin);
  const std::string policy = doc["policy"].get<std::string>();
  rl::find_learner(policy, origin + ": policy");
  if (policy != name) {
    throw Error(fmt::format("{}: the checkpoint is of policy {}, not {}; place with --placer {}", origin, policy, name,
                            policy));
  }
  return rl::learner_from_checkpoint(doc, origin, overrides, seed);
}

class LearnedPlacer : public policy::Placer {
 public:
  explicit LearnedPlacer(std::string name) : name_(std::move(name)) {}

  policy::PlaceResult place(const policy::PlaceRequest& request) const override {
    const LearnedOptions options = read_options(name_, request.options);
    policy::Budget budget(request, options.simulations, options.seconds);
    std::unique_ptr<rl::Learner> learner;
    std::string start = "scratch", note;
    if (!options.checkpoint.empty()) {
      start = rl::checkpoint_file(options.checkpoint);
      learner = restore(name_, rl::read_checkpoint(options.checkpoint), start, options.policy, request.seed);
    } else if (name_ == "gdp" && options.pretrained) {
      const nlohmann::json* pretrained = nullptr;
      try {
        pretrained = &pretrained_gdp_checkpoint();
      } catch (const Error& e) {
        note = e.what();  // a build without the committed checkpoint: train from scratch, and say why
      }
      if (pretrained != nullptr) {
        learner = restore(name_, *pretrained, "the embedded pre-trained GDP checkpoint", options.policy, request.seed);
        start = "pretrained";
      }
    }
    int64_t steps = options.steps;
    if (steps < 0) {
      if ((options.seconds > 0 || options.simulations > 0) && options.search != "anneal") {
        steps = std::numeric_limits<int64_t>::max();  // the time or simulation budget decides
      } else {
        steps = start == "scratch" ? default_steps(name_) : 0;  // a checkpoint places zero-shot
      }
    }
    if (!learner) {
      const int64_t planned = steps == std::numeric_limits<int64_t>::max() ? 0 : steps;  // 0: unknown
      learner = rl::make_learner(name_, options.policy, request.seed, request.cluster().num_devices(), planned);
    }

    // The request's simulator is borrowed for the call: a non-owning shared_ptr.
    const std::shared_ptr<const sim::Simulator> simulator(std::shared_ptr<const sim::Simulator>(), &request.simulator);
    const rl::Task task = rl::make_task(fmt::format("{} on {}", request.graph().name(), request.cluster().name()),
                                        simulator, options.reward);
    // Kept aside for after training: the policy's placement, then comparing it with the best rollout.
    const int64_t placing = options.simulations > 0 ? learner->max_place_simulations(task) + 2 : 0;
    if (options.simulations > 0 && budget.used() + placing > options.simulations) {
      throw Error(fmt::format("placer {} options: \"simulations\" is {}, but placing alone takes up to {} (the "
                              "reward's {} reference placements, the policy's placement and the comparison with "
                              "the best rollout); give at least {}",
                              name_, options.simulations, budget.used() + placing, budget.used(),
                              budget.used() + placing));
    }
    budget.mark();
    if (options.search == "anneal") {
      policy::PlaceResult result = anneal_search(request, budget, *learner, task, options, {});
      result.info["policy"] = name_;
      result.info["start"] = start;
      result.info["search"] = "anneal";
      if (!note.empty()) result.info["note"] = note;
      return result;
    }
    rl::TrainSummary summary;
    const bool hybrid = options.search == "train_anneal";
    std::vector<double> curve, curve_wall, curve_elapsed;
    std::vector<int64_t> curve_simulations;
    if (steps > 0) {
      rl::TrainOptions train;
      train.steps = steps;
      train.seed = request.seed;
      // A step starts only when the budgets cover it and still the placing after it (policy::Budget); the
      // placing's time is forecast as one more step.
      train.before_step = [&](const rl::Task& t, int64_t step) {
        const int64_t runs = options.simulations > 0 ? learner->max_step_simulations(t, step) : 0;
        if (hybrid && ((options.simulations > 0 &&
                        static_cast<double>(budget.used() + runs) > options.train_share * options.simulations) ||
                       (options.seconds > 0 && budget.elapsed_s() > options.train_share * options.seconds)))
          return false;  // training's share is spent: the rest goes to annealing
        return budget.allows(runs, placing, 1);
      };
      const auto on_step = [&](const rl::LogEntry& entry) {
        budget.end_unit(false);  // a step cannot be taken back: the policy has learned from it
        request.check_interrupt();
        if (options.curve) {
          curve.push_back(entry.best_cost_s);
          curve_simulations.push_back(budget.used());
          curve_wall.push_back(entry.wall_s);
          curve_elapsed.push_back(budget.elapsed_s());
        }
        return true;
      };
      summary = rl::train(*learner, {task}, train, on_step, [&request](std::string_view status) { request.report(status); });
    }

    // The policy's own placement against the best rollout of training, under the same reward.
    std::vector<std::vector<int32_t>> candidates = {learner->place(task)};
    if (!summary.best_placement.empty() && !summary.best_placement[0].empty()) {
      candidates.push_back(summary.best_placement[0]);
    }
    const rl::Evaluation evaluation = rl::evaluate(task, candidates);
    budget.end_unit(false);
    const size_t pick = candidates.size() > 1 && evaluation.reward[1] > evaluation.reward[0] ? 1 : 0;
    if (hybrid) {
      policy::PlaceResult result = anneal_search(request, budget, *learner, task, options, candidates[pick]);
      result.info.update({{"policy", name_}, {"start", start}, {"search", "train_anneal"},
                          {"train_steps", summary.steps}, {"train_wall_s", summary.wall_s},
                          {"chosen", pick == 0 ? "policy" : "best_rollout"}});
      if (!note.empty()) result.info["note"] = note;
      if (options.curve) {  // training's curve, then annealing's, on the budget's clock
        nlohmann::json best = nlohmann::json::array(), sims = curve_simulations, wall = curve_elapsed;
        for (double c : curve) best.push_back(std::isfinite(c) ? nlohmann::json(c) : nlohmann::json(nullptr));
        for (auto [to, key] :
             {std::pair{&best, "curve_best_cost_s"}, {&sims, "curve_simulations"}, {&wall, "curve_wall_s"}})
          for (const nlohmann::json& v : result.info[key]) to->push_back(v);
        result.info["curve_best_cost_s"] = std::move(best);
        result.info["curve_simulations"] = std::move(sims);
        result.info["curve_wall_s"] = std::move(wall);
      }
      return result;
    }

    policy::PlaceResult result;
    result.device_of = std::move(candidates[pick]);
    result.info = {{"policy", name_},
                   {"start", start},
                   {"steps", summary.steps},
                   {"train_wall_s", summary.wall_s},
                   {"chosen", pick == 0 ? "policy" : "best_rollout"},
                   {"cost_s", evaluation.cost_s[pick]},
                   {"reference_s", task.reference_s},
                   {"objective", rl::objective_name(options.reward.objective)}};
    budget.report(result.info);
    if (pick == 1) result.info["best_step"] = summary.best_step[0];
    if (!note.empty()) result.info["note"] = note;
    // Infinity (no rollout fitted in memory yet) has no JSON form: null.
    if (options.curve) {
      nlohmann::json best = nlohmann::json::array();
      for (double c : curve) best.push_back(std::isfinite(c) ? nlohmann::json(c) : nlohmann::json(nullptr));
      result.info["curve_best_cost_s"] = std::move(best);
      result.info["curve_simulations"] = curve_simulations;
      result.info["curve_wall_s"] = curve_wall;
    }
    return result;
  }

 private:
  std::string name_;
};

}  // namespace

std::unique_ptr<policy::Placer> make_learned_placer(const std::string& name) {
  return std::make_unique<LearnedPlacer>(name);
}

}  // namespace placelab::learned
