// Bindings of policy/: the placer registry, bound generically (placers() and place(name, ...)), so a
// placer added to registry.cpp appears in Python with no binding change.
#include <chrono>
#include <memory>
#include <optional>
#include <type_traits>

#include <fmt/format.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "graphs/error.h"
#include "policy/memory_verdict.h"
#include "policy/classic/bounds.h"
#include "policy/placer.h"
#include "policy/rl/trainer.h"
#include "python/src/bindings.h"

namespace placelab::python {
namespace {

/** What a callback argument becomes in Python: itself, or a dict for a training-log entry. */
template <class T>
const T& to_python(const T& value) {
  return value;
}
py::object to_python(const rl::LogEntry& entry) { return from_json(rl::to_json(entry)); }

/**
 * A Python callable made callable from C++ code that runs without the GIL: takes the GIL per call. Its
 * exception unwinds through the core as py::error_already_set (which takes the GIL to release what it
 * holds) and reaches the caller as itself. A KeyboardInterrupt (Ctrl-C noticed while the callable ran)
 * becomes policy::Interrupted, which the callers turn back into one once the core has stopped.
 */
template <class R, class... Args>
std::function<R(Args...)> gil_callback(const py::object& fn, const char* what) {
  if (fn.is_none()) return {};
  if (!PyCallable_Check(fn.ptr()))
    throw py::type_error(fmt::format("{} must be callable, got {}", what,
                                     py::str(py::type::handle_of(fn).attr("__name__")).cast<std::string>()));
  // The core may copy or drop the function without the GIL: its copies share one reference to the
  // callable, released under the GIL.
  std::shared_ptr<py::object> held(new py::object(fn), [](py::object* o) {
    py::gil_scoped_acquire acquire;
    delete o;
  });
  return [held, what](Args... args) -> R {
    py::gil_scoped_acquire acquire;
    try {
      if constexpr (std::is_void_v<R>) {
        (*held)(to_python(args)...);
      } else {
        py::object out = (*held)(to_python(args)...);
        if (out.is_none()) return R{true};  // None means "go on"
        return out.cast<R>();
      }
    } catch (py::cast_error&) {
      throw std::runtime_error(fmt::format("{} returned a value that is not True, False or None", what));
    } catch (py::error_already_set& e) {
      if (e.matches(PyExc_KeyboardInterrupt)) throw policy::Interrupted();
      // The callback's own exception goes on through the core (it unwinds like any error) and reaches
      // the caller with its type and traceback, noted with where it came from (Python 3.11's notes).
      if (py::hasattr(e.value(), "add_note")) e.value().attr("add_note")(fmt::format("raised in the {}", what));
      throw;
    }
  };
}

/**
 * Ctrl-C (or a Jupyter interrupt) while the core runs without the GIL: `poll()` asks Python whether one
 * is pending (Python handles signals on the main thread only; elsewhere the answer is no) and keeps
 * the exception its handler raised, so that no Python error stays set while the core goes on;
 * `raise()` raises it, or a KeyboardInterrupt, once the core has stopped. Used from the calling thread.
 */
class PythonInterrupt {
 public:
  bool poll() {
    py::gil_scoped_acquire acquire;
    if (PyErr_CheckSignals() == 0) return false;
    error_.emplace();  // fetches and clears the error
    return true;
  }
  /** poll() at most every 50 ms: for PlaceRequest::interrupted, asked between a placer's iterations. */
  std::function<bool()> hook() {
    return [this, last = std::chrono::steady_clock::now()]() mutable {
      const auto now = std::chrono::steady_clock::now();
      if (now - last < std::chrono::milliseconds(50)) return false;
      last = now;
      return poll();
    };
  }
  [[noreturn]] void raise() {
    if (error_) throw *error_;
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }

