// fp8rl convert: a checkpoint to the Hugging Face block-FP8 format (what vLLM and SGLang serve,
// what Qwen3-FP8 ships in) or back to BF16, with our quantizer: the one the trainer and the
// rollout use, so the exported codes are the ones a run generated with.
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "args.hpp"
#include "backend/backend_registry.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "model/checkpoint.hpp"
#include "model/fp8_checkpoint.hpp"
#include "rl/run_config.hpp"

namespace fp8rl::cli {
namespace {

constexpr const char* kUsage = R"(usage: fp8rl convert --checkpoint IN --to fp8|bf16 --output OUT
         [--keep-bf16 PATTERN...] [--max-shard-size BYTES]

--to fp8   writes the Hugging Face block-FP8 format (Qwen3-FP8 / DeepSeek-V3 layout; vLLM and
           SGLang load it): linear weights as F8_E4M3 with a weight_scale_inv per 128x128 tile,
           everything else BF16. The codes are our quantizer's (a run's checkpoint exports the
           tiles the run generated with; an FP8 checkpoint's own tiles are kept byte for byte).
           A run's checkpoint (trainer_state.json) keeps the linears its precision map ran in
           bf16, and uses its scale format (fp32 or pow2).
--to bf16  writes every tensor in BF16 (FP8 weights dequantized), without quantization_config.
--keep-bf16 PATTERN...   modules kept in BF16 (listed in modules_to_not_convert): globs on
           module names, '*' matching anything, e.g. 'model.layers.0.*' '*.down_proj'. Several
           patterns may follow one --keep-bf16, or be separated by commas.
--max-shard-size BYTES   shard above this size (suffixes KB, MB, GB, KiB, MiB, GiB; default
           5GB): model-00001-of-0000N.safetensors + model.safetensors.index.json.

Other files of IN (tokenizer, generation config) are copied to OUT.
)";

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// Takes the --keep-bf16 patterns out of args: Args keeps one value per option, and this one
// takes every word up to the next option.
std::vector<std::string> take_keep_patterns(std::vector<std::string>& args) {
  std::vector<std::string> patterns;
  for (size_t i = 0; i < args.size();) {
    if (args[i].rfind("--keep-bf16=", 0) == 0) {
      for (auto& p : split_commas(args[i].substr(12))) patterns.push_back(p);
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    if (args[i] != "--keep-bf16") {
      ++i;
      continue;
    }
    size_t j = i + 1;
    const size_t before = patterns.size();
    for (; j < args.size() && args[j].rfind("--", 0) != 0; ++j)
      for (auto& p : split_commas(args[j])) patterns.push_back(p);
    check(patterns.size() > before, "option --keep-bf16 needs at least one pattern");
    args.erase(args.begin() + static_cast<std::ptrdiff_t>(i),
               args.begin() + static_cast<std::ptrdiff_t>(j));
  }
  return patterns;
}

// "5000000000", "500MB", "2GiB" → bytes.
uint64_t parse_bytes(const std::string& s) {
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  std::string unit = s.substr(digits);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::pair<const char*, uint64_t> units[] = {{"", 1},
                                                    {"B", 1},
                                                    {"KB", 1000ull},
                                                    {"MB", 1000000ull},
                                                    {"GB", 1000000000ull},
                                                    {"KIB", 1ull << 10},
                                                    {"MIB", 1ull << 20},
                                                    {"GIB", 1ull << 30}};
  uint64_t mult = 0;
  for (const auto& [name, m] : units)
    if (unit == name) mult = m;
  uint64_t v = 0;
  try {
    v = digits ? std::stoull(s.substr(0, digits)) : 0;
  } catch (const std::exception&) {
    v = 0;
  }
  check(digits > 0 && mult > 0 && v > 0,
        "--max-shard-size: '" + s + "' is not a positive size (e.g. 5GB, 500MB, 2GiB, 1000000)");
  return v * mult;
}

struct RunPrecision {
  PrecisionMap map;
  bool pow2_scales = false;
};

// The precision map and scale format of the run that wrote dir (trainer_state.json's "config");
// nullopt when dir is not a run's checkpoint.
std::optional<RunPrecision> run_precision(const std::string& dir, const ModelConfig& model) {
  const std::string path = dir + "/trainer_state.json";
  if (!std::filesystem::exists(path)) return std::nullopt;
  const Json st = read_json_file(path);
  if (!st.is_object() || !st.contains("config")) return std::nullopt;
  try {
    const RunConfig rc = RunConfig::from_json(st.at("config"));
    return RunPrecision{rc.precision_map(model), rc.pow2_scales};
  } catch (const Error& e) {
    throw Error(path + ": the run's config: " + e.message());
  }
}

// Copies the files beside the weights (tokenizer files, generation_config.json, ...): a
// converted checkpoint is used without its source. Returns how many.
int64_t copy_side_files(const std::string& in, const std::string& out) {
  int64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(in)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    // Weights, the index, the config (rewritten), training state (not carried over) and the
    // source's checksums (they describe its files, not these).
    if (name == "config.json" || name == "trainer_state.json" || name == "checksums.json" ||
        name == "model.safetensors.index.json" || name.ends_with(".safetensors") ||
        name.ends_with(".tmp"))
      continue;
    std::filesystem::copy_file(e.path(), std::filesystem::path(out) / name,
                               std::filesystem::copy_options::overwrite_existing);
    ++n;
  }
  return n;
}

}  // namespace

