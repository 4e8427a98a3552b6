// The dynamic program over ideals of Tarnawski et al. (NeurIPS 2020) and PipeDream's baseline.
//
// The forward graph is contracted first: ops of one colour class form one group (backward ops follow
// their forward ops; a class with no forward op gets a group whose forward edges mirror its backward
// edges, as the reference does), and cycles between groups are fused. A contiguous split gives each
// device I \ I' for ideals I' ⊆ I of that DAG. A device's load is its ops' time plus, for every op whose
// consumers sit in other groups, that op's cost when the set cuts the "hyperedge" {op's group} ∪
// {consumer groups} (the max-load model: sender pays once, each receiving device once, CPUs never).
//
// Speed: ideals are enumerated once (by size, with Zobrist hashing) together with their Hasse diagram;
// for each ideal I, a DFS walks down the diagram to its sub-ideals I', growing S = I \ I' one group at
// a time, so time, memory and cut of S are updated in O(degree). Given a threshold T, the DFS prunes
// every S whose time exceeds T on every device class (time only grows as S grows): only "small"
// contiguous sets are visited. The DP with threshold T is exact whenever the optimum is <= T, so T
// grows geometrically from a lower bound until the DP succeeds. Ideals of one size are independent:
// oneTBB runs them in parallel.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <limits>
#include <random>
#include <unordered_map>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "graphs/error.h"
#include "policy/classic/throughput.h"
#include "policy/classic/throughput_model.h"
#include "sim/pipeline.h"

namespace placelab::policy {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/** All ideals of a DAG, in order of size, with the down-edges of their Hasse diagram. */
struct Ideals {
  int32_t words = 0;                  // 64-bit words per bitset
  std::vector<uint64_t> bits;         // ideal i: words [i * words, (i + 1) * words)
  std::vector<int32_t> layer_begin;   // ideals of size k: [layer_begin[k], layer_begin[k + 1])
  std::vector<int64_t> down_begin;    // down-edges of ideal i: [down_begin[i], down_begin[i + 1])
  std::vector<std::pair<int32_t, int32_t>> down;  // (group removed, the smaller ideal)
  int32_t size() const { return static_cast<int32_t>(layer_begin.back()); }
};

// The DP's limits, checked between steps: the caller's interrupt, then the time limit.
struct Budget {
  const char* placer;
  const std::string& graph;
  Clock::time_point start;
  double time_limit_s;
  const std::function<bool()>& interrupted;
  const std::function<void(std::string_view)>& progress;
  mutable Clock::time_point last_report = start;

  // A status line at most once a second, for long stages with no step of their own to report.
  template <class Stage>
  void report(Stage&& stage) const {
    if (!progress || seconds_since(last_report) < 1) return;
    last_report = Clock::now();
    progress(stage());
  }

