#include "rl/group_rollouts.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "model/checkpoint.hpp"
#include "model/family.hpp"
#include "text/model_tokenizer.hpp"

namespace fp8rl {

uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9e3779b97f4a7c15ull + b + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

ChatOptions chat_options(const RunConfig& cfg, const ModelConfig& model) {
  ChatOptions chat;
  chat.system = cfg.chat_system_prompt;
  chat.thinking = cfg.chat_thinking;
  chat.date = cfg.chat_date;
  chat.template_name = model_family(model.family).chat_template;
  return chat;
}

std::unique_ptr<Task> make_run_task(const RunConfig& cfg, const CheckpointInfo* ckpt) {
  TaskConfig tc = cfg.task;
  // A dataset of text for a model that comes with its tokenizer: the model's, with its chat
  // template. A checkpoint of this project's character tokenizer (fp8rl_tokenizer.json) keeps
  // it (the dataset's characters make the same one); a model folder with neither is an error:
  // its ids would mean nothing to the model. The built-in tasks keep their tokenizers.
  const std::string& dir = cfg.init_checkpoint;
  if (tc.name == "jsonl" && !dir.empty()) {
    namespace fs = std::filesystem;
    if (fs::exists(dir + "/tokenizer.json"))
      tc.tokenizer = std::make_shared<ModelTokenizer>(
          dir, chat_options(cfg, ckpt ? ckpt->model : read_checkpoint_config(dir)));
    else
      check(fs::exists(dir + "/fp8rl_tokenizer.json"),
            dir +
                "/tokenizer.json does not exist: a model folder for a dataset needs its "
                "tokenizer (tokenizer.json and tokenizer_config.json)");
  }
  return make_task(tc);
}

std::unique_ptr<DecoderModel> make_run_model(const RunConfig& cfg, Backend& be, const Task& task,
                                             const CheckpointInfo* ckpt) {
  QuantOptions qopt;
  qopt.pow2_scales = cfg.pow2_scales;
  std::optional<CheckpointInfo> own;
  if (!cfg.init_checkpoint.empty() && !ckpt)
    ckpt = &own.emplace(read_checkpoint_info(cfg.init_checkpoint));
  const ModelConfig* mc = ckpt ? &ckpt->model : &cfg.model;
  ModelConfig model_cfg = *mc;
  if (cfg.init_checkpoint.empty()) model_cfg.vocab_size = task.tokenizer().vocab_size();
  check(model_cfg.vocab_size >= task.tokenizer().vocab_size(),
        "the checkpoint's vocabulary (" + std::to_string(model_cfg.vocab_size) +
            ") is smaller than the task tokenizer's (" +
            std::to_string(task.tokenizer().vocab_size()) + ")");
  const PrecisionMap pm = cfg.precision_map(model_cfg);
  std::unique_ptr<DecoderModel> model;
  if (cfg.init_checkpoint.empty()) {
    model = std::make_unique<DecoderModel>(be, model_cfg, pm, cfg.seed, cfg.init_std, qopt);
  } else {
    model = load_checkpoint(be, *ckpt, pm, qopt);
  }
  model->set_lm_head_precision(cfg.lm_head);
  return model;
}

void stop_at_eos(SamplingParams& sp, const Tokenizer& t) {
  sp.eos_token = t.eos();
  sp.more_eos_tokens.clear();
  for (int32_t id : t.stop_ids())
    if (id != sp.eos_token) sp.more_eos_tokens.push_back(id);
}

std::string response_text(const Task& task, const Sequence& s, bool* ended) {
  *ended = s.finish_reason == "eos";
  std::vector<int32_t> body = s.response;
  if (*ended) body.pop_back();
  return task.tokenizer().decode(body);
}

MicroBatch pack_micro_batch(const std::vector<TrainSeq>& seqs, size_t begin, size_t end) {
  MicroBatch mb;
  mb.B = static_cast<int64_t>(end - begin);
  for (size_t i = begin; i < end; ++i)
    mb.T = std::max<int64_t>(mb.T, static_cast<int64_t>(seqs[i].ids.size()) - 1);
  // Padding: id 0, valid in every vocabulary; padded positions are never read (rows).
  mb.ids.assign(static_cast<size_t>(mb.B * mb.T), 0);
  mb.targets.assign(mb.ids.size(), 0);
  for (size_t i = begin; i < end; ++i) {
    const auto& s = seqs[i];
    const int64_t b = static_cast<int64_t>(i - begin);
    for (int64_t t = 0; t + 1 < static_cast<int64_t>(s.ids.size()); ++t) {
      mb.ids[b * mb.T + t] = s.ids[t];
      mb.targets[b * mb.T + t] = s.ids[t + 1];
    }
    // Response token k sits at ids[prompt_len + k] and is predicted by row prompt_len + k − 1.
    mb.rows.push_back({i, b * mb.T + s.prompt_len - 1});
    // Routing: the generator's choices at the positions it fed.
    if (mb.routing.size() < s.routing.size()) mb.routing.resize(s.routing.size());
    for (size_t l = 0; l < s.routing.size(); ++l) {
      const auto& r = s.routing[l];
      if (r.empty()) continue;
      const int64_t positions = static_cast<int64_t>(s.ids.size()) - 1;
      const int64_t k = static_cast<int64_t>(r.size()) / std::max<int64_t>(positions, 1);
      auto& dst = mb.routing[l];
      if (dst.empty()) dst.assign(static_cast<size_t>(mb.B * mb.T * k), -1);
      std::copy(r.begin(), r.end(), dst.begin() + (b * mb.T) * k);
    }
  }
  return mb;
}

GroupRollouts generate_group_rollouts(const RunConfig& cfg, const Task& task, Generator& gen,
                                      int64_t step, int64_t prompts,
                                      const std::vector<int64_t>* keep) {
  check(prompts > 0, "rollouts need at least one prompt");
  const int64_t G = cfg.group_size;
  GroupRollouts out;

  // Prompts: a fresh, reproducible draw per step (all of them, so that the draws of a share
  // are those of the whole batch).
  Rng rng(mix_seed(cfg.seed, static_cast<uint64_t>(step)));
  std::vector<std::vector<int32_t>> prompt_ids;
  std::vector<int64_t> sequence_ids;
  std::vector<std::vector<int32_t>> every_prompt;  // a share's first FP8 KV calibration
  const bool calibrate_all = keep && cfg.kv_cache == KvDType::fp8 && gen.kv_scales().empty();
  size_t next_kept = 0;
  for (int64_t i = 0; i < prompts; ++i) {
    Example ex = task.sample(rng);
    const bool kept = !keep || (next_kept < keep->size() && (*keep)[next_kept] == i);
    if (!kept && !calibrate_all) continue;
    const auto ids = task.encode_prompt(ex.prompt);
    if (calibrate_all) every_prompt.insert(every_prompt.end(), static_cast<size_t>(G), ids);
    if (!kept) continue;
    if (keep) ++next_kept;
    out.examples.push_back(std::move(ex));
    for (int64_t g = 0; g < G; ++g) {
      prompt_ids.push_back(ids);
      sequence_ids.push_back(i * G + g);
    }
  }
  check(!keep || next_kept == keep->size(),
        "rollouts: the prompts to keep must be increasing indices below the number drawn");
  check(!out.examples.empty(), "rollouts need at least one prompt");
  const int64_t N = static_cast<int64_t>(prompt_ids.size());

  // The generator calibrates its first FP8 KV scales on the prompts it is given: a share
  // calibrates on the whole batch's, as one rank generating everything would.
  if (calibrate_all) gen.calibrate(every_prompt);
  SamplingParams sp = cfg.sampling;
  sp.max_new_tokens = task.max_response_tokens();
  stop_at_eos(sp, task.tokenizer());
  sp.seed = mix_seed(cfg.seed, 0x9e7000000ull + static_cast<uint64_t>(step));
  // Lengths a task forces, by each sequence's index in the whole step's batch.
  sp.response_lengths = task.forced_response_lengths(sequence_ids, sp.seed);
  if (keep) sp.sequence_ids = std::move(sequence_ids);
  out.sequences = gen.generate(prompt_ids, sp);

  // Rewards and advantages.
  for (int64_t i = 0; i < N; ++i) {
    const Sequence& s = out.sequences[static_cast<size_t>(i)];
    bool ended = false;
    out.texts.push_back(response_text(task, s, &ended));
    out.ended.push_back(ended);
    const Example& ex = out.examples[static_cast<size_t>(i / G)];
    out.rewards.push_back(task.reward(ex, out.texts.back(), ended));
    out.correct.push_back(task.correct(ex, out.texts.back(), ended));
  }
  out.advantages = compute_advantages(out.rewards, G, cfg.advantage);
  out.train.resize(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) {
    const Sequence& s = out.sequences[static_cast<size_t>(i)];
    TrainSeq& t = out.train[static_cast<size_t>(i)];
    t.ids = s.prompt;
    t.ids.insert(t.ids.end(), s.response.begin(), s.response.end());
    t.prompt_len = static_cast<int64_t>(s.prompt.size());
    t.g = s.logprobs;
    t.routing = s.routing;
    t.advantage = out.advantages[static_cast<size_t>(i)];
    out.train_tokens += static_cast<int64_t>(t.ids.size()) - 1;
    out.response_tokens += static_cast<int64_t>(s.response.size());
  }
  return out;
}

}  // namespace fp8rl
