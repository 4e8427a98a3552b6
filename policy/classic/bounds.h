// Lower bounds of the step time under the simulator's own semantics (docs/simulator.md): for every placement
// of a graph's units that fits in memory (placelab compare's "bound"), and for every completion of a partial
// placement (the exact placer's branch and bound). Each part relaxes some of the engine's rules, and
// bounds.cpp argues beside its code why the engine can never beat it:
//   path   - an op starts once every input has ended and, across devices, crossed an idle network: the
//            longest path, each op on a device it may use, paying a transfer where a cut cannot be avoided;
//   cut    - a part of the graph joined by data edges that no device holds alone is split: some data edge of
//            it crosses devices, and the longest path through that edge pays the transfer;
//   device - a device runs its ops one at a time, each after its earliest start (head) and followed by the
//            longest path after it (tail): the preemptive one-machine relaxation (Jackson's schedule);
//   link   - a link channel carries one transfer at a time (FIFO) or shares its bandwidth: the same
//            relaxation for the transfers between placed ops, each after its producer, before its consumers;
//   work   - the units' time spread over the devices, no device holding more resident bytes than its
//            capacity: the dual of the fractional assignment LP, and water-filling of what is not placed;
//   memory - a device whose resident bytes plus one op's working set (output, scratch, inputs) exceed its
//            capacity is out of memory, and so is one that holds, while an op runs, the outputs that ops before
//            it keep for consumers after it on their device (a training step's activations): such a partial
//            placement has no completion that fits.
// A bound holds to a relative 1e-9 (the engine adds times in another order, and in clock units).
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/classic/units.h"
#include "sim/engine.h"

namespace placelab::policy {

/** The parts of a bound; bound_s is the largest, +inf when no placement (or completion) fits in memory. */
struct BoundParts {
  double path_s = 0;    // longest path with transfers a cut must make
  double cut_s = 0;     // the cheapest path through a transfer, where memory splits a connected part of the graph
  double device_s = 0;  // busiest device's one-machine relaxation (placed ops only)
  double work_s = 0;    // work spread over the devices within their memory
  double link_s = 0;    // busiest link channel's one-machine relaxation (transfers between placed ops only)
  double bound_s = 0;
  bool fits = true;     // false: memory alone rules every placement (completion) out
};

/** Knobs of StepBound. */
struct StepBoundOptions {
  /** Count memory (capacities rule placements out); off: a bound of every placement, out of memory or not. */
  bool memory = true;
  /**
   * Pool devices with equal op times, kind, capacity and gap into one column of the path tables (their
   * transfers costed at the cheapest pair): needed on clusters of many devices, weaker where links differ.
   * Only for bounds of whole placements (partial placements need one column per device).
   */
  bool pool_devices = false;
  /** Largest fractional-assignment LP (variables) solved over units for the work part; beyond, over buckets of alike units. */
  int64_t max_lp_variables = 20'000;
};

/**
 * Tables for lower bounds of the step time of `units`' placements. partial() reuses scratch: one
 * StepBound per thread. `units` (and its simulator) must outlive it.
 */
class StepBound {
 public:
  explicit StepBound(const Units& units, StepBoundOptions options = {});

  const Units& units() const { return *units_; }
  /** Whether unit `u` may run on device `d`: its pins, and its resident bytes plus each op's working set fit. */
  bool allowed(int32_t u, int32_t d) const { return allowed_[static_cast<size_t>(u) * devices_ + d] != 0; }
  /** The device a unit must take when only one allows it, else -1. */
  int32_t forced_device(int32_t u) const { return forced_[u]; }
  /**
   * Per device, its class of interchangeable devices (numbered by first device): swapping two devices of a
   * class changes none of the data these bounds read (op times, kind, capacity, gap, the latency and
   * bandwidth of every route to and from them), so a bound is the same for a placement and its swap.
   */
  std::span<const int32_t> symmetry_class() const { return symmetry_class_; }

  /**
   * A bound of the step time of every completion of `unit_device` (one entry per unit, -1: not placed yet;
   * forced units are placed whatever it says) that fits in memory. With a finite `cutoff_s` it speaks only
   * of completions faster than the cutoff: devices through which every completion of a unit reaches the
   * cutoff are dropped from its domain (a CP solver's propagation), and bound_s >= cutoff_s means that no
   * completion is faster. `start_domains` (one mask per unit), when given, are domains already known for a
   * cutoff no lower (a parent node's): propagation starts from them. Not thread-safe (scratch).
   */
  BoundParts partial(std::span<const int32_t> unit_device, double cutoff_s = std::numeric_limits<double>::infinity(),
                     std::span<const uint64_t> start_domains = {});
  /** After partial(): the domains, one mask per unit (empty on clusters of more than 64 devices). */
  std::span<const uint64_t> domains() const { return domain_; }
  /**
   * After partial(): the devices unit `u` may still take, one bit per device (bit d: device d), in completions
   * faster than its cutoff that fit in memory. On clusters of more than 64 devices, 0 (not kept).
   */
  uint64_t domain(int32_t u) const { return domain_.empty() ? 0 : domain_[u]; }
  /** The bound of every placement: partial() with no unit placed. */
  BoundParts whole();