  template <class Stage>
  void check(Stage&& stage) const {
    if (interrupted && interrupted()) throw Interrupted();
    if (time_limit_s > 0 && seconds_since(start) > time_limit_s)
      throw Error(fmt::format("{}: time limit of {} s reached on \"{}\" ({}); raise the option time_limit_s or "
                              "coarsen the graph first (graphs/coarsen.h)",
                              placer, time_limit_s, graph, stage()));
  }
};

Ideals enumerate_ideals(const ThroughputModel& m, int64_t max_ideals, const Budget& budget) {
  const char* placer = budget.placer;
  const int32_t n = m.num_groups();
  Ideals id;
  id.words = (n + 63) / 64;
  const size_t W = static_cast<size_t>(id.words);
  // Each ideal is a bitset of n bits, each step between two ideals a pair of links, and each ideal of the
  // current and next layer holds the groups it can take: on a large graph they pass the machine's memory
  // long before max_ideals (70,000 groups, thousands of them weights without predecessors: 14 GB before
  // the second layer was done), so their bytes are capped at 4 GB too.
  constexpr double kMaxEnumerationBytes = 4e9;
  int64_t steps = 0, takeable = 0;  // links; groups listed in `addable` and `next_addable`
  std::mt19937_64 rng(0x9e3779b97f4a7c15ULL);
  std::vector<uint64_t> key(n);
  for (auto& k : key) k = rng();
  std::unordered_map<uint64_t, int32_t> index;
  std::vector<uint64_t> hash;
  auto enumeration_bytes = [&] {
    return 8.0 * static_cast<double>(W * hash.size() + steps) + 4.0 * static_cast<double>(takeable);
  };
  std::vector<std::vector<std::pair<int32_t, int32_t>>> down;
  // Reserved (untouched pages cost nothing) so that growing never holds an old and a new copy at once.
  id.bits.reserve(W * static_cast<size_t>(std::min<double>(static_cast<double>(max_ideals) + 1,
                                                           kMaxEnumerationBytes / (8.0 * static_cast<double>(W)) + 1)));
  id.bits.assign(W, 0);
  hash.push_back(0);
  down.emplace_back();
  index.emplace(0, 0);
  id.layer_begin = {0, 1};
  std::vector<uint64_t> next(W);
  // The groups each ideal of the current layer (and of the next) can take: not in it, every predecessor
  // in it; ascending, the order a scan of every group meets them (so ideals are numbered as it would),
  // found from the smaller ideal's instead of by such a scan (n groups for each of millions of ideals).
  std::vector<std::vector<int32_t>> addable(1), next_addable;
  for (int32_t v = 0; v < n; ++v)
    if (m.preds(v).empty()) addable[0].push_back(v);
  takeable = static_cast<int64_t>(addable[0].size());
  for (int32_t k = 0; k < n; ++k) {
    const int32_t begin = id.layer_begin[k], end = id.layer_begin[k + 1];
    next_addable.clear();
    for (int32_t i = begin; i < end; ++i) {
      if (i % 1024 == 0) {
        const auto stage = [&] { return fmt::format("enumerating ideals: {} so far", hash.size()); };
        budget.check(stage);
        budget.report(stage);
      }
      for (const int32_t v : addable[i - begin]) {
        std::copy(id.bits.begin() + i * W, id.bits.begin() + (i + 1) * W, next.begin());
        next[v / 64] |= uint64_t{1} << (v % 64);
        const uint64_t h = hash[i] ^ key[v];
        auto [it, fresh] = index.emplace(h, static_cast<int32_t>(hash.size()));
        if (fresh) {
          if (enumeration_bytes() >= kMaxEnumerationBytes)
            throw Error(fmt::format(
                "{}: enumerating the ideals of \"{}\" ({} forward groups, {} bytes an ideal) passes {:.0f} GB at {} "
                "ideals; coarsen it first (graphs/coarsen.h: fuse_chains, group_by_size; in Python "
                "placelab.fuse_chains, group_by_size)",
                placer, m.graph().name(), n, 8 * W, kMaxEnumerationBytes / 1e9, hash.size()));
          if (static_cast<int64_t>(hash.size()) >= max_ideals)
            throw Error(fmt::format(
                "{}: graph \"{}\" has more than {} ideals ({} forward groups); coarsen it first (graphs/coarsen.h: "
                "fuse_chains, group_by_size; in Python placelab.fuse_chains, group_by_size) or raise the option max_ideals",
                placer, m.graph().name(), max_ideals, n));
          id.bits.insert(id.bits.end(), next.begin(), next.end());
          hash.push_back(h);
          down.emplace_back();
          auto in = [&](int32_t u) { return (next[u / 64] >> (u % 64)) & 1; };
          std::vector<int32_t> take;
          for (const int32_t u : addable[i - begin])
            if (u != v) take.push_back(u);
          for (const int32_t s : m.succs(v))
            if (std::all_of(m.preds(s).begin(), m.preds(s).end(), in)) take.push_back(s);
          std::sort(take.begin(), take.end());
          take.erase(std::unique(take.begin(), take.end()), take.end());
          takeable += static_cast<int64_t>(take.size());
          next_addable.push_back(std::move(take));
        } else if (!std::equal(next.begin(), next.end(), id.bits.begin() + static_cast<size_t>(it->second) * W)) {
          throw Error(fmt::format("{}: 64-bit hash collision between two ideals of \"{}\"", placer, m.graph().name()));
        }
        down[it->second].emplace_back(v, i);
        ++steps;
      }
    }
    for (const auto& a : addable) takeable -= static_cast<int64_t>(a.size());
    addable.swap(next_addable);
    id.layer_begin.push_back(static_cast<int32_t>(hash.size()));
  }
  id.down_begin.assign(1, 0);
  for (const auto& d : down) {
    id.down.insert(id.down.end(), d.begin(), d.end());
    id.down_begin.push_back(static_cast<int64_t>(id.down.size()));
  }
  return id;
}

/** How the best value of a state was reached: the device (class) took I \ sub; sub == I: device unused. */
struct Back {
  int32_t sub = -1;
  int32_t cls = -1;
};

/** The DP tables and what one pruned run needs. */
class IdealDp {
 public:
  IdealDp(const ThroughputModel& m, const Ideals& ideals, const char* placer) : m_(m), ideals_(ideals), placer_(placer) {
    const int32_t C = m.num_classes();
    stride_.resize(C);
    int64_t states = 1;
    for (int32_t t = 0; t < C; ++t) {
      stride_[t] = static_cast<int32_t>(states);
      states *= m.device_class(t).devices.size() + 1;
    }
    if (states > 4096)
      throw Error(fmt::format("{}: {} device-count states ({} device classes) is too many; use fewer distinct devices",
                              placer, states, C));
    states_ = static_cast<int32_t>(states);
    // For each class, the states that have one of its devices left: (state, state without it).
    uses_.resize(C);
    for (int32_t s = 0; s < states_; ++s) {
      for (int32_t t = 0; t < C; ++t) {
        const int32_t count = (s / stride_[t]) % static_cast<int32_t>(m.device_class(t).devices.size() + 1);
        if (count > 0) uses_[t].emplace_back(s, s - stride_[t]);
      }
    }
  }

