// Chrome trace-event and text export of a recorded schedule.
#include "sim/trace.h"

#include <algorithm>

#include <fmt/format.h>

#include "graphs/json_util.h"

namespace placelab::sim {

void TraceRecorder::on_op(graphs::OpId op, int32_t device, double start_s, double end_s) {
  ops_.push_back(OpEvent{op, device, start_s, end_s});
}

void TraceRecorder::on_transfer(graphs::OpId op, int32_t src, int32_t dst, double start_s, double end_s, double bytes) {
  transfers_.push_back(TransferEvent{op, src, dst, start_s, end_s, bytes});
}

void TraceRecorder::on_memory(int32_t device, double time_s, int64_t bytes) {
  memory_.push_back(MemoryEvent{device, time_s, bytes});
}

void TraceRecorder::clear() {
  ops_.clear();
  transfers_.clear();
  memory_.clear();
}

// The document is {"displayTimeUnit": "ms", "traceEvents": [events]}.
void TraceRecorder::chrome_events(const std::function<void(const nlohmann::json&)>& emit) const {
  const graphs::Graph& g = sim_->graph();
  const Cluster& c = sim_->cluster();
  const int32_t D = c.num_devices();
  auto meta = [&](const char* what, int pid, int tid, const std::string& name) {
    nlohmann::json e = {{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}};
    if (tid >= 0) e["tid"] = tid;
    emit(e);
  };
  meta("process_name", 0, -1, "devices");
  meta("process_name", 1, -1, "transfers");
  for (int32_t d = 0; d < D; ++d) meta("thread_name", 0, d, c.device(d).name + " (" + c.device(d).kind + ")");
  std::vector<bool> pair_named(static_cast<size_t>(D) * D, false);
  for (const OpEvent& e : ops_)
    emit({{"name", g.op_name(e.op)}, {"cat", g.op_type(e.op)}, {"ph", "X"}, {"pid", 0},
          {"tid", e.device}, {"ts", e.start_s * 1e6}, {"dur", (e.end_s - e.start_s) * 1e6},
          {"args", {{"op", e.op}, {"phase", graphs::phase_name(g.phase(e.op))}}}});
  for (const TransferEvent& e : transfers_) {
    int32_t tid = e.src * D + e.dst;
    if (!pair_named[tid]) {
      pair_named[tid] = true;
      meta("thread_name", 1, tid, c.device(e.src).name + " -> " + c.device(e.dst).name);
    }
    emit({{"name", g.op_name(e.op)}, {"cat", "transfer"}, {"ph", "X"}, {"pid", 1}, {"tid", tid},
          {"ts", e.start_s * 1e6}, {"dur", (e.end_s - e.start_s) * 1e6},
          {"args", {{"op", e.op}, {"bytes", e.bytes}}}});
  }
  for (const MemoryEvent& e : memory_)
    emit({{"name", "memory " + c.device(e.device).name}, {"ph", "C"}, {"pid", 0}, {"ts", e.time_s * 1e6},
          {"args", {{"bytes", e.bytes}}}});
}

nlohmann::json TraceRecorder::to_chrome_json() const {
  nlohmann::json events = nlohmann::json::array();
  chrome_events([&](const nlohmann::json& e) { events.push_back(e); });
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

void TraceRecorder::write_chrome(const std::string& path) const {
  // What io::write_json_atomic(path, to_chrome_json(), -1) writes, byte for byte (keys sorted).
  std::string text = R"({"displayTimeUnit":"ms","traceEvents":[)";
  bool first = true;
  chrome_events([&](const nlohmann::json& e) {
    if (!first) text += ',';
    first = false;
    text += io::dump_json(e, -1);
  });
  text += "]}\n";
  io::write_text_atomic(path, text);
}

std::string TraceRecorder::to_text() const {
  const graphs::Graph& g = sim_->graph();
  const Cluster& c = sim_->cluster();
  struct Line {
    double start_s;
    int kind;
    size_t index;
  };
  std::vector<Line> lines;
  for (size_t i = 0; i < ops_.size(); ++i) lines.push_back({ops_[i].start_s, 0, i});
  for (size_t i = 0; i < transfers_.size(); ++i) lines.push_back({transfers_[i].start_s, 1, i});
  std::stable_sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) {
    return a.start_s != b.start_s ? a.start_s < b.start_s : a.kind < b.kind;
  });
  std::string out;
  for (const Line& l : lines) {
    if (l.kind == 0) {
      const OpEvent& e = ops_[l.index];
      out += fmt::format("op {} {} {:.9g} {:.9g}\n", g.op_name(e.op), c.device(e.device).name, e.start_s, e.end_s);
    } else {
      const TransferEvent& e = transfers_[l.index];
      out += fmt::format("transfer {} {} {} {:.9g} {:.9g} {:.9g}\n", g.op_name(e.op), c.device(e.src).name,
                         c.device(e.dst).name, e.start_s, e.end_s, e.bytes);
    }
  }
  return out;
}

}  // namespace placelab::sim