 private:
  struct Job {  // one op, or one transfer on a channel: release, duration, time after it
    double head, time, tail;
  };
  /** The least makespan plus tail of `jobs` on one machine, pre-emption allowed (Jackson's schedule); sorts them. */
  static double one_machine(std::vector<Job>& jobs);
  void build_columns(const sim::Simulator& sim);
  void build_symmetry(const sim::Simulator& sim);
  void solve_work_lp(const sim::Simulator& sim);
  bool memory_fits();
  bool filter_domains(double cutoff_s, bool& changed);
  void forward_paths();
  void backward_paths();
  double device_bound(int32_t d);
  double link_bound();
  double cut_bound();
  void build_components();
  void build_live(const graphs::Graph& graph);
  void build_links(const sim::Simulator& sim);
  double unit_term(int32_t u, int32_t d) const;
  /** Whether unit u may still take device d: its domain, or without domains the devices that allow it. */
  bool in_domain(int32_t u, int32_t d) const { return domain_.empty() ? allowed(u, d) : ((domain_[u] >> d) & 1) != 0; }
  double work_bound();
  double comm_lb(int32_t edge_slot, int32_t from_col, int32_t to_col) const;

  const Units* units_;
  StepBoundOptions options_;
  int32_t devices_ = 0, cols_ = 0, n_ = 0;
  std::vector<uint8_t> allowed_;        // units x devices
  std::vector<uint64_t> allowed_mask_;  // per unit, when there are at most 64 devices
  std::vector<int32_t> forced_;         // per unit
  std::vector<int32_t> symmetry_class_;  // per device
  std::vector<int32_t> col_of_;         // per device: its column in the path tables
  std::vector<double> col_time_;        // ops x columns (+inf: not allowed)
  std::vector<double> col_latency_s_, col_inv_bandwidth_;  // columns x columns: cheapest distinct pair
  // In-edges per op (CSR over the topological order's consumers): producer, bytes, measured time (NaN: none).
  std::vector<int32_t> in_off_, in_src_;
  std::vector<double> in_bytes_, in_comm_s_;
  std::vector<int32_t> out_off_, out_slot_;  // per op: its out-edges as in-edge slots
  std::vector<int32_t> out_dst_, in_dst_;
  // Parts of the unit graph joined by data edges (more than one unit): units, their edges as in-edge slots,
  // their parameters and largest working set.
  struct Component {
    std::vector<int32_t> units, slots;
    int64_t params = 0, working = 0, held = 0;  // held: parameters and what is alive at the LP's op
  };
  std::vector<Component> components_;
  std::vector<graphs::OpId> topo_;
  std::vector<double> gap_s_, capacity_;  // per device
  // Links (one column per device, FIFO or shared links, per destination): per device pair its route's channels,
  // latency, bottleneck bandwidth, whether a link has an efficiency curve; per channel its bandwidth and hold.
  bool links_ = false, share_bandwidth_ = false;
  std::vector<int32_t> route_off_, route_ch_;
  std::vector<double> pair_latency_s_, pair_bandwidth_;
  std::vector<uint8_t> pair_curved_;
  std::vector<double> channel_bandwidth_, channel_hold_s_;
  std::vector<std::vector<Job>> channel_jobs_;
  std::vector<int32_t> dest_stamp_;
  std::vector<double> dest_bytes_, dest_tail_s_, dest_measured_s_;
  // Memory in whole bytes, as the engine counts it.
  std::vector<int64_t> unit_params_, unit_working_, self_mem_, out_mem_;
  std::vector<int32_t> mem_in_off_, mem_in_src_;  // per op: distinct data producers
  std::vector<int64_t> mem_in_bytes_;             // largest edge from that producer
  // Outputs alive while an op runs: per op x (CSR), the units whose ops before x keep an output for a consumer
  // of their own unit after x, with those bytes; per unit, the most it keeps alive at one op, and what it keeps
  // at the op where all units keep the most (the LP's memory rows count it with the parameters).
  std::vector<int32_t> live_off_, live_unit_;
  std::vector<int64_t> live_bytes_, unit_live_max_, unit_held_, working_of_;
  // The work LP's dual: per device, the weight of its load and the price of its memory (time units per byte).
  std::vector<double> load_weight_, memory_price_;
  double memory_offset_s_ = 0;  // sum over devices of price x capacity
  bool lp_fits_ = true;
  // Scratch of partial(): units' domains, the device of each unit with one left (-1: several), per op.
  std::vector<uint64_t> domain_;
  std::vector<uint8_t> col_ok_;  // ops x columns: the op may run there
  std::vector<int32_t> op_device_, unit_eff_;
  std::vector<double> head_, tail_;  // ops x columns: earliest end L, and time from start to the step's end Q
  std::vector<int64_t> resident_, working_, held_;
  std::vector<double> placed_, load_, term_;
  std::vector<Job> jobs_;
};

/** The bound of every placement of `simulator`'s graph that fits in memory (columns pooled on large clusters). */
BoundParts lower_bound(const sim::Simulator& simulator);

/** The parts as JSON ({"bound_s", "path_s", "device_s", "work_s", "fits"}; an infinite bound is null). */
nlohmann::json bound_to_json(const BoundParts& parts);

}  // namespace placelab::policy
