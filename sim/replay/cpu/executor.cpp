// The CPU replay backend (see executor.h). One std::thread per device joins that device's oneTBB
// arena and runs the device's ops in plan order. A transfer is copied by its producer's thread right
// after the producer (the default: no extra threads to wake on a machine with few cores), or, with
// ReplayOptions::copy_threads, by one thread per ordered device pair in plan order. Completion is an
// epoch per op and per transfer (the run number), so no flag is reset between runs; waiting spins,
// then sleeps on the atomic (a futex): a device thread with a core of its own spins up to 10 ms, others
// 20 us.
#include "sim/replay/cpu/executor.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <exception>
#include <map>
#include <memory>
#include <numeric>
#include <thread>
#include <utility>

#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include "sim/replay/cpu/kernels.h"

namespace placelab::sim::replay::cpu {

namespace {

using Clock = std::chrono::steady_clock;
using Flags = std::unique_ptr<std::atomic<uint32_t>[]>;

// How long a waiting thread spins before it sleeps. A futex wake-up costs tens of us, and far more in a VM:
// on this project's 2-core VM a device handing each op to the other one paid ~130 us more per handoff
// after sleeping (64 kB copies between 2.4 ms ops: 205-214 us per hop with 20 us of spinning, 77-82 us
// with 10 ms; bench/results/fidelity.md), a cost of the replay's waiting that no device of the model has.
// A device thread with a core of its own spins until a wait is long (it takes nobody's time); threads
// that share cores spin only briefly, so that they do not delay each other.
constexpr auto kDedicatedSpin = std::chrono::milliseconds(10);
constexpr auto kSharedSpin = std::chrono::microseconds(20);

void wait_for(const std::atomic<uint32_t>& flag, uint32_t epoch, Clock::duration spin) {
  uint32_t seen = flag.load(std::memory_order_acquire);
  if (seen == epoch) return;
  const auto spin_until = Clock::now() + spin;
  for (int spins = 0; seen != epoch; seen = flag.load(std::memory_order_acquire)) {
    if ((++spins & 63) == 0 && Clock::now() > spin_until) {
      flag.wait(seen, std::memory_order_acquire);  // sleeps while the value is `seen`
      spins = 0;
    }
  }
}

void signal(std::atomic<uint32_t>& flag, uint32_t epoch) {
  flag.store(epoch, std::memory_order_release);
  flag.notify_all();
}

/** The CPUs this process may run on, in order. */
std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

void pin_current_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort: a refusal only costs noise
}

/** The work of one op, fixed before the runs. */
struct OpWork {
  KernelKind kernel = KernelKind::none;
  GemmTiling gemm;
  int64_t elements = 0;
};

/** The transfers of one ordered device pair, the destination's receive ring and the ring cursors. */
struct PairQueue {
  int32_t src = 0, dst = 0;
  std::vector<int32_t> transfers;
  std::vector<float> ring;
  int64_t src_cursor = 0, dst_cursor = 0;
};

class Runner {
 public:
  Runner(const ReplayPlan& plan, const ReplayOptions& options)
      : plan_(plan), options_(options), runs_(options.warmup + options.repeats),
        n_ops_(plan.ops.size()), n_transfers_(plan.transfers.size()),
        op_done_(new std::atomic<uint32_t>[n_ops_]()), transfer_done_(new std::atomic<uint32_t>[n_transfers_]()),
        op_start_(runs_ * n_ops_), op_end_(runs_ * n_ops_),
        transfer_start_(runs_ * n_transfers_), transfer_end_(runs_ * n_transfers_),
        checksum_(plan.devices.size(), 0.0), base_(Clock::now()) {
    for (size_t d = 0; d < plan.devices.size(); ++d) {
      memory_.push_back(std::make_unique<DeviceMemory>(options.arena_bytes, options.threads_per_device));
      arenas_.push_back(std::make_unique<tbb::task_arena>(options.threads_per_device, 1));
    }
    for (const PlanOp& op : plan.ops) {
      OpWork w{.kernel = op.kernel};
      if (op.kernel == KernelKind::compute) w.gemm = memory_[op.device]->tiling(replay_dims(op));
      if (op.kernel == KernelKind::memory) w.elements = stream_elements(op.bytes);
      work_.push_back(w);
    }
    std::map<std::pair<int32_t, int32_t>, size_t> pair_of;
    for (size_t t = 0; t < n_transfers_; ++t) {
      const PlanTransfer& x = plan.transfers[t];
      auto [it, fresh] = pair_of.try_emplace({x.src, x.dst}, pairs_.size());
      if (fresh) pairs_.push_back({.src = x.src, .dst = x.dst, .transfers = {}, .ring = {}});
      pairs_[it->second].transfers.push_back(static_cast<int32_t>(t));
      pair_of_transfer_.push_back(it->second);
    }
    // Every ring is half an arena, whatever the pair's transfers, so that a copy writes lines the ring's last
    // pass left long ago (out of the caches), as a graph's copies do between ops: sized by its own
    // transfers, the calibration's ping-pong rewrote lines still in the cache and copied 1.2-2x faster
    // than a graph's copies of the same size (bench/results/fidelity.md).
    const auto ring_floats = std::max<size_t>(1024, static_cast<size_t>(options.arena_bytes / 8));
    for (PairQueue& pair : pairs_) pair.ring.assign(ring_floats, 0.0f);
    pair_check_.assign(pairs_.size(), 0.0);
    sends_.resize(n_ops_);
    for (size_t t = 0; t < n_transfers_; ++t) sends_[plan.transfers[t].producer].push_back(static_cast<int32_t>(t));
  }

