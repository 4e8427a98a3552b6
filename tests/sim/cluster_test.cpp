#include <catch2/catch.hpp>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "sim/cluster.h"
#include "sim/presets.h"
#include "test_util.h"
#include "tests/test_util.h"

using namespace placelab;
using namespace placelab::sim;
using namespace placelab::sim::testing;
using placelab::testing::replace_once;

namespace {

const char* kCluster = R"({"format": "placelab.cluster", "version": 1, "name": "tiny",
  "devices": [{"name": "gpu0", "kind": "v100", "peak_flops_per_s": 1e13, "memory_bandwidth_bytes_per_s": 9e11,
               "memory_bytes": 1.6e10, "launch_overhead_s": 5e-6},
              {"name": "gpu1", "kind": "v100", "peak_flops_per_s": 1e13, "memory_bandwidth_bytes_per_s": 9e11,
               "memory_bytes": 1.6e10},
              {"name": "cpu0", "kind": "cpu", "peak_flops_per_s": 1e12, "memory_bandwidth_bytes_per_s": 2e11,
               "memory_bytes": 2.5e11, "efficiency": 0.5}],
  "links": [{"name": "nv01", "ends": ["gpu0", "gpu1"], "bandwidth_bytes_per_s": 5e10, "latency_s": 1e-6},
            {"name": "pcie0", "ends": ["gpu0", "sw"], "bandwidth_bytes_per_s": 1.6e10, "latency_s": 2e-6},
            {"name": "pcie1", "ends": ["gpu1", "sw"], "bandwidth_bytes_per_s": 1.6e10, "latency_s": 2e-6},
            {"name": "root", "ends": ["sw", "cpu0"], "bandwidth_bytes_per_s": 3.2e10, "latency_s": 1e-6,
             "duplex": "half"}],
  "routes": [{"src": "gpu1", "dst": "gpu0", "links": ["pcie1", "pcie0"]}]})";

std::string error_of(const std::string& text) {
  return placelab::testing::error_of([&] { cluster_from_json(io::parse_json(text, "c.json"), "c.json"); });
}

}  // namespace

TEST_CASE("sim::Cluster: routes are shortest through switches, explicit ones win, directions are channels", "[sim]") {
  Cluster c = cluster_from_json(io::parse_json(kCluster, "c.json"), "c.json");
  REQUIRE(c.num_devices() == 3);
  REQUIRE(c.num_links() == 4);
  // gpu0 -> gpu1: the direct NVLink (1 hop), direction a->b.
  CHECK(std::vector<int32_t>(c.route(0, 1).begin(), c.route(0, 1).end()) == std::vector<int32_t>{0});
  // gpu1 -> gpu0: the explicit PCIe route, b->a on neither (pcie1 a->b, pcie0 b->a).
  CHECK(std::vector<int32_t>(c.route(1, 0).begin(), c.route(1, 0).end()) == std::vector<int32_t>{2 * 2, 2 * 1 + 1});
  // gpu0 -> cpu0: pcie0 a->b, then the half-duplex root (one channel for both directions).
  CHECK(std::vector<int32_t>(c.route(0, 2).begin(), c.route(0, 2).end()) == std::vector<int32_t>{2, 6});
  CHECK(std::vector<int32_t>(c.route(2, 0).begin(), c.route(2, 0).end()) == std::vector<int32_t>{6, 3});
  CHECK(c.route(1, 1).empty());
  CHECK(c.route_latency_s(0, 2) == Approx(3e-6));
  CHECK(c.route_bandwidth_bytes_per_s(0, 2) == 1.6e10);
  CHECK(c.transfer_time_s(0, 1, 5e10) == Approx(1 + 1e-6));
  CHECK(c.kinds() == std::vector<std::string>{"v100", "cpu"});
  CHECK(c.device(2).efficiency == 0.5);
}

TEST_CASE("sim::Cluster: placelab.cluster round trip is exact", "[sim]") {
  Cluster c = cluster_from_json(io::parse_json(kCluster, "c.json"), "c.json");
  nlohmann::json doc = cluster_to_json(c);
  Cluster back = cluster_from_json(doc, "back");
  CHECK(cluster_to_json(back) == doc);
  for (int32_t s = 0; s < 3; ++s)
    for (int32_t t = 0; t < 3; ++t)
      CHECK(std::vector<int32_t>(back.route(s, t).begin(), back.route(s, t).end()) ==
            std::vector<int32_t>(c.route(s, t).begin(), c.route(s, t).end()));
}

