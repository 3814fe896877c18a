// What tasks, the run loop and the commands need of a tokenizer: the built-in tasks' character
// tokenizer (char_tokenizer.hpp) and a model folder's Hugging Face tokenizer
// (model_tokenizer.hpp) alike.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "text/chat_template.hpp"

namespace fp8rl {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Ids are below this (the model's embedding must have at least as many rows).
  virtual int32_t vocab_size() const = 0;
  // Plain text (an answer) as ids: nothing in it is read as a special token.
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  // A task's prompt as the model expects it: <bos> and the characters for the character
  // tokenizer, the chat template for a model's tokenizer.
  virtual std::vector<int32_t> encode_prompt(const std::string& prompt) const = 0;
  // The text of ids, special tokens left out.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // One token as a reader should see it (<eos>, a character, a word piece).
  virtual std::string token_text(int32_t id) const = 0;
  // The token that ends a response, and the one that pads a batch.
  virtual int32_t eos() const = 0;
  virtual int32_t pad() const = 0;
  // Every token that ends a response (eos() first; a model's may list more).
  virtual std::vector<int32_t> stop_ids() const { return {eos()}; }
  // Writes what loads it again beside a checkpoint in dir (load_tokenizer reads it).
  virtual void save(const std::string& dir) const = 0;
};

// The tokenizer saved in or shipped with a folder: a Hugging Face tokenizer.json (with its
// tokenizer_config.json), else this project's fp8rl_tokenizer.json; nullptr when it has none.
// Malformed files are Errors naming them.
// chat: the template and options of a Hugging Face tokenizer's prompts.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir, const ChatOptions& chat = {});

}  // namespace fp8rl
