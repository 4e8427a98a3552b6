#include <catch2/catch.hpp>

#include <map>
#include <numeric>

#include "graphs/error.h"
#include "sim/engine.h"
#include "sim/placement.h"
#include "sim/presets.h"
#include "recorder.h"
#include "test_util.h"

using namespace placelab;
using namespace placelab::sim;
using namespace placelab::sim::testing;

namespace {

Cluster pair_cluster(double bandwidth, double latency, double memory = 1e12) {
  return Cluster(ClusterSpec{.name = "pair",
                             .devices = {unit_device("d0", memory), unit_device("d1", memory)},
                             .links = {link("l01", "d0", "d1", bandwidth, latency)}});
}

}  // namespace

TEST_CASE("sim::Simulator: chain on one device, with launch overhead and gap", "[sim][golden]") {
  graphs::GraphBuilder b("chain");
  b.add_op(op("a", 1));
  b.add_op(op("b", 2));
  b.add_op(op("c", 3));
  b.add_edge(0, 1, 8);
  b.add_edge(1, 2, 8);
  graphs::Graph g = std::move(b).build();

  SECTION("plain: the sum of op times") {
    Cluster c(ClusterSpec{.name = "one", .devices = {unit_device("d0")}});
    Simulator sim(g, c);
    SimResult r = sim.simulate(std::vector<int32_t>{0, 0, 0});
    CHECK(r.step_time_s == 6);
    CHECK(r.critical_path_s == 6);
    CHECK(r.device_busy_s[0] == 6);
    CHECK(r.num_transfers == 0);
  }
  SECTION("0.5 s launch overhead per op and a 0.25 s gap after each op") {
    Device d = unit_device("d0");
    d.launch_overhead_s = 0.5;
    d.gap_after_op_s = 0.25;
    Cluster c(ClusterSpec{.name = "one", .devices = {d}});
    Simulator sim(g, c);
    Recorder rec(g);
    SimResult r = sim.simulate(std::vector<int32_t>{0, 0, 0}, &rec);
    // a 0-1.5, b 1.75-4.25, c 4.5-8
    CHECK(rec.ops["b"].start == 1.75);
    CHECK(rec.ops["c"].start == 4.5);
    CHECK(r.step_time_s == 8);
    CHECK(r.device_busy_s[0] == 7.5);
    CHECK(r.critical_path_s == 7.5);  // gaps only delay the same device
  }
}

TEST_CASE("sim::Simulator: fork over two devices pays latency plus bytes over bandwidth", "[sim][golden]") {
  graphs::Graph g = fork_graph();
  Cluster c = pair_cluster(100, 0.5);  // 100 bytes in 1 s after 0.5 s latency
  Simulator sim(g, c);
  Recorder rec(g);
  SimResult r = sim.simulate(std::vector<int32_t>{0, 0, 1}, &rec);
  // a 0-1 on d0; b 1-3 on d0; transfer 1-2.5; c 2.5-5.5 on d1.
  CHECK(rec.ops["b"].start == 1);
  CHECK(rec.ops["c"].start == 2.5);
  CHECK(r.step_time_s == 5.5);
  CHECK(r.critical_path_s == 5.5);
  CHECK(r.total_bytes_moved == 100);
  CHECK(r.num_transfers == 1);
  CHECK(r.link_busy_s[0] == 1.5);
  CHECK(r.link_bytes[0] == 100);
  // a's output lives on d0 from 0 until b ends at 3; the copy on d1 from 1 until c ends.
  CHECK(r.device_peak_bytes[0] == 100);
  CHECK(r.device_peak_bytes[1] == 100);
  CHECK_FALSE(r.oom);
}

