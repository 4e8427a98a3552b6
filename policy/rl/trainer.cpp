// The training loop behind `placelab train`: tasks, steps, the JSONL curve, atomic checkpoints and an
// exact resume (the checkpoint holds the learner's whole state and the trainer's bests, and the log is
// cut back to the checkpoint's step, so a resumed run writes the same lines as an uninterrupted one).
#include "policy/rl/trainer.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graphs/error.h"
#include "graphs/io.h"
#include "graphs/json_util.h"
#include "policy/placer.h"
#include "policy/rl/comm.h"
#include "policy/rl/replicas.h"

namespace placelab::rl {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The cheaper of single_device and round_robin under the objective: a reference every graph has.
double reference_cost_s(const std::string& name, const sim::Simulator& simulator, const RewardOptions& reward) {
  double best = kInf;
  for (const char* placer : {"single_device", "round_robin"}) {
    const policy::PlaceRequest request{simulator};
    const std::vector<int32_t> device_of = policy::make_placer(placer)->place(request).device_of;
    best = std::min(best, score(simulator, device_of, simulator.simulate(device_of), reward).cost_s);
  }
  if (!(best > 0) || !std::isfinite(best)) {
    throw Error(fmt::format("task {}: its reference placements cost {} s; training needs a graph whose ops take time",
                            name, best));
  }
  return best;
}

// Infinity (no fitting placement yet) is null in JSON.
nlohmann::json cost_json(double cost_s) { return std::isfinite(cost_s) ? nlohmann::json(cost_s) : nlohmann::json(); }
double cost_from_json(const io::JsonNode& node) { return node.value().is_null() ? kInf : node.as_number(); }

std::string ms(double seconds) {
  return std::isfinite(seconds) ? fmt::format("{:.4g} ms", seconds * 1e3) : std::string("none fits");
}

// What the trainer itself carries across a resume.
struct TrainerState {
  uint64_t seed = 0;  // the fresh run's: a resumed run keeps it
  int64_t step = 0;
  double wall_s = 0;
  int64_t simulations = 0;
  std::vector<double> best_cost_s;
  std::vector<std::vector<int32_t>> best_placement;
  std::vector<int64_t> best_step;
};

// What a task's saved bests are valid for: its graph, cluster and cost model, by content (a file
// changed since the checkpoint keeps its name).
nlohmann::json task_fingerprint(const Task& task) {
  auto fnv1a = [](const std::string& text) {
    uint64_t h = 0xcbf29ce484222325;
    for (unsigned char c : text) h = (h ^ c) * 0x100000001b3;
    return fmt::format("{:016x}", h);
  };
  return {{"ops", task.graph->num_ops()},
          {"devices", task.cluster->num_devices()},
          {"graph_hash", fnv1a(io::dump_json(graphs::graph_to_json(*task.graph)))},
          {"cluster_hash", fnv1a(io::dump_json(sim::cluster_to_json(*task.cluster)))},
          {"cost_model", task.simulator->cost_model()->name()}};
}

// `replicas`: the other ranks' own learner state (gather_replicas), saved when there are several ranks.
nlohmann::json trainer_json(const TrainerState& state, const std::vector<Task>& tasks,
                            const std::vector<nlohmann::json>& fingerprints, const nlohmann::json& replicas) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t t = 0; t < tasks.size(); ++t) {
    list.push_back({{"name", tasks[t].name},
                    {"fingerprint", fingerprints[t]},
                    {"reward", to_json(tasks[t].reward)},
                    {"best_cost_s", cost_json(state.best_cost_s[t])},
                    {"best_step", state.best_step[t]},
                    {"best_placement", state.best_placement[t]}});
  }
  nlohmann::json out = {{"seed", state.seed}, {"wall_s", state.wall_s}, {"simulations", state.simulations},
                        {"tasks", std::move(list)}};
  if (!replicas.is_null()) out["replicas"] = replicas;
  return out;
}

