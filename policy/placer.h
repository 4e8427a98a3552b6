// The one interface every placer implements, from round-robin to the optimal DP and the learned
// policies, and the registry that finds them by name, so the CLI, Python and bench scripts reach
// every placer the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "graphs/graph.h"
#include "sim/cluster.h"
#include "sim/engine.h"

namespace placelab::policy {

/** Thrown when PlaceRequest::interrupted asks a placer to stop (Ctrl-C in Python); not an input error. */
class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("interrupted") {}
};

/** Everything a placer may use. The simulator is the judge: its cost model and options define "fast". */
struct PlaceRequest {
  const sim::Simulator& simulator;  // holds the graph and the cluster
  /** Placer-specific options (a JSON object); unknown keys are errors. */
  nlohmann::json options = nlohmann::json::object();
  uint64_t seed = 0;
  /** Called now and then on long work with a one-line status (the CLI prints it on stderr). */
  std::function<void(std::string_view)> progress;
  /**
   * Polled from the calling thread between a long placer's iterations: true makes it stop by throwing
   * Interrupted. Python's place() sets it to notice Ctrl-C; it must be cheap (that one checks the
   * signal at most every 50 ms).
   */
  std::function<bool()> interrupted;
  /**
   * Seconds on a monotonic clock, read by the placers' time budgets (policy/budget.h); empty: the steady
   * clock. Tests give a fake one, so that a time budget is checked without timing anything.
   */
  std::function<double()> clock;

  const graphs::Graph& graph() const { return simulator.graph(); }
  const sim::Cluster& cluster() const { return simulator.cluster(); }
  void report(std::string_view status) const {
    if (progress) progress(status);
  }
  void check_interrupt() const {
    if (interrupted && interrupted()) throw Interrupted();
  }
};

/** A placement and the facts the placer knows about it (optimum, gap, iterations, ...). */
struct PlaceResult {
  std::vector<int32_t> device_of;
  nlohmann::json info = nlohmann::json::object();
};

class Placer {
 public:
  virtual ~Placer() = default;
  /** Places every op; throws placelab::Error on bad options or an impossible request. */
  virtual PlaceResult place(const PlaceRequest& request) const = 0;
};

/** A registered placer. */
struct PlacerInfo {
  std::string name;
  std::string summary;  // one line: what it optimises and where it comes from
  std::function<std::unique_ptr<Placer>()> make;
};

/** Every placer, in a stable order (see registry.cpp). */
const std::vector<PlacerInfo>& placers();

/** The placers that finish in seconds on zoo graphs: the default rows of a comparison (CLI and Python). */
const std::vector<std::string>& fast_placers();

/** The placer called `name`; throws placelab::Error listing the known names otherwise. */
std::unique_ptr<Placer> make_placer(std::string_view name);

/** Placer names from a comma-separated list ("heft, metis" -> {"heft", "metis"}); blanks and empty items dropped. */
std::vector<std::string> split_placer_names(std::string_view text);

/**
 * Reads `options` (a JSON object) for placer `placer`: throws placelab::Error for a non-object or a key
 * outside `known`, naming the placer and listing the known keys.
 */
void check_options(std::string_view placer, const nlohmann::json& options,
                   std::initializer_list<std::string_view> known);

}  // namespace placelab::policy
