// Speed of the simulator on a 50k-op graph (8-layer GNMT training from the zoo) on 8 GPUs: one full
// simulation (random and contiguous placements) against a bare topological sweep and against the same
// schedule computed in two lean loops with nothing else (no memory, critical path or statistics:
// bench/schedule_anchors.h), and in the leaner one with the engine's memory accounting, batch scaling over
// threads (wall and CPU time), incremental one-op moves (uniformly random from a random or the contiguous
// placement, Placeto-style sweeps in topological order, late ops), unit moves, rejected moves reverted by
// undo, and how much of the schedule one move changes. Results and the command are recorded in bench/results/sim.md.
//   build/<dir>/bench/bm_sim --benchmark_counters_tabular=true
#include <algorithm>
#include <bit>
#include <ctime>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <stdexcept>

#include <benchmark/benchmark.h>
#include <tbb/global_control.h>

#include "graphs/training.h"
#include "graphs/zoo/zoo.h"
#include "sim/engine.h"
#include "sim/placement.h"
#include "sim/presets.h"
#include "sim/trace.h"
#include "schedule_anchors.h"

namespace {

using namespace placelab;
using bench::ScheduleLean;
using bench::ScheduleOnly;

struct Setup {
  graphs::Graph graph;
  sim::Cluster cluster;
  std::unique_ptr<sim::Simulator> sim;
  std::vector<std::vector<int32_t>> random;  // random placements
  std::vector<int32_t> contiguous;           // topological order cut into 8 equal blocks
  std::vector<std::vector<int32_t>> all_placements() const {  // the random ones, then the contiguous one
    std::vector<std::vector<int32_t>> all = random;
    all.push_back(contiguous);
    return all;
  }
};

Setup& setup() {
  static Setup s = [] {
    Setup out;
    out.graph = graphs::expand_training(graphs::zoo::make_model("gnmt", {{"layers", 8}}));
    out.cluster = sim::make_preset("v100-nvlink-8");
    out.sim = std::make_unique<sim::Simulator>(out.graph, out.cluster);
    std::mt19937_64 rng(42);
    for (int i = 0; i < 64; ++i) out.random.push_back(sim::random_placement(*out.sim, rng));
    const int32_t n = out.graph.num_ops(), D = out.cluster.num_devices();
    out.contiguous.resize(n);
    for (graphs::OpId op = 0; op < n; ++op)
      out.contiguous[op] = static_cast<int32_t>(static_cast<int64_t>(out.graph.topo_rank(op)) * D / n);
    return out;
  }();
  return s;
}

void report(benchmark::State& state, int64_t sims) {
  const double ops = static_cast<double>(setup().graph.num_ops());
  state.counters["ops"] = ops;
  state.counters["ops_per_s"] = benchmark::Counter(ops * static_cast<double>(sims), benchmark::Counter::kIsRate);
}

// Simulates the random placements in turn, or the contiguous one, with `sim`.
void run_simulations(benchmark::State& state, const sim::Simulator& sim, bool random) {
  Setup& s = setup();
  auto scratch = sim.make_scratch();
  sim::SimResult result;
  size_t i = 0;
  for (auto _ : state) {
    sim.simulate(random ? s.random[i++ % s.random.size()] : s.contiguous, *scratch, result);
    benchmark::DoNotOptimize(result.step_time_s);
  }
  report(state, state.iterations());
}

void BM_SimulateRandom(benchmark::State& state) { run_simulations(state, *setup().sim, true); }
BENCHMARK(BM_SimulateRandom)->Unit(benchmark::kMillisecond);

void BM_SimulateContiguous(benchmark::State& state) { run_simulations(state, *setup().sim, false); }
BENCHMARK(BM_SimulateContiguous)->Unit(benchmark::kMillisecond);

// The anchor for the 2 ms target: bench::TopoSweep (schedule_anchors.h), a bare topological sweep.
void BM_FloorTopoSweep(benchmark::State& state) {
  Setup& s = setup();
  bench::TopoSweep sweep(*s.sim);
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(sweep.run(s.random[i++ % s.random.size()].data()));
  report(state, state.iterations());
}
BENCHMARK(BM_FloorTopoSweep)->Unit(benchmark::kMillisecond);


// Whether `schedule` (ScheduleOnly, ScheduleLean) starts every op when the engine does, on every placement
// (checked once per type).
template <class Schedule>
bool same_schedule_as_engine(Schedule& schedule) {
  static const bool same = [&] {
    Setup& s = setup();
    bench::StartTimes engine(s.graph.num_ops());
    std::vector<double> mine(s.graph.num_ops());
    for (const auto& placement : s.all_placements()) {
      s.sim->simulate(placement, &engine);
      schedule.run(placement.data(), mine.data());
      if (mine != engine.start_s) return false;
    }
    return true;
  }();
  return same;
}

// `Schedule` (checked against the engine first) on the random placements (state.range(0) == 0) or the
// contiguous one (1).
template <class Schedule>
void run_schedule(benchmark::State& state, const char* name) {
  Setup& s = setup();
  static Schedule schedule(*s.sim);
  if (!same_schedule_as_engine(schedule)) {
    const std::string why = std::string(name) + " starts some op at another time than the engine: it is not the same schedule";
    state.SkipWithError(why.c_str());
    return;
  }
  const int32_t* contiguous = s.contiguous.data();
  size_t i = 0;
  for (auto _ : state)
    benchmark::DoNotOptimize(schedule.run(state.range(0) == 0 ? s.random[i++ % s.random.size()].data() : contiguous));
  report(state, state.iterations());
}

void BM_ScheduleOnly(benchmark::State& state) { run_schedule<ScheduleOnly>(state, "ScheduleOnly"); }
BENCHMARK(BM_ScheduleOnly)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_ScheduleLean(benchmark::State& state) { run_schedule<ScheduleLean>(state, "ScheduleLean"); }
BENCHMARK(BM_ScheduleLean)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// ScheduleLean with the engine's memory accounting (each device's peak, exact): checked against the
// engine's peaks and step times on every placement first.
void BM_ScheduleLeanMemory(benchmark::State& state) {
  Setup& s = setup();
  static ScheduleLean schedule(*s.sim);
  static const bool same = [&] {
    std::vector<double> peak(s.cluster.num_devices());
    for (const auto& placement : s.all_placements()) {
      const sim::SimResult r = s.sim->simulate(placement);
      if (schedule.run_with_memory(placement.data(), peak.data()) != r.step_time_s || peak != r.device_peak_bytes) return false;
    }
    return true;
  }();
  if (!same) {
    state.SkipWithError("ScheduleLean with memory gives another step time or peak than the engine");
    return;
  }
  std::vector<double> peak(s.cluster.num_devices());
  size_t i = 0;
  for (auto _ : state)
    benchmark::DoNotOptimize(
        schedule.run_with_memory(state.range(0) == 0 ? s.random[i++ % s.random.size()].data() : s.contiguous.data(), peak.data()));
  report(state, state.iterations());
}
BENCHMARK(BM_ScheduleLeanMemory)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// The same with links sharing their bandwidth (max-min fair) instead of FIFO. The contiguous placement
// sends much over the few links between blocks: thousands of transfers share them at once.
const sim::Simulator& sharing_simulator() {
  static const sim::Simulator sharing(setup().graph, setup().cluster, sim::default_cost_model(),
                                      sim::SimOptions{.share_bandwidth = true});
  return sharing;
}

void BM_SimulateRandomSharing(benchmark::State& state) { run_simulations(state, sharing_simulator(), true); }
BENCHMARK(BM_SimulateRandomSharing)->Unit(benchmark::kMillisecond);

void BM_SimulateContiguousSharing(benchmark::State& state) { run_simulations(state, sharing_simulator(), false); }
BENCHMARK(BM_SimulateContiguousSharing)->Unit(benchmark::kMillisecond);

double process_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// 64 random placements per iteration over state.range(0) worker threads. Wall time shows the scaling
// where cores are free; cpu_ms_per_sim (CPU time of all threads per simulation) shows it independently
// of the machine's load: it stays flat when parallel runs do not slow each other down, and
// cpu_per_wall is how many cores the batch actually got.
void BM_Batch(benchmark::State& state) {
  Setup& s = setup();
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(state.range(0)));
  std::vector<sim::SimResult> results;
  s.sim->simulate_batch(s.random, results);  // per-thread scratch and results exist before timing
  double cpu_s = 0;
  for (auto _ : state) {
    const double cpu_before = process_cpu_s();
    s.sim->simulate_batch(s.random, results);
    cpu_s += process_cpu_s() - cpu_before;
    benchmark::DoNotOptimize(results.data());
  }
  const auto sims = state.iterations() * static_cast<int64_t>(s.random.size());
  report(state, sims);
  state.counters["cpu_ms_per_sim"] = cpu_s * 1e3 / static_cast<double>(sims);
  state.counters["cpu_per_wall"] = benchmark::Counter(cpu_s, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Batch)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// One-op moves (uniformly random op and device) re-simulated incrementally from saved states, starting
// from a random placement or from the contiguous one (a heuristic placer's output, where local search starts).
void incremental_moves(benchmark::State& state, const std::vector<int32_t>& start) {
  Setup& s = setup();
  sim::IncrementalSimulator inc(*s.sim, start, static_cast<int32_t>(state.range(0)));
  std::mt19937_64 rng(7);
  const auto n = static_cast<uint64_t>(s.graph.num_ops());
  double replayed = 0;
  for (auto _ : state) {
    auto op = static_cast<graphs::OpId>(rng() % n);
    auto device = static_cast<int32_t>(rng() % static_cast<uint64_t>(s.cluster.num_devices()));
    benchmark::DoNotOptimize(inc.move(op, device).step_time_s);
    replayed += inc.last_replayed_fraction();
  }
  state.counters["replayed"] = replayed / static_cast<double>(state.iterations());
  report(state, state.iterations());
}
void BM_IncrementalMove(benchmark::State& state) { incremental_moves(state, setup().random[0]); }
BENCHMARK(BM_IncrementalMove)->Arg(4)->Arg(8)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond);

