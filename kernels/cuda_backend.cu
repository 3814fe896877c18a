// CudaBackend life cycle, memory, scratch and statistics buffers. The ops live in the other .cu
// files (see cuda_backend.hpp).
#include "cuda_backend.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "cuda_check.hpp"

#if FP8RL_HAVE_NCCL
#include "nccl_communicator.hpp"
#endif

namespace fp8rl {

namespace cuda {

uint32_t pointer_alignment(const void* p) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 1;
  while (a < 256 && (u & a) == 0) a <<= 1;
  return a;
}

GemmPlan::~GemmPlan() {
  // Status ignored: destruction cannot fail in a way the caller could act on.
  if (d) (void)cublasLtMatrixLayoutDestroy(d);
  if (c) (void)cublasLtMatrixLayoutDestroy(c);
  if (b) (void)cublasLtMatrixLayoutDestroy(b);
  if (a) (void)cublasLtMatrixLayoutDestroy(a);
  if (desc) (void)cublasLtMatmulDescDestroy(desc);
}

}  // namespace cuda

CudaBackend::CudaBackend(int device) : device_(device) {
  try {
    int count = 0;
    FP8RL_CUDA_CHECK(cudaGetDeviceCount(&count));
    check(device >= 0 && device < count, "CUDA device " + std::to_string(device) +
                                             " does not exist (" + std::to_string(count) +
                                             " devices)");
    FP8RL_CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp prop{};
    FP8RL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    check(prop.major == 9 && prop.minor == 0,
          std::string("device ") + prop.name + " is sm_" + std::to_string(prop.major) +
              std::to_string(prop.minor) + "; this build targets sm_90a (Hopper)");
    sm_count_ = prop.multiProcessorCount;
    char desc[512];
    std::snprintf(desc, sizeof desc, "%s (sm_%d%d, %d SMs, %.1f GiB)", prop.name, prop.major,
                  prop.minor, prop.multiProcessorCount,
                  static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
    device_desc_ = desc;

    FP8RL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    FP8RL_CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
    std::uint64_t keep_all = ~std::uint64_t{0};  // cuuint64_t
    FP8RL_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep_all));
    FP8RL_CUBLAS_CHECK(cublasLtCreate(&lt_));
    FP8RL_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
    FP8RL_CUDA_CHECK(cudaMalloc(&stats_dev_, 2 * sizeof(DeviceQuantStats)));
    FP8RL_CUDA_CHECK(cudaMallocHost(&stats_host_, 2 * sizeof(DeviceQuantStats)));
    FP8RL_CUDA_CHECK(cudaMalloc(&reduce_dev_, (kReduceBlocks + 1) * sizeof(double)));
    FP8RL_CUDA_CHECK(cudaMallocHost(&reduce_host_, sizeof(double)));
  } catch (...) {
    release();
    throw;
  }
}

CudaBackend::~CudaBackend() {
  release();
}

void CudaBackend::release() noexcept {
  // Let queued work finish before its memory goes away; errors are irrelevant at this point.
  (void)cudaSetDevice(device_);
  if (stream_) (void)cudaStreamSynchronize(stream_);
  {
    std::lock_guard<std::mutex> lock(plans_mutex_);
    plans_.clear();  // before the handle: plans hold cuBLASLt descriptors
  }
  if (reduce_host_) (void)cudaFreeHost(reduce_host_);
  if (reduce_dev_) (void)cudaFree(reduce_dev_);
  if (stats_host_) (void)cudaFreeHost(stats_host_);
  if (stats_dev_) (void)cudaFree(stats_dev_);
  if (scratch_) (void)cudaFree(scratch_);
  if (workspace_) (void)cudaFree(workspace_);
  if (lt_) (void)cublasLtDestroy(lt_);
  // Blocks still allocated (buffers outliving the backend) keep the pool alive until freed.
  if (pool_) (void)cudaMemPoolDestroy(pool_);
  if (stream_) (void)cudaStreamDestroy(stream_);
  reduce_host_ = nullptr;
  reduce_dev_ = nullptr;
  stats_host_ = nullptr;
  stats_dev_ = nullptr;
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  workspace_ = nullptr;
  lt_ = nullptr;
  pool_ = nullptr;
  stream_ = nullptr;
  (void)cudaGetLastError();
}

