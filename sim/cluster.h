// The machine model: devices that run ops, links that move tensors, and a route (a list of directed
// link channels) for every ordered device pair. Read from the placelab.cluster JSON format (version 1)
// or built by a preset (presets.h). Says what exists; how long things take is the cost model's job and
// when they happen is the engine's. Semantics and format: docs/simulator.md.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace placelab::sim {

/**
 * Measured efficiency against op size for one class of ops (graphs/op_class.h), from calibration: the
 * fraction of the device's peak FLOP/s (compute classes, size in FLOPs) or memory bandwidth (memory
 * classes, size in bytes read and written) an op of that size reached, launch overhead excluded.
 */
struct EfficiencyCurve {
  std::vector<double> size;        // increasing, > 0
  std::vector<double> efficiency;  // one per size, > 0 (above 1 where an op beat the fitted peak, e.g. from cache)
  /** Piecewise linear in log(size) between the points, the end points' values beyond them. */
  double at(double size) const;
};

/** One processor that runs one op at a time. */
struct Device {
  std::string name;                          // unique, e.g. "gpu0"
  std::string kind;                          // "v100", "cpu", "accelerator": matches graph pins and measured kinds
  double peak_flops_per_s = 0;               // datasheet peak for the precision the graphs count
  double memory_bandwidth_bytes_per_s = 0;   // datasheet memory bandwidth
  double memory_bytes = 0;                   // capacity; exceeding it is reported, not prevented
  double launch_overhead_s = 0;              // added to every op's time (kernel launch, dispatch)
  double gap_after_op_s = 0;                 // device idle after each op; the op's output is ready at its end
  double efficiency = 1;                     // fraction of peak FLOP/s and bandwidth a large op reaches, in (0, 1]
  /** Calibrated efficiency by op class name ("gemm", "elementwise", ...); replaces `efficiency` where given. */
  std::map<std::string, EfficiencyCurve> efficiency_curves;
  /**
   * A DMA engine moves its outgoing tensors while it runs other ops (GPUs). Without one (false), the
   * device copies them itself, one after another right after their producer, and starts nothing else
   * meanwhile (a CPU core's memcpy; the CPU replay backend's producer copies).
   */
  bool copy_engine = true;
  /**
   * Devices that name the same memory domain share their caches and memory bus (cores of one host): while
   * another device of its domain is busy, an op starting on this one runs at its contended efficiency.
   * Empty: a memory of its own.
   */
  std::string memory_domain;
  /** Efficiency by op class while another device of its memory domain is busy; classes left out: efficiency_curves. */
  std::map<std::string, EfficiencyCurve> contended_efficiency_curves;
  /**
   * Seconds per element of A (m x k), B (k x n) and C (m x n) that a product of known shape (GemmDims) has
   * beyond the square product of its FLOPs, which the efficiency curves describe: a skinny product packs,
   * reads and writes more elements per FLOP. All zero: shapes do not change an op's time.
   */
  std::array<double, 3> gemm_element_s{0, 0, 0};
};

/** Full duplex: each direction is an independent channel; half: both directions share one. */
enum class Duplex : uint8_t { full, half };

/** How a tensor reaches several remote devices. */
enum class TransferMode : uint8_t {
  per_destination,  // one transfer per destination device, along that pair's route (the default)
  broadcast,        // one transfer to all remote destinations at once, over the union of their routes (Placeto)
};

/** Which ready op a free device starts (the engine's queue discipline; docs/simulator.md). */
enum class Priority : uint8_t {
  ready_time,  // earliest ready, then highest upward rank, then lowest op id (the default)
  rank,        // highest upward rank among the ops ready when the device is free, then ready time, then op id
  fifo,        // earliest ready, then the order the ops became ready (Placeto's device queues)
};

/** A communication resource: a cable, a bus, a switch port, a host bridge. */
struct Link {
  std::string name;                 // unique among links
  std::string end_a, end_b;         // the nodes it joins (device names or switch names); both empty for a bus
  double bandwidth_bytes_per_s = 0; // per direction for full duplex
  double latency_s = 0;             // added once per transfer that crosses it
  Duplex duplex = Duplex::full;
  double busy_after_s = 0;          // the channel stays busy this long after each transfer (Placeto's 25 us)
  /**
   * Measured fraction of `bandwidth_bytes_per_s` a copy of a given size (bytes) reaches, from calibration
   * (a memcpy in cache outruns one through memory); empty: the full bandwidth at every size.
   */
  EfficiencyCurve efficiency_curve;
  /**
   * The same for a copy made while its destination device runs an op (on one host, the two cores then
   * share the memory bus and caches; from calibration); empty: efficiency_curve.
   */
  EfficiencyCurve loaded_efficiency_curve;
};

/** A route as written in files: link names from `src` to `dst`. */
struct RouteSpec {
  std::string src, dst;
  std::vector<std::string> links;
};

/** The most devices a cluster may have: it keeps a route per ordered pair (16M at this size). */
inline constexpr size_t kMaxDevices = 4096;
/**
 * The most link crossings all routes together may hold (1 GiB): a route is stored whole, so long
 * chains of switches would otherwise grow memory with the cube of the devices.
 */
inline constexpr size_t kMaxRouteCrossings = size_t{1} << 28;

