// Bandwidth sharing (SimOptions::share_bandwidth): transfers stream over their channels at the same
// time, at max-min fair rates. Transfers that cross the same channels always get the same rate, so the
// rates are computed per class of such transfers (a device pair's route; for a broadcast, a union of
// routes), each weighted by how many of its transfers stream. A class keeps a virtual clock, the bytes
// any one of its streaming transfers has been sent since the run began, and a transfer ends when that
// clock has advanced by its bytes since it began streaming (the virtual time of fair queueing). So a
// network event costs time in the classes streaming, not in the transfers under way, which run to
// thousands when a placement sends much over a few links; and only the classes linked through shared
// channels to one whose transfers changed are re-rated (the same rates as re-rating all of them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace placelab::sim {

class SharedNetwork {
 public:
  struct Flow {
    int32_t producer, src, dest_begin, dest_count, cls;
    double bytes, start_s;  // the tensor's bytes
  };

  /** Routes over ordered device pairs (a * devices + b) as offsets into `route_ch`, and channel bandwidths. */
  void init(int32_t devices, std::span<const int32_t> route_off, std::span<const int32_t> route_ch,
            std::span<const double> bandwidth, size_t max_flows);
  /** Forgets every transfer: the start of a run. */
  void clear();
  /**
   * A transfer of `producer`'s output (`bytes`) from `src` to `dests` starts at `t`: it pays `latency`,
   * then sends `stream_bytes` over the route's channels (for several destinations, the union of their
   * routes); a transfer with a measured time streams nothing. Returns the channels it crosses.
   */
  std::span<const int32_t> add(int32_t producer, int32_t src, std::span<const int32_t> dests, double bytes,
                               double stream_bytes, double t, double latency);
  /** Time of the next network event (a transfer starts streaming or ends); infinity when none is under way. */
  double next_s() const { return next_s_; }
  /**
   * Handles the network event at `t` (= next_s()): ends the transfers whose last byte has arrived,
   * starts streaming those whose latency is paid, and recomputes the rates; a channel that no transfer
   * streams on any more adds its busy time to `chan_busy_s`. Returns the transfers that ended, in a
   * fixed order.
   */
  std::span<const int32_t> step(double t, std::span<double> chan_busy_s);

  const Flow& flow(int32_t f) const { return flows_[f]; }
  std::span<const int32_t> dests(const Flow& f) const {
    return {flow_dest_.data() + f.dest_begin, static_cast<size_t>(f.dest_count)};
  }

 private:
  struct Member {  // a streaming transfer: it ends when its class's clock reaches `until`
    double until;
    int32_t flow;
    bool operator>(const Member& o) const { return until != o.until ? until > o.until : flow > o.flow; }
  };
  struct Pending {  // a transfer paying its latency
    double active_s;
    double bytes;
    int32_t flow;
    bool operator>(const Pending& o) const { return active_s != o.active_s ? active_s > o.active_s : flow > o.flow; }
  };

  int32_t class_of(int32_t src, std::span<const int32_t> dests);
  std::span<const int32_t> channels(int32_t cls) const {
    return {class_ch_.data() + class_off_[cls], static_cast<size_t>(class_off_[cls + 1] - class_off_[cls])};
  }
  double finish_s(int32_t cls, double until) const;
  void advance(int32_t cls, double t);
  void new_mark();
  void reschedule(double t);

  // Classes: one per device pair first, then the unions of routes broadcasts have used in this run.
  int32_t devices_ = 0, pair_classes_ = 0, classes_ = 0;
  std::vector<int32_t> class_off_, class_ch_;
  std::vector<uint64_t> class_hash_;
  std::vector<int32_t> union_table_;  // open addressing over union classes by hash; -1: empty
  std::vector<double> bandwidth_;

  // Per class: streaming transfers (a heap by `until`), per-transfer rate, virtual clock as of
  // clock_s_, and when its first transfer ends at that rate.
  std::vector<std::vector<Member>> members_;
  std::vector<double> rate_, clock_, clock_s_, end_s_;
  std::vector<int32_t> active_;  // classes with streaming transfers, ascending
  std::vector<Pending> pending_;  // heap by active_s
  std::vector<Flow> flows_;
  std::vector<int32_t> flow_dest_;
  std::vector<std::vector<int32_t>> crossing_;  // per channel: the streaming classes crossing it, ascending
  std::vector<double> busy_since_s_;  // per channel crossed by streaming transfers: since when
  double next_s_ = 0;

  // Scratch of one call.
  std::vector<int32_t> ended_, touched_, union_, group_, fill_count_, fill_list_, frozen_;
  std::vector<uint32_t> channel_mark_, class_mark_;  // == mark_: seen in this call
  std::vector<double> fill_cap_, share_;  // per channel while filling: bandwidth left, and per transfer
  std::vector<uint64_t> fill_bits_;
  uint32_t mark_ = 0;
};

}  // namespace placelab::sim