TEST_CASE("sim::Simulator: two transfers contend FIFO for a shared link", "[sim][golden]") {
  graphs::GraphBuilder b("join");
  b.add_op(op("a", 1, 100));
  b.add_op(op("b", 1, 100));
  b.add_op(op("c", 1));
  b.add_edge(0, 2, 100);
  b.add_edge(1, 2, 100);
  graphs::Graph g = std::move(b).build();
  Cluster c(ClusterSpec{.name = "star",
                        .devices = {unit_device("d0"), unit_device("d1"), unit_device("d2")},
                        .links = {link("l0", "d0", "sw", 100, 0.25), link("l1", "d1", "sw", 100, 0.25),
                                  link("l2", "sw", "d2", 100, 0.25)}});
  Simulator sim(g, c);
  Recorder rec(g);
  SimResult r = sim.simulate(std::vector<int32_t>{0, 1, 2}, &rec);
  // Both requested at t=1 (d0's end first: device order); a's holds l0 + l2 for 0.5 + 1 s: 1-2.5;
  // b's waits for l2: 2.5-4; c 4-5.
  REQUIRE(rec.transfers.size() == 2);
  CHECK(std::get<3>(rec.transfers[0]) == 1);
  CHECK(std::get<4>(rec.transfers[0]) == 2.5);
  CHECK(std::get<3>(rec.transfers[1]) == 2.5);
  CHECK(std::get<4>(rec.transfers[1]) == 4);
  CHECK(rec.ops["c"].start == 4);
  CHECK(r.step_time_s == 5);
  CHECK(r.critical_path_s == 3.5);  // the idle-network bound: 1 + 1.5 + 1
  CHECK(r.link_busy_s[2] == 3);
  CHECK(r.link_bytes[2] == 200);
  CHECK(r.link_bytes[0] == 100);

  SECTION("full duplex: opposite directions do not contend; half duplex: they do") {
    graphs::GraphBuilder b2("swap");
    b2.add_op(op("x", 1, 100));
    b2.add_op(op("y", 1, 100));
    b2.add_op(op("x2", 1));
    b2.add_op(op("y2", 1));
    b2.add_edge(0, 3, 100);  // x on d0 -> y2 on d1
    b2.add_edge(1, 2, 100);  // y on d1 -> x2 on d0
    graphs::Graph g2 = std::move(b2).build();
    std::vector<int32_t> place{0, 1, 0, 1};
    Cluster full = pair_cluster(100, 0.5);
    CHECK(Simulator(g2, full).simulate(place).step_time_s == 3.5);  // 1 + 1.5 + 1
    ClusterSpec half_spec = full.spec();
    half_spec.links[0].duplex = Duplex::half;
    Cluster half(half_spec);
    CHECK(Simulator(g2, half).simulate(place).step_time_s == 5);  // second transfer waits: 2.5-4, then 1 s
  }
}

