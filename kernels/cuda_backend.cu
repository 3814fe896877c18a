// CudaBackend life cycle, memory, scratch and statistics buffers. The ops live in the other .cu
// files (see cuda_backend.hpp).
#include "cuda_backend.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
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
    FP8RL_CUDA_CHECK(cudaMalloc(&differ_dev_, sizeof(unsigned)));
    FP8RL_CUDA_CHECK(cudaMallocHost(&differ_host_, sizeof(unsigned)));
    FP8RL_CUDA_CHECK(cudaMalloc(&split_counters_, kSplitCounters * sizeof(unsigned)));
    FP8RL_CUDA_CHECK(cudaMemset(split_counters_, 0, kSplitCounters * sizeof(unsigned)));
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
  for (const PendingOp& p : op_pending_) {
    (void)cudaEventDestroy(p.start);
    (void)cudaEventDestroy(p.end);
  }
  for (cudaEvent_t e : op_event_pool_) (void)cudaEventDestroy(e);
  op_pending_.clear();
  op_event_pool_.clear();
  if (split_counters_) (void)cudaFree(split_counters_);
  split_counters_ = nullptr;
  if (differ_host_) (void)cudaFreeHost(differ_host_);
  if (differ_dev_) (void)cudaFree(differ_dev_);
  differ_host_ = nullptr;
  differ_dev_ = nullptr;
  if (reduce_host_) (void)cudaFreeHost(reduce_host_);
  if (reduce_dev_) (void)cudaFree(reduce_dev_);
  if (stats_host_) (void)cudaFreeHost(stats_host_);
  if (stats_dev_) (void)cudaFree(stats_dev_);
  if (scratch_) (void)cudaFree(scratch_);
  if (workspace_) (void)cudaFree(workspace_);
  if (lt_) (void)cublasLtDestroy(lt_);
  cuda::destroy_cublas_handle(cublas_);
  cublas_ = nullptr;
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
  const OpScope scope(*this, "upload");
  if (bytes == 0) return;
  check(dst && host_src, "upload: null pointer");
  make_current();
  FP8RL_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
}

void CudaBackend::download(void* host_dst, const void* src, size_t bytes) {
  const OpScope scope(*this, "download");
  count_host_sync();
  if (bytes == 0) return;
  check(host_dst && src, "download: null pointer");
  make_current();
  FP8RL_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  FP8RL_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  const OpScope scope(*this, "copy");
  if (bytes == 0) return;
  check(dst && src, "copy: null pointer");
  make_current();
  FP8RL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::zero(void* dst, size_t bytes) {
  const OpScope scope(*this, "zero");
  if (bytes == 0) return;
  check(dst != nullptr, "zero: null pointer");
  make_current();
  FP8RL_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_));
}

namespace {

// Raises *differ when a and b differ anywhere in [0, n) (16-byte words, or bytes).
template <typename Word>
__global__ void differ_kernel(const Word* __restrict__ a, const Word* __restrict__ b, int64_t n,
                              unsigned* differ) {
  bool d = false;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (sizeof(Word) == 16) {
      const uint4 x = a[i], y = b[i];
      d |= x.x != y.x || x.y != y.y || x.z != y.z || x.w != y.w;
    } else {
      d |= a[i] != b[i];
    }
  }
  if (__syncthreads_or(d) && threadIdx.x == 0) *differ = 1;
}

template <typename Word>
void launch_differ(const void* a, const void* b, int64_t n, unsigned* differ, int sm_count,
                   cudaStream_t stream) {
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, int64_t{8} * sm_count);
  differ_kernel<Word><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      static_cast<const Word*>(a), static_cast<const Word*>(b), n, differ);
  cuda::check_launch("differ_kernel");
}

double host_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

bool CudaBackend::equal_bytes(const void* a, const void* b, size_t bytes) {
  const OpScope scope(*this, "equal_bytes");
  count_host_sync();
  if (bytes == 0 || a == b) return true;
  check(a && b, "equal_bytes: null pointer");
  make_current();
  FP8RL_CUDA_CHECK(cudaMemsetAsync(differ_dev_, 0, sizeof(unsigned), stream_));
  // 16-byte words over the common aligned body when both start 16-byte aligned, bytes for the
  // rest (and for everything otherwise).
  size_t body = 0;
  if (cuda::pointer_alignment(a) >= 16 && cuda::pointer_alignment(b) >= 16) {
    body = bytes / 16 * 16;
    launch_differ<uint4>(a, b, static_cast<int64_t>(body / 16), differ_dev_, sm_count_, stream_);
  }
  launch_differ<uint8_t>(static_cast<const uint8_t*>(a) + body,
                         static_cast<const uint8_t*>(b) + body, static_cast<int64_t>(bytes - body),
                         differ_dev_, sm_count_, stream_);
  FP8RL_CUDA_CHECK(cudaMemcpyAsync(differ_host_, differ_dev_, sizeof(unsigned),
                                   cudaMemcpyDeviceToHost, stream_));
  FP8RL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return *differ_host_ == 0;
}

