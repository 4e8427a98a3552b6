// Schedule-aware decoding (policy/learned/schedule_decoder.h): a policy that always takes the earliest
// finish is HEFT, following a placement reproduces it, windows re-place only their units, features
// describe the partial schedule, and decodes are seeded.
#include <algorithm>
#include <cmath>
#include <random>

#include <catch2/catch.hpp>

#include "graphs/error.h"
#include "graphs/training.h"
#include "policy/learned/schedule_decoder.h"
#include "policy/placer.h"
#include "tests/policy/learned_util.h"

using namespace placelab;
using namespace placelab::testing;

namespace {

// Logits that prefer the device of earliest finish by a wide margin (feature column 2).
void earliest_finish(int32_t, std::span<const float> features, std::span<float> logits) {
  for (size_t d = 0; d < logits.size(); ++d) logits[d] = 50.f * features[d * learned::kDecisionFeatures + 2];
}

void uniform(int32_t, std::span<const float>, std::span<float> logits) {
  std::fill(logits.begin(), logits.end(), 0.f);
}

}  // namespace

TEST_CASE("learned::ScheduleDecoder: always taking the earliest finish is HEFT", "[policy][decoder]") {
  for (const auto& [graph, preset] : {std::pair{tiny_dag(2, 60), "v100-pcie-4"},
                                      std::pair{graphs::expand_training(tiny_dag(3)), "v100-nvlink-2"},
                                      std::pair{with_pins(tiny_dag(4, 40), "cpu"), "cpu-gpu-2"}}) {
    const rl::Task task = task_of(graph, preset);
    const learned::ScheduleDecoder decoder(*task.problem);
    const learned::Decisions greedy = decoder.decode(earliest_finish, learned::DecodeMode::greedy);
    const std::vector<int32_t> heft = policy::make_placer("heft")->place(policy::PlaceRequest{*task.simulator}).device_of;
    INFO(graph.name() << " on " << preset);
    CHECK(task.problem->expand(greedy.unit_device) == heft);
    CHECK(greedy.rows() > 0);
    for (size_t r = 0; r < greedy.unit.size(); ++r) CHECK(greedy.logp[r] > -1e-6);  // near-certain choices
  }
}

TEST_CASE("learned::ScheduleDecoder: following a placement reproduces it, with features of its schedule",
          "[policy][decoder]") {
  const rl::Task task = task_of(with_pins(graphs::expand_training(tiny_dag(5, 40)), "cpu"), "cpu-gpu-4");
  const learned::Problem& problem = *task.problem;
  const learned::ScheduleDecoder decoder(problem);
  std::mt19937_64 rng(7);
  std::vector<int32_t> target(static_cast<size_t>(problem.num_units()));
  int32_t choices = 0;
  for (int32_t u = 0; u < problem.num_units(); ++u) {
    const auto allowed = problem.units().allowed_devices(u);
    target[u] = allowed[rng() % allowed.size()];
    choices += allowed.size() > 1;
  }
  const learned::Decisions followed = decoder.follow(target);
  CHECK(followed.unit_device == target);
  REQUIRE(followed.rows() == choices);  // one decision per unit with a choice, none for pinned-alone units
  const int32_t D = problem.num_devices();
  for (int64_t r = 0; r < followed.rows(); ++r) {
    const int32_t u = followed.unit[r];
    CHECK(followed.choice[r] == target[u]);
    CHECK(followed.logp[r] == Approx(-std::log(static_cast<double>(followed.allowed.row(r).count()))));
    int32_t earliest = 0;
    double traffic_share = 0;
    for (int32_t d = 0; d < D; ++d) {
      const auto f = followed.features.row(r * D + d);
      CHECK(followed.allowed(r, d) == problem.allowed()(u, d));
      if (!followed.allowed(r, d)) {
        CHECK(f.isZero());
        continue;
      }
      earliest += f[2] == 1.f;
      if (f[2] == 1.f) CHECK((f[0] == 0.f && f[1] == 0.f));  // ties share 0 but only the first is flagged
      CHECK(f[0] >= 0.f);
      CHECK(f[5] >= 0.f);
      CHECK(f[5] <= 4.f);
      traffic_share += f[7];
      CHECK((f[9] >= 0.f && f[9] < 1.f));
      CHECK(f[10] >= 0.f);
      CHECK((f[11] >= 0.f && f[11] <= 4.f));
      // Inputs from placed units on other devices cost transfer time; on the device holding them all, none.
      if (f[7] == 1.f) CHECK(f[10] == 0.f);
    }
    CHECK(earliest == 1);
    CHECK((traffic_share == Approx(1.0) || traffic_share == 0));
  }
  // The last decision has seen most units placed.
  CHECK(followed.features(followed.rows() * D - 1, 9) > 0.5f);

  std::vector<int32_t> bad = target;
  for (int32_t u = 0; u < problem.num_units(); ++u)
    if (!problem.allowed().row(u).all()) {
      for (int32_t d = 0; d < D; ++d)
        if (!problem.allowed()(u, d)) bad[u] = d;
      break;
    }
  CHECK_THROWS_WITH(decoder.follow(bad), Catch::Contains("which it may not use"));
  CHECK_THROWS_WITH(decoder.follow(std::vector<int32_t>(3, 0)), Catch::Contains("has 3 units"));
}

