// Branch and bound over unit placements with the engine as the judge (exact.h). The search is depth
// first, children in order of their bounds; on a limit it reports the least bound of the subtrees left
// open, so an early stop still says how far the best placement found can be from the optimum.
#include "policy/classic/exact.h"

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "graphs/error.h"
#include "policy/classic/bounds.h"
#include "policy/classic/units.h"

namespace placelab::policy {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// A partial placement is cut off when its bound is within this of the best step time: the optimum is
// proven to a relative 1e-9 (the bounds' own margin), and ties with the incumbent are not explored.
constexpr double kTolerance = 1e-9;
// The heuristics whose best placement that fits starts the search, then a descent of single-unit moves.
// Annealing runs from several seeds (it stalls at different local optima), cheap beside the search.
constexpr std::array<const char*, 6> kStarts = {"heft", "m_etf", "m_sct", "m_topo", "single_device", "annealing"};
constexpr uint64_t kAnnealingRuns = 4;
constexpr int32_t kMaxDevices = 64;
constexpr int64_t kAnnealingSteps = 10000;

class Search {
 public:
  Search(const sim::Simulator& sim, const ExactOptions& options, uint64_t seed,
         const std::function<void(std::string_view)>& progress, const std::function<bool()>& interrupted)
      : sim_(sim), options_(options), seed_(seed), progress_(progress), interrupted_(interrupted), units_(sim),
        bound_(units_), scratch_(sim.make_scratch()), t0_(std::chrono::steady_clock::now()) {}

  ExactResult run() {
    const int32_t U = units_.num_units(), D = units_.num_devices();
    if (D > kMaxDevices)  // domains are 64-bit masks; a search over more devices would not end anyway
      throw Error(fmt::format("exact: cluster \"{}\" has {} devices, the exact placer handles at most {}; use a "
                              "smaller cluster or a heuristic (annealing)",
                              sim_.cluster().name(), D, kMaxDevices));
    out_.units = U;
    out_.symmetry_class.assign(bound_.symmetry_class().begin(), bound_.symmetry_class().end());
    if (!options_.symmetry) std::iota(out_.symmetry_class.begin(), out_.symmetry_class.end(), 0);
    members_.assign(*std::max_element(out_.symmetry_class.begin(), out_.symmetry_class.end()) + 1, {});
    for (int32_t d = 0; d < D; ++d) members_[out_.symmetry_class[d]].push_back(d);
    place_.assign(U, -1);
    used_.assign(D, 0);
    for (int32_t u = 0; u < U; ++u) {
      place_[u] = bound_.forced_device(u);
      if (place_[u] < 0) ++out_.branch_units;
      else ++used_[place_[u]];
    }
    const BoundParts root = bound_.partial(place_);
    out_.root_bound_s = root.bound_s;
    if (options_.starts) start();
    if (root.fits) search();
    if (out_.stopped.empty()) {
      out_.proven = true;
      out_.bound_s = out_.step_time_s == kInf ? kInf : out_.step_time_s;
    } else {
      out_.bound_s = std::min(out_.step_time_s, open_bound_);
    }
    out_.device_of = best_.empty() ? std::vector<int32_t>{} : units_.expand(best_);
    out_.simulations = simulations_;
    out_.wall_s = elapsed_s();
    return out_;
  }

  /** The least-cost heuristic placement (none fits in memory): what the placer returns then. */
  const std::vector<int32_t>& fallback() const { return fallback_; }

 private:
  struct Child {
    double bound_s;
    int32_t device;
    std::vector<uint64_t> domains;  // after propagation
  };
  struct Frame {
    int32_t unit = -1;  // the unit it branches on
    std::vector<Child> children;
    size_t next = 0;
    int32_t current = -1;  // the device of the child being explored
  };

  double elapsed_s() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }
  double cutoff() const { return out_.step_time_s * (1 - kTolerance); }

  // The step time of a unit placement, +inf when out of memory.
  double evaluate(std::span<const int32_t> unit_device) {
    ++simulations_;
    const std::vector<int32_t> ops = units_.expand(unit_device);
    sim_.simulate(ops, *scratch_, result_);
    return result_.oom ? kInf : result_.step_time_s;
  }