  int32_t states() const { return states_; }

  /** Runs the DP keeping only sets with load <= threshold; returns the optimum (inf when above it). */
  double run(double threshold, const Budget& budget, int64_t& pairs) {
    const int32_t N = ideals_.size();
    dp_.assign(static_cast<size_t>(N) * states_, kInf);
    back_.assign(static_cast<size_t>(N) * states_, Back{});
    std::fill(dp_.begin(), dp_.begin() + states_, 0.0);
    threshold_ = threshold;
    std::atomic<int64_t> pair_count{0};
    tbb::enumerable_thread_specific<Scratch> scratch([&] { return Scratch(m_, N, states_); });
    for (size_t k = 1; k + 1 < ideals_.layer_begin.size(); ++k) {
      budget.check([&] { return fmt::format("{} ideals", N); });
      tbb::parallel_for(tbb::blocked_range<int32_t>(ideals_.layer_begin[k], ideals_.layer_begin[k + 1]),
                        [&](const tbb::blocked_range<int32_t>& r) {
                          Scratch& s = scratch.local();
                          int64_t local = 0;
                          for (int32_t i = r.begin(); i < r.end(); ++i) local += solve(i, s);
                          pair_count += local;
                        });
    }
    pairs = pair_count.load();
    return dp_[static_cast<size_t>(N - 1) * states_ + states_ - 1];
  }

  /** The split of the last successful run: a device per op. */
  std::vector<int32_t> split() const {
    const int32_t N = ideals_.size();
    const size_t W = static_cast<size_t>(ideals_.words);
    std::vector<int32_t> device_of(m_.graph().num_ops(), -1);
    std::vector<size_t> next_device(m_.num_classes(), 0);
    int32_t cur = N - 1, s = states_ - 1;
    while (cur != 0) {
      const Back b = back_[static_cast<size_t>(cur) * states_ + s];
      if (b.cls < 0) throw Error("dp: internal error: broken back-link");
      if (b.sub != cur) {
        const int32_t device = m_.device_class(b.cls).devices[next_device[b.cls]++];
        for (int32_t v = 0; v < m_.num_groups(); ++v) {
          const bool in_cur = (ideals_.bits[cur * W + v / 64] >> (v % 64)) & 1;
          const bool in_sub = (ideals_.bits[b.sub * W + v / 64] >> (v % 64)) & 1;
          if (in_cur && !in_sub)
            for (graphs::OpId op : m_.members(v)) device_of[op] = device;
        }
      }
      s -= stride_[b.cls];
      cur = b.sub;
    }
    return device_of;
  }

 private:
  /** Per-thread working memory. */
  struct Scratch {
    Scratch(const ThroughputModel& m, int32_t ideals, int32_t states)
        : stamp(ideals, -1), count(m.num_hyperedges(), 0), best(states), back(states) {}
    std::vector<int32_t> stamp;  // stamp[i] == I: ideal i already visited below I
    std::vector<int32_t> count;  // members of each hyperedge in S
    std::vector<double> best;
    std::vector<Back> back;
  };

  /** Time, memory and forbidden members of S per class, and the cut of S. */
  struct SetState {
    std::array<double, ThroughputModel::kMaxClasses> time_s{};
    std::array<int32_t, ThroughputModel::kMaxClasses> forbidden{};
    double memory_bytes = 0;
    double cut_s = 0;
  };