TEST_CASE("sim::Simulator: with bandwidth sharing, concurrent transfers split a link max-min fairly", "[sim][golden]") {
  auto star = [] {
    return Cluster(ClusterSpec{.name = "star",
                               .devices = {unit_device("d0"), unit_device("d1"), unit_device("d2"), unit_device("d3")},
                               .links = {link("l0", "d0", "sw", 100, 0.25), link("l1", "d1", "sw", 100, 0.25),
                                         link("l2", "sw", "d2", 100, 0.25), link("l3", "sw", "d3", 100, 0.25)}});
  };
  Cluster c = star();
  SimOptions sharing{.share_bandwidth = true};
  SECTION("equal tensors: both at 50 B/s after the 0.5 s latency") {
    graphs::GraphBuilder b("join");
    b.add_op(op("a", 1, 100));
    b.add_op(op("b", 1, 100));
    b.add_op(op("c", 1));
    b.add_edge(0, 2, 100);
    b.add_edge(1, 2, 100);
    graphs::Graph g = std::move(b).build();
    Simulator sim(g, c, default_cost_model(), sharing);
    Recorder rec(g);
    SimResult r = sim.simulate(std::vector<int32_t>{0, 1, 2}, &rec);
    // Both start at 1, pay 0.5 s of latency, then share l2: 100 bytes at 50 B/s: 1.5-3.5; c 3.5-4.5.
    REQUIRE(rec.transfers.size() == 2);
    CHECK(std::get<4>(rec.transfers[0]) == 3.5);
    CHECK(std::get<4>(rec.transfers[1]) == 3.5);
    CHECK(rec.ops["c"].start == 3.5);
    CHECK(r.step_time_s == 4.5);  // FIFO: 5
    CHECK(r.link_busy_s[2] == 2);
    CHECK(r.link_bytes[2] == 200);
    CHECK(r.device_peak_bytes[2] == 200);  // both copies from t = 1
  }
  SECTION("unequal tensors: the small one ends first and the big one speeds up") {
    graphs::GraphBuilder b("join2");
    b.add_op(op("a", 1, 100));
    b.add_op(op("b", 1, 50));
    b.add_op(op("c", 1));
    b.add_op(op("x", 1, 100));  // on d3: its transfer from d0 shares l0 with a's
    b.add_op(op("y", 1));
    b.add_edge(0, 2, 100);
    b.add_edge(1, 2, 50);
    graphs::Graph g = std::move(b).build();
    Simulator sim(g, c, default_cost_model(), sharing);
    Recorder rec(g);
    sim.simulate(std::vector<int32_t>{0, 1, 2, 3, 3}, &rec);
    // From 1.5 both at 50 B/s; b's 50 bytes end at 2.5; a's last 50 bytes at 100 B/s end at 3.
    REQUIRE(rec.transfers.size() == 2);
    CHECK(std::get<0>(rec.transfers[0]) == "b");
    CHECK(std::get<4>(rec.transfers[0]) == 2.5);
    CHECK(std::get<4>(rec.transfers[1]) == 3);
    CHECK(rec.ops["c"].start == 3);
  }
  SECTION("max-min: a flow held back elsewhere leaves its share to the others") {
    // a (d0) sends to c, d, e on d2, d3, d4: three flows share l0 at 33.3 B/s. b (d1) -> c (d2) shares
    // l2 with a's flow to c, which cannot use more than 33.3, so b gets the other 66.7 (not half).
    ClusterSpec five = c.spec();
    five.devices.push_back(unit_device("d4"));
    five.links.push_back(link("l4", "sw", "d4", 100, 0.25));
    Cluster c5(five);
    graphs::GraphBuilder b("maxmin");
    b.add_op(op("a", 1, 100));
    b.add_op(op("b", 1, 100));
    b.add_op(op("c", 1));
    b.add_op(op("d", 1));
    b.add_op(op("e", 1));
    b.add_edge(0, 2, 100);
    b.add_edge(0, 3, 100);
    b.add_edge(0, 4, 100);
    b.add_edge(1, 2, 100);
    graphs::Graph g = std::move(b).build();
    Simulator sim(g, c5, default_cost_model(), sharing);
    Recorder rec(g);
    SimResult r = sim.simulate(std::vector<int32_t>{0, 1, 2, 3, 4}, &rec);
    REQUIRE(rec.transfers.size() == 4);
    CHECK(std::get<0>(rec.transfers[0]) == "b");
    CHECK(std::get<4>(rec.transfers[0]) == Approx(3.0));  // 100 bytes at 66.7 B/s from 1.5
    for (int i = 1; i < 4; ++i) CHECK(std::get<4>(rec.transfers[i]) == Approx(4.5));  // 100 at 33.3 from 1.5
    CHECK(r.step_time_s == Approx(5.5));
  }
  SECTION("transfers over the same route that start at different times share it and end in order of what is left") {
    // a, b, c (1 s each on d0) send 300, 200, 100 bytes to d1 over one link of 100 B/s, no latency.
    // 1-2: a alone at 100 B/s (200 left); 2-3: a and b at 50 B/s (150 left each); from 3: all three at
    // 33.3 B/s, so c's 100 bytes end at 6, when a and b have 50 left each; those end together at 7.
    graphs::GraphBuilder b("staggered");
    for (const char* name : {"a", "b", "c"}) b.add_op(op(name, 1, 300));
    for (const char* name : {"x", "y", "z"}) b.add_op(op(name, 1));
    b.add_edge(0, 3, 300);
    b.add_edge(1, 4, 200);
    b.add_edge(2, 5, 100);
    graphs::Graph g = std::move(b).build();
    Cluster two = pair_cluster(100, 0);
    Simulator sim(g, two, default_cost_model(), sharing);
    Recorder rec(g);
    SimResult r = sim.simulate(std::vector<int32_t>{0, 0, 0, 1, 1, 1}, &rec);
    CHECK(rec.ops["a"].end == 1);
    CHECK(rec.ops["c"].end == 3);
    std::map<std::string, double> arrival;
    for (const auto& [producer, src, dst, start, end, bytes] : rec.transfers) arrival[producer] = end;
    CHECK(arrival["c"] == Approx(6));
    CHECK(arrival["a"] == Approx(7));
    CHECK(arrival["b"] == Approx(7));
    CHECK(r.link_busy_s[0] == Approx(6));
    CHECK(r.link_bytes[0] == 600);
    CHECK(r.step_time_s == Approx(9));  // x, y and z run one after another on d1 from 7 (z first at 6)
  }
}

TEST_CASE("sim::Simulator: a measured edge time replaces the link model, and the copy still moves and holds its bytes",
          "[sim][golden]") {
  graphs::GraphBuilder b("timed");
  b.add_op(op("a", 1, 100));
  b.add_op(op("b", 1));
  b.add_edge(0, 1, 100, /*comm_s=*/0.25);
  graphs::Graph g = std::move(b).build();
  Cluster c = pair_cluster(100, 0.5);  // the model would take 0.5 + 100 / 100 = 1.5 s
  for (bool sharing : {false, true}) {
    INFO("share_bandwidth " << sharing);
    for (bool measured : {false, true}) {
      INFO("use_edge_comm " << measured);
      Simulator sim(g, c, default_cost_model(), SimOptions{.use_edge_comm = measured, .share_bandwidth = sharing});
      Recorder rec(g);
      SimResult r = sim.simulate(std::vector<int32_t>{0, 1}, &rec);
      const double arrive = measured ? 1.25 : 2.5;
      REQUIRE(rec.transfers.size() == 1);
      CHECK(std::get<4>(rec.transfers[0]) == arrive);
      CHECK(std::get<5>(rec.transfers[0]) == 100);
      CHECK(r.step_time_s == arrive + 1);
      CHECK(r.total_bytes_moved == 100);
      CHECK(r.link_bytes[0] == 100);
      CHECK(r.device_peak_bytes[0] == 100);  // a's output until its transfer ends
      CHECK(r.device_peak_bytes[1] == 100);  // the received copy until b ends
    }
  }
}

