// Tarnawski et al.'s integer program for the max-load objective, solved with CBC: minimise T subject to
// every device's load <= T, with binary group-to-position variables. Positions are the devices; in the
// contiguous variant each position also picks its device class, and positions form a chain of ideals
// (group v in the first q positions implies every predecessor is too), which is exactly the DP's
// solution space, so the two agree; the non-contiguous variant drops the chain and is never worse.
// Communication: a position pays hyperedge h when it holds part, not all, of h (y >= x_u for u in h,
// p >= y - x_w for w in h), and only when its class pays communication.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include <coin/Cbc_C_Interface.h>
#include <fmt/format.h>

#include "graphs/error.h"
#include "policy/classic/throughput.h"
#include "policy/classic/throughput_model.h"
#include "sim/pipeline.h"

namespace placelab::policy {

namespace {

struct CbcDeleter {
  void operator()(Cbc_Model* m) const { Cbc_deleteModel(m); }
};

/** Columns and rows added one at a time, with sparse rows given as (column, coefficient) lists. */
class Program {
 public:
  Program() : model_(Cbc_newModel()) { Cbc_setLogLevel(model_.get(), 0); }
  Cbc_Model* get() const { return model_.get(); }
  int32_t column(double lb, double ub, double objective, bool integer) {
    Cbc_addCol(model_.get(), "", lb, ub, objective, integer ? 1 : 0, 0, nullptr, nullptr);
    return columns_++;
  }
  /** Adds sum(coef * col) `sense` rhs, sense 'L', 'G' or 'E'. */
  void row(const std::vector<std::pair<int32_t, double>>& terms, char sense, double rhs) {
    std::vector<int> cols;
    std::vector<double> coefs;
    for (auto [c, a] : terms) cols.push_back(c), coefs.push_back(a);
    Cbc_addRow(model_.get(), "", static_cast<int>(cols.size()), cols.data(), coefs.data(), sense, rhs);
  }

