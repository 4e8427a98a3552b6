// Multi-node presets (KIND-nodes-NxG[-osR]): their datasheet numbers, the routes' shapes, transfer times
// within a node, on one rail and across rails against hand-computed values, contention on a shared NIC or
// uplink, and the errors for bad names. The numbers are docs/simulator.md's "Multi-node presets" table.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "graphs/error.h"
#include "sim/cluster.h"
#include "sim/engine.h"
#include "sim/presets.h"
#include "recorder.h"
#include "test_util.h"
#include "tests/test_util.h"

using namespace placelab;
using namespace placelab::sim;
using namespace placelab::sim::testing;

namespace {

constexpr double GiB = 1024.0 * 1024 * 1024;
// Hand-computed route latencies: an NVLink hop 1 us; a NIC 1 us; the leaf's crossbar 0; a leaf port to its
// uplink and an uplink to the spine 0.25 us each.
constexpr double kIntraLatency = 2e-6, kRailLatency = 2e-6, kCrossLatency = 2e-6 + 4 * 0.25e-6;

int32_t dev(const Cluster& c, const std::string& name) {
  const int32_t d = c.find_device(name);
  REQUIRE(d >= 0);
  return d;
}

// The link names of the route from device `s` to device `t`.
std::vector<std::string> route_links(const Cluster& c, const std::string& s, const std::string& t) {
  std::vector<std::string> out;
  for (int32_t ch : c.route(dev(c, s), dev(c, t))) out.push_back(c.link(Cluster::channel_link(ch)).name);
  return out;
}

struct Transfer {
  double start_s, end_s;
};

// Simulates producers on `sources` (each sends `bytes` to the consumer on the same index of `sinks`) and
// returns each transfer's span, in the order of the pairs.
std::vector<Transfer> transfers(const Cluster& c, const std::vector<std::string>& sources,
                                const std::vector<std::string>& sinks, double bytes, bool share = false) {
  graphs::GraphBuilder b("pairs");
  std::vector<int32_t> place;
  for (size_t k = 0; k < sources.size(); ++k) {
    b.add_op(op("p" + std::to_string(k), 0, bytes));
    place.push_back(dev(c, sources[k]));
  }
  for (size_t k = 0; k < sinks.size(); ++k) {
    b.add_op(op("q" + std::to_string(k), 0));
    b.add_edge(static_cast<graphs::OpId>(sources.size() == 1 ? 0 : k), static_cast<graphs::OpId>(sources.size() + k), bytes);
    place.push_back(dev(c, sinks[k]));
  }
  graphs::Graph g = std::move(b).build();
  SimOptions options;
  options.share_bandwidth = share;
  Simulator sim(g, c, default_cost_model(), options);
  Recorder rec(g);
  sim.simulate(place, &rec);
  REQUIRE(rec.transfers.size() == sinks.size());
  std::vector<Transfer> out(sinks.size());
  for (const auto& [op, src, dst, start, end, moved] : rec.transfers) {
    CHECK(moved == bytes);
    for (size_t k = 0; k < sinks.size(); ++k)
      if (dst == dev(c, sinks[k])) out[k] = Transfer{start, end};
  }
  // Each consumer starts as its input arrives (its device is idle).
  for (size_t k = 0; k < sinks.size(); ++k) CHECK(rec.ops["q" + std::to_string(k)].start == out[k].end_s);
  return out;
}

// One transfer's time from its producer's end, with an idle network.
double one_transfer_s(const Cluster& c, const std::string& s, const std::string& t, double bytes) {
  const std::vector<Transfer> r = transfers(c, {s}, {t}, bytes);
  return r[0].end_s - r[0].start_s;
}

}  // namespace

