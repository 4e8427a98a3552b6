// Trace export: an observer that records the schedule, then writes it as Chrome trace-event JSON
// (opens in Perfetto or chrome://tracing) or as a line-per-event text used by the golden tests.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/engine.h"

namespace placelab::sim {

/** Records every op, transfer and memory change of one simulate() call; nothing is written until asked. */
class TraceRecorder final : public SimObserver {
 public:
  struct OpEvent {
    graphs::OpId op;
    int32_t device;
    double start_s, end_s;
  };
  struct TransferEvent {
    graphs::OpId op;
    int32_t src, dst;
    double start_s, end_s, bytes;
  };
  struct MemoryEvent {
    int32_t device;
    double time_s;
    int64_t bytes;  // held from time_s on
  };

  /** `simulator` names the ops and devices; it must outlive the recorder. */
  explicit TraceRecorder(const Simulator& simulator) : sim_(&simulator) {}

  void on_op(graphs::OpId op, int32_t device, double start_s, double end_s) override;
  void on_transfer(graphs::OpId op, int32_t src, int32_t dst, double start_s, double end_s, double bytes) override;
  void on_memory(int32_t device, double time_s, int64_t bytes) override;

  const std::vector<OpEvent>& ops() const { return ops_; }
  const std::vector<TransferEvent>& transfers() const { return transfers_; }
  /** Bytes held per device after each change, in the engine's order (times never decrease). */
  const std::vector<MemoryEvent>& memory() const { return memory_; }
  void clear();

  /**
   * Chrome trace-event JSON: one row per device (pid 0) and per device pair's transfers (pid 1), and a
   * counter "memory DEVICE" of the bytes each device holds; times in us.
   */
  nlohmann::json to_chrome_json() const;
  /**
   * Writes to_chrome_json() to `path`, one event at a time: a large schedule's events as one json tree
   * took ~16x the file's size in memory (1.2 GB for the 65 MB trace of an 80k-op graph).
   */
  void write_chrome(const std::string& path) const;
  /** One line per event in start order: "op NAME DEVICE START END" / "transfer OP SRC DST START END BYTES" (seconds). */
  std::string to_text() const;

 private:
  /** Calls `emit` with each trace event in order. */
  void chrome_events(const std::function<void(const nlohmann::json&)>& emit) const;

  const Simulator* sim_;
  std::vector<OpEvent> ops_;
  std::vector<TransferEvent> transfers_;
  std::vector<MemoryEvent> memory_;
};

}  // namespace placelab::sim
