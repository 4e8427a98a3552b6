// comm.h over MPI: binomial-tree sums and broadcasts of point-to-point messages, each wait polled with
// a deadline, so that a dead or hung rank ends the run with one line instead of a hang.
#include "policy/rl/comm.h"

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <mpi.h>

#include "graphs/error.h"

namespace placelab::rl::comm {

namespace {

int my_rank = 0, n_ranks = 1;
bool joined = false;
std::string context_now;
double timeout_s = 600;
constexpr int kTag = 7301;  // one tag for every exchange: ranks that get out of step see a size mismatch at once

template <class T> MPI_Datatype mpi_type();
template <> MPI_Datatype mpi_type<float>() { return MPI_FLOAT; }
template <> MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }
template <> MPI_Datatype mpi_type<char>() { return MPI_CHAR; }
template <> MPI_Datatype mpi_type<uint64_t>() { return MPI_UINT64_T; }

// Started by a launcher: OpenMPI's mpirun, MPICH's hydra or Slurm's PMI2, PMIx (srun --mpi=pmix).
bool launched() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

std::string where(std::string_view what) {
  return context_now.empty() ? std::string(what) : fmt::format("{}: {}", context_now, what);
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<size_t>(length));
}

[[noreturn]] void lost(int peer, std::string_view what, int code) {
  int error_class = 0;
  MPI_Error_class(code, &error_class);
  if (error_class == MPI_ERR_TRUNCATE)
    fail(fmt::format("{}: rank {} sent more than expected: the ranks are out of step (did a learner take a "
                     "different number of optimizer steps on some rank?)", where(what), peer));
  fail(fmt::format("{}: lost rank {} ({}); the run ends, its last checkpoint is kept", where(what), peer,
                   mpi_error(code)));
}

// Polls `request` until done, the deadline or an error: MPI's blocking calls have no timeout.
void wait(MPI_Request& request, MPI_Status& status, int peer, std::string_view what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (int64_t polls = 0;; ++polls) {
    int done = 0;
    if (const int code = MPI_Test(&request, &done, &status); code != MPI_SUCCESS) lost(peer, what, code);
    if (done) return;
    if (std::chrono::steady_clock::now() > deadline)
      fail(fmt::format("{}: no word from rank {} in {} s; the run ends (a rank hung, died or cannot be reached; "
                       "PLACELAB_MPI_TIMEOUT_S sets the limit), its last checkpoint is kept",
                       where(what), peer, timeout_s));
    // Spin briefly (a sum's partner is usually close), then sleep so a waiting rank leaves the core to working ones.
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(polls > 100000 ? 1000 : 20));
  }
}

int checked_count(size_t count, std::string_view what) {
  if (count > static_cast<size_t>(INT_MAX))
    fail(fmt::format("{}: {} values are more than one MPI message carries", where(what), count));
  return static_cast<int>(count);
}

template <class T>
void send_raw(const T* data, size_t count, int to, std::string_view what) {
  MPI_Request request;
  MPI_Status status;
  const int code = MPI_Isend(data, checked_count(count, what), mpi_type<T>(), to, kTag, MPI_COMM_WORLD, &request);
  if (code != MPI_SUCCESS) lost(to, what, code);
  wait(request, status, to, what);
}

template <class T>
void receive_raw(T* data, size_t count, int from, std::string_view what) {
  MPI_Request request;
  MPI_Status status;
  const int code = MPI_Irecv(data, checked_count(count, what), mpi_type<T>(), from, kTag, MPI_COMM_WORLD, &request);
  if (code != MPI_SUCCESS) lost(from, what, code);
  wait(request, status, from, what);
  int got = 0;
  MPI_Get_count(&status, mpi_type<T>(), &got);
  if (static_cast<size_t>(got) != count)
    fail(fmt::format("{}: rank {} sent {} values where {} were expected: the ranks are out of step", where(what),
                     from, got, count));
}

// Binomial tree from rank 0: at each level a rank that has the data passes it `mask` ranks up.
template <class T>
void broadcast_raw(T* data, size_t count, std::string_view what) {
  int top = 1;
  while (top < n_ranks) top <<= 1;
  for (int mask = top >> 1; mask >= 1; mask >>= 1) {
    if (my_rank % (2 * mask) == 0 && my_rank + mask < n_ranks) send_raw(data, count, my_rank + mask, what);
    if (my_rank % (2 * mask) == mask) receive_raw(data, count, my_rank - mask, what);
  }
}

// The mirror tree into rank 0: rank r adds rank r + mask's partial sum, so the order depends on the rank count only.
template <class T>
void sum_raw(std::span<T> values, std::string_view what) {
  if (n_ranks == 1) return;
  std::vector<T> incoming(values.size());
  for (int mask = 1; mask < n_ranks; mask <<= 1) {
    if (my_rank & mask) {
      send_raw(values.data(), values.size(), my_rank - mask, what);
      break;
    }
    if (my_rank + mask < n_ranks) {
      receive_raw(incoming.data(), incoming.size(), my_rank + mask, what);
      for (size_t i = 0; i < values.size(); ++i) values[i] += incoming[i];
    }
  }
  broadcast_raw(values.data(), values.size(), what);
}

}  // namespace

void init() {
  if (joined || !launched()) return;
  if (const char* text = std::getenv("PLACELAB_MPI_TIMEOUT_S")) {
    char* end = nullptr;
    timeout_s = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(timeout_s > 0))
      throw Error(fmt::format("PLACELAB_MPI_TIMEOUT_S={}: expected a number of seconds > 0", text));
  }
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    throw Error("MPI_Init failed: check that mpirun or srun started this process with a working MPI set-up");
  joined = true;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);  // errors come back to wait(), which names the rank
  MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
  std::atexit(finalize);  // a single rank's normal or error exit; several ranks fail() instead
}

void finalize() {
  int finalized = 1;
  if (joined) MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

bool built_with_mpi() { return true; }
int rank() { return my_rank; }
int size() { return n_ranks; }
void set_context(std::string context) { context_now = std::move(context); }

void sum(std::span<float> values, std::string_view what) { sum_raw(values, what); }
void sum(std::span<double> values, std::string_view what) { sum_raw(values, what); }

bool any(bool flag, std::string_view what) {
  double value = flag ? 1 : 0;
  sum_raw(std::span<double>(&value, 1), what);
  return value > 0;
}

void broadcast(std::string& text, std::string_view what) {
  if (n_ranks == 1) return;
  uint64_t length = text.size();
  broadcast_raw(&length, 1, what);
  text.resize(length);
  broadcast_raw(text.data(), text.size(), what);
}

void send(const std::string& text, int to, std::string_view what) {
  const uint64_t length = text.size();
  send_raw(&length, 1, to, what);
  send_raw(text.data(), text.size(), to, what);
}

std::string receive(int from, std::string_view what) {
  uint64_t length = 0;
  receive_raw(&length, 1, from, what);
  std::string text(length, '\0');
  receive_raw(text.data(), text.size(), from, what);
  return text;
}

void fail(std::string_view message, int code) {
  if (n_ranks > 1 && my_rank > 0) std::this_thread::sleep_for(std::chrono::seconds(2));
  if (n_ranks > 1) {
    std::fprintf(stderr, "placelab: error: rank %d of %d: %.*s\n", my_rank, n_ranks, static_cast<int>(message.size()),
                 message.data());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  std::fprintf(stderr, "placelab: error: %.*s\n", static_cast<int>(message.size()), message.data());
  std::exit(code);
}

}  // namespace placelab::rl::comm