  /** Fills the states of ideal `i`; returns the pairs evaluated. */
  int64_t solve(int32_t i, Scratch& s) {
    std::fill(s.best.begin(), s.best.end(), kInf);
    std::fill(s.back.begin(), s.back.end(), Back{});
    s.stamp[i] = i;
    int64_t pairs = 0;
    descend(i, i, SetState{}, s, pairs);
    // A device may stay unused: the state with one device fewer, same ideal (in increasing state order,
    // so chains of unused devices of several classes settle in one pass).
    for (int32_t st = 0; st < states_; ++st) {
      for (int32_t t = 0; t < m_.num_classes(); ++t) {
        const int32_t count = (st / stride_[t]) % static_cast<int32_t>(m_.device_class(t).devices.size() + 1);
        if (count > 0 && s.best[st - stride_[t]] < s.best[st])
          s.best[st] = s.best[st - stride_[t]], s.back[st] = Back{i, t};
      }
    }
    std::copy(s.best.begin(), s.best.end(), dp_.begin() + static_cast<size_t>(i) * states_);
    std::copy(s.back.begin(), s.back.end(), back_.begin() + static_cast<size_t>(i) * states_);
    return pairs;
  }

  /** Visits the sub-ideals of `cur` below top ideal `top`; `set` describes top \ cur. */
  void descend(int32_t top, int32_t cur, const SetState& set, Scratch& s, int64_t& pairs) {
    const int32_t C = m_.num_classes();
    for (int64_t e = ideals_.down_begin[cur]; e < ideals_.down_begin[cur + 1]; ++e) {
      const auto [v, child] = ideals_.down[e];
      if (s.stamp[child] == top) continue;
      SetState next = set;
      next.memory_bytes += m_.memory_bytes(v);
      bool any = false;
      uint32_t ok = 0;
      for (int32_t t = 0; t < C; ++t) {
        next.time_s[t] += m_.time_s(v, t);
        next.forbidden[t] += m_.forbidden(v, t) ? 1 : 0;
        if (next.forbidden[t] == 0 && next.time_s[t] <= threshold_ &&
            next.memory_bytes <= m_.device_class(t).capacity_bytes) {
          ok |= 1u << t;
          any = true;
        }
      }
      // Time, memory and forbidden members only grow below: nothing further down fits any class.
      if (!any) continue;
      s.stamp[child] = top;
      for (int32_t h : m_.hyperedges_of(v)) {
        const int32_t before = s.count[h]++;
        const int32_t size = m_.hyperedge_size(h);
        const bool was_cut = before > 0 && before < size;
        const bool now_cut = before + 1 < size;
        if (now_cut != was_cut) next.cut_s += now_cut ? m_.hyperedge_cost_s(h) : -m_.hyperedge_cost_s(h);
      }
      next.cut_s = std::max(next.cut_s, 0.0);
      ++pairs;
      const double* prev = dp_.data() + static_cast<size_t>(child) * states_;
      for (int32_t t = 0; t < C; ++t) {
        if (!((ok >> t) & 1)) continue;
        const double load = next.time_s[t] + (m_.device_class(t).pays_comm ? next.cut_s : 0.0);
        if (load > threshold_) continue;
        for (auto [st, from] : uses_[t]) {
          const double cand = std::max(prev[from], load);
          if (cand < s.best[st]) s.best[st] = cand, s.back[st] = Back{child, t};
        }
      }
      descend(top, child, next, s, pairs);
      for (int32_t h : m_.hyperedges_of(v)) --s.count[h];
    }
  }

  const ThroughputModel& m_;
  const Ideals& ideals_;
  const char* placer_;
  std::vector<int32_t> stride_;
  int32_t states_ = 1;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> uses_;
  double threshold_ = kInf;
  std::vector<double> dp_;
  std::vector<Back> back_;
};

class DpPlacer final : public Placer {
 public:
  explicit DpPlacer(bool linearize) : linearize_(linearize) {}

