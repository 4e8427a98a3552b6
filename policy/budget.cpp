#include "policy/budget.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

#include "graphs/error.h"

namespace placelab::policy {

Budget::Budget(const PlaceRequest& request, int64_t simulations, double seconds)
    : request_(&request),
      simulations_(std::max<int64_t>(simulations, 0)),
      seconds_(std::max(seconds, 0.0)),
      runs_at_start_(request.simulator.runs()),
      start_s_(now()) {}

// PLACELAB_BUDGET_CLOCK=thread or process: budgets in CPU seconds of the calling thread or of the whole process
// (all its threads), for comparisons at equal time on a machine shared with other work (bench/wall_time.py).
double Budget::now() const {
  if (request_->clock) return request_->clock();
  static const clockid_t cpu = [] {
    const char* kind = std::getenv("PLACELAB_BUDGET_CLOCK");
    if (kind == nullptr || std::strcmp(kind, "wall") == 0) return clockid_t{-1};
    if (std::strcmp(kind, "thread") == 0) return CLOCK_THREAD_CPUTIME_ID;
    if (std::strcmp(kind, "process") == 0) return CLOCK_PROCESS_CPUTIME_ID;
    throw Error(fmt::format("PLACELAB_BUDGET_CLOCK is \"{}\"; use wall, thread or process", kind));
  }();
  if (cpu != clockid_t{-1}) {
    timespec t{};
    clock_gettime(cpu, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t Budget::used() const { return request_->simulator.runs() - runs_at_start_; }

double Budget::elapsed_s() const { return now() - start_s_; }

bool Budget::allows(int64_t runs, int64_t reserve_runs, int reserve_units) const {
  if (simulations_ > 0 && used() + runs + reserve_runs > simulations_) return false;
  return !(seconds_ > 0) || elapsed_s() + longest_unit_s_ * (1 + reserve_units) <= seconds_;
}

// Without a time budget the clock is left alone: no reads in a placer's inner loop.
void Budget::mark() {
  if (seconds_ > 0) result_s_ = last_end_s_ = elapsed_s();
}

bool Budget::end_unit(bool droppable) {
  if (!(seconds_ > 0)) return true;
  const double end = elapsed_s();
  longest_unit_s_ = std::max(longest_unit_s_, end - last_end_s_);
  last_end_s_ = end;
  if (droppable && end > seconds_) return false;
  result_s_ = end;
  return true;
}

void Budget::report(nlohmann::json& info) const {
  info["simulations"] = used();
  if (seconds_ > 0) info["seconds"] = result_s_;  // only then: without, the same seed gives the same info
}

}  // namespace placelab::policy
