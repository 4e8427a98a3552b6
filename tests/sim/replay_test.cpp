#include <catch2/catch.hpp>

#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <tuple>

#include "graphs/error.h"
#include "sim/cost_model.h"
#include "sim/placement.h"
#include "sim/replay/calibrate.h"
#include "sim/replay/cpu/executor.h"
#include "sim/replay/cpu/kernels.h"
#include "sim/replay/cuda/executor.h"
#include "sim/replay/executor.h"
#include "sim/replay/plan.h"
#include "test_util.h"

using namespace placelab;
using namespace placelab::sim;
using namespace placelab::sim::replay;
using Catch::Matchers::Contains;

namespace {

// Two devices of 1 GFLOP/s and 1 GB/s joined by a link: the random DAGs' ops (0.1-10 FLOPs) are tiny.
Cluster two_devices() {
  ClusterSpec spec{.name = "pair"};
  for (const char* name : {"d0", "d1"})
    spec.devices.push_back({.name = name, .kind = "cpu", .peak_flops_per_s = 1e9, .memory_bandwidth_bytes_per_s = 1e9,
                            .memory_bytes = 1e12, .launch_overhead_s = 1e-6});
  spec.links.push_back(testing::link("l", "d0", "d1", 1e9, 1e-6));
  return Cluster(std::move(spec));
}

std::vector<int32_t> seeded_placement(const Simulator& sim, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return random_placement(sim, rng);
}

ReplayOptions fast_options() {
  return ReplayOptions{.warmup = 0, .repeats = 2, .threads_per_device = 1, .pin_threads = false, .arena_bytes = 1 << 16};
}

// Every op starts after its dependencies and its device's previous op ended; every transfer after its producer.
void check_order(const ReplayPlan& plan, const ReplayResult& r) {
  REQUIRE(r.op_start_s.size() == plan.ops.size());
  REQUIRE(r.transfer_start_s.size() == plan.transfers.size());
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    INFO("op " << plan.ops[i].name);
    CHECK(r.op_start_s[i] <= r.op_end_s[i]);
    for (int32_t q : plan.ops[i].after_ops) CHECK(r.op_start_s[i] >= r.op_end_s[q]);
    for (int32_t t : plan.ops[i].after_transfers) CHECK(r.op_start_s[i] >= r.transfer_end_s[t]);
  }
  for (const PlanDevice& d : plan.devices)
    for (size_t k = 1; k < d.ops.size(); ++k) CHECK(r.op_start_s[d.ops[k]] >= r.op_end_s[d.ops[k - 1]]);
  for (size_t t = 0; t < plan.transfers.size(); ++t)
    CHECK(r.transfer_start_s[t] >= r.op_end_s[plan.transfers[t].producer]);
}

}  // namespace

TEST_CASE("sim::replay::export_plan: the plan follows the simulated schedule", "[replay]") {
  const graphs::Graph g = testing::random_dag(40, 3);
  const Cluster c = two_devices();
  const Simulator sim(g, c);
  const std::vector<int32_t> place = seeded_placement(sim, 5);
  const ReplayPlan plan = export_plan(sim, place);

  CHECK(plan.predicted_step_s == sim.simulate(place).step_time_s);
  REQUIRE(plan.ops.size() == static_cast<size_t>(g.num_ops()));
  REQUIRE(plan.devices.size() == 2);
  CHECK(plan.devices[0].ops.size() + plan.devices[1].ops.size() == plan.ops.size());
  for (const PlanDevice& d : plan.devices)
    for (size_t k = 1; k < d.ops.size(); ++k)
      CHECK(plan.ops[d.ops[k]].predicted_start_s >= plan.ops[d.ops[k - 1]].predicted_end_s);
  int32_t crossing = 0;
  for (graphs::EdgeId e = 0; e < g.num_edges(); ++e) {
    const PlanOp& consumer = plan.ops[g.edge_dst(e)];
    const graphs::OpId producer = g.edge_src(e);
    if (place[producer] == consumer.device || g.edge_bytes(e) <= 0) {
      CHECK(std::count(consumer.after_ops.begin(), consumer.after_ops.end(), producer) == 1);
      continue;
    }
    ++crossing;
    bool found = false;
    for (int32_t t : consumer.after_transfers) {
      const PlanTransfer& x = plan.transfers[t];
      if (x.producer != producer) continue;
      found = true;
      CHECK(x.dst == consumer.device);
      CHECK(x.bytes >= g.edge_bytes(e));
      CHECK(x.predicted_start_s >= plan.ops[producer].predicted_end_s);
      CHECK(consumer.predicted_start_s >= x.predicted_end_s);
    }
    CHECK(found);
  }
  CHECK(crossing > 0);  // the test means something only with transfers
}

TEST_CASE("sim::replay::export_plan: kernels follow the roofline bound on the device", "[replay]") {
  graphs::GraphBuilder b("kinds");
  b.add_op({.name = "gemm", .type = "MatMul", .flops = 1e6, .bytes_read = 1e3});
  b.add_op({.name = "copy", .type = "Add", .flops = 10, .bytes_read = 1e6, .bytes_written = 1e6});
  b.add_op({.name = "nothing", .type = "Control"});
  b.add_edge(0, 1, 100);
  b.add_edge(1, 2, 0);
  const graphs::Graph g = std::move(b).build();
  const Cluster c = two_devices();
  const Simulator sim(g, c);
  const ReplayPlan plan = export_plan(sim, std::vector<int32_t>{0, 1, 0});
  CHECK(plan.ops[0].kernel == KernelKind::compute);
  CHECK(plan.ops[1].kernel == KernelKind::memory);
  CHECK(plan.ops[1].bytes == 2e6);
  CHECK(plan.ops[2].kernel == KernelKind::none);
  CHECK(plan.ops[2].after_ops == std::vector<int32_t>{1});  // a control edge across devices: no transfer
  REQUIRE(plan.transfers.size() == 1);
  CHECK(plan.ops[1].after_transfers == std::vector<int32_t>{0});
}

