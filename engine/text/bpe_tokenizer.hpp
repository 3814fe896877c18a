// Byte-level BPE tokenizers (the GPT-2 / Qwen2 / Qwen3 family) read from a Hugging Face
// tokenizer.json (and tokenizer_config.json beside it), with the behaviour of Hugging Face
// `tokenizers` as the reference:
//   1. added tokens (<|im_start|>, <think>, …) are split out of the text first, matched
//      literally, longest first; special ones only when `special` is on (Hugging Face's
//      default; off, they are plain text);
//   2. the rest is normalised (NFC when the file says so) and split by the pre-tokenizer's regex
//      (the Qwen2 pattern; GPT-2's for a plain ByteLevel pre-tokenizer), each piece kept
//      (behaviour "Isolated") along with the text between matches;
//   3. each piece's UTF-8 bytes become the byte-level alphabet (GPT-2's bytes_to_unicode), and
//      adjacent symbols merge by the merges' rank, lowest first, until none applies;
//   4. decoding concatenates the tokens and maps the alphabet back to bytes.
// decode(encode(s)) == s for every valid UTF-8 s that NFC leaves unchanged. Unicode (NFC, the
// regex's \p{L} and \p{N}) comes from ICU; a build without ICU reports it when a tokenizer is
// loaded. A pre-tokenizer of several Splits (DeepSeek-V3's: digits in threes, CJK runs, then the
// rest) applies them in turn, each to the pieces of the one before.
//
// The same class reads tiktoken's ranks files (OpenAI's cl100k_base / o200k_base, Moonshot's
// tiktoken.model for Moonlight and Kimi): one "<base64 token bytes> <rank>" per line, the rank
// the token's id and its merge priority; a piece is split by the encoding's pattern, emitted as
// one token when it is one, else its bytes merge pairwise, the adjacent pair whose concatenation
// has the lowest rank first (the leftmost among equals), as tiktoken does.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json.hpp"

namespace fp8rl {

class BpeTokenizer {
 public:
  // Reads dir/tokenizer.json and, when present, dir/tokenizer_config.json (eos and pad tokens);
  // a folder with tiktoken.model instead: load_tiktoken.
  // An unsupported or malformed file is an Error naming the file and the field.
  static BpeTokenizer load(const std::string& dir);
  // The same from parsed files; `where` names them in errors. config may be null.
  static BpeTokenizer from_json(const Json& tokenizer, const Json& config,
                                const std::string& where);
  // Whether this build can load tokenizers (it has ICU).
  static bool available();
  // A tiktoken ranks file with its split pattern and special tokens (content, id; matched as
  // added special tokens); config (may be null): a tokenizer_config.json naming eos and pad.
  static BpeTokenizer from_tiktoken(const std::string& ranks_path, const std::string& pattern,
                                    const std::vector<std::pair<std::string, int32_t>>& special,
                                    const Json& config = Json());
  // dir/tiktoken.model with Moonshot's pattern (Moonlight, Kimi) and dir/tokenizer_config.json:
  // the 256 ids after the ranks are special tokens, named by its added_tokens_decoder (the rest
  // <|reserved_token_{id}|>); eos and pad as it names them.
  static BpeTokenizer load_tiktoken(const std::string& dir);

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

  // Token ids of UTF-8 text (invalid UTF-8 is an Error naming the byte offset). special: match
  // special added tokens in the text (non-special added tokens are always matched).
  std::vector<int32_t> encode(std::string_view text, bool special = true) const;
  // The text of ids; skip_special leaves special added tokens out. An id outside the vocabulary
  // is an Error naming it.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  // One token as the vocabulary spells it, in readable form (bytes shown as text, a byte that is
  // no whole character as <0xNN>).
  std::string token_text(int32_t id) const;

  // Number of ids: the vocabulary and the added tokens (the model's embedding may be larger).
  int32_t size() const;
  // The id of a token spelled exactly so (vocabulary or added), if any.
  std::optional<int32_t> token_id(std::string_view token) const;
  // tokenizer_config.json's eos_token (Qwen3: <|im_end|>) and pad_token, when given.
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;
  bool is_special(int32_t id) const;

 private:
  struct Impl;
  explicit BpeTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fp8rl
