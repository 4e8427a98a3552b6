// What every replay backend takes and returns, and the entry point that picks a backend by name.
// Backends: sim/replay/cpu (device = a oneTBB arena of threads) and sim/replay/cuda (device = a GPU,
// or the host for devices of kind "cpu"). Semantics: docs/replay.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/replay/plan.h"

namespace placelab::sim::replay {

/**
 * The CPU backend's default arena per device. Small enough that a device runs its ops as fast whether the
 * other device works or not, as separate devices do, though this project's VM gives its two cores one L3
 * (shared with other tenants): resnet50's ops (its edges copying 4 bytes, so no copies in the way) ran
 * 2.0-2.6% slower in placements that use both cores than on one with 8 MiB arenas, 0.3-0.7% with 4 MiB
 * and -0.2 to +0.3% with 2 MiB (7-9% with 32 MiB; bench/results/fidelity.md, sessions 24 and 25).
 */
inline constexpr double kCpuArenaBytes = 2.0 * (1 << 20);
/** The CUDA backend's default arena per GPU (and for its host device). */
inline constexpr double kCudaArenaBytes = 32.0 * (1 << 20);

/**
 * The CUDA backend's kernels for compute ops: products on cuBLASLt and convolutions on cuDNN (what a
 * framework runs), or the project's own tiled GEMM for every compute op.
 */
enum class GpuKernels : uint8_t { library, own };
/** The arithmetic of the CUDA backend's library calls: TF32 tensor cores (FP32 data) or FP32 FMAs. */
enum class GpuMath : uint8_t { tf32, fp32 };

/** "library" or "own". */
std::string_view gpu_kernels_name(GpuKernels kernels);
/** "tf32" or "fp32". */
std::string_view gpu_math_name(GpuMath math);
/** Parses a GpuKernels name; throws placelab::Error naming `where` and the choices. */
GpuKernels parse_gpu_kernels(std::string_view name, std::string_view where);
/** Parses a GpuMath name; throws placelab::Error naming `where` and the choices. */
GpuMath parse_gpu_math(std::string_view name, std::string_view where);

/** Knobs of a replay run. */
struct ReplayOptions {
  /** Runs of the whole plan before measuring (page faults, caches, thread start-up). */
  int32_t warmup = 2;
  /** Measured runs; the step time is their median. */
  int32_t repeats = 10;
  /** CPU backend: threads of each device's oneTBB arena. */
  int32_t threads_per_device = 1;
  /** CPU backend: pin each device's thread to its own core when there are enough cores. */
  bool pin_threads = true;
  /**
   * CPU backend: copy transfers on one thread per ordered device pair (a copy engine beside the
   * devices) instead of on the producer's thread right after the producer (the default, which needs
   * no extra cores: a copy then delays the producer's device by its duration).
   */
  bool copy_threads = false;
  /**
   * Bytes of each device's arena (kernels' operands and results; memory-bound kernels cycle through it);
   * 0: the backend's default, kCpuArenaBytes or kCudaArenaBytes.
   */
  double arena_bytes = 0;
  /** CUDA backend: the libraries or the own GEMM kernel for compute ops on GPUs (host ops: the CPU kernels). */
  GpuKernels gpu_kernels = GpuKernels::library;
  /** CUDA backend: the library calls' arithmetic (the own kernel is FP32 FMAs whatever this says). */
  GpuMath gpu_math = GpuMath::tf32;
  /**
   * CUDA backend: a plan with more GPU devices than there are GPUs runs the extra ones as further streams
   * of the GPUs (device i on GPU i mod GPUs), each with its own arena, instead of being refused.
   */
  bool share_gpus = false;
  /** Called after every run (warm-up ones too) with a one-line status; the CLI prints it on stderr. */
  std::function<void(std::string_view)> progress;
};

/** Reports run `run` (0-based) of warmup + repeats through options.progress, when set. */
void report_run(const ReplayOptions& options, int32_t run);

/** What a replay measured; times of events are from the start of the step (its earliest event). */
struct ReplayResult {
  std::string backend;
  double step_time_s = 0;             // median over the measured runs
  std::vector<double> step_times_s;   // every measured run, in run order
  // Events of the run whose step time is the median (the lower median for an even count).
  std::vector<double> op_start_s, op_end_s;              // per plan op
  std::vector<double> transfer_start_s, transfer_end_s;  // per plan transfer
  std::vector<double> device_busy_s;                     // per device: sum of its op durations
  std::vector<double> device_checksum;  // per device: sum of its kernels' results in one run
  double copy_checksum = 0;  // sum of one copied float per 4 KiB, over the transfers of one run
  double flops_done = 0;     // FLOPs the kernels of one run executed (GEMM shapes round the ops' FLOPs)
  double bytes_streamed = 0; // bytes the memory-bound kernels of one run read and wrote
  double bytes_copied = 0;   // bytes the transfers of one run copied
  double wait_spin_s = 0;    // CPU backend: how long a waiting thread spun before sleeping
                             // (10 ms with a core of its own, else 20 us)
  double arena_bytes = 0;    // each device's arena, as run (the backend's default when none was asked)
  // CUDA backend: the kernels and arithmetic asked for, the GPU ops run by a library (the rest: the own
  // kernels), and the versions of the driver, runtime and libraries that ran them.
  std::string gpu_kernels, gpu_math;
  int64_t library_ops = 0;
  std::string gpu_versions;
};

/** "cpu" or "cuda"; anything else is a placelab::Error naming both. */
void check_backend(std::string_view backend);

/** Runs `plan` on `backend` ("cpu" or "cuda"); throws placelab::Error when the backend is unavailable. */
ReplayResult run_replay(const ReplayPlan& plan, std::string_view backend, const ReplayOptions& options = {});

/** Checks the options' ranges; throws placelab::Error naming the option. */
void check_options(const ReplayOptions& options);

/** `options` with its arena resolved: `default_bytes` (a backend's) when arena_bytes is 0. */
ReplayOptions with_default_arena(ReplayOptions options, double default_bytes);

/** The measured facts as JSON, with the plan's prediction and the relative error beside them. */
nlohmann::json replay_result_to_json(const ReplayPlan& plan, const ReplayResult& result);

/**
 * Chrome trace-event JSON (Perfetto) of the measured run beside the prediction: process 0 holds the
 * measured ops per device and transfers per device pair, process 1 the simulator's; times in us.
 */
nlohmann::json replay_trace_json(const ReplayPlan& plan, const ReplayResult& result);

/** The median of `values` (the lower one for an even count, so it is a measured value); 0 when empty. */
double lower_median(std::vector<double> values);

}  // namespace placelab::sim::replay
