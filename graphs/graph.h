// The op-graph IR: an immutable dataflow graph of operations stored as struct-of-arrays with
// compressed adjacency (CSR) in both directions. Built once by GraphBuilder, which validates it
// (acyclic, no dangling ids, finite non-negative numbers, unique names); read many times by the
// simulator and the placers, so every accessor is O(1) and allocation-free.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace placelab::graphs {

using OpId = int32_t;
using EdgeId = int32_t;

/** Where an op sits in a training step. */
enum class Phase : uint8_t { forward, backward, update };

/** "forward", "backward" or "update". */
std::string_view phase_name(Phase phase);

/** Parses a phase name; throws placelab::Error naming `where` for anything else. */
Phase parse_phase(std::string_view name, std::string_view where);

inline constexpr int32_t kNoClass = -1;  // colocation class / layer of an unconstrained op
inline constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

/**
 * The matrix products an op computes, when known: `batch` independent products of an (m x k) matrix by a
 * (k x n) one, 2 batch m n k FLOPs. A convolution is its implicit GEMM: m = N Ho Wo, n = Cout / groups,
 * k = Cin / groups kh kw, batch = groups. The cost model and the replay use the shape (a skinny product
 * runs slower than a square one of the same FLOPs); all zero when the op has no such shape.
 */
struct GemmDims {
  int64_t batch = 0, m = 0, n = 0, k = 0;
  bool known() const { return batch > 0; }
  double flops() const {
    return 2.0 * static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  }
  bool operator==(const GemmDims&) const = default;
};

/** Largest dimension of a GemmDims (2^31 - 1): products of two fit int64 exactly. */
inline constexpr int64_t kMaxGemmDim = INT32_MAX;

/**
 * The square product of `flops` (at most 2^62): m = n, a multiple of 8 from 8 on (a ragged size runs slower
 * than the round ones calibration and real models use), k matching the FLOPs to within half a column;
 * all zero for no FLOPs. What the replay runs for a compute op without a known shape, and what a shape's
 * cost is measured against.
 */
GemmDims square_dims(double flops);

/** Everything known about one op, as handed to GraphBuilder::add_op. */
struct OpSpec {
  std::string name;
  std::string type;                 // "Conv2D", "MatMul", ...: free text, interned by the graph
  Phase phase = Phase::forward;
  double flops = 0;                 // floating-point operations of one execution
  double bytes_read = 0;            // memory traffic, for the roofline cost model
  double bytes_written = 0;
  double output_bytes = 0;          // bytes of the tensor it produces (live until its last consumer ends)
  double param_bytes = 0;           // resident bytes: weights, or optimizer state for update ops
  double temp_bytes = 0;            // scratch held only while the op runs
  int32_t colocation = kNoClass;    // ops of one class must share a device
  int32_t layer = kNoClass;         // model block it belongs to (expert rules, contiguous splits)
  std::string pinned_kind;          // device kind it must run on ("cpu"), empty for any
  GemmDims gemm;                    // its matrix products' shape, when it computes some
  /** Measured run time per device kind in seconds; overrides every cost model when present. */
  std::vector<std::pair<std::string, double>> measured_s;
};

/** A data (bytes > 0) or control (bytes == 0) dependency. */
struct EdgeSpec {
  OpId src = 0;
  OpId dst = 0;
  double bytes = 0;
  double comm_s = kUnknown;  // measured transfer time, when the source format gives one
};

/** Totals printed by `placelab graph --stats`. */
struct GraphStats {
  int64_t ops = 0;
  int64_t edges = 0;
  int64_t op_types = 0;
  int64_t forward_ops = 0, backward_ops = 0, update_ops = 0;
  int64_t colocation_classes = 0;
  int32_t depth = 0;  // ops on the longest path
  double flops = 0, bytes_read = 0, bytes_written = 0;
  double output_bytes = 0, param_bytes = 0, edge_bytes = 0;
};

class Graph {
 public:
  Graph() = default;

  const std::string& name() const { return name_; }
  int32_t num_ops() const { return static_cast<int32_t>(names_.size()); }
  int32_t num_edges() const { return static_cast<int32_t>(edge_src_.size()); }

  // --- ops ---
  const std::string& op_name(OpId op) const { return names_[op]; }
  int32_t op_type_id(OpId op) const { return type_id_[op]; }
  const std::string& op_type(OpId op) const { return type_names_[type_id_[op]]; }
  /** Distinct op types in first-seen order; op_type_id indexes this. */
  const std::vector<std::string>& type_names() const { return type_names_; }
  Phase phase(OpId op) const { return phase_[op]; }
  double flops(OpId op) const { return flops_[op]; }
  double bytes_read(OpId op) const { return bytes_read_[op]; }
  double bytes_written(OpId op) const { return bytes_written_[op]; }
  double output_bytes(OpId op) const { return output_bytes_[op]; }
  double param_bytes(OpId op) const { return param_bytes_[op]; }
  double temp_bytes(OpId op) const { return temp_bytes_[op]; }
  int32_t colocation(OpId op) const { return colocation_[op]; }
  int32_t layer(OpId op) const { return layer_[op]; }
  /** Shape of the op's matrix products (all zero when unknown). */
  const GemmDims& gemm(OpId op) const { return gemm_[op]; }
  /** Whether any op has a known GemmDims. */
  bool has_gemm_dims() const { return has_gemm_dims_; }
  /** Device kind the op is pinned to, or "" when any kind may run it. */
  const std::string& pinned_kind(OpId op) const { return pinned_kinds_[pinned_id_[op]]; }

