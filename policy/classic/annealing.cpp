// Simulated annealing over placements (FlexFlow's MCMC search, Jia et al. 2019): from the best of a few
// fast heuristics, move one colocation class to another device, re-simulate incrementally (only the
// events after the moved ops' inputs are replayed), and accept by the Metropolis rule. Returns the best
// placement seen, so it is never worse than its start. Cost: step time, doubled (and more) when out of memory.
// The temperature cools geometrically to 1% of its start over the steps, or over the time budget when only
// that is given. anneal() is the search from any start (annealing.h), which the learned placers reuse.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "graphs/error.h"
#include "policy/classic/annealing.h"
#include "policy/classic/units.h"

namespace placelab::policy {

namespace {

double cost_of(const sim::SimResult& r, const sim::Cluster& c) {
  if (!r.oom) return r.step_time_s;
  double excess = 0, capacity = 0;
  for (int32_t d = 0; d < c.num_devices(); ++d) excess += r.device_excess_bytes[d], capacity += c.device(d).memory_bytes;
  return r.step_time_s * (2 + excess / std::max(capacity, 1.0));
}

// The Metropolis rule on incremental moves: accept a move of cost c from `current` at temperature t when
// c <= current, else when u < exp(-(c - current) / t) for u drawn then, uniform in [0, 1). With
// `stop_early`, a replay stops as soon as its step time (a lower bound of the cost) is sure to exceed the
// cost at which the rule rejects: first `current` (the move is worse, so u is drawn, where a full replay
// would draw it), then the cost where exp(-(c - current) / t) falls to u. So the moves accepted, the draws
// and the result are those of full replays, bit for bit; a rejected move replays only until it is certain.
struct Metropolis {
  std::mt19937_64* rng;
  const sim::Cluster* cluster;
  bool stop_early = true;
  int64_t stopped = 0;  // moves rejected before their replay ended

