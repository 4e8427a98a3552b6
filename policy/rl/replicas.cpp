// Data-parallel replicas of one training run: see replicas.h.
#include "policy/rl/replicas.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <unistd.h>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "policy/rl/comm.h"
#include "policy/rl/pg.h"

namespace placelab::rl {

namespace {

using autodiff::Tensor;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9;
  x = (x ^ (x >> 27)) * 0x94d049bb133111eb;
  return x ^ (x >> 31);
}

// A random stream for rank `rank` that no other (seed, rank, step) shares in practice.
uint64_t rank_seed(uint64_t seed, int rank, int64_t step) {
  return splitmix64(splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(rank)) ^ static_cast<uint64_t>(step));
}

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3;
  return h;
}

bool own_field(const std::string& key) { return key != "params" && key != "optimizer"; }

nlohmann::json own_part(const nlohmann::json& state) {
  nlohmann::json own = nlohmann::json::object();
  for (const auto& [key, value] : state.items())
    if (own_field(key)) own[key] = value;
  return own;
}

uint64_t replicated_hash(const nlohmann::json& state) {
  return fnv1a(io::dump_json(state.at("params")) + io::dump_json(state.at("optimizer")));
}

// PLACELAB_TEST_FAULT's "KIND:RANK[:STEP]" when KIND matches; rank -1 otherwise.
std::pair<int, int64_t> test_fault(std::string_view kind) {
  const char* text = std::getenv("PLACELAB_TEST_FAULT");
  if (text == nullptr || std::string_view(text).substr(0, kind.size()) != kind) return {-1, -1};
  int rank = -1;
  long long step = -1;
  if (std::sscanf(text + kind.size(), ":%d:%lld", &rank, &step) < 1)
    throw Error(fmt::format("PLACELAB_TEST_FAULT={}: expected exit:RANK:STEP, hang:RANK:STEP or unsynced:RANK", text));
  return {rank, step};
}

// `keep_own`: take part in the sum but keep this rank's gradients (the test fault "unsynced").
void average_gradients(const std::vector<Tensor>& params, bool keep_own) {
  // One buffer: a has-gradient flag per parameter, then every gradient (zeros where none).
  size_t total = params.size();
  for (const Tensor& p : params) total += static_cast<size_t>(p.size());
  std::vector<float> buffer(total, 0.0f);
  size_t at = params.size();
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& grad = params[i].grad();
    if (grad.size() > 0) {
      buffer[i] = 1;
      std::copy(grad.data(), grad.data() + grad.size(), buffer.begin() + static_cast<std::ptrdiff_t>(at));
    }
    at += static_cast<size_t>(params[i].size());
  }
  comm::sum(buffer, "gradient sum");
  if (keep_own) return;
  const float scale = 1.0f / static_cast<float>(comm::size());
  at = params.size();
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor p = params[i];
    if (buffer[i] > 0) {
      auto& grad = p.mutable_grad();
      grad.resize(p.rows(), p.cols());
      for (Eigen::Index k = 0; k < grad.size(); ++k) grad.data()[k] = buffer[at + static_cast<size_t>(k)] * scale;
    }
    at += static_cast<size_t>(p.size());
  }
}

}  // namespace

size_t task_of(int64_t step, int rank, int ranks, size_t tasks) {
  return static_cast<size_t>((step * ranks + rank) % static_cast<int64_t>(tasks));
}

GradientAverage::GradientAverage() {
  if (comm::size() == 1) return;
  const bool keep_own = test_fault("unsynced").first == comm::rank();
  hook_.emplace([keep_own](const std::vector<Tensor>& params) { average_gradients(params, keep_own); });
}

void start_replicas(Learner& learner, uint64_t seed, int64_t step, const nlohmann::json& saved) {
  const int ranks = comm::size(), rank = comm::rank();
  if (ranks == 1) return;
  std::string text;
  if (rank == 0) text = io::dump_json({{"learner", learner.state()}, {"saved", saved}});
  comm::broadcast(text, "start: rank 0's learner");
  if (rank == 0) return;
  const nlohmann::json doc = nlohmann::json::parse(text);
  nlohmann::json state = doc.at("learner");
  const nlohmann::json& replicas = doc.at("saved");
  if (replicas.is_array() && replicas.size() == static_cast<size_t>(ranks - 1)) {
    for (const auto& [key, value] : replicas.at(static_cast<size_t>(rank - 1)).at("own").items()) state[key] = value;
  } else {
    if (!state.contains("rng"))
      throw Error(fmt::format("policy {}: its state has no random stream (\"rng\"), which data-parallel training "
                              "gives each rank; train it on a single process", learner.name()));
    state["rng"] = rng_state(std::mt19937_64(rank_seed(seed, rank, step)));
  }
  learner.load_state(state);
}

