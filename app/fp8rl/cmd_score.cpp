// fp8rl score: per-token log-probabilities of a token sequence under a checkpoint, as JSON —
// the way to check this model against another implementation.
// fp8rl init: writes a randomly initialised checkpoint from a Hugging Face config.json.
#include <cstdio>
#include <sstream>

#include "args.hpp"
#include "backend/backend_registry.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "model/checkpoint.hpp"

namespace fp8rl::cli {
std::vector<int32_t> parse_token_ids(const std::string& s, const std::string& option) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    long long v = -1;
    check(parse_integer(item, &v) && v >= 0 && v < (1LL << 31),
          option + ": '" + item + "' is not a non-negative integer");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

int cmd_score(const std::vector<std::string>& args) {
  const Args a(args, {"checkpoint", "model", "token-ids", "precision", "backend", "temperature"},
               {"help"});
  const std::string dir = a.get("checkpoint", a.get("model", ""));
  if (a.flag("help"))
    return print_help(
        "usage: fp8rl score (--checkpoint DIR | --model DIR) --token-ids 1,2,3,...\n"
        "                   [--precision fp32|bf16|fp8]\n"
        "                   [--backend auto|cpu|cuda] [--temperature T]\n\n"
        "Prints one JSON object: {\"token_ids\": [...], \"logprobs\": [...], ...} where\n"
        "logprobs[i] = log p(token_ids[i+1] | token_ids[0..i]) (so one fewer than the ids).\n"
        "Default precision: fp32 on the CPU, bf16 on CUDA.\n");
  need(!dir.empty(), "needs a model: --checkpoint DIR or --model DIR");
  need(!a.get("token-ids", "").empty(), "needs --token-ids 1,2,3,..., the tokens to score");
  a.max_positional(0);
  const auto ids = parse_token_ids(a.get("token-ids", ""));
  check(ids.size() >= 2, "--token-ids: need at least two tokens to score");
  const double temperature = a.get_number("temperature", 1);
  check(temperature > 0, "--temperature must be positive");
  auto sel = make_backend(parse_backend_choice(a.get("backend", "auto")));
  const Precision p =
      parse_precision(a.get("precision", sel.backend->name() == "cpu" ? "fp32" : "bf16"));
  const ModelConfig cfg = read_checkpoint_config(dir);
  auto model = load_checkpoint(*sel.backend, dir, uniform_precision(cfg, p));
  const int64_t T = static_cast<int64_t>(ids.size()) - 1;
  std::vector<int32_t> in(ids.begin(), ids.end() - 1), targets(ids.begin() + 1, ids.end());
  const auto r = model->forward(in, targets, 1, T, static_cast<float>(1.0 / temperature), false);
  Json out;
  Json::Array tok, lp;
  for (int32_t id : ids) tok.push_back(Json(static_cast<int64_t>(id)));
  for (float v : r.logp) lp.push_back(Json(static_cast<double>(v)));
  out["token_ids"] = Json(std::move(tok));
  out["logprobs"] = Json(std::move(lp));
  out["precision"] = precision_name(p);
  out["backend"] = sel.backend->name();
  out["temperature"] = temperature;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int cmd_init(const std::vector<std::string>& args) {
  const Args a(args, {"config", "output", "seed", "init-std"}, {"help"});
  if (a.flag("help"))
    return print_help(
        "usage: fp8rl init --config config.json --output DIR [--seed N] [--init-std S]\n\n"
        "Writes a randomly initialised checkpoint (config.json + model.safetensors) of the\n"
        "model a Hugging Face config.json describes: Qwen3ForCausalLM, LlamaForCausalLM or\n"
        "Qwen3MoeForCausalLM (docs/model-families.md).\n");
  need(!a.get("config", "").empty(), "needs --config config.json, the model to initialise");
  need(!a.get("output", "").empty(), "needs --output DIR, where the checkpoint goes");
  a.max_positional(0);
  const std::string config_path = a.get("config", "");
  const Json config = read_json_file(config_path);
  ModelConfig cfg;
  try {
    cfg = ModelConfig::from_json(config);
  } catch (const Error& e) {
    throw Error(config_path + ": " + e.message());
  }
  auto cpu = make_cpu_backend();
  DecoderModel model(*cpu, cfg, uniform_precision(cfg, Precision::fp32),
                   static_cast<uint64_t>(a.get_int("seed", 0)), a.get_number("init-std", 0.02));
  save_checkpoint(a.get("output", ""), model);
  std::printf("wrote %s (%lld parameters)\n", a.get("output", "").c_str(),
              static_cast<long long>(cfg.parameter_count()));
  return 0;
}

}  // namespace fp8rl::cli
