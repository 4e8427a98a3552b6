// What the classic placers share: the graph's units (one per colocation class, an op alone otherwise, so a
// placer that places units can never split a class), each unit's time on every device it may run on, its
// memory, and the communication costs of the cluster; plus option readers and the factories of every
// classic placer. Units are not contracted into a graph: in training graphs a forward op and its gradient
// share a class, so the classes of a chain form cycles and contracting them would merge everything.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/placer.h"
#include "sim/engine.h"

namespace placelab::policy {

inline constexpr double kNotAllowed = std::numeric_limits<double>::infinity();

/** The graph's colocation classes with their costs per device; placers place units, then expand. */
class Units {
 public:
  /** Throws placelab::Error naming an op whose class has no device of its pinned kinds in the cluster. */
  explicit Units(const sim::Simulator& simulator);

  const sim::Simulator& simulator() const { return *sim_; }
  /** Units are numbered in the topological order of their first ops. */
  int32_t num_units() const { return static_cast<int32_t>(member_offset_.size()) - 1; }
  int32_t num_devices() const { return devices_; }
  /** Seconds unit `u` runs on device `d` (the sum of its ops' times); kNotAllowed off its pinned kinds. */
  double time_s(int32_t u, int32_t d) const { return time_s_[static_cast<size_t>(u) * devices_ + d]; }
  bool allowed(int32_t u, int32_t d) const { return time_s(u, d) != kNotAllowed; }
  /** Mean time of `u` over the devices it may run on (HEFT's w-bar). */
  double mean_time_s(int32_t u) const { return mean_time_s_[u]; }
  /** Bytes `u` holds on its device: parameters + outputs + scratch of its ops (an upper bound of its share). */
  double memory_bytes(int32_t u) const { return memory_bytes_[u]; }
  /** Ops of unit `u`. */
  std::span<const graphs::OpId> ops(int32_t u) const {
    return {members_.data() + member_offset_[u], static_cast<size_t>(member_offset_[u + 1] - member_offset_[u])};
  }
  /** Unit of op `op`. */
  int32_t unit_of(graphs::OpId op) const { return unit_of_[op]; }
  /** Idle-network transfer time of `bytes` from device p to q (0 when p == q). */
  double comm_s(int32_t p, int32_t q, double bytes) const;
  /** Mean transfer time of `bytes` over ordered pairs of distinct devices (HEFT's c-bar); 0 on one device. */
  double mean_comm_s(double bytes) const { return bytes > 0 ? mean_latency_s_ + bytes * mean_inv_bandwidth_ : 0; }
  /** Devices `u` may run on, fastest first (ties by index). */
  std::vector<int32_t> allowed_devices(int32_t u) const;
  /** Op placement from a unit placement. */
  std::vector<int32_t> expand(std::span<const int32_t> unit_device) const;

 private:
  const sim::Simulator* sim_;
  std::vector<int32_t> unit_of_;
  int32_t devices_ = 0;
  std::vector<double> time_s_, mean_time_s_, memory_bytes_;
  std::vector<int32_t> member_offset_;
  std::vector<graphs::OpId> members_;
  double mean_latency_s_ = 0, mean_inv_bandwidth_ = 0;
};

struct ScheduleProblem;  // list_scheduling.h
/**
 * The op graph as a list-scheduling problem (list_placers.cpp): one task per op, grouped by unit, the
 * simulator's op times, the cluster's idle-network transfer times, and with `memory` each op's bytes and
 * the devices' capacities. It refers to `units`, which must outlive it.
 */
ScheduleProblem schedule_problem(const Units& units, bool memory);

/** Throws the error for `op`, whose pin no device of `cluster` has: add such a device or remove the pin. */
[[noreturn]] void fail_unplaceable_pin(const graphs::Graph& graph, const sim::Cluster& cluster, graphs::OpId op);

/** The largest count option (steps, rollouts, layers...): anything above is a typo, and it fits int32_t. */
inline constexpr int64_t kMaxCountOption = std::numeric_limits<int32_t>::max();
/** The largest width of a learned policy's layers (hidden, ff, heads...): 4096^2 floats is 64 MiB a matrix. */
inline constexpr int64_t kMaxWidthOption = 4096;

/**
 * Reads an integer option `key` in [0, max_value] (default `fallback`); throws naming the placer and key.
 */
int64_t option_int(std::string_view placer, const nlohmann::json& options, std::string_view key, int64_t fallback,
                   int64_t max_value = kMaxCountOption);
/** Reads a finite number option `key` >= `min_value` (default `fallback`). */
double option_number(std::string_view placer, const nlohmann::json& options, std::string_view key, double fallback,
                     double min_value = 0);

/** Reads a true/false option `key` (default `fallback`); throws naming the placer and key. */
bool option_bool(std::string_view placer, const nlohmann::json& options, std::string_view key, bool fallback);

/** An index in [0, n) from `rng`, the same on every standard library. */
inline int32_t uniform_index(std::mt19937_64& rng, int32_t n) {
  return static_cast<int32_t>(rng() % static_cast<uint64_t>(n));
}
/** A number in [0, 1) from `rng`, the same on every standard library. */
inline double uniform_unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

/**
 * Splits items (in order) with weights `weight_s` into contiguous blocks, one per entry of `share`
 * (relative capacities): item i goes to the block whose share interval holds the middle of its weight.
 */
std::vector<int32_t> contiguous_blocks(std::span<const double> weight_s, std::span<const double> share);

/** Relative speed of each device: 1 / (time of the whole graph on it); pinned units count on their fastest. */
std::vector<double> device_speeds(const Units& units);

// Factories of the classic placers (rows of registry.cpp).
std::unique_ptr<Placer> make_single_device_placer();
std::unique_ptr<Placer> make_round_robin_placer();
std::unique_ptr<Placer> make_random_placer();
std::unique_ptr<Placer> make_human_expert_placer();
std::unique_ptr<Placer> make_metis_placer();
std::unique_ptr<Placer> make_scotch_placer();
std::unique_ptr<Placer> make_heft_placer();
std::unique_ptr<Placer> make_m_topo_placer();
std::unique_ptr<Placer> make_m_etf_placer();
std::unique_ptr<Placer> make_m_sct_placer();
std::unique_ptr<Placer> make_annealing_placer();

}  // namespace placelab::policy