void BM_IncrementalMoveContiguous(benchmark::State& state) { incremental_moves(state, setup().contiguous); }
BENCHMARK(BM_IncrementalMoveContiguous)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond);

// A placer's unit move (annealing, Placeto): all ops of a random colocation class (2-3 ops in this
// training graph: a forward op and its gradients) to a random device, op by op (state.range(0) == 0,
// as before group moves existed) or as one group move (1). Results are equal; time is per unit move.
std::vector<std::vector<graphs::OpId>> colocation_classes(const graphs::Graph& graph) {
  std::map<int32_t, std::vector<graphs::OpId>> by_class;
  for (graphs::OpId op = 0; op < graph.num_ops(); ++op)
    if (graph.colocation(op) != graphs::kNoClass) by_class[graph.colocation(op)].push_back(op);
  std::vector<std::vector<graphs::OpId>> classes;
  for (auto& [c, ops] : by_class) classes.push_back(std::move(ops));
  return classes;
}

void BM_IncrementalUnitMove(benchmark::State& state) {
  Setup& s = setup();
  const std::vector<std::vector<graphs::OpId>> classes = colocation_classes(s.graph);
  sim::IncrementalSimulator inc(*s.sim, s.random[0]);
  std::mt19937_64 rng(7);
  const bool group = state.range(0) == 1;
  for (auto _ : state) {
    const std::vector<graphs::OpId>& ops = classes[rng() % classes.size()];
    auto device = static_cast<int32_t>(rng() % static_cast<uint64_t>(s.cluster.num_devices()));
    if (group) {
      inc.move(ops, device);
    } else {
      for (graphs::OpId op : ops) inc.move(op, device);
    }
    benchmark::DoNotOptimize(inc.result().step_time_s);
  }
  state.counters["ops_per_move"] = static_cast<double>(s.graph.num_ops()) / static_cast<double>(classes.size());
}
BENCHMARK(BM_IncrementalUnitMove)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// A rejected local-search step (annealing at a low temperature): a random unit moves to a random other
// device and back, by moving it back (state.range(0) == 0, what annealing did before undo existed) or by
// undo() (1). Both end in the same state; time is per rejected step.
void BM_IncrementalRejectedMove(benchmark::State& state) {
  Setup& s = setup();
  const std::vector<std::vector<graphs::OpId>> classes = colocation_classes(s.graph);
  sim::IncrementalSimulator inc(*s.sim, s.random[0]);
  std::mt19937_64 rng(7);
  const auto D = static_cast<uint64_t>(s.cluster.num_devices());
  const bool undo = state.range(0) == 1;
  for (auto _ : state) {
    const std::vector<graphs::OpId>& ops = classes[rng() % classes.size()];
    const int32_t from = inc.placement()[ops[0]];
    const auto to = static_cast<int32_t>((static_cast<uint64_t>(from) + 1 + rng() % (D - 1)) % D);
    benchmark::DoNotOptimize(inc.move(ops, to).step_time_s);
    if (undo) {
      inc.undo();
    } else {
      inc.move(ops, from);
    }
  }
}
BENCHMARK(BM_IncrementalRejectedMove)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Placeto's episode: ops move to random devices one after another in topological order. A benchmark
// sees a few hundred moves, not a 52k-move episode, so consecutive moves step 101 ops along the order:
// the moved ops still advance through the graph, and the run samples all of it evenly.
void BM_IncrementalTopological(benchmark::State& state) {
  Setup& s = setup();
  sim::IncrementalSimulator inc(*s.sim, s.random[0]);
  std::mt19937_64 rng(7);
  const auto order = s.graph.topo_order();
  size_t i = 0;
  constexpr size_t kStride = 101;
  double replayed = 0;
  for (auto _ : state) {
    const graphs::OpId op = order[i % order.size()];
    i += kStride;
    auto device = static_cast<int32_t>(rng() % static_cast<uint64_t>(s.cluster.num_devices()));
    benchmark::DoNotOptimize(inc.move(op, device).step_time_s);
    replayed += inc.last_replayed_fraction();
  }
  state.counters["replayed"] = replayed / static_cast<double>(state.iterations());
  report(state, state.iterations());
}
BENCHMARK(BM_IncrementalTopological)->Unit(benchmark::kMillisecond);