TEST_CASE("sim::replay::plan: round-trips through JSON and a file exactly", "[replay]") {
  const graphs::Graph g = testing::random_dag(25, 8);
  const Cluster c = two_devices();
  const Simulator sim(g, c);
  const ReplayPlan plan = export_plan(sim, seeded_placement(sim, 2));
  CHECK(plan_from_json(plan_to_json(plan), "<mem>") == plan);
  const auto path = std::filesystem::temp_directory_path() / "placelab_replay_test_plan.json";
  write_plan(plan, path.string());
  CHECK(read_plan(path.string()) == plan);
  std::filesystem::remove(path);
}

TEST_CASE("sim::replay::plan: strict reading names the place at fault", "[replay]") {
  const graphs::Graph g = testing::random_dag(10, 4);
  const Cluster c = two_devices();
  const Simulator sim(g, c);
  const nlohmann::json good = plan_to_json(export_plan(sim, std::vector<int32_t>(10, 0)));

  nlohmann::json doc = good;
  doc["ops"][3]["flop"] = 1;
  CHECK_THROWS_WITH(plan_from_json(doc, "p.json"), Contains("p.json: ops[3]") && Contains("unknown field \"flop\""));
  doc = good;
  doc["version"] = 2;
  CHECK_THROWS_WITH(plan_from_json(doc, "p.json"), Contains("supported: 1"));
  doc = good;
  doc["ops"][0]["kernel"] = "fft";
  CHECK_THROWS_WITH(plan_from_json(doc, "p.json"), Contains("ops[0].kernel") && Contains("\"compute\""));
  doc = good;
  doc["ops"][2]["device"] = 7;
  CHECK_THROWS_WITH(plan_from_json(doc, "p.json"), Contains("p.json: ops[2] (") && Contains("device is 7, but the plan has 2 devices"));
  doc = good;
  doc["devices"][0]["ops"].erase(doc["devices"][0]["ops"].size() - 1);
  CHECK_THROWS_WITH(plan_from_json(doc, "p.json"), Contains("not in devices[0].ops; add it"));

  doc = good;
  doc["devices"][1]["name"] = "d0";
  CHECK_THROWS_WITH(plan_from_json(doc, "p.json"), Contains("p.json: devices[1]: name \"d0\" is used twice"));
  doc = good;
  doc["devices"][0]["name"] = "";
  CHECK_THROWS_WITH(plan_from_json(doc, "p.json"), Contains("p.json: devices[0]: empty name"));
  doc = good;
  doc["ops"][4]["start_s"] = 5;
  doc["ops"][4]["end_s"] = 1;
  CHECK_THROWS_WITH(plan_from_json(doc, "p.json"), Contains("p.json: ops[4]") && Contains("before it starts at 5 s"));

  // Op 1 waits for op 0, but device d0 is told to run op 1 first: the plan could never finish.
  ReplayPlan cyclic = plan_from_json(good, "p.json");
  cyclic.ops[1].after_ops = {0};
  std::vector<int32_t>& order = cyclic.devices[0].ops;
  std::iter_swap(std::find(order.begin(), order.end(), 0), std::find(order.begin(), order.end(), 1));
  CHECK_THROWS_WITH(validate_plan(cyclic, "p.json"), Contains("can never start"));
}

TEST_CASE("sim::replay::plan: amounts the kernels cannot count in int64 are rejected", "[replay]") {
  const graphs::Graph g = testing::random_dag(10, 4);
  const Cluster c = two_devices();
  const Simulator sim(g, c);
  const nlohmann::json good = plan_to_json(export_plan(sim, seeded_placement(sim, 2)));
  REQUIRE(!good["transfers"].empty());

  nlohmann::json doc = good;
  doc["ops"][1]["flops"] = kMaxAmount;
  doc["ops"][2]["bytes"] = kMaxAmount;
  CHECK_NOTHROW(plan_from_json(doc, "p.json"));
  doc["ops"][1]["flops"] = 1e20;
  CHECK_THROWS_WITH(plan_from_json(doc, "p.json"),
                    Contains("p.json: ops[1] (\"op1\") flops is 1e+20, must be at most 4.611686018427388e+18 (2^62"));
  doc = good;
  doc["ops"][2]["bytes"] = 1e300;
  CHECK_THROWS_WITH(plan_from_json(doc, "p.json"), Contains("ops[2] (\"op2\") bytes is 1e+300, must be at most"));
  doc = good;
  doc["transfers"][0]["bytes"] = 1e20;
  CHECK_THROWS_WITH(plan_from_json(doc, "p.json"), Contains("p.json: transfers[0] bytes is 1e+20, must be at most"));

  // The kernels clamp rather than convert out of range.
  CHECK(graphs::square_dims(1e300) == graphs::square_dims(kMaxAmount));
  CHECK(graphs::square_dims(kMaxAmount).flops() == Approx(kMaxAmount).epsilon(1e-3));
  CHECK(cpu::stream_elements(1e300) == static_cast<int64_t>(kMaxAmount / 8));
}