 private:
  std::unique_ptr<Cbc_Model, CbcDeleter> model_;
  int32_t columns_ = 0;
};

class MilpPlacer final : public Placer {
 public:
  PlaceResult place(const PlaceRequest& request) const override {
    check_options("milp", request.options, {"contiguous", "time_limit_s"});
    const auto& o = request.options;
    bool contiguous = false;
    double time_limit_s = 60;
    if (o.contains("contiguous")) {
      if (!o["contiguous"].is_boolean()) throw Error("placer milp options: contiguous must be true or false");
      contiguous = o["contiguous"].get<bool>();
    }
    if (o.contains("time_limit_s")) {
      if (!o["time_limit_s"].is_number() || !(o["time_limit_s"].get<double>() > 0))
        throw Error("placer milp options: time_limit_s must be a positive number");
      time_limit_s = o["time_limit_s"].get<double>();
    }

    const ThroughputModel m(request.simulator, false, false);
    const int32_t G = m.num_groups(), C = m.num_classes(), H = m.num_hyperedges();
    int32_t D = 0;
    std::vector<int32_t> class_of_position;
    for (int32_t t = 0; t < C; ++t)
      for (size_t i = 0; i < m.device_class(t).devices.size(); ++i, ++D) class_of_position.push_back(t);
    double total_bytes = 0;
    for (int32_t v = 0; v < G; ++v) total_bytes += m.memory_bytes(v);
    // Times enter the program in a unit that puts the loads below 1000, near it: CBC's tolerances are
    // absolute (it ignores an improvement below ~1e-5 of the objective, and feasibility slacks below
    // 1e-7), so loads of microseconds in seconds made it take its first split for optimal.
    const double ceiling_s = m.load_ceiling_s();  // no load is larger
    const double unit_s = ceiling_s > 0 && std::isfinite(ceiling_s) ? ceiling_s / 1000 : 1.0;  // seconds per unit

    Program p;
    const int32_t T = p.column(0, std::numeric_limits<double>::infinity(), 1, false);
    // W[q][t]: position q is a device of class t (fixed when not contiguous: position q is device q).
    std::vector<int32_t> W(static_cast<size_t>(D) * C);
    for (int32_t q = 0; q < D; ++q) {
      for (int32_t t = 0; t < C; ++t) {
        const bool fixed_on = class_of_position[q] == t;
        W[q * C + t] = contiguous ? p.column(0, 1, 0, true) : p.column(fixed_on ? 1 : 0, fixed_on ? 1 : 0, 0, true);
      }
    }
    if (contiguous) {
      for (int32_t q = 0; q < D; ++q) {
        std::vector<std::pair<int32_t, double>> one;
        for (int32_t t = 0; t < C; ++t) one.emplace_back(W[q * C + t], 1);
        p.row(one, 'E', 1);
      }
      for (int32_t t = 0; t < C; ++t) {
        std::vector<std::pair<int32_t, double>> count;
        for (int32_t q = 0; q < D; ++q) count.emplace_back(W[q * C + t], 1);
        p.row(count, 'E', static_cast<double>(m.device_class(t).devices.size()));
      }
    }
    // X[v][q][t]: group v at position q as class t (-1 where v may not run on t).
    std::vector<int32_t> X(static_cast<size_t>(G) * D * C, -1);
    auto x = [&](int32_t v, int32_t q, int32_t t) { return X[(static_cast<size_t>(v) * D + q) * C + t]; };
    for (int32_t v = 0; v < G; ++v) {
      std::vector<std::pair<int32_t, double>> once;
      for (int32_t q = 0; q < D; ++q) {
        for (int32_t t = 0; t < C; ++t) {
          if (m.forbidden(v, t) || (!contiguous && class_of_position[q] != t)) continue;
          const int32_t c = p.column(0, 1, 0, true);
          X[(static_cast<size_t>(v) * D + q) * C + t] = c;
          once.emplace_back(c, 1);
          p.row({{c, 1}, {W[q * C + t], -1}}, 'L', 0);
        }
      }
      if (once.empty())
        throw Error(fmt::format("milp: op \"{}\" may run on no device of the cluster", m.graph().op_name(m.members(v)[0])));
      p.row(once, 'E', 1);
    }
    auto on = [&](int32_t v, int32_t q, double a, std::vector<std::pair<int32_t, double>>& terms) {
      for (int32_t t = 0; t < C; ++t)
        if (x(v, q, t) >= 0) terms.emplace_back(x(v, q, t), a);
    };
    for (int32_t q = 0; q < D; ++q) {
      // Load: T >= time + paid communication.
      std::vector<std::pair<int32_t, double>> load = {{T, 1}};
      std::vector<std::pair<int32_t, double>> memory;
      for (int32_t v = 0; v < G; ++v) {
        for (int32_t t = 0; t < C; ++t) {
          if (x(v, q, t) < 0) continue;
          load.emplace_back(x(v, q, t), -m.time_s(v, t) / unit_s);
          if (m.memory_bytes(v) > 0) memory.emplace_back(x(v, q, t), m.memory_bytes(v));
        }
      }
      std::vector<std::pair<int32_t, double>> pays_class;
      for (int32_t t = 0; t < C; ++t)
        if (m.device_class(t).pays_comm) pays_class.emplace_back(W[q * C + t], 1);
      if (!pays_class.empty()) {
        for (int32_t h = 0; h < H; ++h) {
          const int32_t y = p.column(0, 1, 0, false), part = p.column(0, 1, 0, false), paid = p.column(0, 1, 0, false);
          for (int32_t u : m.hyperedge_members(h)) {
            std::vector<std::pair<int32_t, double>> ge = {{y, 1}};
            on(u, q, -1, ge);
            p.row(ge, 'G', 0);  // y >= x_u
            std::vector<std::pair<int32_t, double>> split = {{part, 1}, {y, -1}};
            on(u, q, 1, split);
            p.row(split, 'G', 0);  // part >= y - x_u
          }
          std::vector<std::pair<int32_t, double>> charged = {{paid, 1}, {part, -1}};
          for (auto [w, a] : pays_class) charged.emplace_back(w, -a);
          p.row(charged, 'G', -1);  // paid >= part + [class pays] - 1
          load.emplace_back(paid, -m.hyperedge_cost_s(h) / unit_s);
        }
      }
      p.row(load, 'G', 0);
      if (!memory.empty()) {
        for (int32_t t = 0; t < C; ++t) {
          const double cap = m.device_class(t).capacity_bytes;
          memory.emplace_back(W[q * C + t], -(std::isfinite(cap) ? std::min(cap, total_bytes) : total_bytes));
        }
        p.row(memory, 'L', 0);
      }
    }
    if (contiguous) {
      // Prefixes of positions are ideals: v in positions 0..q implies each predecessor u is too.
      for (int32_t v = 0; v < G; ++v) {
        for (int32_t u : m.preds(v)) {
          for (int32_t q = 0; q + 1 < D; ++q) {
            std::vector<std::pair<int32_t, double>> prefix;
            for (int32_t r = 0; r <= q; ++r) on(v, r, 1, prefix), on(u, r, -1, prefix);
            p.row(prefix, 'L', 0);
          }
        }
      }
    }

    Cbc_setMaximumSeconds(p.get(), time_limit_s);
    Cbc_setAllowableFractionGap(p.get(), 1e-9);
    // CBC reports nothing while it solves (and stops only at its limit): say what to expect.
    request.report(fmt::format("solving {} variables, {} constraints with CBC (at most {:.6g} s of CPU time)",
                               Cbc_getNumCols(p.get()), Cbc_getNumRows(p.get()), time_limit_s));
    Cbc_solve(p.get());
    const double* sol = Cbc_getColSolution(p.get());
    if (Cbc_isProvenInfeasible(p.get()) || sol == nullptr || Cbc_bestSolution(p.get()) == nullptr)
      throw Error(fmt::format("milp: {} within {} s on \"{}\" (memory too small, or raise time_limit_s)",
                              Cbc_isProvenInfeasible(p.get()) ? "no split fits" : "no solution found", time_limit_s,
                              m.graph().name()));
    sol = Cbc_bestSolution(p.get());
    // Positions to devices: the next unused device of the position's class.
    std::vector<int32_t> device_of_position(D, -1);
    std::vector<size_t> next(C, 0);
    for (int32_t q = 0; q < D; ++q) {
      for (int32_t t = 0; t < C; ++t) {
        if (sol[W[q * C + t]] > 0.5) device_of_position[q] = m.device_class(t).devices[next[t]++];
      }
    }
    PlaceResult out;
    out.device_of.assign(m.graph().num_ops(), -1);
    for (int32_t v = 0; v < G; ++v) {
      for (int32_t q = 0; q < D; ++q)
        for (int32_t t = 0; t < C; ++t)
          if (x(v, q, t) >= 0 && sol[x(v, q, t)] > 0.5)
            for (graphs::OpId op : m.members(v)) out.device_of[op] = device_of_position[q];
    }
    const double objective = Cbc_getObjValue(p.get()) * unit_s;
    const double bound = std::min(objective, Cbc_getBestPossibleObjValue(p.get()) * unit_s);
    const bool optimal = Cbc_isProvenOptimal(p.get()) != 0;
    const sim::MaxLoadResult eval = sim::max_load(request.simulator, out.device_of);
    out.info = {{"objective", eval.max_load_s},
                {"milp_objective", objective},
                {"bound", bound},
                {"gap", objective > 0 ? (objective - bound) / objective : 0.0},
                {"status", optimal ? "optimal" : (Cbc_isSecondsLimitReached(p.get()) ? "time_limit" : "stopped")},
                {"contiguous", contiguous}};
    return out;
  }
};

}  // namespace

std::unique_ptr<Placer> make_milp_placer() { return std::make_unique<MilpPlacer>(); }

}  // namespace placelab::policy
