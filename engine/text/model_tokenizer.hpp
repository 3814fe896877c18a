// A model folder's Hugging Face tokenizer as a Tokenizer: prompts through the family's chat
// template (ChatOptions::template_name), answers as plain text, responses ending at the eos token
// of tokenizer_config.json (Qwen3: <|im_end|>; Llama 3.1: <|eot_id|>) or at any eos_token_id of
// config.json and generation_config.json (Llama 3.1 Instruct: 128001, 128008, 128009).
#pragma once

#include <string>

#include "text/bpe_tokenizer.hpp"
#include "text/chat_template.hpp"
#include "text/tokenizer.hpp"

namespace fp8rl {

class ModelTokenizer : public Tokenizer {
 public:
  // dir holds tokenizer.json (and tokenizer_config.json, which must name an eos_token), or a
  // Moonshot tiktoken tokenizer (tiktoken.model and tokenizer_config.json: Moonlight), whose
  // prompts take Moonlight's template where the family's would be DeepSeek-V3's.
  explicit ModelTokenizer(const std::string& dir, ChatOptions chat = {});

  // Responses end at tokenizer_config.json's eos_token; batches pad with its pad_token (else
  // eos).
  int32_t eos() const override { return eos_; }
  std::vector<int32_t> stop_ids() const override { return stop_; }
  int32_t pad() const override { return pad_; }
  int32_t vocab_size() const override { return bpe_.size(); }
  std::vector<int32_t> encode(const std::string& text) const override;
  std::vector<int32_t> encode_prompt(const std::string& prompt) const override;
  // Ids the tokenizer does not have (the embedding's padding rows) decode to nothing.
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string token_text(int32_t id) const override;
  // Copies tokenizer.json (or tiktoken.model), tokenizer_config.json and generation_config.json
  // (when there) into dir.
  void save(const std::string& dir) const override;

  const BpeTokenizer& bpe() const { return bpe_; }
  void set_chat(ChatOptions chat) { chat_ = std::move(chat); }

 private:
  std::string dir_;
  BpeTokenizer bpe_;
  ChatOptions chat_;
  int32_t eos_ = 0, pad_ = 0;
  std::vector<int32_t> stop_;  // eos first
};

}  // namespace fp8rl