TEST_CASE("sim::replay::cpu: ops run after their dependencies and each device in order", "[replay]") {
  const graphs::Graph g = testing::random_dag(30, 11);
  const Cluster c = two_devices();
  const Simulator sim(g, c);
  const ReplayPlan plan = export_plan(sim, seeded_placement(sim, 3));
  REQUIRE(!plan.transfers.empty());
  ReplayOptions options = fast_options();
  SECTION("the producer copies") { options.copy_threads = false; }
  SECTION("a copy thread per device pair") { options.copy_threads = true; }
  const ReplayResult r = cpu::replay(plan, options);
  CHECK(r.backend == "cpu");
  REQUIRE(r.step_times_s.size() == 2);
  CHECK(std::count(r.step_times_s.begin(), r.step_times_s.end(), r.step_time_s) >= 1);
  CHECK(r.step_time_s > 0);
  check_order(plan, r);
  double copied = 0;
  for (const PlanTransfer& x : plan.transfers) copied += 4 * std::max(1.0, std::round(x.bytes / 4));
  CHECK(r.bytes_copied == copied);
  CHECK(r.flops_done > 0);
}

TEST_CASE("sim::replay: progress reports every run, warm-up ones marked", "[replay]") {
  const graphs::Graph g = testing::random_dag(10, 5);
  const Cluster c = two_devices();
  const Simulator sim(g, c);
  ReplayOptions options = fast_options();
  options.warmup = 1;
  options.repeats = 2;
  std::vector<std::string> lines;
  options.progress = [&](std::string_view status) { lines.emplace_back(status); };
  run_replay(export_plan(sim, seeded_placement(sim, 1)), "cpu", options);
  CHECK(lines == std::vector<std::string>{"run 1 of 3 (warm-up)", "run 2 of 3", "run 3 of 3"});
}

// A device's products run on its own threads: BLAS on one thread during a replay (whatever it was set to
// before), as it was afterwards.
TEST_CASE("sim::replay::cpu: products run on one BLAS thread during a replay, and the setting is restored", "[replay]") {
  const graphs::Graph g = testing::random_dag(10, 5);
  const Cluster c = two_devices();
  const Simulator sim(g, c);
  const cpu::BlasThreads two(2);
  const int before = cpu::BlasThreads::current();  // 2 with OpenBLAS, 1 without
  std::vector<int> during;
  ReplayOptions options = fast_options();
  options.progress = [&](std::string_view) { during.push_back(cpu::BlasThreads::current()); };
  run_replay(export_plan(sim, seeded_placement(sim, 1)), "cpu", options);
  REQUIRE_FALSE(during.empty());
  CHECK(std::all_of(during.begin(), during.end(), [](int t) { return t == 1; }));
  CHECK(cpu::BlasThreads::current() == before);
}

// A 10-op random graph's plan, seeded over two devices.
ReplayPlan two_device_plan() {
  const graphs::Graph g = testing::random_dag(10, 5);
  const Cluster c = two_devices();
  const Simulator sim(g, c);
  return export_plan(sim, seeded_placement(sim, 1));
}

// Waiting threads spin long only where each has a core of its own (pinned devices, no copy threads):
// elsewhere a spinning thread would take a core another needs.
TEST_CASE("sim::replay::cpu: device threads with cores of their own spin before sleeping, others briefly", "[replay]") {
  const ReplayPlan plan = two_device_plan();
  ReplayOptions options = fast_options();
  options.pin_threads = false;
  CHECK(run_replay(plan, "cpu", options).wait_spin_s == Approx(20e-6));
  options.pin_threads = true;
  options.copy_threads = true;
  CHECK(run_replay(plan, "cpu", options).wait_spin_s == Approx(20e-6));
  options.copy_threads = false;
  const double spin = run_replay(plan, "cpu", options).wait_spin_s;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(sched_getaffinity(0, sizeof(allowed), &allowed) == 0);
  CHECK(spin == Approx(CPU_COUNT(&allowed) >= 2 ? 0.01 : 20e-6));  // two devices: a core each when there are two
}

// A replay that asks for no arena runs on its backend's default and says so; one that asks runs on that.
TEST_CASE("sim::replay::cpu: the arena is the backend's default unless asked", "[replay]") {
  const ReplayPlan plan = two_device_plan();
  ReplayOptions options = fast_options();
  CHECK(run_replay(plan, "cpu", options).arena_bytes == 1 << 16);
  options.arena_bytes = 0;
  const ReplayResult r = run_replay(plan, "cpu", options);
  CHECK(r.arena_bytes == kCpuArenaBytes);
  CHECK(replay_result_to_json(plan, r)["arena_bytes"] == kCpuArenaBytes);
  CHECK(with_default_arena(options, 123e3).arena_bytes == 123e3);
  options.arena_bytes = 100;
  CHECK_THROWS_WITH(run_replay(plan, "cpu", options), Catch::Contains("arena bytes is 100") && Catch::Contains("0 for the backend's default"));
}

