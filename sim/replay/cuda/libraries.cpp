// cuBLASLt and cuDNN behind the CUDA replay (see libraries.h). Every library call is checked.
#include "sim/replay/cuda/libraries.h"

#include <algorithm>
#include <map>
#include <mutex>

#include <cublasLt.h>
#include <fmt/format.h>
#if PLACELAB_HAS_CUDNN
#include <cudnn.h>
#endif

#include "graphs/error.h"

namespace placelab::sim::replay::cuda {

namespace {

void check_cuda(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess)
    throw Error(fmt::format("replay --backend cuda: {} failed at {}:{}: {}", call, file, line, cudaGetErrorString(err)));
}

void check_blas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(fmt::format("replay --backend cuda: {} failed at {}:{}: {}", call, file, line, cublasLtGetStatusString(status)));
}

#define PLACELAB_CUDA_CHECK(call) check_cuda((call), #call, __FILE__, __LINE__)
#define PLACELAB_BLAS_CHECK(call) check_blas((call), #call, __FILE__, __LINE__)

#if PLACELAB_HAS_CUDNN
void check_dnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw Error(fmt::format("replay --backend cuda: {} failed at {}:{}: {}", call, file, line, cudnnGetErrorString(status)));
}
#define PLACELAB_DNN_CHECK(call) check_dnn((call), #call, __FILE__, __LINE__)

int as_int(int64_t v) { return static_cast<int>(v); }  // library_calls keeps cuDNN's tensors within int
#endif

std::string version_of(size_t v) { return fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100); }

using Key = std::array<int64_t, 14>;

Key key_of(const LibraryCall& c, GpuMath math) {
  return {static_cast<int64_t>(c.pass), static_cast<int64_t>(math), c.gemm.batch, c.gemm.m, c.gemm.n, c.gemm.k,
          c.conv.n, c.conv.c, c.conv.h, c.conv.w, c.conv.k, c.conv.r, c.conv.stride * 1000 + c.conv.pad, c.conv.groups};
}

}  // namespace

struct PreparedCall {
  LibraryCall call;
  size_t workspace = 0;
  // cuBLASLt: C = A B, column-major, batched with strides.
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
#if PLACELAB_HAS_CUDNN
  // cuDNN: x (input), w (filters), y (output) and the convolution; the chosen algorithm of the pass.
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int conv_algo = 0;
#endif
};

size_t workspace_bytes(const PreparedCall& call) { return call.workspace; }

const LibraryCall& call_of(const PreparedCall& prepared) { return prepared.call; }

bool has_cudnn() {
#if PLACELAB_HAS_CUDNN
  return true;
#else
  return false;
#endif
}

std::string gpu_versions() {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::string out = fmt::format("driver {}.{}, runtime {}.{}, cuBLASLt {}", driver / 1000, driver % 1000 / 10,
                                runtime / 1000, runtime % 1000 / 10, version_of(cublasLtGetVersion()));
#if PLACELAB_HAS_CUDNN
  out += ", cuDNN " + version_of(cudnnGetVersion());
#else
  out += ", no cuDNN (convolutions on cuBLASLt)";
#endif
  return out;
}

struct GpuLibraries::Impl {
  int gpu = 0;
  cublasLtHandle_t lt = nullptr;
#if PLACELAB_HAS_CUDNN
  cudnnHandle_t dnn = nullptr;
#endif
  std::mutex mutex;
  std::map<Key, std::unique_ptr<PreparedCall>> prepared;  // nullptr: no algorithm

  std::unique_ptr<PreparedCall> prepare_matmul(const LibraryCall& call, GpuMath math) const {
    auto p = std::make_unique<PreparedCall>();
    p->call = call;
    const graphs::GemmDims& d = call.gemm;
    const cublasComputeType_t compute = math == GpuMath::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    PLACELAB_BLAS_CHECK(cublasLtMatmulDescCreate(&p->matmul, compute, CUDA_R_32F));
    // A (m x k), B (k x n), C (m x n), column-major, `batch` of each at a stride of one matrix.
    auto layout = [&](cublasLtMatrixLayout_t* l, int64_t rows, int64_t cols) {
      PLACELAB_BLAS_CHECK(cublasLtMatrixLayoutCreate(l, CUDA_R_32F, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), rows));
      const auto count = static_cast<int32_t>(d.batch);
      const int64_t stride = rows * cols;
      PLACELAB_BLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      PLACELAB_BLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    };
    layout(&p->a, d.m, d.k);
    layout(&p->b, d.k, d.n);
    layout(&p->c, d.m, d.n);
    cublasLtMatmulPreference_t preference = nullptr;
    PLACELAB_BLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    const uint64_t limit = kBlasWorkspaceBytes;
    PLACELAB_BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof(limit)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt, p->matmul, p->a, p->b, p->c, p->c, preference, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    if (status != CUBLAS_STATUS_SUCCESS || found == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
      destroy(*p);
      return nullptr;
    }
    p->algo = result.algo;
    p->workspace = result.workspaceSize;
    return p;
  }

