// Tarnawski et al.'s local-search baseline for the max-load objective: from a random assignment of
// colour classes to accelerators, repeatedly make the single class move that lowers the max-load most,
// until none does; restart and keep the best. Unlike the reference, memory counts (the objective is
// (bytes over capacity, max-load) compared in that order), and moves can be restricted to contiguous
// splits. Loads are kept per device and a move is evaluated in O(degree + devices): moving a group only
// changes whether its own hyperedges are paid by its old and new device.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <fmt/format.h>

#include "graphs/error.h"
#include "policy/budget.h"
#include "policy/classic/throughput.h"
#include "policy/classic/throughput_model.h"
#include "policy/classic/units.h"
#include "sim/pipeline.h"

namespace placelab::policy {

namespace {

/** Bytes over capacity first, then the max-load. */
struct Score {
  double excess_bytes = 0;
  double max_load_s = 0;
  bool operator<(const Score& o) const {
    if (excess_bytes != o.excess_bytes) return excess_bytes < o.excess_bytes;
    return max_load_s < o.max_load_s;
  }
};

/** The state of one descent: a device per group with loads, memory and hyperedge counts per device. */
class Assignment {
 public:
  Assignment(const ThroughputModel& m, std::vector<int32_t> device_of_group)
      : m_(m), D_(num_devices(m)), dev_(std::move(device_of_group)),
        load_(D_, 0.0), memory_(D_, 0.0), count_(static_cast<size_t>(m.num_hyperedges()) * D_, 0) {
    for (int32_t v = 0; v < m_.num_groups(); ++v) {
      load_[dev_[v]] += time(v, dev_[v]);
      memory_[dev_[v]] += m_.memory_bytes(v);
      for (int32_t h : m_.hyperedges_of(v)) ++count_[static_cast<size_t>(h) * D_ + dev_[v]];
    }
    for (int32_t h = 0; h < m_.num_hyperedges(); ++h)
      for (int32_t d = 0; d < D_; ++d)
        if (pays(h, d, count_[static_cast<size_t>(h) * D_ + d])) load_[d] += m_.hyperedge_cost_s(h);
  }

  static int32_t num_devices(const ThroughputModel& m) {
    int32_t D = 0;
    for (int32_t t = 0; t < m.num_classes(); ++t) D += static_cast<int32_t>(m.device_class(t).devices.size());
    return D;
  }

  const std::vector<int32_t>& device_of_group() const { return dev_; }

  /** The score after moving group v to device b (b may equal its device: the current score). */
  Score score_after(int32_t v, int32_t b, std::vector<double>& tmp_load, std::vector<double>& tmp_memory) const {
    tmp_load = load_;
    tmp_memory = memory_;
    const int32_t a = dev_[v];
    if (a != b) {
      tmp_load[a] -= time(v, a);
      tmp_load[b] += time(v, b);
      tmp_memory[a] -= m_.memory_bytes(v);
      tmp_memory[b] += m_.memory_bytes(v);
      for (int32_t h : m_.hyperedges_of(v)) {
        const int32_t ca = count_[static_cast<size_t>(h) * D_ + a], cb = count_[static_cast<size_t>(h) * D_ + b];
        const double c = m_.hyperedge_cost_s(h);
        tmp_load[a] += (pays(h, a, ca - 1) - pays(h, a, ca)) * c;
        tmp_load[b] += (pays(h, b, cb + 1) - pays(h, b, cb)) * c;
      }
    }
    Score s;
    for (int32_t d = 0; d < D_; ++d) {
      s.max_load_s = std::max(s.max_load_s, tmp_load[d]);
      s.excess_bytes += std::max(0.0, tmp_memory[d] - capacity(d));
    }
    return s;
  }

  void move(int32_t v, int32_t b) {
    std::vector<double> l, mem;
    score_after(v, b, l, mem);
    const int32_t a = dev_[v];
    for (int32_t h : m_.hyperedges_of(v)) {
      --count_[static_cast<size_t>(h) * D_ + a];
      ++count_[static_cast<size_t>(h) * D_ + b];
    }
    load_ = std::move(l);
    memory_ = std::move(mem);
    dev_[v] = b;
  }

 private:
  int pays(int32_t h, int32_t d, int32_t count) const {
    return m_.device_class(m_.class_of_device(d)).pays_comm && count > 0 && count < m_.hyperedge_size(h) ? 1 : 0;
  }
  double time(int32_t v, int32_t d) const { return m_.time_s(v, m_.class_of_device(d)); }
  double capacity(int32_t d) const { return m_.device_class(m_.class_of_device(d)).capacity_bytes; }

