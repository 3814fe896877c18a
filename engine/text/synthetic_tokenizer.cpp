#include "text/synthetic_tokenizer.hpp"

#include <charconv>

#include "core/error.hpp"
#include "core/files.hpp"

namespace fp8rl {

SyntheticTokenizer::SyntheticTokenizer(int32_t vocab) : vocab_(vocab) {
  check(vocab >= 4,
        "synthetic tokenizer: the vocabulary needs at least 4 ids, got " + std::to_string(vocab));
}

std::vector<int32_t> SyntheticTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ' ') {
      ++i;
      continue;
    }
    const size_t end = std::min(text.find(' ', i), text.size());
    const std::string word = text.substr(i, end - i);
    int32_t id = -1;
    const char* first = word.data() + 1;
    const char* last = word.data() + word.size();
    const bool ok = word.size() > 1 && word[0] == 't' &&
                    std::from_chars(first, last, id).ptr == last && id >= 3 && id < vocab_;
    check(ok, "synthetic tokenizer: '" + word + "' at position " + std::to_string(i) +
                  " is not a token t3 … t" + std::to_string(vocab_ - 1));
    ids.push_back(id);
    i = end;
  }
  return ids;
}

std::vector<int32_t> SyntheticTokenizer::encode_prompt(const std::string& prompt) const {
  std::vector<int32_t> ids = {kBos};
  const auto body = encode(prompt);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

std::string SyntheticTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string s;
  for (int32_t id : ids) {
    if (id == kPad || id == kBos || id == kEos) continue;
    s += (s.empty() ? "t" : " t") + std::to_string(id);
  }
  return s;
}

std::string SyntheticTokenizer::token_text(int32_t id) const {
  if (id == kPad) return "<pad>";
  if (id == kBos) return "<bos>";
  if (id == kEos) return "<eos>";
  return "t" + std::to_string(id);
}

Json SyntheticTokenizer::to_json() const {
  Json j;
  j["type"] = "synthetic";
  j["vocab_size"] = static_cast<int64_t>(vocab_);
  return j;
}

SyntheticTokenizer SyntheticTokenizer::from_json(const Json& j) {
  return SyntheticTokenizer(
      static_cast<int32_t>(j.at("vocab_size").as_int("tokenizer vocab_size")));
}

void SyntheticTokenizer::save(const std::string& dir) const {
  write_private_file(dir + "/fp8rl_tokenizer.json", to_json().dump(2) + "\n");
}

}  // namespace fp8rl