 private:
  std::optional<py::error_already_set> error_;
};

/** One training task from a (Graph, Cluster) or (name, Graph, Cluster) tuple; the core keeps copies. */
rl::Task task_of(const py::handle& item, size_t k, const rl::RewardOptions& reward) {
  const auto t = py::reinterpret_borrow<py::tuple>(item);
  if (!py::isinstance<py::tuple>(item) || (t.size() != 2 && t.size() != 3))
    throw Error(fmt::format("tasks[{}] must be a (graph, cluster) or (name, graph, cluster) tuple", k));
  const size_t first = t.size() - 2;
  auto expect = [&](bool ok, size_t i, const char* type) {
    if (!ok) throw py::type_error(fmt::format("tasks[{}][{}] must be a {}, got {}", k, i, type,
                                              py::cast<std::string>(py::str(py::type::handle_of(t[i]).attr("__name__")))));
  };
  expect(first == 0 || py::isinstance<py::str>(t[0]), 0, "str (the task's name)");
  expect(py::isinstance<graphs::Graph>(t[first]), first, "placelab.Graph");
  expect(py::isinstance<sim::Cluster>(t[first + 1]), first + 1, "placelab.Cluster");
  auto graph = std::make_shared<const graphs::Graph>(t[first].cast<const graphs::Graph&>());
  auto cluster = std::make_shared<const sim::Cluster>(t[first + 1].cast<const sim::Cluster&>());
  std::string name = first == 1 ? text_arg(t[0], fmt::format("tasks[{}][0]", k))
                                : fmt::format("{} on {}", graph->name(), cluster->name());
  return rl::make_task(std::move(name), std::move(graph), std::move(cluster), reward);
}

}  // namespace

void init_policy(py::module_& m) {
  m.def("placers", [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& p : policy::placers()) out.emplace_back(p.name, p.summary);
    return out;
  }, "Every registered placer as (name, summary), in a stable order.");

  m.def("fast_placers", [] { return policy::fast_placers(); },
        "The placers that finish in seconds on zoo graphs: compare()'s default rows, as on the command line.");

  m.def("place", [](const sim::Simulator& s, const TextArg& name_arg, const DictArg& options_arg,
                    const IntArg& seed_arg, const CallableArg& progress) {
    const std::string name = text_arg(name_arg, "placer name");
    const py::object& options = dict_arg(options_arg, "options");
    const auto seed = int_arg<uint64_t>(seed_arg, "seed");
    auto report = gil_callback<void, std::string_view>(progress.obj, "progress callback");  // checked first
    auto placer = policy::make_placer(name);
    PythonInterrupt interrupt;
    policy::PlaceRequest request{.simulator = s,
                                 .options = options.is_none() ? nlohmann::json::object()
                                                              : to_json(options, fmt::format("placer {} options", name)),
                                 .seed = seed,
                                 .progress = std::move(report),
                                 .interrupted = interrupt.hook()};
    policy::PlaceResult result;
    try {
      py::gil_scoped_release release;
      result = placer->place(request);
    } catch (const policy::Interrupted&) {
      interrupt.raise();
    }
    s.check_placement(result.device_of);
    {
      py::gil_scoped_release release;
      policy::add_memory_verdict(result.info, s.simulate(result.device_of), s.cluster());
    }
    return py::make_tuple(to_numpy(result.device_of), from_json(result.info));
  }, py::arg("simulator"), py::arg("name"), py::arg("options") = py::none(), py::arg("seed") = 0,
        py::arg("progress") = py::none(),
        "Places every op of simulator.graph with the placer `name` (see placers()); options is a dict of "
        "placer-specific options, progress an optional callable(str). Returns (placement int32 array, info dict); "
        "info carries the simulator's memory verdict: oom, and when true oom_excess_bytes and oom_devices.");