  /** Device kinds that have measured times in this graph, in first-seen order. */
  const std::vector<std::string>& measured_kinds() const { return measured_kinds_; }
  /** Index of `kind` in measured_kinds(), or -1. */
  int32_t measured_kind_index(std::string_view kind) const;
  /** Measured seconds of `op` on measured kind `k`, NaN when not measured. */
  double measured_s(OpId op, int32_t k) const {
    return measured_[static_cast<size_t>(op) * measured_kinds_.size() + k];
  }

  /** Op with this name, or -1. */
  OpId find_op(std::string_view name) const;

  // --- edges ---
  OpId edge_src(EdgeId e) const { return edge_src_[e]; }
  OpId edge_dst(EdgeId e) const { return edge_dst_[e]; }
  double edge_bytes(EdgeId e) const { return edge_bytes_[e]; }
  double edge_comm_s(EdgeId e) const { return edge_comm_s_[e]; }
  /** A control edge orders two ops and moves nothing: 0 bytes and no measured transfer time. */
  bool is_control_edge(EdgeId e) const { return edge_bytes_[e] <= 0 && std::isnan(edge_comm_s_[e]); }
  bool has_edge_comm() const { return has_edge_comm_; }

  // --- adjacency (CSR), in edge-insertion order per op ---
  std::span<const EdgeId> out_edges(OpId op) const { return slice(out_edge_, out_offset_, op); }
  std::span<const EdgeId> in_edges(OpId op) const { return slice(in_edge_, in_offset_, op); }
  std::span<const OpId> successors(OpId op) const { return slice(out_op_, out_offset_, op); }
  std::span<const OpId> predecessors(OpId op) const { return slice(in_op_, in_offset_, op); }
  int32_t out_degree(OpId op) const { return out_offset_[op + 1] - out_offset_[op]; }
  int32_t in_degree(OpId op) const { return in_offset_[op + 1] - in_offset_[op]; }

  // --- order ---
  /** All ops, every producer before its consumers; ties by op id (Kahn with a min-heap). */
  std::span<const OpId> topo_order() const { return topo_order_; }
  /** Position of `op` in topo_order(). */
  int32_t topo_rank(OpId op) const { return topo_rank_[op]; }
  /** Longest path (in ops) from any source to `op`, 0 for sources. */
  int32_t depth(OpId op) const { return depth_[op]; }

  GraphStats stats() const;

  /** Spec of one op, as it would be handed back to a GraphBuilder. */
  OpSpec op_spec(OpId op) const;
  /** Spec of one edge. */
  EdgeSpec edge_spec(EdgeId e) const;

 private:
  friend class GraphBuilder;

  template <class T>
  static std::span<const T> slice(const std::vector<T>& v, const std::vector<int32_t>& off, OpId op) {
    return {v.data() + off[op], static_cast<size_t>(off[op + 1] - off[op])};
  }

  std::string name_;
  std::vector<std::string> names_;
  std::vector<int32_t> type_id_;
  std::vector<std::string> type_names_;
  std::vector<Phase> phase_;
  std::vector<double> flops_, bytes_read_, bytes_written_, output_bytes_, param_bytes_, temp_bytes_;
  std::vector<int32_t> colocation_, layer_;
  std::vector<GemmDims> gemm_;
  bool has_gemm_dims_ = false;
  std::vector<int32_t> pinned_id_;
  std::vector<std::string> pinned_kinds_{""};  // index 0 is "no pin"
  std::vector<std::string> measured_kinds_;
  std::vector<double> measured_;  // ops x measured_kinds_, row-major, NaN = unknown
  std::unordered_map<std::string, OpId> by_name_;

  std::vector<OpId> edge_src_, edge_dst_;
  std::vector<double> edge_bytes_, edge_comm_s_;
  bool has_edge_comm_ = false;

  std::vector<int32_t> out_offset_, in_offset_;
  std::vector<EdgeId> out_edge_, in_edge_;
  std::vector<OpId> out_op_, in_op_;

  std::vector<OpId> topo_order_;
  std::vector<int32_t> topo_rank_, depth_;
};

/** Collects ops and edges, then validates and freezes them into a Graph. */
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name);

  /** Adds an op and returns its id (ids are dense, in insertion order). */
  OpId add_op(OpSpec spec);
  /** Adds an edge between two ops added before or after; checked at build(). */
  EdgeId add_edge(OpId src, OpId dst, double bytes = 0, double comm_s = kUnknown);
  EdgeId add_edge(const EdgeSpec& edge) { return add_edge(edge.src, edge.dst, edge.bytes, edge.comm_s); }

  int32_t num_ops() const { return static_cast<int32_t>(ops_.size()); }
  const OpSpec& op(OpId id) const { return ops_[id]; }
  OpSpec& op(OpId id) { return ops_[id]; }

  /**
   * Validates and builds. Throws placelab::Error naming the op or edge at fault: empty graph,
   * duplicate or empty names, dangling or self edges, duplicate edges, NaN / infinite / negative
   * numbers, cycles (the message lists ops on one).
   */
  Graph build() &&;

 private:
  std::string name_;
  std::vector<OpSpec> ops_;
  std::vector<EdgeSpec> edges_;
};

}  // namespace placelab::graphs
