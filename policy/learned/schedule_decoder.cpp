// Schedule-aware decoding (see schedule_decoder.h): HEFT's list schedule with a policy choosing devices.
#include "policy/learned/schedule_decoder.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "graphs/error.h"
#include "policy/classic/units.h"
#include "policy/rl/pg.h"

namespace placelab::learned {

ScheduleDecoder::ScheduleDecoder(const Problem& problem)
    : problem_(&problem), schedule_(policy::schedule_problem(problem.units(), false)) {
  const policy::Units& units = problem.units();
  const graphs::Graph& g = problem.simulator().graph();
  const int32_t n = units.num_units();
  // Bytes between units over op edges, both directions (traffic) and inputs only, summed per neighbour.
  std::vector<std::vector<std::pair<int32_t, double>>> both(n), inputs(n);
  for (graphs::EdgeId e = 0; e < g.num_edges(); ++e) {
    const int32_t a = units.unit_of(g.edge_src(e)), b = units.unit_of(g.edge_dst(e));
    if (a == b) continue;
    both[a].emplace_back(b, g.edge_bytes(e));
    both[b].emplace_back(a, g.edge_bytes(e));
    inputs[b].emplace_back(a, g.edge_bytes(e));
  }
  const auto to_csr = [](std::vector<std::vector<std::pair<int32_t, double>>>& lists, std::vector<int32_t>& offset,
                         std::vector<int32_t>& unit, std::vector<double>& bytes) {
    offset.assign(1, 0);
    for (auto& list : lists) {
      std::sort(list.begin(), list.end());
      for (size_t i = 0; i < list.size(); ++i) {
        if (i > 0 && list[i].first == list[i - 1].first) {
          bytes.back() += list[i].second;
        } else {
          unit.push_back(list[i].first);
          bytes.push_back(list[i].second);
        }
      }
      offset.push_back(static_cast<int32_t>(unit.size()));
    }
  };
  to_csr(both, traffic_offset_, traffic_unit_, traffic_bytes_);
  to_csr(inputs, input_offset_, input_unit_, input_bytes_);
  for (const sim::Device& d : problem.simulator().cluster().devices())
    capacity_.push_back(std::isfinite(d.memory_bytes) && d.memory_bytes > 0 ? d.memory_bytes : 0.0);
}

Decisions ScheduleDecoder::decode(const DecisionScorer& scorer, DecodeMode mode, std::mt19937_64* rng,
                                  std::span<const int32_t> follow) const {
  const Problem& problem = *problem_;
  const policy::Units& units = problem.units();
  const int32_t n = problem.num_units(), devices = problem.num_devices();
  if (mode == DecodeMode::follow && follow.size() != static_cast<size_t>(n)) {
    throw Error(fmt::format("schedule decoder: the placement to follow has {} units, the problem {}", follow.size(), n));
  }
  const bool draws = mode == DecodeMode::sample ||
                     (mode == DecodeMode::follow && std::any_of(follow.begin(), follow.end(), [](int32_t d) { return d < 0; }));
  if (draws && rng == nullptr) throw Error("schedule decoder: sampling needs a random generator");
  constexpr int F = kDecisionFeatures;
  const auto D = static_cast<size_t>(devices);
  Decisions out;
  out.devices = devices;
  out.unit_device.assign(static_cast<size_t>(n), -1);
  std::vector<float> rows, features(D * F), logits(D);
  std::vector<bool> allowed_rows;
  std::vector<double> used(D, 0.0), busy(D, 0.0), traffic(D), input_s(D), link_s(D, 0.0);
  double busy_total = 0;
  int32_t placed = 0;
  const std::unique_ptr<bool[]> keep(new bool[D]);

  const auto choose = [&](int32_t task, std::span<const policy::ProcOption> options) -> size_t {
    const int32_t u = units.unit_of(task);
    size_t pick = 0;
    if (options.size() > 1) {
      double min_finish = std::numeric_limits<double>::infinity(), min_start = min_finish;
      size_t earliest = 0;
      for (size_t i = 0; i < options.size(); ++i) {
        if (options[i].finish_s < min_finish) min_finish = options[i].finish_s, earliest = i;
        min_start = std::min(min_start, options[i].start_s);
      }
      // Traffic with units already placed, per device, and where the heaviest such neighbour is.
      std::fill(traffic.begin(), traffic.end(), 0.0);
      double traffic_total = 0, heaviest = 0;
      int32_t heaviest_device = -1;
      for (int32_t k = traffic_offset_[u]; k < traffic_offset_[u + 1]; ++k) {
        const int32_t d = out.unit_device[static_cast<size_t>(traffic_unit_[k])];
        if (d < 0) continue;
        traffic[d] += traffic_bytes_[k];
        traffic_total += traffic_bytes_[k];
        if (traffic_bytes_[k] > heaviest) heaviest = traffic_bytes_[k], heaviest_device = d;
      }
      // Idle-network seconds to bring the unit's inputs from placed units to each device.
      std::fill(input_s.begin(), input_s.end(), 0.0);
      for (int32_t k = input_offset_[u]; k < input_offset_[u + 1]; ++k) {
        const int32_t q = out.unit_device[static_cast<size_t>(input_unit_[k])];
        if (q < 0) continue;
        for (const policy::ProcOption& o : options) input_s[o.proc] += units.comm_s(q, o.proc, input_bytes_[k]);
      }
      const double scale = std::max(units.mean_time_s(u), 1e-9), memory = units.memory_bytes(u);
      std::fill(features.begin(), features.end(), 0.f);
      std::fill(keep.get(), keep.get() + D, false);
      for (size_t i = 0; i < options.size(); ++i) {
        const int32_t d = options[i].proc;
        keep[d] = true;
        float* f = &features[static_cast<size_t>(d) * F];
        const double late = options[i].finish_s - min_finish;
        f[0] = static_cast<float>(std::log1p(late / scale));
        f[1] = static_cast<float>(std::min(4.0, late / std::max(min_finish, 1e-12)));
        f[2] = i == earliest ? 1.f : 0.f;
        f[3] = static_cast<float>(std::log1p((options[i].start_s - min_start) / scale));
        f[4] = problem.pair_x()(static_cast<autodiff::Index>(u) * devices + d, 0);
        f[5] = capacity_[d] > 0 ? static_cast<float>(std::min(4.0, (used[d] + memory) / capacity_[d])) : 0.f;
        f[6] = busy_total > 0 ? static_cast<float>(std::min(4.0, busy[d] * devices / busy_total)) : 0.f;
        f[7] = traffic_total > 0 ? static_cast<float>(traffic[d] / traffic_total) : 0.f;
        f[8] = d == heaviest_device ? 1.f : 0.f;
        f[9] = static_cast<float>(placed) / static_cast<float>(n);
        f[10] = static_cast<float>(std::log1p(input_s[d] / scale));
        f[11] = static_cast<float>(std::min(4.0, link_s[d] / std::max(min_finish, 1e-12)));
      }
      scorer(u, features, logits);
      rl::Draw draw{};
      const bool free = mode == DecodeMode::sample || (mode == DecodeMode::follow && follow[static_cast<size_t>(u)] < 0);
      if (free) {
        draw = rl::sample_row(logits, keep.get(), *rng);
      } else {
        draw = rl::argmax_row(logits, keep.get());
        if (mode == DecodeMode::follow) {
          const int32_t target = follow[static_cast<size_t>(u)];
          if (target >= devices || !keep[target]) {
            throw Error(fmt::format("schedule decoder: the placement to follow puts unit {} on device {}, which it "
                                    "may not use", u, target));
          }
          // argmax_row's logp is that of the top logit: shift it to the target's.
          draw.logp += static_cast<double>(logits[static_cast<size_t>(target)]) -
                       static_cast<double>(logits[static_cast<size_t>(draw.choice)]);
          draw.choice = target;
        }
      }
      for (size_t i = 0; i < options.size(); ++i)
        if (options[i].proc == draw.choice) pick = i;
      out.unit.push_back(u);
      out.choice.push_back(draw.choice);
      out.logp.push_back(draw.logp);
      rows.insert(rows.end(), features.begin(), features.end());
      allowed_rows.insert(allowed_rows.end(), keep.get(), keep.get() + D);
    }
    const int32_t d = options[pick].proc;
    if (mode == DecodeMode::follow && follow[static_cast<size_t>(u)] >= 0 && follow[static_cast<size_t>(u)] != d) {
      throw Error(fmt::format("schedule decoder: the placement to follow puts unit {} on device {}, which it may not "
                              "use", u, follow[static_cast<size_t>(u)]));
    }
    out.unit_device[static_cast<size_t>(u)] = d;
    for (int32_t k = input_offset_[u]; k < input_offset_[u + 1]; ++k) {  // the links its inputs now cross
      const int32_t q = out.unit_device[static_cast<size_t>(input_unit_[k])];
      if (q < 0 || q == d) continue;
      const double seconds = units.comm_s(q, d, input_bytes_[k]);
      link_s[q] += seconds;
      link_s[d] += seconds;
    }
    used[d] += units.memory_bytes(u);
    busy[d] += units.time_s(u, d);
    busy_total += units.time_s(u, d);
    ++placed;
    return pick;
  };
  policy::heft_schedule(schedule_, choose);

  const auto R = static_cast<autodiff::Index>(out.unit.size());
  out.features = Eigen::Map<const MatrixF>(rows.data(), R * devices, F);
  out.allowed.resize(R, devices);
  for (autodiff::Index r = 0; r < R; ++r)
    for (int32_t d = 0; d < devices; ++d) out.allowed(r, d) = allowed_rows[static_cast<size_t>(r * devices + d)];
  return out;
}

Decisions ScheduleDecoder::follow(std::span<const int32_t> units) const {
  const DecisionScorer uniform = [](int32_t, std::span<const float>, std::span<float> logits) {
    std::fill(logits.begin(), logits.end(), 0.f);
  };
  return decode(uniform, DecodeMode::follow, nullptr, units);
}

Decisions concat_decisions(std::span<const Decisions> parts) {
  Decisions out;
  if (parts.empty()) return out;
  out.devices = parts[0].devices;
  autodiff::Index rows = 0;
  for (const Decisions& p : parts) {
    if (p.devices != out.devices) throw Error("concat_decisions: decodes on different numbers of devices");
    rows += p.rows();
  }
  out.features.resize(rows * out.devices, kDecisionFeatures);
  out.allowed.resize(rows, out.devices);
  autodiff::Index at = 0;
  for (const Decisions& p : parts) {
    out.unit.insert(out.unit.end(), p.unit.begin(), p.unit.end());
    out.choice.insert(out.choice.end(), p.choice.begin(), p.choice.end());
    out.logp.insert(out.logp.end(), p.logp.begin(), p.logp.end());
    out.features.middleRows(at * out.devices, p.rows() * out.devices) = p.features;
    out.allowed.middleRows(at, p.rows()) = p.allowed;
    at += p.rows();
  }
  return out;
}

Decisions select_decisions(const Decisions& decisions, std::span<const int32_t> rows) {
  Decisions out;
  out.devices = decisions.devices;
  const auto D = static_cast<autodiff::Index>(decisions.devices);
  out.features.resize(static_cast<autodiff::Index>(rows.size()) * D, kDecisionFeatures);
  out.allowed.resize(static_cast<autodiff::Index>(rows.size()), D);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto r = static_cast<size_t>(rows[i]);
    if (r >= decisions.unit.size()) throw Error(fmt::format("select_decisions: row {} of {}", r, decisions.unit.size()));
    out.unit.push_back(decisions.unit[r]);
    out.choice.push_back(decisions.choice[r]);
    out.logp.push_back(decisions.logp[r]);
    const auto at = static_cast<autodiff::Index>(i);
    out.features.middleRows(at * D, D) = decisions.features.middleRows(static_cast<autodiff::Index>(r) * D, D);
    out.allowed.row(at) = decisions.allowed.row(static_cast<autodiff::Index>(r));
  }
  return out;
}

}  // namespace placelab::learned