int cmd_convert(const std::vector<std::string>& args) {
  std::vector<std::string> rest = args;
  const std::vector<std::string> keep = take_keep_patterns(rest);
  const Args a(rest, {"checkpoint", "to", "output", "max-shard-size"}, {"help"});
  const std::string in = a.get("checkpoint", ""), out = a.get("output", ""), to = a.get("to", "");
  if (a.flag("help")) return print_help(kUsage);
  need(!in.empty(), "needs --checkpoint DIR, the checkpoint to convert");
  need(!to.empty(), "needs --to fp8 or --to bf16");
  need(!out.empty(), "needs --output DIR, where the converted checkpoint goes");
  need(a.positional().empty(), "unexpected argument '" +
                                   (a.positional().empty() ? "" : a.positional().front()) +
                                   "' (patterns follow --keep-bf16)");
  check(to == "fp8" || to == "bf16", "--to: '" + to + "' is not fp8 or bf16");
  check(keep.empty() || to == "fp8", "--keep-bf16 applies to --to fp8");
  check(std::filesystem::is_directory(in), "--checkpoint: " + in + " is not a directory");
  std::error_code ec;
  check(!std::filesystem::equivalent(in, out, ec),
        "--output must differ from --checkpoint (the weights are rewritten)");
  const uint64_t max_shard = parse_bytes(a.get("max-shard-size", "5GB"));

  const Json source_config = read_json_file(in + "/config.json");
  const ModelConfig cfg = read_checkpoint_config(in);
  // Quantization is bit-identical on every backend; the CPU needs no device.
  auto cpu = make_cpu_backend();
  ExportSummary s;
  if (to == "fp8") {
    PrecisionMap pm = uniform_precision(cfg, Precision::fp8);
    QuantOptions qopt;
    if (const auto run = run_precision(in, cfg)) {
      qopt.pow2_scales = run->pow2_scales;
      int64_t fp8 = 0, bf16 = 0;
      for (const LinearSlot& slot : run->map.linears())
        if (!slot.router) (run->map.get(slot) == Precision::fp8 ? fp8 : bf16) += 1;
      if (fp8 > 0 && bf16 > 0) {
        // The run computed these in BF16: export them as it ran them.
        for (const LinearSlot& slot : run->map.linears())
          if (!slot.router && run->map.get(slot) != Precision::fp8) pm.set(slot, Precision::bf16);
        std::fprintf(stderr, "fp8rl convert: the run's precision map keeps %lld linears in BF16\n",
                     static_cast<long long>(bf16));
      } else if (fp8 == 0) {
        std::fprintf(stderr,
                     "fp8rl convert: the run trained without FP8 (%s): every linear is quantized\n",
                     run->map.summary().c_str());
      }
    }
    auto model = load_checkpoint(*cpu, in, pm, qopt);
    Fp8ExportOptions eo;
    eo.keep_bf16 = keep;
    eo.max_shard_bytes = max_shard;
    eo.base_config = source_config;
    s = save_fp8_checkpoint(out, *model, eo);
  } else {
    auto model = load_checkpoint(*cpu, in, uniform_precision(cfg, Precision::bf16));
    s = save_bf16_checkpoint(out, *model, max_shard, source_config);
  }
  const int64_t copied = copy_side_files(in, out);
  for (const auto& w : s.split_fused)
    std::fprintf(stderr,
                 "fp8rl convert: warning: %s mixes FP8 and BF16; vLLM and SGLang fuse these "
                 "projections and need them in one precision\n",
                 w.c_str());
  auto plural = [](int64_t n) { return n == 1 ? "" : "s"; };
  std::printf(
      "wrote %s: %lld tensors (%lld linear%s FP8, %lld BF16), %llu bytes in %lld file%s, "
      "%lld other file%s copied\n",
      out.c_str(), static_cast<long long>(s.tensors), static_cast<long long>(s.fp8_linears),
      plural(s.fp8_linears), static_cast<long long>(s.bf16_linears),
      static_cast<unsigned long long>(s.bytes), static_cast<long long>(s.files), plural(s.files),
      static_cast<long long>(copied), plural(copied));
  return 0;
}

}  // namespace fp8rl::cli