TEST_CASE("sim::replay::cpu: kernels compute real values", "[replay]") {
  for (double flops : {1e3, 1e5, 1e7, 6.04e8, 603979776.0, 1e9, 1e13}) {
    const graphs::GemmDims d = graphs::square_dims(flops);
    CHECK(d.batch == 1);
    CHECK(d.m == d.n);
    CHECK(std::abs(d.flops() / flops - 1) < 0.05);
    CHECK((d.n % 8 == 0 || d.n < 8));  // no ragged sizes: Eigen runs them slower than round ones
  }
  CHECK(graphs::square_dims(0) == graphs::GemmDims{});
  CHECK(cpu::stream_elements(8000) == 1000);

  SECTION("tilings cover the product with tiles that fit") {
    for (const graphs::GemmDims& d : {graphs::GemmDims{1, 25088, 64, 147}, {1, 98, 512, 4608}, {3, 7, 5, 11},
                                      {32, 12544, 1, 9}, {1, 8, 8, 1 << 20}, {1, 1 << 20, 1 << 12, 8}}) {
      const cpu::GemmTiling t = cpu::gemm_tiling(d, 1 << 16);
      CAPTURE(d.batch, d.m, d.n, d.k, t.rows, t.cols, t.depth);
      CHECK(t.m_tiles * t.rows >= d.m);
      CHECK((t.m_tiles - 1) * t.rows < d.m);
      CHECK(t.n_tiles * t.cols >= d.n);
      CHECK((t.n_tiles - 1) * t.cols < d.n);
      CHECK(t.k_tiles * t.depth >= d.k);
      CHECK((t.k_tiles - 1) * t.depth < d.k);
      CHECK(t.rows * t.depth <= 1 << 16);
      CHECK(t.depth * t.cols <= 1 << 16);
      CHECK(t.rows * t.cols <= 1 << 16);
      CHECK(t.flops() == d.flops());
    }
    CHECK(cpu::gemm_tiling({}, 1 << 16).tiles() == 0);
    // A device of two threads cuts a one-tile product so that both get work.
    cpu::DeviceMemory mem(1 << 20, 2);
    CHECK(mem.tiling({1, 64, 64, 64}).tiles() >= 2);
  }

  SECTION("GEMM against a naive reference") {
    // Small tiles (an arena of 2^12 floats, so 2^10-float tiles): several tiles per product, k cut too.
    cpu::DeviceMemory mem(4.0 * (1 << 13), 2);
    const graphs::GemmDims d{.batch = 2, .m = 137, .n = 21, .k = 70};
    const cpu::GemmTiling t = mem.tiling(d);
    REQUIRE(t.tiles() > 2);
    REQUIRE(t.k_tiles > 1);
    const int64_t half = mem.arena_floats() / 2;
    double want = 0;
    for (int64_t tile = 0; tile < t.tiles(); ++tile) {
      const int64_t b = tile / (t.m_tiles * t.n_tiles), mi = tile / t.n_tiles % t.m_tiles, ni = tile % t.n_tiles;
      const int64_t rows = std::min(t.rows, d.m - mi * t.rows), cols = std::min(t.cols, d.n - ni * t.cols);
      for (int64_t ki = 0; ki < t.k_tiles; ++ki) {
        const int64_t depth = std::min(t.depth, d.k - ki * t.depth);
        const int64_t a0 = cpu::DeviceMemory::tile_offset((b * t.m_tiles + mi) * t.k_tiles + ki, t.rows * t.depth, half);
        const int64_t b0 = half + cpu::DeviceMemory::tile_offset((b * t.k_tiles + ki) * t.n_tiles + ni, t.depth * t.cols, half);
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j)
            for (int64_t p = 0; p < depth; ++p) want += cpu::pattern(a0 + p * rows + i) * cpu::pattern(b0 + j * depth + p);
      }
    }
    CHECK(mem.gemm(t) == Approx(want).epsilon(1e-5));
    // Split over two parts, the sums add up to the whole.
    CHECK(mem.gemm(t, 0, 0, 2) + mem.gemm(t, 0, 1, 2) == Approx(want).epsilon(1e-5));
    // Each op's operands come after the last one's, back at the start after a rewind.
    CHECK(mem.take_operands(t) == 0);
    const int64_t next = mem.take_operands(t);
    CHECK(next > 0);
    CHECK(mem.gemm(t, next) != Approx(want).epsilon(1e-5));
    mem.rewind();
    CHECK(mem.take_operands(t) == 0);
  }
  SECTION("streaming and copies against references") {
    cpu::DeviceMemory mem(1 << 16);
    double want = 0;
    for (int64_t i = 0; i < 1000; ++i) want += 0.5 * cpu::pattern(i) + 1;
    CHECK(mem.stream(mem.take(1000), 1000) == Approx(want).epsilon(1e-9));
    std::vector<float> ring(100, 0.0f);
    int64_t src = 10, dst = 60;
    mem.copy_to(ring.data(), 100, &src, &dst, 4 * 150);  // wraps the ring once and a half
    CHECK(src == 160);
    CHECK(dst == 10);
    for (int64_t i = 0; i < 100; ++i) CHECK(ring[(60 + 50 + i) % 100] == cpu::pattern(60 + i));
    // Copies start and end anywhere, not only where a store of 4 floats fits.
    for (int64_t start : {1, 3, 5}) {
      std::vector<float> big(300, -7.0f);
      int64_t from = 2, to = start;
      mem.copy_to(big.data(), 300, &from, &to, 4 * 77);
      for (int64_t i = 0; i < 300; ++i) CHECK(big[i] == (i >= start && i < start + 77 ? cpu::pattern(i - start + 2) : -7.0f));
    }
  }
  SECTION("the executor reports the kernels' results") {
    ReplayPlan plan{.graph = "two", .cluster = "one"};
    plan.devices.push_back({.name = "cpu0", .kind = "cpu", .ops = {0, 1}});
    plan.ops.push_back({.name = "mm", .device = 0, .kernel = KernelKind::compute, .flops = 2e4});
    plan.ops.push_back({.name = "st", .device = 0, .kernel = KernelKind::memory, .bytes = 8000, .after_ops = {0}});
    // A known shape runs as given, not as the square product of its FLOPs.
    const graphs::GemmDims skinny{.batch = 3, .m = 40, .n = 2, .k = 50};
    plan.ops.push_back({.name = "bmm", .device = 0, .kernel = KernelKind::compute, .flops = skinny.flops(), .gemm = skinny,
                        .after_ops = {1}});
    plan.devices[0].ops.push_back(2);
    const ReplayResult r = cpu::replay(plan, fast_options());
    cpu::DeviceMemory fresh(fast_options().arena_bytes);
    const cpu::GemmTiling square = fresh.tiling(graphs::square_dims(2e4)), shaped = fresh.tiling(skinny);
    const double want = fresh.gemm(square, fresh.take_operands(square)) + fresh.stream(fresh.take(1000), 1000) +
                        fresh.gemm(shaped, fresh.take_operands(shaped));
    CHECK(r.device_checksum.at(0) == Approx(want).epsilon(1e-9));
    CHECK(r.flops_done == graphs::square_dims(2e4).flops() + skinny.flops());
    CHECK(r.bytes_streamed == 8000);
  }
}