  void offer(std::span<const int32_t> unit_device, double step_s) {
    if (step_s < out_.step_time_s) {
      out_.step_time_s = step_s;
      best_.assign(unit_device.begin(), unit_device.end());
    }
  }

  // The incumbent: the best of the heuristics that fits, improved by moving one unit at a time.
  void start() {
    double least_cost = kInf;
    std::vector<std::pair<std::string, uint64_t>> runs;  // (placer, seed)
    for (const char* name : kStarts) runs.emplace_back(name, seed_);
    for (uint64_t k = 1; k < kAnnealingRuns; ++k) runs.emplace_back("annealing", seed_ + k);
    for (const auto& [name, seed] : runs) {
      PlaceRequest request{sim_, nlohmann::json::object(), seed, {}, interrupted_};
      if (name == "annealing") request.options = {{"steps", kAnnealingSteps}};
      std::vector<int32_t> ops;
      try {
        ops = make_placer(name)->place(request).device_of;
      } catch (const Error&) {
        continue;  // a heuristic that cannot place this graph is no start
      }
      std::vector<int32_t> unit_device(units_.num_units());
      for (int32_t u = 0; u < units_.num_units(); ++u) unit_device[u] = ops[units_.ops(u)[0]];
      const double step_s = evaluate(unit_device);
      if (step_s < out_.step_time_s) out_.start = name, out_.start_step_s = step_s;
      offer(unit_device, step_s);
      // Out of memory everywhere: keep the one with the least excess, as annealing's cost does.
      if (result_.oom) {
        double excess = 0;
        for (double e : result_.device_excess_bytes) excess += e;
        if (best_.empty() && excess < least_cost) least_cost = excess, fallback_ = units_.expand(unit_device);
      }
    }
    if (!best_.empty()) descend();
    report();
  }

  // Moves one unit at a time from the incumbent while that improves it (first improvement, to a local optimum).
  void descend() {
    std::vector<int32_t> current = best_;
    for (bool improved = true; improved;) {
      improved = false;
      for (int32_t u = 0; u < units_.num_units(); ++u)
        for (int32_t d = 0; d < units_.num_devices(); ++d) {
          if (d == current[u] || !bound_.allowed(u, d)) continue;
          const int32_t was = current[u];
          current[u] = d;
          const double step_s = evaluate(current);
          if (step_s < out_.step_time_s * (1 - 1e-12)) {
            offer(current, step_s);
            improved = true;
          } else {
            current[u] = was;
          }
        }
    }
  }

  void report() {
    if (progress_)
      progress_(fmt::format("exact: {} nodes, best {:.6g} s, {} of {} units to place", out_.nodes, out_.step_time_s,
                            out_.branch_units, out_.units));
  }

  // The unit to branch on: the fewest devices left, then the most work (it moves the bounds most), then the
  // first. -1 when every unit has one device left (a leaf).
  int32_t branch_unit(std::span<const uint64_t> domains) const {
    int32_t best = -1, best_count = 0;
    double best_time = 0;
    for (int32_t u = 0; u < units_.num_units(); ++u) {
      const int count = std::popcount(domains[u]);
      if (count < 2) continue;
      double fastest = kInf;
      for (int32_t d = 0; d < units_.num_devices(); ++d)
        if ((domains[u] >> d) & 1) fastest = std::min(fastest, units_.time_s(u, d));
      if (best < 0 || count < best_count || (count == best_count && fastest > best_time))
        best = u, best_count = count, best_time = fastest;
    }
    return best;
  }

