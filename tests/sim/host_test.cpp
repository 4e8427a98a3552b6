// The simulator's model of a host's devices: copies made by the device itself (no copy engine), copies
// whose bandwidth follows their size (a link's efficiency curve), and devices that share a memory (memory
// domains with contended efficiency curves). Semantics: docs/simulator.md.
#include <catch2/catch.hpp>

#include "graphs/error.h"
#include "sim/engine.h"
#include "recorder.h"
#include "test_util.h"

using namespace placelab;
using namespace placelab::sim;
using namespace placelab::sim::testing;

TEST_CASE("sim::Simulator: a device without a copy engine sends its copies itself, one after another", "[sim][golden]") {
  graphs::Graph g = fork_graph();  // a (1 s) feeds b (2 s) and c (3 s) with 100 bytes each
  Device d0 = unit_device("d0");
  d0.copy_engine = false;
  SECTION("the producer's device is busy while it copies") {
    Cluster c(ClusterSpec{.name = "pair", .devices = {d0, unit_device("d1")}, .links = {link("l01", "d0", "d1", 100, 0.5)}});
    Simulator sim(g, c);
    Recorder rec(g);
    SimResult r = sim.simulate(std::vector<int32_t>{0, 0, 1}, &rec);
    // a 0-1; the copy 1-2.5 holds d0, so b runs 2.5-4.5 (1-3 with a copy engine); c 2.5-5.5 on d1.
    CHECK(rec.ops["b"].start == 2.5);
    CHECK(rec.ops["c"].start == 2.5);
    CHECK(r.step_time_s == 5.5);
    CHECK(r.device_busy_s[0] == 3);  // ops only
  }
  SECTION("copies to two devices go one after the other") {
    auto three = [](const Device& first) {
      return Cluster(ClusterSpec{.name = "three",
                                 .devices = {first, unit_device("d1"), unit_device("d2")},
                                 .links = {link("l01", "d0", "d1", 100, 0.5), link("l02", "d0", "d2", 100, 0.5),
                                           link("l12", "d1", "d2", 100, 0.5)}});
    };
    Cluster c = three(d0);
    Recorder rec(g);
    SimResult r = Simulator(g, c).simulate(std::vector<int32_t>{0, 1, 2}, &rec);
    // To d1 1-2.5, then to d2 2.5-4 (both 1-2.5 with a copy engine): b 2.5-4.5, c 4-7.
    REQUIRE(rec.transfers.size() == 2);
    CHECK(std::get<3>(rec.transfers[1]) == 2.5);
    CHECK(rec.ops["c"].start == 4);
    CHECK(r.step_time_s == 7);
    Cluster overlapped = three(unit_device("d0"));
    CHECK(Simulator(g, overlapped).simulate(std::vector<int32_t>{0, 1, 2}).step_time_s == 5.5);
  }
  SECTION("bandwidth sharing does not model it: a clear error") {
    Cluster c(ClusterSpec{.name = "pair", .devices = {d0, unit_device("d1")}, .links = {link("l01", "d0", "d1", 100, 0.5)}});
    CHECK_THROWS_WITH(Simulator(g, c, default_cost_model(), SimOptions{.share_bandwidth = true}),
                      Catch::Contains("\"d0\"") && Catch::Contains("no copy engine"));
  }
}

TEST_CASE("sim::Simulator: a link's efficiency curve sets a copy's bandwidth by its size", "[sim][golden]") {
  graphs::Graph g = fork_graph();
  Link l = link("l01", "d0", "d1", 100, 0.5);
  // Efficiency 1 at 10 bytes, 0.5 at 1000: 0.75 at 100 (linear in log size), so 100 bytes take 0.5 + 100 / 75 s.
  l.efficiency_curve = EfficiencyCurve{.size = {10, 1000}, .efficiency = {1, 0.5}};
  Cluster c(ClusterSpec{.name = "pair", .devices = {unit_device("d0"), unit_device("d1")}, .links = {l}});
  const double copy_s = 0.5 + 100.0 / 75;
  CHECK(c.transfer_time_s(0, 1, 100) == Approx(copy_s));
  CHECK(c.transfer_time_s(0, 1, 1e6) == Approx(0.5 + 1e6 / 50));  // held at the last point's beyond it
  for (bool sharing : {false, true}) {
    Recorder rec(g);
    SimResult r = Simulator(g, c, default_cost_model(), SimOptions{.share_bandwidth = sharing})
                      .simulate(std::vector<int32_t>{0, 0, 1}, &rec);
    CHECK(rec.ops["c"].start == Approx(1 + copy_s));
    CHECK(r.step_time_s == Approx(1 + copy_s + 3));
    CHECK(r.critical_path_s == Approx(1 + copy_s + 3));
  }
}

