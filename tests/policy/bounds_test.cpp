// Step time bounds (policy/classic/bounds.h): never above the step time of any completion of a partial
// placement, checked by brute force on random tiny instances across seeds; each part on hand-computed
// examples; interchangeable devices found from the cluster's structure, not assumed.
#include <algorithm>
#include <cmath>
#include <tuple>

#include <catch2/catch.hpp>

#include "graphs/zoo/zoo.h"
#include "policy/classic/bounds.h"
#include "sim/presets.h"
#include "tiny_instances.h"

using namespace placelab;
using policy::StepBound;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The least step time over the fitting completions of `partial` (-1: free), from the brute-force table.
double best_completion(const testing::BruteForce& bf, const std::vector<int32_t>& partial) {
  double best = kInf;
  for (size_t i = 0; i < bf.placements.size(); ++i) {
    bool match = true;
    for (size_t u = 0; u < partial.size() && match; ++u) match = partial[u] < 0 || partial[u] == bf.placements[i][u];
    if (match) best = std::min(best, bf.step_s[i]);
  }
  return best;
}

graphs::Graph chain_graph(const std::vector<std::pair<double, double>>& times, double bytes,
                          const std::vector<std::string>& pins = {}) {
  graphs::GraphBuilder b("chain");
  for (size_t i = 0; i < times.size(); ++i) {
    graphs::OpSpec op{.name = fmt::format("op{}", i), .type = "Op"};
    op.measured_s = {{"gpu", times[i].first}, {"cpu", times[i].second}};
    if (i < pins.size()) op.pinned_kind = pins[i];
    b.add_op(std::move(op));
    if (i > 0) b.add_edge(static_cast<graphs::OpId>(i - 1), static_cast<graphs::OpId>(i), bytes);
  }
  return std::move(b).build();
}

// A GPU and a CPU (and more GPUs) on one switch, each link `bandwidth` B/s and `latency_s`.
sim::Cluster gpu_cpu(int32_t gpus, double gpu_memory, double bandwidth = 100, double latency_s = 0.5) {
  sim::ClusterSpec spec{.name = "gpu_cpu"};
  auto device = [](std::string name, std::string kind, double memory) {
    sim::Device d;
    d.name = std::move(name);
    d.kind = std::move(kind);
    d.peak_flops_per_s = d.memory_bandwidth_bytes_per_s = 1;
    d.memory_bytes = memory;
    return d;
  };
  for (int32_t g = 0; g < gpus; ++g) spec.devices.push_back(device(fmt::format("gpu{}", g), "gpu", gpu_memory));
  spec.devices.push_back(device("cpu", "cpu", 1e12));
  for (const auto& d : spec.devices) {
    sim::Link l{.name = d.name + "-sw", .end_a = d.name, .end_b = "sw", .bandwidth_bytes_per_s = bandwidth};
    l.latency_s = latency_s / 2;
    spec.links.push_back(l);
  }
  return sim::Cluster(std::move(spec));
}

}  // namespace

