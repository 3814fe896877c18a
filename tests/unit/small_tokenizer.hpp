// A byte-level BPE tokenizer small enough to reason about, for tests: the 256 byte tokens of
// GPT-2's byte alphabet, the merges ("l","o") < ("lo","w") < ("e","r") < ("Ġ","lo"), GPT-2's
// pre-tokenizer regex, and the added tokens given (content, special), with ids after those.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/json.hpp"
#include "core/utf8.hpp"

inline fp8rl::Json small_tokenizer_json(const std::vector<std::pair<std::string, bool>>& added) {
  using fp8rl::Json;
  Json vocab = Json::Object{};
  // The byte-level alphabet: printable Latin-1 as itself, the rest from U+0100 on.
  int next = 256, id = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    std::string c;
    fp8rl::append_utf8(c, static_cast<uint32_t>(printable ? b : next++));
    vocab[c] = id++;
  }
  for (const char* t : {"lo", "low", "er", "\xc4\xa0lo"}) vocab[t] = id++;
  Json model;
  model["type"] = "BPE";
  model["vocab"] = vocab;
  model["merges"] = Json::Array{Json("l o"), Json("lo w"), Json("e r"), Json("\xc4\xa0 lo")};
  Json t;
  t["model"] = model;
  Json pre;
  pre["type"] = "ByteLevel";
  pre["add_prefix_space"] = false;
  pre["use_regex"] = true;
  t["pre_tokenizer"] = pre;
  Json::Array tokens;
  for (const auto& [content, special] : added) {
    Json a;
    a["id"] = id++;
    a["content"] = content;
    a["special"] = special;
    tokens.push_back(a);
  }
  t["added_tokens"] = Json(std::move(tokens));
  return t;
}