TEST_CASE("sim::Simulator: devices of one memory domain run at their contended efficiency while another is busy",
          "[sim][golden]") {
  // Two independent streaming ops of 100 bytes (1 s each at 100 B/s alone; 2 s at the contended efficiency 0.5)
  // and a third that reads the first's output.
  graphs::GraphBuilder b("streams");
  for (const char* name : {"a", "b", "c"})
    b.add_op(graphs::OpSpec{.name = name, .type = "Add", .bytes_read = 50, .bytes_written = 50, .output_bytes = 0});
  b.add_edge(0, 2, 0);  // control edge: c after a, on any device
  graphs::Graph g = std::move(b).build();
  auto device = [](std::string name, std::string domain) {
    Device d = unit_device(std::move(name));
    d.memory_bandwidth_bytes_per_s = 100;
    d.memory_domain = std::move(domain);
    d.contended_efficiency_curves = {{"elementwise", EfficiencyCurve{.size = {1}, .efficiency = {0.5}}}};
    return d;
  };
  auto cluster = [&](std::string domain1) {
    return Cluster(ClusterSpec{.name = "host", .devices = {device("d0", "host"), device("d1", std::move(domain1))},
                               .links = {link("l01", "d0", "d1", 1e9, 0)}});
  };
  SECTION("both start at once: both are contended") {
    Cluster c = cluster("host");
    Recorder rec(g);
    SimResult r = Simulator(g, c).simulate(std::vector<int32_t>{0, 1, 0}, &rec);
    CHECK(rec.ops["a"].end == 2);
    CHECK(rec.ops["b"].end == 2);
    CHECK(rec.ops["c"].start == 2);
    CHECK(rec.ops["c"].end == 3);  // alone by then: 1 s
    CHECK(r.step_time_s == 3);
    CHECK(r.critical_path_s == 3);
    CHECK(r.device_busy_s[0] == 3);
  }
  SECTION("one device alone is never contended") {
    Cluster c = cluster("host");
    CHECK(Simulator(g, c).simulate(std::vector<int32_t>{0, 0, 0}).step_time_s == 3);
  }
  SECTION("alone first, then beside the other") {
    Cluster c = cluster("host");
    Recorder rec(g);
    Simulator(g, c).simulate(std::vector<int32_t>{0, 0, 1}, &rec);
    CHECK(rec.ops["a"].end == 1);  // a first (it has a successor), d1 idle
    CHECK(rec.ops["b"].end == 3);  // b on d0 and c on d1 both start at 1
    CHECK(rec.ops["c"].end == 3);
  }
  SECTION("another domain, or none, shares nothing") {
    for (const char* other : {"other", ""}) {
      Cluster c = cluster(other);
      CHECK(Simulator(g, c).simulate(std::vector<int32_t>{0, 1, 0}).step_time_s == 2);
    }
  }
}

TEST_CASE("sim::Simulator: a link's loaded curve sets the bandwidth of a copy into a busy device", "[sim][golden]") {
  // a (1 s) on d0 sends 100 bytes to c on d1; x (10 s) on d1 runs from 0 unless placed on d0.
  graphs::GraphBuilder b("loaded");
  b.add_op(op("a", 1, 100));
  b.add_op(op("c", 1));
  b.add_op(op("x", 10));
  b.add_edge(0, 1, 100);
  graphs::Graph g = std::move(b).build();
  Link l = link("l01", "d0", "d1", 100, 0.5);
  l.loaded_efficiency_curve = EfficiencyCurve{.size = {1}, .efficiency = {0.5}};  // half the bandwidth when loaded
  Cluster c(ClusterSpec{.name = "pair", .devices = {unit_device("d0"), unit_device("d1")}, .links = {l}});
  CHECK(c.transfer_time_s(0, 1, 100) == 1.5);  // an idle network: the unloaded curve (none: full bandwidth)
  // x on d1: the copy at 1 goes into a busy d1, 0.5 + 100 / 50 s. x on d0 (first: its upward rank is higher):
  // a runs 10-11 and its copy goes into an idle d1, 0.5 + 100 / 100 s.
  for (auto [x_device, end] : {std::pair{1, 3.5}, std::pair{0, 12.5}}) {
    Recorder rec(g);
    Simulator(g, c).simulate(std::vector<int32_t>{0, 1, x_device}, &rec);
    REQUIRE(rec.transfers.size() == 1);
    CHECK(std::get<4>(rec.transfers[0]) == end);
  }
}