TEST_CASE("sim::Simulator: a transfer is measured only when every edge it serves is, whatever their order",
          "[sim][golden]") {
  // a feeds b (100 bytes, unmeasured) and c (50 bytes, comm_s) on d1: one transfer serves both, and it
  // is modelled (1 s over the link); c's edge counts as modelled on the critical path too (0.5 s, not
  // its comm_s). With both edges measured it takes the longer comm_s.
  const Cluster c = pair_cluster(100, 0);
  for (double comm : {0.25, 5.0})
    for (bool b_measured : {false, true})
      for (bool b_first : {false, true})
        for (bool sharing : {false, true}) {
          INFO("comm_s " << comm << ", b measured " << b_measured << ", b's edge first " << b_first << ", sharing "
                         << sharing);
          graphs::GraphBuilder gb("mixed");
          gb.add_op(op("a", 1, 100));
          gb.add_op(op("b", 1));
          gb.add_op(op("c", 0));
          const double b_comm = b_measured ? 0.5 : graphs::kUnknown;
          if (b_first) gb.add_edge(0, 1, 100, b_comm);
          gb.add_edge(0, 2, 50, comm);
          if (!b_first) gb.add_edge(0, 1, 100, b_comm);
          graphs::Graph g = std::move(gb).build();
          Simulator sim(g, c, default_cost_model(),
                        SimOptions{.use_edge_comm = true, .share_bandwidth = sharing});
          Recorder rec(g);
          SimResult r = sim.simulate(std::vector<int32_t>{0, 1, 1}, &rec);
          const double arrive = 1 + (b_measured ? std::max(comm, 0.5) : 1.0);
          REQUIRE(rec.transfers.size() == 1);
          CHECK(std::get<4>(rec.transfers[0]) == arrive);
          CHECK(r.step_time_s == arrive + 1);
          CHECK(r.critical_path_s == (b_measured ? std::max(1 + comm, 2.5) : 3.0));
          CHECK(r.critical_path_s <= r.step_time_s);
        }
}
TEST_CASE("sim::Simulator: a multi-hop route holds every hop, latency adds, the slowest hop sets the rate", "[sim][golden]") {
  graphs::GraphBuilder b("hop");
  b.add_op(op("a", 1, 100));
  b.add_op(op("b", 1));
  b.add_edge(0, 1, 100);
  graphs::Graph g = std::move(b).build();
  Cluster c(ClusterSpec{.name = "line",
                        .devices = {unit_device("d0"), unit_device("d1")},
                        .links = {link("h0", "d0", "s1", 200, 0.1), link("h1", "s1", "s2", 100, 0.2),
                                  link("h2", "s2", "d1", 400, 0.3)}});
  Simulator sim(g, c);
  Recorder rec(g);
  SimResult r = sim.simulate(std::vector<int32_t>{0, 1}, &rec);
  // 0.6 s latency + 100 bytes / 100 B/s = 1.6 s: transfer 1-2.6, b 2.6-3.6.
  CHECK(rec.ops["b"].start == Approx(2.6));
  CHECK(r.step_time_s == Approx(3.6));
  for (int l = 0; l < 3; ++l) {
    CHECK(r.link_busy_s[l] == Approx(1.6));
    CHECK(r.link_bytes[l] == 100);
  }
}