TEST_CASE("policy::StepBound: never above the step time of any completion that fits (brute force)", "[policy][bounds]") {
  int64_t partials = 0, tight = 0, ruled_out = 0, pruned = 0;
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    const testing::TinyInstance inst = testing::tiny_instance(seed, 3, 6, 3);
    sim::Simulator sim(inst.graph, inst.cluster, sim::default_cost_model(), inst.options);
    policy::Units units(sim);
    const testing::BruteForce bf = testing::brute_force(units);
    StepBound bound(units);
    INFO("seed " << seed << ", " << units.num_units() << " units on " << units.num_devices() << " devices");
    // Every partial placement: each unit free (-1) or on a device its pins allow.
    const int32_t U = units.num_units(), D = units.num_devices();
    std::vector<int32_t> p(U, -1);
    while (true) {
      bool pinned_ok = true;
      for (int32_t u = 0; u < U; ++u) pinned_ok = pinned_ok && (p[u] < 0 || units.allowed(u, p[u]));
      if (pinned_ok) {
        const double best = best_completion(bf, p);
        const policy::BoundParts b = bound.partial(p);
        INFO("partial " << nlohmann::json(p).dump() << ": bound " << b.bound_s << " (path " << b.path_s << ", device "
                        << b.device_s << ", work " << b.work_s << "), best completion " << best);
        REQUIRE(b.bound_s <= best * (1 + 1e-9));
        if (!b.fits) {
          REQUIRE(best == kInf);
          ++ruled_out;
        }
        ++partials;
        tight += std::isfinite(best) && b.bound_s >= best * (1 - 1e-9);
        // With a cutoff: a bound of the completions below it, and domains that keep every such completion.
        for (const double cutoff : {bf.best_s * 1.02, best * 1.001, bf.best_s * (1 + 1e-12)}) {
          if (!std::isfinite(cutoff)) continue;
          const policy::BoundParts c = bound.partial(p, cutoff);
          INFO("cutoff " << cutoff << ": bound " << c.bound_s);
          if (best < cutoff) REQUIRE(c.bound_s <= best * (1 + 1e-9));
          if (c.bound_s >= cutoff) continue;
          for (size_t i = 0; i < bf.placements.size(); ++i) {
            if (!(bf.step_s[i] < cutoff)) continue;
            bool completes = true;
            for (int32_t u = 0; u < U; ++u) completes = completes && (p[u] < 0 || p[u] == bf.placements[i][u]);
            if (!completes) continue;
            for (int32_t u = 0; u < U; ++u) REQUIRE(((bound.domain(u) >> bf.placements[i][u]) & 1) == 1);
          }
          pruned += c.bound_s >= cutoff;
        }
      }
      int32_t u = 0;
      while (u < U && ++p[u] == D) p[u++] = -1;
      if (u == U) break;
    }
    // The pooled bound of whole placements, as placelab compare prints it, too.
    REQUIRE(policy::lower_bound(sim).bound_s <= bf.best_s * (1 + 1e-9));
  }
  // Not a vacuous bound: it is often exact, and memory rules partial placements out.
  INFO(partials << " partial placements: bound equal to the best completion for " << tight << ", ruled out by memory "
                << ruled_out);
  CHECK(tight > partials / 10);
  CHECK(ruled_out > 0);
}

