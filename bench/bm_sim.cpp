// Speed of the simulator on a 50k-op graph (8-layer GNMT training from the zoo) on 8 GPUs: one full
// simulation (random and contiguous placements), batch scaling over threads, incremental one-op moves. Results and the command
// are recorded in bench/results/sim.md.
//   build/<dir>/bench/bm_sim --benchmark_counters_tabular=true
#include <algorithm>
#include <memory>
#include <random>

#include <benchmark/benchmark.h>
#include <tbb/global_control.h>

#include "graphs/training.h"
#include "graphs/zoo/zoo.h"
#include "sim/engine.h"
#include "sim/placement.h"
#include "sim/presets.h"

namespace {

using namespace placelab;

struct Setup {
  graphs::Graph graph;
  sim::Cluster cluster;
  std::unique_ptr<sim::Simulator> sim;
  std::vector<std::vector<int32_t>> random;  // random placements
  std::vector<int32_t> contiguous;           // topological order cut into 8 equal blocks
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

void BM_SimulateRandom(benchmark::State& state) {
  Setup& s = setup();
  auto scratch = s.sim->make_scratch();
  sim::SimResult result;
  size_t i = 0;
  for (auto _ : state) {
    s.sim->simulate(s.random[i++ % s.random.size()], *scratch, result);
    benchmark::DoNotOptimize(result.step_time_s);
  }
  report(state, state.iterations());
}
BENCHMARK(BM_SimulateRandom)->Unit(benchmark::kMillisecond);

void BM_SimulateContiguous(benchmark::State& state) {
  Setup& s = setup();
  auto scratch = s.sim->make_scratch();
  sim::SimResult result;
  for (auto _ : state) {
    s.sim->simulate(s.contiguous, *scratch, result);
    benchmark::DoNotOptimize(result.step_time_s);
  }
  report(state, state.iterations());
}
BENCHMARK(BM_SimulateContiguous)->Unit(benchmark::kMillisecond);

// The same with links sharing their bandwidth (max-min fair) instead of FIFO.
void BM_SimulateRandomSharing(benchmark::State& state) {
  Setup& s = setup();
  static const sim::Simulator sharing(s.graph, s.cluster, sim::default_cost_model(), sim::SimOptions{.share_bandwidth = true});
  auto scratch = sharing.make_scratch();
  sim::SimResult result;
  size_t i = 0;
  for (auto _ : state) {
    sharing.simulate(s.random[i++ % s.random.size()], *scratch, result);
    benchmark::DoNotOptimize(result.step_time_s);
  }
  report(state, state.iterations());
}
BENCHMARK(BM_SimulateRandomSharing)->Unit(benchmark::kMillisecond);

// 64 random placements per iteration over state.range(0) worker threads.
void BM_Batch(benchmark::State& state) {
  Setup& s = setup();
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    auto results = s.sim->simulate_batch(s.random);
    benchmark::DoNotOptimize(results.data());
  }
  report(state, state.iterations() * static_cast<int64_t>(s.random.size()));
}
BENCHMARK(BM_Batch)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// One-op moves (uniformly random op and device) re-simulated incrementally from saved states.
void BM_IncrementalMove(benchmark::State& state) {
  Setup& s = setup();
  sim::IncrementalSimulator inc(*s.sim, s.random[0], static_cast<int32_t>(state.range(0)));
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
BENCHMARK(BM_IncrementalMove)->Arg(4)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
