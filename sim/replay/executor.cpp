// Backend dispatch, option checks and the JSON of a replay result.
#include "sim/replay/executor.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "graphs/error.h"
#include "sim/replay/cpu/executor.h"
#include "sim/replay/cuda/executor.h"

namespace placelab::sim::replay {

void check_backend(std::string_view backend) {
  if (backend != "cpu" && backend != "cuda")
    throw Error(fmt::format("replay: backend is \"{}\", expected \"cpu\" or \"cuda\"", backend));
}

void report_run(const ReplayOptions& options, int32_t run) {
  if (!options.progress) return;
  options.progress(fmt::format("run {} of {}{}", run + 1, options.warmup + options.repeats,
                               run < options.warmup ? " (warm-up)" : ""));
}

void check_options(const ReplayOptions& options) {
  if (options.warmup < 0) throw Error(fmt::format("replay: warmup is {}, must be >= 0", options.warmup));
  if (options.repeats < 1) throw Error(fmt::format("replay: repeats is {}, must be >= 1", options.repeats));
  if (options.threads_per_device < 1 || options.threads_per_device > 256)
    throw Error(fmt::format("replay: threads per device is {}, must be in [1, 256]", options.threads_per_device));
  if (!(options.arena_bytes == 0 || (options.arena_bytes >= 4096 && options.arena_bytes <= 64.0 * (1LL << 30))))
    throw Error(fmt::format("replay: arena bytes is {}, must be in [4 KiB, 64 GiB] (or 0 for the backend's default)",
                            options.arena_bytes));
}

std::string_view gpu_kernels_name(GpuKernels kernels) { return kernels == GpuKernels::library ? "library" : "own"; }

std::string_view gpu_math_name(GpuMath math) { return math == GpuMath::tf32 ? "tf32" : "fp32"; }

GpuKernels parse_gpu_kernels(std::string_view name, std::string_view where) {
  for (GpuKernels k : {GpuKernels::library, GpuKernels::own})
    if (gpu_kernels_name(k) == name) return k;
  throw Error(fmt::format("{}: GPU kernels \"{}\": expected \"library\" (cuBLASLt and cuDNN) or \"own\" (the "
                          "project's GEMM kernel)", where, name));
}

GpuMath parse_gpu_math(std::string_view name, std::string_view where) {
  for (GpuMath m : {GpuMath::tf32, GpuMath::fp32})
    if (gpu_math_name(m) == name) return m;
  throw Error(fmt::format("{}: GPU math \"{}\": expected \"tf32\" (tensor cores) or \"fp32\"", where, name));
}

ReplayOptions with_default_arena(ReplayOptions options, double default_bytes) {
  if (options.arena_bytes == 0) options.arena_bytes = default_bytes;
  return options;
}

ReplayResult run_replay(const ReplayPlan& plan, std::string_view backend, const ReplayOptions& options) {
  check_backend(backend);
  return backend == "cpu" ? cpu::replay(plan, options) : cuda::replay(plan, options);
}

double lower_median(std::vector<double> values) {
  if (values.empty()) return 0;
  auto mid = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

nlohmann::json replay_result_to_json(const ReplayPlan& plan, const ReplayResult& result) {
  nlohmann::json devices = nlohmann::json::array();
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    nlohmann::json dev = {{"name", plan.devices[d].name}, {"ops", plan.devices[d].ops.size()}};
    if (d < result.device_busy_s.size()) dev["busy_s"] = result.device_busy_s[d];
    if (d < result.device_checksum.size()) dev["checksum"] = result.device_checksum[d];
    devices.push_back(dev);
  }
  const double error = plan.predicted_step_s > 0 ? result.step_time_s / plan.predicted_step_s - 1 : 0;
  nlohmann::json doc = {{"graph", plan.graph},
                        {"cluster", plan.cluster},
                        {"backend", result.backend},
                        {"ops", plan.ops.size()},
                        {"transfers", plan.transfers.size()},
                        {"predicted_step_s", plan.predicted_step_s},
                        {"measured_step_s", result.step_time_s},
                        {"relative_error", error},
                        {"step_times_s", result.step_times_s},
                        {"flops_done", result.flops_done},
                        {"bytes_streamed", result.bytes_streamed},
                        {"bytes_copied", result.bytes_copied},
                        {"wait_spin_s", result.wait_spin_s},
                        {"arena_bytes", result.arena_bytes},
                        {"copy_checksum", result.copy_checksum},
                        {"devices", devices}};
  if (!result.gpu_kernels.empty()) {
    doc["gpu_kernels"] = result.gpu_kernels;
    doc["gpu_math"] = result.gpu_math;
    doc["library_ops"] = result.library_ops;
    doc["gpu_versions"] = result.gpu_versions;
  }
  return doc;
}

nlohmann::json replay_trace_json(const ReplayPlan& plan, const ReplayResult& result) {
  nlohmann::json events = nlohmann::json::array();
  const auto rows = static_cast<int64_t>(plan.devices.size());
  auto meta = [&](int pid, int64_t tid, const std::string& name) {
    events.push_back({{"ph", "M"}, {"pid", pid}, {"tid", tid}, {"name", "thread_name"}, {"args", {{"name", name}}}});
  };
  auto span = [&](int pid, int64_t tid, const std::string& name, double start_s, double end_s) {
    events.push_back({{"ph", "X"}, {"pid", pid}, {"tid", tid}, {"name", name}, {"ts", 1e6 * start_s},
                      {"dur", 1e6 * std::max(0.0, end_s - start_s)}});
  };
  for (int pid = 0; pid < 2; ++pid) {
    events.push_back({{"ph", "M"}, {"pid", pid}, {"name", "process_name"},
                      {"args", {{"name", pid == 0 ? "measured (" + result.backend + ")" : std::string("predicted")}}}});
    for (int64_t d = 0; d < rows; ++d) meta(pid, d, plan.devices[d].name);
  }
  for (size_t i = 0; i < plan.ops.size() && i < result.op_start_s.size(); ++i) {
    span(0, plan.ops[i].device, plan.ops[i].name, result.op_start_s[i], result.op_end_s[i]);
    span(1, plan.ops[i].device, plan.ops[i].name, plan.ops[i].predicted_start_s, plan.ops[i].predicted_end_s);
  }
  for (size_t t = 0; t < plan.transfers.size() && t < result.transfer_start_s.size(); ++t) {
    const PlanTransfer& x = plan.transfers[t];
    const int64_t tid = rows + x.src * rows + x.dst;  // one row per ordered pair, after the devices
    const std::string name = "copy " + plan.ops[x.producer].name;
    span(0, tid, name, result.transfer_start_s[t], result.transfer_end_s[t]);
    span(1, tid, name, x.predicted_start_s, x.predicted_end_s);
  }
  for (int pid = 0; pid < 2; ++pid)
    for (int64_t a = 0; a < rows; ++a)
      for (int64_t b = 0; b < rows; ++b)
        if (a != b) meta(pid, rows + a * rows + b, plan.devices[a].name + " -> " + plan.devices[b].name);
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace placelab::sim::replay