// Rank 0's step, seed, counts and best costs on every rank (the best placements stay on rank 0, which saves them).
void share_trainer_state(TrainerState& state) {
  if (comm::size() == 1) return;
  std::string text;
  if (comm::rank() == 0) {
    nlohmann::json costs = nlohmann::json::array();
    for (double cost_s : state.best_cost_s) costs.push_back(cost_json(cost_s));
    text = io::dump_json({{"seed", state.seed}, {"step", state.step}, {"wall_s", state.wall_s},
                          {"simulations", state.simulations}, {"best_cost_s", costs}, {"best_step", state.best_step}});
  }
  comm::broadcast(text, "start: rank 0's trainer state");
  if (comm::rank() == 0) return;
  const nlohmann::json doc = nlohmann::json::parse(text);
  state.seed = doc["seed"].get<uint64_t>();
  state.step = doc["step"].get<int64_t>();
  state.wall_s = doc["wall_s"].get<double>();
  state.simulations = doc["simulations"].get<int64_t>();
  for (size_t t = 0; t < state.best_cost_s.size(); ++t) {
    state.best_cost_s[t] = doc["best_cost_s"][t].is_null() ? kInf : doc["best_cost_s"][t].get<double>();
    state.best_step[t] = doc["best_step"][t].get<int64_t>();
  }
}

// Restores what trainer_json saved at `step`, checking that it fits these tasks.
void restore_trainer(const io::JsonNode& node, const std::vector<Task>& tasks,
                     const std::vector<nlohmann::json>& fingerprints, int64_t step, TrainerState& state) {
  node.check_fields({"seed", "wall_s", "simulations", "tasks", "replicas"});
  const io::JsonNode list = node.at("tasks");
  std::string saved, given;
  for (size_t t = 0; t < list.size(); ++t) saved += (t ? ", " : "") + list.at(t).at("name").as_string();
  for (size_t t = 0; t < tasks.size(); ++t) given += (t ? ", " : "") + tasks[t].name;
  if (saved != given) {
    node.at("tasks").fail(fmt::format("the checkpoint trained on [{}] but this run has [{}]; resume with the same "
                                      "graphs and cluster, or start a new run in another directory",
                                      saved, given));
  }
  state.wall_s = node.at("wall_s").as_amount();
  state.simulations = node.at("simulations").as_int();
  if (state.simulations < 0) node.at("simulations").fail("must be >= 0");
  for (size_t t = 0; t < tasks.size(); ++t) {
    const io::JsonNode entry = list.at(t);
    entry.check_fields({"name", "fingerprint", "reward", "best_cost_s", "best_step", "best_placement"});
    // Both read strictly first: a damaged checkpoint is reported as such, not as a changed file or reward.
    const io::JsonNode fingerprint = entry.at("fingerprint");
    fingerprint.expect_object();
    fingerprint.check_fields({"ops", "devices", "graph_hash", "cluster_hash", "cost_model"});
    for (const char* count : {"ops", "devices"}) fingerprint.at(count).as_int();
    for (const char* text : {"graph_hash", "cluster_hash", "cost_model"}) fingerprint.at(text).as_string();
    reward_options_from_json(entry.at("reward").value(), entry.at("reward").where());
    if (entry.at("fingerprint").value() != fingerprints[t]) {
      entry.at("fingerprint").fail(fmt::format("is {} but this run's graph and cluster give {}: a file changed since "
                                               "the checkpoint; resume with the files it trained on, or start a new "
                                               "run in another directory",
                                               entry.at("fingerprint").value().dump(), fingerprints[t].dump()));
    }
    if (entry.at("reward").value() != to_json(tasks[t].reward)) {
      entry.at("reward").fail(fmt::format("is {} but this run rewards {}; resume with the same reward options",
                                          entry.at("reward").value().dump(), to_json(tasks[t].reward).dump()));
    }
    // No best yet (null cost, step -1, no placement), or a fitting placement found before `step`.
    state.best_cost_s[t] = cost_from_json(entry.at("best_cost_s"));
    state.best_step[t] = entry.at("best_step").as_int();
    const io::JsonNode placement = entry.at("best_placement");
    const bool none = !std::isfinite(state.best_cost_s[t]);
    if (!none && !(state.best_cost_s[t] > 0)) entry.at("best_cost_s").fail("must be > 0, or null when none fits");
    if (none ? state.best_step[t] != -1 : state.best_step[t] < 0 || state.best_step[t] >= step) {
      entry.at("best_step").fail(none ? "must be -1 when best_cost_s is null"
                                      : fmt::format("must be a step before the checkpoint's ({})", step));
    }
    const size_t ops = none ? 0 : static_cast<size_t>(tasks[t].graph->num_ops());
    if (placement.size() != ops) {
      placement.fail(fmt::format("has {} entries, expected {} (the best placement's ops)", placement.size(), ops));
    }
    const int64_t devices = tasks[t].cluster->num_devices();
    std::vector<int32_t> device_of(ops);
    for (size_t i = 0; i < ops; ++i) {
      const int64_t d = placement.at(i).as_int();
      if (d < 0 || d >= devices) placement.at(i).fail(fmt::format("is {}, expected a device in 0..{}", d, devices - 1));
      device_of[i] = static_cast<int32_t>(d);
    }
    state.best_placement[t] = std::move(device_of);
  }
}