/** Everything needed to build a Cluster; Cluster validates it. */
struct ClusterSpec {
  std::string name;
  std::vector<Device> devices;
  std::vector<Link> links;
  std::vector<RouteSpec> routes;  // explicit routes; other pairs get the shortest path through switches
  TransferMode transfer_mode = TransferMode::per_destination;
  /** The engine's queue discipline on this machine unless SimOptions say otherwise (ready_time if unset). */
  std::optional<Priority> priority;
  /**
   * The unit the engine sums times in, in seconds: 1e-6 makes it add microseconds as Placeto's simulator
   * does, so that ties exact in those units stay ties. Results are reported in seconds either way.
   */
  double clock_unit_s = 1;
};

/**
 * A validated cluster with a route for every ordered pair of distinct devices. A route is a list of
 * channels: channel 2*l is link l in the a->b direction (or both directions of a half-duplex link or
 * bus), 2*l+1 the b->a direction of a full-duplex link.
 */
class Cluster {
 public:
  Cluster() = default;
  /**
   * Validates and builds. Throws placelab::Error naming the device, link or route at fault: no
   * devices, duplicate names, non-positive bandwidth or peak, negative amounts, efficiency outside
   * (0, 1], a route that does not join its ends or that crosses a link or visits a node twice,
   * unreachable pairs. Missing routes are the path with the fewest hops (then least latency) whose
   * inner nodes are switches, never other devices; of equal paths, the one whose link indices are lowest
   * in path order.
   */
  explicit Cluster(ClusterSpec spec);

  const std::string& name() const { return spec_.name; }
  int32_t num_devices() const { return static_cast<int32_t>(spec_.devices.size()); }
  int32_t num_links() const { return static_cast<int32_t>(spec_.links.size()); }
  int32_t num_channels() const { return 2 * num_links(); }
  const Device& device(int32_t d) const { return spec_.devices[d]; }
  const std::vector<Device>& devices() const { return spec_.devices; }
  const Link& link(int32_t l) const { return spec_.links[l]; }
  const std::vector<Link>& links() const { return spec_.links; }
  TransferMode transfer_mode() const { return spec_.transfer_mode; }
  std::optional<Priority> priority() const { return spec_.priority; }
  double clock_unit_s() const { return spec_.clock_unit_s; }
  /** The spec it was built from (explicit routes only). */
  const ClusterSpec& spec() const { return spec_; }

  /** Channels from `src` to `dst` (empty when src == dst). */
  std::span<const int32_t> route(int32_t src, int32_t dst) const {
    size_t p = static_cast<size_t>(src) * spec_.devices.size() + dst;
    return {route_channels_.data() + route_offset_[p], static_cast<size_t>(route_offset_[p + 1] - route_offset_[p])};
  }
  /** Link index of a channel. */
  static int32_t channel_link(int32_t channel) { return channel / 2; }

  /** Sum of the route's link latencies. */
  double route_latency_s(int32_t src, int32_t dst) const;
  /** Smallest bandwidth on the route (infinity when src == dst). */
  double route_bandwidth_bytes_per_s(int32_t src, int32_t dst) const;
  /**
   * Smallest bandwidth on the route for a copy of `bytes`: each link's bandwidth times its efficiency curve
   * there (its loaded curve, where it has one, for a copy made while `dst` runs an op).
   */
  double route_bandwidth_bytes_per_s(int32_t src, int32_t dst, double bytes, bool loaded = false) const;
  /** Whether some link of the route has an efficiency curve (its bandwidth then depends on the size). */
  bool route_has_curve(int32_t src, int32_t dst) const;
  /** Time to move `bytes` from src to dst on an idle network: latency + bytes / bottleneck bandwidth at that size. */
  double transfer_time_s(int32_t src, int32_t dst, double bytes) const;

  /** Index of the device named `name`, or -1. */
  int32_t find_device(std::string_view name) const;
  /** Distinct device kinds in first-seen order. */
  std::vector<std::string> kinds() const;

 private:
  ClusterSpec spec_;
  std::vector<int32_t> route_offset_;    // (devices^2 + 1) offsets into route_channels_
  std::vector<int32_t> route_channels_;
};

/**
 * Reads a placelab.cluster file, or the machine an msr-dnn-partitioning instance file allows
 * (msr_cluster of it, so one such file serves as both graph and cluster). Throws placelab::Error naming
 * the file and JSON path at fault.
 */
Cluster read_cluster(const std::string& path);

/** Builds a cluster from a parsed placelab.cluster document; `origin` names it in errors. */
Cluster cluster_from_json(const nlohmann::json& doc, const std::string& origin);

/** The placelab.cluster document of `cluster`; cluster_from_json(cluster_to_json(c)) rebuilds it exactly. */
nlohmann::json cluster_to_json(const Cluster& cluster);

/** Writes `cluster` to `path` atomically. */
void write_cluster(const Cluster& cluster, const std::string& path);

/** "full"/"half", "per_destination"/"broadcast" and "ready_time"/"rank"/"fifo". */
std::string_view duplex_name(Duplex duplex);
std::string_view transfer_mode_name(TransferMode mode);
std::string_view priority_name(Priority priority);
/** The priority named `name`, or nullopt. */
std::optional<Priority> priority_from_name(std::string_view name);

}  // namespace placelab::sim
