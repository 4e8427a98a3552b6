// Simulated annealing's search from a given start (annealing.cpp), shared by the `annealing` placer and the
// learned placers' annealing search ("search": "anneal", docs/learned.md), which starts it from the policy's
// placement and may draw its moves' devices from the policy.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "policy/budget.h"
#include "policy/placer.h"

namespace placelab::policy {

/** Annealing's cost: the step time, times 2 + excess / capacity when out of memory. */
double annealing_cost(const sim::SimResult& result, const sim::Cluster& cluster);

/** The heuristics whose best placement starts the `annealing` placer (each simulated once). */
std::span<const char* const> annealing_start_placers();

/** A placement to anneal from, with its name and annealing cost. */
struct AnnealingStart {
  std::string name;
  std::vector<int32_t> placement;
  double cost = 0;
};

/** The best of `placers`' placements on the request (each run with no options and simulated once). */
AnnealingStart best_annealing_start(const PlaceRequest& request, std::span<const char* const> placers);

/**
 * Draws the device a move sends unit `unit` to, among `allowed` (sorted, holding `from`), other than `from`.
 * Empty: uniform over them.
 */
using DeviceProposal = std::function<int32_t(int32_t unit, int32_t from, std::span<const int32_t> allowed,
                                             std::mt19937_64& rng)>;

struct AnnealingSettings {
  /** Moves; the temperature cools over them. 0: as many as the budget's seconds allow, cooling over that time. */
  int64_t steps = 1000;
  double temperature = 0.002;  // start temperature, a fraction of the start's cost
  bool stop_early = true;      // stop a rejected move's replay once its rejection is certain (same result)
  bool curve = false;          // best cost, wall time and simulations after each move in the info
  DeviceProposal propose;      // where a move sends its unit (empty: uniform)
  // When the start alone took the whole time budget: return the start (no moves, info "late_start") instead
  // of an error. For searches that already hold a placement worth keeping (GDP's policy, its training's best).
  bool keep_late_start = false;
};

/**
 * Anneals from `start` within `budget` (whose setup the caller has marked): moves one random unit at a time,
 * re-simulated incrementally, accepted by the Metropolis rule. Returns the best placement seen (never worse
 * than the start) and the info of the `annealing` placer (docs/placers.md), "simulations" and "seconds" too.
 */
PlaceResult anneal(const PlaceRequest& request, Budget& budget, const AnnealingStart& start,
                   const AnnealingSettings& settings);

}  // namespace placelab::policy
