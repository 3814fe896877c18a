// fp8rl bench gemm|quant|rollout: BF16 vs block-scaled FP8 on every backend present, printed as
// ratios against the strongest baseline measured in the same run. fp8rl bench telemetry: what a
// worker's telemetry (JSON, PUB socket, run store) costs per step of the demo preset, against
// the step itself.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "args.hpp"
#include "backend/backend_registry.hpp"
#include "commands.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "rollout/generator.hpp"

#if defined(FP8RL_HAVE_IPC)
#include <unistd.h>
#include <zmq.h>

#include "ipc/telemetry_publisher.hpp"
#include "rl/run_loop.hpp"
#include "store/run_store.hpp"
#endif

namespace fp8rl::cli {
namespace {

struct Shape {
  std::string name;
  int64_t M, N, K;
};

// Linear-layer shapes at M tokens. Qwen3-8B: hidden 4096, 32 q heads / 8 kv heads of 128,
// intermediate 12288. Llama-3.1-8B: intermediate 14336. Qwen3-0.6B: hidden 1024, 16 q / 8 kv
// heads of 128, intermediate 3072.
std::vector<Shape> gpu_shapes() {
  const int64_t M = 8192;
  return {{"square 8192^3", 8192, 8192, 8192}, {"qwen3-8b q/o", M, 4096, 4096},
          {"qwen3-8b k/v", M, 1024, 4096},     {"qwen3-8b gate/up", M, 12288, 4096},
          {"qwen3-8b down", M, 4096, 12288},   {"llama-8b gate/up", M, 14336, 4096},
          {"llama-8b down", M, 4096, 14336},   {"qwen3-1.7b gate/up", M, 6144, 2048},
          {"qwen3-1.7b down", M, 2048, 6144}};
}

std::vector<Shape> cpu_shapes() {
  return {{"square 1024^3", 1024, 1024, 1024},
          {"qwen3-0.6b q/o", 512, 2048, 1024},
          {"qwen3-0.6b gate/up", 512, 3072, 1024},
          {"qwen3-0.6b down", 512, 1024, 3072}};
}

std::vector<Shape> parse_shapes(const std::string& spec) {
  // "M,N,K;M,N,K"
  std::vector<Shape> out;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t end = spec.find(';', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string one = spec.substr(pos, end - pos);
    long long m = 0, n = 0, k = 0;
    char tail = 0;
    check(std::sscanf(one.c_str(), "%lld,%lld,%lld%c", &m, &n, &k, &tail) == 3 && m > 0 && n > 0 &&
              k > 0,
          "--shapes: '" + one + "' is not M,N,K with positive integers");
    out.push_back({one, m, n, k});
    pos = end + 1;
  }
  return out;
}

// Median wall time in seconds of fn() (followed by a synchronize), after one warm-up call.
double time_op(Backend& be, const std::function<void()>& fn, double min_seconds, int min_reps) {
  fn();
  be.synchronize();
  std::vector<double> times;
  double total = 0;
  while (static_cast<int>(times.size()) < min_reps || total < min_seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    be.synchronize();
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    times.push_back(t);
    total += t;
    if (times.size() >= 1000) break;
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Device memory filled from host data.
Buffer upload_random_bf16(Backend& be, int64_t n, Rng& rng) {
  std::vector<bf16> h(static_cast<size_t>(n));
  for (auto& v : h) v = float_to_bf16(static_cast<float>(rng.normal()));
  Buffer b = be.alloc(h.size() * 2);
  be.upload(b.data(), h.data(), h.size() * 2);
  return b;
}

struct Fp8Buffers {
  Buffer codes, scales;
  Fp8Matrix m;
};

Fp8Buffers alloc_fp8(Backend& be, int64_t rows, int64_t cols, ScaleBlock block) {
  Fp8Buffers f;
  f.codes = be.alloc(static_cast<size_t>(rows * cols));
  f.scales = be.alloc(static_cast<size_t>(scale_count(block, rows, cols)) * 4);
  f.m = Fp8Matrix{f.codes.as<uint8_t>(), f.scales.as<float>(), rows, cols, block, Fp8Format::e4m3};
  return f;
}

std::vector<std::unique_ptr<Backend>> backends_for(const std::string& choice) {
  std::vector<std::unique_ptr<Backend>> out;
  if (choice == "all" || choice == "cpu") out.push_back(make_cpu_backend());
  if (choice == "all") {
    if (cuda_module_status().usable) {
      out.push_back(make_backend(BackendChoice::cuda).backend);
    } else {
      std::printf("cuda: skipped: %s\n\n", cuda_module_status().why_not().c_str());
    }
  } else if (choice != "cpu") {
    out.push_back(make_backend(parse_backend_choice(choice)).backend);
  }
  return out;
}

double tflops(const Shape& s, double t) {
  return 2.0 * s.M * s.N * s.K / t / 1e12;
}

void bench_gemm(Backend& be, const std::vector<Shape>& shapes, double min_s) {
  const bool cpu = be.name() == "cpu";
  std::printf("backend %s: %s\n", be.name().c_str(), be.device().c_str());
  std::printf("%-20s %6s %6s %6s  %-6s %10s %10s %10s %10s %9s\n", "shape", "M", "N", "K", "gemm",
              cpu ? "f32 TF/s" : "", "bf16 TF/s", "fp8 TF/s", "fp8 ms", "fp8/best");
  Rng rng(1234);
  for (const auto& s : shapes) {
    // Operands of one linear layer: X [M,K], W [N,K], dY [M,N].
    Buffer x = upload_random_bf16(be, s.M * s.K, rng), w = upload_random_bf16(be, s.N * s.K, rng),
           dy = upload_random_bf16(be, s.M * s.N, rng);
    const Matrix X{x.data(), s.M, s.K, DType::bf16}, W{w.data(), s.N, s.K, DType::bf16},
        dY{dy.data(), s.M, s.N, DType::bf16};
    auto xq = alloc_fp8(be, s.M, s.K, ScaleBlock::row1x128);
    auto xtq = alloc_fp8(be, s.K, s.M, ScaleBlock::row1x128);
    auto wq = alloc_fp8(be, s.N, s.K, ScaleBlock::tile128x128);
    auto wtq = alloc_fp8(be, s.K, s.N, ScaleBlock::tile128x128);
    auto dyq = alloc_fp8(be, s.M, s.N, ScaleBlock::row1x128);
    auto dytq = alloc_fp8(be, s.N, s.M, ScaleBlock::row1x128);
    const QuantOptions opt;
    be.quantize_with_transpose(X, xq.m, xtq.m, opt, nullptr, nullptr);
    be.quantize(W, wq.m, opt, nullptr);
    be.transpose_fp8(wq.m, wtq.m);
    be.quantize_with_transpose(dY, dyq.m, dytq.m, opt, nullptr, nullptr);
    // Transposed BF16 operands for the BF16 dgrad/wgrad baselines (same TN call form).
    Buffer wt = upload_random_bf16(be, s.K * s.N, rng), xt = upload_random_bf16(be, s.K * s.M, rng),
           dyt = upload_random_bf16(be, s.N * s.M, rng);
    const Matrix Wt{wt.data(), s.K, s.N, DType::bf16}, Xt{xt.data(), s.K, s.M, DType::bf16},
        dYt{dyt.data(), s.N, s.M, DType::bf16};
    Buffer y = be.alloc(static_cast<size_t>(s.M * s.N) * 4), dx = be.alloc(s.M * s.K * 4),
           dw = be.alloc(static_cast<size_t>(s.N * s.K) * 4);
    // f32 copies for the CPU's FP32 baseline (what the FP8 emulation wraps).
    struct Op {
      const char* name;
      Matrix a, b, c;
      const Fp8Matrix *qa, *qb;
      float beta;
    };
    const Op ops[] = {
        {"fprop", X, W, {y.data(), s.M, s.N, DType::bf16}, &xq.m, &wq.m, 0.0f},
        {"dgrad", dY, Wt, {dx.data(), s.M, s.K, DType::bf16}, &dyq.m, &wtq.m, 0.0f},
        {"wgrad", dYt, Xt, {dw.data(), s.N, s.K, DType::f32}, &dytq.m, &xtq.m, 1.0f},
    };
    for (const auto& op : ops) {
      const Shape g{s.name, op.c.rows, op.c.cols, op.a.cols};
      double t_f32 = 0;
      if (cpu) {
        std::vector<float> a(static_cast<size_t>(op.a.rows * op.a.cols)),
            b(static_cast<size_t>(op.b.rows * op.b.cols)),
            c(static_cast<size_t>(op.c.rows * op.c.cols));
        const Matrix A{a.data(), op.a.rows, op.a.cols, DType::f32},
            B{b.data(), op.b.rows, op.b.cols, DType::f32},
            C{c.data(), op.c.rows, op.c.cols, DType::f32};
        t_f32 = time_op(
            be, [&] { be.gemm(A, B, C, 0.0f); }, min_s, 3);
      }
      const double t_bf16 = time_op(
          be, [&] { be.gemm(op.a, op.b, op.c, op.beta); }, min_s, 3);
      double t_fp8 = 0;
      if (auto why = be.gemm_fp8_unsupported(*op.qa, *op.qb, op.c)) {
        std::printf("%-20s %6lld %6lld %6lld  %-6s SKIP: %s\n", s.name.c_str(), (long long)g.M,
                    (long long)g.N, (long long)g.K, op.name, why->c_str());
        continue;
      }
      t_fp8 = time_op(
          be, [&] { be.gemm_fp8(*op.qa, *op.qb, op.c, op.beta); }, min_s, 3);
      const double best = cpu ? std::min(t_f32, t_bf16) : t_bf16;
      char f32col[16] = "";
      if (cpu) std::snprintf(f32col, sizeof f32col, "%10.3f", tflops(g, t_f32));
      std::printf("%-20s %6lld %6lld %6lld  %-6s %10s %10.3f %10.3f %10.3f %8.2fx\n",
                  s.name.c_str(), (long long)g.M, (long long)g.N, (long long)g.K, op.name, f32col,
                  tflops(g, t_bf16), tflops(g, t_fp8), t_fp8 * 1e3, best / t_fp8);
    }
  }
  std::printf(
      "fp8/best = time of the fastest baseline (%s) / time of the FP8 GEMM; > 1 is faster.\n\n",
      cpu ? "f32 sgemm or bf16" : "cuBLASLt bf16");
}

void bench_quant(Backend& be, const std::vector<std::pair<int64_t, int64_t>>& shapes,
                 double min_s) {
  std::printf("backend %s: %s\n", be.name().c_str(), be.device().c_str());
  std::printf("%-24s %6s %6s %10s %10s %9s\n", "op", "rows", "cols", "ms", "GB/s", "vs copy");
  Rng rng(99);
  for (auto [R, C] : shapes) {
    Buffer x = upload_random_bf16(be, R * C, rng);
    const Matrix X{x.data(), R, C, DType::bf16};
    Buffer copy_dst = be.alloc(static_cast<size_t>(R * C) * 2);
    Buffer out = be.alloc(static_cast<size_t>(R * C) * 2);
    auto q = alloc_fp8(be, R, C, ScaleBlock::row1x128);
    auto qt = alloc_fp8(be, C, R, ScaleBlock::row1x128);
    auto qw = alloc_fp8(be, R, C, ScaleBlock::tile128x128);
    const QuantOptions opt;
    const double bytes_copy = 2.0 * R * C * 2;  // read + write
    const double t_copy = time_op(
        be, [&] { be.copy(copy_dst.data(), x.data(), static_cast<size_t>(R * C) * 2); }, min_s, 3);
    const double copy_gbs = bytes_copy / t_copy / 1e9;
    auto row = [&](const char* name, double bytes, const std::function<void()>& fn) {
      const double t = time_op(be, fn, min_s, 3);
      const double gbs = bytes / t / 1e9;
      std::printf("%-24s %6lld %6lld %10.3f %10.1f %8.0f%%\n", name, (long long)R, (long long)C,
                  t * 1e3, gbs, 100.0 * gbs / copy_gbs);
    };
    std::printf("%-24s %6lld %6lld %10.3f %10.1f %8s\n", "copy bf16 (baseline)", (long long)R,
                (long long)C, t_copy * 1e3, copy_gbs, "100%");
    const double scales = 4.0 * R * blocks_of(C);
    row("quantize 1x128", 2.0 * R * C + R * C + scales, [&] { be.quantize(X, q.m, opt, nullptr); });
    row("quantize 128x128", 2.0 * R * C + R * C, [&] { be.quantize(X, qw.m, opt, nullptr); });
    row("quantize x and x^T", 2.0 * R * C + 2.0 * R * C + 2 * scales,
        [&] { be.quantize_with_transpose(X, q.m, qt.m, opt, nullptr, nullptr); });
    row("dequantize 1x128", R * C + scales + 2.0 * R * C, [&] {
      be.dequantize(q.m, Matrix{out.data(), R, C, DType::bf16});
    });
  }
  std::printf(
      "GB/s counts bytes read + written; 'vs copy' is against a plain copy of the BF16 "
      "input measured in the same run.\n\n");
}

// Decode throughput of a random-init Qwen3-shaped model: BF16, FP8 linears, FP8 linears + FP8
// KV cache, in one run.
void bench_rollout(Backend& be, int64_t batch, int64_t prompt_len, int64_t new_tokens, bool big) {
  ModelConfig cfg;
  if (big) {  // Qwen3-0.6B
    cfg.hidden_size = 1024;
    cfg.num_hidden_layers = 28;
    cfg.num_attention_heads = 16;
    cfg.num_key_value_heads = 8;
    cfg.head_dim = 128;
    cfg.intermediate_size = 3072;
    cfg.vocab_size = 151936;
    cfg.max_position_embeddings = 40960;
  } else {  // small enough for a 2-core CPU
    cfg.hidden_size = 256;
    cfg.num_hidden_layers = 4;
    cfg.num_attention_heads = 4;
    cfg.num_key_value_heads = 2;
    cfg.head_dim = 64;
    cfg.intermediate_size = 768;
    cfg.vocab_size = 512;
    cfg.max_position_embeddings = 4096;
  }
  std::printf(
      "backend %s: %s\nmodel: hidden %lld, %lld layers, %lld/%lld heads of %lld, vocab %lld;"
      " batch %lld, prompt %lld, %lld new tokens\n",
      be.name().c_str(), be.device().c_str(), (long long)cfg.hidden_size,
      (long long)cfg.num_hidden_layers, (long long)cfg.num_attention_heads,
      (long long)cfg.num_key_value_heads, (long long)cfg.head_dim, (long long)cfg.vocab_size,
      (long long)batch, (long long)prompt_len, (long long)new_tokens);
  std::printf("%-26s %12s %12s %12s %10s\n", "mode", "prefill s", "decode s", "decode tok/s",
              "vs bf16");
  Rng rng(5);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(batch));
  for (auto& p : prompts)
    for (int64_t t = 0; t < prompt_len; ++t)
      p.push_back(static_cast<int32_t>(rng.next() % cfg.vocab_size));
  SamplingParams sp;
  sp.max_new_tokens = new_tokens;
  sp.seed = 1;
  struct Mode {
    const char* name;
    Precision p;
    KvDType kv;
  };
  const Mode modes[] = {{"bf16 linears, bf16 KV", Precision::bf16, KvDType::bf16},
                        {"fp8 linears, bf16 KV", Precision::fp8, KvDType::bf16},
                        {"fp8 linears, fp8 KV", Precision::fp8, KvDType::fp8}};
  double base = 0;
  for (const auto& m : modes) {
    Qwen3Model model(be, cfg, PrecisionMap(cfg.num_hidden_layers, m.p), 7);
    Generator gen(model, {m.kv, 0});
    if (m.kv == KvDType::fp8) gen.calibrate({prompts.front()});
    gen.generate(prompts, [&] {
      auto w = sp;
      w.max_new_tokens = 2;
      return w;
    }());  // warm-up
    gen.generate(prompts, sp);
    const auto& st = gen.last_stats();
    // Decode tokens: all but the first token of each sequence (that one comes from prefill).
    const double tps = static_cast<double>(st.generated_tokens - st.sequences) / st.decode_seconds;
    if (base == 0) base = tps;
    std::printf("%-26s %12.3f %12.3f %12.1f %9.2fx\n", m.name, st.prefill_seconds,
                st.decode_seconds, tps, tps / base);
  }
  std::printf("\n");
}

#if defined(FP8RL_HAVE_IPC)
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A client's SUB socket connected to the bench's PUB socket, drained on its own thread (as the
// studio's receive thread does), counting the step and histogram messages it receives.
class DrainingSubscriber {
 public:
  // The topic of the connection probes (not counted as received).
  static constexpr const char* kProbeTopic = "bench-probe";

  DrainingSubscriber(void* ctx, const std::string& endpoint) {
    sub_ = zmq_socket(ctx, ZMQ_SUB);
    check(sub_ != nullptr, std::string("zmq_socket: ") + zmq_strerror(zmq_errno()));
    const int linger = 0;
    zmq_setsockopt(sub_, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(sub_, ZMQ_SUBSCRIBE, "", 0);
    if (zmq_connect(sub_, endpoint.c_str()) != 0) {
      zmq_close(sub_);
      throw Error("cannot connect a subscriber to " + endpoint + ": " + zmq_strerror(zmq_errno()));
    }
    thread_ = std::thread([this] { drain(); });
  }
  ~DrainingSubscriber() {
    stop_ = true;
    thread_.join();
    zmq_close(sub_);
  }
  DrainingSubscriber(const DrainingSubscriber&) = delete;
  DrainingSubscriber& operator=(const DrainingSubscriber&) = delete;

  // Whether a probe has arrived (the subscription reached the PUB socket).
  bool connected() const { return probes_ > 0; }
  // Messages received other than probes.
  int64_t received() const { return received_; }

 private:
  void drain() {
    zmq_msg_t m;
    while (!stop_) {
      zmq_pollitem_t items[] = {{sub_, 0, ZMQ_POLLIN, 0}};
      if (zmq_poll(items, 1, 20) <= 0) continue;
      std::string topic;
      int more = 0;
      do {  // one [topic][payload] message
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sub_, ZMQ_DONTWAIT) < 0) {
          zmq_msg_close(&m);
          break;
        }
        if (topic.empty())
          topic.assign(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
        more = zmq_msg_more(&m);
        zmq_msg_close(&m);
      } while (more);
      if (topic == kProbeTopic)
        ++probes_;
      else if (!topic.empty())
        ++received_;
    }
  }

  void* sub_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> probes_{0}, received_{0};
};

// Removes a directory tree when it goes out of scope.
struct TempDir {
  std::filesystem::path path;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// Runs the demo preset's RL steps as a worker does (GrpoRun::next), and after each the worker's
// telemetry: RunStore::record_step into a temporary database, encode_step_telemetry and
// send_telemetry on a PUB socket with a subscriber connected and draining. Telemetry is timed
// serially here; in a worker the sending happens on the serving thread instead.
void bench_telemetry(Backend& be, int64_t warmup, int64_t steps) {
  RunConfig cfg = RunConfig::load("demo", "", {"sft.steps=0"});
  TempDir tmp{std::filesystem::temp_directory_path() /
              ("fp8rl-bench-telemetry-" + std::to_string(getpid()))};
  std::filesystem::create_directories(tmp.path);
  RunStore store((tmp.path / "runs.sqlite").string());
  GrpoRun run(cfg, be);
  const std::string precision = run.model().precision().summary();
  const int64_t run_id = store.create_run("bench telemetry", "demo", cfg.doc, precision);

  void* ctx = zmq_ctx_new();
  struct ContextGuard {
    void* ctx;
    ~ContextGuard() { zmq_ctx_term(ctx); }
  } ctx_guard{ctx};
  void* pub = zmq_socket(ctx, ZMQ_PUB);
  check(pub != nullptr, std::string("zmq_socket: ") + zmq_strerror(zmq_errno()));
  struct SocketGuard {
    void* s;
    ~SocketGuard() { zmq_close(s); }
  } pub_guard{pub};
  const int linger = 0;
  zmq_setsockopt(pub, ZMQ_LINGER, &linger, sizeof linger);
  const std::string endpoint =
      "ipc://@fp8rl-bench-" + std::to_string(getpid()) + "-telemetry";  // as a worker's default
  if (zmq_bind(pub, endpoint.c_str()) != 0)
    throw Error("cannot bind " + endpoint + ": " + zmq_strerror(zmq_errno()));
  DrainingSubscriber sub(ctx, endpoint);
  // PUB drops everything until the subscription has arrived: probe until it has.
  const auto t_connect = std::chrono::steady_clock::now();
  while (!sub.connected()) {
    check(seconds_since(t_connect) < 10, "the subscriber did not connect within 10 s");
    zmq_send(pub, DrainingSubscriber::kProbeTopic, std::strlen(DrainingSubscriber::kProbeTopic),
             ZMQ_DONTWAIT);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  std::printf("backend %s: %s\n", be.name().c_str(), be.device().c_str());
  std::printf(
      "demo preset: %lld RL steps timed after %lld warm-up steps (%lld prompts x %lld responses, "
      "validation every %lld steps)\n",
      static_cast<long long>(steps), static_cast<long long>(warmup),
      static_cast<long long>(cfg.prompts_per_step), static_cast<long long>(cfg.group_size),
      static_cast<long long>(cfg.validation_every));
  struct Costs {
    double step = 0, store = 0, encode = 0, send = 0, total = 0;
  };
  Costs sum, worst;
  int64_t sent = 0;
  size_t bytes = 0;
  for (int64_t i = 0; i < warmup + steps; ++i) {
    check(!run.finished(), "the demo preset ran out of steps");
    Costs c;
    auto t0 = std::chrono::steady_clock::now();
    const StepRecord r = run.next();
    c.step = seconds_since(t0);
    // The worker's order: store, encode, send.
    t0 = std::chrono::steady_clock::now();
    store.record_step(run_id, r);
    c.store = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const std::vector<ipc::TelemetryMessage> messages =
        ipc::encode_step_telemetry(r, run_id, precision);
    c.encode = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const size_t b = ipc::send_telemetry(pub, messages);
    c.send = seconds_since(t0);
    c.total = c.store + c.encode + c.send;
    sent += static_cast<int64_t>(messages.size());
    if (i < warmup) continue;
    bytes += b;
    sum.step += c.step, sum.store += c.store, sum.encode += c.encode, sum.send += c.send;
    sum.total += c.total;
    worst.step = std::max(worst.step, c.step), worst.store = std::max(worst.store, c.store);
    worst.encode = std::max(worst.encode, c.encode), worst.send = std::max(worst.send, c.send);
    worst.total = std::max(worst.total, c.total);
  }
  // Everything sent should arrive (the subscriber keeps up; PUB drops only beyond its HWM).
  const auto t_drain = std::chrono::steady_clock::now();
  while (sub.received() < sent && seconds_since(t_drain) < 5)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));

  const double n = static_cast<double>(steps);
  const double per_step_messages = static_cast<double>(sent) / static_cast<double>(warmup + steps);
  std::printf("%-44s %10s %10s %10s\n", "per RL step", "mean ms", "max ms", "vs step");
  auto row = [&](const std::string& name, double total, double max) {
    std::printf("%-44s %10.3f %10.3f %9.2f%%\n", name.c_str(), total / n * 1e3, max * 1e3,
                100.0 * total / sum.step);
  };
  row("step: GrpoRun::next (baseline)", sum.step, worst.step);
  row("telemetry: store (RunStore::record_step)", sum.store, worst.store);
  char name[64];
  std::snprintf(name, sizeof name, "telemetry: encode JSON (%.0f messages)", per_step_messages);
  row(name, sum.encode, worst.encode);
  std::snprintf(name, sizeof name, "telemetry: send on PUB (%.1f KB)",
                static_cast<double>(bytes) / n / 1024.0);
  row(name, sum.send, worst.send);
  row("telemetry: total", sum.total, worst.total);
  std::printf("subscriber received %lld of %lld messages\n", static_cast<long long>(sub.received()),
              static_cast<long long>(sent));
  const double overhead = 100.0 * sum.total / sum.step;
  std::printf("telemetry overhead: %.3f%% of the step time: %s (target < 1%%)\n\n", overhead,
              overhead < 1.0 ? "PASS" : "FAIL");
}
#endif

}  // namespace

int cmd_bench(const std::vector<std::string>& args) {
  const Args a(args,
               {"backend", "shapes", "seconds", "batch", "prompt-len", "new-tokens", "model",
                "steps", "warmup"},
               {"help"});
  const auto& pos = a.positional();
  if (a.flag("help") || pos.size() != 1 ||
      (pos[0] != "gemm" && pos[0] != "quant" && pos[0] != "rollout" && pos[0] != "telemetry")) {
    std::fputs(
        "usage: fp8rl bench gemm|quant|rollout|telemetry [--backend all|cpu|cuda|auto]\n"
        "         [--shapes M,N,K;...] [--seconds S] [--batch B] [--prompt-len P]\n"
        "         [--new-tokens N] [--model small|qwen3-0.6b] [--steps N] [--warmup W]\n\n"
        "gemm: BF16 vs block-scaled FP8 fprop, dgrad and wgrad (TFLOP/s and the ratio to the\n"
        "      fastest baseline; on the CPU the FP32 sgemm that the FP8 emulation wraps is a\n"
        "      baseline too). Default shapes: 8192^3 and 8B-model linears on GPUs, 1024^3 and\n"
        "      0.6B-model linears on the CPU.\n"
        "quant: quantization and dequantization GB/s against a plain copy in the same run.\n"
        "rollout: decode tokens/s of a random Qwen3-shaped model (default: small on the CPU,\n"
        "      Qwen3-0.6B on GPUs) with BF16, FP8 linears, FP8 linears + FP8 KV cache.\n"
        "telemetry: what a worker's telemetry costs per RL step of the demo preset (run-store\n"
        "      write, JSON encoding, sending on a PUB socket to a draining subscriber) against\n"
        "      the step itself; W warm-up steps (default 2), then N timed (default 20).\n"
        "      Target: below 1% of the step time.\n",
        a.flag("help") ? stdout : stderr);
    return a.flag("help") ? 0 : 2;
  }
  const double min_s = std::stod(a.get("seconds", "0.3"));
  const int64_t steps = a.get_int("steps", 20), warmup = a.get_int("warmup", 2);
  if (pos[0] == "telemetry") {
    check(steps > 0 && warmup >= 0, "--steps must be positive and --warmup not negative");
#if !defined(FP8RL_HAVE_IPC)
    throw Error("this build has no ZeroMQ: worker telemetry cannot be measured");
#endif
  }
  for (auto& be : backends_for(a.get("backend", "all"))) {
    const bool cpu = be->name() == "cpu";
    if (pos[0] == "telemetry") {
#if defined(FP8RL_HAVE_IPC)
      bench_telemetry(*be, warmup, steps);
#endif
    } else if (pos[0] == "rollout") {
      const std::string model = a.get("model", cpu ? "small" : "qwen3-0.6b");
      check(model == "small" || model == "qwen3-0.6b", "--model must be small or qwen3-0.6b");
      bench_rollout(*be, a.get_int("batch", cpu ? 16 : 64), a.get_int("prompt-len", cpu ? 32 : 128),
                    a.get_int("new-tokens", cpu ? 32 : 128), model == "qwen3-0.6b");
    } else if (pos[0] == "gemm") {
      const std::string spec = a.get("shapes", "");
      bench_gemm(*be, spec.empty() ? (cpu ? cpu_shapes() : gpu_shapes()) : parse_shapes(spec),
                 min_s);
    } else {
      std::vector<std::pair<int64_t, int64_t>> shapes;
      if (cpu)
        shapes = {{1024, 1024}, {2048, 4096}};
      else
        shapes = {{8192, 4096}, {8192, 12288}, {16384, 16384}};
      bench_quant(*be, shapes, min_s);
    }
  }
  return 0;
}

}  // namespace fp8rl::cli