TEST_CASE("sim::replay::calibrate: the fits recover known models", "[replay]") {
  const double flops_per_s = 2e10, bandwidth = 8e9, launch_s = 3e-6, link_bw = 4e9, latency_s = 7e-6;
  std::vector<CalibrationPoint> points{{"launch", 0, launch_s}};
  for (double f : {1e4, 1e6, 1e8}) points.push_back({"compute", f, f / flops_per_s + launch_s});
  for (double b : {1e4, 1e6, 1e8}) points.push_back({"memory", b, b / bandwidth + launch_s});
  for (double b : {1e3, 1e5, 1e7}) points.push_back({"copy", b, latency_s + b / link_bw});
  const RooflineFit roof = fit_roofline(points);
  CHECK(roof.flops_per_s == Approx(flops_per_s).epsilon(1e-9));
  CHECK(roof.bandwidth_bytes_per_s == Approx(bandwidth).epsilon(1e-9));
  CHECK(roof.launch_s == Approx(launch_s).epsilon(1e-9));
  CHECK(roof.mape < 1e-9);
  const LinkFit link = fit_link(points);
  CHECK(link.bandwidth_bytes_per_s == Approx(link_bw).epsilon(1e-9));
  CHECK(link.latency_s == Approx(latency_s).epsilon(1e-9));
  // On the line, the copies' curve is 1 at every size; a copy twice as slow at 1e5 bytes halves it there.
  CHECK(link.curve.size == std::vector<double>{1e3, 1e5, 1e7});
  for (double e : link.curve.efficiency) CHECK(e == Approx(1).epsilon(1e-6));
  CHECK(link.curve_mape < 1e-6);
  points[8].time_s = latency_s + 2e5 / link_bw;
  const LinkFit slow = fit_link(points);
  CHECK(slow.curve.at(1e5) * slow.bandwidth_bytes_per_s * (points[8].time_s - slow.latency_s) == Approx(1e5).epsilon(1e-9));
  CHECK(slow.curve_mape > 0.3);  // the middle point, left out, is predicted from its neighbours: twice as fast
  CHECK_THROWS_WITH(fit_roofline(std::vector<CalibrationPoint>{{"compute", 1e4, 1e-6}}), Contains("memory points"));

  // Shapes priced at the square product's time plus known costs per element of A, B and C beyond its own:
  // the fit finds the costs, and the cost model then prices a shape it was not fitted on as the truth does.
  const std::array<double, 3> per_element{4e-10, 1e-10, 6e-10};
  Device device{.name = "d", .kind = "cpu", .peak_flops_per_s = flops_per_s, .memory_bandwidth_bytes_per_s = bandwidth,
                .gemm_element_s = per_element};
  auto truth_s = [&](const graphs::GemmDims& d) { return shaped_time_s(d.flops() / flops_per_s, d, device) + launch_s; };
  for (const graphs::GemmDims& d : {graphs::GemmDims{1, 16384, 256, 16}, {1, 16384, 16, 512}, {1, 16, 2048, 2048},
                                    {1, 65536, 64, 64}, {64, 96, 96, 64}})
    points.push_back({.what = "shape", .size = d.flops(), .time_s = truth_s(d), .gemm = d});
  const ShapeFit shapes = fit_shapes(points, roof, fit_curves(points, roof));
  for (size_t i = 0; i < 3; ++i) CHECK(shapes.element_s[i] == Approx(per_element[i]).epsilon(1e-6));
  CHECK(shapes.mape < 1e-6);
  CHECK(shapes.leave_one_out_mape < 1e-6);
  CHECK(shapes.used);
  CHECK(shapes.square_mape > 0.1);
  // Shapes faster than their square products: no cost per element (>= 0) explains them, and costs that
  // predict a shape left out no better than the square product are not used.
  std::vector<CalibrationPoint> noise(points.begin(), points.end() - 5);
  for (const graphs::GemmDims& d : {graphs::GemmDims{1, 16384, 256, 16}, {1, 16384, 16, 512}, {1, 16, 2048, 2048},
                                    {1, 65536, 64, 64}, {64, 96, 96, 64}}) {
    const double square_s = d.flops() / flops_per_s + launch_s;
    noise.push_back({.what = "shape", .size = d.flops(), .time_s = 0.8 * square_s, .gemm = d});
  }
  const ShapeFit unexplained = fit_shapes(noise, roof, fit_curves(noise, roof));
  CHECK_FALSE(unexplained.used);
  CHECK(unexplained.element_s == std::array<double, 3>{0, 0, 0});
  CHECK(unexplained.leave_one_out_mape >= unexplained.square_mape);
  const graphs::GemmDims held_out{1, 25088, 64, 147}, square = graphs::square_dims(held_out.flops());
  CHECK(shaped_time_s(held_out.flops() / flops_per_s, held_out, device) > 1.05 * held_out.flops() / flops_per_s);
  CHECK(shaped_time_s(square.flops() / flops_per_s, square, device) == Approx(square.flops() / flops_per_s));
  Device plain = device;
  plain.gemm_element_s = {0, 0, 0};
  CHECK(shaped_time_s(1e-3, held_out, plain) == 1e-3);
  CHECK(fit_shapes(std::vector<CalibrationPoint>{}, roof, {}).element_s == std::array<double, 3>{0, 0, 0});
}

