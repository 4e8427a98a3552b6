// The CUDA replay's library calls: which cuBLASLt products and cuDNN convolutions a compute op becomes
// (plain C++, tested in every build), and, on a GPU, the libraries' results against CPU references.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "graphs/error.h"
#include "graphs/op_class.h"
#include "graphs/training.h"
#include "graphs/zoo/zoo.h"
#include "sim/replay/calibrate.h"
#include "sim/replay/cuda/executor.h"
#include "sim/replay/executor.h"
#include "sim/replay/library_calls.h"
#include "sim/replay/plan.h"
#if PLACELAB_HAS_CUDA
#include "sim/replay/cuda/libraries.h"
#endif

using namespace placelab;
using namespace placelab::sim::replay;
using Catch::Matchers::Contains;

namespace {

// The bytes of a convolution's input, filters and output in 4-byte elements, as the zoo counts them.
double conv_bytes(const ConvShape& s) {
  return 4.0 * static_cast<double>(s.input_elements() + s.filter_elements() + s.output_elements());
}

graphs::GemmDims implicit_gemm(const ConvShape& s) {
  return {.batch = s.groups, .m = s.n * s.out_h() * s.out_w(), .n = s.k / s.groups, .k = s.c / s.groups * s.r * s.r};
}

PlanOp compute_op(std::string type, const graphs::GemmDims& dims, double bytes = 0) {
  return {.name = "op", .type = std::move(type), .kernel = KernelKind::compute, .flops = dims.flops(), .bytes = bytes, .gemm = dims};
}

}  // namespace

TEST_CASE("sim::replay::conv_shape: a convolution is recovered from its implicit GEMM and its bytes", "[replay]") {
  // Convolutions of ResNets and MobileNets: the stem (7x7, stride 2), 3x3 and 1x1 ones, a strided 1x1
  // (downsampling) and a depthwise 3x3 (groups = channels). 576 = 64 x 9: only the bytes tell a 1x1
  // convolution of 576 channels from a 3x3 one of 64.
  const std::vector<ConvShape> shapes = {
      {.n = 1, .c = 3, .h = 224, .w = 224, .k = 64, .r = 7, .stride = 2, .pad = 3, .groups = 1},
      {.n = 1, .c = 64, .h = 56, .w = 56, .k = 64, .r = 3, .stride = 1, .pad = 1, .groups = 1},
      {.n = 1, .c = 576, .h = 56, .w = 56, .k = 64, .r = 1, .stride = 1, .pad = 0, .groups = 1},
      {.n = 1, .c = 256, .h = 56, .w = 56, .k = 512, .r = 1, .stride = 2, .pad = 0, .groups = 1},
      {.n = 1, .c = 32, .h = 112, .w = 112, .k = 32, .r = 3, .stride = 1, .pad = 1, .groups = 32},
      {.n = 1, .c = 3, .h = 224, .w = 224, .k = 64, .r = 11, .stride = 4, .pad = 5, .groups = 1},  // AlexNet's stem
  };
  for (const ConvShape& want : shapes) {
    CAPTURE(want.c, want.k, want.r, want.stride, want.groups);
    const graphs::GemmDims dims = implicit_gemm(want);
    const ConvShape got = conv_shape(dims, conv_bytes(want));
    CHECK(got == want);
    CHECK(got.flops() == dims.flops());
  }
  // Without bytes: a 1x1 convolution of the product's depth; a batch of images when m is no square.
  const ConvShape plain = conv_shape({.batch = 1, .m = 2 * 56 * 56, .n = 64, .k = 576}, 0);
  CHECK(plain.r == 1);
  CHECK(plain.c == 576);
  CHECK(plain.n * plain.out_h() * plain.out_w() == 2 * 56 * 56);
  CHECK(plain.n == 2);
}

