// Tasks with verifiable rewards. Each has a tokenizer, a source of training prompts, a held-out
// validation set and a reward function. The built-in tasks use a character-level tokenizer
// (prompts <bos> + characters, responses characters ending with <eos>); a JSONL dataset uses the
// model's tokenizer when the run has one (prompts through its chat template, responses ending
// with its eos token), else characters.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "core/rng.hpp"
#include "text/tokenizer.hpp"

namespace fp8rl {

struct TaskConfig {
  std::string name = "reverse";  // reverse | addition | sort | jsonl | synthetic
  // letters (reverse), digits (addition, sort), prompt tokens after <bos> (synthetic)
  int64_t min_len = 3, max_len = 6;
  int64_t validation_size = 64;
  std::string path;  // jsonl: the file
  // jsonl: the keys of a record's prompt and answer (GSM8K: question, answer; MATH: problem,
  // solution).
  std::string prompt_key = "prompt", answer_key = "answer";
  // jsonl: appended to every prompt on a line of its own (e.g. how to give the final answer);
  // "" for none.
  std::string instruction;
  // auto (shaped for the built-in tasks, exact for jsonl) | exact | partial | shaped |
  // numeric (jsonl only: the response parsed as a number, within numeric_tolerance) |
  // math (jsonl only: the final answers of response and reference — \boxed{…} or "#### …" —
  // compared by rl/math_answer.hpp)
  std::string reward = "auto";
  // jsonl: the response budget in tokens; 0: the longest answer + 1 (character tokenizer only).
  // synthetic: every response's length (or the longest, with response_tokens_min).
  int64_t max_response_tokens = 0;
  // synthetic: each response's length is drawn from [response_tokens_min,
  // max_response_tokens] (0: exactly max_response_tokens), <eos> or not.
  int64_t response_tokens_min = 0;
  // synthetic: the vocabulary (a real model's: 151,936 for Qwen3).
  int64_t vocab_size = 256;
  // jsonl: the model's tokenizer; null: a character tokenizer over the file's characters.
  std::shared_ptr<const Tokenizer> tokenizer;
  double numeric_tolerance = 1e-6;
  uint64_t seed = 0;  // validation set seed
};

struct Example {
  std::string prompt;  // e.g. "dcab="
  std::string answer;  // e.g. "bacd"
};

class Task {
 public:
  explicit Task(const TaskConfig& cfg);
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // A training example; never one of the validation prompts.
  virtual Example sample(Rng& rng) const = 0;
  const std::vector<Example>& validation() const { return validation_; }
  // Reward in [0, 1] of a decoded response (without <eos>); `ended` = the response ended
  // with <eos>; 0 without it. The kind follows task.reward (see TaskConfig).
  virtual double reward(const Example& ex, const std::string& response, bool ended) const;
  // Exact match (the accuracy the run reports).
  virtual bool correct(const Example& ex, const std::string& response, bool ended) const {
    return ended && response == ex.answer;
  }
  // Longest answer + 1 (for <eos>): the generation budget.
  virtual int64_t max_response_tokens() const = 0;
  // The length each of these sequences (by its index in the step's batch) must generate,
  // whatever it samples (<eos> included); empty when responses end as sampled. A benchmark's
  // synthetic task forces a workload's lengths this way.
  virtual std::vector<int64_t> forced_response_lengths(const std::vector<int64_t>& sequences,
                                                       uint64_t seed) const;
  std::vector<int32_t> encode_prompt(const std::string& prompt) const;

 protected:
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::vector<Example> validation_;
  std::string reward_;  // task.reward with auto resolved by the task
};

// Partial credit: matching positions / max(len(answer), len(response)); 0 without <eos>.
double partial_credit(const std::string& answer, const std::string& response, bool ended);
// Shaped: half partial credit, half exact match. Partial credit alone lets a policy settle on
// "almost right" (e.g. dropping the last character of long answers still earns 0.8 and, once
// sampling has sharpened, no group sees the exact answer again); the exact-match half keeps
// the full answer clearly better than any near miss while partial credit still gives a
// gradient before the first exact answers appear.
double shaped_reward(const std::string& answer, const std::string& response, bool ended);

// Makes a task; errors name the bad field (and, for jsonl, the line and what is wrong).
std::unique_ptr<Task> make_task(const TaskConfig& cfg);

}  // namespace fp8rl
