// comm.h without MPI: the process is rank 0 of 1, sums and broadcasts leave their data as it is.
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "graphs/error.h"
#include "policy/rl/comm.h"

namespace placelab::rl::comm {

void init() {
  // Several copies started by a launcher would each train alone and overwrite one another's checkpoint.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && std::atoi(value) > 1)
      throw Error(fmt::format("{}={}: this placelab was built without MPI, so it cannot train as one of several "
                              "processes; install MPI (Debian: libopenmpi-dev) and rebuild with -DPLACELAB_MPI=ON, "
                              "or run a single process",
                              name, value));
  }
}
void finalize() {}
bool built_with_mpi() { return false; }
int rank() { return 0; }
int size() { return 1; }
void set_context(std::string) {}
void sum(std::span<float>, std::string_view) {}
void sum(std::span<double>, std::string_view) {}
bool any(bool flag, std::string_view) { return flag; }
void broadcast(std::string&, std::string_view) {}

void send(const std::string&, int to, std::string_view what) {
  throw Error(fmt::format("{}: there is no rank {} in a single-process run", what, to));
}
std::string receive(int from, std::string_view what) {
  throw Error(fmt::format("{}: there is no rank {} in a single-process run", what, from));
}

void fail(std::string_view message, int code) {
  std::fprintf(stderr, "placelab: error: %.*s\n", static_cast<int>(message.size()), message.data());
  std::exit(code);
}

}  // namespace placelab::rl::comm