TEST_CASE("sim::Cluster: bad files name the JSON path and the fix", "[sim]") {
  std::string text = kCluster;
  CHECK_THAT(error_of(replace_once(text, "\"version\": 1", "\"version\": 2")),
             Catch::Contains("version 2 is not supported (supported: 1)"));
  CHECK_THAT(error_of(replace_once(text, "\"launch_overhead_s\": 5e-6", "\"launch_overhead_s\": 5e-6, \"speed\": 3")),
             Catch::Contains("c.json: devices[0]: unknown field \"speed\""));
  CHECK_THAT(error_of(replace_once(text, "\"memory_bytes\": 1.6e10, \"launch", "\"memory_bytes\": -1, \"launch")),
             Catch::Contains("devices[0].memory_bytes: is -1, must be >= 0"));
  CHECK_THAT(error_of(replace_once(text, "\"bandwidth_bytes_per_s\": 5e10", "\"bandwidth_bytes_per_s\": 0")),
             Catch::Contains("links[0].bandwidth_bytes_per_s: must be > 0"));
  CHECK_THAT(error_of(replace_once(text, "\"duplex\": \"half\"", "\"duplex\": \"simplex\"")),
             Catch::Contains("links[3].duplex: is \"simplex\""));
  // Without the root link the CPU is an island.
  std::string island = replace_once(text, R"(,
            {"name": "root", "ends": ["sw", "cpu0"], "bandwidth_bytes_per_s": 3.2e10, "latency_s": 1e-6,
             "duplex": "half"})", "");
  CHECK_THAT(error_of(island), Catch::Contains("device \"gpu0\" cannot reach \"cpu0\"; add a link or a route"));
  CHECK_THAT(error_of(replace_once(text, "[\"pcie1\", \"pcie0\"]", "[\"pcie0\", \"pcie1\"]")),
             Catch::Contains("route 0 (gpu1 -> gpu0): link \"pcie0\" does not touch \"gpu1\""));
  CHECK_THAT(error_of(replace_once(text, "[\"pcie1\", \"pcie0\"]", "[\"pcie1\"]")),
             Catch::Contains("the links end at \"sw\", not at \"gpu0\""));
  CHECK_THAT(error_of(replace_once(text, "[\"pcie1\", \"pcie0\"]", "[\"nv01\", \"nv01\", \"nv01\"]")),
             Catch::Contains("route 0 (gpu1 -> gpu0): crosses link \"nv01\" twice"));
  CHECK_THAT(error_of(replace_once(text, "[\"pcie1\", \"pcie0\"]", "[\"nv01\", \"pcie0\", \"pcie1\"]")),
             Catch::Contains("route 0 (gpu1 -> gpu0): link \"pcie1\" goes back to \"gpu1\""));
  CHECK_THAT(error_of(replace_once(text, "[\"gpu0\", \"gpu1\"]", "[\"\", \"\"]")),
             Catch::Contains("c.json: links[0].ends[0]: is empty; name a device or a switch (leave out \"ends\" for a bus)"));
  CHECK_THAT(error_of(replace_once(text, "[\"gpu0\", \"gpu1\"]", "[\"gpu0\", \"\"]")),
             Catch::Contains("c.json: links[0].ends[1]: is empty"));
  CHECK_THAT(error_of(replace_once(text, "\"name\": \"gpu1\"", "\"name\": \"gpu0\"")), Catch::Contains("used twice"));
  CHECK_THAT(error_of(replace_once(text, "\"efficiency\": 0.5", "\"efficiency\": 1.5")),
             Catch::Contains("devices[2].efficiency: must be in (0, 1]"));
}

