// placelab calibrate --backend cpu|cuda --out PROFILE: measures the backend with micro-benchmarks and
// writes the calibrated cluster (a placelab.cluster file every verb takes as --cluster); --json prints
// the measurements and fits (placelab.calibration), --measurements F writes them; --refit F fits the points
// of such a file again without measuring.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "cli/common.h"
#include "graphs/error.h"
#include "graphs/json_util.h"
#include "sim/replay/calibrate.h"

namespace placelab::cli {

namespace {

struct CalibrateArgs {
  std::string backend = "cpu", out, measurements, refit, gpu_kernels = "library", gpu_math = "tf32";
  sim::replay::CalibrationOptions options;
  bool no_pin = false, json = false;
};

void report(const CalibrateArgs& a, const sim::replay::Calibration& cal);

void run(const CalibrateArgs& a) {
  sim::replay::CalibrationOptions options = a.options;
  options.replay.pin_threads = !a.no_pin;
  options.replay.gpu_kernels = sim::replay::parse_gpu_kernels(a.gpu_kernels, "calibrate --gpu-kernels");
  options.replay.gpu_math = sim::replay::parse_gpu_math(a.gpu_math, "calibrate --gpu-math");
  // Checked before minutes of measuring, not after.
  if (options.host && a.backend != "cuda")
    throw Error("calibrate: --host measures the host under the cuda backend (its ops run as host functions); "
                "the cpu backend's devices are the host's cores already");
  check_output("calibrate", "--out", a.out);
  if (!a.measurements.empty()) check_output("calibrate", "--measurements", a.measurements);
  check_distinct_outputs("calibrate", "--out", a.out, "--measurements", a.measurements);
  if (!a.refit.empty()) return report(a, sim::replay::refit_calibration(reading("--refit", a.refit, [&] { return io::read_json_file(a.refit); }), a.refit));
  const int64_t threads = int64_t{options.devices} * std::max(1, options.replay.threads_per_device);
  const unsigned cores = std::thread::hardware_concurrency();
  if (a.backend == "cpu" && cores > 0 && threads > cores)
    note("placelab: warning: {} devices x {} threads need {} cores but this machine has {}: the devices "
         "share cores, so the measured rates are not those of separate devices\n",
         options.devices, std::max(1, options.replay.threads_per_device), threads, cores);
  note("placelab: calibrating the {} backend with {} devices{}{}{}...\n", a.backend, options.devices,
       options.host ? " and the host" : "",
       options.quick ? " (quick)" : "", options.passes == 1 ? "" : fmt::format(", {} passes (each point its fastest)", options.passes));
  report(a, sim::replay::calibrate(a.backend, options));
}

/** Writes the cluster (and the measurements) of `cal` and prints its fits. */
void report(const CalibrateArgs& a, const sim::replay::Calibration& cal) {
  const sim::Cluster cluster = sim::replay::calibrated_cluster(cal);
  const nlohmann::json doc = sim::replay::calibration_to_json(cal);
  if (!a.measurements.empty()) io::write_json_atomic(a.measurements, doc);
  sim::write_cluster(cluster, a.out);  // last: a failure before leaves the old cluster file
  if (a.json) return print_json(doc);
  fmt::print("calibrated {} ({} devices{}): written to {}\n", cluster.name(), cal.devices, cal.host ? " and the host" : "", a.out);
  fmt::print("compute        {:>12}  (GEMM rate of large ops)\n", human(cal.roofline.flops_per_s, "FLOP/s"));
  fmt::print("memory         {:>12}  (streaming bandwidth)\n", human(cal.roofline.bandwidth_bytes_per_s, "B/s"));
  fmt::print("launch         {:>12}  (per op)\n", human(cal.roofline.launch_s, "s"));
  if (!cal.gpu_kernels.empty()) fmt::print("GPU kernels    {} ({}): {}\n", cal.gpu_kernels, cal.gpu_math, cal.gpu_versions);
  // The roofline's points: launch, compute and memory ones (not the copies) of a device.
  auto roofline_points = [&](const std::string& device) {
    return std::count_if(cal.points.begin(), cal.points.end(),
                         [&](const auto& p) { return p.device == device && p.what != "copy" && p.what != "shape" && p.what != "conv"; });
  };
  fmt::print("roofline fit   {:>11.1f}%  mean error over {} points\n", 100 * cal.roofline.mape, roofline_points(""));
  fmt::print("curves         {:>11.1f}%  mean error at sizes left out (efficiency by op class and size, used by the "
             "cost model){}\n", 100 * cal.curves.mape, cal.alone ? "; every device running: the contended curves" : "");
  if (cal.shapes.square_mape > 0)
    fmt::print("shapes         {:>11.1f}%  mean error at products far from square left out ({:.1f}% priced as square ones); "
               "{}\n", 100 * cal.shapes.leave_one_out_mape, 100 * cal.shapes.square_mape,
               cal.shapes.used ? fmt::format("per element of A, B, C: {:.3g}, {:.3g}, {:.3g} ns", 1e9 * cal.shapes.element_s[0],
                                             1e9 * cal.shapes.element_s[1], 1e9 * cal.shapes.element_s[2])
                               : std::string("no better: shapes priced as square products"));
  if (cal.alone)
    fmt::print("alone curves   {:>11.1f}%  mean error at sizes left out (one device running: the devices' own curves)\n",
               100 * cal.alone->mape);
  if (cal.devices >= 2)
    fmt::print("copy           {:>12}  latency {}, fit error {:.1f}%; by size {:.1f}% at sizes left out{}\n",
               human(cal.link.bandwidth_bytes_per_s, "B/s"), human(cal.link.latency_s, "s"), 100 * cal.link.mape,
               100 * cal.link.curve_mape, cal.copy_engine ? "" : " (the producer copies: no overlap with its ops)");
  if (!cal.link.loaded_curve.size.empty())
    fmt::print("copy, loaded   {:>11.1f}%  mean error at sizes left out (copies made while the destination streams)\n",
               100 * cal.link.loaded_curve_mape);
  if (cal.host) {
    const auto& h = *cal.host;
    fmt::print("host compute   {:>12}  (cpu0: GEMM rate as host functions)\n", human(h.roofline.flops_per_s, "FLOP/s"));
    fmt::print("host memory    {:>12}  (streaming bandwidth)\n", human(h.roofline.bandwidth_bytes_per_s, "B/s"));
    fmt::print("host launch    {:>12}  (per op: a host function)\n", human(h.roofline.launch_s, "s"));
    fmt::print("host fit       {:>11.1f}%  mean error over {} points\n", 100 * h.roofline.mape, roofline_points("host"));
    fmt::print("host copy      {:>12}  latency {}, fit error {:.1f}%; by size {:.1f}% (to and from the GPUs)\n",
               human(h.link.bandwidth_bytes_per_s, "B/s"), human(h.link.latency_s, "s"), 100 * h.link.mape,
               100 * h.link.curve_mape);
  }
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand("calibrate", "Measure a replay backend and write a calibrated cluster");
  cmd->add_option("--backend", args->backend, "cpu (threads per device) or cuda (GPUs); default cpu");
  cmd->add_option("--out", args->out, "Where to write the calibrated cluster (placelab.cluster)")->required();
  cmd->add_option("--measurements", args->measurements, "Also write the points and fits (placelab.calibration)");
  cmd->add_option("--devices", args->options.devices, "Devices measured at once (default 2)");
  cmd->add_option("--repeats", args->options.replay.repeats, "Measured runs per micro-benchmark (default 5)");
  cmd->add_option("--passes", args->options.passes,
                  "Passes of every micro-benchmark, each point its fastest (default 3)");
  cmd->add_option("--threads-per-device", args->options.replay.threads_per_device, "CPU backend: threads per device");
  cmd->add_flag("--host", args->options.host,
                "CUDA backend: also measure the host CPU (its ops run as host functions) and its link to the GPUs; "
                "the cluster gets it as cpu0");
  cmd->add_flag("--quick", args->options.quick, "Three sizes per curve and short runs (seconds; a smoke test)");
  cmd->add_flag("--no-pin", args->no_pin, "CPU backend: do not pin device threads to cores");
  cmd->add_flag("--copy-threads", args->options.replay.copy_threads, "CPU backend: a copy thread per device pair");
  cmd->add_option("--gpu-kernels", args->gpu_kernels,
                  "CUDA backend: library (products on cuBLASLt, convolutions on cuDNN; default) or own (the project's GEMM kernel)");
  cmd->add_option("--gpu-math", args->gpu_math, "CUDA backend: the libraries' arithmetic, tf32 (tensor cores; default) or fp32");
  cmd->add_flag("--share-gpus", args->options.replay.share_gpus,
                "CUDA backend: more --devices than GPUs run as further streams of the GPUs (round-robin)");
  cmd->add_flag("--contention", args->options.contention,
                "CPU backend (or --share-gpus), 2+ devices: also measure one device alone, for the contention model");
  cmd->add_flag("--json", args->json, "Print the measurements and fits as one JSON object");
  cmd->add_option("--refit", args->refit,
                  "Measure nothing: fit the points of this placelab.calibration file (--measurements) again");
  cmd->callback([args] { run(*args); });
}

}  // namespace placelab::cli
