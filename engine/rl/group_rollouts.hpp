// The pieces of a GRPO step shared by the run loop and the measurements made on one step's batch
// (rl/sensitivity.hpp): the run's model, the prompts and rollouts of a step with their rewards
// and advantages, and the padded micro-batches the trainer's forward takes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/checkpoint.hpp"
#include "model/decoder.hpp"
#include "rl/run_config.hpp"
#include "rl/tasks.hpp"
#include "rollout/generator.hpp"
#include "text/chat_template.hpp"

namespace fp8rl {

// Mixes two 64-bit values into a seed (splitmix64 finaliser): the run's draws are seeded by
// (run seed, step) so that a resumed run draws the same prompts and samples.
uint64_t mix_seed(uint64_t a, uint64_t b);

// The run's task: with a JSONL dataset and a model folder that has a tokenizer.json
// (model.checkpoint), that tokenizer and its chat template (task.system_prompt,
// task.thinking); otherwise the task's own character tokenizer. ckpt: the model folder's
// config.json when read already (null: read it here when needed).
std::unique_ptr<Task> make_run_task(const RunConfig& cfg, const CheckpointInfo* ckpt = nullptr);

// The chat template and options of a model's prompts: its family's template, the run's system
// prompt, thinking switch and pinned date (task.*).
ChatOptions chat_options(const RunConfig& cfg, const ModelConfig& model);
// Responses end at any of the tokenizer's stop ids (eos first).
void stop_at_eos(SamplingParams& sp, const Tokenizer& t);

// The run's model: random (seeded by cfg.seed) with the config's sizes and the task's
// vocabulary, or loaded from cfg.init_checkpoint (ckpt: its config.json when read already); the
// config's precision map and lm_head precision. Throws when the vocabulary is too small for
// the task.
std::unique_ptr<DecoderModel> make_run_model(const RunConfig& cfg, Backend& be, const Task& task,
                                             const CheckpointInfo* ckpt = nullptr);

// The text of a generated response without its <eos>; *ended = it finished with <eos>.
std::string response_text(const Task& task, const Sequence& s, bool* ended);

// A training sequence: prompt + response ids; the response tokens are supervised.
struct TrainSeq {
  std::vector<int32_t> ids;
  int64_t prompt_len = 0;
  std::vector<float> g;  // generation log-probs of the response tokens
  double advantage = 0;
  DecoderModel::Routing routing;  // the generator's expert choices (mixture of experts)
};

// A padded micro-batch: B sequences × T positions; position t predicts ids[t + 1]. rows[i]:
// (sequence index, the row predicting its first response token); response token k of that
// sequence is predicted by row rows[i].second + k.
struct MicroBatch {
  int64_t B = 0, T = 0;
  std::vector<int32_t> ids, targets;
  std::vector<std::pair<size_t, int64_t>> rows;
  // The generator's expert choices for the batch's rows ([layer][B·T·k]; −1 for padding):
  // empty when the sequences carry none.
  DecoderModel::Routing routing;
};

// Packs seqs[begin, end) into one micro-batch (padding with <pad>).
MicroBatch pack_micro_batch(const std::vector<TrainSeq>& seqs, size_t begin, size_t end);

// The rollouts of one GRPO step: `prompts` examples (drawn with the seed of (cfg.seed, step))
// each answered group_size times by the generator at the config's sampling settings, with the
// task's rewards and the group advantages. Vectors over responses have prompts × group_size
// entries, group by group.
struct GroupRollouts {
  std::vector<Example> examples;    // [prompts]
  std::vector<Sequence> sequences;  // [P·G]
  std::vector<std::string> texts;   // decoded responses without <eos>
  std::vector<char> ended;          // finished with <eos>
  std::vector<double> rewards;      // [P·G]
  std::vector<char> correct;        // exact answers
  std::vector<double> advantages;   // [P·G]
  std::vector<TrainSeq> train;      // [P·G] prompt + response, g, advantage
  int64_t train_tokens = 0;         // Σ (prompt + response − 1): the positions trained
  int64_t response_tokens = 0;      // Σ response lengths
};

// Draws the prompts of `step` (1-based), generates, scores and computes advantages. The
// generator's last_stats() describe the rollout afterwards. With `keep` (increasing prompt
// indices < prompts), only those prompts' groups are generated — a data-parallel rank's share —
// and each response samples as it would in the whole batch.
GroupRollouts generate_group_rollouts(const RunConfig& cfg, const Task& task, Generator& gen,
                                      int64_t step, int64_t prompts,
                                      const std::vector<int64_t>* keep = nullptr);

}  // namespace fp8rl
