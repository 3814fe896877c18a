#include "text/chat_template.hpp"

namespace fp8rl {

std::string qwen3_chat_prompt(std::string_view user, const ChatOptions& options) {
  std::string s;
  if (!options.system.empty()) s += "<|im_start|>system\n" + options.system + "<|im_end|>\n";
  s += "<|im_start|>user\n";
  s += user;
  s += "<|im_end|>\n<|im_start|>assistant\n";
  if (!options.thinking) s += "<think>\n\n</think>\n\n";
  return s;
}

}  // namespace fp8rl
