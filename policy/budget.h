// A placer's budget of simulations and seconds (the options "simulations" and "seconds" of annealing, the
// learned placers and local search; docs/placers.md#budgets), counted from the start of its place() call:
// simulations on the request's simulator (sim::Simulator::runs), time on the request's clock.
//
// Work comes in units (a move, a training step, a descent step) whose simulations are known before they
// start: a unit starts only when at most that many simulations fit in what is left, and when it is expected
// to end in time, that is, when the time left covers the longest unit so far (once more for each unit of
// work kept aside for after; a unit's time runs from the end of the one before, so that the work between
// units counts too). So the simulations budget is never passed. Time can only be forecast: a unit
// that runs longer than every earlier one can end past the budget, and then a placer that can drop its
// result does (annealing reverts the move, local search its last step), so that the result, and the seconds
// it reports, stay within the budget.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "policy/placer.h"

namespace placelab::policy {

class Budget {
 public:
  /** A budget of `simulations` runs and `seconds` (0: no limit of that kind) for `request`, from now. */
  Budget(const PlaceRequest& request, int64_t simulations, double seconds);

  int64_t simulations() const { return simulations_; }
  double seconds() const { return seconds_; }
  /** Simulations run on the request's simulator since the start. */
  int64_t used() const;
  /** Seconds since the start on the request's clock. */
  double elapsed_s() const;
  /**
   * Whether a unit of at most `runs` simulations may start now, keeping `reserve_runs` simulations and the
   * time of `reserve_units` more units (as forecast) for the work that follows.
   */
  bool allows(int64_t runs, int64_t reserve_runs = 0, int reserve_units = 0) const;
  /**
   * A unit of work ends now: its time, since the previous unit ended (or mark()), makes the forecast of the
   * next ones. Returns false when it ended past the time budget and `droppable`: its caller drops its result
   * then. Otherwise the result is complete at this time (the seconds report() gives).
   */
  bool end_unit(bool droppable = true);
  /** The result so far is complete now (the setup before the first unit); units are timed from here. */
  void mark();
  /**
   * Adds "simulations" (used so far) to a placer's info and, with a time budget, "seconds": when the result
   * was complete (the end of the last unit kept).
   */
  void report(nlohmann::json& info) const;

 private:
  double now() const;

  const PlaceRequest* request_;
  int64_t simulations_;
  double seconds_;
  int64_t runs_at_start_;
  double start_s_;
  double last_end_s_ = 0;
  double longest_unit_s_ = 0;
  double result_s_ = 0;
};

}  // namespace placelab::policy