TEST_CASE("sim::multinode: presets have the datasheet numbers and N x G GPUs named by node", "[sim][multinode]") {
  const Cluster h = make_preset("h100-nodes-4x8");
  REQUIRE(h.num_devices() == 32);
  CHECK(h.name() == "h100-nodes-4x8");
  CHECK(h.device(0).name == "n0.gpu0");
  CHECK(h.device(31).name == "n3.gpu7");
  CHECK(h.kinds() == std::vector<std::string>{"h100"});
  CHECK(h.device(9).peak_flops_per_s == 67e12);
  CHECK(h.device(9).memory_bandwidth_bytes_per_s == 3350e9);
  CHECK(h.device(9).memory_bytes == 80 * GiB);
  // Links: 32 NVLink, 32 NIC, 32 crossbar ports, 32 port uplinks, 8 leaves x 4 spine uplinks (non-blocking).
  CHECK(h.num_links() == 5 * 32);
  CHECK(h.route_bandwidth_bytes_per_s(dev(h, "n0.gpu1"), dev(h, "n0.gpu2")) == 450e9);
  CHECK(h.route_bandwidth_bytes_per_s(dev(h, "n0.gpu1"), dev(h, "n3.gpu1")) == 50e9);
  CHECK(h.route_bandwidth_bytes_per_s(dev(h, "n0.gpu1"), dev(h, "n3.gpu6")) == 50e9);

  const Cluster a = make_preset("a100-nodes-2x8");
  REQUIRE(a.num_devices() == 16);
  CHECK(a.kinds() == std::vector<std::string>{"a100"});
  CHECK(a.device(3).peak_flops_per_s == 19.5e12);
  CHECK(a.device(3).memory_bandwidth_bytes_per_s == 2039e9);  // the 80GB A100
  CHECK(a.device(3).memory_bytes == 80 * GiB);
  CHECK(a.route_bandwidth_bytes_per_s(dev(a, "n1.gpu0"), dev(a, "n1.gpu7")) == 300e9);
  CHECK(a.route_bandwidth_bytes_per_s(dev(a, "n1.gpu0"), dev(a, "n0.gpu0")) == 25e9);

  // One node is the single-host preset's machine; one GPU per node is one rail, with no spine.
  const Cluster one = make_preset("h100-nodes-1x8"), host = make_preset("h100-8");
  CHECK(one.num_devices() == 8);
  CHECK(one.transfer_time_s(2, 6, 1e9) == host.transfer_time_s(2, 6, 1e9));
  const Cluster rail = make_preset("h100-nodes-4x1");
  CHECK(rail.num_devices() == 4);
  CHECK(route_links(rail, "n0.gpu0", "n3.gpu0") ==
        std::vector<std::string>{"n0.gpu0-nic", "leaf0.port0-xbar", "leaf0.port3-xbar", "n3.gpu0-nic"});

  // The compact form and the name build the same cluster.
  const MultiNodeSpec spec{.kind = "a100", .nodes = 2, .gpus_per_node = 8};
  CHECK(multinode_name(spec) == "a100-nodes-2x8");
  CHECK(cluster_to_json(make_multinode(spec)) == cluster_to_json(a));
  CHECK(multinode_name({.kind = "h100", .nodes = 8, .gpus_per_node = 4, .oversubscription = 2}) == "h100-nodes-8x4-os2");
  CHECK_FALSE(parse_multinode_name("h100-8"));
  CHECK(load_cluster("h100-nodes-2x8").num_devices() == 16);
}

TEST_CASE("sim::multinode: routes go over NVSwitch in a node, the leaf on a rail, the spine across rails", "[sim][multinode]") {
  const Cluster c = make_preset("h100-nodes-2x8");
  CHECK(route_links(c, "n0.gpu1", "n0.gpu5") == std::vector<std::string>{"n0.gpu1-nvlink", "n0.gpu5-nvlink"});
  CHECK(route_links(c, "n0.gpu3", "n1.gpu3") ==
        std::vector<std::string>{"n0.gpu3-nic", "leaf3.port0-xbar", "leaf3.port1-xbar", "n1.gpu3-nic"});
  // Never over NVLink to the GPU on the right rail first (NCCL's PXN): routes do not pass through devices.
  CHECK(route_links(c, "n0.gpu7", "n1.gpu0") ==
        std::vector<std::string>{"n0.gpu7-nic", "leaf7.port0-up", "leaf7.up0-spine", "leaf0.up1-spine",
                                 "leaf0.port1-up", "n1.gpu0-nic"});
  // Each direction of a link is its own channel: the way back crosses the same links the other way.
  const auto there = c.route(dev(c, "n0.gpu7"), dev(c, "n1.gpu0")), back = c.route(dev(c, "n1.gpu0"), dev(c, "n0.gpu7"));
  REQUIRE(there.size() == back.size());
  for (size_t k = 0; k < there.size(); ++k) CHECK((there[k] ^ 1) == back[there.size() - 1 - k]);

  // Oversubscribed 2:1: nodes 0-1 share leaf i's uplink 0, nodes 2-3 its uplink 1.
  const Cluster os = make_preset("h100-nodes-4x8-os2");
  CHECK(os.num_links() == 4 * 32 + 8 * 2);
  CHECK(route_links(os, "n1.gpu0", "n3.gpu1") ==
        std::vector<std::string>{"n1.gpu0-nic", "leaf0.port1-up", "leaf0.up0-spine", "leaf1.up1-spine",
                                 "leaf1.port3-up", "n3.gpu1-nic"});
  // Ports that share an uplink still reach each other through the crossbar, not up and back down.
  CHECK(route_links(os, "n0.gpu2", "n1.gpu2") ==
        std::vector<std::string>{"n0.gpu2-nic", "leaf2.port0-xbar", "leaf2.port1-xbar", "n1.gpu2-nic"});
}

