#include "text/chat_template.hpp"

#include "core/error.hpp"

namespace fp8rl {
namespace {

// Jinja's trim: leading and trailing whitespace (Python's str.strip).
std::string_view trim(std::string_view s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace

std::string qwen3_chat_prompt(std::string_view user, const ChatOptions& options) {
  std::string s;
  if (!options.system.empty()) s += "<|im_start|>system\n" + options.system + "<|im_end|>\n";
  s += "<|im_start|>user\n";
  s += user;
  s += "<|im_end|>\n<|im_start|>assistant\n";
  if (!options.thinking) s += "<think>\n\n</think>\n\n";
  return s;
}

std::string llama3_chat_prompt(std::string_view user, const ChatOptions& options) {
  std::string s = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n";
  s += "Cutting Knowledge Date: December 2023\nToday Date: " + options.date + "\n\n";
  s += trim(options.system);
  s += "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n";
  s += trim(user);
  s += "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
  return s;
}

std::string deepseek_v3_chat_prompt(std::string_view user, const ChatOptions& options) {
  std::string s = "<｜begin▁of▁sentence｜>" + options.system + "<｜User｜>";
  s += user;
  s += "<｜Assistant｜>";
  return s;
}

std::string moonlight_chat_prompt(std::string_view user, const ChatOptions& options) {
  std::string s = "<|im_system|>system<|im_middle|>";
  s += options.system.empty() ? "You are a helpful assistant provided by Moonshot-AI."
                              : options.system;
  s += "<|im_end|><|im_user|>user<|im_middle|>";
  s += user;
  s += "<|im_end|><|im_assistant|>assistant<|im_middle|>";
  return s;
}

std::string chat_prompt(std::string_view user, const ChatOptions& options) {
  if (options.template_name == "qwen3") return qwen3_chat_prompt(user, options);
  if (options.template_name == "llama3") return llama3_chat_prompt(user, options);
  if (options.template_name == "deepseek_v3") return deepseek_v3_chat_prompt(user, options);
  if (options.template_name == "moonlight") return moonlight_chat_prompt(user, options);
  throw Error("unknown chat template \"" + options.template_name +
              "\" (known: qwen3, llama3, deepseek_v3, moonlight)");
}

}  // namespace fp8rl
