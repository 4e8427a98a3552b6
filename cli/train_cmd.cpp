// placelab train --graphs G1,G2,.. --cluster C --policy NAME [--steps N | --minutes M] [--checkpoint DIR]
//                [--resume | --init CHECKPOINT] [--seed S] [--options JSON] [--json]
// Under mpirun or srun, every process is a data-parallel rank of one run (docs/distributed.md); rank 0
// writes the log, the checkpoint and the summary.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <limits>
#include <memory>

#include <unistd.h>

#include <fmt/format.h>

#include "cli/common.h"
#include "cli/placing.h"
#include "graphs/error.h"
#include "policy/rl/comm.h"
#include "policy/rl/trainer.h"
#include "sim/presets.h"

namespace placelab::cli {

namespace {

struct TrainArgs {
  std::string graphs, cluster = "v100-nvlink-4", policy, options, checkpoint, init;
  int64_t steps = 100;  // when --steps is left out: unlimited with --minutes
  bool steps_given = false;
  double minutes = 0;
  int64_t checkpoint_every = 10;
  bool resume = false, json = false, seed_given = false;
  uint64_t seed = 1;
};

/**
 * Graph specs separated by commas. A spec's own parameters also use commas (`gnmt:layers=2,batch=64`),
 * so a piece of the form key=value continues the spec before it.
 */
std::vector<std::string> split_graph_specs(const std::string& text) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string piece = text.substr(begin, end - begin);
    const bool parameter = piece.find('=') != std::string::npos && piece.find(':') == std::string::npos;
    if (parameter && !out.empty()) {
      out.back() += (out.back().find(':') == std::string::npos ? ":" : ",") + piece;
    } else if (!piece.empty()) {
      out.push_back(piece);
    }
    begin = end + 1;
  }
  if (out.empty()) {
    throw Error(fmt::format("train: --graphs \"{}\" names no graph (e.g. --graphs inception_v3,gnmt:layers=2)", text));
  }
  return out;
}

// Ctrl-C or SIGTERM: the run stops after the step under way and writes its checkpoint; a second signal
// ends it at once (the handler resets itself).
volatile std::sig_atomic_t stop_signal = 0;

extern "C" void on_stop_signal(int sig) {
  stop_signal = sig;
  static constexpr char kNote[] = "\ntrain: stopping after this step (again to quit at once)\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kNote, sizeof kNote - 1);
}

void stop_on_signals() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

std::string seconds_text(double s) {
  if (!std::isfinite(s)) return "none fits";
  return s < 1 ? fmt::format("{:.4g} ms", s * 1e3) : fmt::format("{:.4g} s", s);
}

void print_summary(const rl::Learner& learner, const std::vector<rl::Task>& tasks, const rl::TrainSummary& summary,
                   const rl::RewardOptions& reward, const std::string& checkpoint) {
  fmt::print("policy     {}  ({} steps, {} wall, objective {})\n", learner.name(), summary.steps,
             human(summary.wall_s, "s"), rl::objective_name(reward.objective));
  fmt::print("  {:<40} {:>12} {:>12} {:>9} {:>8}\n", "task", "best", "reference", "speedup", "at step");
  for (size_t t = 0; t < tasks.size(); ++t) {
    const double best = summary.best_cost_s[t];
    fmt::print("  {:<40} {:>12} {:>12} {:>9} {:>8}\n", tasks[t].name, seconds_text(best),
               seconds_text(tasks[t].reference_s),
               std::isfinite(best) ? fmt::format("{:.2f}x", tasks[t].reference_s / best) : std::string("-"),
               summary.best_step[t]);
  }
  fmt::print("reference: the better of single_device and round_robin\n");
  if (!checkpoint.empty()) fmt::print("checkpoint {}/checkpoint.json, log {}/log.jsonl\n", checkpoint, checkpoint);
}