TEST_CASE("sim::Cluster: devices never forward traffic for other devices", "[sim]") {
  ClusterSpec spec{.name = "line",
                   .devices = {unit_device("a"), unit_device("b"), unit_device("c")},
                   .links = {link("ab", "a", "b", 1, 0), link("bc", "b", "c", 1, 0)}};
  CHECK_THROWS_WITH(Cluster(spec), Catch::Contains("device \"a\" cannot reach \"c\""));
  spec.routes.push_back(RouteSpec{.src = "a", .dst = "c", .links = {"ab", "bc"}});
  spec.routes.push_back(RouteSpec{.src = "c", .dst = "a", .links = {"bc", "ab"}});
  Cluster c(spec);  // explicit routes may pass through a device
  CHECK(c.route(0, 2).size() == 2);
  CHECK(c.route(2, 0)[0] == 3);  // bc walked b<-c is the b->a channel of "bc"
}

TEST_CASE("sim::Cluster: a link without ends is a bus, usable in explicit routes", "[sim]") {
  std::string text = replace_once(kCluster, R"("ends": ["gpu0", "gpu1"], )", "");
  text = replace_once(text, R"("links": ["pcie1", "pcie0"])", R"("links": ["nv01", "pcie1", "pcie0"])");
  Cluster c = cluster_from_json(io::parse_json(text, "c.json"), "c.json");
  CHECK(c.link(0).end_a.empty());
  CHECK(std::vector<int32_t>(c.route(1, 0).begin(), c.route(1, 0).end()) == std::vector<int32_t>{0, 2 * 2, 2 * 1 + 1});
  CHECK(std::vector<int32_t>(c.route(0, 1).begin(), c.route(0, 1).end()) == std::vector<int32_t>{2, 2 * 2 + 1});  // via sw
}

TEST_CASE("sim::Cluster: of equal routes, the one with the lowest link indices in path order wins", "[sim]") {
  // Two switches, each one hop from a and from b at equal latency. a -> b: links (0, 3) through s2
  // beat (1, 2) through s1; b -> a: (2, 1) through s1 beat (3, 0) through s2. (Routes used to go
  // through the switch named first, s2, both ways, which the documented rule does not say.)
  ClusterSpec spec{.name = "tie",
                   .devices = {unit_device("a"), unit_device("b")},
                   .links = {link("a-s2", "a", "s2", 1, 1), link("a-s1", "a", "s1", 1, 1),
                             link("b-s1", "b", "s1", 1, 1), link("b-s2", "b", "s2", 1, 1)}};
  Cluster c(spec);
  CHECK(std::vector<int32_t>(c.route(0, 1).begin(), c.route(0, 1).end()) == std::vector<int32_t>{0, 2 * 3 + 1});
  CHECK(std::vector<int32_t>(c.route(1, 0).begin(), c.route(1, 0).end()) == std::vector<int32_t>{2 * 2, 2 * 1 + 1});
}

TEST_CASE("sim::Cluster: routes too long to store in all are refused before they are built", "[sim]") {
  // Each device on its own switch, the switches in a chain: the routes' hops grow with the cube of the
  // devices (~3.3e8 crossings for 1,000, over 1 GiB of routes), which used to exhaust memory for a
  // file of a few hundred kilobytes.
  auto chain = [](int n) {
    ClusterSpec spec{.name = "chain"};
    for (int i = 0; i < n; ++i) {
      spec.devices.push_back(unit_device("d" + std::to_string(i)));
      spec.links.push_back(link("up" + std::to_string(i), "d" + std::to_string(i), "s" + std::to_string(i), 1, 0));
      if (i > 0) spec.links.push_back(link("k" + std::to_string(i), "s" + std::to_string(i - 1), "s" + std::to_string(i), 1, 0));
    }
    return spec;
  };
  Cluster small(chain(50));  // 41,650 crossings: fine
  CHECK(small.route(0, 49).size() == 51);
  CHECK_THROWS_WITH(Cluster(chain(1000)), Catch::Contains("cluster \"chain\": its routes would cross more than 268435456 links") &&
                                            Catch::Contains("shorten the chains of switches"));
}