TEST_CASE("sim::Simulator: memory peak counts resident, activations until the last local consumer, temp", "[sim][golden]") {
  graphs::GraphBuilder b("mem");
  graphs::OpSpec a = op("a", 1, 10);
  a.param_bytes = 100;
  a.temp_bytes = 5;
  graphs::OpSpec bb = op("b", 1, 20);
  bb.temp_bytes = 7;
  graphs::OpSpec c = op("c", 1, 0);
  c.temp_bytes = 50;
  b.add_op(a);
  b.add_op(bb);
  b.add_op(c);
  b.add_edge(0, 1, 10);
  b.add_edge(1, 2, 20);
  SECTION("a read by b only: freed when b ends") {
    graphs::Graph g = std::move(b).build();
    Cluster one(ClusterSpec{.name = "one", .devices = {unit_device("d0", 1000)}});
    // 100 resident; a: +15 -> 115; b: +27 -> 137 (peak); b ends: -7 -10 -> 120; c: +50 -> 170 (peak).
    CHECK(Simulator(g, one).simulate(std::vector<int32_t>{0, 0, 0}).device_peak_bytes[0] == 170);
  }
  SECTION("a also read by c: held until c ends, and an OOM is reported with its excess") {
    b.add_edge(0, 2, 10);
    graphs::Graph g = std::move(b).build();
    Cluster one(ClusterSpec{.name = "one", .devices = {unit_device("d0", 1000)}});
    SimResult r = Simulator(g, one).simulate(std::vector<int32_t>{0, 0, 0});
    CHECK(r.device_peak_bytes[0] == 180);
    CHECK_FALSE(r.oom);
    Cluster small(ClusterSpec{.name = "small", .devices = {unit_device("d0", 150)}});
    SimResult o = Simulator(g, small).simulate(std::vector<int32_t>{0, 0, 0});
    CHECK(o.oom);
    CHECK(o.device_excess_bytes[0] == 30);
    CHECK(o.step_time_s == r.step_time_s);  // the run completes as if memory were enough
  }
}

TEST_CASE("sim::Simulator: received copies live from transfer start to their last local consumer", "[sim][golden]") {
  graphs::GraphBuilder b("recv");
  b.add_op(op("a", 1, 100));
  graphs::OpSpec big = op("big", 4, 0);
  big.temp_bytes = 1000;
  b.add_op(op("c1", 1, 0));
  b.add_op(op("c2", 1, 0));
  b.add_op(big);
  b.add_edge(0, 1, 100);
  b.add_edge(0, 2, 100);
  graphs::Graph g = std::move(b).build();
  Cluster c = pair_cluster(100, 0);
  Recorder rec(g);
  // big runs 0-4 on d1; a 0-1 on d0; transfer 1-2 (one for both consumers); c1 4-5, c2 5-6 on d1.
  SimResult r = Simulator(g, c).simulate(std::vector<int32_t>{0, 1, 1, 1}, &rec);
  CHECK(r.num_transfers == 1);
  CHECK(rec.ops["c2"].start == 5);
  CHECK(r.device_peak_bytes[1] == 1100);  // the copy (from t=1) overlaps big's temp (until 4)
  CHECK(r.device_peak_bytes[0] == 100);
}

TEST_CASE("sim::Simulator: priority by ready time (default) or by upward rank", "[sim][golden]") {
  graphs::GraphBuilder b("prio");
  b.add_op(op("busy", 5));  // d0 is busy until 5
  b.add_op(op("p1", 1));    // d1: p1 0-1, p2 1-3
  b.add_op(op("p2", 2));
  b.add_op(op("x", 1));     // d0, ready at 1, nothing after it: rank 1
  b.add_op(op("y", 1));     // d0, ready at 3, then z: rank 11
  b.add_op(op("z", 10));    // d1
  b.add_edge(1, 2, 0);
  b.add_edge(1, 3, 0);      // control edges: no transfers
  b.add_edge(2, 4, 0);
  b.add_edge(4, 5, 0);
  graphs::Graph g = std::move(b).build();
  Cluster c = pair_cluster(1, 0);
  std::vector<int32_t> place{0, 1, 1, 0, 0, 1};
  SECTION("ready time first: x (ready at 1) before y (ready at 3)") {
    Simulator sim(g, c);
    CHECK(sim.upward_rank(4) == 11);
    Recorder rec(g);
    SimResult r = sim.simulate(place, &rec);
    CHECK(rec.ops["x"].start == 5);
    CHECK(rec.ops["y"].start == 6);
    CHECK(r.step_time_s == 17);
  }
  SECTION("rank first: y (rank 11) before x (rank 1), both ready when d0 frees at 5") {
    Simulator sim(g, c, default_cost_model(), SimOptions{.priority = Priority::rank});
    Recorder rec(g);
    SimResult r = sim.simulate(place, &rec);
    CHECK(rec.ops["y"].start == 5);
    CHECK(rec.ops["x"].start == 6);
    CHECK(r.step_time_s == 16);
  }
}

TEST_CASE("sim::Simulator: invalid placements are errors naming the op", "[sim]") {
  graphs::GraphBuilder b("pin");
  b.add_op(op("a", 1));
  graphs::OpSpec p = op("p", 1);
  p.pinned_kind = "cpu";
  b.add_op(p);
  graphs::Graph g = std::move(b).build();
  Cluster c = pair_cluster(1, 0);
  Simulator sim(g, c);
  CHECK_THROWS_WITH(sim.simulate(std::vector<int32_t>{0}), Catch::Contains("placement has 1 entries but graph \"pin\" has 2 ops"));
  CHECK_THROWS_WITH(sim.simulate(std::vector<int32_t>{0, 2}), Catch::Contains("op \"p\" is on device 2"));
  CHECK_THROWS_WITH(sim.simulate(std::vector<int32_t>{0, 1}),
                    Catch::Contains("op \"p\" is pinned to kind \"cpu\" but placed on \"d1\" (kind \"unit\")"));
  std::mt19937_64 rng(1);
  CHECK_THROWS_WITH(random_placement(sim, rng), Catch::Contains("pinned to kind \"cpu\" but cluster \"pair\" has none"));
}