TEST_CASE("learned::ScheduleDecoder: a window re-places only its units, and decodes are seeded", "[policy][decoder]") {
  const rl::Task task = task_of(tiny_dag(6, 80), "v100-nvlink-4");
  const learned::Problem& problem = *task.problem;
  const learned::ScheduleDecoder decoder(problem);
  std::mt19937_64 a(3), b(3), c(4);
  const learned::Decisions first = decoder.decode(uniform, learned::DecodeMode::sample, &a);
  CHECK(first.unit_device == decoder.decode(uniform, learned::DecodeMode::sample, &b).unit_device);
  CHECK(first.unit_device != decoder.decode(uniform, learned::DecodeMode::sample, &c).unit_device);
  check_valid(task, problem.expand(first.unit_device));

  std::vector<int32_t> window = first.unit_device;
  std::fill(window.begin() + 20, window.begin() + 40, -1);
  CHECK_THROWS_WITH(decoder.decode(uniform, learned::DecodeMode::follow, nullptr, window),
                    Catch::Contains("needs a random generator"));
  std::mt19937_64 d(9);
  const learned::Decisions repaired = decoder.decode(uniform, learned::DecodeMode::follow, &d, window);
  int32_t changed = 0;
  for (int32_t u = 0; u < problem.num_units(); ++u) {
    if (window[u] >= 0) CHECK(repaired.unit_device[u] == window[u]);
    else changed += repaired.unit_device[u] != first.unit_device[u];
  }
  CHECK(changed > 5);  // uniform draws over 4 devices move most of the 20

  // Joining and selecting rows keeps each row's unit, choice, features and mask together.
  const learned::Decisions joined = learned::concat_decisions(std::vector{first, repaired});
  REQUIRE(joined.rows() == first.rows() + repaired.rows());
  const std::vector<int32_t> rows = {static_cast<int32_t>(first.rows()), 0};
  const learned::Decisions picked = learned::select_decisions(joined, rows);
  CHECK(picked.unit == std::vector{repaired.unit[0], first.unit[0]});
  CHECK(picked.choice == std::vector{repaired.choice[0], first.choice[0]});
  CHECK(picked.features.topRows(4) == repaired.features.topRows(4));
  CHECK(picked.features.bottomRows(4) == first.features.topRows(4));
  CHECK_THROWS_AS(learned::select_decisions(joined, std::vector<int32_t>{static_cast<int32_t>(joined.rows())}), Error);
}
