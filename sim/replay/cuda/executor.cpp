// The CUDA replay backend (see executor.h), host side. The host enqueues every op and transfer of a run
// in one causal order (so every event a stream waits for has already been recorded), behind a gate
// kernel per GPU that holds the streams until everything is enqueued; each op and transfer is timed by
// events against a zero event per GPU recorded right after the gate opens. Devices of kind "cpu" run
// the CPU kernels as host functions on their own stream, timed by the same events around them, so all
// times are on one clock (host-clock stamps against a host function's "zero" would be off by that
// function's own dispatch latency, tens of microseconds, and could put a host op before the transfer it
// waits for). Every CUDA call is checked.
#include "sim/replay/cuda/executor.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "graphs/error.h"
#include "sim/replay/cpu/kernels.h"
#include "sim/replay/cuda/kernels.h"
#include "sim/replay/cuda/libraries.h"
#include "sim/replay/library_calls.h"

namespace placelab::sim::replay::cuda {

namespace {

void check_cuda(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess)
    throw Error(fmt::format("replay --backend cuda: {} failed at {}:{}: {}", call, file, line, cudaGetErrorString(err)));
}

#define PLACELAB_CUDA_CHECK(call) check_cuda((call), #call, __FILE__, __LINE__)

/**
 * A gated run whose enqueuing makes no progress for this long has a call blocked behind the closed gate,
 * which would wait for ever: the gate is then opened early. Seen on an H200 (driver 580): gated plans
 * with 100 or 200 host functions (a chain, a host-GPU ping-pong) never finished enqueuing, one with ~15
 * did; and under compute-sanitizer even the small test plans hung. Enqueuing one op takes microseconds.
 */
constexpr auto kGateStall = std::chrono::milliseconds(20);

void open_gate(int* flag) { std::atomic_ref<int>(*flag).store(1, std::memory_order_seq_cst); }

/**
 * Watches the enqueuing of a gated run: opens the gate when it stalls (kGateStall), and always when
 * the watch ends, also on the error path (else the gate kernel would spin for ever and the next
 * synchronising call, e.g. cudaFree, would never return).
 */
class GateWatch {
 public:
  GateWatch(int* flag, bool gated) : flag_(flag) {
    if (gated) thread_ = std::thread([this] { watch(); });
  }
  ~GateWatch() { open(); }
  GateWatch(const GateWatch&) = delete;
  GateWatch& operator=(const GateWatch&) = delete;

  /** One op or transfer enqueued. */
  void step() { progress_.fetch_add(1, std::memory_order_relaxed); }

  /** Opens the gate and ends the watch; true when the watch had to open it before (a stall). */
  bool open() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    open_gate(flag_);
    return stalled_;
  }

 private:
  void watch() {
    std::unique_lock lock(mutex_);
    int64_t seen = -1;
    while (!done_) {
      const int64_t now = progress_.load(std::memory_order_relaxed);
      if (now == seen) {
        stalled_ = true;
        open_gate(flag_);
        return;
      }
      seen = now;
      wake_.wait_for(lock, kGateStall, [this] { return done_; });
    }
  }

  int* flag_;
  std::atomic<int64_t> progress_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false, stalled_ = false;
  std::thread thread_;
};

GemmSize gemm_size(const graphs::GemmDims& d) { return {.batch = d.batch, .m = d.m, .n = d.n, .k = d.k}; }

/** What a host function of a "cpu" device needs. */
struct HostOp {
  cpu::DeviceMemory* memory = nullptr;
  KernelKind kernel = KernelKind::none;
  cpu::GemmTiling gemm;
  int64_t elements = 0;
  double* checksum = nullptr;
};

void CUDART_CB run_host_op(void* data) {
  auto* op = static_cast<HostOp*>(data);
  if (op->kernel == KernelKind::compute) *op->checksum += op->memory->gemm(op->gemm, op->memory->take_operands(op->gemm));
  if (op->kernel == KernelKind::memory) *op->checksum += op->memory->stream(op->memory->take(op->elements), op->elements);
}

void CUDART_CB rewind_host(void* data) { static_cast<cpu::DeviceMemory*>(data)->rewind(); }