nlohmann::json gather_replicas(const Learner& learner, int64_t step) {
  const int ranks = comm::size(), rank = comm::rank();
  if (ranks == 1) return nullptr;
  const nlohmann::json state = learner.state();
  const uint64_t hash = replicated_hash(state);
  // Every rank's hash in its own slots (two exact 32-bit halves), summed: a gather through comm::sum.
  std::vector<double> hashes(2 * static_cast<size_t>(ranks), 0.0);
  hashes[2 * static_cast<size_t>(rank)] = static_cast<double>(hash >> 32);
  hashes[2 * static_cast<size_t>(rank) + 1] = static_cast<double>(hash & 0xffffffffu);
  comm::sum(hashes, "parameter hashes");
  const auto hash_of = [&](int r) {
    return (static_cast<uint64_t>(hashes[2 * static_cast<size_t>(r)]) << 32) |
           static_cast<uint64_t>(hashes[2 * static_cast<size_t>(r) + 1]);
  };
  for (int r = 1; r < ranks; ++r)
    if (hash_of(r) != hash_of(0))
      throw Error(fmt::format("step {}: the parameters of rank {} differ from rank 0's (hash {:016x}, rank 0 "
                              "{:016x}): the replicas diverged, so the checkpoint of this step is not written "
                              "(the one before is kept); please report this with the command",
                              step, r, hash_of(r), hash_of(0)));
  if (rank > 0) {
    comm::send(io::dump_json(own_part(state)), 0, "checkpoint: rank's own state");
    return nullptr;
  }
  nlohmann::json list = nlohmann::json::array();
  for (int r = 1; r < ranks; ++r)
    list.push_back({{"rank", r},
                    {"hash", fmt::format("{:016x}", hash_of(r))},
                    {"own", nlohmann::json::parse(comm::receive(r, "checkpoint: rank's own state"))}});
  return list;
}

std::vector<RankStep> share_step(size_t task, const StepStats& stats, double wall_s) {
  constexpr size_t kFields = 8;
  const auto ranks = static_cast<size_t>(comm::size()), rank = static_cast<size_t>(comm::rank());
  // Each rank fills its own row, zeros elsewhere: the sum is every row, exactly (x + 0 = x).
  std::vector<double> table(kFields * ranks, 0.0);
  const double row[kFields] = {static_cast<double>(task), stats.reward_mean, stats.cost_mean_s, stats.best_cost_s,
                               stats.loss, stats.entropy, wall_s, static_cast<double>(stats.simulations)};
  std::copy(row, row + kFields, table.begin() + static_cast<std::ptrdiff_t>(kFields * rank));
  comm::sum(table, "step statistics");
  std::vector<RankStep> steps(ranks);
  for (size_t r = 0; r < ranks; ++r) {
    const double* x = table.data() + kFields * r;
    steps[r] = {static_cast<size_t>(x[0]), x[1], x[2], x[3], x[4], x[5], x[6], static_cast<int64_t>(x[7])};
  }
  return steps;
}

std::vector<int32_t> placement_to_rank0(int from, std::vector<int32_t> mine) {
  if (from == 0 || (comm::rank() != 0 && comm::rank() != from)) return mine;
  if (comm::rank() == from) {
    comm::send(std::string(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(int32_t)), 0,
               "best placement");
    return mine;
  }
  const std::string bytes = comm::receive(from, "best placement");
  std::vector<int32_t> placement(bytes.size() / sizeof(int32_t));
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(placement.data()));
  return placement;
}

void inject_test_fault(int64_t step) {
  for (const char* kind : {"exit", "hang"}) {
    const auto [rank, at] = test_fault(kind);
    if (rank != comm::rank() || at != step) continue;
    std::fprintf(stderr, "train: rank %d %s at step %lld (PLACELAB_TEST_FAULT)\n", rank,
                 kind == std::string_view("exit") ? "ends itself" : "hangs", static_cast<long long>(step));
    std::fflush(stderr);
    if (kind == std::string_view("exit")) ::_exit(3);
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace placelab::rl
