// The processes of a data-parallel run and what they exchange: rank and size, a sum over ranks in a fixed
// order, broadcast, point-to-point text, and a clean stop of every process. With MPI (PLACELAB_MPI, the
// default where MPI is installed) under mpirun or srun they are MPI_COMM_WORLD's processes; otherwise, and
// in a build without MPI, the process is rank 0 of 1 and every call is the identity, so callers never
// test for MPI themselves (comm_mpi.cpp and comm_serial.cpp implement this header).
//
// Every exchange is point-to-point along a binomial tree over the ranks, so that
//  - a sum adds the same numbers in the same order on every run with the same rank count (bit for bit
//    deterministic, and the same result on every rank, which MPI_Allreduce does not promise);
//  - every wait has a deadline (PLACELAB_MPI_TIMEOUT_S, default 600 s): a rank that hangs or cannot be
//    reached stops the run with one line naming it, never a hang; a rank that died is reported the same.
// Cost per sum: 2 ceil(log2 ranks) messages of the buffer's size on the critical path (docs/distributed.md).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace placelab::rl::comm {

/**
 * Joins the run's processes when this one was started by an MPI launcher (mpirun, mpiexec, srun); alone
 * otherwise. Call once before the others (later calls do nothing). Throws placelab::Error when the build
 * has no MPI but the launcher started several processes.
 */
void init();
/** Leaves the run after a normal end (every rank must call it). */
void finalize();
/** Whether this build can run on several processes (built with MPI). */
bool built_with_mpi();
/** This process's rank, 0 .. size() - 1 (0 before init()). */
int rank();
/** Number of processes (1 before init()). */
int size();

/** What the run is doing, named in timeout and lost-rank errors (e.g. "step 12"). */
void set_context(std::string context);

/** Replaces `values` by their sum over the ranks (fixed order; the same bits on every rank). `what` names it in errors. */
void sum(std::span<float> values, std::string_view what);
void sum(std::span<double> values, std::string_view what);
/** Whether `flag` is true on some rank. */
bool any(bool flag, std::string_view what);
/** Rank 0's `text` on every rank. */
void broadcast(std::string& text, std::string_view what);
/** Sends `text` to rank `to`; the other side calls receive(from). */
void send(const std::string& text, int to, std::string_view what);
std::string receive(int from, std::string_view what);

/**
 * Ends every process of the run after printing "placelab: error: rank R of N: <message>" on stderr (rank 0
 * at once; another rank first gives rank 0 two seconds, so that an error every rank hits is printed once).
 * A single process prints "placelab: error: <message>" and exits with `code`.
 */
[[noreturn]] void fail(std::string_view message, int code = 1);

}  // namespace placelab::rl::comm