TEST_CASE("policy::StepBound: path, device and work parts on hand-computed examples", "[policy][bounds]") {
  SECTION("path: a cut forced by a pin pays its transfer, or the op runs slowly") {
    // op0 must run on the CPU (2 s); op1 takes 1 s on a GPU, 5 s on the CPU; 100 bytes cross in 0.5 + 1 s.
    graphs::Graph g = chain_graph({{1, 2}, {1, 5}}, 100, {"cpu"});
    sim::Cluster c = gpu_cpu(1, 1e12);
    sim::Simulator sim(g, c);
    const policy::BoundParts b = policy::lower_bound(sim);
    CHECK(b.path_s == Approx(2 + 1.5 + 1));  // min(2 + 1.5 + 1, 2 + 5)
    CHECK(b.bound_s == Approx(4.5));
    CHECK(sim.simulate(std::vector<int32_t>{1, 0}).step_time_s == Approx(4.5));  // and it is reached
  }
  SECTION("work: the fractional split of independent units, then memory pushes work to the slow device") {
    // Ten independent ops of 1 s on the GPU, 4 s on the CPU: x on the CPU, 4x = 10 - x, T = 8.
    graphs::GraphBuilder b("ten");
    for (int i = 0; i < 10; ++i) {
      graphs::OpSpec op{.name = fmt::format("op{}", i), .type = "Op", .param_bytes = 10};
      op.measured_s = {{"gpu", 1.0}, {"cpu", 4.0}};
      b.add_op(std::move(op));
    }
    graphs::Graph g = std::move(b).build();
    sim::Cluster roomy = gpu_cpu(1, 1e12);
    CHECK(policy::lower_bound(sim::Simulator(g, roomy)).work_s == Approx(8).epsilon(1e-9));
    // The GPU holds 5 ops' parameters: at least 5 run on the CPU, 20 s.
    sim::Cluster tight = gpu_cpu(1, 50);
    CHECK(policy::lower_bound(sim::Simulator(g, tight)).work_s == Approx(20).epsilon(1e-9));
  }
  SECTION("device: ops placed on one device run one after another, after their heads") {
    // op0 (1 s) feeds op1 and op2 (2 s each); placed all on gpu0, 5 s; op1 alone elsewhere could end at 3.
    graphs::GraphBuilder b("fork");
    for (int i = 0; i < 3; ++i) {
      graphs::OpSpec op{.name = fmt::format("op{}", i), .type = "Op"};
      op.measured_s = {{"gpu", i == 0 ? 1.0 : 2.0}, {"cpu", 10.0}};
      b.add_op(std::move(op));
    }
    b.add_edge(0, 1, 0);
    b.add_edge(0, 2, 0);
    graphs::Graph g = std::move(b).build();
    sim::Cluster c = gpu_cpu(2, 1e12);
    sim::Simulator sim(g, c);
    policy::Units units(sim);
    StepBound bound(units);
    CHECK(bound.whole().bound_s == Approx(3));  // critical path: 1 + 2
    const policy::BoundParts all_on_0 = bound.partial(std::vector<int32_t>{0, 0, 0});
    CHECK(all_on_0.device_s == Approx(5));
    CHECK(sim.simulate(std::vector<int32_t>{0, 0, 0}).step_time_s == Approx(5));
  }
  SECTION("link: two transfers into one device queue on its link") {
    // a on gpu0 and b on the CPU (1 s each) each send 200 bytes at 100 B/s to c and e on gpu1: the link into
    // gpu1 carries them one after the other, 1-3 and 3-5, and e ends at 6; paths and devices say 4 and 5.
    graphs::GraphBuilder b("join");
    for (const char* name : {"a", "b", "c", "e"}) {
      graphs::OpSpec op{.name = name, .type = "Op"};
      op.measured_s = {{"gpu", 1.0}, {"cpu", 1.0}};
      b.add_op(std::move(op));
    }
    b.add_edge(0, 2, 200);
    b.add_edge(1, 3, 200);
    graphs::Graph g = std::move(b).build();
    sim::Cluster c = gpu_cpu(2, 1e12, 100, 0);
    sim::Simulator sim(g, c);
    policy::Units units(sim);
    StepBound bound(units);
    const std::vector<int32_t> p = {0, 2, 1, 1};
    const policy::BoundParts parts = bound.partial(p);
    CHECK(parts.path_s == Approx(4));
    CHECK(parts.device_s == Approx(5));
    CHECK(parts.link_s == Approx(6));
    CHECK(sim.simulate(p).step_time_s == Approx(6));
  }
  SECTION("memory: an op whose parameters, output and inputs exceed a device never goes there") {
    graphs::GraphBuilder b("big");
    graphs::OpSpec a{.name = "a", .type = "Op", .output_bytes = 30};
    a.measured_s = {{"gpu", 1.0}, {"cpu", 1.0}};
    graphs::OpSpec big{.name = "big", .type = "Op", .output_bytes = 10, .param_bytes = 50};
    big.measured_s = {{"gpu", 1.0}, {"cpu", 9.0}};
    b.add_op(a);
    b.add_op(big);
    b.add_edge(0, 1, 30);
    graphs::Graph g = std::move(b).build();
    // The GPU holds 80 bytes: 50 + 10 + the 30-byte input is 90, so `big` runs on the CPU.
    sim::Cluster c = gpu_cpu(1, 80);
    sim::Simulator sim(g, c);
    policy::Units units(sim);
    StepBound bound(units);
    CHECK_FALSE(bound.allowed(1, 0));
    CHECK(bound.whole().bound_s == Approx(1 + 9));
    CHECK(sim.simulate(std::vector<int32_t>{0, 0}).oom);
  }
}

TEST_CASE("policy::StepBound: activations kept for the backward pass count while the ops between run", "[policy][bounds]") {
  // f1 -> f2 -> loss -> b2 -> b1, each forward op colocated with its gradient, which reads its output. On one
  // device of 45 bytes every op's own working set fits (f2: 30 + 10), but while `loss` runs the device holds
  // f1's output (kept for b1), f2's (its input) and its own: 50.
  graphs::GraphBuilder b("train");
  const std::vector<std::tuple<const char*, double, int32_t>> ops = {
      {"f1", 30, 0}, {"f2", 10, 1}, {"loss", 10, graphs::kNoClass}, {"b2", 1, 1}, {"b1", 1, 0}};
  for (const auto& [name, out, cls] : ops) {
    graphs::OpSpec op{.name = name, .type = "Op", .output_bytes = out, .colocation = cls};
    op.measured_s = {{"gpu", 1.0}, {"cpu", 1.0}};
    b.add_op(std::move(op));
  }
  for (graphs::OpId i = 0; i < 4; ++i) b.add_edge(i, i + 1, 1);
  b.add_edge(0, 4, 30);
  b.add_edge(1, 3, 10);
  graphs::Graph g = std::move(b).build();
  sim::Cluster c = gpu_cpu(1, 45);
  sim::ClusterSpec spec = c.spec();
  spec.devices[1].memory_bytes = 45;
  sim::Cluster small(spec);
  sim::Simulator sim(g, small);
  policy::Units units(sim);
  StepBound bound(units);
  const std::vector<int32_t> together(units.num_units(), 0);
  CHECK(sim.simulate(units.expand(together)).oom);
  CHECK_FALSE(bound.partial(together).fits);
  CHECK(bound.whole().fits);  // split, it fits
}

