// The CPU replay backend: each plan device is a oneTBB arena (threads_per_device threads, its first
// thread pinned to a core when there are enough), each ordered device pair with transfers a copy
// thread; ops run real kernels sized to their FLOPs or bytes, in the plan's order, after their
// dependencies. See docs/replay.md.
#pragma once

#include "sim/replay/executor.h"

namespace placelab::sim::replay::cpu {

/** Runs `plan` options.warmup + options.repeats times on CPU threads and measures every run. */
ReplayResult replay(const ReplayPlan& plan, const ReplayOptions& options = {});

}  // namespace placelab::sim::replay::cpu
