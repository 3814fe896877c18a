#include "text/char_tokenizer.hpp"

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/files.hpp"

namespace fp8rl {

CharTokenizer::CharTokenizer(const std::string& symbols) : symbols_(symbols) {
  std::fill(std::begin(index_), std::end(index_), -1);
  for (size_t i = 0; i < symbols.size(); ++i) {
    const auto c = static_cast<unsigned char>(symbols[i]);
    check(index_[c] < 0, std::string("tokenizer: duplicate symbol '") + symbols[i] + "'");
    index_[c] = static_cast<int32_t>(3 + i);
  }
}

std::vector<int32_t> CharTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < text.size(); ++i) {
    const int32_t id = index_[static_cast<unsigned char>(text[i])];
    check(id >= 0, "tokenizer: character '" + std::string(1, text[i]) + "' at position " +
                       std::to_string(i) + " is not in the vocabulary \"" + symbols_ + "\"");
    ids.push_back(id);
  }
  return ids;
}

std::vector<int32_t> CharTokenizer::encode_prompt(const std::string& prompt) const {
  std::vector<int32_t> ids = {kBos};
  const auto body = encode(prompt);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string s;
  for (int32_t id : ids) {
    if (id == kPad || id == kBos || id == kEos) continue;
    const int32_t k = id - 3;
    s += k >= 0 && k < static_cast<int32_t>(symbols_.size()) ? symbols_[k] : '?';
  }
  return s;
}

std::string CharTokenizer::token_text(int32_t id) const {
  if (id == kPad) return "<pad>";
  if (id == kBos) return "<bos>";
  if (id == kEos) return "<eos>";
  return decode({id});
}

Json CharTokenizer::to_json() const {
  Json j;
  j["type"] = "chars";
  j["symbols"] = symbols_;
  j["special"] = Json(Json::Array{Json("<pad>"), Json("<bos>"), Json("<eos>")});
  return j;
}

CharTokenizer CharTokenizer::from_json(const Json& j) {
  check(j.at("type").as_string("tokenizer type") == "chars",
        "tokenizer: type \"" + j.at("type").as_string() + "\" is not supported (only chars)");
  return CharTokenizer(j.at("symbols").as_string("tokenizer symbols"));
}

std::optional<CharTokenizer> CharTokenizer::load(const std::string& dir) {
  const std::string path = dir + "/fp8rl_tokenizer.json";
  if (!std::filesystem::exists(path)) return std::nullopt;
  const std::string text = read_text_file(path);
  try {
    return from_json(Json::parse(text));
  } catch (const Error& e) {
    throw Error(path + ": " + e.message());
  }
}

void CharTokenizer::save(const std::string& dir) const {
  write_private_file(dir + "/fp8rl_tokenizer.json", to_json().dump(2) + "\n");
}

}  // namespace fp8rl