  PlaceResult place(const PlaceRequest& request) const override {
    const char* name = linearize_ ? "pipedream" : "dp";
    check_options(name, request.options, {"max_ideals", "time_limit_s"});
    IdealDpOptions options;
    options.linearize = linearize_;
    const auto& o = request.options;
    if (o.contains("max_ideals")) {
      if (!o["max_ideals"].is_number_integer() || o["max_ideals"].get<int64_t>() < 1)
        throw Error(fmt::format("placer {} options: max_ideals must be a positive integer", name));
      options.max_ideals = o["max_ideals"].get<int64_t>();
    }
    if (o.contains("time_limit_s")) {
      if (!o["time_limit_s"].is_number() || o["time_limit_s"].get<double>() < 0)
        throw Error(fmt::format("placer {} options: time_limit_s must be a non-negative number", name));
      options.time_limit_s = o["time_limit_s"].get<double>();
    }
    IdealDpResult r = solve_ideal_dp(request.simulator, options, request.progress, request.interrupted);
    PlaceResult out;
    out.device_of = std::move(r.device_of);
    // The DP's value is sim::max_load's exactly when each op's out-edges share one cost (msr inputs);
    // otherwise its model charges the largest, and the evaluator has the last word.
    out.info = {{"objective", sim::max_load(request.simulator, out.device_of).max_load_s},
                {"model_objective", r.max_load_s}, {"optimal", !linearize_}, {"ideals", r.num_ideals},
                {"groups", r.num_groups}, {"attempts", r.attempts}, {"pairs", r.pairs_evaluated}};
    return out;
  }

 private:
  bool linearize_;
};

}  // namespace

IdealDpResult solve_ideal_dp(const sim::Simulator& simulator, const IdealDpOptions& options,
                             const std::function<void(std::string_view)>& progress,
                             const std::function<bool()>& interrupted) {
  const char* name = options.linearize ? "pipedream" : "dp";
  const Budget budget{name, simulator.graph().name(), Clock::now(), options.time_limit_s, interrupted, progress};
  ThroughputModel m(simulator, options.linearize, options.fuse_biconnected);
  Ideals ideals = enumerate_ideals(m, options.max_ideals, budget);
  IdealDp dp(m, ideals, name);
  const double memory = static_cast<double>(ideals.size()) * dp.states() * (sizeof(double) + sizeof(Back));
  if (memory > 4e9)
    throw Error(fmt::format("{}: {} ideals x {} device states need {:.1f} GB; coarsen the graph first (graphs/coarsen.h)",
                            name, ideals.size(), dp.states(), memory / 1e9));
  if (progress) progress(fmt::format("{} groups, {} ideals", m.num_groups(), ideals.size()));

  IdealDpResult r;
  r.num_ideals = ideals.size();
  r.num_groups = m.num_groups();
  // Thresholds grow from a lower bound to the largest load any set can have; above that, nothing fits.
  // For the optimum, the best split over prefixes of one linear order (cheap) is an upper bound that the
  // thresholds never pass, so the last (and most expensive) attempt explores no more than needed.
  double ceiling = m.load_ceiling_s();
  if (!options.linearize) {
    IdealDpOptions linear = options;
    linear.linearize = true;
    linear.fuse_biconnected = false;
    try {
      ceiling = std::min(ceiling, solve_ideal_dp(simulator, linear, {}, interrupted).max_load_s);
    } catch (const Error&) {
      // No linear split fits memory (or the limits hit): keep the model's ceiling.
    }
  }
  // The DFS sums a set's times in another order than the ceiling did: allow for the rounding (a single
  // device's only split is the ceiling itself, and one ulp over it refused every single-GPU cluster).
  ceiling *= 1 + 1e-9;
  // Within 3x of the floor (the usual case: the linear order loses little), go to the upper bound at once.
  double threshold = ceiling <= 3 * m.load_floor_s() ? ceiling : std::min(m.load_floor_s(), ceiling);
  for (;;) {
    ++r.attempts;
    const double value = dp.run(threshold, budget, r.pairs_evaluated);
    if (progress) progress(fmt::format("threshold {:.6g} s -> {:.6g} s", threshold, value));
    if (value <= threshold) {
      r.max_load_s = value;
      r.device_of = dp.split();
      return r;
    }
    if (threshold >= ceiling)
      throw Error(fmt::format("{}: no contiguous split of \"{}\" fits the cluster's memory", name,
                              simulator.graph().name()));
    threshold = std::min(ceiling, std::max(threshold * 1.25, 1e-12));
  }
}

std::unique_ptr<Placer> make_dp_placer() { return std::make_unique<DpPlacer>(false); }
std::unique_ptr<Placer> make_pipedream_placer() { return std::make_unique<DpPlacer>(true); }

}  // namespace placelab::policy