TEST_CASE("sim::multinode: every pair's route has the hops of its relation, at 128 GPUs", "[sim][multinode]") {
  const Cluster c = make_preset("h100-nodes-16x8");
  REQUIRE(c.num_devices() == 128);
  for (int32_t s = 0; s < c.num_devices(); ++s)
    for (int32_t t = 0; t < c.num_devices(); ++t) {
      const size_t hops = s == t ? 0 : s / 8 == t / 8 ? 2 : s % 8 == t % 8 ? 4 : 6;
      if (c.route(s, t).size() != hops) FAIL_CHECK(c.device(s).name << " -> " << c.device(t).name);
    }
}

TEST_CASE("sim::multinode: a transfer takes its route's latency plus bytes over the bottleneck", "[sim][multinode][golden]") {
  const double bytes = 1e9;
  const Cluster h = make_preset("h100-nodes-2x8");
  CHECK(one_transfer_s(h, "n1.gpu2", "n1.gpu6", bytes) == Approx(kIntraLatency + bytes / 450e9).epsilon(1e-12));
  CHECK(one_transfer_s(h, "n0.gpu4", "n1.gpu4", bytes) == Approx(kRailLatency + bytes / 50e9).epsilon(1e-12));
  CHECK(one_transfer_s(h, "n0.gpu4", "n1.gpu5", bytes) == Approx(kCrossLatency + bytes / 50e9).epsilon(1e-12));
  const Cluster a = make_preset("a100-nodes-2x8");
  CHECK(one_transfer_s(a, "n0.gpu0", "n0.gpu1", bytes) == Approx(kIntraLatency + bytes / 300e9).epsilon(1e-12));
  CHECK(one_transfer_s(a, "n0.gpu0", "n1.gpu0", bytes) == Approx(kRailLatency + bytes / 25e9).epsilon(1e-12));
  CHECK(one_transfer_s(a, "n0.gpu0", "n1.gpu3", bytes) == Approx(kCrossLatency + bytes / 25e9).epsilon(1e-12));
}

TEST_CASE("sim::multinode: transfers that share a NIC or an uplink queue, on disjoint rails they do not", "[sim][multinode][golden]") {
  const double bytes = 1e9, rail = kRailLatency + bytes / 50e9, cross = kCrossLatency + bytes / 50e9;
  const Cluster c = make_preset("h100-nodes-2x8");

  SECTION("one tensor to two GPUs of the other node: both leave through the sender's NIC, one after the other") {
    const std::vector<Transfer> r = transfers(c, {"n0.gpu0"}, {"n1.gpu0", "n1.gpu1"}, bytes);
    CHECK(r[0].end_s - r[0].start_s == Approx(rail).epsilon(1e-12));
    CHECK(r[1].start_s == Approx(r[0].end_s).epsilon(1e-12));
    CHECK(r[1].end_s - r[1].start_s == Approx(cross).epsilon(1e-12));
  }
  SECTION("two rails at once: no shared link, no wait") {
    const std::vector<Transfer> r = transfers(c, {"n0.gpu0", "n0.gpu1"}, {"n1.gpu0", "n1.gpu1"}, bytes);
    CHECK(r[1].start_s == r[0].start_s);
    CHECK(r[0].end_s == Approx(r[0].start_s + rail).epsilon(1e-12));
    CHECK(r[1].end_s == Approx(r[1].start_s + rail).epsilon(1e-12));
  }
  // Both nodes' GPU 0 send to the other node's GPU 1: leaf 0 up to the spine, then down to leaf 1.
  const std::vector<std::string> from{"n0.gpu0", "n1.gpu0"}, to{"n1.gpu1", "n0.gpu1"};
  SECTION("non-blocking leaves: each port has its own uplink, so both cross rails at once") {
    const std::vector<Transfer> r = transfers(c, from, to, bytes);
    CHECK(r[1].start_s == r[0].start_s);
    CHECK(r[1].end_s == Approx(r[1].start_s + cross).epsilon(1e-12));
  }
  SECTION("oversubscribed 2:1 (one uplink per leaf): the second waits for the shared uplink") {
    const Cluster os = make_preset("h100-nodes-2x8-os2");
    const std::vector<Transfer> r = transfers(os, from, to, bytes);
    CHECK(r[0].end_s == Approx(r[0].start_s + cross).epsilon(1e-12));
    CHECK(r[1].start_s == Approx(r[0].end_s).epsilon(1e-12));
    CHECK(r[1].end_s == Approx(r[0].start_s + 2 * cross).epsilon(1e-12));
    // With bandwidth sharing both stream at once, at half the uplink's 50 GB/s each.
    const std::vector<Transfer> s = transfers(os, from, to, bytes, true);
    for (const Transfer& t : s) CHECK(t.end_s - t.start_s == Approx(kCrossLatency + 2 * bytes / 50e9).epsilon(1e-12));
    const std::vector<Transfer> n = transfers(c, from, to, bytes, true);
    for (const Transfer& t : n) CHECK(t.end_s - t.start_s == Approx(cross).epsilon(1e-12));
  }
}