void run(const TrainArgs& a) {
  // What the run trains: from the flags, or on --resume from the checkpoint where a flag is left out.
  nlohmann::json options = a.options.empty() ? nlohmann::json::object() : parse_options(a.options);
  std::string policy = a.policy;
  if (a.checkpoint.empty() && a.resume) throw Error("train: --resume needs --checkpoint DIR (the run to continue)");
  if (a.resume && !a.init.empty()) {
    throw Error("train: --init starts a new run from a checkpoint's policy and --resume continues the run in "
                "--checkpoint; give one of them");
  }
  uint64_t seed = a.seed;
  if (a.resume) {
    // The run keeps its policy and seed, and unless given its options and reward.
    const rl::SavedRun saved = rl::saved_run(a.checkpoint);
    if (policy.empty()) policy = saved.policy;
    if (!rl::is_learned_policy(saved.policy))
      throw Error(fmt::format("{}: policy: \"{}\" is not a learned policy of this build", saved.file, saved.policy));
    rl::check_resumed_policy(saved.file, saved.policy, policy);
    if (a.seed_given && a.seed != saved.seed) {
      throw Error(fmt::format("train: --seed {} but the run in {} was seeded with {}; a resumed run keeps its seed, "
                              "so leave --seed out",
                              a.seed, a.checkpoint, saved.seed));
    }
    seed = saved.seed;
    if (a.options.empty()) {
      options = saved.options;
      if (!saved.reward.is_null()) options["reward"] = saved.reward;
    }
  }
  if (policy.empty() && !a.init.empty()) policy = rl::read_checkpoint(a.init)["policy"].get<std::string>();
  if (policy.empty()) throw Error("train: --policy is required (e.g. --policy hdp; known: see placelab compare --list)");
  if (a.graphs.empty()) throw Error("train: --graphs is required (e.g. --graphs inception_v3:training=1)");
  if (a.steps < 0) throw Error(fmt::format("train: --steps {} must be >= 0", a.steps));
  if (!(a.minutes >= 0) || !std::isfinite(a.minutes)) throw Error(fmt::format("train: --minutes {} must be >= 0", a.minutes));
  if (a.checkpoint_every < 0) {
    throw Error(fmt::format("train: --checkpoint-every {} must be >= 0 (0: only at the end)", a.checkpoint_every));
  }

  // Errors in options taken from the checkpoint name it; the flag's name themselves.
  const bool saved_options = a.resume && a.options.empty();
  const std::string saved_where = saved_options ? rl::checkpoint_file(a.checkpoint) : "";
  rl::RewardOptions reward;
  if (options.contains("reward")) {
    reward = rl::reward_options_from_json(options["reward"],
                                          saved_options ? saved_where + ": reward saved there" : "--options.reward");
    options.erase("reward");
  }
  auto cluster = std::make_shared<const sim::Cluster>(load_cluster(a.cluster));
  std::unique_ptr<rl::Learner> learner;  // bad names and options before the graphs are built
  try {
    // Steps unknown (0): a run's options must not depend on --steps, or a longer resumed run would differ.
    learner = a.init.empty() ? rl::make_learner(policy, options, seed, cluster->num_devices(), 0)
                             : rl::learner_from_init(a.init, policy, options, seed);
  } catch (const Error& e) {
    if (!saved_options) throw;
    throw Error(fmt::format("{}: options saved there: {}", saved_where, e.what()));
  }

  std::vector<rl::Task> tasks;
  for (const std::string& spec : split_graph_specs(a.graphs)) {
    auto graph = std::make_shared<const graphs::Graph>(load_graph(spec, "--graphs"));
    tasks.push_back(rl::make_task(fmt::format("{} on {}", spec, cluster->name()), graph, cluster, reward));
  }

  rl::TrainOptions train;
  train.steps = a.steps_given || a.minutes == 0 ? a.steps : std::numeric_limits<int64_t>::max();
  train.minutes = a.minutes;
  train.checkpoint_dir = a.checkpoint;
  train.checkpoint_every = a.checkpoint_every;
  train.resume = a.resume;
  train.seed = seed;
  if (rl::comm::size() == 1) stop_on_signals();  // mpirun ends its ranks with SIGTERM when one fails: let them go
  const rl::TrainSummary summary = rl::train(
      *learner, tasks, train, [](const rl::LogEntry&) { return stop_signal == 0; },
      [](std::string_view status) { note("train: {}\n", status); });
  const bool interrupted = stop_signal != 0;
  if (rl::comm::rank() != 0) return;  // rank 0 reports for the run

  nlohmann::json rows = nlohmann::json::array();
  for (size_t t = 0; t < tasks.size(); ++t) {
    const double best = summary.best_cost_s[t];
    rows.push_back({{"task", tasks[t].name},
                    {"graph", tasks[t].graph->name()},
                    {"ops", tasks[t].graph->num_ops()},
                    {"reference_s", tasks[t].reference_s},
                    {"best_cost_s", std::isfinite(best) ? nlohmann::json(best) : nlohmann::json()},
                    {"best_step", summary.best_step[t]},
                    {"speedup", std::isfinite(best) ? nlohmann::json(tasks[t].reference_s / best) : nlohmann::json()}});
  }
  if (a.json) {
    print_json({{"policy", learner->name()},
                {"options", learner->options()},
                {"reward", rl::to_json(reward)},
                {"cluster", cluster->name()},
                {"seed", summary.seed},
                {"steps", summary.steps},
                {"wall_s", summary.wall_s},
                {"checkpoint", a.checkpoint.empty() ? nlohmann::json() : nlohmann::json(a.checkpoint)},
                {"interrupted", interrupted},
                {"tasks", rows}});
  } else {
    print_summary(*learner, tasks, summary, reward, a.checkpoint);
  }
  if (interrupted) {
    note("train: interrupted after step {}; {}\n", summary.steps,
         a.checkpoint.empty() ? std::string("nothing was saved (give --checkpoint DIR to keep a run)")
                              : fmt::format("checkpoint written, continue with --resume --checkpoint {}", a.checkpoint));
    throw CLI::RuntimeError(128 + stop_signal);  // the shell's code for a signal
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a learned placement policy against the simulator");
  cmd->add_option("--graphs", args->graphs, "Comma-separated graph files or zoo names (NAME[:key=value,...])");
  cmd->add_option("--cluster", args->cluster, "Cluster file or preset name; default v100-nvlink-4");
  cmd->add_option("--policy", args->policy, "Learned policy: gdp, placeto, hdp or hsdag");
  CLI::Option* steps = cmd->add_option("--steps", args->steps, "Training steps in total, resumed ones included (default 100)");
  cmd->add_option("--minutes", args->minutes, "Stop after this many minutes of this run");
  cmd->add_option("--checkpoint", args->checkpoint, "Directory for checkpoint.json and the log.jsonl curve");
  cmd->add_option("--checkpoint-every", args->checkpoint_every, "Steps between checkpoints (default 10; also at the end)");
  cmd->add_flag("--resume", args->resume, "Continue the run in --checkpoint DIR exactly where it stopped");
  cmd->add_option("--init", args->init,
                  "Start from this checkpoint's trained policy (file or folder of the same policy, e.g. "
                  "policy/learned/pretrained/gdp.json); --options replace its saved ones");
  CLI::Option* seed = add_seed(cmd, args->seed, "Seed of every random choice of the policy (default 1; a resumed run keeps its own)");
  cmd->add_option("--options", args->options,
                  "Policy options as a JSON object, plus \"reward\": {\"objective\", \"oom_penalty\"}");
  cmd->add_flag("--json", args->json, "Print the summary as one JSON object");
  cmd->callback([args, seed, steps] {
    args->seed_given = seed->count() > 0;
    args->steps_given = steps->count() > 0;
    rl::comm::init();
    try {
      run(*args);
    } catch (const CLI::RuntimeError&) {
      throw;  // interrupted: every rank stopped at the same step and the checkpoint is written
    } catch (const std::exception& e) {
      // Other ranks may be waiting for this one: end them all (a single process reports it as usual).
      if (rl::comm::size() > 1) rl::comm::fail(e.what());
      throw;
    }
  });
}

}  // namespace placelab::cli
