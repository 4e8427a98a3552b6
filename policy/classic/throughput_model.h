// The max-load model of Tarnawski et al. as the throughput placers see it (internal to policy/classic):
// the forward DAG of op groups (colour classes contracted, backward ops riding with their forward ops,
// cycles fused), the device classes of the cluster (interchangeable devices), per-group times, memory
// (parameters and the activations and gradients a training step keeps across phases)
// and the communication hyperedges. A set S of groups placed on one device of class t has load
// sum of time(v, t) over S + (t pays communication ? the cost of every hyperedge S cuts : 0), exactly
// sim::max_load's device load when every out-edge of an op has the same cost (msr inputs), and never
// less than it otherwise (a hyperedge costs its op's most expensive edge).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "graphs/graph.h"
#include "sim/engine.h"

namespace placelab::policy {

class ThroughputModel {
 public:
  static constexpr int32_t kMaxClasses = 8;

  /** Interchangeable devices: same kind, capacity and op times. */
  struct DeviceClass {
    std::string kind;
    std::vector<int32_t> devices;
    bool pays_comm = true;  // devices of kind "cpu" pay no communication (max-load model)
    double capacity_bytes = 0;
  };

  /**
   * Builds the model; with `linearize`, the DAG is replaced by a chain in a DFS topological order, after
   * fusing biconnected blocks when `fuse_biconnected` (PipeDream as Tarnawski et al. ran it).
   */
  ThroughputModel(const sim::Simulator& simulator, bool linearize, bool fuse_biconnected);

  const graphs::Graph& graph() const { return *graph_; }
  int32_t num_groups() const { return static_cast<int32_t>(members_.size()); }
  std::span<const graphs::OpId> members(int32_t v) const { return members_[v]; }
  int32_t group_of(graphs::OpId op) const { return group_of_[op]; }
  std::span<const int32_t> preds(int32_t v) const { return preds_[v]; }
  std::span<const int32_t> succs(int32_t v) const { return succs_[v]; }

  int32_t num_classes() const { return static_cast<int32_t>(classes_.size()); }
  const DeviceClass& device_class(int32_t t) const { return classes_[t]; }
  int32_t class_of_device(int32_t d) const { return class_of_device_[d]; }

  double time_s(int32_t v, int32_t t) const { return time_s_[static_cast<size_t>(v) * classes_.size() + t]; }
  bool forbidden(int32_t v, int32_t t) const { return forbidden_[static_cast<size_t>(v) * classes_.size() + t]; }
  double memory_bytes(int32_t v) const { return memory_bytes_[v]; }

  int32_t num_hyperedges() const { return static_cast<int32_t>(hyperedge_cost_s_.size()); }
  std::span<const int32_t> hyperedges_of(int32_t v) const { return hyperedges_of_[v]; }
  std::span<const int32_t> hyperedge_members(int32_t h) const { return hyperedge_members_[h]; }
  int32_t hyperedge_size(int32_t h) const { return static_cast<int32_t>(hyperedge_members_[h].size()); }
  double hyperedge_cost_s(int32_t h) const { return hyperedge_cost_s_[h]; }

  /** An estimate from below of the optimal max-load (a bound when op times are proportional across classes). */
  double load_floor_s() const { return floor_s_; }
  /** No set has a larger load on any class: the largest total time plus every hyperedge's cost. */
  double load_ceiling_s() const { return ceiling_s_; }

 private:
  const graphs::Graph* graph_;
  std::vector<std::vector<graphs::OpId>> members_;
  std::vector<int32_t> group_of_;
  std::vector<std::vector<int32_t>> preds_, succs_;
  std::vector<DeviceClass> classes_;
  std::vector<int32_t> class_of_device_;
  std::vector<double> time_s_;
  std::vector<char> forbidden_;
  std::vector<double> memory_bytes_;
  std::vector<std::vector<int32_t>> hyperedges_of_, hyperedge_members_;
  std::vector<double> hyperedge_cost_s_;
  double floor_s_ = 0, ceiling_s_ = 0;
};

}  // namespace placelab::policy