  m.def("learners", [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& l : rl::learners()) out.emplace_back(l.name, l.summary);
    return out;
  }, "Every learned policy as (name, summary): what train() takes.");

  m.def("train", [](const TextArg& policy_arg, const py::list& tasks, const IntArg& steps_arg, double minutes,
                    const PathArg& checkpoint_arg, const IntArg& checkpoint_every_arg, bool resume,
                    const IntArg& seed_arg, const DictArg& options_arg, const DictArg& reward_arg,
                    const CallableArg& on_step, const CallableArg& progress, const PathArg& init_arg) {
    const std::string policy = text_arg(policy_arg, "policy");
    const py::object &checkpoint = checkpoint_arg.obj, &options = dict_arg(options_arg, "options"),
                     &reward = dict_arg(reward_arg, "reward");
    const auto seed = int_arg<uint64_t>(seed_arg, "seed");
    const auto steps = int_arg<int64_t>(steps_arg, "steps");
    const auto checkpoint_every = int_arg<int64_t>(checkpoint_every_arg, "checkpoint_every");
    const std::string dir = checkpoint.is_none() ? "" : path_arg(checkpoint, "checkpoint");
    // A resumed run keeps its seed, and unless given its options and reward.
    const std::optional<rl::SavedRun> saved = resume && !dir.empty() ? std::optional(rl::saved_run(dir)) : std::nullopt;
    if (saved) rl::check_resumed_policy(saved->file, saved->policy, policy);
    const nlohmann::json policy_options = !options.is_none() ? to_json(options, fmt::format("{} options", policy))
                                          : saved                ? saved->options
                                                                 : nlohmann::json::object();
    const nlohmann::json reward_json = !reward.is_none()              ? to_json(reward, "reward")
                                       : saved && !saved->reward.is_null() ? saved->reward
                                                                           : nlohmann::json();
    const rl::RewardOptions reward_options =
        reward_json.is_null() ? rl::RewardOptions{} : rl::reward_options_from_json(reward_json, "reward");
    if (tasks.empty()) throw Error("train needs at least one (graph, cluster) task");
    std::vector<rl::Task> task_list;
    for (size_t k = 0; k < tasks.size(); ++k) task_list.push_back(task_of(tasks[k], k, reward_options));
    // Default names ("GRAPH on CLUSTER") shared by several tasks get their position, so that the log and
    // the checkpoint can tell them apart; a name given twice is the core's error.
    std::vector<bool> shared(task_list.size(), false);
    for (size_t k = 0; k < task_list.size(); ++k)
      for (size_t j = 0; j < k; ++j)
        if (task_list[j].name == task_list[k].name) shared[j] = shared[k] = true;
    for (size_t k = 0; k < task_list.size(); ++k)
      if (shared[k] && py::len(tasks[k]) == 2) task_list[k].name += fmt::format(" (tasks[{}])", k);
    rl::TrainOptions train_options{.steps = steps, .minutes = minutes, .checkpoint_dir = dir,
                                   .checkpoint_every = checkpoint_every, .resume = resume, .seed = seed};
    const uint64_t run_seed = saved ? saved->seed : seed;
    int32_t devices = 0;  // cluster-dependent defaults follow the largest cluster trained on
    for (const rl::Task& t : task_list) devices = std::max(devices, t.cluster->num_devices());
    // Steps unknown (0): a run's options must not depend on its length, or a longer resumed run would differ.
    // `init` starts a new run from another run's policy; a resumed run goes on from its own checkpoint.
    if (resume && !init_arg.obj.is_none())
      throw Error("train: init starts a new run from a checkpoint's policy and resume continues the run in "
                  "checkpoint; give one of them");
    const std::string init = init_arg.obj.is_none() ? "" : path_arg(init_arg.obj, "init");
    auto learner = init.empty() ? rl::make_learner(policy, policy_options, run_seed, devices, 0)
                                : rl::learner_from_init(init, policy, policy_options, run_seed);
    const auto step_callback = gil_callback<bool, const rl::LogEntry&>(on_step.obj, "on_step callback");
    const auto progress_callback = gil_callback<void, std::string_view>(progress.obj, "progress callback");
    // Ctrl-C (a Jupyter interrupt) ends the run after the current step, as if on_step returned False
    // (so the checkpoint is written), then raises KeyboardInterrupt here; also when a callback saw it.
    PythonInterrupt interrupt;
    bool interrupted = false;
    const std::function<bool(const rl::LogEntry&)> each_step = [&](const rl::LogEntry& entry) {
      // A pending Ctrl-C is taken first, so that it cannot fire inside on_step: the callback still gets
      // this step, which the checkpoint and the log hold.
      interrupted = interrupt.poll() || interrupted;
      try {
        if (step_callback && !step_callback(entry)) return false;
      } catch (const policy::Interrupted&) {
        interrupted = true;
      }
      return !interrupted;
    };
    const std::function<void(std::string_view)> each_progress = [&](std::string_view status) {
      try {
        if (!interrupted && progress_callback) progress_callback(status);
      } catch (const policy::Interrupted&) {
        interrupted = true;  // the step's end stops the run
      }
    };
    rl::TrainSummary summary;
    {
      py::gil_scoped_release release;
      summary = rl::train(*learner, task_list, train_options, each_step, each_progress);
    }
    if (interrupted) interrupt.raise();
    py::list placements;
    for (const auto& p : summary.best_placement) placements.append(to_numpy(p));
    py::dict out;
    out["steps"] = summary.steps;
    out["seed"] = summary.seed;
    out["wall_s"] = summary.wall_s;
    out["tasks"] = [&] { py::list names; for (const auto& t : task_list) names.append(t.name); return names; }();
    out["reference_s"] = [&] { py::list r; for (const auto& t : task_list) r.append(t.reference_s); return r; }();
    out["best_cost_s"] = summary.best_cost_s;
    out["best_step"] = summary.best_step;
    out["best_placement"] = placements;
    return out;
  }, py::arg("policy"), py::arg("tasks"), py::arg("steps") = 100, py::arg("minutes") = 0.0,
        py::arg("checkpoint") = py::none(), py::arg("checkpoint_every") = 10, py::arg("resume") = false,
        py::arg("seed") = 0, py::arg("options") = py::none(), py::arg("reward") = py::none(),
        py::arg("on_step") = py::none(), py::arg("progress") = py::none(), py::arg("init") = py::none(),
        "Trains learned policy `policy` (see learners()) on tasks, a list of (graph, cluster) or (name, graph, "
        "cluster) tuples, for `steps` steps (or `minutes`). With `checkpoint` (a folder) it writes log.jsonl and "
        "checkpoint.json there; resume=True continues that run exactly (with its own seed). `init` (a checkpoint file "
        "or folder of the same policy, e.g. an exported pre-trained one) starts a new run from its trained policy, "
        "`options` over its saved ones. on_step(entry: dict) is called after every "
        "step (return False to stop), e.g. for a live plot; progress(str) now and then. Returns a dict with steps, "
        "seed, wall_s, and per task best_cost_s, best_step and best_placement (int32 arrays). Place with the result via "
        "place(simulator, policy, {'checkpoint': folder}).");

  m.def("read_checkpoint", [](const Path& path) {
    nlohmann::json doc = rl::read_checkpoint(path);
    rl::find_learner(doc["policy"].get<std::string>(), rl::checkpoint_file(path) + ": policy");
    doc.erase("learner");  // parameters and moments: large, and only the core reads them
    return py::dict(from_json(doc));
  }, py::arg("path"), "A training checkpoint's header (format, policy, options, step, trainer state) as a dict.");

  m.def("lower_bound", [](const sim::Simulator& s) {
    policy::BoundParts parts;
    {
      py::gil_scoped_release release;
      parts = policy::lower_bound(s);
    }
    return py::dict(from_json(policy::bound_to_json(parts)));
  }, py::arg("simulator"),
        "A lower bound of the step time of every placement of simulator.graph that fits in memory, as placelab "
        "compare prints it: a dict of bound_s (None when no placement fits), its parts path_s, cut_s, device_s, "
        "work_s, link_s, and fits (policy/classic/bounds.h, docs/placers.md).");
}

}  // namespace placelab::python
