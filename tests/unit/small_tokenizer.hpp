// A byte-level BPE tokenizer small enough to reason about, for tests: the 256 byte tokens of
// GPT-2's byte alphabet, the merges ("l","o") < ("lo","w") < ("e","r") < ("Ġ","lo"), GPT-2's
// pre-tokenizer regex, and the added tokens given (content, special), with ids after those.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/json.hpp"

inline fp8rl::Json small_tokenizer_json(const std::vector<std::pair<std::string, bool>>& added) {
  using fp8rl::Json;
  Json vocab = Json::Object{};
  // The byte-level alphabet: printable Latin-1 as itself, the rest from U+0100 on.
  int next = 256, id = 0;
  auto utf8 = [](int cp) {
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
  };
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    vocab[utf8(printable ? b : next++)] = id++;
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
