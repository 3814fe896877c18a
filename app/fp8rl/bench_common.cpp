// What the bench families share: timing, backends, model shapes, option parsing, --json.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>

#include "args.hpp"
#include "backend/backend_registry.hpp"
#include "bench.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/version.hpp"

namespace fp8rl::cli::bench {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double time_op(Backend& be, const std::function<void()>& fn, double min_seconds, int min_reps) {
  fn();
  be.synchronize();
  std::vector<double> times;
  double total = 0;
  while (static_cast<int>(times.size()) < min_reps || total < min_seconds) {
    const auto t0 = Clock::now();
    fn();
    be.synchronize();
    const double t = seconds_since(t0);
    times.push_back(t);
    total += t;
    if (times.size() >= 1000) break;
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

Buffer upload_random_bf16(Backend& be, int64_t n, Rng& rng) {
  // Each element picks one of 4096 normal draws with 12 of the generator's bits (five per draw):
  // the GPU shapes reach 10^9 elements, where a Box-Muller draw per element took tens of seconds
  // of host time, this about one.
  std::array<bf16, 4096> table;
  for (auto& v : table) v = float_to_bf16(static_cast<float>(rng.normal()));
  std::vector<bf16> h(static_cast<size_t>(n));
  for (size_t i = 0; i < h.size();) {
    uint64_t bits = rng.next();
    for (int k = 0; k < 5 && i < h.size(); ++k, bits >>= 12) h[i++] = table[bits & 4095];
  }
  Buffer b = be.alloc(h.size() * 2);
  be.upload(b.data(), h.data(), h.size() * 2);
  return b;
}

std::vector<std::unique_ptr<Backend>> backends_for(const std::string& choice) {
  check(choice == "all" || choice == "cpu" || choice == "cuda" || choice == "auto",
        "--backend '" + choice + "' is not one of: all, cpu, cuda, auto");
  std::vector<std::unique_ptr<Backend>> out;
  if (choice == "all" || choice == "cpu") out.push_back(make_cpu_backend());
  if (choice == "all") {
    if (cuda_module_status().usable) {
      out.push_back(make_backend(BackendChoice::cuda).backend);
    } else {
      std::printf("cuda: skipped: %s\n\n", cuda_module_status().why_not().c_str());
    }
  } else if (choice != "cpu") {
    auto sel = make_backend(parse_backend_choice(choice));
    if (!sel.fallback_reason.empty())
      std::printf("auto: using the CPU (%s)\n\n", sel.fallback_reason.c_str());
    out.push_back(std::move(sel.backend));
  }
  return out;
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"small",    "qwen3-0.6b", "qwen3-1.7b",
                                                 "qwen3-8b", "small-mla",  "moonlight-mla"};
  return names;
}

ModelConfig model_shape(const std::string& name) {
  ModelConfig cfg;
  if (name == "small") {  // small enough for a 2-core CPU
    cfg.hidden_size = 256;
    cfg.num_hidden_layers = 4;
    cfg.num_attention_heads = 4;
    cfg.num_key_value_heads = 2;
    cfg.head_dim = 64;
    cfg.intermediate_size = 768;
    cfg.vocab_size = 512;
    cfg.max_position_embeddings = 4096;
  } else if (name == "qwen3-0.6b" || name == "qwen3-1.7b") {
    const bool small = name == "qwen3-0.6b";
    cfg.hidden_size = small ? 1024 : 2048;
    cfg.num_hidden_layers = 28;
    cfg.num_attention_heads = 16;
    cfg.num_key_value_heads = 8;
    cfg.head_dim = 128;
    cfg.intermediate_size = small ? 3072 : 6144;
    cfg.vocab_size = 151936;
    cfg.max_position_embeddings = 40960;
    cfg.tie_word_embeddings = true;
  } else if (name == "qwen3-8b") {  // 36 layers: for kernel shapes (bench rollout's table)
    cfg.hidden_size = 4096;
    cfg.num_hidden_layers = 36;
    cfg.num_attention_heads = 32;
    cfg.num_key_value_heads = 8;
    cfg.head_dim = 128;
    cfg.intermediate_size = 12288;
    cfg.vocab_size = 151936;
    cfg.max_position_embeddings = 40960;
    cfg.tie_word_embeddings = false;
  } else if (name == "small-mla" || name == "moonlight-mla") {
    // Latent attention (DeepSeek-V3's family) with dense MLPs: "moonlight-mla" is
    // Moonlight-16B-A3B's attention and its dense first layer's MLP in all 27 layers (its
    // decode cost without the experts); "small-mla" the small shape with a latent of 128.
    const bool small = name == "small-mla";
    cfg.family = "deepseek_v3";
    cfg.qk_norm = false;
    cfg.hidden_size = small ? 256 : 2048;
    cfg.num_hidden_layers = small ? 4 : 27;
    cfg.num_attention_heads = cfg.num_key_value_heads = small ? 4 : 16;
    cfg.mla.kv_lora_rank = small ? 128 : 512;
    cfg.mla.qk_nope_head_dim = small ? 64 : 128;
    cfg.mla.qk_rope_head_dim = small ? 32 : 64;
    cfg.mla.v_head_dim = small ? 64 : 128;
    cfg.head_dim = cfg.mla.qk_rope_head_dim;
    cfg.intermediate_size = small ? 768 : 11264;
    cfg.vocab_size = small ? 512 : 163840;
    cfg.max_position_embeddings = small ? 4096 : 8192;
    cfg.rope_theta = 50000;
  } else {
    std::string allowed;
    for (const auto& n : model_names()) allowed += (allowed.empty() ? "" : ", ") + n;
    throw Error("--model '" + name + "' is not one of: " + allowed);
  }
  cfg.validate();
  return cfg;
}

std::string describe(const ModelConfig& c) {
  char buf[256];
  if (c.mla.enabled()) {
    std::snprintf(
        buf, sizeof buf,
        "hidden %lld, %lld layers, %lld heads of latent attention (latent %lld, "
        "%lld + %lld RoPE, v %lld), intermediate %lld, vocab %lld",
        static_cast<long long>(c.hidden_size), static_cast<long long>(c.num_hidden_layers),
        static_cast<long long>(c.num_attention_heads), static_cast<long long>(c.mla.kv_lora_rank),
        static_cast<long long>(c.mla.qk_nope_head_dim),
        static_cast<long long>(c.mla.qk_rope_head_dim), static_cast<long long>(c.mla.v_head_dim),
        static_cast<long long>(c.intermediate_size), static_cast<long long>(c.vocab_size));
    return buf;
  }
  std::snprintf(buf, sizeof buf,
                "hidden %lld, %lld layers, %lld/%lld heads of %lld, intermediate %lld, vocab %lld",
                static_cast<long long>(c.hidden_size), static_cast<long long>(c.num_hidden_layers),
                static_cast<long long>(c.num_attention_heads),
                static_cast<long long>(c.num_key_value_heads), static_cast<long long>(c.head_dim),
                static_cast<long long>(c.intermediate_size), static_cast<long long>(c.vocab_size));
  return buf;
}

int64_t integer_option(const std::string& text, const std::string& option, int64_t min) {
  long long v = 0;
  check(parse_integer(text, &v) && v >= min, "option --" + option + " needs a " +
                                                 (min > 0 ? "positive" : "non-negative") +
                                                 " integer, got '" + text + "'");
  return v;
}

int64_t positive_option(const std::string& text, const std::string& option) {
  return integer_option(text, option, 1);
}

std::vector<int64_t> parse_positive_list(const std::string& text, const std::string& option) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (true) {
    const size_t end = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    long long v = 0;
    check(parse_integer(item, &v) && v > 0,
          "option --" + option + ": '" + item + "' in '" + text +
              "' is not a positive integer (give one or a comma list, e.g. 64,256)");
    out.push_back(v);
    if (end == text.size()) break;
    pos = end + 1;
  }
  return out;
}

double seconds_option(const std::string& text, const std::string& option) {
  double v = -1;
  check(parse_number(text, &v) && std::isfinite(v) && v >= 0,
        "option --" + option + " needs a number of seconds ≥ 0, got '" + text + "'");
  return v;
}

Json number(double v) {
  return std::isfinite(v) ? Json(v) : Json();
}

Json backend_json(Backend& be) {
  Json j;
  j["backend"] = be.name();
  j["device"] = be.device();
  // The kernel choices in effect (FP8RL_KERNEL_OPTIONS changes them for a whole run).
  const auto options = be.kernel_options();
  if (!options.empty()) {
    Json o(Json::Object{});
    for (const auto& [name, value] : options) o[name] = value;
    j["kernel_options"] = o;
  }
  return j;
}

void write_json(const std::string& path, const std::string& bench, const Json::Array& runs) {
  Json doc;
  doc["bench"] = bench;
  doc["version"] = std::string(FP8RL_VERSION) + " (" + FP8RL_GIT_DESCRIBE + ")";
  doc["runs"] = Json(runs);
  std::ofstream out(path, std::ios::trunc);
  check(out.good(), "--json: cannot write " + path);
  out << doc.dump(2) << "\n";
  out.close();
  check(out.good(), "--json: writing " + path + " failed");
}

}  // namespace fp8rl::cli::bench
