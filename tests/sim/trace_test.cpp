#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "sim/engine.h"
#include "sim/presets.h"
#include "sim/trace.h"
#include "test_util.h"

using namespace placelab;
using namespace placelab::sim;
using namespace placelab::sim::testing;

namespace {

// Compares with tests/golden/<name>.trace; PLACELAB_UPDATE_GOLDEN=1 rewrites the file instead.
void check_golden(const std::string& name, const std::string& text) {
  std::string path = std::string(PLACELAB_TEST_DIR) + "/golden/" + name + ".trace";
  if (std::getenv("PLACELAB_UPDATE_GOLDEN")) {
    std::ofstream(path) << text;
    return;
  }
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream want;
  want << in.rdbuf();
  CHECK(text == want.str());
}

}  // namespace

TEST_CASE("sim::TraceRecorder: golden trace of a fork over two devices", "[sim][golden]") {
  graphs::Graph g = fork_graph();
  Cluster c(ClusterSpec{.name = "pair",
                        .devices = {unit_device("d0"), unit_device("d1")},
                        .links = {link("l01", "d0", "d1", 100, 0.5)}});
  Simulator sim(g, c);
  TraceRecorder trace(sim);
  sim.simulate(std::vector<int32_t>{0, 0, 1}, &trace);
  check_golden("fork", trace.to_text());

  nlohmann::json doc = trace.to_chrome_json();
  const auto& events = doc.at("traceEvents");
  int complete = 0;
  for (const auto& e : events) {
    if (e.at("ph") != "X") continue;
    ++complete;
    if (e.at("name") == "c" && e.at("pid") == 0) {
      CHECK(e.at("tid") == 1);
      CHECK(e.at("ts") == 2.5e6);
      CHECK(e.at("dur") == 3e6);
    }
  }
  CHECK(complete == 4);  // three ops and one transfer
}

TEST_CASE("sim::TraceRecorder: golden trace of the placeto preset", "[sim][golden]") {
  graphs::Graph g = placeto_example_graph();
  Cluster c = make_preset("placeto-4");
  Simulator sim(g, c);
  TraceRecorder trace(sim);
  sim.simulate(std::vector<int32_t>{0, 1, 2, 0, 1}, &trace);
  check_golden("placeto", trace.to_text());
}
