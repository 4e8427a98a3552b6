// The simplest baselines of the papers: everything on one device, round-robin in topological order, and
// uniformly random. Each places colocation classes whole and keeps pinned ops on their kinds.
#include <algorithm>

#include "policy/classic/units.h"

namespace placelab::policy {

namespace {

/** Every unit on device `d`, or on its fastest allowed device when pinned elsewhere. */
std::vector<int32_t> all_on(const Units& units, int32_t d) {
  std::vector<int32_t> where(units.num_units());
  for (int32_t u = 0; u < units.num_units(); ++u) where[u] = units.allowed(u, d) ? d : units.allowed_devices(u)[0];
  return where;
}

class SingleDevicePlacer final : public Placer {
 public:
  PlaceResult place(const PlaceRequest& request) const override {
    check_options("single_device", request.options, {});
    Units units(request.simulator);
    const sim::Cluster& c = request.cluster();
    int32_t best = -1, fastest = -1;
    double best_s = kNotAllowed, fastest_s = kNotAllowed;
    for (int32_t d = 0; d < units.num_devices(); ++d) {
      double time_s = 0, bytes = 0;
      for (int32_t u = 0; u < units.num_units(); ++u) {
        if (!units.allowed(u, d)) continue;  // pinned elsewhere: not this device's load
        time_s += units.time_s(u, d);
        bytes += units.memory_bytes(u);
      }
      if (time_s < fastest_s) fastest_s = time_s, fastest = d;
      if (bytes <= c.device(d).memory_bytes && time_s < best_s) best_s = time_s, best = d;
    }
    const bool fits = best >= 0;
    const int32_t d = fits ? best : fastest;
    PlaceResult r{units.expand(all_on(units, d)), {{"device", c.device(d).name}, {"fits_memory", fits}}};
    return r;
  }
};

class RoundRobinPlacer final : public Placer {
 public:
  PlaceResult place(const PlaceRequest& request) const override {
    check_options("round_robin", request.options, {});
    Units units(request.simulator);
    std::vector<int32_t> where(units.num_units());
    int32_t next = 0;
    for (int32_t u = 0; u < units.num_units(); ++u) {  // topological order of first ops
      // The next device in turn that may run the unit.
      int32_t d = next;
      while (!units.allowed(u, d)) d = (d + 1) % units.num_devices();
      where[u] = d;
      next = (d + 1) % units.num_devices();
    }
    return {units.expand(where), {}};
  }
};

class RandomPlacer final : public Placer {
 public:
  PlaceResult place(const PlaceRequest& request) const override {
    check_options("random", request.options, {});
    Units units(request.simulator);
    std::mt19937_64 rng(request.seed);
    std::vector<int32_t> where(units.num_units());
    for (int32_t u = 0; u < units.num_units(); ++u) {
      std::vector<int32_t> ok = units.allowed_devices(u);
      std::sort(ok.begin(), ok.end());  // by index, so the draw does not depend on speeds
      where[u] = ok[uniform_index(rng, static_cast<int32_t>(ok.size()))];
    }
    return {units.expand(where), {{"seed", request.seed}}};
  }
};

}  // namespace

std::unique_ptr<Placer> make_single_device_placer() { return std::make_unique<SingleDevicePlacer>(); }
std::unique_ptr<Placer> make_round_robin_placer() { return std::make_unique<RoundRobinPlacer>(); }
std::unique_ptr<Placer> make_random_placer() { return std::make_unique<RandomPlacer>(); }

}  // namespace placelab::policy
