// Forward + backward of the GDP policy network on placelab's autodiff: 2 GraphSAGE (mean) layers and
// 2 Transformer-XL blocks over node segments with previous-segment memory, hidden 128, then a
// per-node device head and a policy-gradient style loss. bench/autodiff_torch.py is the same model in
// PyTorch; bench/autodiff_vs_torch.py runs both and writes bench/results/autodiff.md.
//
// The random DAG and features come from splitmix64 streams that the Python twin reproduces exactly.
#include <benchmark/benchmark.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "policy/nn/attention.h"
#include "policy/nn/graphsage.h"

namespace {

using namespace placelab;
using namespace placelab::nn;
using autodiff::MatrixF;
using autodiff::Tensor;

constexpr Index kFeatures = 16, kHidden = 128, kHeads = 4, kFf = 256, kSegment = 128, kDevices = 8;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Node i > 0 takes 1 or 2 predecessors among the 64 nodes before it (a deep, narrow DAG as NN graphs).
autodiff::CsrPtr random_dag_neighbors(int32_t n) {
  std::vector<std::vector<int32_t>> lists(n);
  uint64_t state = 12345;
  for (int32_t i = 1; i < n; ++i) {
    const int preds = 1 + static_cast<int>(splitmix64(state) % 2);
    for (int k = 0; k < preds; ++k) {
      const int32_t p = i - 1 - static_cast<int32_t>(splitmix64(state) % std::min<uint64_t>(i, 64));
      if (std::find(lists[i].begin(), lists[i].end(), p) != lists[i].end()) continue;
      lists[i].push_back(p);
      lists[p].push_back(i);
    }
  }
  for (auto& l : lists) std::sort(l.begin(), l.end());
  return std::make_shared<autodiff::Csr>(autodiff::Csr::from_lists(n, lists));
}

MatrixF random_features(int32_t n) {
  uint64_t state = 777;
  MatrixF x(n, kFeatures);
  for (Index i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>((splitmix64(state) >> 11) * 0x1.0p-53 * 2 - 1);
  return x;
}

struct GdpNet {
  Linear embed;
  GraphSage sage1, sage2;
  TransformerXlBlock block1, block2;
  Linear head;

  explicit GdpNet(std::mt19937_64& rng)
      : embed(kFeatures, kHidden, rng),
        sage1(kHidden, kHidden, Aggregator::mean, rng),
        sage2(kHidden, kHidden, Aggregator::mean, rng),
        block1(kHidden, kHeads, kFf, rng),
        block2(kHidden, kHeads, kFf, rng),
        head(kHidden, kDevices, rng) {}

  // x[n, F] -> loss = -mean(log p(action_i)) over the n real nodes.
  Tensor loss(const Tensor& x, const autodiff::CsrPtr& nbrs, const std::vector<int32_t>& actions) const {
    const Index n = x.rows();
    const Index blocks = (n + kSegment - 1) / kSegment, padded = blocks * kSegment;
    Tensor h = autodiff::relu(embed.forward(x));
    h = autodiff::relu(sage1.forward(h, nbrs));
    h = autodiff::relu(sage2.forward(h, nbrs));
    if (padded > n) h = autodiff::concat_rows<float>({h, Tensor::constant(padded - n, kHidden, 0.0f)});
    const autodiff::Mask mask = segment_mask(blocks, kSegment, kSegment, n, false);
    h = block1.forward(h, previous_segment_memory(h, blocks), blocks, &mask);
    h = block2.forward(h, previous_segment_memory(h, blocks), blocks, &mask);
    const Tensor logp = autodiff::log_softmax_rows(head.forward(autodiff::slice_rows(h, 0, n)));
    return -autodiff::mean(autodiff::select_per_row(logp, actions));
  }
};

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// Resident now (ru_maxrss is a high-water mark over the whole process, including earlier runs).
double current_rss_mb() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

void BM_GdpForwardBackward(benchmark::State& state) {
  const auto n = static_cast<int32_t>(state.range(0));
  const autodiff::CsrPtr nbrs = random_dag_neighbors(n);
  const Tensor x = Tensor::leaf(random_features(n));
  std::vector<int32_t> actions(n);
  for (int32_t i = 0; i < n; ++i) actions[i] = i % kDevices;
  std::mt19937_64 rng(1);
  const GdpNet net(rng);
  ParamList<float> params;
  for (const auto* p : {&net.embed, &net.head}) p->collect("", params);
  net.sage1.collect("s1", params);
  net.sage2.collect("s2", params);
  net.block1.collect("b1", params);
  net.block2.collect("b2", params);
  // Resident after the first model build: Google Benchmark calls this function more than once, and memory
  // the allocator kept from an earlier call must count as the step's, not as the baseline.
  static const double baseline_mb = current_rss_mb();
  for (auto _ : state) {
    const Tensor loss = net.loss(x, nbrs, actions);
    autodiff::backward(loss);
    benchmark::DoNotOptimize(params[0].tensor.grad().data());
    for (auto& p : params) p.tensor.zero_grad();
  }
  state.counters["nodes"] = n;
  state.counters["edges"] = static_cast<double>(nbrs->nnz()) / 2;
  state.counters["params"] = static_cast<double>(parameter_count(params));
  state.counters["peak_rss_mb"] = peak_rss_mb();
  state.counters["step_peak_mb"] = peak_rss_mb() - baseline_mb;  // exact when run alone (one size per process)
}
// The BLAS that runs the products, in the JSON output's context.
const bool kContext = [] {
  benchmark::AddCustomContext("blas", autodiff::blas_name());
  benchmark::AddCustomContext("blas_threads", std::to_string(autodiff::blas_threads()));
  return true;
}();

BENCHMARK(BM_GdpForwardBackward)->Arg(1000)->Arg(10000)->Arg(50000)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
