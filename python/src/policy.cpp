// Bindings of policy/: the placer registry, bound generically (placers() and place(name, ...)), so a
// placer added to registry.cpp appears in Python with no binding change.
#include <fmt/format.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "graphs/error.h"
#include "policy/placer.h"
#include "python/src/bindings.h"

namespace placelab::python {

void init_policy(py::module_& m) {
  m.def("placers", [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& p : policy::placers()) out.emplace_back(p.name, p.summary);
    return out;
  }, "Every registered placer as (name, summary), in a stable order.");

  m.def("place", [](const sim::Simulator& s, const std::string& name, const py::object& options, uint64_t seed,
                    const py::object& progress) {
    if (!progress.is_none() && !PyCallable_Check(progress.ptr())) {
      throw Error("progress must be callable (it receives a status string)");
    }
    auto placer = policy::make_placer(name);
    policy::PlaceRequest request{.simulator = s,
                                 .options = options.is_none() ? nlohmann::json::object()
                                                              : to_json(options, fmt::format("placer {} options", name)),
                                 .seed = seed,
                                 .progress = {}};
    if (!request.options.is_object()) throw Error(fmt::format("placer {} options must be a dict", name));
    if (!progress.is_none()) {
      request.progress = [progress](std::string_view status) {
        py::gil_scoped_acquire acquire;
        try {
          progress(std::string(status));
        } catch (py::error_already_set& e) {
          // Rethrown as a C++ exception so no Python state crosses the GIL-free placer code.
          throw std::runtime_error(fmt::format("progress callback raised: {}", e.what()));
        }
      };
    }
    policy::PlaceResult result;
    {
      py::gil_scoped_release release;
      result = placer->place(request);
    }
    s.check_placement(result.device_of);
    if (result.info.is_null()) result.info = nlohmann::json::object();  // a placer that reports nothing
    return py::make_tuple(to_numpy(result.device_of), from_json(result.info));
  }, py::arg("simulator"), py::arg("name"), py::arg("options") = py::none(), py::arg("seed") = 0,
        py::arg("progress") = py::none(),
        "Places every op of simulator.graph with the placer `name` (see placers()); options is a dict of "
        "placer-specific options, progress an optional callable(str). Returns (placement int32 array, info dict).");
}

}  // namespace placelab::python