TEST_CASE("sim::Simulator: ops and transfers longer than 1e9 s are an error naming them", "[sim]") {
  graphs::GraphBuilder b("slow");
  b.add_op(op("a", 2e9));
  b.add_op(op("b", 1));
  b.add_edge(0, 1, 100);
  const graphs::Graph slow = std::move(b).build();
  const Cluster c = pair_cluster(100, 0);
  CHECK_THROWS_WITH(Simulator(slow, c), Catch::Contains("cost model \"roofline\" gives 2e+09 s for op \"a\" on \"d0\"") &&
                                           Catch::Contains("at most 1e+09 s"));
  graphs::GraphBuilder m("slow_measured");  // the message says where the time came from
  graphs::OpSpec timed = op("a", 1);
  timed.measured_s = {{"unit", 3e9}};
  m.add_op(timed);
  const graphs::Graph slow_measured = std::move(m).build();
  CHECK_THROWS_WITH(Simulator(slow_measured, c),
                    Catch::Contains("the graph's measured time on kind \"unit\" gives 3e+09 s for op \"a\" on \"d0\""));

  graphs::GraphBuilder t("big_tensor");
  t.add_op(op("a", 1));
  t.add_op(op("b", 1));
  t.add_edge(0, 1, 1e12);
  const graphs::Graph big = std::move(t).build();
  const Cluster fast = pair_cluster(1e3, 0), slow_link = pair_cluster(1e2, 0);
  Simulator fine(big, fast);  // 1e9 s exactly
  CHECK(fine.simulate(std::vector<int32_t>{0, 1}).step_time_s == 2 + 1e9);
  CHECK_THROWS_WITH(Simulator(big, slow_link),
                    Catch::Contains("sending the largest tensor (1e+12 bytes) from \"d0\" to \"d1\" takes 1e+10 s"));
}

TEST_CASE("sim::Simulator: byte amounts beyond exact memory accounting are an error, not a wrong peak", "[sim]") {
  for (double huge : {1e19, 1e308}) {
    graphs::GraphBuilder b("huge");
    graphs::OpSpec a = op("a", 1, huge);
    b.add_op(a);
    b.add_op(op("b", 1));
    b.add_edge(0, 1, 100);
    graphs::Graph g = std::move(b).build();
    Cluster c = pair_cluster(1, 0);
    CHECK_THROWS_WITH(Simulator(g, c), Catch::Contains("graph \"huge\" has") && Catch::Contains("check the graph's byte amounts"));
  }
  graphs::GraphBuilder b("large");  // a petabyte still counts exactly
  graphs::OpSpec a = op("a", 1, 1e15);
  a.param_bytes = 1e15;
  b.add_op(a);
  graphs::Graph g = std::move(b).build();
  Cluster c = pair_cluster(1, 0, 1e16);
  Simulator sim(g, c);
  SimResult r = sim.simulate(std::vector<int32_t>{0});
  CHECK(r.device_peak_bytes[0] == 2e15);
  CHECK_FALSE(r.oom);
}

TEST_CASE("sim::Simulator: invariants on seeded random graphs", "[sim]") {
  Cluster c = make_preset("v100-nvlink-8");
  for (uint64_t seed : {1, 2, 3}) {
    graphs::Graph g = random_dag(300, seed);
    Simulator sim(g, c, default_cost_model(), SimOptions{.share_bandwidth = seed == 3});
    std::mt19937_64 rng(seed);
    for (int trial = 0; trial < 5; ++trial) {
      std::vector<int32_t> place = random_placement(sim, rng);
      SimResult r = sim.simulate(place);
      double work = 0;
      for (graphs::OpId op = 0; op < g.num_ops(); ++op) work += sim.op_time_s(op, place[op]);
      CHECK(r.step_time_s >= r.critical_path_s * (1 - 1e-12));
      CHECK(r.step_time_s >= work / c.num_devices() * (1 - 1e-12));
      CHECK(std::accumulate(r.device_busy_s.begin(), r.device_busy_s.end(), 0.0) == Approx(work));
      SimResult again = sim.simulate(place);  // deterministic, bit for bit
      CHECK(again.step_time_s == r.step_time_s);
      CHECK(again.device_peak_bytes == r.device_peak_bytes);
      CHECK(again.link_bytes == r.link_bytes);
      for (double peak : r.device_peak_bytes) CHECK(peak >= 0);
    }
    // One device: the sum of op times plus a gap after every op but the last.
    std::vector<int32_t> all0(g.num_ops(), 0);
    ClusterSpec gapped = c.spec();
    gapped.devices[0].gap_after_op_s = 1e-3;
    Cluster cg(gapped);
    Simulator sim_gap(g, cg);
    double work = 0;
    for (graphs::OpId op = 0; op < g.num_ops(); ++op) work += sim_gap.op_time_s(op, 0);
    CHECK(sim_gap.simulate(all0).step_time_s == Approx(work + (g.num_ops() - 1) * 1e-3).epsilon(1e-12));
  }
}