// Keeps the log's lines of the steps before `step`, which must all be there in order: a killed run can
// only have left lines after them, the last maybe half-written. Nothing else is dropped silently.
void truncate_log(const std::string& path, int64_t step, const std::function<void(std::string_view)>& progress) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) {
    if (step > 0 && progress) progress(fmt::format("{} is missing; the new log starts at step {}", path, step));
    return;
  }
  const std::string fix = fmt::format("move it away (e.g. to {}.damaged) to resume with a log from step {} on", path, step);
  if (!fs::is_regular_file(status)) throw Error(fmt::format("{}: is not a file; {}", path, fix));
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
  if (in.bad()) throw Error(fmt::format("{}: cannot be read", path));
  std::string kept;
  int64_t expected = 0;
  for (size_t i = 0; i < lines.size() && expected < step; ++i) {
    const nlohmann::json entry = nlohmann::json::parse(lines[i], nullptr, false);
    const bool valid = !entry.is_discarded() && entry.is_object() && entry.contains("step") &&
                       entry["step"].is_number_integer();
    if (!valid && i + 1 == lines.size()) break;  // half-written by a killed run
    if (!valid) throw Error(fmt::format("{}:{}: is not a log line; {}", path, i + 1, fix));
    const int64_t at = entry["step"].get<int64_t>();
    if (at != expected) throw Error(fmt::format("{}:{}: is step {} where step {} should be; {}", path, i + 1, at, expected, fix));
    kept += lines[i] + '\n';
    ++expected;
  }
  if (expected < step) {
    const std::string has = expected == 0 ? "has no steps" : fmt::format("has steps 0 to {} only", expected - 1);
    throw Error(fmt::format("{}: {} but the checkpoint is at step {}; {}", path, has, step, fix));
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << kept;
    if (!out) throw Error(fmt::format("{}: cannot be written (disk full?)", tmp));
  }
  fs::rename(tmp, path, ec);
  if (ec) throw Error(fmt::format("{}: cannot replace the file ({})", path, ec.message()));
}

