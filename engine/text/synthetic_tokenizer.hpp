// The tokenizer of the synthetic task (rl/tasks.hpp): a vocabulary of any size whose tokens are
// numbered words ("t57"), so that a benchmark runs a model of a real model's shape — Qwen3's
// 151,936-row embedding and head — on prompts and responses of any length without a model
// folder. Ids 0, 1, 2 are <pad>, <bos>, <eos>; the text of id n ≥ 3 is "t<n>", tokens separated
// by spaces. Saved beside a checkpoint as fp8rl_tokenizer.json ({"type": "synthetic"}).
#pragma once

#include <string>
#include <vector>

#include "core/json.hpp"
#include "text/tokenizer.hpp"

namespace fp8rl {

class SyntheticTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kPad = 0, kBos = 1, kEos = 2;
  // vocab: the number of ids, at least 4.
  explicit SyntheticTokenizer(int32_t vocab);

  int32_t vocab_size() const override { return vocab_; }
  // "t5 t17" → {5, 17}; anything else (an unknown word, an id out of range) is an error naming it.
  std::vector<int32_t> encode(const std::string& text) const override;
  // <bos> and the prompt's tokens.
  std::vector<int32_t> encode_prompt(const std::string& prompt) const override;
  // The words of the ids, special tokens left out.
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string token_text(int32_t id) const override;
  int32_t eos() const override { return kEos; }
  int32_t pad() const override { return kPad; }

  Json to_json() const;
  static SyntheticTokenizer from_json(const Json& j);
  void save(const std::string& dir) const override;

 private:
  int32_t vocab_;
};

}  // namespace fp8rl
