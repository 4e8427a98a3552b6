// The list schedulers on plain matrices: HEFT's worked example (Topcuoglu et al. 2002, Fig. 2), schedule
// validity, and the memory-constrained schedulers under tight memory.
#include <algorithm>
#include <cmath>
#include <random>

#include <catch2/catch.hpp>

#include "policy/classic/list_scheduling.h"

using namespace placelab::policy;

namespace {

// Topcuoglu, Hariri and Wu, TPDS 13(3) 2002, Fig. 2: 10 tasks, 3 processors, equal link rates (so an
// edge's weight is its communication cost between any two processors).
ScheduleProblem topcuoglu_example() {
  ScheduleProblem pb;
  pb.num_tasks = 10;
  pb.num_procs = 3;
  pb.cost_s = {14, 16, 9,  13, 19, 18, 11, 13, 19, 13, 8,  17, 12, 13, 10,
               13, 16, 9,  7,  15, 11, 5,  11, 14, 18, 12, 20, 21, 7,  16};
  const int edges[][3] = {{1, 2, 18}, {1, 3, 12}, {1, 4, 9},  {1, 5, 11}, {1, 6, 14}, {2, 8, 19}, {2, 9, 16}, {3, 7, 23},
                          {4, 8, 27}, {4, 9, 23}, {5, 9, 13}, {6, 8, 15}, {7, 10, 17}, {8, 10, 11}, {9, 10, 13}};
  for (const auto& e : edges) pb.edges.push_back({e[0] - 1, e[1] - 1, static_cast<double>(e[2])});
  return pb;
}

// Every task once, after its inputs arrived, on a processor it may use, never overlapping another.
void check_schedule(const ScheduleProblem& pb, const Schedule& s) {
  REQUIRE(static_cast<int32_t>(s.proc.size()) == pb.num_tasks);
  for (int32_t t = 0; t < pb.num_tasks; ++t) {
    REQUIRE(s.proc[t] >= 0);
    REQUIRE(s.proc[t] < pb.num_procs);
    REQUIRE(std::isfinite(pb.cost(t, s.proc[t])));
    CHECK(s.finish_s[t] == Approx(s.start_s[t] + pb.cost(t, s.proc[t])));
    CHECK(s.finish_s[t] <= s.makespan_s + 1e-9);
  }
  for (int32_t i = 0; i < static_cast<int32_t>(pb.edges.size()); ++i) {
    const auto& e = pb.edges[i];
    double c = s.proc[e.src] == s.proc[e.dst] ? 0 : (pb.comm_s ? pb.comm_s(i, s.proc[e.src], s.proc[e.dst]) : e.mean_comm_s);
    CHECK(s.start_s[e.dst] >= s.finish_s[e.src] + c - 1e-9);
  }
  for (int32_t a = 0; a < pb.num_tasks; ++a)
    for (int32_t b = a + 1; b < pb.num_tasks; ++b)
      if (s.proc[a] == s.proc[b] && pb.cost(a, s.proc[a]) > 0 && pb.cost(b, s.proc[b]) > 0)
        CHECK((s.finish_s[a] <= s.start_s[b] + 1e-9 || s.finish_s[b] <= s.start_s[a] + 1e-9));
}

// The schedulers with their default arguments, as one function type.
Schedule heft(const ScheduleProblem& pb) { return heft_schedule(pb); }
Schedule sct(const ScheduleProblem& pb) { return m_sct_schedule(pb); }
Schedule etf(const ScheduleProblem& pb) { return m_etf_schedule(pb); }

}  // namespace

TEST_CASE("policy::heft_schedule: Topcuoglu et al.'s worked example has makespan 80", "[policy]") {
  ScheduleProblem pb = topcuoglu_example();
  std::vector<double> rank = upward_ranks(pb);
  // The paper's Table 1 ranks: n1 108.000, n4 80.000, n9 44.333, n10 14.667.
  CHECK(rank[0] == Approx(108.0));
  CHECK(rank[3] == Approx(80.0));
  CHECK(rank[8] == Approx(44.0 + 1.0 / 3));
  CHECK(rank[9] == Approx(14.0 + 2.0 / 3));
  Schedule s = heft_schedule(pb);
  check_schedule(pb, s);
  CHECK(s.makespan_s == Approx(80.0));
  // Fig. 4(a): n1 on P3 at 0-9, n10 on P2 finishing at 80.
  CHECK(s.proc[0] == 2);
  CHECK(s.finish_s[0] == Approx(9.0));
  CHECK(s.proc[9] == 1);
  CHECK(s.finish_s[9] == Approx(80.0));
}