TEST_CASE("sim::replay::calibrate: a quick calibration gives a valid cluster", "[replay]") {
  CalibrationOptions options{.devices = 2, .quick = true, .replay = fast_options(), .run_s = 1e-4, .contention = true};
  options.replay.repeats = 1;
  const Calibration cal = calibrate("cpu", options);
  CHECK(cal.points.size() >= 10);  // launch, then 3 compute, 3 memory and 3 copy sizes
  for (const CalibrationPoint& p : cal.points) CHECK(p.time_s > 0);
  const Cluster cluster = calibrated_cluster(cal);
  REQUIRE(cluster.num_devices() == 2);
  CHECK(cluster.device(0).kind == "cpu");
  CHECK(cluster.device(1).peak_flops_per_s == cal.roofline.flops_per_s);
  CHECK(cluster.route(0, 1).size() == 1);
  // The producer copies (no copy threads): no copy engine; the link's bandwidth follows the copies' sizes.
  CHECK_FALSE(cluster.device(0).copy_engine);
  // The cores share the host's memory: their own curves were measured alone, the contended ones together.
  REQUIRE(cal.alone);
  CHECK(cal.points.size() == 24);  // and 4 shapes, and launch, 3 compute and 3 memory sizes alone
  CHECK(cluster.device(1).memory_domain == "host");
  CHECK(cluster.device(1).efficiency_curves.at("elementwise").efficiency ==
        cal.alone->curves.at("elementwise").efficiency);
  CHECK(cluster.device(1).contended_efficiency_curves.at("elementwise").efficiency ==
        cal.curves.curves.at("elementwise").efficiency);
  options.contention = false;  // the default: one sweep, with every device running, and no domain
  const Calibration plain = calibrate("cpu", options);
  CHECK_FALSE(plain.alone);
  // launch, 3 compute, 3 memory, 4 shapes, 3 copy sizes, and 3 copies beside a busy core
  CHECK(plain.points.size() == 17);
  // The shapes' fit gives the devices their per-element costs and is recorded with its errors.
  CHECK(std::count_if(plain.points.begin(), plain.points.end(), [](const CalibrationPoint& p) { return p.gemm.known(); }) == 4);
  CHECK(calibrated_cluster(plain).device(0).gemm_element_s == plain.shapes.element_s);
  CHECK(plain.shapes.square_mape > 0);
  CHECK(calibrated_cluster(plain).link(0).loaded_efficiency_curve.size.size() == 3);
  CHECK(calibrated_cluster(plain).device(0).memory_domain.empty());
  CHECK(cluster.link(0).efficiency_curve.size.size() == 3);
  Calibration threaded = cal;
  threaded.copy_engine = true;
  CHECK(calibrated_cluster(threaded).device(1).copy_engine);
  const nlohmann::json doc = calibration_to_json(cal);
  CHECK(doc["format"] == "placelab.calibration");
  CHECK(cluster_to_json(cluster_from_json(doc["cluster"], "<calibration>")) == doc["cluster"]);
  // Its points fitted again (calibrate --refit) give the same cluster.
  CHECK(cluster_to_json(calibrated_cluster(refit_calibration(doc, "cal.json"))) == doc["cluster"]);
  nlohmann::json broken = doc;
  broken["points"][0].erase("time_s");
  CHECK_THROWS_WITH(refit_calibration(broken, "cal.json"), Contains("cal.json: points[0]"));
}

TEST_CASE("sim::replay::calibrate: passes keep each point's fastest time", "[replay]") {
  const graphs::GemmDims skinny{1, 4096, 64, 64};
  std::vector<CalibrationPoint> points{{"compute", 1e6, 2e-4}, {"copy", 4e3, 1e-6}, {"shape", skinny.flops(), 3e-4, "", skinny}};
  const std::vector<CalibrationPoint> pass{{"compute", 1e6, 1.5e-4},  // faster: replaces
                                           {"copy", 4e3, 3e-6},       // slower: ignored
                                           {"copy", 4e3, 5e-7, "loaded"},  // another device's point: added
                                           {"shape", skinny.flops(), 1e-4, "", {1, 64, 4096, 64}}};  // another shape
  keep_fastest(points, pass);
  REQUIRE(points.size() == 5);
  CHECK(points[0].time_s == 1.5e-4);
  CHECK(points[1].time_s == 1e-6);
  CHECK(points[2].time_s == 3e-4);
  CHECK(points[3].device == "loaded");
  CHECK(points[4].gemm.m == 64);

  CalibrationOptions options{.devices = 2, .quick = true, .passes = 2, .replay = fast_options(), .run_s = 1e-4};
  options.replay.repeats = 1;
  const Calibration cal = calibrate("cpu", options);
  CHECK(cal.passes == 2);
  CHECK(cal.points.size() == 17);  // as one pass has: each point once
  const nlohmann::json doc = calibration_to_json(cal);
  CHECK(doc["passes"] == 2);
  CHECK(refit_calibration(doc, "cal.json").passes == 2);
  nlohmann::json broken = doc;
  broken["passes"] = 0;
  CHECK_THROWS_WITH(refit_calibration(broken, "cal.json"), Contains("cal.json: passes") && Contains("must be >= 1"));
  options.passes = 0;
  CHECK_THROWS_WITH(calibrate("cpu", options), Contains("passes is 0"));
}