TEST_CASE("sim::Simulator: simulate_batch equals one-by-one", "[sim]") {
  graphs::Graph g = random_dag(400, 7);
  Cluster c = make_preset("a100-4");
  Simulator sim(g, c);
  std::mt19937_64 rng(7);
  std::vector<std::vector<int32_t>> places;
  for (int i = 0; i < 16; ++i) places.push_back(random_placement(sim, rng));
  std::vector<SimResult> batch = sim.simulate_batch(places);
  REQUIRE(batch.size() == places.size());
  std::vector<SimResult> again(3);  // reused results and per-thread scratch give the same numbers
  sim.simulate_batch(places, again);
  REQUIRE(again.size() == places.size());
  Simulator moved = std::move(sim);  // the scratch pool moves along
  moved.simulate_batch(places, again);
  for (size_t i = 0; i < places.size(); ++i) CHECK(again[i].step_time_s == batch[i].step_time_s);
  SimScratchPtr scratch = moved.make_scratch();
  SimResult one;
  for (size_t i = 0; i < places.size(); ++i) {
    moved.simulate(places[i], *scratch, one);  // reused scratch: no state leaks between runs
    CHECK(batch[i].step_time_s == one.step_time_s);
    CHECK(batch[i].critical_path_s == one.critical_path_s);
    CHECK(batch[i].device_peak_bytes == one.device_peak_bytes);
    CHECK(batch[i].link_busy_s == one.link_busy_s);
    CHECK(batch[i].total_bytes_moved == one.total_bytes_moved);
  }
}

TEST_CASE("sim::Simulator: many devices (event tree) and few (event scan) give the same schedule", "[sim]") {
  auto star = [](int n) {
    ClusterSpec spec{.name = "star" + std::to_string(n)};
    for (int d = 0; d < n; ++d) {
      spec.devices.push_back(unit_device("d" + std::to_string(d), 5000));
      spec.links.push_back(link("l" + std::to_string(d), "d" + std::to_string(d), "sw", 100, 0.1));
    }
    return Cluster(spec);
  };
  graphs::Graph g = random_dag(250, 5);
  Cluster few = star(8), many = star(40);
  for (SimOptions options : {SimOptions{}, SimOptions{.share_bandwidth = true}}) {
    Simulator a(g, few, default_cost_model(), options), b(g, many, default_cost_model(), options);
    std::mt19937_64 rng(5);
    for (int trial = 0; trial < 3; ++trial) {
      std::vector<int32_t> place = random_placement(a, rng);  // devices 0..7 only
      SimResult ra = a.simulate(place), rb = b.simulate(place);
      CHECK(ra.step_time_s == rb.step_time_s);
      CHECK(ra.critical_path_s == rb.critical_path_s);
      CHECK(ra.total_bytes_moved == rb.total_bytes_moved);
      for (int d = 0; d < 8; ++d) {
        CHECK(ra.device_peak_bytes[d] == rb.device_peak_bytes[d]);
        CHECK(ra.link_busy_s[d] == rb.link_busy_s[d]);
      }
      CHECK(rb.device_busy_s[20] == 0);
    }
  }
}