// An exclusive lock on a checkpoint directory for as long as a run uses it: a second run there would
// interleave its log lines and checkpoints with the first's. The kernel drops it when the process dies;
// a run that ends, also by an error, removes the file too. A run that opened the file just before its
// holder removed it then holds a lock on a file no longer there: it checks the name still leads to the
// file it locked, and tries again when not.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& dir) : path_((fs::path(dir) / "lock").string()) {
    for (;;) {
      fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd_ < 0) throw Error(fmt::format("{}: cannot be created ({})", path_, std::strerror(errno)));
      if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        ::close(fd_);
        throw Error(fmt::format("{}: another training run is using this directory; wait for it to end, or "
                                "choose another --checkpoint directory",
                                dir));
      }
      struct stat held {}, named {};
      if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
          held.st_ino == named.st_ino)
        return;
      ::close(fd_);
    }
  }
  ~DirectoryLock() {
    ::unlink(path_.c_str());  // before the lock goes, so that no other run can hold the file being removed
    ::close(fd_);
  }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace

Task make_task(std::string name, std::shared_ptr<const sim::Simulator> simulator, const RewardOptions& reward) {
  if (!simulator) throw Error(fmt::format("task {}: no simulator", name));
  Task task;
  task.graph = std::shared_ptr<const graphs::Graph>(simulator, &simulator->graph());
  task.cluster = std::shared_ptr<const sim::Cluster>(simulator, &simulator->cluster());
  // The problem keeps a reference to the simulator: its deleter keeps the simulator alive.
  task.problem = std::shared_ptr<const learned::Problem>(new learned::Problem(*simulator),
                                                         [keep = simulator](const learned::Problem* p) { delete p; });
  task.reference_s = reference_cost_s(name, *simulator, reward);
  task.reward = reward;
  task.simulator = std::move(simulator);
  task.name = io::as_written(name);  // as the checkpoint keeps it (a file name need not be UTF-8), so resume compares alike
  return task;
}

Task make_task(std::string name, std::shared_ptr<const graphs::Graph> graph,
               std::shared_ptr<const sim::Cluster> cluster, const RewardOptions& reward) {
  if (!graph || !cluster) throw Error(fmt::format("task {}: graph and cluster must be given", name));
  // The simulator keeps references to the graph and the cluster: its deleter keeps them alive.
  std::shared_ptr<const sim::Simulator> simulator(new sim::Simulator(*graph, *cluster),
                                                  [graph, cluster](const sim::Simulator* s) { delete s; });
  Task task = make_task(std::move(name), std::move(simulator), reward);
  task.graph = std::move(graph);
  task.cluster = std::move(cluster);
  return task;
}

nlohmann::json to_json(const LogEntry& entry) {
  return {{"step", entry.step},       {"task", entry.task},       {"reward", entry.reward},
          {"cost_s", entry.cost_s},   {"best_cost_s", cost_json(entry.best_cost_s)},
          {"wall_s", entry.wall_s},   {"loss", entry.loss},       {"entropy", entry.entropy},
          {"simulations", entry.simulations}};
}

std::string checkpoint_file(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) ? (fs::path(path) / "checkpoint.json").string() : path;
}

namespace {

// The log on disk before the checkpoint that counts its lines: after a crash of the machine, not only of
// the process, resume still finds every step the checkpoint has (extra lines it drops).
void sync_to_disk(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const bool synced = fd >= 0 && ::fsync(fd) == 0;
  const int error = errno;
  if (fd >= 0) ::close(fd);
  if (!synced) throw Error(fmt::format("{}: cannot be synced to disk ({})", path, std::strerror(error)));
}

}  // namespace

namespace {

// Where `value` holds a number that is not finite (JSON writes it as null, which no reader takes back),
// as a JSON path below `path`; empty when it holds none.
std::string non_finite_at(const nlohmann::json& value, const std::string& path) {
  if (value.is_number_float()) return std::isfinite(value.get<double>()) ? std::string() : path;
  if (value.is_object()) {
    for (const auto& [key, item] : value.items())
      if (std::string at = non_finite_at(item, path + "." + key); !at.empty()) return at;
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i)
      if (std::string at = non_finite_at(value[i], fmt::format("{}[{}]", path, i)); !at.empty()) return at;
  }
  return {};
}

}  // namespace