TEST_CASE("sim::replay::library_calls: what a framework runs for a product, a convolution and their gradients", "[replay]") {
  const graphs::GemmDims mm{.batch = 1, .m = 128, .n = 96, .k = 64};
  SECTION("a product is one batched product") {
    const std::vector<LibraryCall> calls = library_calls(compute_op("MatMul", mm), true);
    REQUIRE(calls.size() == 1);
    CHECK(calls[0].pass == LibraryPass::matmul);
    CHECK(calls[0].gemm == mm);
    CHECK(calls[0].input_floats() == std::array<int64_t, 2>{128 * 64, 64 * 96});
    CHECK(calls[0].output_floats() == 128 * 96);
    CHECK(calls[0].input_span() == aligned_floats(128 * 64) + 64 * 96);
  }
  SECTION("its gradient is dA = dC B^T and dB = A^T dC") {
    graphs::GemmDims grad = mm;
    grad.batch = 2;  // expand_training's dims: the forward's times the backward factor
    const std::vector<LibraryCall> calls = library_calls(compute_op("MatMulGrad", grad), true);
    REQUIRE(calls.size() == 2);
    CHECK(calls[0].gemm == graphs::GemmDims{.batch = 1, .m = 128, .n = 64, .k = 96});
    CHECK(calls[1].gemm == graphs::GemmDims{.batch = 1, .m = 64, .n = 96, .k = 128});
    CHECK(calls[0].flops() + calls[1].flops() == grad.flops());
    grad.batch = 3;  // an odd factor: no split
    CHECK(library_calls(compute_op("MatMulGrad", grad), true).size() == 1);
  }
  const ConvShape conv{.n = 2, .c = 64, .h = 28, .w = 28, .k = 128, .r = 3, .stride = 1, .pad = 1, .groups = 1};
  const graphs::GemmDims conv_dims = implicit_gemm(conv);
  SECTION("a convolution is cuDNN's forward pass, its gradient backward data and backward filter") {
    const std::vector<LibraryCall> forward = library_calls(compute_op("Conv2D", conv_dims, conv_bytes(conv)), true);
    REQUIRE(forward.size() == 1);
    CHECK(forward[0].pass == LibraryPass::conv_forward);
    CHECK(forward[0].conv == conv);
    CHECK(forward[0].input_floats() == std::array<int64_t, 2>{conv.input_elements(), conv.filter_elements()});
    graphs::GemmDims grad = conv_dims;
    grad.batch = 2;
    const std::vector<LibraryCall> backward = library_calls(compute_op("Conv2DGrad", grad, 2 * conv_bytes(conv)), true);
    REQUIRE(backward.size() == 2);
    CHECK(backward[0].pass == LibraryPass::conv_backward_data);
    CHECK(backward[1].pass == LibraryPass::conv_backward_filter);
    CHECK(backward[0].conv == conv);
    CHECK(backward[0].output_floats() == conv.input_elements());
    CHECK(backward[1].output_floats() == conv.filter_elements());
    CHECK(backward[0].flops() + backward[1].flops() == grad.flops());
  }
  SECTION("without cuDNN, or without dims, a convolution is a product") {
    const std::vector<LibraryCall> calls = library_calls(compute_op("Conv2D", conv_dims, conv_bytes(conv)), false);
    REQUIRE(calls.size() == 1);
    CHECK(calls[0].pass == LibraryPass::matmul);
    PlanOp no_dims{.name = "c", .type = "Conv2D", .kernel = KernelKind::compute, .flops = 1e6};
    const std::vector<LibraryCall> square = library_calls(no_dims, true);
    REQUIRE(square.size() == 1);
    CHECK(square[0].pass == LibraryPass::matmul);
    CHECK(square[0].gemm == graphs::square_dims(1e6));
  }
}