  // The children of a node whose domains are `domains`: the branch unit on each device left to it
  // (interchangeable devices in index order: an unused one only if it is its class's first unused), each with
  // its bound and domains after propagation, the least bound first.
  Frame expand(std::span<const uint64_t> domains, double parent_bound_s) {
    Frame f;
    f.unit = branch_unit(domains);
    for (int32_t d = 0; d < units_.num_devices(); ++d) {
      if (!((domains[f.unit] >> d) & 1)) continue;
      if (used_[d] == 0) {
        const auto& m = members_[out_.symmetry_class[d]];
        const auto first_unused = std::find_if(m.begin(), m.end(), [&](int32_t x) {
          return used_[x] == 0 && ((domains[f.unit] >> x) & 1);
        });
        if (*first_unused != d) continue;
      }
      place_[f.unit] = d;
      const double b = std::max(parent_bound_s, bound_.partial(place_, cutoff(), domains).bound_s);
      ++out_.nodes;
      if (b < cutoff()) f.children.push_back({b, d, std::vector<uint64_t>(bound_.domains().begin(), bound_.domains().end())});
    }
    place_[f.unit] = -1;
    std::stable_sort(f.children.begin(), f.children.end(),
                     [](const Child& a, const Child& b) { return a.bound_s < b.bound_s; });
    return f;
  }

  // A leaf (one device left per unit) under every relabelling of its devices within their classes (injective
  // maps into the class), simulated.
  void evaluate_images(std::span<const uint64_t> domains) {
    ++out_.leaves;
    std::vector<int32_t> leaf(units_.num_units());
    for (int32_t u = 0; u < units_.num_units(); ++u) leaf[u] = std::countr_zero(domains[u]);
    std::vector<std::vector<int32_t>> used_of(members_.size());
    for (size_t k = 0; k < members_.size(); ++k)
      for (int32_t d : members_[k])
        if (std::find(leaf.begin(), leaf.end(), d) != leaf.end()) used_of[k].push_back(d);
    std::vector<int32_t> map(units_.num_devices());
    std::iota(map.begin(), map.end(), 0);
    std::vector<int32_t> image(leaf.size());
    // Maps the used devices of class k from the i-th on, then those of the next classes, then simulates.
    auto assign = [&](auto&& self, size_t k, size_t i, std::vector<uint8_t>& taken) -> void {
      if (k == members_.size()) {
        for (size_t u = 0; u < leaf.size(); ++u) image[u] = map[leaf[u]];
        offer(image, evaluate(image));
        return;
      }
      if (i == used_of[k].size() || members_[k].size() == 1) {
        std::vector<uint8_t> next_taken(k + 1 < members_.size() ? members_[k + 1].size() : 0, 0);
        self(self, k + 1, 0, next_taken);
        return;
      }
      for (size_t j = 0; j < members_[k].size(); ++j) {
        if (taken[j]) continue;
        taken[j] = 1;
        map[used_of[k][i]] = members_[k][j];
        self(self, k, i + 1, taken);
        taken[j] = 0;
      }
      map[used_of[k][i]] = used_of[k][i];
    };
    std::vector<uint8_t> taken(members_[0].size(), 0);
    const double before = out_.step_time_s;
    assign(assign, 0, 0, taken);
    if (out_.step_time_s < before && options_.starts) descend();  // a new incumbent: its neighbours may be better still
  }

  bool out_of_limits() {
    if (interrupted_ && interrupted_()) throw Interrupted();
    if (options_.max_nodes > 0 && out_.nodes >= options_.max_nodes) out_.stopped = "max_nodes";
    else if (options_.time_limit_s > 0 && elapsed_s() > options_.time_limit_s) out_.stopped = "time_limit";
    return !out_.stopped.empty();
  }

  void search() {
    const BoundParts root = bound_.partial(place_, cutoff());
    ++out_.nodes;
    if (!(root.bound_s < cutoff())) return;  // the incumbent is optimal, or nothing fits
    const std::vector<uint64_t> root_domains(bound_.domains().begin(), bound_.domains().end());
    if (branch_unit(root_domains) < 0) {
      evaluate_images(root_domains);
      return;
    }
    std::vector<Frame> stack;
    stack.push_back(expand(root_domains, root.bound_s));
    double last_report = elapsed_s();
    while (!stack.empty()) {
      if (out_of_limits()) break;
      if (progress_ && elapsed_s() - last_report > 2) last_report = elapsed_s(), report();
      Frame& f = stack.back();
      if (f.current >= 0) --used_[f.current], f.current = -1, place_[f.unit] = -1;
      if (f.next == f.children.size() || !(f.children[f.next].bound_s < cutoff())) {
        stack.pop_back();  // children are in bound order: the rest are cut off too
        continue;
      }
      const Child& child = f.children[f.next++];
      f.current = child.device;
      place_[f.unit] = child.device;
      ++used_[child.device];
      if (branch_unit(child.domains) < 0) {
        evaluate_images(child.domains);
      } else {
        Frame next = expand(child.domains, child.bound_s);  // may reallocate the stack: f, child not used after
        stack.push_back(std::move(next));
      }
    }
    // What is left open bounds the optimum from below.
    for (const Frame& f : stack)
      for (size_t i = f.next; i < f.children.size(); ++i) open_bound_ = std::min(open_bound_, f.children[i].bound_s);
  }