  // The move's cost when accepted, nothing when rejected (undo() follows then).
  std::optional<double> judge(sim::IncrementalSimulator& state, std::span<const graphs::OpId> ops, int32_t to,
                              double current, double t) {
    constexpr double kNever = std::numeric_limits<double>::infinity();
    const sim::SimResult* r = state.move_within(ops, to, stop_early ? current : kNever);
    double u = -1;  // not drawn yet
    if (!r && t > 0) {  // worse: the draw is due
      u = uniform_unit(*rng);
      // The least cost found to be rejected; every higher one is too (exp is monotone). u = 0: none.
      double limit = current - t * std::log(u);
      while (std::isfinite(limit) && u < std::exp(-(limit - current) / t))
        limit = std::nextafter(limit + limit * 1e-12, kNever);
      r = state.resume(limit);
    }
    if (!r) {  // worse, and past the draw's cost (or no uphill moves at zero temperature)
      ++stopped;
      return std::nullopt;
    }
    const double cost = cost_of(*r, *cluster);
    if (cost - current <= 0) return cost;
    if (!(t > 0)) return std::nullopt;
    if (u < 0) u = uniform_unit(*rng);
    return u < std::exp(-(cost - current) / t) ? std::optional<double>(cost) : std::nullopt;
  }
};

// The heuristics whose best placement is the start (each simulated once).
constexpr std::array<const char*, 6> kStarts = {"single_device", "human_expert", "metis", "scotch", "heft", "m_topo"};

class AnnealingPlacer final : public Placer {
 public:
  PlaceResult place(const PlaceRequest& request) const override {
    check_options("annealing", request.options,
                  {"steps", "simulations", "seconds", "temperature", "curve", "stop_early"});
    // The budget counts every simulation: the starts, the incremental simulator's first run, then one per move.
    constexpr int64_t kSetupRuns = static_cast<int64_t>(kStarts.size()) + 1;
    const int64_t simulations = option_int("annealing", request.options, "simulations", 0);
    if (simulations > 0 && simulations <= kSetupRuns)
      throw Error(fmt::format("placer annealing options: \"simulations\" is {}, but starting takes {} (six heuristics "
                              "simulated, then the incremental simulator's first run); give at least {}",
                              simulations, kSetupRuns, kSetupRuns + 1));
    const double seconds = option_number("annealing", request.options, "seconds", 0);
    AnnealingSettings settings;
    // With a simulations budget the moves default to what it leaves, with only a time budget to what the time
    // allows (0): either way the cooling is spread over the budget, so that it completes in it.
    settings.steps = option_int("annealing", request.options, "steps",
                                simulations > 0 ? simulations - kSetupRuns : seconds > 0 ? 0 : 1000);
    Budget budget(request, simulations, seconds);
    settings.temperature = option_number("annealing", request.options, "temperature", 0.002);
    settings.curve = option_bool("annealing", request.options, "curve", false);
    // Exact either way (same moves, same result); off, every move replays to the end (for comparisons).
    settings.stop_early = option_bool("annealing", request.options, "stop_early", true);

    const AnnealingStart start = best_annealing_start(request, kStarts);
    request.report(fmt::format("start {} at {:.6g} s", start.name, start.cost));
    return anneal(request, budget, start, settings);
  }
};

}  // namespace

double annealing_cost(const sim::SimResult& result, const sim::Cluster& cluster) { return cost_of(result, cluster); }

std::span<const char* const> annealing_start_placers() { return kStarts; }

AnnealingStart best_annealing_start(const PlaceRequest& request, std::span<const char* const> placers) {
  AnnealingStart best;
  bool any = false;
  for (const char* name : placers) {
    PlaceRequest sub{request.simulator, nlohmann::json::object(), request.seed, {}};
    std::vector<int32_t> p = make_placer(name)->place(sub).device_of;
    const double cost = cost_of(request.simulator.simulate(p), request.cluster());
    if (!any || cost < best.cost) best = {name, std::move(p), cost}, any = true;
  }
  return best;
}

PlaceResult anneal(const PlaceRequest& request, Budget& budget, const AnnealingStart& start,
                   const AnnealingSettings& settings) {
  const sim::Simulator& sim = request.simulator;
  const sim::Cluster& c = request.cluster();
  Units units(sim);
  std::vector<std::vector<int32_t>> allowed(units.num_units());
  std::vector<int32_t> movable;  // units with a choice
  for (int32_t u = 0; u < units.num_units(); ++u) {
    allowed[u] = units.allowed_devices(u);
    std::sort(allowed[u].begin(), allowed[u].end());
    if (allowed[u].size() > 1) movable.push_back(u);
  }
  sim::IncrementalSimulator state(sim, start.placement);
  budget.mark();
  const double seconds = budget.seconds();
  const bool late = seconds > 0 && budget.elapsed_s() > seconds;
  if (late && !settings.keep_late_start)
    throw Error(fmt::format("annealing: starting (the start placement, {}, then the incremental simulator's first run) "
                            "took {:.3g} s, more than the \"seconds\" budget of {} s; raise it",
                            start.name, budget.elapsed_s(), seconds));
  // steps = 0: the moves the time allows, the temperature cooling over the time left after the start.
  const bool by_time = settings.steps <= 0;
  if (by_time && !(seconds > 0))
    throw Error("annealing: cooling over the time budget (steps 0) needs \"seconds\"; give steps or seconds");
  const int64_t steps = by_time ? std::numeric_limits<int64_t>::max() : settings.steps;
  const double setup_s = by_time ? budget.elapsed_s() : 0;
  std::mt19937_64 rng(request.seed);
  Metropolis metropolis{&rng, &c, settings.stop_early};
  const double start_cost = start.cost;
  double current = start_cost, best = start_cost;
  std::vector<int32_t> best_placement = start.placement;
  int64_t done = 0, accepted = 0, improved = 0;
  int reported = 0;  // tenths of the cooling reported
  // Best cost after each move, as the learned placers report their learning curves (equal-budget plots).
  std::vector<double> curve_best, curve_wall;
  std::vector<int64_t> curve_simulations;
  for (; !late && done < steps && !movable.empty() && budget.allows(1); ++done) {
    request.check_interrupt();
    const int32_t u = movable[uniform_index(rng, static_cast<int32_t>(movable.size()))];
    const int32_t from = state.placement()[units.ops(u)[0]];
    int32_t to = 0;
    if (settings.propose) {
      to = settings.propose(u, from, allowed[u], rng);
    } else {  // uniform over the allowed devices other than `from` (the list is sorted and holds `from`)
      size_t k = static_cast<size_t>(uniform_index(rng, static_cast<int32_t>(allowed[u].size()) - 1));
      if (allowed[u][k] >= from) ++k;
      to = allowed[u][k];
    }
    // Geometric cooling from `temperature` (a fraction of the start cost) to 1% of it over the steps (or time).
    const double progress = by_time ? std::clamp((budget.elapsed_s() - setup_s) / std::max(seconds - setup_s, 1e-9),
                                                 0.0, 1.0)
                                    : static_cast<double>(done) / static_cast<double>(steps);
    const double t = settings.temperature * start_cost * std::pow(0.01, progress);
    // The Metropolis rule, decided as soon as the replay can tell (see Metropolis).
    const std::optional<double> cost = metropolis.judge(state, units.ops(u), to, current, t);
    if (!budget.end_unit()) {  // ended past the time budget: the move is dropped
      state.undo();
      break;
    }
    if (cost) {
      current = *cost;
      ++accepted;
      if (*cost < best) {
        best = *cost;
        best_placement.assign(state.placement().begin(), state.placement().end());
        ++improved;
      }
    } else {
      state.undo();  // exact, with no second replay, also after a replay stopped early
    }
    if (settings.curve) {
      curve_best.push_back(best);
      curve_wall.push_back(budget.elapsed_s());
      curve_simulations.push_back(budget.used());
    }
    const int tenth = by_time       ? static_cast<int>(progress * 10)
                      : steps >= 10 ? static_cast<int>((done + 1) / (steps / 10))
                                    : 0;
    if (tenth > reported) {
      reported = tenth;
      request.report(by_time ? fmt::format("{} moves, {}0% of the time: best {:.6g} s", done + 1, tenth, best)
                             : fmt::format("step {} of {}: best {:.6g} s", done + 1, steps, best));
    }
  }
  nlohmann::json info = {{"start", start.name},  {"start_cost_s", start_cost}, {"best_cost_s", best},
                         {"steps", done},         {"accepted", accepted},      {"improvements", improved},
                         {"stopped_early", metropolis.stopped}, {"cooling", by_time ? "seconds" : "steps"}};
  if (late) info["late_start"] = true;
  budget.report(info);
  if (settings.curve) {
    info["curve_best_cost_s"] = curve_best;
    info["curve_wall_s"] = curve_wall;
    info["curve_simulations"] = curve_simulations;  // every simulation so far, the starts' included
  }
  return {std::move(best_placement), std::move(info)};
}

std::unique_ptr<Placer> make_annealing_placer() { return std::make_unique<AnnealingPlacer>(); }

}  // namespace placelab::policy