TEST_CASE("sim::replay::library_calls: ResNet-50's training step maps onto convolutions of its own shapes", "[replay]") {
  // Every convolution of the zoo's ResNet-50 (1 stem 7x7, 16 3x3, 36 1x1; strides 2 where it downsamples)
  // is recovered with its kernel, and its calls do the op's FLOPs; the gradients split in two passes.
  const graphs::Graph g = graphs::expand_training(graphs::zoo::make_model("resnet50", {{"batch", 2}, {"image_size", 64}}));
  std::map<int64_t, int> kernels;
  int gradients = 0;
  for (graphs::OpId op = 0; op < g.num_ops(); ++op) {
    if (graphs::op_class_of_type(g.op_type(op)) != graphs::OpClass::conv || !g.gemm(op).known()) continue;
    CAPTURE(g.op_name(op));
    const PlanOp p = compute_op(std::string(g.op_type(op)), g.gemm(op), g.bytes_read(op) + g.bytes_written(op));
    const std::vector<LibraryCall> calls = library_calls(p, true);
    double flops = 0;
    for (const LibraryCall& c : calls) {
      REQUIRE(c.pass != LibraryPass::matmul);
      CHECK(c.conv.n * c.conv.out_h() * c.conv.out_w() == g.gemm(op).m);
      flops += c.flops();
    }
    CHECK(flops == g.gemm(op).flops());
    if (calls.size() == 2) ++gradients;
    else ++kernels[calls[0].conv.r];
  }
  CHECK(kernels == std::map<int64_t, int>{{1, 36}, {3, 16}, {7, 1}});
  CHECK(gradients == 53);
}

TEST_CASE("sim::replay: the CUDA backend's kernel and math choices parse and stay in the calibration", "[replay]") {
  CHECK(parse_gpu_kernels("library", "x") == GpuKernels::library);
  CHECK(parse_gpu_kernels("own", "x") == GpuKernels::own);
  CHECK(parse_gpu_math("fp32", "x") == GpuMath::fp32);
  CHECK_THROWS_WITH(parse_gpu_kernels("cublas", "replay --gpu-kernels"),
                    Contains("replay --gpu-kernels") && Contains("\"cublas\"") && Contains("library"));
  CHECK_THROWS_WITH(parse_gpu_math("bf16", "calibrate --gpu-math"), Contains("tf32") && Contains("fp32"));
  // A CUDA calibration's conv points give the conv curve; its kernels and versions survive a refit.
  std::vector<CalibrationPoint> points{{"launch", 0, 5e-6}};
  for (double f : {1e6, 1e8, 1e10}) points.push_back({"compute", f, f / 4e14 + 5e-6});
  for (double f : {1e6, 1e8, 1e10}) points.push_back({"conv", f, f / 2e14 + 5e-6});  // half the products' rate
  for (double b : {1e6, 1e9}) points.push_back({"memory", b, b / 3e12 + 5e-6});
  Calibration cal{.backend = "cuda", .devices = 1, .device_memory_bytes = 1.4e11, .points = points, .roofline = fit_roofline(points)};
  cal.gpu_kernels = "library", cal.gpu_math = "tf32", cal.gpu_versions = "cuBLASLt 13.1.0, cuDNN 9.19.0";
  const nlohmann::json doc = calibration_to_json(cal);
  CHECK(doc["gpu"]["kernels"] == "library");
  const Calibration back = refit_calibration(doc, "cal.json");
  CHECK(back.gpu_versions == cal.gpu_versions);
  CHECK(back.gpu_math == "tf32");
  REQUIRE(back.curves.curves.count("conv") == 1);
  const double f = 1e10, rate = back.roofline.flops_per_s;
  CHECK(f / (rate * back.curves.curves.at("conv").at(f)) == Approx(f / 2e14).epsilon(0.02));
  CHECK(f / (rate * back.curves.curves.at("gemm").at(f)) == Approx(f / 4e14).epsilon(0.02));
  nlohmann::json broken = doc;
  broken["gpu"]["kernels"] = "cublas";
  CHECK_THROWS_WITH(refit_calibration(broken, "cal.json"), Contains("cal.json") && Contains("kernels"));
}

#if PLACELAB_HAS_CUDA

