#include "text/model_tokenizer.hpp"

#include <filesystem>

#include <algorithm>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "text/char_tokenizer.hpp"
#include "text/synthetic_tokenizer.hpp"

namespace fp8rl {

ModelTokenizer::ModelTokenizer(const std::string& dir, ChatOptions chat)
    : dir_(dir), bpe_(BpeTokenizer::load(dir)), chat_(std::move(chat)) {
  check(bpe_.eos_id().has_value(),
        dir + "/tokenizer_config.json: no eos_token (a response must have a token that ends it)");
  eos_ = *bpe_.eos_id();
  pad_ = bpe_.pad_id().value_or(eos_);
  // Every eos id the model folder names also ends a response (Llama 3.1 Instruct:
  // <|end_of_text|>, <|eom_id|>, <|eot_id|>).
  stop_ = {eos_};
  namespace fs = std::filesystem;
  for (const char* file : {"config.json", "generation_config.json"}) {
    const std::string path = dir + "/" + file;
    if (!fs::exists(path)) continue;
    try {
      const Json j = Json::parse(read_text_file(path));
      if (!j.is_object() || !j.contains("eos_token_id") || j.at("eos_token_id").is_null()) continue;
      const Json& e = j.at("eos_token_id");
      std::vector<Json> ids = e.is_array() ? e.as_array() : std::vector<Json>{e};
      for (const Json& id : ids) {
        const int64_t v = id.as_int("eos_token_id");
        check(v >= 0 && v < bpe_.size(),
              "eos_token_id " + std::to_string(v) + " is not a token of tokenizer.json");
        if (std::find(stop_.begin(), stop_.end(), v) == stop_.end())
          stop_.push_back(static_cast<int32_t>(v));
      }
    } catch (const Error& e) {
      throw Error(path + ": " + e.message());
    }
  }
}

std::vector<int32_t> ModelTokenizer::encode(const std::string& text) const {
  return bpe_.encode(text, /*special=*/false);
}

std::vector<int32_t> ModelTokenizer::encode_prompt(const std::string& prompt) const {
  return bpe_.encode(chat_prompt(prompt, chat_), /*special=*/true);
}

std::string ModelTokenizer::decode(const std::vector<int32_t>& ids) const {
  // A model's embedding usually has more rows than its tokenizer has tokens (Qwen3: 151,936
  // and 151,669); a sampled id beyond the tokenizer is no text, as in Hugging Face's decode.
  std::vector<int32_t> known;
  known.reserve(ids.size());
  for (int32_t id : ids)
    if (id >= 0 && id < bpe_.size()) known.push_back(id);
  return bpe_.decode(known, /*skip_special=*/true);
}

std::string ModelTokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= bpe_.size()) return "<unused " + std::to_string(id) + ">";
  return bpe_.token_text(id);
}

void ModelTokenizer::save(const std::string& dir) const {
  namespace fs = std::filesystem;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    const fs::path from = fs::path(dir_) / f;
    if (fs::exists(from))
      fs::copy_file(from, fs::path(dir) / f, fs::copy_options::overwrite_existing);
  }
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir, const ChatOptions& chat) {
  if (std::filesystem::exists(dir + "/tokenizer.json"))
    return std::make_unique<ModelTokenizer>(dir, chat);
  // This project's own: a character tokenizer, or the synthetic task's.
  const std::string own = dir + "/fp8rl_tokenizer.json";
  if (!std::filesystem::exists(own)) return nullptr;
  const Json j = read_json_file(own);
  try {
    if (j.contains("type") && j.at("type").is_string() && j.at("type").as_string() == "synthetic")
      return std::make_unique<SyntheticTokenizer>(SyntheticTokenizer::from_json(j));
    return std::make_unique<CharTokenizer>(CharTokenizer::from_json(j));
  } catch (const Error& e) {
    throw Error(own + ": " + e.message());
  }
}

}  // namespace fp8rl