struct Device {
  bool host = false;
  int gpu = 0;            // the GPU it is (or whose context its host stream lives in)
  int sms = 1;
  cudaStream_t stream = nullptr;
  // GPU: arena halves and the checksum in device memory; host: CPU memory and a pinned copy source.
  // The own kernels, rings and copies use arena_floats of each half; library calls read their operands
  // from all src_floats of src and write to dst (dst_floats), with a workspace.
  float* src = nullptr;
  float* dst = nullptr;
  int64_t arena_floats = 0, src_floats = 0, dst_floats = 0;
  GpuLibraries* libraries = nullptr;
  void* workspace = nullptr;
  double* checksum = nullptr;
  std::unique_ptr<cpu::DeviceMemory> memory;
  double host_checksum = 0;
  float* pinned_src = nullptr;
  int64_t pinned_floats = 0;
};

struct Pair {
  int32_t src = 0, dst = 0;
  int gpu = 0;  // the GPU whose context runs its stream
  cudaStream_t stream = nullptr;
  float* ring = nullptr;  // on the destination (device memory, or pinned host memory)
  int64_t ring_floats = 0;
};

class Runner {
 public:
  Runner(const ReplayPlan& plan, const ReplayOptions& options, int gpus) : plan_(plan), options_(options) {
    int next_gpu = 0;
    for (const PlanDevice& d : plan.devices) {
      Device dev;
      dev.host = d.kind == "cpu";
      if (!dev.host && next_gpu == gpus && !options.share_gpus)
        throw Error(fmt::format("replay --backend cuda: plan \"{}\" needs more GPUs than the {} here (device \"{}\"); "
                                "--share-gpus runs the extra devices as further streams of the GPUs", plan.graph, gpus, d.name));
      dev.gpu = dev.host ? 0 : next_gpu++ % gpus;
      devices_.push_back(std::move(dev));
    }
    prepare_library_calls();
    for (size_t i = 0; i < plan.ops.size(); ++i)
      if (const PlanOp& op = plan.ops[i]; op.kernel == KernelKind::compute && !devices_[op.device].host &&
                                          calls_[i].empty() && replay_dims(op).n > kMaxGemmColumnTiles * kGemmTile)
        throw Error(fmt::format("replay --backend cuda: op \"{}\" has n = {} columns, more than the GEMM kernel's {}; "
                                "swap its gemm dims' m and n (or run it on the libraries)", op.name, replay_dims(op).n, kMaxGemmColumnTiles * kGemmTile));
    gpus_used_ = std::clamp(next_gpu, 1, gpus);
    try {
      allocate();
    } catch (...) {
      release();
      throw;
    }
  }
  ~Runner() { release(); }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  ReplayResult run() {
    const int32_t runs = options_.warmup + options_.repeats;
    const size_t n = plan_.ops.size(), m = plan_.transfers.size();
    std::vector<double> steps;
    std::vector<std::vector<double>> starts, ends, xstarts, xends;
    for (int32_t r = 0; r < runs; ++r) {
      if (run_once() && options_.progress)
        options_.progress(fmt::format("run {}: enqueuing stalled behind the gate (a queue is full), which was opened "
                                      "early; the later runs are ungated", r + 1));
      report_run(options_, r);
      if (r < options_.warmup) continue;
      std::vector<double> s(n), e(n), xs(m), xe(m);
      read_times(s, e, xs, xe);
      double first = INFINITY, last = 0;
      for (size_t i = 0; i < n; ++i) first = std::min(first, s[i]), last = std::max(last, e[i]);
      for (size_t t = 0; t < m; ++t) last = std::max(last, xe[t]);
      if (n == 0) first = last = 0;
      for (double& v : s) v -= first;
      for (double& v : e) v -= first;
      for (double& v : xs) v -= first;
      for (double& v : xe) v -= first;
      steps.push_back(last - first);
      starts.push_back(std::move(s)), ends.push_back(std::move(e)), xstarts.push_back(std::move(xs)), xends.push_back(std::move(xe));
    }
    std::vector<size_t> order(steps.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return steps[a] < steps[b]; });
    const size_t med = order[(order.size() - 1) / 2];
    ReplayResult out{.backend = "cuda", .step_time_s = steps[med], .step_times_s = steps};
    out.op_start_s = starts[med], out.op_end_s = ends[med];
    out.transfer_start_s = xstarts[med], out.transfer_end_s = xends[med];
    out.device_busy_s.assign(devices_.size(), 0.0);
    for (size_t i = 0; i < n; ++i) {
      out.device_busy_s[plan_.ops[i].device] += out.op_end_s[i] - out.op_start_s[i];
      const Device& d = devices_[plan_.ops[i].device];
      if (plan_.ops[i].kernel == KernelKind::compute)
        out.flops_done += d.host || !calls_[i].empty() ? replay_dims(plan_.ops[i]).flops()
                                                       : gemm_flops_executed(gemm_size(replay_dims(plan_.ops[i])));
      if (plan_.ops[i].kernel == KernelKind::memory) out.bytes_streamed += 8.0 * static_cast<double>(cpu::stream_elements(plan_.ops[i].bytes));
    }
    for (const PlanTransfer& x : plan_.transfers) out.bytes_copied += 4.0 * static_cast<double>(floats_of(x.bytes));
    for (Device& d : devices_) {
      double sum = d.host_checksum;
      if (!d.host) {
        std::array<double, kChecksumDoubles> slots{};
        PLACELAB_CUDA_CHECK(cudaSetDevice(d.gpu));
        PLACELAB_CUDA_CHECK(cudaMemcpy(slots.data(), d.checksum, sizeof(slots), cudaMemcpyDeviceToHost));
        for (int32_t k = 0; k < kChecksumSlots; ++k) sum += slots[k * kChecksumStride];
      }
      out.device_checksum.push_back(sum);
    }
    out.gpu_kernels = gpu_kernels_name(options_.gpu_kernels);
    out.gpu_math = gpu_math_name(options_.gpu_math);
    out.library_ops = library_ops_;
    out.gpu_versions = gpu_versions();
    return out;
  }

 private:
  static int64_t floats_of(double bytes) { return std::max<int64_t>(bytes > 0 ? 1 : 0, std::llround(bytes / 4)); }

  /** Each GPU compute op's library calls, prepared (none: the own GEMM kernel runs it, as when a library has no algorithm). */
  void prepare_library_calls() {
    calls_.resize(plan_.ops.size());
    if (options_.gpu_kernels != GpuKernels::library) return;
    for (size_t i = 0; i < plan_.ops.size(); ++i) {
      const PlanOp& op = plan_.ops[i];
      Device& d = devices_[op.device];
      if (op.kernel != KernelKind::compute || d.host) continue;
      if (!d.libraries) d.libraries = &GpuLibraries::of(d.gpu);
      for (const LibraryCall& call : library_calls(op, has_cudnn())) {
        const PreparedCall* p = d.libraries->prepare(call, options_.gpu_math);
        if (!p) {
          calls_[i].clear();
          break;
        }
        calls_[i].push_back(p);
      }
      library_ops_ += !calls_[i].empty();
    }
  }

  /**
   * Sizes device `d`'s regions for its library calls: operands from a region of up to four times the
   * largest call's (each call's after the last one's, so that an op reads data of its own, as on the
   * CPU), outputs into one of the largest output. Throws when they do not fit the GPU's free memory.
   */
  void size_library_regions(size_t d, int64_t half) {
    Device& dev = devices_[d];
    int64_t in = 0, out = 0;
    size_t workspace = 1;
    const PlanOp* largest = nullptr;
    for (int32_t i : plan_.devices[d].ops)
      for (const PreparedCall* p : calls_[i]) {
        if (call_of(*p).input_span() > in) in = call_of(*p).input_span(), largest = &plan_.ops[i];
        out = std::max(out, call_of(*p).output_floats());
        workspace = std::max(workspace, workspace_bytes(*p));
      }
    size_t free = 0, total = 0;
    PLACELAB_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    const double room = 0.8 * static_cast<double>(free) / sizeof(float) - static_cast<double>(workspace) / sizeof(float);
    if (largest && static_cast<double>(in + out + 2 * half) > room)
      throw Error(fmt::format("replay --backend cuda: the library calls of op \"{}\" need {:.3g} GB of operands on GPU {}, "
                              "more than its free memory allows ({:.3g} GB); replay with --gpu-kernels own (its operands "
                              "cycle through the arena)", largest->name, 4e-9 * static_cast<double>(in + out), dev.gpu,
                              1e-9 * static_cast<double>(free)));
    const bool room_for_four = static_cast<double>(4 * in + out + 2 * half) <= room;
    dev.src_floats = std::max(half, room_for_four ? 4 * in : in);
    dev.dst_floats = std::max(half, out);
    PLACELAB_CUDA_CHECK(cudaMalloc(&dev.workspace, workspace));
  }

  /**
   * Runs every distinct library call of device `d` once, outside any measured run: a library's kernels
   * load on first use (CUDA's lazy loading), which may wait for the device to be idle, i.e. behind a
   * closed gate.
   */
  void prime_library_calls(size_t d) {
    Device& dev = devices_[d];
    std::vector<const PreparedCall*> seen;
    for (int32_t i : plan_.devices[d].ops)
      for (const PreparedCall* p : calls_[i])
        if (std::find(seen.begin(), seen.end(), p) == seen.end()) {
          seen.push_back(p);
          dev.libraries->run(*p, dev.src, dev.dst, dev.workspace, dev.stream);
        }
    PLACELAB_CUDA_CHECK(cudaStreamSynchronize(dev.stream));
  }

  void allocate() {
    const auto half = std::max<int64_t>(1024, static_cast<int64_t>(options_.arena_bytes / 8));
    std::vector<int64_t> out_floats(devices_.size(), 1024);
    for (const PlanTransfer& x : plan_.transfers)
      out_floats[x.src] = std::min(half, std::max(out_floats[x.src], floats_of(x.bytes)));
    for (size_t d = 0; d < devices_.size(); ++d) {
      Device& dev = devices_[d];
      PLACELAB_CUDA_CHECK(cudaSetDevice(dev.gpu));
      PLACELAB_CUDA_CHECK(cudaDeviceGetAttribute(&dev.sms, cudaDevAttrMultiProcessorCount, dev.gpu));
      PLACELAB_CUDA_CHECK(cudaStreamCreateWithFlags(&dev.stream, cudaStreamNonBlocking));
      if (dev.host) {
        dev.memory = std::make_unique<cpu::DeviceMemory>(options_.arena_bytes);
        dev.pinned_floats = out_floats[d];
        PLACELAB_CUDA_CHECK(cudaMallocHost(&dev.pinned_src, static_cast<size_t>(dev.pinned_floats) * sizeof(float)));
        for (int64_t i = 0; i < dev.pinned_floats; ++i) dev.pinned_src[i] = cpu::pattern(i);
        continue;
      }
      dev.arena_floats = dev.src_floats = dev.dst_floats = half;
      if (dev.libraries) size_library_regions(d, half);
      PLACELAB_CUDA_CHECK(cudaMalloc(&dev.src, static_cast<size_t>(dev.src_floats) * sizeof(float)));
      PLACELAB_CUDA_CHECK(cudaMalloc(&dev.dst, static_cast<size_t>(dev.dst_floats) * sizeof(float)));
      PLACELAB_CUDA_CHECK(cudaMalloc(&dev.checksum, kChecksumDoubles * sizeof(double)));
      PLACELAB_CUDA_CHECK(launch_fill(dev.src, dev.src_floats, dev.stream));
      PLACELAB_CUDA_CHECK(cudaStreamSynchronize(dev.stream));
      if (dev.libraries) prime_library_calls(d);
    }
    // Peer access where the GPUs allow it; cudaMemcpyPeerAsync stages through the host otherwise.
    for (const PlanTransfer& x : plan_.transfers) {
      const Device &a = devices_[x.src], &b = devices_[x.dst];
      if (a.host || b.host || a.gpu == b.gpu) continue;
      int can = 0;
      PLACELAB_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a.gpu, b.gpu));
      if (!can) continue;
      PLACELAB_CUDA_CHECK(cudaSetDevice(a.gpu));
      const cudaError_t err = cudaDeviceEnablePeerAccess(b.gpu, 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();  // clears the sticky-free error state
      else PLACELAB_CUDA_CHECK(err);
    }
    std::map<std::pair<int32_t, int32_t>, size_t> pair_of;
    for (size_t t = 0; t < plan_.transfers.size(); ++t) {
      const PlanTransfer& x = plan_.transfers[t];
      auto [it, fresh] = pair_of.try_emplace({x.src, x.dst}, pairs_.size());
      if (fresh) {
        const Device &a = devices_[x.src], &b = devices_[x.dst];
        pairs_.push_back({.src = x.src, .dst = x.dst, .gpu = a.host ? b.gpu : a.gpu});
      }
      Pair& p = pairs_[it->second];
      p.ring_floats = std::max(p.ring_floats, std::min(half, floats_of(x.bytes)));
      pair_of_transfer_.push_back(it->second);
    }
    for (Pair& p : pairs_) {
      p.ring_floats = std::max<int64_t>(p.ring_floats, 1024);
      PLACELAB_CUDA_CHECK(cudaSetDevice(p.gpu));
      PLACELAB_CUDA_CHECK(cudaStreamCreateWithFlags(&p.stream, cudaStreamNonBlocking));
      const Device& dst = devices_[p.dst];
      const size_t bytes = static_cast<size_t>(p.ring_floats) * sizeof(float);
      if (dst.host) {
        PLACELAB_CUDA_CHECK(cudaMallocHost(&p.ring, bytes));
      } else {
        PLACELAB_CUDA_CHECK(cudaSetDevice(dst.gpu));
        PLACELAB_CUDA_CHECK(cudaMalloc(&p.ring, bytes));
      }
    }
    // Events: timing ones for ops and transfers, recorded on the stream that runs them.
    auto make_event = [&](int gpu) {
      cudaEvent_t e = nullptr;
      PLACELAB_CUDA_CHECK(cudaSetDevice(gpu));
      PLACELAB_CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
      return e;
    };
    for (const PlanOp& op : plan_.ops) {
      start_.push_back(make_event(devices_[op.device].gpu));
      end_.push_back(make_event(devices_[op.device].gpu));
    }
    for (size_t t = 0; t < plan_.transfers.size(); ++t) {
      xstart_.push_back(make_event(pairs_[pair_of_transfer_[t]].gpu));
      xend_.push_back(make_event(pairs_[pair_of_transfer_[t]].gpu));
    }
    for (int g = 0; g < gpus_used_; ++g) {
      cudaStream_t s = nullptr;
      PLACELAB_CUDA_CHECK(cudaSetDevice(g));
      PLACELAB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      gate_streams_.push_back(s);
      zero_.push_back(make_event(g));
    }
    PLACELAB_CUDA_CHECK(cudaHostAlloc(&gate_flag_, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
    PLACELAB_CUDA_CHECK(cudaHostGetDevicePointer(&gate_device_, gate_flag_, 0));
    host_ops_.resize(plan_.ops.size());
    for (size_t i = 0; i < plan_.ops.size(); ++i) {
      const PlanOp& op = plan_.ops[i];
      Device& d = devices_[op.device];
      if (!d.host) continue;
      host_ops_[i] = {.memory = d.memory.get(), .kernel = op.kernel, .gemm = d.memory->tiling(replay_dims(op)),
                      .elements = op.kernel == KernelKind::memory ? cpu::stream_elements(op.bytes) : 0,
                      .checksum = &d.host_checksum};
    }
    order_ = causal_order();
    // The gate holds every stream; a stream can queue only so much, so large plans run ungated. A library
    // call counts as one kernel (some launch more; the watchdog opens the gate if a queue fills).
    std::vector<int64_t> per_stream(devices_.size() + pairs_.size(), 0);
    for (size_t i = 0; i < plan_.ops.size(); ++i) {
      const PlanOp& op = plan_.ops[i];
      const auto extra_calls = static_cast<int64_t>(std::max<size_t>(1, calls_[i].size()) - 1);
      per_stream[op.device] += kCommandsPerOp + extra_calls + static_cast<int64_t>(op.after_transfers.size());
      for (int32_t q : op.after_ops) per_stream[op.device] += plan_.ops[q].device != op.device;
    }
    for (size_t t = 0; t < plan_.transfers.size(); ++t) per_stream[devices_.size() + pair_of_transfer_[t]] += 4;
    gated_ = *std::max_element(per_stream.begin(), per_stream.end()) <= kGateLimit;
  }

  /** Ops (ids 0..n) and transfers (n..n+m) in an order where every dependency and stream predecessor comes first. */
  std::vector<int32_t> causal_order() const {
    const auto n = static_cast<int32_t>(plan_.ops.size()), m = static_cast<int32_t>(plan_.transfers.size());
    std::vector<std::vector<int32_t>> next(n + m);
    std::vector<int32_t> indegree(n + m, 0);
    auto edge = [&](int32_t a, int32_t b) { next[a].push_back(b), ++indegree[b]; };
    for (const PlanDevice& d : plan_.devices)
      for (size_t k = 1; k < d.ops.size(); ++k) edge(d.ops[k - 1], d.ops[k]);
    std::vector<int32_t> last(pairs_.size(), -1);
    for (int32_t t = 0; t < m; ++t) {
      int32_t& prev = last[pair_of_transfer_[t]];
      if (prev >= 0) edge(n + prev, n + t);
      prev = t;
      edge(plan_.transfers[t].producer, n + t);
    }
    for (int32_t i = 0; i < n; ++i) {
      for (int32_t q : plan_.ops[i].after_ops) edge(q, i);
      for (int32_t t : plan_.ops[i].after_transfers) edge(n + t, i);
    }
    std::vector<int32_t> order, ready;
    for (int32_t v = n + m; v-- > 0;)
      if (indegree[v] == 0) ready.push_back(v);
    while (!ready.empty()) {
      const int32_t v = ready.back();
      ready.pop_back();
      order.push_back(v);
      for (int32_t w : next[v])
        if (--indegree[w] == 0) ready.push_back(w);
    }
    return order;  // complete: validate_plan proved the graph acyclic
  }

  /** Runs the plan once; true when a gated run stalled (then the later runs are ungated). */
  bool run_once() {
    const auto n = static_cast<int32_t>(plan_.ops.size());
    std::atomic_ref<int>(*gate_flag_).store(gated_ ? 0 : 1, std::memory_order_seq_cst);
    GateWatch watch(gate_flag_, gated_);
    for (int g = 0; g < gpus_used_; ++g) {
      PLACELAB_CUDA_CHECK(cudaSetDevice(g));
      PLACELAB_CUDA_CHECK(launch_gate(gate_device_, gate_streams_[g]));
      PLACELAB_CUDA_CHECK(cudaEventRecord(zero_[g], gate_streams_[g]));
    }
    for (Device& d : devices_) {
      PLACELAB_CUDA_CHECK(cudaSetDevice(d.gpu));
      PLACELAB_CUDA_CHECK(cudaStreamWaitEvent(d.stream, zero_[d.gpu], 0));
      if (d.host) {
        d.host_checksum = 0;
        PLACELAB_CUDA_CHECK(cudaLaunchHostFunc(d.stream, rewind_host, d.memory.get()));
      } else {
        PLACELAB_CUDA_CHECK(cudaMemsetAsync(d.checksum, 0, kChecksumDoubles * sizeof(double), d.stream));
      }
    }
    for (Pair& p : pairs_) {
      PLACELAB_CUDA_CHECK(cudaSetDevice(p.gpu));
      PLACELAB_CUDA_CHECK(cudaStreamWaitEvent(p.stream, zero_[p.gpu], 0));
    }
    Cursors cursors{.stream = std::vector<int64_t>(devices_.size(), 0), .operands = std::vector<int64_t>(devices_.size(), 0),
                    .library = std::vector<int64_t>(devices_.size(), 0)};
    std::vector<int64_t> src_cursor(pairs_.size(), 0), dst_cursor(pairs_.size(), 0);
    for (int32_t v : order_) {
      if (v < n) {
        enqueue_op(v, cursors);
      } else {
        enqueue_transfer(v - n, src_cursor, dst_cursor);
      }
      watch.step();
    }
    const bool stalled = watch.open();  // opens every gate: the GPUs start now
    if (stalled) gated_ = false;
    for (int g = 0; g < gpus_used_; ++g) {
      PLACELAB_CUDA_CHECK(cudaSetDevice(g));
      PLACELAB_CUDA_CHECK(cudaDeviceSynchronize());
    }
    return stalled;
  }

  /** Per device: where the next memory op streams from, and where the next compute op's operands start. */
  struct Cursors {
    std::vector<int64_t> stream, operands, library;
  };

  void enqueue_op(int32_t i, Cursors& cursors) {
    const PlanOp& op = plan_.ops[i];
    Device& d = devices_[op.device];
    PLACELAB_CUDA_CHECK(cudaSetDevice(d.gpu));
    // An op of the same device ran before on this stream (the enqueue order is causal): no wait needed.
    for (int32_t q : op.after_ops)
      if (plan_.ops[q].device != op.device) PLACELAB_CUDA_CHECK(cudaStreamWaitEvent(d.stream, end_[q], 0));
    for (int32_t t : op.after_transfers) PLACELAB_CUDA_CHECK(cudaStreamWaitEvent(d.stream, xend_[t], 0));
    PLACELAB_CUDA_CHECK(cudaEventRecord(start_[i], d.stream));
    if (d.host) {
      PLACELAB_CUDA_CHECK(cudaLaunchHostFunc(d.stream, run_host_op, &host_ops_[i]));
    } else if (!calls_[i].empty()) {
      for (const PreparedCall* p : calls_[i]) {  // operands after the last call's, wrapping
        int64_t& at = cursors.library[op.device];
        const int64_t span = aligned_floats(call_of(*p).input_span());
        if (at + span > d.src_floats) at = 0;
        d.libraries->run(*p, d.src + at, d.dst, d.workspace, d.stream);
        at += span;
      }
    } else if (op.kernel == KernelKind::compute) {
      // Each op's operands after the last one's, as on the CPU: not the ones the op before left in the L2.
      const graphs::GemmDims dims = replay_dims(op);
      int64_t& at = cursors.operands[op.device];
      PLACELAB_CUDA_CHECK(launch_gemm(gemm_size(dims), d.src, d.arena_floats, at, d.dst, d.arena_floats, d.checksum, d.sms, d.stream));
      at = next_operands(at, dims, d.arena_floats);
    } else if (op.kernel == KernelKind::memory) {
      const int64_t elements = cpu::stream_elements(op.bytes);
      int64_t& at = cursors.stream[op.device];
      PLACELAB_CUDA_CHECK(launch_stream(d.src, d.dst, d.arena_floats, at, elements, d.checksum, d.sms, d.stream));
      at = (at + elements) % d.arena_floats;
    } else {
      PLACELAB_CUDA_CHECK(launch_empty(d.stream));
    }
    PLACELAB_CUDA_CHECK(cudaEventRecord(end_[i], d.stream));
  }

  void enqueue_transfer(int32_t t, std::vector<int64_t>& src_cursor, std::vector<int64_t>& dst_cursor) {
    const PlanTransfer& x = plan_.transfers[t];
    const size_t pi = pair_of_transfer_[t];
    Pair& p = pairs_[pi];
    const Device &a = devices_[x.src], &b = devices_[x.dst];
    PLACELAB_CUDA_CHECK(cudaSetDevice(p.gpu));
    PLACELAB_CUDA_CHECK(cudaStreamWaitEvent(p.stream, end_[x.producer], 0));
    PLACELAB_CUDA_CHECK(cudaEventRecord(xstart_[t], p.stream));
    const float* base = a.host ? a.pinned_src : a.src;
    const int64_t base_floats = a.host ? a.pinned_floats : a.arena_floats;
    for (int64_t left = floats_of(x.bytes); left > 0;) {  // in pieces that fit both rings
      const int64_t len = std::min({left, base_floats - src_cursor[pi], p.ring_floats - dst_cursor[pi]});
      const size_t bytes = static_cast<size_t>(len) * sizeof(float);
      float* to = p.ring + dst_cursor[pi];
      const float* from = base + src_cursor[pi];
      if (!a.host && !b.host) PLACELAB_CUDA_CHECK(cudaMemcpyPeerAsync(to, b.gpu, from, a.gpu, bytes, p.stream));
      else PLACELAB_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, p.stream));
      src_cursor[pi] = (src_cursor[pi] + len) % base_floats;
      dst_cursor[pi] = (dst_cursor[pi] + len) % p.ring_floats;
      left -= len;
    }
    PLACELAB_CUDA_CHECK(cudaEventRecord(xend_[t], p.stream));
  }

  /** Seconds of `e` after the zero event of `gpu`. */
  double since_zero_s(int gpu, cudaEvent_t e) const {
    float ms = 0;
    PLACELAB_CUDA_CHECK(cudaEventElapsedTime(&ms, zero_[gpu], e));
    return 1e-3 * ms;
  }

  void read_times(std::vector<double>& s, std::vector<double>& e, std::vector<double>& xs, std::vector<double>& xe) const {
    for (size_t i = 0; i < plan_.ops.size(); ++i) {
      const int gpu = devices_[plan_.ops[i].device].gpu;  // a host device's stream lives on GPU 0
      s[i] = since_zero_s(gpu, start_[i]);
      e[i] = since_zero_s(gpu, end_[i]);
    }
    for (size_t t = 0; t < plan_.transfers.size(); ++t) {
      const int gpu = pairs_[pair_of_transfer_[t]].gpu;
      xs[t] = since_zero_s(gpu, xstart_[t]);
      xe[t] = since_zero_s(gpu, xend_[t]);
    }
  }

  /** Frees everything (errors ignored: this runs on the error path too). */
  void release() noexcept {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    for (cudaStream_t s : gate_streams_) cudaStreamDestroy(s);
    for (Pair& p : pairs_) {
      if (p.stream) cudaStreamDestroy(p.stream);
      if (p.ring && devices_[p.dst].host) cudaFreeHost(p.ring);
      else if (p.ring) cudaFree(p.ring);
    }
    for (Device& d : devices_) {
      if (d.stream) cudaStreamDestroy(d.stream);
      if (d.src) cudaFree(d.src);
      if (d.dst) cudaFree(d.dst);
      if (d.checksum) cudaFree(d.checksum);
      if (d.workspace) cudaFree(d.workspace);
      if (d.pinned_src) cudaFreeHost(d.pinned_src);
    }
    if (gate_flag_) cudaFreeHost(gate_flag_);
    events_.clear(), gate_streams_.clear(), pairs_.clear(), devices_.clear();
    gate_flag_ = nullptr;
  }

  const ReplayPlan& plan_;
  const ReplayOptions options_;
  std::vector<Device> devices_;
  std::vector<Pair> pairs_;
  std::vector<size_t> pair_of_transfer_;
  int gpus_used_ = 1;
  std::vector<cudaEvent_t> events_, start_, end_, xstart_, xend_, zero_;
  std::vector<cudaStream_t> gate_streams_;
  std::vector<HostOp> host_ops_;
  std::vector<std::vector<const PreparedCall*>> calls_;  // per op: its library calls (none: the own kernels)
  int64_t library_ops_ = 0;
  std::vector<int32_t> order_;
  int* gate_flag_ = nullptr;
  int* gate_device_ = nullptr;
  bool gated_ = true;
};

}  // namespace

bool built() { return true; }

int device_count(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why) *why = fmt::format("no usable CUDA device: {}", cudaGetErrorString(err));
    cudaGetLastError();
    return 0;
  }
  if (count == 0 && why) *why = "no CUDA device found";
  return count;
}

std::string versions() { return gpu_versions(); }

double device_memory_bytes(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return 0;
  return static_cast<double>(prop.totalGlobalMem);
}

ReplayResult replay(const ReplayPlan& plan, const ReplayOptions& asked) {
  std::string why;
  const int gpus = device_count(&why);
  if (gpus == 0) throw Error("replay --backend cuda: " + why);
  check_options(asked);
  validate_plan(plan);
  const ReplayOptions options = with_default_arena(asked, kCudaArenaBytes);
  Runner runner(plan, options, gpus);
  ReplayResult result = runner.run();
  result.arena_bytes = options.arena_bytes;
  return result;
}

}  // namespace placelab::sim::replay::cuda