#if PLACELAB_HAS_CUDNN
  std::unique_ptr<PreparedCall> prepare_conv(const LibraryCall& call, GpuMath math) const {
    auto p = std::make_unique<PreparedCall>();
    p->call = call;
    const ConvShape& s = call.conv;
    PLACELAB_DNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
    PLACELAB_DNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
    PLACELAB_DNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
    PLACELAB_DNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
    PLACELAB_DNN_CHECK(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, as_int(s.n), as_int(s.c), as_int(s.h), as_int(s.w)));
    PLACELAB_DNN_CHECK(cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, as_int(s.k), as_int(s.c / s.groups),
                                                  as_int(s.r), as_int(s.r)));
    PLACELAB_DNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, as_int(s.pad), as_int(s.pad), as_int(s.stride), as_int(s.stride),
                                                       1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    PLACELAB_DNN_CHECK(cudnnSetConvolutionGroupCount(p->conv, as_int(s.groups)));
    // TF32: cuDNN's default math uses tensor cores for FP32 data; FMA math keeps to FP32.
    const cudnnMathType_t asked = math == GpuMath::tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    PLACELAB_DNN_CHECK(cudnnSetConvolutionMathType(p->conv, asked));
    int n = 0, k = 0, h = 0, w = 0;
    PLACELAB_DNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &n, &k, &h, &w));
    if (h != s.out_h() || w != s.out_w())
      throw Error(fmt::format("replay --backend cuda: cuDNN gives the convolution of {}x{}x{}x{} by {} filters {}x{} "
                              "(stride {}, padding {}) an output of {}x{}, not {}x{}", s.n, s.c, s.h, s.w, s.k, s.r, s.r,
                              s.stride, s.pad, h, w, s.out_h(), s.out_w()));
    PLACELAB_DNN_CHECK(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, h, w));
    // The heuristics' algorithms, best first: the first that works within the workspace limit, as PyTorch
    // picks without benchmarking; its math type is the one it was ranked with (unless FP32 was asked).
    auto pick = [&](const auto* perf, int count) {
      for (int i = 0; i < count; ++i)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kCudnnWorkspaceBytes) {
          p->conv_algo = static_cast<int>(perf[i].algo);
          p->workspace = perf[i].memory;
          if (math == GpuMath::tf32) PLACELAB_DNN_CHECK(cudnnSetConvolutionMathType(p->conv, perf[i].mathType));
          return true;
        }
      return false;
    };
    int count = 0;
    bool found = false;
    if (call.pass == LibraryPass::conv_forward) {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      PLACELAB_DNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(dnn, p->x, p->w, p->conv, p->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf));
      found = pick(perf, count);
    } else if (call.pass == LibraryPass::conv_backward_data) {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      PLACELAB_DNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn, p->w, p->y, p->conv, p->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                                     &count, perf));
      found = pick(perf, count);
    } else {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      PLACELAB_DNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn, p->x, p->y, p->conv, p->w,
                                                                       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf));
      found = pick(perf, count);
    }
    if (!found) {
      destroy(*p);
      return nullptr;
    }
    return p;
  }
#endif

  static void destroy(PreparedCall& p) noexcept {
    if (p.matmul) cublasLtMatmulDescDestroy(p.matmul);
    for (cublasLtMatrixLayout_t l : {p.a, p.b, p.c})
      if (l) cublasLtMatrixLayoutDestroy(l);
#if PLACELAB_HAS_CUDNN
    if (p.x) cudnnDestroyTensorDescriptor(p.x);
    if (p.y) cudnnDestroyTensorDescriptor(p.y);
    if (p.w) cudnnDestroyFilterDescriptor(p.w);
    if (p.conv) cudnnDestroyConvolutionDescriptor(p.conv);
#endif
    p = PreparedCall{};
  }
};

GpuLibraries::GpuLibraries(int gpu) : impl_(std::make_unique<Impl>()) {
  impl_->gpu = gpu;
  PLACELAB_CUDA_CHECK(cudaSetDevice(gpu));
  PLACELAB_BLAS_CHECK(cublasLtCreate(&impl_->lt));
#if PLACELAB_HAS_CUDNN
  PLACELAB_DNN_CHECK(cudnnCreate(&impl_->dnn));
#endif
}

GpuLibraries::~GpuLibraries() {
  for (auto& [key, p] : impl_->prepared)
    if (p) Impl::destroy(*p);
  if (impl_->lt) cublasLtDestroy(impl_->lt);
#if PLACELAB_HAS_CUDNN
  if (impl_->dnn) cudnnDestroy(impl_->dnn);
#endif
}

GpuLibraries& GpuLibraries::of(int gpu) {
  static std::mutex mutex;
  // Never destroyed: at exit the CUDA runtime may be torn down before static destructors would run.
  static auto* all = new std::map<int, GpuLibraries*>();
  std::lock_guard lock(mutex);
  GpuLibraries*& libs = (*all)[gpu];
  if (!libs) libs = new GpuLibraries(gpu);
  return *libs;
}

