// The CUDA replay backend: each plan device of kind "cpu" is the host, every other device is the next
// GPU. One stream per device and one copy stream per ordered device pair; events carry the
// dependencies; ops run synthetic compute-bound (FMA chains) or memory-bound (streaming) kernels sized
// to their FLOPs or bytes; transfers are peer copies (GPU to GPU) or pinned-host copies. Built only where
// nvcc exists (PLACELAB_BUILD_CUDA); elsewhere a stub says so. See docs/replay.md.
#pragma once

#include <string>

#include "sim/replay/executor.h"

namespace placelab::sim::replay::cuda {

/** Whether this build has the CUDA backend (configured with PLACELAB_BUILD_CUDA=ON and nvcc found). */
bool built();

/** Usable GPUs; 0 with the reason in `*why` (built without CUDA, no driver, no device). */
int device_count(std::string* why = nullptr);

/** Memory of GPU `device` in bytes (0 without CUDA). */
double device_memory_bytes(int device);

/** Runs `plan` on the GPUs (and the host); throws placelab::Error when there are too few GPUs. */
ReplayResult replay(const ReplayPlan& plan, const ReplayOptions& options = {});

}  // namespace placelab::sim::replay::cuda