std::vector<bool> CudaBackend::equal_bytes(const std::vector<BytesPair>& pairs) {
  const OpScope scope(*this, "equal_bytes");
  count_host_sync();
  std::vector<bool> same(pairs.size(), true);
  if (pairs.empty()) return same;
  make_current();
  // One flag per pair, raised where the pair differs; read back with one synchronisation.
  Buffer flags = alloc(pairs.size() * sizeof(unsigned));
  auto* differ = flags.as<unsigned>();
  FP8RL_CUDA_CHECK(cudaMemsetAsync(differ, 0, pairs.size() * sizeof(unsigned), stream_));
  for (size_t i = 0; i < pairs.size(); ++i) {
    const BytesPair& p = pairs[i];
    if (p.bytes == 0 || p.a == p.b) continue;
    check(p.a && p.b, "equal_bytes: null pointer");
    size_t body = 0;
    if (cuda::pointer_alignment(p.a) >= 16 && cuda::pointer_alignment(p.b) >= 16) {
      body = p.bytes / 16 * 16;
      launch_differ<uint4>(p.a, p.b, static_cast<int64_t>(body / 16), differ + i, sm_count_,
                           stream_);
    }
    launch_differ<uint8_t>(static_cast<const uint8_t*>(p.a) + body,
                           static_cast<const uint8_t*>(p.b) + body,
                           static_cast<int64_t>(p.bytes - body), differ + i, sm_count_, stream_);
  }
  std::vector<unsigned> host(pairs.size());
  FP8RL_CUDA_CHECK(cudaMemcpyAsync(host.data(), differ, host.size() * sizeof(unsigned),
                                   cudaMemcpyDeviceToHost, stream_));
  FP8RL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  for (size_t i = 0; i < pairs.size(); ++i) same[i] = host[i] == 0;
  return same;
}

// --- op timing

CudaBackend::OpScope::OpScope(CudaBackend& be, const char* op) {
  if (!be.op_timing_ || be.capturing_) return;
  depth_of_ = &be;
  if (be.op_depth_++ > 0) return;  // inside another op: counted there
  cudaEvent_t start = be.take_op_event();
  if (!start || cudaEventRecord(start, be.stream_) != cudaSuccess) {
    if (start) be.op_event_pool_.push_back(start);
    return;  // untimed; the depth is undone in the destructor
  }
  be_ = &be;
  op_ = op;
  start_ = start;
  t0_ = host_now();
}

CudaBackend::OpScope::~OpScope() {
  if (depth_of_) --depth_of_->op_depth_;
  CudaBackend* be = be_;
  if (!be) return;
  const double host = host_now() - t0_;
  cudaEvent_t end = be->take_op_event();
  if (!end || cudaEventRecord(end, be->stream_) != cudaSuccess) {
    if (end) be->op_event_pool_.push_back(end);
    be->op_event_pool_.push_back(start_);
    (void)cudaGetLastError();
    return;
  }
  be->op_pending_.push_back({op_, start_, end, host});
  if (be->op_pending_.size() >= 4096) be->harvest_op_events();
}