namespace {

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

// Visits every (input, filter, output) index triple of a convolution's sum (NCHW, KCRS).
void for_each_term(const ConvShape& s, const std::function<void(int64_t, int64_t, int64_t)>& visit) {
  const int64_t cg = s.c / s.groups, kg = s.k / s.groups;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t k = 0; k < s.k; ++k)
      for (int64_t oh = 0; oh < s.out_h(); ++oh)
        for (int64_t ow = 0; ow < s.out_w(); ++ow)
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t u = 0; u < s.r; ++u)
              for (int64_t v = 0; v < s.r; ++v) {
                const int64_t h = oh * s.stride - s.pad + u, w = ow * s.stride - s.pad + v;
                if (h < 0 || h >= s.h || w < 0 || w >= s.w) continue;
                const int64_t c = k / kg * cg + ci;
                visit(((n * s.c + c) * s.h + h) * s.w + w, ((k * cg + ci) * s.r + u) * s.r + v,
                      ((n * s.k + k) * s.out_h() + oh) * s.out_w() + ow);
              }
}

// The call's output computed on the CPU in double, and per output element the sum of its terms' magnitudes.
std::pair<std::vector<double>, std::vector<double>> reference(const LibraryCall& call, const std::vector<float>& a,
                                                              const std::vector<float>& b) {
  std::vector<double> out(static_cast<size_t>(call.output_floats())), size(out.size());
  auto add = [&](int64_t o, double x, double y) { out[o] += x * y, size[o] += std::abs(x * y); };
  if (call.pass == LibraryPass::matmul) {
    const graphs::GemmDims& d = call.gemm;
    for (int64_t z = 0; z < d.batch; ++z)
      for (int64_t j = 0; j < d.n; ++j)
        for (int64_t i = 0; i < d.m; ++i)
          for (int64_t p = 0; p < d.k; ++p)
            add(z * d.m * d.n + j * d.m + i, a[z * d.m * d.k + p * d.m + i], b[z * d.k * d.n + j * d.k + p]);
  } else {
    for_each_term(call.conv, [&](int64_t x, int64_t w, int64_t y) {
      if (call.pass == LibraryPass::conv_forward) add(y, a[x], b[w]);          // a = x, b = w
      if (call.pass == LibraryPass::conv_backward_data) add(x, a[y], b[w]);    // a = dy, b = w
      if (call.pass == LibraryPass::conv_backward_filter) add(w, a[x], b[y]);  // a = x, b = dy
    });
  }
  return {out, size};
}

}  // namespace