const PreparedCall* GpuLibraries::prepare(const LibraryCall& call, GpuMath math) {
  std::lock_guard lock(impl_->mutex);
  const Key key = key_of(call, math);
  if (auto it = impl_->prepared.find(key); it != impl_->prepared.end()) return it->second.get();
  PLACELAB_CUDA_CHECK(cudaSetDevice(impl_->gpu));
  std::unique_ptr<PreparedCall> p;
  if (call.pass == LibraryPass::matmul) {
    p = impl_->prepare_matmul(call, math);
  } else {
#if PLACELAB_HAS_CUDNN
    p = impl_->prepare_conv(call, math);
#else
    throw Error("replay --backend cuda: a convolution call in a build without cuDNN (library_calls makes none there)");
#endif
  }
  return impl_->prepared.emplace(key, std::move(p)).first->second.get();
}

void GpuLibraries::run(const PreparedCall& p, const float* src, float* dst, void* workspace, cudaStream_t stream) {
  const float one = 1, zero = 0;
  const float* first = src;
  const float* second = src + aligned_floats(p.call.input_floats()[0]);
  if (p.call.pass == LibraryPass::matmul) {
    PLACELAB_BLAS_CHECK(cublasLtMatmul(impl_->lt, p.matmul, &one, first, p.a, second, p.b, &zero, dst, p.c, dst, p.c, &p.algo,
                                       workspace, p.workspace, stream));
    return;
  }
#if PLACELAB_HAS_CUDNN
  cudnnHandle_t dnn = impl_->dnn;
  PLACELAB_DNN_CHECK(cudnnSetStream(dnn, stream));
  switch (p.call.pass) {
    case LibraryPass::conv_forward:  // y = conv(x, w)
      PLACELAB_DNN_CHECK(cudnnConvolutionForward(dnn, &one, p.x, first, p.w, second, p.conv,
                                                 static_cast<cudnnConvolutionFwdAlgo_t>(p.conv_algo), workspace, p.workspace,
                                                 &zero, p.y, dst));
      break;
    case LibraryPass::conv_backward_data:  // dx from dy and w
      PLACELAB_DNN_CHECK(cudnnConvolutionBackwardData(dnn, &one, p.w, second, p.y, first, p.conv,
                                                      static_cast<cudnnConvolutionBwdDataAlgo_t>(p.conv_algo), workspace,
                                                      p.workspace, &zero, p.x, dst));
      break;
    case LibraryPass::conv_backward_filter:  // dw from x and dy
      PLACELAB_DNN_CHECK(cudnnConvolutionBackwardFilter(dnn, &one, p.x, first, p.y, second, p.conv,
                                                        static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.conv_algo), workspace,
                                                        p.workspace, &zero, p.w, dst));
      break;
    case LibraryPass::matmul: break;
  }
#endif
}

std::vector<float> run_call_once(const LibraryCall& call, GpuMath math, std::array<std::span<const float>, 2> inputs) {
  const std::array<int64_t, 2> sizes = call.input_floats();
  for (size_t i = 0; i < 2; ++i)
    if (static_cast<int64_t>(inputs[i].size()) != sizes[i])
      throw Error(fmt::format("run_call_once: operand {} has {} floats, the call takes {}", i, inputs[i].size(), sizes[i]));
  GpuLibraries& libs = GpuLibraries::of(0);
  const PreparedCall* p = libs.prepare(call, math);
  if (!p) throw Error("run_call_once: the library has no algorithm for this call");
  std::vector<float> out(static_cast<size_t>(call.output_floats()));
  float *src = nullptr, *dst = nullptr;
  void* workspace = nullptr;
  cudaStream_t stream = nullptr;
  auto release = [&] {
    if (src) cudaFree(src);
    if (dst) cudaFree(dst);
    if (workspace) cudaFree(workspace);
    if (stream) cudaStreamDestroy(stream);
  };
  try {
    PLACELAB_CUDA_CHECK(cudaSetDevice(0));
    PLACELAB_CUDA_CHECK(cudaMalloc(&src, static_cast<size_t>(call.input_span()) * sizeof(float)));
    PLACELAB_CUDA_CHECK(cudaMalloc(&dst, std::max<size_t>(1, out.size()) * sizeof(float)));
    PLACELAB_CUDA_CHECK(cudaMalloc(&workspace, std::max<size_t>(1, p->workspace)));
    PLACELAB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    PLACELAB_CUDA_CHECK(cudaMemcpy(src, inputs[0].data(), inputs[0].size_bytes(), cudaMemcpyHostToDevice));
    PLACELAB_CUDA_CHECK(cudaMemcpy(src + aligned_floats(sizes[0]), inputs[1].data(), inputs[1].size_bytes(), cudaMemcpyHostToDevice));
    libs.run(*p, src, dst, workspace, stream);
    PLACELAB_CUDA_CHECK(cudaStreamSynchronize(stream));
    PLACELAB_CUDA_CHECK(cudaMemcpy(out.data(), dst, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  } catch (...) {
    release();
    throw;
  }
  release();
  return out;
}

}  // namespace placelab::sim::replay::cuda