  const ThroughputModel& m_;
  int32_t D_;
  std::vector<int32_t> dev_;
  std::vector<double> load_, memory_;
  std::vector<int32_t> count_;
};

/** Whether the groups' devices form a contiguous split: the device graph of the group DAG is acyclic. */
bool ideal_chain(const ThroughputModel& m, const std::vector<int32_t>& dev, int32_t devices) {
  std::vector<std::vector<char>> edge(devices, std::vector<char>(devices, 0));
  std::vector<int32_t> indegree(devices, 0);
  for (int32_t v = 0; v < m.num_groups(); ++v)
    for (int32_t w : m.succs(v))
      if (dev[v] != dev[w] && !edge[dev[v]][dev[w]]) edge[dev[v]][dev[w]] = 1, ++indegree[dev[w]];
  std::vector<int32_t> ready;
  for (int32_t d = 0; d < devices; ++d)
    if (indegree[d] == 0) ready.push_back(d);
  int32_t seen = 0;
  while (!ready.empty()) {
    const int32_t a = ready.back();
    ready.pop_back();
    ++seen;
    for (int32_t b = 0; b < devices; ++b)
      if (edge[a][b] && --indegree[b] == 0) ready.push_back(b);
  }
  return seen == devices;
}

class LocalSearchPlacer final : public Placer {
 public:
  PlaceResult place(const PlaceRequest& request) const override {
    check_options("local_search", request.options, {"restarts", "contiguous", "max_steps", "use_cpus", "seconds"});
    const auto& o = request.options;
    auto integer = [&](const char* key, int64_t fallback) {
      if (!o.contains(key)) return fallback;
      if (!o[key].is_number_integer() || o[key].get<int64_t>() < 1)
        throw Error(fmt::format("placer local_search options: {} must be a positive integer", key));
      return o[key].get<int64_t>();
    };
    auto flag = [&](const char* key, bool fallback) {
      if (!o.contains(key)) return fallback;
      if (!o[key].is_boolean()) throw Error(fmt::format("placer local_search options: {} must be true or false", key));
      return o[key].get<bool>();
    };
    const int64_t restarts = integer("restarts", 10), max_steps = integer("max_steps", 100000);
    const bool contiguous = flag("contiguous", false), use_cpus = flag("use_cpus", false);
    // A time budget: descent steps (each a scan of every move) start while it covers the longest so far.
    Budget budget(request, 0, option_number("local_search", o, "seconds", 0));

    const ThroughputModel m(request.simulator, false, false);
    const int32_t D = Assignment::num_devices(m);
    // The reference moves classes among accelerators only; CPUs join with use_cpus (or when there is nothing else).
    std::vector<int32_t> devices;
    for (int32_t d = 0; d < D; ++d)
      if (use_cpus || m.device_class(m.class_of_device(d)).pays_comm) devices.push_back(d);
    if (devices.empty())
      for (int32_t d = 0; d < D; ++d) devices.push_back(d);
    const int32_t G = m.num_groups();
    auto allowed = [&](int32_t v, int32_t d) { return !m.forbidden(v, m.class_of_device(d)); };
    for (int32_t v = 0; v < G; ++v) {
      bool any = false;
      for (int32_t d : devices) any = any || allowed(v, d);
      if (!any)
        throw Error(fmt::format("local_search: op \"{}\" may run on none of the devices searched (set use_cpus)",
                                m.graph().op_name(m.members(v)[0])));
    }

    std::mt19937_64 rng(request.seed);
    auto below = [&](int64_t n) { return static_cast<int32_t>(rng() % static_cast<uint64_t>(n)); };
    std::vector<int32_t> best_dev;
    Score best{std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
    int64_t total_steps = 0;
    std::vector<double> tmp_load, tmp_memory;
    bool out_of_time = false;
    for (int64_t r = 0; r < restarts && !out_of_time; ++r) {
      if (r > 0 && !budget.allows(0)) break;
      std::vector<int32_t> start(G);
      if (contiguous) {
        // A random topological order cut into consecutive chunks, one per device in random order.
        std::vector<int32_t> indegree(G, 0), ready, order;
        for (int32_t v = 0; v < G; ++v)
          for (int32_t w : m.succs(v)) ++indegree[w];
        for (int32_t v = 0; v < G; ++v)
          if (indegree[v] == 0) ready.push_back(v);
        while (!ready.empty()) {
          const int32_t i = below(static_cast<int64_t>(ready.size()));
          const int32_t v = ready[i];
          ready[i] = ready.back();
          ready.pop_back();
          order.push_back(v);
          for (int32_t w : m.succs(v))
            if (--indegree[w] == 0) ready.push_back(w);
        }
        std::vector<int32_t> shuffled = devices;
        for (size_t i = shuffled.size(); i > 1; --i) std::swap(shuffled[i - 1], shuffled[below(static_cast<int64_t>(i))]);
        std::vector<int32_t> cuts;
        for (size_t i = 1; i < shuffled.size(); ++i) cuts.push_back(below(G + 1));
        std::sort(cuts.begin(), cuts.end());
        size_t chunk = 0;
        for (int32_t i = 0; i < G; ++i) {
          while (chunk < cuts.size() && cuts[chunk] <= i) ++chunk;
          start[order[i]] = shuffled[chunk];
        }
        // A pinned group off its kind cannot stay in a chunk: fall back to everything on one allowed device.
        bool ok = true;
        for (int32_t v = 0; v < G; ++v) ok = ok && allowed(v, start[v]);
        if (!ok) {
          int32_t home = -1;
          for (int32_t d : devices) {
            bool all = true;
            for (int32_t v = 0; v < G; ++v) all = all && allowed(v, d);
            if (all && home < 0) home = d;
          }
          if (home < 0) throw Error("local_search: no single device may run every op; contiguous start impossible");
          std::fill(start.begin(), start.end(), home);
        }
      } else {
        for (int32_t v = 0; v < G; ++v) {
          do start[v] = devices[below(static_cast<int64_t>(devices.size()))];
          while (!allowed(v, start[v]));
        }
      }
      Assignment a(m, start);
      Score current = a.score_after(0, a.device_of_group()[0], tmp_load, tmp_memory);
      if (!budget.end_unit(r > 0)) break;  // a restart's start is a unit too; the first is kept whatever its time
      for (int64_t step = 0; step < max_steps; ++step) {
        request.check_interrupt();
        if (!budget.allows(0)) {
          out_of_time = true;
          break;
        }
          const Score before = current;
        // Every improving move, best first; with `contiguous`, the first that keeps the split contiguous.
        std::vector<std::pair<Score, std::pair<int32_t, int32_t>>> moves;
        for (int32_t v = 0; v < G; ++v) {
          for (int32_t d : devices) {
            if (d == a.device_of_group()[v] || !allowed(v, d)) continue;
            const Score s = a.score_after(v, d, tmp_load, tmp_memory);
            const bool better = s.excess_bytes < current.excess_bytes ||
                                (s.excess_bytes == current.excess_bytes && s.max_load_s < current.max_load_s * (1 - 1e-9));
            if (better) moves.push_back({s, {v, d}});
          }
        }
        std::sort(moves.begin(), moves.end(), [](const auto& x, const auto& y) {
          return x.first < y.first || (!(y.first < x.first) && x.second < y.second);
        });
        bool moved = false;
        std::pair<int32_t, int32_t> undo{-1, -1};  // the group moved and the device it left
        for (const auto& [s, mv] : moves) {
          if (contiguous) {
            std::vector<int32_t> trial = a.device_of_group();
            trial[mv.first] = mv.second;
            if (!ideal_chain(m, trial, D)) continue;
          }
          undo = {mv.first, a.device_of_group()[mv.first]};
          a.move(mv.first, mv.second);
          current = s;
          moved = true;
          break;
        }
        if (!budget.end_unit()) {  // ended past the time budget: the step is dropped
          if (moved) a.move(undo.first, undo.second);
          current = before;
          out_of_time = true;
          break;
        }
        ++total_steps;
        if (!moved) break;
      }
      if (current < best) best = current, best_dev = a.device_of_group();
      request.report(fmt::format("restart {} of {}: max load {:.6g} s{}, best {:.6g} s", r + 1, restarts,
                                 current.max_load_s, current.excess_bytes > 0 ? " (over memory)" : "", best.max_load_s));
    }
    PlaceResult out;
    out.device_of.assign(m.graph().num_ops(), 0);
    for (graphs::OpId op = 0; op < m.graph().num_ops(); ++op) out.device_of[op] = best_dev[m.group_of(op)];
    const sim::MaxLoadResult eval = sim::max_load(request.simulator, out.device_of);
    out.info = {{"objective", eval.max_load_s}, {"fits", eval.fits}, {"contiguous", eval.contiguous},
                {"restarts", restarts}, {"steps", total_steps}};
    budget.report(out.info);
    return out;
  }
};

}  // namespace

std::unique_ptr<Placer> make_local_search_placer() { return std::make_unique<LocalSearchPlacer>(); }

}  // namespace placelab::policy