  /** Runs every run; the calling thread only paces the barriers. */
  void run() {
    const size_t copiers = options_.copy_threads ? pairs_.size() : 0;
    const auto workers = static_cast<std::ptrdiff_t>(plan_.devices.size() + copiers);
    std::barrier start(workers + 1), end(workers + 1);
    const std::vector<int> cpus = allowed_cpus();
    const bool pin = options_.pin_threads &&
                     plan_.devices.size() * static_cast<size_t>(options_.threads_per_device) <= cpus.size();
    spin_ = pin && copiers == 0 ? Clock::duration(kDedicatedSpin) : Clock::duration(kSharedSpin);
    std::vector<std::thread> threads;
    for (size_t d = 0; d < plan_.devices.size(); ++d)
      threads.emplace_back([&, d] {
        if (pin) pin_current_thread(cpus[d * static_cast<size_t>(options_.threads_per_device)]);
        arenas_[d]->execute([&] { device_loop(static_cast<int32_t>(d), start, end); });
      });
    for (size_t p = 0; p < copiers; ++p) threads.emplace_back([&, p] { pair_loop(pairs_[p], start, end); });
    std::exception_ptr failed;  // from the progress callback: rethrown once the threads are joined
    for (int32_t r = 0; r < runs_; ++r) {
      start.arrive_and_wait();
      end.arrive_and_wait();
      try {
        if (!failed) report_run(options_, r);
      } catch (...) {
        failed = std::current_exception();
      }
    }
    for (std::thread& t : threads) t.join();
    if (failed) std::rethrow_exception(failed);
  }

  ReplayResult result() const {
    ReplayResult out{.backend = "cpu"};
    out.wait_spin_s = std::chrono::duration<double>(spin_).count();
    std::vector<std::pair<double, int32_t>> by_step;
    for (int32_t r = options_.warmup; r < runs_; ++r) {
      double first = INFINITY, last = 0;
      for (size_t i = 0; i < n_ops_; ++i) first = std::min(first, op_start_[r * n_ops_ + i]), last = std::max(last, op_end_[r * n_ops_ + i]);
      for (size_t t = 0; t < n_transfers_; ++t) last = std::max(last, transfer_end_[r * n_transfers_ + t]);
      const double step = n_ops_ > 0 ? last - first : 0;
      out.step_times_s.push_back(step);
      by_step.emplace_back(step, r);
    }
    std::sort(by_step.begin(), by_step.end());
    const auto [median_s, median_run] = by_step[(by_step.size() - 1) / 2];
    out.step_time_s = median_s;
    double first = INFINITY;
    for (size_t i = 0; i < n_ops_; ++i) first = std::min(first, op_start_[median_run * n_ops_ + i]);
    if (n_ops_ == 0) first = 0;
    for (size_t i = 0; i < n_ops_; ++i) {
      out.op_start_s.push_back(op_start_[median_run * n_ops_ + i] - first);
      out.op_end_s.push_back(op_end_[median_run * n_ops_ + i] - first);
    }
    for (size_t t = 0; t < n_transfers_; ++t) {
      out.transfer_start_s.push_back(transfer_start_[median_run * n_transfers_ + t] - first);
      out.transfer_end_s.push_back(transfer_end_[median_run * n_transfers_ + t] - first);
      out.bytes_copied += 4.0 * static_cast<double>(std::max<int64_t>(plan_.transfers[t].bytes > 0 ? 1 : 0,
                                                                      std::llround(plan_.transfers[t].bytes / 4)));
    }
    out.device_busy_s.assign(plan_.devices.size(), 0.0);
    for (size_t i = 0; i < n_ops_; ++i) {
      out.device_busy_s[plan_.ops[i].device] += out.op_end_s[i] - out.op_start_s[i];
      out.flops_done += work_[i].gemm.flops();
      out.bytes_streamed += 8.0 * static_cast<double>(work_[i].elements);
    }
    out.device_checksum = checksum_;
    out.copy_checksum = std::accumulate(pair_check_.begin(), pair_check_.end(), 0.0);
    return out;
  }

 private:
  double now_s() const { return std::chrono::duration<double>(Clock::now() - base_).count(); }