TEST_CASE("sim::replay::calibrate: a CUDA calibration's host is fitted apart and comes first in the cluster", "[replay]") {
  // GPU points (device "") and host points (device "host") of two known models: each fit sees its own.
  std::vector<CalibrationPoint> points{{"launch", 0, 5e-6}, {"launch", 0, 2.4e-5, "host"}};
  for (double f : {1e6, 1e9}) {
    points.push_back({"compute", f, f / 5e13 + 5e-6});
    points.push_back({"compute", f, f / 2e10 + 2.4e-5, "host"});
  }
  for (double b : {1e6, 1e9}) {
    points.push_back({"memory", b, b / 3e12 + 5e-6});
    points.push_back({"memory", b, b / 1e10 + 2.4e-5, "host"});
    points.push_back({"copy", b, 2e-5 + b / 5e10, "host"});
  }
  const RooflineFit gpu = fit_roofline(points), host = fit_roofline(points, "host");
  CHECK(gpu.flops_per_s == Approx(5e13).epsilon(1e-9));
  CHECK(gpu.launch_s == Approx(5e-6).epsilon(1e-9));
  CHECK(host.flops_per_s == Approx(2e10).epsilon(1e-9));
  CHECK(host.bandwidth_bytes_per_s == Approx(1e10).epsilon(1e-9));
  CHECK(host.launch_s == Approx(2.4e-5).epsilon(1e-9));
  CHECK_THROWS_WITH(fit_link(points), Contains("copy points"));  // no GPU-GPU copies
  const LinkFit link = fit_link(points, "host");
  CHECK(link.bandwidth_bytes_per_s == Approx(5e10).epsilon(1e-9));
  CHECK(link.latency_s == Approx(2e-5).epsilon(1e-9));

  Calibration cal{.backend = "cuda", .devices = 2, .device_memory_bytes = 1.4e11, .points = points,
                  .roofline = gpu, .link = {.bandwidth_bytes_per_s = 4e11, .latency_s = 1e-5, .mape = 0}};
  cal.host.emplace();  // assigned field by field: GCC 12 takes a designated HostCalibration's map for uninitialized
  cal.host->memory_bytes = 1.3e11;
  cal.host->roofline = host;
  cal.host->link = link;
  const Cluster c = calibrated_cluster(cal);
  CHECK(c.name() == "calibrated-cuda-2-host");
  REQUIRE(c.num_devices() == 3);
  CHECK(c.device(0).name == "cpu0");
  CHECK(c.device(0).kind == "cpu");
  CHECK(c.device(0).launch_overhead_s == host.launch_s);
  CHECK(c.device(0).memory_bytes == 1.3e11);
  CHECK(c.device(1).name == "gpu0");
  CHECK(c.device(2).kind == "gpu");
  CHECK(c.device(2).peak_flops_per_s == gpu.flops_per_s);
  for (auto [a, b, bw] : {std::tuple{0, 1, 5e10}, std::tuple{0, 2, 5e10}, std::tuple{1, 2, 4e11}}) {
    REQUIRE(c.route(a, b).size() == 1);
    CHECK(c.link(Cluster::channel_link(c.route(a, b)[0])).bandwidth_bytes_per_s == Approx(bw).epsilon(1e-9));
  }
  const nlohmann::json doc = calibration_to_json(cal);
  CHECK(doc["host"]["roofline"]["launch_s"] == host.launch_s);
  CHECK(doc["host"]["link"]["bandwidth_bytes_per_s"] == link.bandwidth_bytes_per_s);
  CHECK(doc["points"][1]["device"] == "host");
  CHECK_FALSE(doc["points"][0].contains("device"));
  CHECK(cluster_to_json(cluster_from_json(doc["cluster"], "<calibration>")) == doc["cluster"]);

  CalibrationOptions options{.devices = 1, .quick = true, .replay = fast_options(), .run_s = 1e-4};
  options.host = true;
  CHECK_THROWS_WITH(calibrate("cpu", options), Contains("cuda backend"));
}

TEST_CASE("sim::replay::cuda: a quick calibration with the host grows its sizes past the launch cost", "[replay][cuda]") {
  std::string why;
  if (cuda::device_count(&why) == 0) {
    WARN("skipped: no CUDA GPU (" << why << ")");
    return;
  }
  CalibrationOptions options{.devices = 1, .quick = true, .replay = fast_options()};
  options.host = true;
  const Calibration cal = calibrate("cuda", options);
  REQUIRE(cal.host);
  double launch = 0, largest = 0, largest_s = 0;
  for (const CalibrationPoint& p : cal.points) {
    CHECK(p.time_s > 0);
    if (p.device.empty() && p.what == "launch") launch = p.time_s;
    if (p.device.empty() && p.what == "compute" && p.size > largest) largest = p.size, largest_s = p.time_s;
  }
  // The quick sizes (up to 100 kFLOP) take a launch on a GPU; larger ones were added until an op took
  // 20 launches, or a whole run (0.5 ms), or 8 sizes more (each 10 times the last).
  CHECK(largest > 1e5);
  CHECK((largest_s >= 20 * launch || largest_s >= 5e-4 || largest >= 0.99e13));
  CHECK(cal.host->roofline.launch_s > 0);
  CHECK(cal.host->link.bandwidth_bytes_per_s > 0);
  const Cluster c = calibrated_cluster(cal);
  REQUIRE(c.num_devices() == 2);
  CHECK(c.device(0).kind == "cpu");
  CHECK(c.device(1).kind == "gpu");
  CHECK(c.route(0, 1).size() == 1);
}

