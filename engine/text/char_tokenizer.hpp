// A character-level tokenizer (the built-in tasks' tokenizers): special tokens first (pad, bos,
// eos), then one token per character. Saved beside a checkpoint as fp8rl_tokenizer.json so
// `fp8rl generate --prompt TEXT` can encode and decode.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "text/tokenizer.hpp"

namespace fp8rl {

class CharTokenizer : public Tokenizer {
 public:
  CharTokenizer() = default;
  // symbols: the characters, each one byte; ids 0, 1, 2 are <pad>, <bos>, <eos>.
  explicit CharTokenizer(const std::string& symbols);

  static constexpr int32_t kPad = 0, kBos = 1, kEos = 2;
  int32_t vocab_size() const override { return static_cast<int32_t>(3 + symbols_.size()); }
  const std::string& symbols() const { return symbols_; }

  // Encodes text; a character outside the vocabulary is an error naming it and its position.
  std::vector<int32_t> encode(const std::string& text) const override;
  // <bos> and the characters.
  std::vector<int32_t> encode_prompt(const std::string& prompt) const override;
  // Decodes ids; special tokens become "" (pad, bos) or are dropped (eos), unknown ids "?".
  std::string decode(const std::vector<int32_t>& ids) const override;
  // One token as a reader should see it: its character, or "<pad>", "<bos>", "<eos>", "?".
  std::string token_text(int32_t id) const override;
  int32_t eos() const override { return kEos; }
  int32_t pad() const override { return kPad; }

  Json to_json() const;
  static CharTokenizer from_json(const Json& j);
  // Reads dir/fp8rl_tokenizer.json when present.
  static std::optional<CharTokenizer> load(const std::string& dir);
  void save(const std::string& dir) const override;

 private:
  std::string symbols_;
  int32_t index_[256];
};

}  // namespace fp8rl