  double run_kernel(int32_t device, const OpWork& w) {
    DeviceMemory& mem = *memory_[device];
    const int32_t parts = options_.threads_per_device;
    if (w.kernel == KernelKind::compute) {
      const int64_t operands = mem.take_operands(w.gemm);
      if (parts == 1) return mem.gemm(w.gemm, operands);
      std::vector<double> sums(parts, 0.0);
      tbb::parallel_for(0, parts, [&](int32_t p) { sums[p] = mem.gemm(w.gemm, operands, p, parts); });
      return std::accumulate(sums.begin(), sums.end(), 0.0);
    }
    if (w.kernel == KernelKind::memory) {
      const int64_t begin = mem.take(w.elements);
      if (parts == 1) return mem.stream(begin, w.elements);
      std::vector<double> sums(parts, 0.0);
      tbb::parallel_for(0, parts, [&](int32_t p) {
        const int64_t lo = w.elements * p / parts, hi = w.elements * (p + 1) / parts;
        sums[p] = mem.stream(begin + lo, hi - lo);
      });
      return std::accumulate(sums.begin(), sums.end(), 0.0);
    }
    return 0;
  }

  void device_loop(int32_t d, std::barrier<>& start, std::barrier<>& end) {
    const PlanDevice& device = plan_.devices[d];
    for (int32_t r = 0; r < runs_; ++r) {
      start.arrive_and_wait();
      const auto epoch = static_cast<uint32_t>(r + 1);
      memory_[d]->rewind();
      double checksum = 0;
      for (int32_t i : device.ops) {
        const PlanOp& op = plan_.ops[i];
        for (int32_t q : op.after_ops) wait_for(op_done_[q], epoch, spin_);
        for (int32_t t : op.after_transfers) wait_for(transfer_done_[t], epoch, spin_);
        const double t0 = now_s();
        checksum += run_kernel(d, work_[i]);
        const double t1 = now_s();
        op_start_[r * n_ops_ + i] = t0;
        op_end_[r * n_ops_ + i] = t1;
        signal(op_done_[i], epoch);
        if (!options_.copy_threads)
          for (int32_t t : sends_[i]) copy(t, r, epoch);
      }
      checksum_[d] = checksum;  // each run computes the same sum; the last one is reported
      end.arrive_and_wait();
    }
  }

  /** Copies transfer `t` of run `r` (its producer has ended); only one thread copies a pair's transfers. */
  void copy(int32_t t, int32_t r, uint32_t epoch) {
    const PlanTransfer& x = plan_.transfers[t];
    const size_t p = pair_of_transfer_[t];
    PairQueue& pair = pairs_[p];
    if (pair.transfers.front() == t) {  // the pair's first transfer of this run: rewind its rings
      pair.src_cursor = pair.dst_cursor = 0;
      pair_check_[p] = 0;
    }
    const double t0 = now_s();
    pair_check_[p] += memory_[x.src]->copy_to(pair.ring.data(), static_cast<int64_t>(pair.ring.size()),
                                              &pair.src_cursor, &pair.dst_cursor, x.bytes);
    const double t1 = now_s();
    transfer_start_[r * n_transfers_ + t] = t0;
    transfer_end_[r * n_transfers_ + t] = t1;
    signal(transfer_done_[t], epoch);
  }

  void pair_loop(const PairQueue& pair, std::barrier<>& start, std::barrier<>& end) {
    for (int32_t r = 0; r < runs_; ++r) {
      start.arrive_and_wait();
      const auto epoch = static_cast<uint32_t>(r + 1);
      for (int32_t t : pair.transfers) {
        wait_for(op_done_[plan_.transfers[t].producer], epoch, spin_);
        copy(t, r, epoch);
      }
      end.arrive_and_wait();
    }
  }

  const ReplayPlan& plan_;
  const ReplayOptions options_;
  const int32_t runs_;
  const size_t n_ops_, n_transfers_;
  std::vector<OpWork> work_;
  std::vector<std::unique_ptr<DeviceMemory>> memory_;
  std::vector<std::unique_ptr<tbb::task_arena>> arenas_;
  std::vector<PairQueue> pairs_;
  std::vector<size_t> pair_of_transfer_;
  std::vector<std::vector<int32_t>> sends_;  // per op: the transfers of its output, in plan order
  Flags op_done_, transfer_done_;
  // Per run and event (run-major); each slot is written by one thread, read after the last barrier.
  std::vector<double> op_start_, op_end_, transfer_start_, transfer_end_;
  std::vector<double> checksum_;
  std::vector<double> pair_check_;  // per pair, like checksum_
  Clock::time_point base_;
  Clock::duration spin_{kSharedSpin};  // how long a waiting thread spins (set by run())
};

}  // namespace

ReplayResult replay(const ReplayPlan& plan, const ReplayOptions& asked) {
  check_options(asked);
  validate_plan(plan);
  const ReplayOptions options = with_default_arena(asked, kCpuArenaBytes);
  const BlasThreads serial(1);  // a device is its own threads: no BLAS threads beside them
  Runner runner(plan, options);
  runner.run();
  ReplayResult result = runner.result();
  result.arena_bytes = options.arena_bytes;
  return result;
}

}  // namespace placelab::sim::replay::cpu