TEST_CASE("sim::replay::cuda: cuBLASLt and cuDNN compute what the CPU references compute", "[replay][cuda]") {
  std::string why;
  if (cuda::device_count(&why) == 0) {
    WARN("skipped: no CUDA GPU (" << why << ")");
    return;
  }
  const ConvShape grouped{.n = 2, .c = 6, .h = 9, .w = 9, .k = 8, .r = 3, .stride = 1, .pad = 1, .groups = 2};
  const ConvShape strided{.n = 1, .c = 3, .h = 16, .w = 16, .k = 5, .r = 5, .stride = 2, .pad = 2, .groups = 1};
  std::vector<LibraryCall> calls{{.pass = LibraryPass::matmul, .gemm = {.batch = 2, .m = 37, .n = 45, .k = 29}},
                                 {.pass = LibraryPass::matmul, .gemm = {.batch = 1, .m = 8, .n = 300, .k = 1}}};
  if (cuda::has_cudnn())
    for (const ConvShape& s : {grouped, strided})
      for (LibraryPass pass : {LibraryPass::conv_forward, LibraryPass::conv_backward_data, LibraryPass::conv_backward_filter})
        calls.push_back({.pass = pass, .conv = s});
  else
    WARN("built without cuDNN: only the products are checked");
  for (GpuMath math : {GpuMath::fp32, GpuMath::tf32}) {
    // TF32 keeps 10 bits of each operand's mantissa: an error of ~1e-3 of the terms' magnitudes; FP32's
    // Winograd and FFT algorithms lose a few bits too. A wrong layout or pass is off by the magnitude itself.
    const double tolerance = math == GpuMath::fp32 ? 1e-4 : 1e-2;
    for (const LibraryCall& call : calls) {
      CAPTURE(gpu_math_name(math), static_cast<int>(call.pass), call.gemm.m, call.conv.c, call.conv.stride);
      const std::array<int64_t, 2> sizes = call.input_floats();
      const std::vector<float> a = random_floats(sizes[0], 1), b = random_floats(sizes[1], 2);
      const std::vector<float> got = cuda::run_call_once(call, math, {std::span<const float>(a), std::span<const float>(b)});
      const auto [want, magnitude] = reference(call, a, b);
      REQUIRE(got.size() == want.size());
      int wrong = 0;
      for (size_t i = 0; i < got.size(); ++i) wrong += std::abs(got[i] - want[i]) > tolerance * magnitude[i] + 1e-6;
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("sim::replay::cuda: a plan's products and convolutions run on the libraries", "[replay][cuda]") {
  std::string why;
  if (cuda::device_count(&why) == 0) {
    WARN("skipped: no CUDA GPU (" << why << ")");
    return;
  }
  // A chain on one GPU: a convolution, a product, their gradients, a stream and a product without dims.
  const ConvShape conv{.n = 2, .c = 64, .h = 28, .w = 28, .k = 64, .r = 3, .stride = 1, .pad = 1, .groups = 1};
  graphs::GemmDims conv_grad = implicit_gemm(conv), mm_grad{.batch = 2, .m = 512, .n = 256, .k = 128};
  conv_grad.batch = 2;
  std::vector<PlanOp> ops{compute_op("Conv2D", implicit_gemm(conv), conv_bytes(conv)),
                          compute_op("MatMul", {.batch = 1, .m = 512, .n = 256, .k = 128}),
                          compute_op("Conv2DGrad", conv_grad, 2 * conv_bytes(conv)), compute_op("MatMulGrad", mm_grad),
                          {.name = "add", .type = "Add", .kernel = KernelKind::memory, .bytes = 1e6},
                          {.name = "square", .type = "MatMul", .kernel = KernelKind::compute, .flops = 3e7}};
  ReplayPlan plan{.graph = "library-chain", .cluster = "one"};
  plan.devices.push_back({.name = "gpu0", .kind = "gpu", .ops = {}});
  double flops = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i].name += std::to_string(i);
    if (i > 0) ops[i].after_ops = {static_cast<int32_t>(i - 1)};
    if (ops[i].kernel == KernelKind::compute) flops += replay_dims(ops[i]).flops();
    plan.ops.push_back(ops[i]);
    plan.devices[0].ops.push_back(static_cast<int32_t>(i));
  }
  ReplayOptions options{.warmup = 1, .repeats = 3, .arena_bytes = 1 << 20};
  for (GpuKernels kernels : {GpuKernels::library, GpuKernels::own}) {
    options.gpu_kernels = kernels;
    const ReplayResult r = run_replay(plan, "cuda", options);
    CAPTURE(gpu_kernels_name(kernels));
    CHECK(r.gpu_kernels == gpu_kernels_name(kernels));
    CHECK(r.library_ops == (kernels == GpuKernels::library ? 5 : 0));
    CHECK(r.gpu_versions.find("cuBLASLt") != std::string::npos);
    for (size_t i = 1; i < plan.ops.size(); ++i) CHECK(r.op_start_s[i] >= r.op_end_s[i - 1]);
    // The libraries do the ops' FLOPs exactly; the own kernel rounds its tiles up.
    if (kernels == GpuKernels::library) CHECK(r.flops_done == Approx(flops).epsilon(1e-12));
    else CHECK(r.flops_done >= flops);
    CHECK(r.step_time_s > 0);
  }
}

#endif  // PLACELAB_HAS_CUDA
