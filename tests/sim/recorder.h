// An observer that keeps each op's span and each transfer by op name, for tests that check schedules by hand.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "graphs/graph.h"
#include "sim/engine.h"

namespace placelab::sim::testing {

struct Span {
  int32_t device;
  double start, end;
};

struct Recorder final : SimObserver {
  std::map<std::string, Span> ops;
  std::vector<std::tuple<std::string, int32_t, int32_t, double, double, double>> transfers;
  const graphs::Graph* g;
  explicit Recorder(const graphs::Graph& graph) : g(&graph) {}
  void on_op(graphs::OpId op, int32_t device, double start_s, double end_s) override {
    ops[g->op_name(op)] = Span{device, start_s, end_s};
  }
  void on_transfer(graphs::OpId op, int32_t src, int32_t dst, double start_s, double end_s, double bytes) override {
    transfers.emplace_back(g->op_name(op), src, dst, start_s, end_s, bytes);
  }
};

}  // namespace placelab::sim::testing