TEST_CASE("sim::multinode: bad names and specs get one line naming the field and the valid forms", "[sim][multinode]") {
  auto error = [](const std::string& name) { return placelab::testing::error_of([&] { make_preset(name); }); };
  const std::string grammar = "multi-node presets are KIND-nodes-NxG[-osR] (KIND h100|a100|v100, N 1..32 nodes, G 1|2|4|8";
  CHECK_THAT(error("h100-nodes-0x8"), Catch::StartsWith("multi-node cluster \"h100-nodes-0x8\": 0 nodes, expected 1..32") &&
                                          Catch::Contains(grammar));
  CHECK_THAT(error("h100-nodes-2x3"), Catch::Contains("\"h100-nodes-2x3\": 3 GPUs per node, expected 1, 2, 4 or 8") &&
                                          Catch::Contains(grammar));
  CHECK_THAT(error("p100-nodes-2x8"), Catch::Contains("\"p100-nodes-2x8\": no node kind \"p100\"") && Catch::Contains(grammar));
  CHECK_THAT(error("h100-nodes-33x8"), Catch::Contains("33 nodes, expected 1..32 (at most 256 GPUs)"));
  CHECK_THAT(error("h100-nodes-2x8-os0"), Catch::Contains("oversubscription 0, expected 1..32"));
  for (const char* malformed : {"h100-nodes-2by8", "h100-nodes-x8", "h100-nodes--2x8", "h100-nodes-2x8-os", "h100-nodes-2x8x",
                                "h100-nodes-99999999999x8"})
    CHECK_THAT(error(malformed), Catch::Contains("expected NxG[-osR] after \"-nodes-\"") && Catch::Contains(grammar));
  CHECK_THAT(error("h100-nodes"), Catch::Contains("unknown cluster preset \"h100-nodes\"") &&
                                      Catch::Contains("multi-node: KIND-nodes-NxG[-osR]"));
  CHECK_THAT(placelab::testing::error_of([] { make_multinode({.kind = "h100", .nodes = 2, .gpus_per_node = 16}); }),
             Catch::Contains("\"h100-nodes-2x16\": 16 GPUs per node"));
  for (const char* name : {"h100-nodes-0x8", "h100-nodes-2by8", "h100-nodes"})
    CHECK(error(name).find('\n') == std::string::npos);
}

TEST_CASE("sim::multinode: the placelab.cluster document round-trips, routes included", "[sim][multinode]") {
  for (const char* name : {"h100-nodes-8x8", "a100-nodes-3x4-os2"}) {
    const Cluster c = make_preset(name);
    const nlohmann::json doc = cluster_to_json(c);
    CHECK_FALSE(doc.contains("routes"));  // all computed
    const Cluster back = cluster_from_json(doc, name);
    CHECK(cluster_to_json(back) == doc);
    for (int32_t s = 0; s < c.num_devices(); ++s)
      for (int32_t t = 0; t < c.num_devices(); ++t) {
        const auto a = c.route(s, t), b = back.route(s, t);
        if (!std::equal(a.begin(), a.end(), b.begin(), b.end())) FAIL_CHECK(name << ": " << s << " -> " << t);
      }
  }
}
