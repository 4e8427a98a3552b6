// Calibration: micro-benchmarks run through a replay backend (so they measure exactly what a replay
// runs) of achieved FLOP/s by op size and by product shape, memory bandwidth by size, per-op launch overhead, and copy
// bandwidth and latency between devices; a fit of the roofline cost model to them; and the cluster
// whose device and link numbers are that fit, which every verb takes as `--cluster`. docs/replay.md.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cluster.h"
#include "sim/replay/executor.h"

namespace placelab::sim::replay {

/** Knobs of a calibration. */
struct CalibrationOptions {
  /** Devices measured at once (CPU: thread groups; CUDA: GPUs), as a replay of that many would run. */
  int32_t devices = 2;
  /** Three sizes per curve and short runs: seconds, for tests and smoke checks. */
  bool quick = false;
  /**
   * Passes of every micro-benchmark; each point keeps its fastest pass. On a shared machine a burst of
   * other work lasting seconds slowed a whole 7-second pass by 15-25% (bench/results/fidelity.md), which
   * one pass's repeats cannot see past.
   */
  int32_t passes = 3;
  /** How each micro-benchmark plan runs (warm-up and repeats, threads, pinning, arena). */
  ReplayOptions replay{.warmup = 1, .repeats = 5};
  /** Wanted duration of one micro-benchmark run (a chain of equal ops), in seconds. */
  double run_s = 0.004;
  /**
   * CUDA backend: also measure the host, a "cpu" device whose ops run as host functions on a stream
   * (launch, compute and memory), and its link to GPU 0; the cluster then has it as `cpu0`.
   */
  bool host = false;
  /**
   * CPU backend with 2+ devices: also measure the launch, compute and memory sweep with one device alone,
   * for the memory contention model (Calibration::alone). Off by default: on the 2-core development VM
   * the two sweeps differ by bursts of noise, not by contention, and the model then costs accuracy
   * (bench/results/fidelity.md). Also for GPUs shared as streams (ReplayOptions::share_gpus), whose
   * devices share all of a GPU: one stream alone gives the devices' own curves.
   */
  bool contention = false;
};

/** One measurement: what, at what size, and the seconds one op (or one transfer hop) took. */
struct CalibrationPoint {
  std::string what;  // "compute" (size = FLOPs), "memory" (bytes), "launch" (0), "copy" (bytes), "shape" (FLOPs), "conv" (FLOPs)
  double size = 0;
  double time_s = 0;
  /** "" for the backend's own devices; "host" for the host measured by a CUDA calibration (its copies: to and from GPU 0). */
  std::string device = {};
  /** A "shape" point's product: one not square, against which the "compute" points' curve is measured. */
  graphs::GemmDims gemm = {};
};

/** The roofline fitted to compute, memory and launch points: t = max(F / P, B / W) + L. */
struct RooflineFit {
  double flops_per_s = 0, bandwidth_bytes_per_s = 0, launch_s = 0;
  double mape = 0;  // mean |predicted / measured - 1| over the points
};

/**
 * A link fitted to copy points: t = latency + bytes / bandwidth, then its efficiency curve against that
 * bandwidth (a copy in cache outruns one through memory), as for a device's curves (CurveFit).
 */
struct LinkFit {
  double bandwidth_bytes_per_s = 0, latency_s = 0;
  double mape = 0;  // of the line
  EfficiencyCurve curve;
  double curve_mape = 0;  // leave-one-out, over the curve's inner points
  /** The curve of copies made while the destination streams (points "copy" of device "loaded"; CPU backend). */
  EfficiencyCurve loaded_curve;
  double loaded_curve_mape = 0;
};

/**
 * Efficiency against size by op class, read off the points against the fitted roofline: a "compute"
 * point gives the "gemm" curve F / (P (t - L)), a "memory" point the "elementwise" one B / (W (t - L)).
 * The cost model interpolates them in log(size) (EfficiencyCurve), so an op between two measured sizes
 * gets what those two reached rather than one line through all of them.
 */
struct CurveFit {
  std::map<std::string, EfficiencyCurve> curves;
  /**
   * Mean |predicted / measured - 1| over the inner points of every curve, each predicted from its curve
   * without it (leave-one-out): the error at a size calibration did not measure, not at the ones it did.
   */
  double mape = 0;
};

/**
 * Device::gemm_element_s fitted to the "shape" points (4 or more): least squares in relative error of the
 * time beyond what the square product of the same FLOPs takes on the fitted roofline and "gemm" curve.
 * Used only when it predicts each shape, fitted without it, better than pricing it as square; else zeros.
 */
struct ShapeFit {
  std::array<double, 3> element_s{0, 0, 0};
  bool used = false;
  double mape = 0;                // of the shape points, with the fit on all of them
  double leave_one_out_mape = 0;  // each shape predicted by the fit on the others
  double square_mape = 0;         // of the shape points priced as square products: what the fit corrects
};

/** The host measured by a CUDA calibration (CalibrationOptions::host): its ops are host functions. */
struct HostCalibration {
  double memory_bytes = 0;
  RooflineFit roofline;  // its "host" launch, compute and memory points
  CurveFit curves;       // of those points
  LinkFit link;          // its "host" copy points: pinned host memory to and from GPU 0
};

/** A calibration: the points and the fits. */
struct Calibration {
  std::string backend;
  int32_t devices = 0;
  double device_memory_bytes = 0;
  int32_t passes = 1;  // each point the fastest of this many (CalibrationOptions::passes)
  std::vector<CalibrationPoint> points;
  RooflineFit roofline;
  CurveFit curves;
  ShapeFit shapes;  // zeros without shape points
  LinkFit link;  // zeros with one device
  /** Whether the devices' copies overlap their ops: false on the CPU backend unless copy threads copy. */
  bool copy_engine = true;
  /**
   * CPU backend with 2+ devices and CalibrationOptions::contention (cores of one host, one memory domain):
   * the curves of one device measured alone (points of device "alone"). They become the devices' efficiency_curves, and `curves`, measured
   * with every device running, their contended_efficiency_curves.
   */
  std::optional<CurveFit> alone;
  std::optional<HostCalibration> host;
  /** CUDA backend: the kernels and arithmetic of the compute ops (ReplayOptions), and the versions that ran them. */
  std::string gpu_kernels, gpu_math, gpu_versions;
};

/** Measures `backend` ("cpu" or "cuda"); throws placelab::Error when it is unavailable. */
Calibration calibrate(std::string_view backend, const CalibrationOptions& options = {});

/**
 * Merges one pass's points into `points`: a point measured before (the same what, size, device and shape)
 * keeps the faster time, a new one is added. A pass that met a burst of other work loses to the others.
 */
void keep_fastest(std::vector<CalibrationPoint>& points, std::span<const CalibrationPoint> pass);

/**
 * Least squares in relative error of t = F x + B y + L over the compute ("compute": F = size),
 * memory ("memory": B = size) and launch points of `device` ("": the backend's devices), with
 * P = 1/x, W = 1/y (L >= 0).
 */
RooflineFit fit_roofline(std::span<const CalibrationPoint> points, std::string_view device = "");

/** The efficiency curves of the compute and memory points of `device` against `roofline` (CurveFit). */
CurveFit fit_curves(std::span<const CalibrationPoint> points, const RooflineFit& roofline, std::string_view device = "");

/** The fit of the "shape" points of `device` (ShapeFit); zeros without them. */
ShapeFit fit_shapes(std::span<const CalibrationPoint> points, const RooflineFit& roofline, const CurveFit& curves,
                    std::string_view device = "");

/**
 * Least squares in relative error of t = latency + bytes / bandwidth over the "copy" points of `device`,
 * then the copies' curves against it: of those points, and (for device "") of the "copy" points of
 * device "loaded".
 */
LinkFit fit_link(std::span<const CalibrationPoint> points, std::string_view device = "");

/**
 * The cluster of a calibration: devices `cpu0..` (kind "cpu") or `gpu0..` (kind "gpu") with the
 * fitted peak, bandwidth and launch overhead (efficiency 1) and the efficiency curves, and a full-duplex link per device pair
 * with the fitted copy bandwidth and latency (each direction is one copy queue, as in the replay).
 * With a measured host (CUDA), the host comes first as `cpu0` (kind "cpu", the host's fit, the
 * machine's memory), with a link to every GPU of the host link's fit.
 */
Cluster calibrated_cluster(const Calibration& calibration);

/** The placelab.calibration v1 document: points, fits and the cluster document. */
nlohmann::json calibration_to_json(const Calibration& calibration);

/**
 * The calibration of a placelab.calibration document's points, fitted again by today's fits (nothing is
 * measured): a changed cost model applies to old measurements. Throws placelab::Error naming `origin`
 * and the JSON path at fault.
 */
Calibration refit_calibration(const nlohmann::json& doc, const std::string& origin);

}  // namespace placelab::sim::replay
