// fp8rl generate: sample continuations from a checkpoint and print tokens and log-probs as JSON.
#include <cstdio>

#include "args.hpp"
#include "backend/backend_registry.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "model/checkpoint.hpp"
#include "model/family.hpp"
#include "rl/group_rollouts.hpp"
#include "rollout/generator.hpp"
#include "text/tokenizer.hpp"

namespace fp8rl::cli {

int cmd_generate(const std::vector<std::string>& args) {
  const Args a(args,
               {"checkpoint", "model", "prompt", "token-ids", "max-new-tokens", "temperature",
                "top-p", "top-k", "seed", "precision", "kv-cache", "backend", "eos", "graphs"},
               {"help"});
  const bool has_input = !a.get("prompt", "").empty() || !a.get("token-ids", "").empty();
  const std::string dir = a.get("checkpoint", a.get("model", ""));
  if (a.flag("help"))
    return print_help(
        "usage: fp8rl generate (--checkpoint DIR | --model DIR) (--prompt TEXT | --token-ids "
        "1,2,...)\n"
        "         [--max-new-tokens N] [--temperature T] [--top-p P] [--top-k K] [--seed S]\n"
        "         [--precision fp32|bf16|fp8] [--kv-cache fp32|bf16|fp8] [--eos ID]\n"
        "         [--backend auto|cpu|cuda] [--graphs auto|off]\n\n"
        "Prints one JSON object with the generated token ids, their log-probabilities under\n"
        "softmax(logits / T) (the g of importance sampling) and, when the folder has a tokenizer\n"
        "(a Hugging Face tokenizer.json, or fp8rl_tokenizer.json), the text. --prompt goes\n"
        "through the tokenizer as a task's prompt does (a Hugging Face model's chat template;\n"
        "<bos> + characters); generation stops at its eos token. Temperature 0 is greedy. --graphs "
        "off\n"
        "launches every op of every decode step instead of replaying recorded CUDA graphs\n"
        "(decode_graphs in the output says how many steps replayed one, or why none did).\n");
  need(!dir.empty(), "needs a model: --checkpoint DIR or --model DIR");
  need(has_input, "needs a prompt: --prompt TEXT or --token-ids 1,2,...");
  a.max_positional(0);
  const CheckpointInfo ckpt = read_checkpoint_info(dir);  // config.json, read once
  ChatOptions chat;  // the family's template (Llama 3.1's or Qwen3's)
  chat.template_name = model_family(ckpt.model.family).chat_template;
  const auto tokenizer = load_tokenizer(dir, chat);
  std::vector<int32_t> prompt;
  if (!a.get("prompt", "").empty()) {
    check(a.get("token-ids", "").empty(), "give --prompt or --token-ids, not both");
    check(tokenizer != nullptr,
          dir + " has no tokenizer (tokenizer.json or fp8rl_tokenizer.json): use --token-ids");
    prompt = tokenizer->encode_prompt(a.get("prompt", ""));
  } else {
    prompt = parse_token_ids(a.get("token-ids", ""));
  }
  auto sel = make_backend(parse_backend_choice(a.get("backend", "auto")));
  const bool cpu = sel.backend->name() == "cpu";
  const Precision p = parse_precision(a.get("precision", cpu ? "fp32" : "bf16"));
  const KvDType kv = parse_kv_dtype(a.get("kv-cache", p == Precision::fp32 ? "fp32" : "bf16"));
  auto model = load_checkpoint(*sel.backend, ckpt, uniform_precision(ckpt.model, p));
  SamplingParams sp;
  sp.max_new_tokens = a.get_int("max-new-tokens", 32);
  sp.temperature = a.get_number("temperature", 1);
  sp.top_p = a.get_number("top-p", 1);
  sp.top_k = a.get_int("top-k", 0);
  sp.seed = static_cast<uint64_t>(a.get_int("seed", 0));
  if (a.has("eos") || !tokenizer)
    sp.eos_token = a.get_int("eos", -1);
  else
    stop_at_eos(sp, *tokenizer);  // every stop id the model folder names
  const std::string graphs = a.get("graphs", "auto");
  check(graphs == "auto" || graphs == "off", "--graphs must be auto or off, got '" + graphs + "'");
  Generator gen(*model, {kv, 0, SamplingSite::automatic,
                         graphs == "auto" ? DecodeGraphs::automatic : DecodeGraphs::off});
  const auto seqs = gen.generate({prompt}, sp);
  const Sequence& s = seqs.front();
  Json out;
  Json::Array ids, lps;
  for (int32_t t : s.response) ids.push_back(Json(static_cast<int64_t>(t)));
  for (float v : s.logprobs) lps.push_back(Json(static_cast<double>(v)));
  out["prompt_ids"] = Json([&] {
    Json::Array x;
    for (int32_t t : prompt) x.push_back(Json(static_cast<int64_t>(t)));
    return x;
  }());
  out["token_ids"] = Json(std::move(ids));
  out["logprobs"] = Json(std::move(lps));
  out["finish_reason"] = s.finish_reason;
  if (tokenizer) out["text"] = tokenizer->decode(s.response);
  out["precision"] = precision_name(p);
  out["kv_cache"] = kv_dtype_name(kv);
  out["backend"] = sel.backend->name();
  Json dg;
  dg["steps"] = gen.last_stats().graph_steps;
  dg["of_steps"] = gen.last_stats().decode_steps;
  dg["recordings"] = gen.last_stats().graph_captures;
  if (!gen.last_stats().graphs_unused.empty()) dg["unused"] = gen.last_stats().graphs_unused;
  out["decode_graphs"] = dg;
  if (kv == KvDType::fp8) {
    Json::Array sc;
    for (auto [k, v] : gen.kv_scales())
      sc.push_back(Json(Json::Array{Json(double(k)), Json(double(v))}));
    out["kv_scales"] = Json(std::move(sc));
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace fp8rl::cli