TEST_CASE("sim::msr_cluster: device counts are checked before any device is built", "[sim]") {
  // 10^8 accelerators used to build every device (27 s, 8 GB) before the cluster refused them.
  CHECK_THROWS_WITH(msr_cluster(100'000'000, 0, 1e9), Catch::Contains("make 100000000 devices, at most 4096"));
  CHECK_THROWS_WITH(msr_cluster(2'147'483'647, 2'147'483'647, 1e9), Catch::Contains("make 4294967294 devices"));
  CHECK_THROWS_WITH(msr_cluster(0, 0, 1e9), Catch::Contains("need at least one device"));
}

TEST_CASE("sim::presets: every preset builds, DGX-1 routes use NVLink where it exists", "[sim]") {
  std::vector<std::string> names = preset_names();
  CHECK(names.size() >= 40);
  for (const auto& name : names) {
    Cluster c = make_preset(name);
    CHECK(c.name() == name);
    nlohmann::json doc = cluster_to_json(c);
    CHECK(cluster_to_json(cluster_from_json(doc, name)) == doc);
  }
  Cluster dgx = make_preset("v100-nvlink-8");
  CHECK(dgx.num_devices() == 8);
  CHECK(dgx.route(0, 3).size() == 1);
  CHECK(dgx.route_bandwidth_bytes_per_s(0, 3) == 50e9);  // two NVLink 2.0 links
  CHECK(dgx.route_bandwidth_bytes_per_s(0, 1) == 25e9);
  CHECK(dgx.route(0, 5).size() == 5);  // no NVLink: PCIe switch, socket, QPI, socket, switch
  CHECK(dgx.route_bandwidth_bytes_per_s(0, 5) == 15.75e9);
  Cluster h100 = make_preset("h100-8");
  CHECK(h100.route(2, 6).size() == 2);  // through the NVSwitch
  CHECK(h100.route_bandwidth_bytes_per_s(2, 6) == 450e9);
  Cluster hetero = make_preset("cpu-gpu-4");
  CHECK(hetero.kinds() == std::vector<std::string>{"cpu", "v100"});
  Cluster placeto = make_preset("placeto-4");
  CHECK(placeto.transfer_mode() == TransferMode::broadcast);
  CHECK(placeto.route(1, 3).size() == 1);
  CHECK(placeto.route(1, 3)[0] == placeto.route(1, 0)[0]);  // one outgoing bus per device
  CHECK(placeto.priority() == Priority::fifo);  // Placeto's simulator: FIFO queues, microseconds
  CHECK(placeto.clock_unit_s() == 1e-6);
  Cluster again = cluster_from_json(cluster_to_json(placeto), "round trip");
  CHECK(again.priority() == Priority::fifo);
  CHECK(again.clock_unit_s() == 1e-6);
  CHECK(!dgx.priority());
  CHECK(!cluster_to_json(dgx).contains("priority"));
  CHECK_THROWS_WITH(make_preset("v100-3"), Catch::Contains("unknown cluster preset \"v100-3\" (presets: k80-{1|2|4|8}"));
  Cluster msr = msr_cluster(2, 1, 1e9);
  CHECK(msr.kinds() == std::vector<std::string>{"accelerator", "cpu"});
  CHECK(msr.device(1).memory_bytes == 1e9);
}