TEST_CASE("policy::StepBound: interchangeable devices come from the cluster's structure", "[policy][bounds]") {
  graphs::Graph g = chain_graph({{1, 2}, {1, 2}, {1, 2}}, 10);
  SECTION("two GPUs on equal links are one class, the CPU another") {
    sim::Cluster c = gpu_cpu(2, 1e12);
    sim::Simulator sim(g, c);
    policy::Units units(sim);
    StepBound bound(units);
    CHECK(std::vector<int32_t>(bound.symmetry_class().begin(), bound.symmetry_class().end()) ==
          std::vector<int32_t>{0, 0, 1});
  }
  SECTION("a slower link, a smaller memory or another kind splits them") {
    sim::ClusterSpec spec = gpu_cpu(2, 1e12).spec();
    spec.links[1].bandwidth_bytes_per_s = 50;
    sim::Cluster slower(spec);
    sim::Simulator s1(g, slower);
    policy::Units u1(s1);
    CHECK(StepBound(u1).symmetry_class()[1] == 1);
    spec = gpu_cpu(2, 1e12).spec();
    spec.devices[1].memory_bytes = 5e11;
    sim::Cluster smaller(spec);
    sim::Simulator s2(g, smaller);
    policy::Units u2(s2);
    CHECK(StepBound(u2).symmetry_class()[1] == 1);
  }
  SECTION("DGX-1's cube mesh: GPUs are not all alike pairwise (NVLink to some, PCIe to others)") {
    sim::Cluster c = sim::make_preset("v100-nvlink-8");
    sim::Simulator sim(g, c);
    policy::Units units(sim);
    StepBound bound(units);
    const auto cls = bound.symmetry_class();
    CHECK(*std::max_element(cls.begin(), cls.end()) > 0);
    sim::Cluster a100 = sim::make_preset("a100-8");  // NVSwitch: every pair alike
    sim::Simulator s2(g, a100);
    policy::Units u2(s2);
    StepBound b2(u2);
    const auto all = b2.symmetry_class();
    CHECK(std::all_of(all.begin(), all.end(), [](int32_t k) { return k == 0; }));
  }
  SECTION("a bound is the same for a partial placement and its swap within a class") {
    for (uint64_t seed = 1; seed <= 60; ++seed) {
      const testing::TinyInstance inst = testing::tiny_instance(seed, 3, 6, 4);
      sim::Simulator sim(inst.graph, inst.cluster, sim::default_cost_model(), inst.options);
      policy::Units units(sim);
      StepBound bound(units);
      const auto cls = bound.symmetry_class();
      std::mt19937_64 rng(seed);
      for (int trial = 0; trial < 20; ++trial) {
        std::vector<int32_t> p(units.num_units());
        for (int32_t u = 0; u < units.num_units(); ++u) {
          const auto allowed = units.allowed_devices(u);
          p[u] = rng() % 3 == 0 ? -1 : allowed[rng() % allowed.size()];
        }
        for (int32_t a = 0; a < units.num_devices(); ++a)
          for (int32_t b = a + 1; b < units.num_devices(); ++b) {
            if (cls[a] != cls[b]) continue;
            std::vector<int32_t> q = p;
            for (int32_t& d : q) d = d == a ? b : d == b ? a : d;
            const double x = bound.partial(p).bound_s, y = bound.partial(q).bound_s;
            INFO("seed " << seed << " swap " << a << " " << b);
            CHECK((x == y || std::abs(x - y) <= 1e-12 * std::max(std::abs(x), std::abs(y))));
          }
      }
    }
  }
}

TEST_CASE("policy::lower_bound: zoo graphs on many devices, pooled, below what placers reach", "[policy][bounds]") {
  graphs::Graph g = graphs::zoo::make_model("random_dag", {{"ops", 300}});
  for (const char* preset : {"v100-nvlink-4", "cpu-gpu-2", "h100-nodes-4x8"}) {
    sim::Cluster c = sim::make_preset(preset);
    sim::Simulator sim(g, c);
    const policy::BoundParts b = policy::lower_bound(sim);
    INFO(preset);
    CHECK(b.fits);
    CHECK(b.bound_s > 0);
    for (const char* placer : {"heft", "m_etf", "single_device"}) {
      policy::PlaceRequest request{sim};
      const sim::SimResult r = sim.simulate(policy::make_placer(placer)->place(request).device_of);
      if (!r.oom) CHECK(b.bound_s <= r.step_time_s * (1 + 1e-9));
    }
  }
}
