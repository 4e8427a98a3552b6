// The list-scheduling placers: HEFT and Baechi's m-TOPO, m-ETF and m-SCT on the op graph (ops of a colocation
// class grouped so the first one placed fixes the device of the rest), with the simulator's op times as
// computation costs and the cluster's idle-network transfer times as communication costs.
#include <cmath>

#include <fmt/format.h>

#include "policy/classic/list_scheduling.h"
#include "policy/classic/units.h"

namespace placelab::policy {

ScheduleProblem schedule_problem(const Units& units, bool memory) {
  const sim::Simulator& sim = units.simulator();
  const graphs::Graph& g = sim.graph();
  ScheduleProblem pb;
  pb.num_tasks = g.num_ops();
  pb.num_procs = units.num_devices();
  pb.cost_s.resize(static_cast<size_t>(pb.num_tasks) * pb.num_procs);
  for (graphs::OpId op = 0; op < pb.num_tasks; ++op) {
    const int32_t u = units.unit_of(op);
    pb.group.push_back(units.ops(u).size() > 1 ? u : -1);
    for (int32_t d = 0; d < pb.num_procs; ++d)
      pb.cost_s[static_cast<size_t>(op) * pb.num_procs + d] = units.allowed(u, d) ? sim.op_time_s(op, d) : kNotAllowed;
  }
  // What a device holds at its peak, as the simulator counts it: parameters and scratch, and each output
  // (or received copy) kept into a later phase, as forward activations are for the backward pass and
  // gradients for the update. An output read only within its own phase is freed within it: counting it
  // all step made a training step's estimate several times the cluster, and the limits moot.
  // A graph of one phase (inference) keeps the upper bound: every output counts.
  bool one_phase = true;
  for (graphs::OpId op = 0; op < pb.num_tasks && one_phase; ++op) one_phase = g.phase(op) == graphs::Phase::forward;
  std::vector<bool> kept(pb.num_tasks, one_phase);
  for (graphs::EdgeId e = 0; e < g.num_edges(); ++e)
    if (g.phase(g.edge_dst(e)) > g.phase(g.edge_src(e))) kept[g.edge_src(e)] = true;
  for (graphs::EdgeId e = 0; e < g.num_edges(); ++e) {
    pb.edges.push_back({g.edge_src(e), g.edge_dst(e), units.mean_comm_s(g.edge_bytes(e))});
    pb.edge_bytes.push_back(kept[g.edge_src(e)] ? g.edge_bytes(e) : 0.0);
  }
  pb.comm_s = [&units, &g](int32_t e, int32_t p, int32_t q) { return units.comm_s(p, q, g.edge_bytes(e)); };
  if (memory) {
    for (graphs::OpId op = 0; op < pb.num_tasks; ++op)
      pb.memory_bytes.push_back(g.param_bytes(op) + g.temp_bytes(op) + (kept[op] ? g.output_bytes(op) : 0.0));
    for (const auto& d : sim.cluster().devices()) pb.capacity_bytes.push_back(d.memory_bytes);
  }
  return pb;
}

namespace {

/** A list scheduler's options check (throws for unknown ones), and the scheduler, which may add to `info`. */
using CheckFn = void (*)(const nlohmann::json& options);
using ScheduleFn = Schedule (*)(const ScheduleProblem&, const nlohmann::json& options, nlohmann::json& info);

class ListPlacer final : public Placer {
 public:
  ListPlacer(CheckFn check, ScheduleFn schedule, bool memory) : check_(check), schedule_(schedule), memory_(memory) {}

  PlaceResult place(const PlaceRequest& request) const override {
    check_(request.options);  // before any work or progress line
    Units units(request.simulator);
    request.report(fmt::format("scheduling {} ops ({} colocation units)", request.graph().num_ops(), units.num_units()));
    nlohmann::json info = nlohmann::json::object();
    ScheduleProblem pb = schedule_problem(units, memory_);
    pb.interrupted = request.interrupted;
    Schedule s = schedule_(pb, request.options, info);
    info["scheduled_makespan_s"] = s.makespan_s;
    if (memory_) {
      info["fits_memory"] = s.fits_memory && s.memory_scale == 1;
      info["memory_scale"] = s.memory_scale;
    }
    return {std::move(s.proc), info};
  }

 private:
  CheckFn check_;
  ScheduleFn schedule_;
  bool memory_;
};

void heft_options(const nlohmann::json& options) { check_options("heft", options, {}); }
void m_topo_options(const nlohmann::json& options) { check_options("m_topo", options, {}); }
void m_etf_options(const nlohmann::json& options) { check_options("m_etf", options, {}); }
void m_sct_options(const nlohmann::json& options) { check_options("m_sct", options, {"lp_iterations"}); }

Schedule heft_fn(const ScheduleProblem& pb, const nlohmann::json&, nlohmann::json&) { return heft_schedule(pb); }
Schedule m_topo_fn(const ScheduleProblem& pb, const nlohmann::json&, nlohmann::json&) { return m_topo_schedule(pb); }
Schedule m_etf_fn(const ScheduleProblem& pb, const nlohmann::json&, nlohmann::json&) { return m_etf_schedule(pb); }
Schedule m_sct_fn(const ScheduleProblem& pb, const nlohmann::json& options, nlohmann::json& info) {
  FavoriteChildren how;
  const int64_t limit = option_int("m_sct", options, "lp_iterations", 50000);
  Schedule s = m_sct_schedule(pb, limit, &how);
  info["lp"] = how.lp_optimal                   ? "optimal"
               : how.lp_min_iterations > limit ? "not run (needs more iterations than the limit): greedy favourite children"
                                               : "iteration limit: greedy favourite children";
  info["lp_iterations"] = how.lp_iterations;
  info["lp_min_iterations"] = how.lp_min_iterations;
  return s;
}

}  // namespace

std::unique_ptr<Placer> make_heft_placer() { return std::make_unique<ListPlacer>(&heft_options, &heft_fn, false); }
std::unique_ptr<Placer> make_m_topo_placer() { return std::make_unique<ListPlacer>(&m_topo_options, &m_topo_fn, true); }
std::unique_ptr<Placer> make_m_etf_placer() { return std::make_unique<ListPlacer>(&m_etf_options, &m_etf_fn, true); }
std::unique_ptr<Placer> make_m_sct_placer() { return std::make_unique<ListPlacer>(&m_sct_options, &m_sct_fn, true); }

}  // namespace placelab::policy