void save_checkpoint(const std::string& dir, const Learner& learner, int64_t step, const nlohmann::json& trainer_state) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("{}: cannot create the checkpoint directory ({})", dir, ec.message()));
  nlohmann::json state = learner.state();
  if (const std::string at = non_finite_at(state, "learner"); !at.empty())
    throw Error(fmt::format("{}: the checkpoint of step {} is not written: {} is not a finite number, so training "
                            "diverged (the checkpoint already there is kept); lower the learning rate (option lr)",
                            dir, step, at));
  const nlohmann::json doc = {{"format", "placelab.checkpoint"},
                              {"version", 1},
                              {"policy", learner.name()},
                              {"options", learner.options()},
                              {"step", step},
                              {"learner", std::move(state)},
                              {"trainer", trainer_state}};
  io::write_json_atomic((fs::path(dir) / "checkpoint.json").string(), doc, -1);
}

nlohmann::json read_checkpoint(const std::string& path) {
  const std::string file = checkpoint_file(path);
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    throw Error(fmt::format("{}: no checkpoint there (write one with placelab train --checkpoint DIR)", file));
  }
  nlohmann::json doc = io::read_json_file(file);
  check_checkpoint(doc, file);
  return doc;
}

void check_checkpoint(const nlohmann::json& doc, const std::string& origin) {
  const io::JsonNode root(doc, origin);
  root.expect_object();
  root.check_header("placelab.checkpoint", {1});
  root.check_fields({"format", "version", "policy", "options", "step", "learner", "trainer"});
  if (root.at("policy").as_string().empty()) root.at("policy").fail("is empty; it must name a learned policy");
  root.at("options").expect_object();
  if (root.at("step").as_int() < 0) root.at("step").fail("must be >= 0");
  root.at("learner").expect_object();
  root.at("trainer").expect_object();
}

namespace {

uint64_t checkpoint_seed(const nlohmann::json& doc, const std::string& origin) {
  const io::JsonNode seed = io::JsonNode(doc, origin).at("trainer").at("seed");
  if (!seed.value().is_number_unsigned()) seed.fail("must be an integer >= 0");
  return seed.value().get<uint64_t>();
}

}  // namespace

SavedRun saved_run(const std::string& dir) {
  SavedRun run;
  run.file = checkpoint_file(dir);
  const nlohmann::json doc = read_checkpoint(dir);
  run.policy = doc["policy"].get<std::string>();
  run.options = doc["options"];
  run.seed = checkpoint_seed(doc, run.file);
  const io::JsonNode tasks = io::JsonNode(doc, run.file).at("trainer").at("tasks");
  if (tasks.size() > 0) {
    const io::JsonNode reward = tasks.at(0).at("reward");
    reward_options_from_json(reward.value(), reward.where());  // a damaged one is named by its path
    run.reward = reward.value();
  }
  return run;
}

void check_resumed_policy(const std::string& file, const std::string& saved, std::string_view name) {
  if (saved != name) {
    throw Error(fmt::format("{}: policy: is \"{}\" but this run trains {}; resume with --policy {}", file, saved, name, saved));
  }
}

namespace {

// Gives `learner` `state`, saved in checkpoint `origin`, naming the checkpoint when it does not fit.
void load_saved_state(Learner& learner, const nlohmann::json& state, const std::string& origin) {
  try {
    learner.load_state(state);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: learner: the state does not fit policy {} with options {}: {}", origin,
                            learner.name(), learner.options().dump(), e.what()));
  }
}

}  // namespace

std::unique_ptr<Learner> learner_from_checkpoint(const nlohmann::json& doc, const std::string& origin,
                                                 const nlohmann::json& overrides, std::optional<uint64_t> seed) {
  check_checkpoint(doc, origin);
  nlohmann::json options = doc["options"];
  options.update(overrides);
  std::unique_ptr<Learner> learner;
  try {
    learner = make_learner(doc["policy"].get<std::string>(), options, seed.value_or(0));
  } catch (const Error& e) {
    // The checkpoint's fault only if its own options fail too; else an option given over it did.
    try {
      make_learner(doc["policy"].get<std::string>(), doc["options"], 0);
    } catch (const Error&) {
      throw Error(fmt::format("{}: policy: {}", origin, e.what()));
    }
    throw;
  }
  nlohmann::json state = doc["learner"];
  if (seed && state.is_object() && state.contains("rng")) state["rng"] = learner->state()["rng"];  // the seed's stream
  load_saved_state(*learner, state, origin);
  return learner;
}