  const sim::Simulator& sim_;
  ExactOptions options_;
  uint64_t seed_;
  const std::function<void(std::string_view)>& progress_;
  const std::function<bool()>& interrupted_;
  Units units_;
  StepBound bound_;
  sim::SimScratchPtr scratch_;
  sim::SimResult result_;
  std::chrono::steady_clock::time_point t0_;
  ExactResult out_;
  std::vector<int32_t> place_, used_, best_, fallback_;
  std::vector<std::vector<int32_t>> members_;
  int64_t simulations_ = 0;
  double open_bound_ = kInf;
};

class ExactPlacer final : public Placer {
 public:
  PlaceResult place(const PlaceRequest& request) const override {
    check_options("exact", request.options, {"time_limit_s", "max_nodes", "symmetry"});
    ExactOptions options;
    options.time_limit_s = option_number("exact", request.options, "time_limit_s", options.time_limit_s);
    options.max_nodes = option_int("exact", request.options, "max_nodes", 0, std::numeric_limits<int64_t>::max());
    options.symmetry = option_bool("exact", request.options, "symmetry", true);
    Search search(request.simulator, options, request.seed, request.progress, request.interrupted);
    const ExactResult r = search.run();
    const sim::Cluster& c = request.cluster();
    if (r.device_of.empty() && r.proven)
      throw Error(fmt::format("exact: no placement of graph \"{}\" on cluster \"{}\" fits in memory (proven); give "
                              "the devices more memory, or use a placer that returns placements out of memory "
                              "(e.g. heft)",
                              request.graph().name(), c.name()));
    auto finite = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
    nlohmann::json info = {{"proven", r.proven},
                           {"fits_memory", !r.device_of.empty()},
                           {"step_time_s", finite(r.step_time_s)},
                           {"bound_s", finite(r.bound_s)},
                           {"gap", std::isfinite(r.step_time_s) && r.bound_s > 0 ? finite(r.step_time_s / r.bound_s - 1)
                                                                                  : nlohmann::json(nullptr)},
                           {"root_bound_s", finite(r.root_bound_s)},
                           {"start", r.start},
                           {"start_step_s", finite(r.start_step_s)},
                           {"stopped", r.stopped.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.stopped)},
                           {"nodes", r.nodes},
                           {"leaves", r.leaves},
                           {"simulations", r.simulations},
                           {"units", r.units},
                           {"branch_units", r.branch_units},
                           {"symmetry_class", r.symmetry_class},
                           {"wall_s", r.wall_s}};
    if (!r.device_of.empty()) return {r.device_of, info};
    if (search.fallback().empty())
      throw Error(fmt::format("exact: stopped ({}) before finding a placement of graph \"{}\" that fits in memory, and "
                              "no heuristic placed it; raise time_limit_s or max_nodes",
                              r.stopped, request.graph().name()));
    return {search.fallback(), info};
  }
};

}  // namespace

ExactResult solve_exact(const sim::Simulator& simulator, const ExactOptions& options, uint64_t seed,
                        const std::function<void(std::string_view)>& progress,
                        const std::function<bool()>& interrupted) {
  return Search(simulator, options, seed, progress, interrupted).run();
}

std::unique_ptr<Placer> make_exact_placer() { return std::make_unique<ExactPlacer>(); }

}  // namespace placelab::policy