cudaEvent_t CudaBackend::take_op_event() noexcept {
  if (!op_event_pool_.empty()) {
    cudaEvent_t e = op_event_pool_.back();
    op_event_pool_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  if (cudaEventCreate(&e) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return e;
}

void CudaBackend::harvest_op_events() noexcept {
  if (op_pending_.empty()) return;
  const bool waited = cudaEventSynchronize(op_pending_.back().end) == cudaSuccess;
  for (const PendingOp& p : op_pending_) {
    OpTiming& t = op_totals_[p.op];
    t.op = p.op;
    ++t.calls;
    t.host_seconds += p.host_seconds;
    float ms = 0;
    if (waited && cudaEventElapsedTime(&ms, p.start, p.end) == cudaSuccess) {
      t.device_seconds = std::max(t.device_seconds, 0.0) + ms / 1000.0;
    }
    op_event_pool_.push_back(p.start);
    op_event_pool_.push_back(p.end);
  }
  op_pending_.clear();
  (void)cudaGetLastError();
}

bool CudaBackend::set_op_timing(bool on) {
  make_current();
  harvest_op_events();
  op_totals_.clear();
  op_timing_ = on;
  op_depth_ = 0;
  return true;
}

std::vector<OpTiming> CudaBackend::op_timings() {
  count_host_sync();
  make_current();
  harvest_op_events();
  std::vector<OpTiming> out;
  for (const auto& [name, t] : op_totals_) out.push_back(t);
  std::sort(out.begin(), out.end(), [](const OpTiming& a, const OpTiming& b) {
    return a.device_seconds != b.device_seconds ? a.device_seconds > b.device_seconds
                                                : a.host_seconds > b.host_seconds;
  });
  return out;
}

// --- kernel options

namespace {
using OptionMember = int64_t CudaBackend::KernelOptions::*;
struct OptionField {
  const char* name;
  OptionMember field;
  int64_t min, max;  // the values allowed besides 0 (the default)
};
constexpr OptionField kOptionFields[] = {
    {"linear_fp8_kernel", &CudaBackend::KernelOptions::linear_fp8_kernel, 1, 3},
    {"linear_fp8_max_rows", &CudaBackend::KernelOptions::linear_fp8_max_rows, 1, INT32_MAX},
    {"linear_fp8_splits", &CudaBackend::KernelOptions::linear_fp8_splits, 1, 4096},
    {"linear_fp8_ctas_per_sm", &CudaBackend::KernelOptions::linear_fp8_ctas_per_sm, 1, 64},
    {"attention_kernel", &CudaBackend::KernelOptions::attention_kernel, 1, 3},
    {"attention_splits", &CudaBackend::KernelOptions::attention_splits, 1, 256},
    {"attention_ctas_per_sm", &CudaBackend::KernelOptions::attention_ctas_per_sm, 1, 64},
    {"attention_mma", &CudaBackend::KernelOptions::attention_mma, 1, 2},
    {"quantize_stage_bf16", &CudaBackend::KernelOptions::quantize_stage_bf16, 1, 2},
    {"quantize_tile_kernel", &CudaBackend::KernelOptions::quantize_tile_kernel, 1, 2},
    {"gemm_grouped_kernel", &CudaBackend::KernelOptions::gemm_grouped_kernel, 1, 3},
    {"gemm_algo", &CudaBackend::KernelOptions::gemm_algo, 1, 16},
};
}  // namespace

bool CudaBackend::set_kernel_option(const std::string& name, int64_t value) {
  for (const OptionField& f : kOptionFields) {
    if (name != f.name) continue;
    check(value == 0 || (value >= f.min && value <= f.max),
          "kernel option " + name + ": " + std::to_string(value) + " outside " +
              std::to_string(f.min) + ".." + std::to_string(f.max) + " (0: the default)");
    options_.*f.field = value == 0 ? KernelOptions{}.*f.field : value;
    return true;
  }
  return false;
}

std::vector<std::pair<std::string, int64_t>> CudaBackend::kernel_options() const {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const OptionField& f : kOptionFields) out.emplace_back(f.name, options_.*f.field);
  return out;
}

void CudaBackend::launch_graph(cudaGraphExec_t exec) {
  const OpScope scope(*this, "graph_replay");
  make_current();
  FP8RL_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
}

void CudaBackend::synchronize() {
  const OpScope scope(*this, "synchronize");
  count_host_sync();
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

int64_t CudaBackend::memory_available() {
  // Blocks freed on the stream return to the pool once the work before them ends.
  synchronize();
  size_t free_bytes = 0, total_bytes = 0;
  FP8RL_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  std::uint64_t reserved = 0, used = 0;  // cuuint64_t
  FP8RL_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved));
  FP8RL_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemCurrent, &used));
  return static_cast<int64_t>(free_bytes) +
         static_cast<int64_t>(reserved - std::min(reserved, used));
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
  CudaGraph(CudaBackend& be, int device, cudaStream_t stream, cudaGraph_t graph,
            cudaGraphExec_t exec)
      : be_(be), device_(device), stream_(stream), graph_(graph), exec_(exec) {}
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

  void replay() override { be_.launch_graph(exec_); }

 private:
  CudaBackend& be_;
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
  return std::make_unique<CudaGraph>(*this, device_, stream_, graph, exec);
}

DeviceQuantStats* CudaBackend::begin_stats() {
  FP8RL_CUDA_CHECK(cudaMemsetAsync(stats_dev_, 0, 2 * sizeof(DeviceQuantStats), stream_));
  return stats_dev_;
}

void CudaBackend::finish_stats(QuantStats* first, QuantStats* second) {
  count_host_sync();
  FP8RL_CUDA_CHECK(cudaMemcpyAsync(stats_host_, stats_dev_, 2 * sizeof(DeviceQuantStats),
                                   cudaMemcpyDeviceToHost, stream_));
  FP8RL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  if (first) *first = stats_host_[0].stats();
  if (second) *second = stats_host_[1].stats();
}

}  // namespace fp8rl