std::unique_ptr<Communicator> CudaBackend::device_communicator(Communicator& host) {
#if FP8RL_HAVE_NCCL
  // One rank needs no collectives (and every rank sees the same size, so all return here). The
  // constructor makes the device current itself: a failure there is reported to every rank.
  if (host.size() <= 1) return nullptr;
  return std::make_unique<NcclCommunicator>(host, device_, stream_);
#else
  (void)host;
  return nullptr;
#endif
}

void CudaBackend::make_current() const {
  int current = -1;
  FP8RL_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device_) FP8RL_CUDA_CHECK(cudaSetDevice(device_));
}

void CudaBackend::upload(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  check(dst && host_src, "upload: null pointer");
  make_current();
  FP8RL_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
}

void CudaBackend::download(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check(host_dst && src, "download: null pointer");
  make_current();
  FP8RL_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  FP8RL_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check(dst && src, "copy: null pointer");
  make_current();
  FP8RL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::zero(void* dst, size_t bytes) {
  if (bytes == 0) return;
  check(dst != nullptr, "zero: null pointer");
  make_current();
  FP8RL_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_));
}

void CudaBackend::synchronize() {
  make_current();
  FP8RL_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void* CudaBackend::raw_alloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  make_current();
  void* p = nullptr;
  if (capturing_) {
    // An allocation node of the graph being recorded (graph memory, fixed address).
    const cudaError_t e = cudaMallocAsync(&p, bytes, stream_);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error("graph allocation of " + std::to_string(bytes) +
                      " bytes failed while recording (cudaMallocAsync: " + cudaGetErrorString(e) +
                      ")",
                  cudaGetErrorName(e));
    }
    return p;
  }
  cudaError_t e = cudaMallocFromPoolAsync(&p, bytes, pool_, stream_);
  if (e == cudaErrorMemoryAllocation) {
    // The pool's cached free blocks may be what fills the device: hand them back, retry once.
    (void)cudaGetLastError();
    FP8RL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    FP8RL_CUDA_CHECK(cudaMemPoolTrimTo(pool_, 0));
    e = cudaMallocFromPoolAsync(&p, bytes, pool_, stream_);
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    (void)cudaMemGetInfo(&free_bytes, &total_bytes);
    (void)cudaGetLastError();
    throw Error("device allocation of " + std::to_string(bytes) +
                    " bytes failed (cudaMallocFromPoolAsync: " + cudaGetErrorString(e) + "; " +
                    std::to_string(free_bytes >> 20) + " MiB free of " +
                    std::to_string(total_bytes >> 20) + " MiB)",
                cudaGetErrorName(e));
  }
  return p;
}

void CudaBackend::raw_free(void* p) noexcept {
  if (!p) return;
  // Stream-ordered: the block returns to the pool after the work queued so far, which may
  // still use it; later allocations on the stream can take it without a synchronisation.
  (void)cudaSetDevice(device_);
  if (cudaFreeAsync(p, stream_) != cudaSuccess) (void)cudaGetLastError();
}

void* CudaBackend::scratch(size_t bytes) {
  if (capturing_) {
    // The graph gets its own block: the shared one may be reallocated after the recording.
    void* p = raw_alloc(bytes);
    capture_scratch_.push_back(p);
    return p;
  }
  if (bytes <= scratch_bytes_) return scratch_;
  make_current();
  if (scratch_) {
    // Queued kernels may still read the old scratch.
    FP8RL_CUDA_CHECK(cudaStreamSynchronize(stream_));
    FP8RL_CUDA_CHECK(cudaFree(scratch_));
    scratch_ = nullptr;
    scratch_bytes_ = 0;
  }
  // Grow geometrically (1 MiB granules) so a sequence of slightly larger shapes reallocates
  // rarely.
  size_t want = bytes + bytes / 2;
  want = (want + (size_t{1} << 20) - 1) & ~((size_t{1} << 20) - 1);
  const cudaError_t e = cudaMalloc(&scratch_, want);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    scratch_ = nullptr;
    FP8RL_CUDA_CHECK(cudaMalloc(&scratch_, bytes));  // the exact size may still fit
    want = bytes;
  }
  scratch_bytes_ = want;
  return scratch_;
}

