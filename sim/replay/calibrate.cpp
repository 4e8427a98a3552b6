// Calibration micro-benchmarks (chains of equal ops per device, a ping-pong of transfers between two
// devices), run through the replay backends, and the least-squares fits of the roofline and link models.
#include "sim/replay/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/io.h"
#include "graphs/json_util.h"
#include "sim/cost_model.h"
#include "sim/replay/cuda/executor.h"

namespace placelab::sim::replay {

namespace {

/** Every device runs its own chain of `length` equal ops (each after the previous). */
ReplayPlan chain_plan(int32_t devices, int32_t length, KernelKind kernel, double flops, double bytes,
                      const std::string& kind, const graphs::GemmDims& gemm = {}, const std::string& type = "") {
  ReplayPlan plan{.graph = "calibration-chain", .cluster = "calibration"};
  for (int32_t d = 0; d < devices; ++d) {
    plan.devices.push_back({.name = fmt::format("{}{}", kind, d), .kind = kind, .ops = {}});
    for (int32_t i = 0; i < length; ++i) {
      const auto id = static_cast<int32_t>(plan.ops.size());
      plan.ops.push_back({.name = fmt::format("d{}/op{}", d, i), .type = type.empty() ? std::string(kernel_kind_name(kernel)) : type,
                          .device = d, .kernel = kernel, .flops = flops, .bytes = bytes, .gemm = gemm,
                          .after_ops = i > 0 ? std::vector<int32_t>{id - 1} : std::vector<int32_t>{}});
      plan.devices[d].ops.push_back(id);
    }
  }
  return plan;
}

/**
 * Ops alternate between devices 0 and 1 (of kinds `kind0` and `kind1`), each hop a transfer of `bytes`:
 * empty ops, or square products of `hop_flops`.
 */
ReplayPlan ping_pong_plan(int32_t hops, double bytes, const std::string& kind0, const std::string& kind1,
                          double hop_flops = 0) {
  ReplayPlan plan{.graph = "calibration-ping-pong", .cluster = "calibration"};
  for (int32_t d = 0; d < 2; ++d) {
    const std::string& kind = d == 0 ? kind0 : kind1;
    plan.devices.push_back({.name = fmt::format("{}{}", kind, kind0 == kind1 ? d : 0), .kind = kind, .ops = {}});
  }
  const KernelKind kernel = hop_flops > 0 ? KernelKind::compute : KernelKind::none;
  for (int32_t i = 0; i <= hops; ++i) {
    PlanOp op{.name = fmt::format("hop{}", i), .type = std::string(kernel_kind_name(kernel)), .device = i % 2,
              .kernel = kernel, .flops = hop_flops};
    if (i > 0) {
      op.after_transfers = {i - 1};
      plan.transfers.push_back({.producer = i - 1, .src = (i - 1) % 2, .dst = i % 2, .bytes = bytes});
    }
    plan.ops.push_back(op);
    plan.devices[i % 2].ops.push_back(i);
  }
  return plan;
}

/**
 * Device 0 runs `hops` ops (square products of `hop_flops`, or empty ones), each followed by a copy of
 * `bytes` to device 1, while device 1 streams `streams` ops of `stream_bytes` each, a chain of its own:
 * copies made beside a busy core, as a graph's are when both devices work.
 */
ReplayPlan loaded_copy_plan(int32_t hops, double bytes, int32_t streams, double stream_bytes, const std::string& kind,
                            double hop_flops) {
  ReplayPlan plan{.graph = "calibration-loaded-copies", .cluster = "calibration"};
  for (int32_t d = 0; d < 2; ++d) plan.devices.push_back({.name = fmt::format("{}{}", kind, d), .kind = kind, .ops = {}});
  auto chain = [&](int32_t device, int32_t length, KernelKind kernel, double op_flops, double op_bytes) {
    for (int32_t i = 0; i < length; ++i) {
      const auto id = static_cast<int32_t>(plan.ops.size());
      plan.ops.push_back({.name = fmt::format("d{}/op{}", device, i), .type = std::string(kernel_kind_name(kernel)),
                          .device = device, .kernel = kernel, .flops = op_flops, .bytes = op_bytes,
                          .after_ops = i > 0 ? std::vector<int32_t>{id - 1} : std::vector<int32_t>{}});
      plan.devices[device].ops.push_back(id);
      if (device == 0) plan.transfers.push_back({.producer = id, .src = 0, .dst = 1, .bytes = bytes});
    }
  };
  chain(0, hops, hop_flops > 0 ? KernelKind::compute : KernelKind::none, hop_flops, 0);
  chain(1, streams, KernelKind::memory, 0, stream_bytes);
  return plan;
}

/** The median over a replay's transfers of each one's own time (in its median run). */
double median_copy_s(const ReplayResult& r) {
  std::vector<double> spans;
  for (size_t i = 0; i < r.transfer_end_s.size(); ++i) spans.push_back(r.transfer_end_s[i] - r.transfer_start_s[i]);
  return spans.empty() ? 0 : lower_median(spans);
}

/**
 * Seconds per op (or hop) of plans made by `make(length)` (of length making a run ~run_s, at most
 * max_length), fastest run.
 */
template <typename MakePlan>
double per_op_s(std::string_view backend, const CalibrationOptions& options, int32_t max_length, MakePlan make) {
  ReplayOptions probe = options.replay;
  probe.warmup = std::min(probe.warmup, 1);
  probe.repeats = 1;
  constexpr int32_t kProbeLength = 4;
  const double probe_s = run_replay(make(kProbeLength), backend, probe).step_time_s / kProbeLength;
  const auto length = static_cast<int32_t>(std::clamp(options.run_s / std::max(probe_s, 1e-9), 4.0, 1.0 * max_length));
  // The fastest run: what the machine can do, least disturbed by other processes (on a shared
  // machine the median of a calibration run mixes in their load, which a later replay will not share).
  const std::vector<double> runs = run_replay(make(length), backend, options.replay).step_times_s;
  return *std::min_element(runs.begin(), runs.end()) / length;
}

std::vector<double> log_sizes(double lo, double hi, int32_t count) {
  std::vector<double> out;
  for (int32_t i = 0; i < count; ++i)
    out.push_back(std::round(lo * std::pow(hi / lo, count > 1 ? i / (count - 1.0) : 0.0)));
  return out;
}

/** Solves the n x n system `a x = b` by Gaussian elimination with partial pivoting; false when singular. */
template <size_t N>
bool solve(std::array<std::array<double, N>, N> a, std::array<double, N> b, std::array<double, N>& x) {
  for (size_t c = 0; c < N; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < N; ++r)
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    if (std::abs(a[p][c]) < 1e-300) return false;
    std::swap(a[p], a[c]);
    std::swap(b[p], b[c]);
    for (size_t r = c + 1; r < N; ++r) {
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < N; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (size_t c = N; c-- > 0;) {
    double s = b[c];
    for (size_t k = c + 1; k < N; ++k) s -= a[c][k] * x[k];
    x[c] = s / a[c][c];
  }
  return true;
}

/**
 * Least squares of sum_i (row_i . x - target_i)^2, targets 1 when not given (rows already divided by the
 * measured time).
 */
template <size_t N>
bool least_squares(const std::vector<std::array<double, N>>& rows, std::array<double, N>& x,
                   const std::vector<double>* targets = nullptr) {
  std::array<std::array<double, N>, N> ata{};
  std::array<double, N> atb{};
  for (size_t k = 0; k < rows.size(); ++k)
    for (size_t i = 0; i < N; ++i) {
      const auto& r = rows[k];
      atb[i] += r[i] * (targets ? (*targets)[k] : 1.0);
      for (size_t j = 0; j < N; ++j) ata[i][j] += r[i] * r[j];
    }
  return solve(ata, atb, x);
}

constexpr std::array<graphs::GemmDims, 14> kShapes{{
    {1, 16384, 256, 16}, {1, 32768, 128, 24}, {1, 4096, 512, 48},      // small k
    {1, 16384, 16, 512}, {1, 32768, 8, 256}, {1, 8192, 40, 1024},      // small n
    {1, 16, 2048, 2048}, {1, 64, 1024, 4096}, {1, 200, 4096, 1024},    // small m
    {1, 65536, 64, 64}, {1, 8192, 128, 256}, {1, 1024, 256, 2048},     // large A and C; moderately long
    {64, 96, 96, 64}, {256, 48, 48, 32},                                // batches of small products
}};
constexpr std::array<graphs::GemmDims, 4> kQuickShapes{{{1, 2048, 16, 64}, {1, 16, 256, 256}, {4, 64, 64, 8}, {2, 512, 32, 32}}};

/**
 * Least squares of sum_i (row_i . x - target_i)^2 with x >= 0 (no element makes a product faster), by
 * coordinate descent on the normal equations, which converges for their positive semi-definite matrix.
 */
std::array<double, 3> non_negative_least_squares(const std::vector<std::array<double, 3>>& rows,
                                                 const std::vector<double>& targets) {
  std::array<std::array<double, 3>, 3> ata{};
  std::array<double, 3> atb{}, x{};
  for (size_t k = 0; k < rows.size(); ++k)
    for (size_t i = 0; i < 3; ++i) {
      atb[i] += rows[k][i] * targets[k];
      for (size_t j = 0; j < 3; ++j) ata[i][j] += rows[k][i] * rows[k][j];
    }
  for (int32_t sweep = 0; sweep < 500; ++sweep)
    for (size_t i = 0; i < 3; ++i) {
      if (!(ata[i][i] > 0)) continue;
      double r = atb[i];
      for (size_t j = 0; j < 3; ++j)
        if (j != i) r -= ata[i][j] * x[j];
      x[i] = std::max(0.0, r / ata[i][i]);
    }
  return x;
}

}  // namespace

RooflineFit fit_roofline(std::span<const CalibrationPoint> points, std::string_view device) {
  // Unknowns (x = 1/P, y = 1/W, L); each point divided by its time, so the error is relative.
  std::vector<std::array<double, 3>> rows;
  int32_t compute = 0, memory = 0;
  for (const CalibrationPoint& p : points) {
    if (!(p.time_s > 0) || p.device != device) continue;
    if (p.what == "compute") rows.push_back({p.size / p.time_s, 0, 1 / p.time_s}), ++compute;
    else if (p.what == "memory") rows.push_back({0, p.size / p.time_s, 1 / p.time_s}), ++memory;
    else if (p.what == "launch") rows.push_back({0, 0, 1 / p.time_s});
  }
  if (compute == 0 || memory == 0)
    throw Error(fmt::format("calibration: fitting the roofline needs compute and memory points (got {} and {})", compute, memory));
  std::array<double, 3> x{};
  if (!least_squares(rows, x) || x[2] < 0) {
    // A negative launch overhead fits no machine: fit the rates alone with L = 0.
    std::vector<std::array<double, 2>> rates;
    for (const auto& r : rows)
      if (r[0] > 0 || r[1] > 0) rates.push_back({r[0], r[1]});
    std::array<double, 2> xy{};
    x = least_squares(rates, xy) ? std::array<double, 3>{xy[0], xy[1], 0} : std::array<double, 3>{0, 0, 0};
  }
  // Noise can make a rate's coefficient non-positive (an infinite rate): use the best rate measured.
  for (int32_t k = 0; k < 2; ++k) {
    if (x[k] > 0) continue;
    double best = 0;
    for (const auto& r : rows) best = std::max(best, r[k] / (1 - std::min(0.5, x[2] * r[2])));
    x[k] = best > 0 ? 1 / best : 1;
  }
  RooflineFit fit{.flops_per_s = 1 / x[0], .bandwidth_bytes_per_s = 1 / x[1], .launch_s = x[2]};
  int32_t n = 0;
  for (const CalibrationPoint& p : points) {
    if (!(p.time_s > 0) || p.device != device || (p.what != "compute" && p.what != "memory" && p.what != "launch")) continue;
    const double t = (p.what == "compute" ? p.size * x[0] : p.what == "memory" ? p.size * x[1] : 0) + x[2];
    fit.mape += std::abs(t / p.time_s - 1);
    ++n;
  }
  fit.mape /= n;
  return fit;
}

namespace {

// The efficiency curve of the `what` points of `device` against `rate`: size / (rate (t - fixed_s)) per
// size, repeated sizes merged (their median). Adds each inner point's leave-one-out error, predicted from
// the curve without it, to `error` and counts it in `inner`. Empty without such points.
EfficiencyCurve curve_of(std::span<const CalibrationPoint> points, std::string_view what, std::string_view device,
                         double rate, double fixed_s, double& error, int32_t& inner) {
  // Bounds on an efficiency: an op at or under the launch overhead would otherwise get an infinite one.
  constexpr double kLeast = 1e-3, kMost = 1e3;
  std::map<double, std::vector<double>> times;
  for (const CalibrationPoint& p : points)
    if (p.what == what && p.device == device && p.size > 0 && p.time_s > 0) times[p.size].push_back(p.time_s);
  EfficiencyCurve curve;
  std::vector<double> measured;
  for (auto& [size, ts] : times) {
    std::nth_element(ts.begin(), ts.begin() + static_cast<std::ptrdiff_t>(ts.size() / 2), ts.end());
    const double t = ts[ts.size() / 2];
    curve.size.push_back(size);
    curve.efficiency.push_back(std::clamp(size / (rate * std::max(t - fixed_s, 1e-12)), kLeast, kMost));
    measured.push_back(t);
  }
  for (size_t i = 1; i + 1 < curve.size.size(); ++i) {
    EfficiencyCurve without = curve;
    without.size.erase(without.size.begin() + static_cast<std::ptrdiff_t>(i));
    without.efficiency.erase(without.efficiency.begin() + static_cast<std::ptrdiff_t>(i));
    const double predicted = curve.size[i] / (rate * without.at(curve.size[i])) + fixed_s;
    error += std::abs(predicted / measured[i] - 1);
    ++inner;
  }
  return curve;
}

}  // namespace

CurveFit fit_curves(std::span<const CalibrationPoint> points, const RooflineFit& roofline, std::string_view device) {
  CurveFit fit;
  double error = 0;
  int32_t inner = 0;
  for (auto [what, op_class, rate] : {std::tuple{"compute", "gemm", roofline.flops_per_s},
                                      std::tuple{"conv", "conv", roofline.flops_per_s},
                                      std::tuple{"memory", "elementwise", roofline.bandwidth_bytes_per_s}}) {
    EfficiencyCurve curve = curve_of(points, what, device, rate, roofline.launch_s, error, inner);
    if (!curve.size.empty()) fit.curves.emplace(op_class, std::move(curve));
  }
  fit.mape = inner > 0 ? error / inner : 0;
  return fit;
}

ShapeFit fit_shapes(std::span<const CalibrationPoint> points, const RooflineFit& roofline, const CurveFit& curves,
                    std::string_view device) {
  auto gemm_curve = curves.curves.find("gemm");
  // The square product's time on the fitted roofline and curve, and the elements beyond its A, B and C.
  struct Row {
    double measured_s, square_s;
    std::array<double, 3> extra;
  };
  std::vector<Row> shaped;
  for (const CalibrationPoint& p : points) {
    if (p.what != "shape" || p.device != device || !(p.time_s > 0) || !p.gemm.known()) continue;
    const double f = p.gemm.flops();
    const double e = gemm_curve != curves.curves.end() ? gemm_curve->second.at(f) : 1;
    shaped.push_back({p.time_s, f / (roofline.flops_per_s * e) + roofline.launch_s, extra_elements(p.gemm)});
  }
  ShapeFit fit;
  if (shaped.size() < 4) return fit;
  // The costs fitted to the rows but `skip` (none: SIZE_MAX), and their error on `r`.
  auto costs = [&](size_t skip) {
    std::vector<std::array<double, 3>> rows;
    std::vector<double> targets;
    for (size_t i = 0; i < shaped.size(); ++i) {
      if (i == skip) continue;
      const Row& r = shaped[i];
      rows.push_back({r.extra[0] / r.measured_s, r.extra[1] / r.measured_s, r.extra[2] / r.measured_s});
      targets.push_back((r.measured_s - r.square_s) / r.measured_s);
    }
    return non_negative_least_squares(rows, targets);
  };
  auto error = [](const Row& r, const std::array<double, 3>& x) {  // as shaped_time_s prices it
    const double extra = std::max(0.0, x[0] * r.extra[0] + x[1] * r.extra[1] + x[2] * r.extra[2]);
    return std::abs(r.square_s + extra - r.measured_s) / r.measured_s;
  };
  fit.element_s = costs(SIZE_MAX);
  for (size_t i = 0; i < shaped.size(); ++i) {
    fit.mape += error(shaped[i], fit.element_s);
    fit.leave_one_out_mape += error(shaped[i], costs(i));
    fit.square_mape += std::abs(shaped[i].square_s / shaped[i].measured_s - 1);
  }
  const auto n = static_cast<double>(shaped.size());
  fit.mape /= n, fit.leave_one_out_mape /= n, fit.square_mape /= n;
  // Costs that predict a shape left out no better than pricing it as square describe noise, or a machine
  // whose products' times this model does not follow (a GPU's depend on how many tiles fill it): unused.
  fit.used = fit.leave_one_out_mape < fit.square_mape &&
             std::any_of(fit.element_s.begin(), fit.element_s.end(), [](double e) { return e > 0; });
  if (!fit.used) fit.element_s = {0, 0, 0};
  return fit;
}

LinkFit fit_link(std::span<const CalibrationPoint> points, std::string_view device) {
  std::vector<std::array<double, 2>> rows;  // unknowns (1 / bandwidth, latency)
  for (const CalibrationPoint& p : points)
    if (p.what == "copy" && p.device == device && p.time_s > 0) rows.push_back({p.size / p.time_s, 1 / p.time_s});
  if (rows.size() < 2) throw Error(fmt::format("calibration: fitting a link needs 2 or more copy points (got {})", rows.size()));
  std::array<double, 2> x{};
  if (!least_squares(rows, x) || x[1] < 0 || !(x[0] > 0)) {
    double num = 0, den = 0;  // latency 0: one unknown (rows' sizes are > 0, so it is > 0)
    for (const auto& r : rows) num += r[0], den += r[0] * r[0];
    x = {den > 0 ? num / den : 1, 0};
  }
  LinkFit fit{.bandwidth_bytes_per_s = 1 / x[0], .latency_s = x[1]};
  for (const CalibrationPoint& p : points)
    if (p.what == "copy" && p.device == device && p.time_s > 0) fit.mape += std::abs((x[1] + p.size * x[0]) / p.time_s - 1);
  fit.mape /= static_cast<double>(rows.size());
  double error = 0;
  int32_t inner = 0;
  fit.curve = curve_of(points, "copy", device, fit.bandwidth_bytes_per_s, fit.latency_s, error, inner);
  fit.curve_mape = inner > 0 ? error / inner : 0;
  if (device.empty()) {
    error = 0, inner = 0;
    fit.loaded_curve = curve_of(points, "copy", "loaded", fit.bandwidth_bytes_per_s, fit.latency_s, error, inner);
    fit.loaded_curve_mape = inner > 0 ? error / inner : 0;
  }
  return fit;
}

namespace {

/** Every fit of `cal` from its points (the backend, devices and the host's memory set). */
void fit_points(Calibration& cal) {
  cal.roofline = fit_roofline(cal.points);
  cal.curves = fit_curves(cal.points, cal.roofline);
  cal.shapes = fit_shapes(cal.points, cal.roofline, cal.curves);
  cal.alone.reset();
  if (std::any_of(cal.points.begin(), cal.points.end(), [](const CalibrationPoint& p) { return p.device == "alone"; }))
    cal.alone = fit_curves(cal.points, cal.roofline, "alone");
  if (cal.devices >= 2) cal.link = fit_link(cal.points);
  if (cal.host) {
    cal.host->roofline = fit_roofline(cal.points, "host");
    cal.host->curves = fit_curves(cal.points, cal.host->roofline, "host");
    cal.host->link = fit_link(cal.points, "host");
  }
}

/** One pass of every micro-benchmark, with its own fits (later passes and the final fit replace them). */
Calibration measure_pass(std::string_view backend, const CalibrationOptions& asked) {
  CalibrationOptions options = asked;
  const bool cuda_backend = backend == "cuda";
  if (options.quick) {  // a smoke test: short runs (over a small arena on CPUs, where touching it takes time)
    options.replay.warmup = std::min(options.replay.warmup, 1);
    options.replay.repeats = std::min(options.replay.repeats, 3);
    if (!cuda_backend)
      options.replay.arena_bytes = std::min(with_default_arena(options.replay, kCpuArenaBytes).arena_bytes, 4.0 * (1 << 20));
    options.run_s = std::min(options.run_s, 5e-4);
  }
  check_options(options.replay);
  if (options.devices < 1 || options.devices > 64)
    throw Error(fmt::format("calibrate: devices is {}, must be in [1, 64]", options.devices));
  if (!(options.run_s > 0 && options.run_s <= 10))
    throw Error(fmt::format("calibrate: run length is {} s, must be in (0, 10]", options.run_s));
  if (options.host && !cuda_backend)
    throw Error("calibrate: measuring the host (--host) is for the cuda backend, whose host ops run as host functions; "
                "the cpu backend's devices are the host's cores already");
  const std::string kind = cuda_backend ? "gpu" : "cpu";
  const double physical_memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  Calibration cal{.backend = std::string(backend), .devices = options.devices};
  cal.copy_engine = backend != "cpu" || options.replay.copy_threads;
  if (cuda_backend) {
    cal.gpu_kernels = gpu_kernels_name(options.replay.gpu_kernels);
    cal.gpu_math = gpu_math_name(options.replay.gpu_math);
    cal.gpu_versions = cuda::versions();
  }
  if (!cuda_backend) {
    cal.device_memory_bytes = physical_memory / options.devices;
  } else {
    std::string why;
    const int gpus = cuda::device_count(&why);
    if (gpus == 0 || (gpus < options.devices && !options.replay.share_gpus))
      throw Error(fmt::format("calibrate --backend cuda: {} devices asked, {} GPUs usable{}", options.devices, gpus,
                              gpus == 0 ? " (" + why + ")" : "; --share-gpus runs the extra devices as streams of the GPUs"));
    // Devices sharing a GPU (streams) share its memory.
    cal.device_memory_bytes = cuda::device_memory_bytes(0) / ((options.devices + gpus - 1) / gpus);
  }
  // The CUDA backend holds a plan behind a gate until it is all enqueued, as long as no stream queues
  // more than cuda::kGateLimit commands; longer chains would run ungated and measure the host's enqueue
  // rate (on an H200 ~8 us per empty op, against ~4.7 us gated), not what most replays see.
  const int32_t max_length =
      options.quick ? 32 : cuda_backend ? static_cast<int32_t>(cuda::kGateLimit / cuda::kCommandsPerOp) : 400;
  // Sizes span real models' ops, from tiny ones to the largest convolutions and products of a CNN at
  // batch 32 or a transformer layer: 1 kFLOP to 1 GFLOP, 4 kB to 64 MB; copies 4 kB to 16 MB (quick: 1
  // to 100 kFLOP, 4 to 400 kB). Four sizes per decade: the curves interpolate between them.
  const int32_t count = options.quick ? 3 : 25, memory_count = options.quick ? 3 : 18, copy_count = options.quick ? 3 : 9;
  const double flops_lo = 1e3, flops_hi = options.quick ? 1e5 : 1e9;
  const double bytes_hi = options.quick ? 4e5 : 6.4e7, copy_hi = options.quick ? 4e5 : 1.6e7;
  // Then larger sizes, each the last one times the sizes' ratio, until an op takes kGrowLaunches launch
  // times (or a whole run's run_s), at most kMaxGrowth more per curve: on a GPU, 100 MFLOP or 16 MB take
  // a few microseconds, so the fixed sizes alone measure mostly the launch and extrapolate the rates. On
  // a CPU the fixed sizes' largest ops take milliseconds, thousands of launches, so none are added; nor
  // with --quick on the CPU backend (a smoke test of fixed size).
  constexpr double kGrowLaunches = 20;
  constexpr int32_t kMaxGrowth = 8;
  const bool grow = !options.quick || cuda_backend;
  // Convolutions on cuDNN (the CUDA backend's libraries): "conv" points, 3x3 convolutions of 64 channels
  // in and out on 14x14 images (a ResNet stage's), as many images as the size needs, for the conv curve.
  const bool convolutions = cuda_backend && options.replay.gpu_kernels == GpuKernels::library;
  constexpr double kConvImageFlops = 2.0 * 196 * 64 * 576;  // one image: 14.5 MFLOP
  auto conv_dims = [](double flops) {
    const int64_t images = std::max<int64_t>(1, std::llround(flops / kConvImageFlops));
    return graphs::GemmDims{.batch = 1, .m = 196 * images, .n = 64, .k = 576};
  };
  const double conv_hi = options.quick ? 1e2 * kConvImageFlops : 1e3 * kConvImageFlops;
  const int32_t conv_count = options.quick ? 3 : 10;
  auto measure = [&](const std::string& what, double size, const std::string& device, auto make) {
    const double t = per_op_s(backend, options, max_length, make);
    cal.points.push_back({.what = what, .size = size, .time_s = t, .device = device});
    return t;
  };
  // Measures `what` at `sizes`, then grows them; `time_of(size)` measures one size and returns its time.
  auto sweep = [&](std::vector<double> sizes, double launch_s, auto time_of) {
    double t = 0;
    for (double size : sizes) t = time_of(size);
    const double ratio = sizes.size() >= 2 ? sizes.back() / sizes[sizes.size() - 2] : 10;
    for (int32_t k = 0; grow && k < kMaxGrowth && t < kGrowLaunches * launch_s && t < options.run_s; ++k)
      t = time_of(std::round(sizes.back() * std::pow(ratio, k + 1)));
  };
  // The roofline of `devices` devices of `device_kind` at once (a chain each), as points of `device`.
  auto measure_roofline = [&](int32_t devices, const std::string& device_kind, const std::string& device) {
    const double launch_s = measure("launch", 0, device, [&](int32_t n) {
      return chain_plan(devices, n, KernelKind::none, 0, 0, device_kind);
    });
    sweep(log_sizes(flops_lo, flops_hi, count), launch_s, [&](double f) {
      return measure("compute", f, device, [&](int32_t n) { return chain_plan(devices, n, KernelKind::compute, f, 0, device_kind); });
    });
    sweep(log_sizes(4e3, bytes_hi, memory_count), launch_s, [&](double b) {
      return measure("memory", b, device, [&](int32_t n) { return chain_plan(devices, n, KernelKind::memory, 0, b, device_kind); });
    });
    if (convolutions && device_kind == "gpu")
      sweep(log_sizes(kConvImageFlops, conv_hi, conv_count), launch_s, [&](double f) {
        const graphs::GemmDims dims = conv_dims(f);
        const double bytes = 4.0 * static_cast<double>(2 * dims.m * dims.n + dims.n * dims.k);  // input, output, filters
        return measure("conv", dims.flops(), device, [&](int32_t n) {
          return chain_plan(devices, n, KernelKind::compute, dims.flops(), bytes, device_kind, dims, "Conv2D");
        });
      });
    return fit_roofline(cal.points, device);
  };
  // A CPU backend's copy is made by its producer's core right after the producer, and how fast it goes
  // depends on how long that core computed from its caches before it, not on the producer's shape: on
  // this project's VM a 713 kB copy ran at 21 GB/s in a ping-pong of short products, 17 after 25 MFLOP
  // and 12.6-13 after 250 MFLOP, alike for a product writing the copied tensor after a short or a deep
  // sum (bench/results/fidelity.md, session 25). A graph's copies follow ops of milliseconds, so there
  // each hop is a product of kCopyAfterFlops (past that knee) and a copy's time its own span, the median
  // over kCopyHops hops; a CUDA copy is a copy engine's, after empty ops, its time a hop's less the launch.
  constexpr double kCopyAfterFlops = 250e6;
  constexpr int32_t kCopyHops = 40;
  const double copy_after_flops = cuda_backend ? 0 : options.quick ? flops_hi : kCopyAfterFlops;
  // Ping-pongs between a device of kind0 and one of kind1, as points "copy" of `device`.
  auto measure_link = [&](const std::string& kind0, const std::string& kind1, double launch_s, const std::string& device) {
    sweep(log_sizes(4e3, copy_hi, copy_count), launch_s, [&](double b) {
      double t = 0;
      if (copy_after_flops > 0) {
        t = median_copy_s(run_replay(ping_pong_plan(kCopyHops, b, kind0, kind1, copy_after_flops), backend, options.replay));
      } else {
        const double hop_s = per_op_s(backend, options, max_length, [&](int32_t n) { return ping_pong_plan(n, b, kind0, kind1); });
        t = hop_s - launch_s;
      }
      t = std::max(t, 1e-9);
      cal.points.push_back({.what = "copy", .size = b, .time_s = t, .device = device});
      return t;
    });
  };
  // The CPU ping-pong's copies made while the destination streams 4 MB ops (points "copy" of "loaded").
  auto measure_loaded_link = [&] {
    constexpr double kStreamBytes = 4e6;
    const double stream_s = kStreamBytes / cal.roofline.bandwidth_bytes_per_s;
    std::vector<std::pair<double, double>> unloaded;  // (bytes, seconds of a ping-pong's copy)
    for (const CalibrationPoint& p : cal.points)
      if (p.what == "copy" && p.device.empty()) unloaded.emplace_back(p.size, p.time_s);
    for (auto [b, copy_s] : unloaded) {
      const double hop_s = cal.roofline.launch_s + copy_s + copy_after_flops / cal.roofline.flops_per_s;
      const auto streams = static_cast<int32_t>(std::clamp(2 * kCopyHops * hop_s / stream_s + 2, 2.0, 1e4));
      const ReplayPlan plan = loaded_copy_plan(kCopyHops, b, streams, kStreamBytes, kind, copy_after_flops);
      cal.points.push_back({.what = "copy", .size = b, .time_s = std::max(median_copy_s(run_replay(plan, backend, options.replay)), 1e-9),
                            .device = "loaded"});
    }
  };
  cal.roofline = measure_roofline(options.devices, kind, "");
  cal.curves = fit_curves(cal.points, cal.roofline, "");
  // Products far from square, of made-up sizes (no model's): each dimension small in turn (k, n, m),
  // operands larger than the square's, and many small products. Their time beyond the square product of
  // the same FLOPs gives the cost per element of A, B and C (Device::gemm_element_s).
  const std::span<const graphs::GemmDims> shapes = options.quick ? std::span<const graphs::GemmDims>(kQuickShapes) : kShapes;
  for (const graphs::GemmDims& d : shapes) {
    measure("shape", d.flops(), "", [&](int32_t n) { return chain_plan(options.devices, n, KernelKind::compute, d.flops(), 0, kind, d); });
    cal.points.back().gemm = d;
  }
  cal.shapes = fit_shapes(cal.points, cal.roofline, cal.curves);
  // Devices that share a machine's resources: a CPU's cores (memory), or streams of one GPU (all of it).
  if ((backend == "cpu" || options.replay.share_gpus) && options.devices >= 2 && options.contention) {
    measure_roofline(1, kind, "alone");  // its own fit is not used: the curves are against the shared roofline
    cal.alone = fit_curves(cal.points, cal.roofline, "alone");
  }
  if (options.devices >= 2) {
    measure_link(kind, kind, cal.roofline.launch_s, "");
    if (backend == "cpu") measure_loaded_link();
    cal.link = fit_link(cal.points);
  }
  if (options.host) {
    HostCalibration host{.memory_bytes = physical_memory};
    host.roofline = measure_roofline(1, "cpu", "host");
    host.curves = fit_curves(cal.points, host.roofline, "host");
    measure_link("cpu", "gpu", (host.roofline.launch_s + cal.roofline.launch_s) / 2, "host");
    host.link = fit_link(cal.points, "host");
    cal.host = host;
  }
  return cal;
}

}  // namespace

void keep_fastest(std::vector<CalibrationPoint>& points, std::span<const CalibrationPoint> pass) {
  for (const CalibrationPoint& p : pass) {
    auto it = std::find_if(points.begin(), points.end(), [&](const CalibrationPoint& q) {
      return p.what == q.what && p.size == q.size && p.device == q.device && p.gemm == q.gemm;
    });
    if (it == points.end())
      points.push_back(p);
    else
      it->time_s = std::min(it->time_s, p.time_s);
  }
}

Calibration calibrate(std::string_view backend, const CalibrationOptions& options) {
  check_backend(backend);
  if (options.passes < 1 || options.passes > 100)
    throw Error(fmt::format("calibrate: passes is {}, must be in [1, 100]", options.passes));
  Calibration cal = measure_pass(backend, options);
  cal.passes = options.passes;
  if (options.passes == 1) return cal;
  for (int32_t pass = 1; pass < options.passes; ++pass) keep_fastest(cal.points, measure_pass(backend, options).points);
  fit_points(cal);
  return cal;
}

Cluster calibrated_cluster(const Calibration& cal) {
  const std::string kind = cal.backend == "cpu" ? "cpu" : "gpu";
  ClusterSpec spec{.name = fmt::format("calibrated-{}-{}{}", cal.backend, cal.devices, cal.host ? "-host" : "")};
  if (cal.host)
    spec.devices.push_back({.name = "cpu0",
                            .kind = "cpu",
                            .peak_flops_per_s = cal.host->roofline.flops_per_s,
                            .memory_bandwidth_bytes_per_s = cal.host->roofline.bandwidth_bytes_per_s,
                            .memory_bytes = cal.host->memory_bytes,
                            .launch_overhead_s = cal.host->roofline.launch_s,
                            .gap_after_op_s = 0,
                            .efficiency = 1,
                            .efficiency_curves = cal.host->curves.curves});
  const auto first = static_cast<int32_t>(spec.devices.size());
  for (int32_t d = 0; d < cal.devices; ++d)
    spec.devices.push_back({.name = fmt::format("{}{}", kind, d),
                            .kind = kind,
                            .peak_flops_per_s = cal.roofline.flops_per_s,
                            .memory_bandwidth_bytes_per_s = cal.roofline.bandwidth_bytes_per_s,
                            .memory_bytes = cal.device_memory_bytes,
                            .launch_overhead_s = cal.roofline.launch_s,
                            .gap_after_op_s = 0,
                            .efficiency = 1,
                            .efficiency_curves = cal.alone ? cal.alone->curves : cal.curves.curves,
                            .copy_engine = cal.copy_engine,
                            .memory_domain = cal.alone ? (cal.backend == "cpu" ? "host" : "gpu") : "",
                            .contended_efficiency_curves = cal.alone ? cal.curves.curves
                                                                     : std::map<std::string, EfficiencyCurve>{},
                            .gemm_element_s = cal.shapes.element_s});
  for (int32_t a = 0; a < cal.devices; ++a)
    for (int32_t b = a + 1; b < cal.devices; ++b)
      spec.links.push_back({.name = fmt::format("{}{}-{}{}", kind, a, kind, b),
                            .end_a = spec.devices[first + a].name,
                            .end_b = spec.devices[first + b].name,
                            .bandwidth_bytes_per_s = cal.link.bandwidth_bytes_per_s,
                            .latency_s = cal.link.latency_s,
                            .duplex = Duplex::full,
                            .busy_after_s = 0,
                            .efficiency_curve = cal.link.curve,
                            .loaded_efficiency_curve = cal.link.loaded_curve});
  if (cal.host)
    for (int32_t d = 0; d < cal.devices; ++d)
      spec.links.push_back({.name = fmt::format("cpu0-{}", spec.devices[first + d].name),
                            .end_a = "cpu0",
                            .end_b = spec.devices[first + d].name,
                            .bandwidth_bytes_per_s = cal.host->link.bandwidth_bytes_per_s,
                            .latency_s = cal.host->link.latency_s,
                            .duplex = Duplex::full,
                            .busy_after_s = 0,
                            .efficiency_curve = cal.host->link.curve});
  return Cluster(std::move(spec));
}

nlohmann::json calibration_to_json(const Calibration& cal) {
  nlohmann::json points = nlohmann::json::array();
  for (const CalibrationPoint& p : cal.points) {
    nlohmann::json j = {{"what", p.what}, {"size", p.size}, {"time_s", p.time_s}};
    if (!p.device.empty()) j["device"] = p.device;
    if (p.gemm.known()) j["gemm"] = graphs::gemm_dims_to_json(p.gemm);
    if (p.what == "compute" || p.what == "shape" || p.what == "conv") j["flops_per_s"] = p.size / p.time_s;
    if (p.what == "memory" || p.what == "copy") j["bytes_per_s"] = p.size / p.time_s;
    points.push_back(j);
  }
  nlohmann::json doc = {{"format", "placelab.calibration"},
                        {"version", 1},
                        {"backend", cal.backend},
                        {"devices", cal.devices},
                        {"device_memory_bytes", cal.device_memory_bytes},
                        {"copy_engine", cal.copy_engine},
                        {"passes", cal.passes},
                        {"points", points},
                        {"roofline", {{"flops_per_s", cal.roofline.flops_per_s},
                                      {"bandwidth_bytes_per_s", cal.roofline.bandwidth_bytes_per_s},
                                      {"launch_s", cal.roofline.launch_s},
                                      {"mape", cal.roofline.mape}}},
                        {"curves", {{"leave_one_out_mape", cal.curves.mape}}},
                        {"shapes", {{"gemm_element_s", cal.shapes.element_s},
                                    {"used", cal.shapes.used},
                                    {"mape", cal.shapes.mape},
                                    {"leave_one_out_mape", cal.shapes.leave_one_out_mape},
                                    {"square_mape", cal.shapes.square_mape}}},
                        {"cluster", cluster_to_json(calibrated_cluster(cal))}};
  if (cal.alone) doc["alone_curves"] = {{"leave_one_out_mape", cal.alone->mape}};
  if (!cal.gpu_kernels.empty())
    doc["gpu"] = {{"kernels", cal.gpu_kernels}, {"math", cal.gpu_math}, {"versions", cal.gpu_versions}};
  auto link_json = [](const LinkFit& l) {
    nlohmann::json j{{"bandwidth_bytes_per_s", l.bandwidth_bytes_per_s}, {"latency_s", l.latency_s}, {"mape", l.mape},
                     {"curve_leave_one_out_mape", l.curve_mape}};
    if (!l.loaded_curve.size.empty()) j["loaded_curve_leave_one_out_mape"] = l.loaded_curve_mape;
    return j;
  };
  if (cal.devices >= 2) doc["link"] = link_json(cal.link);
  if (cal.host)
    doc["host"] = {{"memory_bytes", cal.host->memory_bytes},
                   {"roofline", {{"flops_per_s", cal.host->roofline.flops_per_s},
                                 {"bandwidth_bytes_per_s", cal.host->roofline.bandwidth_bytes_per_s},
                                 {"launch_s", cal.host->roofline.launch_s},
                                 {"mape", cal.host->roofline.mape}}},
                   {"curves", {{"leave_one_out_mape", cal.host->curves.mape}}},
                   {"link", link_json(cal.host->link)}};
  return doc;
}

Calibration refit_calibration(const nlohmann::json& doc, const std::string& origin) {
  const io::JsonNode root(doc, origin);
  root.check_header("placelab.calibration", {1});
  Calibration cal{.backend = root.at("backend").as_string(), .devices = static_cast<int32_t>(root.at("devices").as_int())};
  if (cal.backend != "cpu" && cal.backend != "cuda") root.at("backend").fail("is \"" + cal.backend + "\", expected \"cpu\" or \"cuda\"");
  if (cal.devices < 1) root.at("devices").fail("must be >= 1");
  // Documents from before these fields: the memory of the cluster's last device (the backend's), and
  // the CPU backend's default (the producer copies).
  cal.device_memory_bytes = root.has("device_memory_bytes")
                                ? root.at("device_memory_bytes").as_amount()
                                : root.at("cluster").at("devices").at(root.at("cluster").at("devices").size() - 1)
                                      .at("memory_bytes").as_amount();
  cal.copy_engine = root.has("copy_engine") ? root.at("copy_engine").as_bool() : cal.backend != "cpu";
  cal.passes = root.has("passes") ? static_cast<int32_t>(root.at("passes").as_int()) : 1;
  if (cal.passes < 1) root.at("passes").fail("must be >= 1");
  const io::JsonNode points = root.at("points");
  for (size_t i = 0; i < points.size(); ++i) {
    const io::JsonNode p = points.at(i);
    cal.points.push_back({.what = p.at("what").as_string(), .size = p.at("size").as_amount(),
                          .time_s = p.at("time_s").as_amount(), .device = p.get_string("device", ""),
                          .gemm = p.has("gemm") ? graphs::gemm_dims_from_json(p.at("gemm")) : graphs::GemmDims{}});
  }
  if (root.has("host")) cal.host = HostCalibration{.memory_bytes = root.at("host").at("memory_bytes").as_amount()};
  if (root.has("gpu")) {
    const io::JsonNode gpu = root.at("gpu");
    cal.gpu_kernels = gpu.at("kernels").as_string();
    cal.gpu_math = gpu.at("math").as_string();
    cal.gpu_versions = gpu.at("versions").as_string();
    if (cal.gpu_kernels != "library" && cal.gpu_kernels != "own") gpu.at("kernels").fail("must be \"library\" or \"own\"");
    if (cal.gpu_math != "tf32" && cal.gpu_math != "fp32") gpu.at("math").fail("must be \"tf32\" or \"fp32\"");
  }
  fit_points(cal);
  return cal;
}

}  // namespace placelab::sim::replay