TEST_CASE("policy::list schedules: every scheduler gives a valid schedule of the example", "[policy]") {
  ScheduleProblem pb = topcuoglu_example();
  for (auto fn : {&heft, &m_topo_schedule, &sct}) check_schedule(pb, fn(pb));
  Schedule etf = m_etf_schedule(pb);
  check_schedule(pb, etf);
  // Nothing beats the critical path of fastest costs on this example: a sanity bound.
  CHECK(etf.makespan_s >= 9 + 13 + 7 + 7 - 1e-9);
}

TEST_CASE("policy::list schedules: memory-aware schedulers stay under capacity when they can", "[policy]") {
  // A chain of 6 tasks of 5 bytes each on 3 processors of 12 bytes: processor 0 is much faster, so
  // a memory-blind scheduler piles everything there (30 bytes); 2 per processor fits.
  ScheduleProblem pb;
  pb.num_tasks = 6;
  pb.num_procs = 3;
  for (int32_t t = 0; t < 6; ++t) pb.cost_s.insert(pb.cost_s.end(), {1.0, 4.0, 4.0});
  for (int32_t t = 0; t + 1 < 6; ++t) pb.edges.push_back({t, t + 1, 0.5});
  pb.edge_bytes.assign(pb.edges.size(), 0.0);
  pb.memory_bytes.assign(6, 5.0);
  pb.capacity_bytes.assign(3, 12.0);
  Schedule heft = heft_schedule(pb);
  CHECK(std::count(heft.proc.begin(), heft.proc.end(), 0) == 6);  // the case needs memory awareness
  for (auto fn : {&m_topo_schedule, &sct, &etf}) {
    Schedule s = fn(pb);
    check_schedule(pb, s);
    CHECK(s.fits_memory);
    for (int32_t p = 0; p < 3; ++p) CHECK(std::count(s.proc.begin(), s.proc.end(), p) <= 2);
  }
  // Received inputs count too: with 5.5 bytes per task and 1 byte per edge, still 2 per processor.
  pb.memory_bytes.assign(6, 5.5);
  pb.edge_bytes.assign(pb.edges.size(), 1.0);
  Schedule s = m_etf_schedule(pb);
  CHECK(s.fits_memory);
  // Infeasible: 4 bytes each with 3 bytes of room: reported, still a complete schedule.
  pb.capacity_bytes.assign(3, 3.0);
  Schedule over = m_topo_schedule(pb);
  check_schedule(pb, over);
  CHECK_FALSE(over.fits_memory);
}

TEST_CASE("policy::Timeline: finds the gap a walk over every interval finds", "[policy]") {
  // Topcuoglu et al.'s insertion policy, walked plainly: from the first interval ending after ready_s,
  // the first idle gap that holds w, else after the last interval. Timeline skips blocks of intervals
  // whose gaps are all too short; thousands of intervals here, so blocks split and are skipped.
  std::mt19937_64 rng(11);
  for (int round = 0; round < 4; ++round) {
    Timeline timeline;
    std::vector<Timeline::Slot> plain;
    double horizon = 0;
    for (int n = 0; n < 3000; ++n) {
      const int kind = static_cast<int>(rng() % 10);
      // Mostly appended work after gaps of every size (a few long), sometimes tasks ready early that
      // need one of the long gaps deep inside (or at the end), and zero-length ones.
      std::uniform_real_distribution<double> uniform(0, 1);
      const double gap = rng() % 10 == 0 ? 20 * uniform(rng) : 0.5 * uniform(rng);
      const double ready_s = kind < 6 ? horizon + gap : horizon * uniform(rng);
      const double w = kind == 9 ? 0.0 : kind < 6 ? 0.5 + uniform(rng) : 10 * uniform(rng);
      size_t k = 0;
      while (k < plain.size() && plain[k].finish_s <= ready_s) ++k;
      double start = 0;
      for (;; ++k) {
        start = std::max(ready_s, k == 0 ? 0.0 : plain[k - 1].finish_s);
        if (k == plain.size() || start + w <= plain[k].start_s) break;
      }
      const Timeline::Where at = timeline.find(ready_s, w);
      REQUIRE(at.start_s == start);
      plain.insert(plain.begin() + static_cast<std::ptrdiff_t>(k), {start, start + w});
      timeline.insert(at, {start, start + w});
      horizon = std::max(horizon, start + w);
    }
    const std::vector<Timeline::Slot> kept = timeline.slots();
    REQUIRE(kept.size() == plain.size());
    for (size_t i = 0; i < kept.size(); ++i) {
      CHECK(kept[i].start_s == plain[i].start_s);
      CHECK(kept[i].finish_s == plain[i].finish_s);
    }
  }
}

