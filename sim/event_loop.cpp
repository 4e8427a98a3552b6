// The discrete-event engine. Events are per device: each device has at most one pending event, the end
// of its running op or the wake-up that starts its best ready op, and the next one is the least by (time,
// ends before wake-ups, device index): a vector scan for up to 16 devices, a tournament tree over more
// (NextEvent). Links are FIFO channels reserved in request order, so a transfer's times are known when
// its producer ends and need no event of their own.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "graphs/error.h"
#include "sim/engine.h"
#include "sim/engine_state.h"

namespace placelab::sim {

using namespace detail;

bool Simulator::general(const SimObserver* observer) const {
  return observer != nullptr || options_.priority != Priority::ready_time || options_.share_bandwidth ||
         (options_.use_edge_comm && graph_->has_edge_comm()) || cluster_->transfer_mode() == TransferMode::broadcast ||
         any_sender_copies_ || any_link_curves_ || !contended_time_.empty();
}

bool Simulator::run(std::span<const int32_t> dev, SimScratch& s, SimResult& out, SimObserver* observer,
                    SimCheckpoints* checkpoints, bool fresh) const {
  // The default options without an observer (the hot case: rewards, batches) get their own copy of the
  // event loop with the other modes' branches compiled out, and without the checks for stopping early
  // unless the run may stop (a move within a limit).
  if (general(observer)) return run_mode<true, true>(dev, s, out, observer, checkpoints, fresh);
  if (s.stop_tail_s) return run_mode<false, true>(dev, s, out, nullptr, checkpoints, fresh);
  return run_mode<false, false>(dev, s, out, nullptr, checkpoints, fresh);
}

template <bool kGeneral, bool kStoppable>
bool Simulator::run_mode(std::span<const int32_t> dev, SimScratch& s, SimResult& out, SimObserver* observer,
                         SimCheckpoints* checkpoints, bool fresh) const {
  const int32_t n = n_, D = devices_;
  const int32_t* device_of = dev.data();
  const OpInfo* info = info_.data();
  const OutSlot* outs = out_.data();
  const InSlot* ins = in_.data();
  SimScratch::OpState* state = s.op.data();
  // Op times by device class: op_time[op * C + time_class[d]].
  const double* op_time = run_times();
  const size_t C = static_cast<size_t>(time_classes_);
  const int32_t* time_class = time_class_.data();
  const double unit = clock_unit_s_;  // observers and results get seconds

  // Per device: ops whose inputs are all produced, by ready time (heap); with Priority::rank, those
  // already ready when the device looked, by rank (ranked).
  ReadyEntry* heap = s.heap.data();
  ReadyEntry* ranked = s.ranked.data();
  const bool by_rank = kGeneral && options_.priority == Priority::rank;
  const bool fifo = kGeneral && options_.priority == Priority::fifo;
  const bool edge_comm = kGeneral && options_.use_edge_comm && graph_->has_edge_comm();
  const bool broadcast = kGeneral && cluster_->transfer_mode() == TransferMode::broadcast;
  const bool sharing = kGeneral && options_.share_bandwidth;
  const bool sender_copies = kGeneral && any_sender_copies_;  // some device copies its own outputs
  const bool link_curves = kGeneral && any_link_curves_;      // some route's bandwidth depends on the size
  const bool contention = kGeneral && !contended_time_.empty();  // devices share a memory domain
  // Whether device e runs an op at time `at` (as far as the run knows at the current event).
  auto running_at = [&](int32_t e, double at) { return s.running[e] >= 0 && s.next_s[e] > at; };
  // Whether another device of d's memory domain is busy at t: running an op past t, copying, or starting
  // one at t (ops that start together slow each other, whichever is handled first).
  auto peer_busy = [&](int32_t d, double t) {
    return std::any_of(peers_[d].begin(), peers_[d].end(), [&](int32_t e) {
      return running_at(e, t) || s.free_s[e] > t || (s.next_kind[e] == kWake && s.next_s[e] == t);
    });
  };
  // Bytes per clock unit from one device to another for a copy of `bytes`, made while the destination runs an
  // op (loaded) or not.
  auto bandwidth = [&](size_t pair, double bytes, bool loaded = false) {
    return link_curves ? pair_bandwidth_at(pair, bytes, loaded) : pair_bandwidth_[pair];
  };
  const ByRelease by_release{s.fifo_key.data()};
  const ByRank by_rank_class{rank_class_.data()};

  const NextEvent next_event(s);

  // An idle device wakes when its best ready op is ready and the device is free.
  auto schedule_wake = [&](int32_t d) {
    double t = s.heap_size[d] > 0 ? std::max(s.free_s[d], heap[s.heap_off[d]].ready_s) : kInf;
    if (by_rank && s.ranked_size[d] > 0) t = s.free_s[d];
    if (t != s.next_s[d] || s.next_kind[d] != kWake) {
      s.next_s[d] = t;
      s.next_kind[d] = kWake;
      next_event.update(d);
    }
  };
  auto make_ready = [&](int32_t op, int32_t d) {
    // The op starts some events from now: fetch its time and adjacency meanwhile.
    __builtin_prefetch(op_time + static_cast<size_t>(op) * C + time_class[d]);
    __builtin_prefetch(outs + info[op].out_begin);
    __builtin_prefetch(ins + info[op].in_begin);
    const ReadyEntry entry{state[op].ready_s, info[op].prio, op};
    if (fifo) heap_push(heap + s.heap_off[d], s.heap_size[d], entry, by_release);
    else heap_push(heap + s.heap_off[d], s.heap_size[d], entry, ByReadyTime());
    if (s.running[d] == -1) schedule_wake(d);
  };
  // Priority::fifo: ties in ready time go in the order Placeto's simulator releases ops at one instant.
  // Releases scheduled ahead of it (after an op or a transfer that took time) come first, by (producer
  // name, consumer name); then those made at the instant (after an op that took no time), in the order
  // the ops ended, by consumer name. An op's key is that of the last of its inputs to arrive. Sources
  // come first of all, in graph order (keys 0..n-1). Keys stay below 2^53 up to ~6e7 ops: exact.
  const double nk = n;
  auto fifo_release = [&](int32_t producer, int32_t consumer, double arrive, bool scheduled_ahead) {
    const double key = scheduled_ahead ? nk + fifo_name_key_[producer] * nk + fifo_name_key_[consumer]
                                       : nk + nk * nk + s.done * nk + fifo_name_key_[consumer];
    double& k = s.fifo_key[consumer];
    const double ready = state[consumer].ready_s;
    if (arrive > ready) k = key;
    else if (arrive == ready) k = std::max(k, key);
  };

  const double* stop_wake = s.stop_wake_s.data();
  MemQueue& mem = s.mem_events;
  std::vector<MemEvent>& mem_now = s.mem_now;
  double now = 0;  // time of the event being handled
  auto mem_later = [&](double time_s, int32_t is_alloc, int32_t d, int64_t bytes) {
    if (is_alloc && time_s == now) {  // common: the link was free; skip the heap
      mem_now.push_back(MemEvent{mem_key(time_s, is_alloc), d, bytes});
      return;
    }
    mem.push(MemEvent{mem_key(time_s, is_alloc), d, bytes});
  };
  auto mem_alloc = [&](int32_t d, int64_t bytes, double time_s) {
    s.mem_s[d] += bytes;
    s.peak_s[d] = std::max(s.peak_s[d], s.mem_s[d]);
    if (kGeneral && observer) observer->on_memory(d, time_s * unit, s.mem_s[d]);
  };
  auto mem_free = [&](int32_t d, int64_t bytes, double time_s) {
    s.mem_s[d] -= bytes;
    if (kGeneral && observer) observer->on_memory(d, time_s * unit, s.mem_s[d]);
  };
  auto mem_time = [](const MemEvent& e) { return std::bit_cast<double>(e.key >> 1); };
  // Applies dated changes up to time t: frees at t always, allocations at t only before allocations.
  auto mem_flush = [&](double t, bool allocs_at_t) {
    // Allocations of an earlier instant (or of this one, before this instant's allocations) come first:
    // every change still in the heap is at that instant or later, and this instant's frees are done.
    if (!mem_now.empty() && (mem_now.front().key < mem_key(t, 0) || allocs_at_t)) {
      for (const MemEvent& e : mem_now) mem_alloc(e.device, e.bytes, mem_time(e));
      mem_now.clear();
    }
    const uint64_t limit = mem_key(t, allocs_at_t ? 1 : 0);
    while (mem.size > 0 && mem.min <= limit) {
      const MemEvent e = mem.pop();
      if (e.is_alloc()) mem_alloc(e.device, e.bytes, mem_time(e));
      else mem_free(e.device, e.bytes, mem_time(e));
    }
  };
  auto free_output = [&](int32_t op, int32_t d, double t) {
    const int64_t bytes = info[op].output_mem;
    if (bytes <= 0 || (sharing && s.sending[op] > 0)) return;  // a sharing transfer still reads it: freed when it ends
    if (state[op].hold_until_s > t) mem_later(state[op].hold_until_s, 0, d, bytes);
    else mem_free(d, bytes, t);
  };

  // The network's slot (leaf D) waits for its next event: a transfer ending or finishing its latency.
  auto schedule_net = [&] {
    s.next_s[D] = s.net.next_s();
    next_event.update(D);
  };
  // A transfer has delivered its tensor: its consumers on the destinations have that input now.
  auto net_deliver = [&](int32_t f, double t) {
    const SharedNetwork::Flow& fl = s.net.flow(f);
    const OpInfo& ip = info[fl.producer];
    for (int32_t e : s.net.dests(fl)) {
      for (int32_t k = ip.out_begin; k < ip.out_end; ++k) {
        const OutSlot& o = outs[k];
        if (o.bytes <= 0 || device_of[o.dst] != e) continue;
        SimScratch::OpState& sc = state[o.dst];
        if (fifo) fifo_release(fl.producer, o.dst, t, t > fl.start_s);
        sc.ready_s = std::max(sc.ready_s, t);
        if (--sc.pending == 0) make_ready(o.dst, e);
      }
      if (kGeneral && observer) observer->on_transfer(fl.producer, fl.src, e, fl.start_s * unit, t * unit, fl.bytes);
    }
    SimScratch::OpState& sp = state[fl.producer];
    if (--s.sending[fl.producer] == 0 && sp.local_left == 0) free_output(fl.producer, fl.src, t);
  };

  if (fresh) {
    reset_run(device_of, s);
    if (kGeneral && observer)
      for (int32_t d = 0; d < D; ++d) observer->on_memory(d, 0, s.mem_s[d]);
    if (fifo)
      for (int32_t op = 0; op < n; ++op) s.fifo_key[op] = in_degree_[op] == 0 ? op : -1;
    if (sharing) {
      std::fill(s.sending.begin(), s.sending.end(), 0);
      s.net.clear();
    }
    for (int32_t op = 0; op < n; ++op)
      if (state[op].pending == 0) make_ready(op, device_of[op]);
  }

  for (;; ++s.events) {
    const int32_t d = next_event.next();
    const double t = s.next_s[d];
    if (t == kInf) break;
    if (checkpoints && s.events >= checkpoints->next) checkpoints->save(s);

    const bool flush = (mem.size > 0 && mem.min <= mem_key(t, 1)) || (!mem_now.empty() && mem_now.front().key < mem_key(t, 0)) ||
                       (!mem_now.empty() && s.next_kind[d] == kWake);  // most events have nothing to flush
    now = t;
    if (sharing && d == D) {  // bandwidth sharing: transfers end or finish paying their latency
      if (flush) mem_flush(t, false);
      for (int32_t f : s.net.step(t, s.chan_busy_s)) net_deliver(f, t);
      schedule_net();
      continue;
    }
    if (s.next_kind[d] == kWake) {
      if (kStoppable && t - s.busy[d] > stop_wake[d]) return false;  // before any change: resuming handles this event
      if (flush) mem_flush(t, true);
      int32_t op;
      if (!by_rank) {
        op = fifo ? heap_pop(heap + s.heap_off[d], s.heap_size[d], by_release).op
                  : heap_pop(heap + s.heap_off[d], s.heap_size[d], ByReadyTime()).op;
      } else {
        while (s.heap_size[d] > 0 && heap[s.heap_off[d]].ready_s <= t)
          heap_push(ranked + s.heap_off[d], s.ranked_size[d],
                    heap_pop(heap + s.heap_off[d], s.heap_size[d], ByReadyTime()), by_rank_class);
        op = heap_pop(ranked + s.heap_off[d], s.ranked_size[d], by_rank_class).op;
      }
      const double dur = contention && peer_busy(d, t) ? contended_time_[static_cast<size_t>(op) * D + d]
                                                        : op_time[static_cast<size_t>(op) * C + time_class[d]];
      if (contention) s.run_s[d] = dur;
      s.running[d] = op;
      s.next_s[d] = t + dur;
      s.next_kind[d] = kEnd;
      next_event.update(d);
      mem_alloc(d, info[op].output_mem + info[op].temp_mem, t);
      s.busy[d] += dur;
      if (kGeneral && observer) observer->on_op(op, d, t * unit, (t + dur) * unit);
      // Its end, some events from now, reads the records of its inputs and the state of its consumers:
      // fetch them meanwhile (random placements miss the cache there most).
      const OpInfo& io = info[op];
      for (int32_t k = io.in_begin; k < io.in_end; ++k) {
        const int32_t x = s.xfer_of_in[k];
        __builtin_prefetch(x >= 0 ? static_cast<const void*>(&s.xfer[x]) : &state[ins[k].src]);
      }
      for (int32_t k = io.out_begin; k < io.out_end; ++k) {
        __builtin_prefetch(device_of + outs[k].dst);
        __builtin_prefetch(state + outs[k].dst);
        __builtin_prefetch(info + outs[k].dst);
      }
      continue;
    }

    // The running op p of device d ends at t.
    if (kStoppable && s.stop_tail_s && t + s.stop_tail_s[s.running[d]] > s.stop_end_s) return false;  // as above
    if (flush) mem_flush(t, false);
    const int32_t p = s.running[d];
    const OpInfo& ip = info[p];
    SimScratch::OpState& sp = state[p];
    ++s.done;
    s.makespan = t;
    s.end_event[p] = static_cast<int32_t>(s.events);
    const double dur_p = contention ? s.run_s[d] : op_time[static_cast<size_t>(p) * C + time_class[d]];
    const double cp_end = sp.cp_start_s + dur_p;
    s.critical = std::max(s.critical, cp_end);
    s.running[d] = -2;  // ending: make_ready must not schedule d before its gap is known
    s.free_s[d] = dur_p > 0 ? t + gap_after_op_s_[d] : t;  // no gap after an op that took no time
    mem_free(d, ip.temp_mem, t);

    // Inputs whose last local consumer this was.
    for (int32_t k = ip.in_begin; k < ip.in_end; ++k) {
      if (ins[k].bytes <= 0) continue;
      const int32_t x = s.xfer_of_in[k];
      if (x < 0) {
        const int32_t q = ins[k].src;
        if (--state[q].local_left == 0) free_output(q, d, t);
      } else if (--s.xfer[x].left == 0) {
        mem_free(d, s.xfer[x].bytes, t);
      }
    }

    // Remote destinations of p's output: one transfer per device (or one for all when broadcasting).
    int32_t local = 0, num_dest = 0;
    for (int32_t k = ip.out_begin; k < ip.out_end; ++k) {
      const double bytes = outs[k].bytes;
      if (bytes <= 0) continue;
      const int32_t e = device_of[outs[k].dst];
      if (e == d) {
        ++local;
      } else if (s.stamp[e] != p) {
        s.stamp[e] = p;
        s.dest[num_dest++] = e;
        s.dest_bytes[e] = bytes;
        if (edge_comm) s.dest_comm_s[e] = out_comm_s_[k];
        s.dest_count[e] = 1;
      } else {
        s.dest_bytes[e] = std::max(s.dest_bytes[e], bytes);
        // A transfer is measured when every edge it serves is (the longest time), else modelled: NaN wins.
        const double c = out_comm_s_[k];
        if (edge_comm) s.dest_comm_s[e] = std::isnan(c) ? c : std::max(s.dest_comm_s[e], c);
        ++s.dest_count[e];
      }
    }
    if (edge_comm && broadcast &&
        std::any_of(s.dest.begin(), s.dest.begin() + num_dest, [&](int32_t e) { return std::isnan(s.dest_comm_s[e]); }))
      for (int32_t i = 0; i < num_dest; ++i) s.dest_comm_s[s.dest[i]] = kNaN;  // one broadcast serves them all
    sp.local_left = local;
    sp.hold_until_s = t;
    if (num_dest > 0) {
      // A copy to e starting at `at`: loaded when e runs an op then.
      auto duration = [&](int32_t e, double bytes, double at) {
        if (edge_comm && !std::isnan(s.dest_comm_s[e])) return s.dest_comm_s[e];
        const size_t pair = static_cast<size_t>(d) * D + e;
        return pair_latency_s_[pair] + bytes / bandwidth(pair, bytes, running_at(e, at));
      };
      auto record = [&](int32_t e, double bytes, double start, double end) {
        const int32_t x = s.num_xfers++;
        s.xfer[x] = SimScratch::Xfer{s.dest_count[e], static_cast<int64_t>(bytes + 0.5)};  // bytes >= 0
        s.dest_xfer[e] = x;
        s.arrival_s[e] = end;
        s.depart_s[e] = start;
        mem_later(start, 1, e, s.xfer[x].bytes);
        if (kGeneral && observer) observer->on_transfer(p, d, e, start * unit, end * unit, bytes);
      };
      auto hold_channels = [&](const int32_t* ch, int32_t count, double end, double dur, double bytes) {
        for (int32_t i = 0; i < count; ++i) {
          const int32_t c = ch[i];
          s.chan_free_s[c] = end + channel_busy_after_s_[c];
          s.chan_busy_s[c] += dur + channel_busy_after_s_[c];
          s.chan_bytes[c] += bytes;
        }
      };
      if (sharing) {
        // Transfers start now, pay their route's latency, then share each channel with the others.
        auto add_flow = [&](std::span<const int32_t> dests, double bytes, double stream_bytes, double latency) {
          for (int32_t c : s.net.add(p, d, dests, bytes, stream_bytes, t, latency)) s.chan_bytes[c] += bytes;
          for (int32_t e : dests) {
            const int32_t x = s.num_xfers++;
            s.xfer[x] = SimScratch::Xfer{s.dest_count[e], static_cast<int64_t>(bytes + 0.5)};
            s.dest_xfer[e] = x;
            mem_later(t, 1, e, s.xfer[x].bytes);
          }
          ++s.sending[p];
          s.total_bytes += bytes;
          ++s.transfers;
        };
        // A measured transfer is all latency: it takes exactly that long (a broadcast: all or none of its
        // destinations are measured).
        auto timed = [&](int32_t e) { return edge_comm && !std::isnan(s.dest_comm_s[e]); };
        // A copy that reaches a fraction of its route's bandwidth at its size (a link's efficiency curve)
        // streams as that many more bytes at the full one: alone on its route, it takes as long as in FIFO.
        auto stretch = [&](size_t pair, double bytes) {
          return pair_bandwidth_[pair] / bandwidth(pair, bytes, running_at(static_cast<int32_t>(pair % D), t));
        };
        if (!broadcast) {
          for (int32_t i = 0; i < num_dest; ++i) {
            const int32_t e = s.dest[i];
            const size_t pair = static_cast<size_t>(d) * D + e;
            const double bytes = s.dest_bytes[e];
            add_flow({&s.dest[i], 1}, bytes, timed(e) ? 0.0 : bytes * stretch(pair, bytes),
                     timed(e) ? s.dest_comm_s[e] : pair_latency_s_[pair]);
          }
        } else {
          double bytes = 0, latency = 0, most = 0;
          for (int32_t i = 0; i < num_dest; ++i) bytes = std::max(bytes, s.dest_bytes[s.dest[i]]);
          for (int32_t i = 0; i < num_dest; ++i) {
            const int32_t e = s.dest[i];
            const size_t pair = static_cast<size_t>(d) * D + e;
            latency = std::max(latency, timed(e) ? s.dest_comm_s[e] : pair_latency_s_[pair]);
            most = std::max(most, stretch(pair, bytes));
          }
          add_flow({s.dest.data(), static_cast<size_t>(num_dest)}, bytes, timed(s.dest[0]) ? 0.0 : bytes * most, latency);
        }
        schedule_net();
      } else if (!broadcast) {
        // A device without a copy engine sends one transfer after another.
        const bool serial = sender_copies && sender_copies_[d];
        for (int32_t i = 0; i < num_dest; ++i) {
          const int32_t e = s.dest[i];
          const double bytes = s.dest_bytes[e];
          const size_t pair = static_cast<size_t>(d) * D + e;
          const int32_t* ch = route_ch_.data() + route_off_[pair];
          const int32_t count = route_off_[pair + 1] - route_off_[pair];
          double start = serial ? sp.hold_until_s : t;
          for (int32_t c = 0; c < count; ++c) start = std::max(start, s.chan_free_s[ch[c]]);
          const double dur = duration(e, bytes, start), end = start + dur;
          hold_channels(ch, count, end, dur, bytes);
          record(e, bytes, start, end);
          sp.hold_until_s = std::max(sp.hold_until_s, end);
          s.total_bytes += bytes;
          ++s.transfers;
        }
      } else {
        // One transfer over the union of the routes, as long as the slowest destination needs.
        double bytes = 0, dur = 0, start = t;
        int32_t count = 0;
        for (int32_t i = 0; i < num_dest; ++i) bytes = std::max(bytes, s.dest_bytes[s.dest[i]]);
        for (int32_t i = 0; i < num_dest; ++i) {
          const int32_t e = s.dest[i];
          dur = std::max(dur, duration(e, bytes, t));
          const size_t pair = static_cast<size_t>(d) * D + e;
          for (int32_t r = route_off_[pair]; r < route_off_[pair + 1]; ++r) {
            const int32_t c = route_ch_[r];
            if (s.chan_stamp[c] == p) continue;
            s.chan_stamp[c] = p;
            s.chan_list[count++] = c;
            start = std::max(start, s.chan_free_s[c]);
          }
        }
        const double end = start + dur;
        hold_channels(s.chan_list.data(), count, end, dur, bytes);
        for (int32_t i = 0; i < num_dest; ++i) record(s.dest[i], bytes, start, end);
        sp.hold_until_s = end;
        s.total_bytes += bytes;
        ++s.transfers;
      }
      // Without a copy engine the device was copying until its last transfer ended.
      if (sender_copies && sender_copies_[d]) s.free_s[d] = std::max(s.free_s[d], sp.hold_until_s);
    }

    // Consumers: inputs arrive locally at t, remotely at the transfer's end; control edges at t.
    for (int32_t k = ip.out_begin; k < ip.out_end; ++k) {
      const OutSlot& o = outs[k];
      const int32_t e = device_of[o.dst];
      SimScratch::OpState& sc = state[o.dst];
      double arrive = t, cp = cp_end;
      if (e == d || o.bytes <= 0) {
        s.xfer_of_in[o.in_pos] = -1;
      } else {
        s.xfer_of_in[o.in_pos] = s.dest_xfer[e];
        const size_t pair = static_cast<size_t>(d) * D + e;
        cp += edge_comm && !std::isnan(s.dest_comm_s[e]) ? out_comm_s_[k]
                                                         : pair_latency_s_[pair] + o.bytes / bandwidth(pair, o.bytes);
        sc.cp_start_s = std::max(sc.cp_start_s, cp);
        if (sharing) continue;  // the input arrives when its flow ends
        arrive = s.arrival_s[e];
      }
      if (fifo) fifo_release(p, o.dst, arrive, e == d || o.bytes <= 0 ? dur_p > 0 : arrive > s.depart_s[e]);
      sc.ready_s = std::max(sc.ready_s, arrive);
      sc.cp_start_s = std::max(sc.cp_start_s, cp);
      if (--sc.pending == 0) make_ready(o.dst, e);
    }
    if (local == 0) free_output(p, d, t);

    s.running[d] = -1;
    s.next_kind[d] = kEnd;  // force schedule_wake to refresh the tree
    schedule_wake(d);
  }
  mem_flush(kInf, true);
  finish_run(s, out);
  return true;
}

void Simulator::reset_run(const int32_t* device_of, SimScratch& s) const {
  const int32_t n = n_, D = devices_;
  s.events = 0;
  s.num_xfers = s.done = 0;
  s.makespan = s.critical = s.total_bytes = 0;
  s.transfers = 0;
  std::fill(s.busy.begin(), s.busy.end(), 0.0);
  // Resident bytes and per-device heap segments.
  std::fill(s.heap_size.begin(), s.heap_size.end(), 0);
  std::fill(s.ranked_size.begin(), s.ranked_size.end(), 0);
  std::fill(s.mem_s.begin(), s.mem_s.end(), 0);
  for (int32_t op = 0; op < n; ++op) {
    ++s.heap_size[device_of[op]];
    s.op[op] = SimScratch::OpState{in_degree_[op], 0, 0.0, 0.0, 0.0};
    s.mem_s[device_of[op]] += param_bytes_[op];
  }
  for (int32_t d = 0, off = 0; d < D; ++d) {
    s.heap_off[d] = off;
    off += s.heap_size[d];
    s.heap_size[d] = 0;
    s.peak_s[d] = s.mem_s[d];
    s.running[d] = -1;
    s.free_s[d] = 0;
    s.next_s[d] = kInf;
    s.next_kind[d] = kWake;
    s.stamp[d] = -1;
  }
  std::fill(s.chan_free_s.begin(), s.chan_free_s.end(), 0.0);
  std::fill(s.chan_busy_s.begin(), s.chan_busy_s.end(), 0.0);
  std::fill(s.chan_bytes.begin(), s.chan_bytes.end(), 0.0);
  std::fill(s.chan_stamp.begin(), s.chan_stamp.end(), -1);
  s.mem_events.clear();
  s.mem_now.clear();
  // The event slots: one leaf per device; padded leaves never have an event, but the network's (leaf D
  // with bandwidth sharing) does.
  const int32_t P = s.tree_leaves;
  for (int32_t i = 0; i < P; ++i) s.tree[P + i] = i;
  for (int32_t i = D; i < P; ++i) s.next_s[i] = kInf, s.next_kind[i] = i == D ? kNet : kWake;
  NextEvent(s).rebuild();
}

void Simulator::finish_run(const SimScratch& s, SimResult& out) const {
  const int32_t D = devices_;
  const double unit = clock_unit_s_;  // results are in seconds
  if (s.done != n_) throw Error(fmt::format("simulator: internal error, {} of {} ops ran", s.done, n_));
  out.device_busy_s.assign(D, 0.0);
  out.device_peak_bytes.assign(D, 0.0);
  out.device_excess_bytes.assign(D, 0.0);
  out.link_busy_s.assign(cluster_->num_links(), 0.0);
  out.link_bytes.assign(cluster_->num_links(), 0.0);
  double busy_until = s.makespan;
  for (int32_t d = 0; d < D; ++d) busy_until = std::max(busy_until, s.free_s[d]);
  if (!options_.share_bandwidth)
    for (int32_t c = 0; c < channels_; ++c) busy_until = std::max(busy_until, s.chan_free_s[c]);
  out.step_time_s = s.makespan * unit;
  out.busy_until_s = busy_until * unit;
  out.critical_path_s = s.critical * unit;
  out.total_bytes_moved = s.total_bytes;
  out.num_transfers = s.transfers;
  out.oom = false;
  for (int32_t d = 0; d < D; ++d) out.device_busy_s[d] = s.busy[d] * unit;
  for (int32_t d = 0; d < D; ++d) {
    out.device_peak_bytes[d] = static_cast<double>(s.peak_s[d]);
    out.device_excess_bytes[d] = std::max(0.0, out.device_peak_bytes[d] - cluster_->device(d).memory_bytes);
    out.oom = out.oom || out.device_excess_bytes[d] > 0;
  }
  for (int32_t c = 0; c < channels_; ++c) {
    out.link_busy_s[Cluster::channel_link(c)] += s.chan_busy_s[c] * unit;
    out.link_bytes[Cluster::channel_link(c)] += s.chan_bytes[c];
  }
}

}  // namespace placelab::sim