TEST_CASE("sim::Cluster: efficiency curves round-trip, and bad ones name the device, the curve and the fix", "[sim]") {
  const std::string text = kCluster;
  const std::string curves = R"("launch_overhead_s": 5e-6, "efficiency_curves": {
      "gemm": {"size": [1e3, 1e6, 1e9], "efficiency": [0.05, 0.4, 0.8]}, "elementwise": {"size": [1e4], "efficiency": [1.2]}})";
  Cluster c = cluster_from_json(io::parse_json(replace_once(text, "\"launch_overhead_s\": 5e-6", curves), "c.json"), "c.json");
  REQUIRE(c.device(0).efficiency_curves.size() == 2);
  CHECK(c.device(0).efficiency_curves.at("gemm").at(1e6) == 0.4);
  CHECK(c.device(0).efficiency_curves.at("elementwise").at(1) == 1.2);  // above 1: faster than the fitted bandwidth
  CHECK(c.device(1).efficiency_curves.empty());
  const nlohmann::json doc = cluster_to_json(c);
  CHECK(cluster_to_json(cluster_from_json(doc, "back")) == doc);
  auto with = [&](const std::string& curve) {
    return replace_once(text, "\"launch_overhead_s\": 5e-6", "\"launch_overhead_s\": 5e-6, \"efficiency_curves\": " + curve);
  };
  CHECK_THAT(error_of(with(R"({"matmul": {"size": [1], "efficiency": [1]}})")),
             Catch::Contains("c.json: devices[0].efficiency_curves.matmul: names no op class; use gemm, conv"));
  CHECK_THAT(error_of(with(R"({"gemm": {"size": [10, 5], "efficiency": [1, 1]}})")),
             Catch::Contains("size[1] = 5 does not increase from size[0] = 10"));
  CHECK_THAT(error_of(with(R"({"gemm": {"size": [10, 50], "efficiency": [1]}})")),
             Catch::Contains("2 sizes and 1 efficiencies"));
  CHECK_THAT(error_of(with(R"({"gemm": {"size": [10], "efficiency": [0]}})")),
             Catch::Contains("efficiency[0] is 0, must be finite and > 0"));
  CHECK_THAT(error_of(with(R"({"gemm": {"size": [10], "efficiency": [1], "fit": 3}})")),
             Catch::Contains("unknown field \"fit\""));
}

TEST_CASE("sim::Cluster: copy engines and links' efficiency curves round-trip, bad ones name the place", "[sim]") {
  const std::string text = replace_once(
      replace_once(kCluster, "\"efficiency\": 0.5}",
                   "\"efficiency\": 0.5, \"copy_engine\": false, \"memory_domain\": \"host\", "
                   "\"contended_efficiency_curves\": {\"elementwise\": {\"size\": [1e4], \"efficiency\": [0.5]}}}"),
      "\"latency_s\": 1e-6},", "\"latency_s\": 1e-6, \"efficiency_curve\": {\"size\": [1e3, 1e7], \"efficiency\": [1.5, 0.5]}, "
      "\"loaded_efficiency_curve\": {\"size\": [1e3], \"efficiency\": [0.25]}},");
  Cluster c = cluster_from_json(io::parse_json(text, "c.json"), "c.json");
  CHECK(c.device(0).copy_engine);
  CHECK_FALSE(c.device(2).copy_engine);
  CHECK(c.device(2).memory_domain == "host");
  CHECK(c.device(2).contended_efficiency_curves.at("elementwise").at(1) == 0.5);
  CHECK(c.device(0).memory_domain.empty());
  CHECK(c.link(0).efficiency_curve.at(1e5) == Approx(1.0));
  CHECK(c.transfer_time_s(0, 1, 1e5) == Approx(1e-6 + 1e5 / 5e10));
  CHECK(c.transfer_time_s(0, 1, 1e7) == Approx(1e-6 + 1e7 / 2.5e10));
  CHECK(c.route_bandwidth_bytes_per_s(0, 1, 1e7, true) == Approx(1.25e10));  // loaded: 0.25 of 5e10
  CHECK(c.route_has_curve(0, 1));
  CHECK(c.route(1, 0).size() == 2);  // gpu1 -> gpu0 goes over pcie (an explicit route), no curve
  CHECK_FALSE(c.route_has_curve(1, 0));
  const nlohmann::json doc = cluster_to_json(c);
  CHECK(doc["devices"][2]["copy_engine"] == false);
  CHECK_FALSE(doc["devices"][0].contains("copy_engine"));  // the default is left out
  CHECK(cluster_to_json(cluster_from_json(doc, "back")) == doc);
  CHECK_THAT(error_of(replace_once(text, "[1.5, 0.5]", "[1.5]")),
             Catch::Contains("c.json: links[0].efficiency_curve: 2 sizes and 1 efficiencies"));
  CHECK_THAT(error_of(replace_once(text, "\"copy_engine\": false", "\"copy_engine\": \"no\"")),
             Catch::Contains("c.json: devices[2].copy_engine"));
  CHECK_THAT(error_of(replace_once(text, "{\"elementwise\": {\"size\": [1e4]", "{\"matmul\": {\"size\": [1e4]")),
             Catch::Contains("c.json: devices[2].contended_efficiency_curves.matmul: names no op class"));
}
