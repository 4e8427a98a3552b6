// The CUDA replay backend: each plan device of kind "cpu" is the host, every other device is the next
// GPU. One stream per device and one copy stream per ordered device pair; events carry the
// dependencies; compute ops run their products on cuBLASLt and their convolutions on cuDNN (or on the
// project's own tiled GEMM kernel), memory-bound ops a streaming kernel sized to their bytes; transfers
// are peer copies (GPU to GPU) or pinned-host copies. Built only where nvcc exists (PLACELAB_BUILD_CUDA);
// elsewhere a stub says so. See docs/replay.md.
#pragma once

#include <cstdint>
#include <string>

#include "sim/replay/executor.h"

namespace placelab::sim::replay::cuda {

/**
 * Commands one stream may queue behind the gate (a kernel that holds every stream until a run is
 * enqueued); plans with more on a stream run ungated, i.e. at the host's enqueue rate.
 */
inline constexpr int64_t kGateLimit = 900;

/**
 * Commands an op queues on its device's stream: its start event, its kernel (or host function) and its
 * end event, plus one wait per dependency on another device or transfer (a dependency on an op of the
 * same device is the stream's own order and needs none). A chain of kGateLimit / kCommandsPerOp
 * ops on one device therefore runs gated.
 */
inline constexpr int64_t kCommandsPerOp = 3;

/** Whether this build has the CUDA backend (configured with PLACELAB_BUILD_CUDA=ON and nvcc found). */
bool built();

/** Usable GPUs; 0 with the reason in `*why` (built without CUDA, no driver, no device). */
int device_count(std::string* why = nullptr);

/** The driver, runtime and libraries a CUDA replay runs with ("" without CUDA); see libraries.h. */
std::string versions();

/** Memory of GPU `device` in bytes (0 without CUDA). */
double device_memory_bytes(int device);

/** Runs `plan` on the GPUs (and the host); throws placelab::Error when there are too few GPUs. */
ReplayResult replay(const ReplayPlan& plan, const ReplayOptions& options = {});

}  // namespace placelab::sim::replay::cuda
