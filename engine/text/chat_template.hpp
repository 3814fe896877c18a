// Prompts as the model saw them in post-training: one user message in the model family's chat
// template, as Hugging Face's apply_chat_template renders the template of its
// tokenizer_config.json with add_generation_prompt (tests compare with those renderings:
// tests/data/{qwen3,llama3,deepseek_v3}_chat_reference.json).
#pragma once

#include <string>
#include <string_view>

namespace fp8rl {

struct ChatOptions {
  std::string system;  // a system message first when not empty
  // Qwen3: false gives an empty <think></think> block (enable_thinking=False).
  bool thinking = true;
  // Which template: "qwen3" (ChatML with the thinking switch), "llama3" (Llama 3.1's),
  // "deepseek_v3" (DeepSeek-V3's) or "moonlight" (Moonlight's, which a Moonshot tiktoken
  // tokenizer brings; the model family says which otherwise: model/family.hpp).
  std::string template_name = "qwen3";
  // Llama 3.1's system header always carries "Today Date: …": pinned (Hugging Face's template
  // default, "26 Jul 2024") so prompts are the same every day.
  std::string date = "26 Jul 2024";
};

// <|im_start|>system\n…<|im_end|>\n (when a system message is given), then
// <|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n, then (thinking off)
// <think>\n\n</think>\n\n — the text to tokenize with special tokens recognised.
std::string qwen3_chat_prompt(std::string_view user, const ChatOptions& options = {});
// <|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date:
// December 2023\nToday Date: {date}\n\n{system}<|eot_id|><|start_header_id|>user
// <|end_header_id|>\n\n{user, trimmed}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n
// (Llama 3.1 Instruct's template without tools).
std::string llama3_chat_prompt(std::string_view user, const ChatOptions& options = {});
// <｜begin▁of▁sentence｜>{system}<｜User｜>{user}<｜Assistant｜> (DeepSeek-V3's template: the
// system message right after the bos token, no separator).
std::string deepseek_v3_chat_prompt(std::string_view user, const ChatOptions& options = {});
// <|im_system|>system<|im_middle|>{system}<|im_end|><|im_user|>user<|im_middle|>{user}<|im_end|>
// <|im_assistant|>assistant<|im_middle|> (Moonlight-16B-A3B-Instruct's, as its model card renders
// it; without a system message the card's "You are a helpful assistant provided by Moonshot-AI.").
std::string moonlight_chat_prompt(std::string_view user, const ChatOptions& options = {});
// The prompt in options.template_name's template; throws naming an unknown template.
std::string chat_prompt(std::string_view user, const ChatOptions& options);

}  // namespace fp8rl
