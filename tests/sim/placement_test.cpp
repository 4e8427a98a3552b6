#include <catch2/catch.hpp>

#include <filesystem>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "sim/engine.h"
#include "sim/placement.h"
#include "sim/presets.h"
#include "test_util.h"
#include "tests/test_util.h"

using namespace placelab;
using namespace placelab::sim;
using namespace placelab::sim::testing;

namespace {

std::string error_of(const std::string& text) {
  return placelab::testing::error_of([&] { placement_from_json(io::parse_json(text, "p.json"), "p.json"); });
}

}  // namespace

TEST_CASE("sim::placement: placelab.placement round trip through a file", "[sim]") {
  Placement p{.graph = "g", .cluster = "v100-nvlink-4", .device_of = {0, 3, 1, 1, 2}};
  auto path = std::filesystem::temp_directory_path() / "placelab_sim_placement_test.json";
  write_placement(p, path.string());
  Placement back = read_placement(path.string());
  std::filesystem::remove(path);
  CHECK(back.graph == "g");
  CHECK(back.cluster == "v100-nvlink-4");
  CHECK(back.device_of == p.device_of);
  CHECK(placement_to_json(back) == placement_to_json(p));
}

TEST_CASE("sim::placement: bad files name the JSON path", "[sim]") {
  CHECK_THAT(error_of(R"({"format": "placelab.placement", "version": 3, "device_of": []})"),
             Catch::Contains("version 3 is not supported (supported: 1)"));
  CHECK_THAT(error_of(R"({"format": "placelab.placement", "version": 1, "device_of": [0, -1]})"),
             Catch::Contains("p.json: device_of[1]: is -1, expected a device index >= 0"));
  CHECK_THAT(error_of(R"({"format": "placelab.placement", "version": 1, "device_of": [0.5]})"),
             Catch::Contains("device_of[0]: expected an integer"));
  CHECK_THAT(error_of(R"({"format": "placelab.placement", "version": 1, "device_of": [], "extra": 1})"),
             Catch::Contains("unknown field \"extra\""));
}

TEST_CASE("sim::random_placement: seeded, valid, and pinned ops stay on their kind", "[sim]") {
  graphs::GraphBuilder b("pins");
  for (int i = 0; i < 50; ++i) {
    graphs::OpSpec s = op("op" + std::to_string(i), 1);
    if (i % 5 == 0) s.pinned_kind = "cpu";
    b.add_op(std::move(s));
  }
  graphs::Graph g = std::move(b).build();
  Cluster c = make_preset("cpu-gpu-4");  // cpu0 is device 0
  Simulator sim(g, c);
  std::mt19937_64 rng1(5), rng2(5);
  std::vector<int32_t> p = random_placement(sim, rng1);
  CHECK(p == random_placement(sim, rng2));
  sim.check_placement(p);
  std::vector<int> used(c.num_devices(), 0);
  for (int i = 0; i < 50; ++i) {
    ++used[p[i]];
    if (i % 5 == 0) CHECK(c.device(p[i]).kind == "cpu");
  }
  for (int d = 0; d < c.num_devices(); ++d) CHECK(used[d] > 0);
}