std::unique_ptr<Learner> learner_from_init(const std::string& init, std::string_view policy,
                                           const nlohmann::json& options, uint64_t seed) {
  const nlohmann::json doc = read_checkpoint(init);
  const std::string file = checkpoint_file(init);
  if (doc["policy"] != policy) {
    throw Error(fmt::format("{}: policy: is {} but this run trains {}; start from a {} checkpoint", file,
                            doc["policy"].dump(), policy, policy));
  }
  return learner_from_checkpoint(doc, file, options, seed);
}

std::unique_ptr<Learner> load_learner(const std::string& path) {
  return learner_from_checkpoint(read_checkpoint(path), checkpoint_file(path));
}

int64_t Learner::max_step_simulations(const Task& task, int64_t /*step*/) {
  throw Error(fmt::format("policy {} does not say how many simulations a training step takes on {}, so it cannot "
                          "run on a simulations budget",
                          name(), task.name));
}

int64_t Learner::max_place_simulations(const Task& task) {
  throw Error(fmt::format("policy {} does not say how many simulations placing {} takes, so it cannot run on a "
                          "simulations budget",
                          name(), task.name));
}

TrainSummary train(Learner& learner, const std::vector<Task>& tasks, const TrainOptions& options,
                   const std::function<bool(const LogEntry&)>& on_step,
                   const std::function<void(std::string_view)>& progress) {
  if (tasks.empty()) throw Error("train: no tasks (give at least one graph)");
  // The log and the checkpoint tell tasks apart by name.
  for (size_t t = 0; t < tasks.size(); ++t)
    for (size_t u = 0; u < t; ++u)
      if (tasks[u].name == tasks[t].name)
        throw Error(fmt::format("train: tasks {} and {} are both named \"{}\"; give each task its own name (the "
                                "log and the checkpoint tell tasks apart by name)", u, t, tasks[t].name));
  if (options.steps < 0) throw Error(fmt::format("train: steps {} must be >= 0", options.steps));
  if (!(options.minutes >= 0)) throw Error(fmt::format("train: minutes {} must be >= 0", options.minutes));
  const size_t n = tasks.size();
  TrainerState state;
  state.best_cost_s.assign(n, kInf);
  state.best_placement.assign(n, {});
  state.best_step.assign(n, -1);

  state.seed = options.seed;

  // Under MPI every rank trains (replicas.h); rank 0 alone reads and writes the files and reports progress.
  const int rank = comm::rank(), ranks = comm::size();
  const bool checkpointing = !options.checkpoint_dir.empty();
  const bool logging = checkpointing && rank == 0;
  if (logging) {
    std::error_code ec;
    if (fs::exists(options.checkpoint_dir, ec) && !fs::is_directory(options.checkpoint_dir, ec)) {
      const fs::path folder = fs::path(options.checkpoint_dir).parent_path();
      throw Error(fmt::format("{}: is a file; the checkpoint is the run's directory (e.g. {})", options.checkpoint_dir,
                              folder.empty() ? "." : folder.string()));
    }
  }
  const std::string log_path = logging ? (fs::path(options.checkpoint_dir) / "log.jsonl").string() : "";
  std::vector<nlohmann::json> fingerprints;
  if (logging) std::transform(tasks.begin(), tasks.end(), std::back_inserter(fingerprints), task_fingerprint);
  std::optional<DirectoryLock> lock;
  nlohmann::json saved_replicas;  // the other ranks' own state in the checkpoint (rank 0 reads it)
  if (options.resume && !checkpointing) throw Error("train: resume needs the checkpoint directory of the run to continue");
  if (options.resume && logging) {
    std::error_code ec;
    if (fs::is_directory(options.checkpoint_dir, ec)) lock.emplace(options.checkpoint_dir);
    const std::string file = checkpoint_file(options.checkpoint_dir);
    io::remove_partial_writes(file);  // a save killed mid-write; under the lock no writer is left
    const nlohmann::json doc = read_checkpoint(options.checkpoint_dir);
    const io::JsonNode root(doc, file);
    check_resumed_policy(file, doc["policy"].get<std::string>(), learner.name());
    if (doc["options"] != learner.options()) {
      root.at("options").fail(fmt::format("are {} but this run has {}; resume with the checkpoint's options",
                                          doc["options"].dump(), learner.options().dump()));
    }
    state.step = doc["step"].get<int64_t>();
    state.seed = checkpoint_seed(doc, file);
    restore_trainer(root.at("trainer"), tasks, fingerprints, state.step, state);
    load_saved_state(learner, doc["learner"], file);
    if (doc["trainer"].contains("replicas")) saved_replicas = doc["trainer"]["replicas"];
    truncate_log(log_path, state.step, progress);
    if (progress) {
      progress(state.step < options.steps
                   ? fmt::format("resuming {} at step {}", options.checkpoint_dir, state.step)
                   : fmt::format("{} is at step {} already, not below the {} steps asked: nothing to train (ask "
                                 "for more steps)", options.checkpoint_dir, state.step, options.steps));
    }
  } else if (logging) {
    std::error_code ec;
    fs::create_directories(options.checkpoint_dir, ec);
    if (ec) throw Error(fmt::format("{}: cannot create the directory ({})", options.checkpoint_dir, ec.message()));
    lock.emplace(options.checkpoint_dir);
    const fs::path existing = fs::path(options.checkpoint_dir) / "checkpoint.json";
    if (fs::exists(existing, ec)) {
      throw Error(fmt::format("{}: a checkpoint is already there; pass --resume to continue that run, or choose "
                              "another --checkpoint directory",
                              existing.string()));
    }
    std::ofstream(log_path, std::ios::trunc);
  }
  std::ofstream log;
  if (logging) {
    log.open(log_path, std::ios::app);
    if (!log) throw Error(fmt::format("{}: cannot be written", log_path));
  }
  share_trainer_state(state);
  start_replicas(learner, state.seed, state.step, saved_replicas);

  const int64_t every = options.progress_every > 0 ? options.progress_every
                                                    : std::clamp<int64_t>(options.steps / 20, 1, 50);
  const auto start = Clock::now();
  auto last_report = start;
  const double wall_before_s = state.wall_s;
  const auto elapsed_s = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const auto save = [&] {
    if (!checkpointing) return;
    const nlohmann::json replicas = gather_replicas(learner, state.step);  // every rank takes part
    if (!logging) return;
    sync_to_disk(log_path);
    save_checkpoint(options.checkpoint_dir, learner, state.step, trainer_json(state, tasks, fingerprints, replicas));
  };

  bool stop = state.step >= options.steps;
  if (stop && checkpointing && !options.resume) save();  // zero steps still leave a checkpoint to start from
  const GradientAverage average;  // the optimizer steps of train_step average their gradients over the ranks
  while (!stop) {
    const int64_t step = state.step;
    comm::set_context(fmt::format("step {}", step));
    if (options.before_step &&
        comm::any(!options.before_step(tasks[task_of(step, rank, ranks, n)], step), "budget vote")) {
      save();
      break;
    }
    inject_test_fault(step);
    const size_t mine = task_of(step, rank, ranks, n);
    const StepStats stats = learner.train_step(tasks[mine], step);
    const std::vector<RankStep> all = share_step(mine, stats, wall_before_s + elapsed_s());
    for (int r = 0; r < ranks; ++r) {
      const RankStep& s = all[static_cast<size_t>(r)];
      if (!std::isfinite(s.loss) || !std::isfinite(s.entropy))
        throw Error(fmt::format("training diverged at step {} ({}{}): the loss is {} and the entropy {}; {}lower the "
                                "learning rate (option lr)",
                                step, tasks[s.task].name, ranks > 1 ? fmt::format(", rank {}", r) : "", s.loss,
                                s.entropy,
                                logging && fs::exists(fs::path(options.checkpoint_dir) / "checkpoint.json")
                                    ? fmt::format("the last checkpoint in {} is kept; ", options.checkpoint_dir)
                                    : ""));
    }
    // Bests in rank order; a rank whose best wins sends its placement to rank 0, which keeps them.
    std::vector<int> winner(n, -1);
    for (int r = 0; r < ranks; ++r) {
      const RankStep& s = all[static_cast<size_t>(r)];
      if (s.best_cost_s < state.best_cost_s[s.task]) {
        state.best_cost_s[s.task] = s.best_cost_s;
        state.best_step[s.task] = step;
        winner[s.task] = r;
      }
      state.simulations += s.simulations;
    }
    for (size_t t = 0; t < n; ++t)
      if (winner[t] >= 0) {
        std::vector<int32_t> placement = placement_to_rank0(winner[t], winner[t] == rank ? stats.best_placement
                                                                                           : std::vector<int32_t>{});
        if (rank == 0) state.best_placement[t] = std::move(placement);
      }
    state.step = step + 1;
    state.wall_s = all[0].wall_s;

    // Several ranks: the means over the ranks' rollouts (their tasks may differ), rank 0's task named.
    const size_t t = all[0].task;
    LogEntry entry{step, tasks[t].name, all[0].reward, all[0].cost_s, state.best_cost_s[t],
                   state.wall_s, all[0].loss, all[0].entropy, state.simulations};
    for (size_t r = 1; r < all.size(); ++r) {
      entry.reward += all[r].reward;
      entry.cost_s += all[r].cost_s;
      entry.loss += all[r].loss;
      entry.entropy += all[r].entropy;
    }
    for (double* mean : {&entry.reward, &entry.cost_s, &entry.loss, &entry.entropy}) *mean /= ranks;
    if (logging) {
      log << io::dump_json(to_json(entry)) << '\n';
      log.flush();
      if (!log) throw Error(fmt::format("{}: write failed (disk full?)", log_path));
    }
    if (on_step && !on_step(entry)) stop = true;
    if (state.step >= options.steps) stop = true;
    if (options.minutes > 0 && elapsed_s() >= options.minutes * 60) stop = true;
    stop = comm::any(stop, "stop vote");  // a signal or the time limit on any rank stops all at this step

    const auto now = Clock::now();
    if (rank == 0 && progress &&
        (stop || step == 0 || state.step % every == 0 || std::chrono::duration<double>(now - last_report).count() >= 10)) {
      last_report = now;
      const std::string of = options.steps == std::numeric_limits<int64_t>::max() ? "" : fmt::format("/{}", options.steps);
      progress(fmt::format("step {}{}  {}  reward {:.4f}  cost {}  best {} (reference {})  wall {:.1f} s",
                           state.step, of, tasks[t].name, entry.reward, ms(entry.cost_s),
                           ms(state.best_cost_s[t]), ms(tasks[t].reference_s), state.wall_s));
    }
    if (stop || (options.checkpoint_every > 0 && state.step % options.checkpoint_every == 0)) save();
  }

  TrainSummary summary;
  summary.seed = state.seed;
  summary.steps = state.step;
  summary.wall_s = state.wall_s;
  summary.best_cost_s = std::move(state.best_cost_s);
  summary.best_placement = std::move(state.best_placement);
  summary.best_step = std::move(state.best_step);
  return summary;
}

}  // namespace placelab::rl
