#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <unistd.h>

#include "graphs/json_util.h"
#include "sim/engine.h"
#include "sim/placement.h"
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

TEST_CASE("sim::TraceRecorder: memory changes in the engine's order reach each device's peak and return to resident",
          "[sim]") {
  const graphs::Graph g = random_dag(60, 3);
  const Cluster c = make_preset("v100-nvlink-4");
  Simulator sim(g, c);
  std::mt19937_64 rng(4);
  for (int round = 0; round < 4; ++round) {
    const std::vector<int32_t> p = random_placement(sim, rng);
    TraceRecorder trace(sim);
    const SimResult r = sim.simulate(p, &trace);
    std::vector<int64_t> peak(c.num_devices(), 0), last(c.num_devices(), -1), resident(c.num_devices(), 0);
    for (graphs::OpId op = 0; op < g.num_ops(); ++op) resident[p[op]] += std::llround(g.param_bytes(op));
    double time_s = 0;
    for (const auto& e : trace.memory()) {
      CHECK(e.time_s >= time_s);  // in time order
      time_s = e.time_s;
      if (last[e.device] < 0) CHECK(e.bytes == resident[e.device]);  // first: the resident bytes at 0
      peak[e.device] = std::max(peak[e.device], e.bytes);
      last[e.device] = e.bytes;
    }
    for (int32_t d = 0; d < c.num_devices(); ++d) {
      CHECK(static_cast<double>(peak[d]) == r.device_peak_bytes[d]);
      CHECK(last[d] == resident[d]);  // everything else freed by the end
    }
    int counters = 0;
    const nlohmann::json doc = trace.to_chrome_json();
    for (const auto& e : doc.at("traceEvents")) counters += e.at("ph") == "C";
    CHECK(counters == static_cast<int>(trace.memory().size()));
  }
}

TEST_CASE("sim::TraceRecorder: the Chrome trace file is to_chrome_json() written out, byte for byte", "[sim]") {
  // write_chrome writes event by event (no whole json tree for a large schedule); it must write exactly
  // what the tree would, invalid UTF-8 in an op name included.
  graphs::GraphBuilder b("names");
  const graphs::OpId a = b.add_op(graphs::OpSpec{.name = "a\xff", .type = "MatMul", .flops = 1e9, .output_bytes = 1e6});
  const graphs::OpId z = b.add_op(graphs::OpSpec{.name = "z", .type = "Relu", .flops = 1e6, .output_bytes = 1e3});
  b.add_edge(a, z, 1e6);
  const graphs::Graph g = std::move(b).build();
  const Cluster c = make_preset("v100-nvlink-2");
  Simulator sim(g, c);
  TraceRecorder trace(sim);
  sim.simulate(std::vector<int32_t>{0, 1}, &trace);
  const std::string path = std::filesystem::temp_directory_path() / fmt::format("trace_test_{}.json", ::getpid());
  trace.write_chrome(path);
  std::ifstream in(path);
  std::stringstream written;
  written << in.rdbuf();
  std::filesystem::remove(path);
  CHECK(written.str() == io::dump_json(trace.to_chrome_json(), -1) + "\n");
  CHECK(written.str().find("a\xef\xbf\xbd") != std::string::npos);  // U+FFFD for the bad byte
}