TEST_CASE("policy::heft_schedule: processors a task may not use are never chosen", "[policy]") {
  ScheduleProblem pb = topcuoglu_example();
  for (int32_t t = 0; t < pb.num_tasks; t += 2) pb.cost_s[static_cast<size_t>(t) * 3 + 2] = INFINITY;
  for (auto fn : {&heft, &m_topo_schedule, &sct}) {
    Schedule s = fn(pb);
    check_schedule(pb, s);
    for (int32_t t = 0; t < pb.num_tasks; t += 2) CHECK(s.proc[t] != 2);
  }
}

TEST_CASE("policy::sct_favorite_children: LP children, and the greedy rule past the iteration limit", "[policy]") {
  ScheduleProblem pb = topcuoglu_example();
  FavoriteChildren lp = sct_favorite_children(pb);
  CHECK(lp.lp_optimal);
  CHECK(lp.lp_iterations > 0);
  std::vector<int32_t> parents(pb.num_tasks, 0);
  for (int32_t t = 0; t < pb.num_tasks; ++t) {
    if (lp.child[t] < 0) continue;
    ++parents[lp.child[t]];
    // A favourite child is a successor.
    CHECK(std::any_of(pb.edges.begin(), pb.edges.end(), [&](const auto& e) { return e.src == t && e.dst == lp.child[t]; }));
  }
  for (int32_t n : parents) CHECK(n <= 1);
  CHECK(std::count(lp.child.begin(), lp.child.end(), -1) < pb.num_tasks);
  // No iterations: heaviest edges first, n4 -> n8 (27), n3 -> n7 (23), n1 -> n2 (18), n7 -> n10 (17).
  FavoriteChildren greedy = sct_favorite_children(pb, 0);
  CHECK_FALSE(greedy.lp_optimal);
  CHECK(greedy.child[3] == 7);
  CHECK(greedy.child[2] == 6);
  CHECK(greedy.child[0] == 1);
  CHECK(greedy.child[6] == 9);
  check_schedule(pb, m_sct_schedule(pb, 0));
  // The bound on CLP's iterations: every task after n1 starts later than 0, and the makespan, each basic.
  CHECK(lp.lp_min_iterations == 10);
  CHECK(greedy.lp_iterations == 0);  // below the bound CLP is not run
  const FavoriteChildren short_of = sct_favorite_children(pb, lp.lp_min_iterations - 1);
  CHECK(short_of.lp_iterations == 0);
  CHECK(short_of.child == greedy.child);
}

TEST_CASE("policy::sct_favorite_children: CLP never finishes in fewer iterations than the bound", "[policy]") {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 40; ++trial) {
    ScheduleProblem pb;
    pb.num_tasks = 5 + static_cast<int32_t>(rng() % 40);
    pb.num_procs = 2;
    for (int32_t t = 0; t < pb.num_tasks; ++t)  // some tasks take no time, so some starts may be 0
      for (int32_t p = 0; p < pb.num_procs; ++p) pb.cost_s.push_back(rng() % 4 == 0 ? 0.0 : 1.0 + static_cast<double>(rng() % 9));
    for (int32_t dst = 1; dst < pb.num_tasks; ++dst)
      for (int k = 0; k < 2; ++k)
        if (rng() % 3 != 0) pb.edges.push_back({static_cast<int32_t>(rng() % dst), dst, static_cast<double>(rng() % 12)});
    const FavoriteChildren lp = sct_favorite_children(pb);
    INFO("trial " << trial);
    REQUIRE(lp.lp_optimal);
    CHECK(lp.lp_iterations >= lp.lp_min_iterations);
  }
}