// Moves of late ops: uniformly among the last state.range(0) percent of the topological order.
void BM_IncrementalLate(benchmark::State& state) {
  Setup& s = setup();
  sim::IncrementalSimulator inc(*s.sim, s.random[0]);
  std::mt19937_64 rng(7);
  const auto order = s.graph.topo_order();
  const auto late = static_cast<uint64_t>(order.size()) * static_cast<uint64_t>(state.range(0)) / 100;
  double replayed = 0;
  for (auto _ : state) {
    const graphs::OpId op = order[order.size() - 1 - rng() % late];
    auto device = static_cast<int32_t>(rng() % static_cast<uint64_t>(s.cluster.num_devices()));
    benchmark::DoNotOptimize(inc.move(op, device).step_time_s);
    replayed += inc.last_replayed_fraction();
  }
  state.counters["replayed"] = replayed / static_cast<double>(state.iterations());
  report(state, state.iterations());
}
BENCHMARK(BM_IncrementalLate)->Arg(10)->Arg(1)->Unit(benchmark::kMillisecond);

// Not a timing: how much of the schedule one random move really changes (ops whose start time differs
// from the unmoved run, as a fraction of all ops), from a random placement or the contiguous one. Any
// exact re-simulation has to redo at least those, so 1 / changed bounds the speedup of an incremental
// run that replays only what changed.
void move_footprint(benchmark::State& state, const std::vector<int32_t>& start) {
  Setup& s = setup();
  const int32_t n = s.graph.num_ops();
  auto starts = [&](std::span<const int32_t> place) {
    sim::TraceRecorder trace(*s.sim);
    s.sim->simulate(place, &trace);
    std::vector<double> start_s(static_cast<size_t>(n));
    for (const auto& e : trace.ops()) start_s[e.op] = e.start_s;
    return start_s;
  };
  const std::vector<double> base = starts(start);
  std::mt19937_64 rng(7);
  std::vector<double> changed;
  for (auto _ : state) {
    std::vector<int32_t> place = start;
    place[rng() % static_cast<uint64_t>(n)] = static_cast<int32_t>(rng() % static_cast<uint64_t>(s.cluster.num_devices()));
    const std::vector<double> moved = starts(place);
    int64_t differ = 0;
    for (int32_t op = 0; op < n; ++op) differ += moved[op] != base[op];
    changed.push_back(static_cast<double>(differ) / n);
  }
  // The mean bounds the average speedup; the quantiles show how uneven moves are.
  double sum = 0;
  for (double c : changed) sum += c;
  std::sort(changed.begin(), changed.end());
  auto quantile = [&](double q) { return changed[static_cast<size_t>(q * static_cast<double>(changed.size() - 1))]; };
  state.counters["changed"] = sum / static_cast<double>(changed.size());
  state.counters["changed_p25"] = quantile(0.25);
  state.counters["changed_median"] = quantile(0.5);
  state.counters["changed_p75"] = quantile(0.75);
}
void BM_MoveFootprint(benchmark::State& state) { move_footprint(state, setup().random[0]); }
BENCHMARK(BM_MoveFootprint)->Iterations(40)->Unit(benchmark::kMillisecond);

void BM_MoveFootprintContiguous(benchmark::State& state) { move_footprint(state, setup().contiguous); }
BENCHMARK(BM_MoveFootprintContiguous)->Iterations(40)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