// The default options without an observer run the event loop's default mode (the other modes' branches
// compiled out); an observer makes the same run take its general mode. Every fact must agree bit for
// bit, on placements that spread ops, keep them in blocks and stack them, with ties (dyadic times,
// zero-time ops, zero-byte edges) and without, on few devices (event scan) and many (event tree), with
// gaps and busy links.
TEST_CASE("sim::Simulator: the default mode of the event loop gives the general mode's results bit for bit", "[sim]") {
  struct Ignore : SimObserver {
    void on_op(graphs::OpId, int32_t, double, double) override {}
    void on_transfer(graphs::OpId, int32_t, int32_t, double, double, double) override {}
  } ignore;
  auto star = [](int n, double gap, double busy_after) {
    ClusterSpec spec{.name = "star" + std::to_string(n)};
    for (int d = 0; d < n; ++d) {
      spec.devices.push_back(unit_device("d" + std::to_string(d), 3000));
      spec.devices.back().gap_after_op_s = d % 2 == 0 ? gap : 0;
      spec.links.push_back(link("l" + std::to_string(d), "d" + std::to_string(d), "sw", 64, 0.5));
      spec.links.back().busy_after_s = d % 3 == 0 ? busy_after : 0;
    }
    return Cluster(spec);
  };
  // Dyadic amounts: equal times and instants are frequent, and some ops take no time.
  auto tied_dag = [](int n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    graphs::GraphBuilder b("tied" + std::to_string(seed));
    for (int i = 0; i < n; ++i) {
      graphs::OpSpec s = op("op" + std::to_string(i), static_cast<double>(rng() % 3), 64.0 * static_cast<double>(rng() % 3));
      s.param_bytes = 16.0 * static_cast<double>(rng() % 4);
      s.temp_bytes = 32.0 * static_cast<double>(rng() % 2);
      b.add_op(std::move(s));
      std::vector<int> used;
      for (int k = 0, preds = i == 0 ? 0 : 1 + static_cast<int>(rng() % 3); k < preds; ++k) {
        const int src = static_cast<int>(rng() % static_cast<uint64_t>(i));
        if (std::find(used.begin(), used.end(), src) != used.end()) continue;
        used.push_back(src);
        b.add_edge(src, i, rng() % 4 == 0 ? 0.0 : b.op(src).output_bytes);
      }
    }
    return std::move(b).build();
  };
  const std::vector<Cluster> clusters = {make_preset("v100-nvlink-8"), make_preset("cpu-gpu-4"), star(4, 0.25, 0.5),
                                         star(24, 0, 0.25)};
  for (const graphs::Graph& g : {random_dag(400, 21), tied_dag(400, 22), tied_dag(300, 23)}) {
    for (const Cluster& c : clusters) {
      Simulator sim(g, c);
      std::mt19937_64 rng(24);
      std::vector<std::vector<int32_t>> placements;
      for (int i = 0; i < 6; ++i) placements.push_back(random_placement(sim, rng));
      std::vector<int32_t> blocks(g.num_ops()), one(g.num_ops(), 0);
      for (graphs::OpId op = 0; op < g.num_ops(); ++op)
        blocks[op] = static_cast<int32_t>(static_cast<int64_t>(op) * c.num_devices() / g.num_ops());
      placements.push_back(blocks);
      placements.push_back(one);
      for (const auto& place : placements) {
        const SimResult lean = sim.simulate(place), general = sim.simulate(place, &ignore);
        require_same(lean, general);
        REQUIRE(lean.busy_until_s == general.busy_until_s);
        REQUIRE(lean.device_excess_bytes == general.device_excess_bytes);
        REQUIRE(lean.oom == general.oom);
      }
    }
  }
}

TEST_CASE("sim::Simulator: devices with equal op times share a time class, and each op takes its own device's time",
          "[sim]") {
  // g0, g1, g2 alike, c0 half as fast: two classes, the run reading times by class.
  ClusterSpec spec{.name = "mixed"};
  for (const char* name : {"g0", "g1", "c0", "g2"}) {
    spec.devices.push_back(unit_device(name));
    if (std::string(name) == "c0") spec.devices.back().peak_flops_per_s = 0.5;
    spec.links.push_back(link(std::string("l") + name, name, "sw", 64, 0.5));
  }
  const Cluster mixed(spec);
  const graphs::Graph g = random_dag(80, 31);
  Simulator sim(g, mixed);
  REQUIRE(sim.num_time_classes() == 2);
  CHECK(sim.time_class(0) == 0);
  CHECK(sim.time_class(1) == 0);
  CHECK(sim.time_class(2) == 1);
  CHECK(sim.time_class(3) == 0);
  std::mt19937_64 rng(32);
  for (int i = 0; i < 4; ++i) {
    const std::vector<int32_t> place = random_placement(sim, rng);
    Recorder rec(g);
    const SimResult general = sim.simulate(place, &rec);
    for (graphs::OpId op = 0; op < g.num_ops(); ++op) {
      const Span& span = rec.ops.at(g.op_name(op));
      REQUIRE(span.device == place[op]);
      REQUIRE(span.end == span.start + sim.op_time_s(op, span.device));
    }
    REQUIRE(sim.simulate(place).step_time_s == general.step_time_s);
  }
  // No two alike: as many classes as devices.
  spec.devices[1].peak_flops_per_s = 2;
  spec.devices[3].peak_flops_per_s = 4;
  const Cluster distinct(spec);
  REQUIRE(Simulator(g, distinct).num_time_classes() == 4);
}