namespace {

// A recorded graph, replayed on the backend's stream.
class CudaGraph final : public BackendGraph {
 public:
  CudaGraph(int device, cudaStream_t stream, cudaGraph_t graph, cudaGraphExec_t exec)
      : device_(device), stream_(stream), graph_(graph), exec_(exec) {}
  ~CudaGraph() override {
    // A replay may still run; errors cannot be acted on here.
    (void)cudaSetDevice(device_);
    (void)cudaStreamSynchronize(stream_);
    (void)cudaGraphExecDestroy(exec_);
    (void)cudaGraphDestroy(graph_);
    (void)cudaGetLastError();
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void replay() override {
    int current = -1;
    FP8RL_CUDA_CHECK(cudaGetDevice(&current));
    if (current != device_) FP8RL_CUDA_CHECK(cudaSetDevice(device_));
    FP8RL_CUDA_CHECK(cudaGraphLaunch(exec_, stream_));
  }

 private:
  int device_;
  cudaStream_t stream_;
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
};

}  // namespace

std::unique_ptr<BackendGraph> CudaBackend::capture(const std::function<void()>& work,
                                                   std::string& why_not) {
  make_current();
  check(!capturing_, "capture: already recording a graph");
  // Relaxed: the recording thread may still make calls the runtime deems unsafe during capture
  // (lazy kernel loading, cuBLASLt's heuristic queries); ops on the stream are what is recorded.
  FP8RL_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  capturing_ = true;
  std::string failure;
  try {
    work();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  // Scratch blocks of the recording are freed in it, after every use (stream order).
  for (void* p : capture_scratch_)
    if (cudaFreeAsync(p, stream_) != cudaSuccess && failure.empty())
      failure =
          std::string("cudaFreeAsync of a scratch block: ") + cudaGetErrorName(cudaGetLastError());
  capture_scratch_.clear();
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (end != cudaSuccess && failure.empty())
    failure = std::string("cudaStreamEndCapture: ") + cudaGetErrorName(end) + " (" +
              cudaGetErrorString(end) + ")";
  cudaGraphExec_t exec = nullptr;
  if (failure.empty()) {
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    if (inst != cudaSuccess)
      failure = std::string("cudaGraphInstantiate: ") + cudaGetErrorName(inst) + " (" +
                cudaGetErrorString(inst) + ")";
  }
  if (!failure.empty()) {
    if (graph) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();  // capture errors are not sticky: the backend stays usable
    why_not = "recording a CUDA graph failed: " + failure;
    return nullptr;
  }
  return std::make_unique<CudaGraph>(device_, stream_, graph, exec);
}

DeviceQuantStats* CudaBackend::begin_stats() {
  FP8RL_CUDA_CHECK(cudaMemsetAsync(stats_dev_, 0, 2 * sizeof(DeviceQuantStats), stream_));
  return stats_dev_;
}

namespace {
QuantStats to_quant_stats(const DeviceQuantStats& d) {
  QuantStats s;
  s.elements = static_cast<int64_t>(d.elements);
  s.blocks = static_cast<int64_t>(d.blocks);
  s.saturated = static_cast<int64_t>(d.saturated);
  s.flushed_to_zero = static_cast<int64_t>(d.flushed_to_zero);
  s.degenerate_blocks = static_cast<int64_t>(d.degenerate_blocks);
  s.err_sq = d.err_sq;
  s.ref_sq = d.ref_sq;
  return s;
}
}  // namespace

void CudaBackend::finish_stats(QuantStats* first, QuantStats* second) {
  FP8RL_CUDA_CHECK(cudaMemcpyAsync(stats_host_, stats_dev_, 2 * sizeof(DeviceQuantStats),
                                   cudaMemcpyDeviceToHost, stream_));
  FP8RL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  if (first) *first = to_quant_stats(stats_host_[0]);
  if (second) *second = to_quant_stats(stats_host_[1]);
}

}  // namespace fp8rl
