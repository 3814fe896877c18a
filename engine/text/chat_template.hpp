// Prompts as the model saw them in post-training: the Qwen3 chat template (ChatML with the
// thinking switch) for one user message, as Hugging Face's apply_chat_template renders the
// template of Qwen3's tokenizer_config.json with add_generation_prompt (tests compare with that
// rendering: tests/data/qwen3_chat_reference.json).
#pragma once

#include <string>
#include <string_view>

namespace fp8rl {

struct ChatOptions {
  std::string system;    // a system message first when not empty
  bool thinking = true;  // false: an empty <think></think> block, as enable_thinking=False does
};

// <|im_start|>system\n…<|im_end|>\n (when a system message is given), then
// <|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n, then (thinking off)
// <think>\n\n</think>\n\n — the text to tokenize with special tokens recognised.
std::string qwen3_chat_prompt(std::string_view user, const ChatOptions& options = {});

}  // namespace fp8rl
