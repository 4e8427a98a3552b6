// The CUDA replay backend of a build without CUDA: it reports itself absent, with the fix.
#include "sim/replay/cuda/executor.h"

#include "graphs/error.h"

namespace placelab::sim::replay::cuda {

namespace {
constexpr const char* kWhy =
    "placelab was built without the CUDA backend (configure with -DPLACELAB_BUILD_CUDA=ON, or the `cuda` "
    "preset, on a machine where nvcc exists)";
}

bool built() { return false; }

int device_count(std::string* why) {
  if (why) *why = kWhy;
  return 0;
}

std::string versions() { return ""; }

double device_memory_bytes(int /*device*/) { return 0; }

ReplayResult replay(const ReplayPlan& /*plan*/, const ReplayOptions& /*options*/) {
  throw Error(std::string("replay --backend cuda: ") + kWhy);
}

}  // namespace placelab::sim::replay::cuda