TEST_CASE("sim::replay::cuda: a plan runs in dependency order on the GPUs", "[replay][cuda]") {
  std::string why;
  if (cuda::device_count(&why) == 0) {
    WARN("skipped: no CUDA GPU (" << why << ")");
    CHECK_THROWS_WITH(run_replay(ReplayPlan{}, "cuda"), Contains("cuda"));
    return;
  }
  const graphs::Graph g = testing::random_dag(30, 11);
  ClusterSpec spec{.name = "gpus"};
  const int gpus = std::min(cuda::device_count(), 2);
  for (int d = 0; d < gpus; ++d)
    spec.devices.push_back({.name = "gpu" + std::to_string(d), .kind = "gpu", .peak_flops_per_s = 1e13,
                            .memory_bandwidth_bytes_per_s = 1e12, .memory_bytes = 1e10});
  spec.devices.push_back({.name = "host", .kind = "cpu", .peak_flops_per_s = 1e11, .memory_bandwidth_bytes_per_s = 1e10,
                          .memory_bytes = 1e10});
  for (const Device& d : spec.devices) spec.links.push_back(testing::link(d.name + "-pcie", d.name, "pcie", 1e10, 1e-6));
  const Cluster c(std::move(spec));
  const Simulator sim(g, c);
  const ReplayPlan plan = export_plan(sim, seeded_placement(sim, 3));
  const ReplayResult r = run_replay(plan, "cuda", fast_options());
  CHECK(r.backend == "cuda");
  CHECK(r.step_time_s > 0);
  check_order(plan, r);
}

TEST_CASE("sim::replay::cuda: a long host-GPU ping-pong neither hangs nor runs out of order", "[replay][cuda]") {
  // Hundreds of host functions behind the gate used to block cudaLaunchHostFunc for ever (the gate
  // opened only after everything was enqueued), and host ops were timed on the host clock, which could
  // put a host op before the transfer it waits for.
  std::string why;
  if (cuda::device_count(&why) == 0) {
    WARN("skipped: no CUDA GPU (" << why << ")");
    return;
  }
  ReplayPlan plan{.graph = "host-gpu-ping-pong", .cluster = "test"};
  plan.devices = {{.name = "host", .kind = "cpu", .ops = {}}, {.name = "gpu0", .kind = "gpu", .ops = {}}};
  constexpr int32_t kHops = 300;
  for (int32_t i = 0; i <= kHops; ++i) {
    PlanOp op{.name = "hop" + std::to_string(i), .type = "Op", .device = i % 2};
    if (i % 2 == 1) op.kernel = KernelKind::memory, op.bytes = 1e5;  // the GPU's ops stream 100 kB
    if (i > 0) {
      op.after_transfers = {i - 1};
      plan.transfers.push_back({.producer = i - 1, .src = (i - 1) % 2, .dst = i % 2, .bytes = 4096});
    }
    plan.ops.push_back(op);
    plan.devices[i % 2].ops.push_back(i);
  }
  const ReplayResult r = run_replay(plan, "cuda", fast_options());
  CHECK(r.step_time_s > 0);
  check_order(plan, r);
}

TEST_CASE("sim::replay::cuda: the GEMM kernel computes the product of its shape", "[replay][cuda]") {
  std::string why;
  if (cuda::device_count(&why) == 0) {
    WARN("skipped: no CUDA GPU (" << why << ")");
    return;
  }
  // One GPU op per shape: ragged (edge tiles in m, n and k), and one whose single output tile is split along
  // k over the GPU. The kernel's layout (kernels.cu): 64 x 64 C tiles, k steps of 16; A's step tiles in the
  // first half of the arena's 1024-float slots, B's in the second, filled with pattern(i); the checksum sums
  // C's valid elements (of every split's partial tile).
  constexpr int64_t kTile = 64, kDepth = 16, kSlotFloats = kTile * kDepth;
  ReplayOptions options = fast_options();
  options.gpu_kernels = GpuKernels::own;
  for (const graphs::GemmDims& d : {graphs::GemmDims{2, 70, 90, 40}, {1, 16, 64, 1024}}) {
    CAPTURE(d.batch, d.m, d.n, d.k);
    ReplayPlan plan{.graph = "gemm", .cluster = "one"};
    plan.devices.push_back({.name = "gpu0", .kind = "gpu", .ops = {0}});
    plan.ops.push_back({.name = "bmm", .device = 0, .kernel = KernelKind::compute, .flops = d.flops(), .gemm = d});
    const ReplayResult r = run_replay(plan, "cuda", options);
    const int64_t slots = static_cast<int64_t>(options.arena_bytes / 8) / kSlotFloats, half = slots / 2;
    const int64_t m_tiles = (d.m + kTile - 1) / kTile, n_tiles = (d.n + kTile - 1) / kTile, k_tiles = (d.k + kDepth - 1) / kDepth;
    double want = 0;
    for (int64_t b = 0; b < d.batch; ++b)
      for (int64_t mi = 0; mi < m_tiles; ++mi)
        for (int64_t ni = 0; ni < n_tiles; ++ni)
          for (int64_t row = 0; row < std::min(kTile, d.m - mi * kTile); ++row)
            for (int64_t col = 0; col < std::min(kTile, d.n - ni * kTile); ++col)
              for (int64_t ki = 0; ki < k_tiles; ++ki) {
                const int64_t a = ((b * m_tiles + mi) * k_tiles + ki) % half * kSlotFloats;
                const int64_t bt = half * kSlotFloats + ((b * k_tiles + ki) * n_tiles + ni) % half * kSlotFloats;
                for (int64_t p = 0; p < kDepth; ++p)
                  want += double{cpu::pattern(a + p * kTile + row)} * cpu::pattern(bt + p * kTile + col);
              }
    CHECK(r.device_checksum.at(0) == Approx(want).epsilon(1e-4));
    // Ragged tiles are computed whole.
    CHECK(r.flops_done == 2.0 * d.batch * (m_tiles * kTile) * (n_tiles * kTile) * (k_tiles * kDepth));
  }
}
