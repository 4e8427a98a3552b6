// Schedule-aware decoding: a learned policy places the units one after the other inside HEFT's list
// schedule (ops by decreasing upward rank, insertion into idle gaps), scoring each device from what the
// partial schedule says about it: when the unit's first op would start and finish there, how full its
// memory and how loaded it is, and how much of the unit's traffic goes to units already there. This is
// DOPPLER's and GiPH's lesson (a device-scoring policy with schedule and critical-path features): the
// decision sees where its neighbours went, which a single-shot policy with independent per-unit choices
// cannot. A policy that always picks the earliest finish is HEFT; the learned one may do otherwise.
//
// A decode records every decision (unit, features of each device, allowed devices, choice), so the
// log-probabilities of the same decisions can be recomputed on the tape in one batched pass.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include "policy/classic/list_scheduling.h"
#include "policy/learned/problem.h"

namespace placelab::learned {

/**
 * Columns of a decision's features, one row per device (docs/learned.md, "Schedule-aware decoding"):
 * 0 log1p((finish there - earliest finish) / unit time), 1 (finish there - earliest finish) / earliest
 * finish (at most 4), 2 whether it is the earliest finish, 3 log1p((start there - earliest start) / unit
 * time), 4 log(unit time there / mean unit time), 5 memory there after placing / capacity (at most 4),
 * 6 busy time there / mean busy time over devices (at most 4), 7 share of the unit's traffic with placed
 * units that is there, 8 whether its heaviest placed neighbour is there, 9 fraction of units placed,
 * 10 log1p(idle-network seconds to bring the unit's inputs from placed units there / unit time), 11 the
 * transfer seconds its links have carried so far / the earliest finish (at most 4): HEFT's estimates assume
 * an idle network; these let the policy see what its choices cost the network.
 */
inline constexpr int kDecisionFeatures = 12;

/** How a decode takes its decisions. */
enum class DecodeMode {
  sample,  // draw from the policy's distribution (rollouts)
  greedy,  // the most likely device (ties: lowest index)
  follow   // the device a given unit placement says (imitation: the decisions that lead to it); where it
           // says -1, a draw as in `sample` (search: re-placing part of a placement)
};

/** The decisions of one decode, enough to recompute their log-probabilities on the tape. */
struct Decisions {
  int32_t devices = 0;
  std::vector<int32_t> unit;          // R rows: the unit decided, in decode order
  MatrixF features;                   // [R * devices, kDecisionFeatures], row r * devices + d
  Mask allowed;                       // [R, devices]: the devices the unit could go to
  std::vector<int32_t> choice;        // R: the device taken
  std::vector<double> logp;           // R: its log-probability when decoded
  std::vector<int32_t> unit_device;   // every unit's device (forced ones included)
  int64_t rows() const { return static_cast<int64_t>(unit.size()); }
};

/**
 * The policy's logits for placing `unit`, one per device, from `features` ([devices, kDecisionFeatures],
 * row-major); entries of devices the unit may not use are ignored. Called from one thread per decode.
 */
using DecisionScorer = std::function<void(int32_t unit, std::span<const float> features, std::span<float> logits)>;

/** The rows of several decodes as one, in order (unit_device is left empty: it is per decode). */
Decisions concat_decisions(std::span<const Decisions> parts);
/** Rows `rows` of `decisions` (in that order; unit_device is left empty). */
Decisions select_decisions(const Decisions& decisions, std::span<const int32_t> rows);

class ScheduleDecoder {
 public:
  /** Builds the op-level schedule problem and the units' traffic lists; `problem` must outlive it. */
  explicit ScheduleDecoder(const Problem& problem);

  /**
   * Schedules every op, letting `scorer` decide each unit that has a choice of device. `rng` is needed
   * by DecodeMode::sample, `follow` (a device per unit, allowed for it) by DecodeMode::follow.
   * Thread-safe: decodes share nothing but this read-only object.
   */
  Decisions decode(const DecisionScorer& scorer, DecodeMode mode, std::mt19937_64* rng = nullptr,
                   std::span<const int32_t> follow = {}) const;
  /**
   * The decisions that lead to the unit placement `units` (features depend only on the choices made, not
   * on the policy, so these serve any policy as imitation targets; their logp are those of uniform logits).
   */
  Decisions follow(std::span<const int32_t> units) const;

 private:
  const Problem* problem_;
  policy::ScheduleProblem schedule_;
  // Per unit, the other units it exchanges tensors with and the bytes (both directions), and the units its
  // ops read from and the bytes (inputs only): CSRs.
  std::vector<int32_t> traffic_offset_, traffic_unit_, input_offset_, input_unit_;
  std::vector<double> traffic_bytes_, input_bytes_;
  std::vector<double> capacity_;  // per device; 0 when unknown or unlimited
};

}  // namespace placelab::learned
