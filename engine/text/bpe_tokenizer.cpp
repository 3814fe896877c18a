#include "text/bpe_tokenizer.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/utf8.hpp"

#if defined(FP8RL_HAVE_ICU)
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/unistr.h>
#endif

namespace fp8rl {
namespace {

// The pre-tokenizer pattern of GPT-2 (a ByteLevel pre-tokenizer with use_regex).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The split pattern of Moonshot's tiktoken tokenizers (Moonlight, Kimi: the pat_str of their
// tokenization code): Han runs on their own, letter runs without Han, digits in threes.
constexpr const char* kMoonshotPattern =
    R"([\p{Han}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Moonshot's tiktoken tokenizers reserve this many ids after the ranks for special tokens.
constexpr int32_t kMoonshotReservedSpecial = 256;

// GPT-2's bytes_to_unicode: every byte gets a printable character (the printable Latin-1 ones
// themselves, the rest U+0100 onwards), so that BPE works on text without control bytes.
struct ByteAlphabet {
  std::string of_byte[256];                    // UTF-8 of the character standing for a byte
  std::unordered_map<uint32_t, uint8_t> byte;  // that character's code point → the byte
  ByteAlphabet() {
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : next++;
      byte[cp] = static_cast<uint8_t>(b);
      append_utf8(of_byte[b], cp);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

// The byte-level characters of a token string back to the bytes they stand for.
std::string token_bytes(const std::string& token) {
  std::string out;
  const auto& a = alphabet();
  for (size_t i = 0; i < token.size();) {
    const size_t n = utf8_sequence_length(token, i);
    uint32_t cp = static_cast<unsigned char>(token[i]);
    if (n == 2) cp = ((cp & 0x1F) << 6) | (static_cast<unsigned char>(token[i + 1]) & 0x3F);
    const auto it = a.byte.find(cp);
    out += it != a.byte.end() && n <= 2 ? static_cast<char>(it->second) : '?';
    i += std::max<size_t>(n, 1);
  }
  return out;
}

std::string token_content(const Json& v, const std::string& what) {
  if (v.is_string()) return v.as_string(what);
  return v.at("content").as_string(what + ".content");  // {"content": …, "special": …}
}

}  // namespace

struct BpeTokenizer::Impl {
  std::vector<std::string> token;                  // id → its string (byte-level alphabet)
  std::unordered_map<std::string, int32_t> vocab;  // the inverse, vocabulary and added tokens
  // (left id, right id) → (rank, merged id).
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;
  bool ignore_merges = false;
  bool nfc = false;
  // tiktoken's ranks: ids are ranks, and two adjacent parts merge when their concatenation is a
  // token (the lowest rank first) instead of by a list of merges.
  bool ranks = false;

  struct Added {
    std::string content;
    int32_t id;
    bool special;
  };
  std::vector<Added> added;                   // longest first
  std::vector<std::vector<size_t>> by_first;  // first byte → indices into added
  std::vector<bool> special, is_added;        // by id
  std::optional<int32_t> eos, pad;

#if defined(FP8RL_HAVE_ICU)
  // The pre-tokenizer's splits, applied in turn (each to the pieces of the one before).
  std::vector<std::unique_ptr<icu::RegexPattern>> patterns;
  const icu::Normalizer2* normalizer = nullptr;
#endif

  mutable std::mutex cache_mu;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;  // piece → ids

  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  // BPE of one pre-tokenized piece (raw bytes), appended to out.
  void encode_piece(const std::string& piece, std::vector<int32_t>& out) const {
    {
      std::lock_guard lock(cache_mu);
      if (const auto it = cache.find(piece); it != cache.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::string mapped;
    for (unsigned char b : piece) mapped += alphabet().of_byte[b];
    std::vector<int32_t> sym;
    if (const auto whole = vocab.find(mapped); ignore_merges && whole != vocab.end()) {
      sym.push_back(whole->second);
    } else {
      for (unsigned char b : piece) sym.push_back(vocab.at(alphabet().of_byte[b]));
      // The adjacent pair of lowest rank merges (the leftmost among equals), until none can.
      while (sym.size() > 1) {
        int32_t best_rank = INT32_MAX, merged = -1;
        size_t at = 0;
        for (size_t i = 0; i + 1 < sym.size(); ++i) {
          if (ranks) {  // the rank of the concatenation, which is its id
            const auto m = vocab.find(token[static_cast<size_t>(sym[i])] +
                                      token[static_cast<size_t>(sym[i + 1])]);
            if (m != vocab.end() && m->second < best_rank &&
                !is_added[static_cast<size_t>(m->second)]) {
              best_rank = merged = m->second;
              at = i;
            }
            continue;
          }
          const auto m = merges.find(pair_key(sym[i], sym[i + 1]));
          if (m != merges.end() && m->second.first < best_rank) {
            best_rank = m->second.first;
            merged = m->second.second;
            at = i;
          }
        }
        if (merged < 0) break;
        sym[at] = merged;
        sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(at) + 1);
      }
    }
    out.insert(out.end(), sym.begin(), sym.end());
    std::lock_guard lock(cache_mu);
    if (cache.size() > 200000) cache.clear();  // bounded; refills with what text repeats
    cache.emplace(piece, std::move(sym));
  }

  // Normalisation, pre-tokenization and BPE of text that holds no added token.
  void encode_text(std::string_view text, std::vector<int32_t>& out) const {
    if (text.empty()) return;
#if defined(FP8RL_HAVE_ICU)
    UErrorCode st = U_ZERO_ERROR;
    icu::UnicodeString u = icu::UnicodeString::fromUTF8(
        icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
    if (nfc && !normalizer->isNormalized(u, st)) u = normalizer->normalize(u, st);
    check(U_SUCCESS(st), std::string("tokenizer: NFC normalisation failed: ") + u_errorName(st));
    split(u, 0, out);
#else
    (void)out;
    throw Error("this build has no ICU: Hugging Face tokenizers are not available");
#endif
  }

#if defined(FP8RL_HAVE_ICU)
  // Split `u` by pattern `level` (Isolated: each match is a piece, and so is the text between
  // matches), each piece by the next pattern, and the last patterns' pieces through BPE. A
  // piece is matched on its own, as Hugging Face's Split sees it (lookaheads end at its end).
  void split(const icu::UnicodeString& u, size_t level, std::vector<int32_t>& out) const {
    if (level == patterns.size()) {
      std::string piece;
      u.toUTF8String(piece);
      encode_piece(piece, out);
      return;
    }
    UErrorCode st = U_ZERO_ERROR;
    std::unique_ptr<icu::RegexMatcher> m(patterns[level]->matcher(u, st));
    check(U_SUCCESS(st), std::string("tokenizer: regex matcher: ") + u_errorName(st));
    int32_t last = 0;
    auto emit = [&](int32_t from, int32_t to) {
      if (to > from) split(icu::UnicodeString(u, from, to - from), level + 1, out);
    };
    while (m->find(st)) {
      const int32_t s = m->start(st), e = m->end(st);
      emit(last, s);
      emit(s, e);
      last = e;
    }
    check(U_SUCCESS(st), std::string("tokenizer: regex: ") + u_errorName(st));
    emit(last, u.length());
  }
#endif

  // Compiles the pre-tokenizer's split patterns (Hugging Face / tiktoken syntax); throws through
  // fail naming the pattern that does not compile.
  template <class Fail>
  void compile(const std::vector<std::string>& sources, Fail fail) {
#if defined(FP8RL_HAVE_ICU)
    for (size_t k = 0; k < sources.size(); ++k) {
      const std::string& pattern = sources[k];
      // ICU's \s lacks U+000B and U+0085, which the Hugging Face pattern's \s (White_Space)
      // has.
      std::string icu_pattern;
      for (size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] == '\\' && i + 1 < pattern.size()) {
          const char c = pattern[i + 1];
          icu_pattern += c == 's'   ? "\\p{White_Space}"
                         : c == 'S' ? "\\P{White_Space}"
                                    : pattern.substr(i, 2);
          ++i;
        } else {
          icu_pattern += pattern[i];
        }
      }
      UErrorCode st = U_ZERO_ERROR;
      UParseError pe;
      patterns.emplace_back(
          icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(icu_pattern), 0, pe, st));
      if (U_FAILURE(st))
        fail("the pre-tokenizer's regex " + std::to_string(k + 1) + " does not compile (" +
             std::string(u_errorName(st)) + " at offset " + std::to_string(pe.offset) + ")");
    }
    UErrorCode st = U_ZERO_ERROR;
    normalizer = icu::Normalizer2::getNFCInstance(st);
    check(U_SUCCESS(st), std::string("ICU NFC: ") + u_errorName(st));
#else
    (void)sources;
    (void)fail;
#endif
  }

  // Added tokens' lookup tables, after `added` is filled.
  void index_added() {
    std::stable_sort(added.begin(), added.end(), [](const Added& x, const Added& y) {
      return x.content.size() > y.content.size();
    });
    special.assign(token.size(), false);
    is_added.assign(token.size(), false);
    by_first.assign(256, {});
    for (size_t k = 0; k < added.size(); ++k) {
      const auto& a = added[k];
      special[static_cast<size_t>(a.id)] = a.special;
      is_added[static_cast<size_t>(a.id)] = true;
      if (!a.content.empty()) by_first[static_cast<unsigned char>(a.content[0])].push_back(k);
    }
  }
};

BpeTokenizer::BpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

bool BpeTokenizer::available() {
#if defined(FP8RL_HAVE_ICU)
  return true;
#else
  return false;
#endif
}

BpeTokenizer BpeTokenizer::load(const std::string& dir) {
  const std::string path = dir + "/tokenizer.json";
  if (!std::filesystem::exists(path) && std::filesystem::exists(dir + "/tiktoken.model"))
    return load_tiktoken(dir);
  check(std::filesystem::exists(path),
        path + " does not exist (a model folder needs its tokenizer.json)");
  const Json tok = read_json_file(path);
  const std::string config_path = dir + "/tokenizer_config.json";
  const Json config = std::filesystem::exists(config_path) ? read_json_file(config_path) : Json();
  return from_json(tok, config, path);
}

BpeTokenizer BpeTokenizer::from_json(const Json& t, const Json& config, const std::string& where) {
  check(available(),
        "this build has no ICU: Hugging Face tokenizers are not available (" + where + ")");
  auto fail = [&](const std::string& what) { throw Error(where + ": " + what); };
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  if (!t.is_object() || !t.contains("model")) fail("no \"model\" object");
  const Json& model = t.at("model");
  const std::string type = model.contains("type") ? model.at("type").as_string("model.type") : "";
  if (type != "BPE") fail("model.type \"" + type + "\" is not supported (only BPE)");
  auto flag = [&](const char* key) {
    return model.contains(key) && model.at(key).is_bool() && model.at(key).as_bool();
  };
  if (flag("byte_fallback")) fail("model.byte_fallback is not supported (byte-level BPE only)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && model.at(key).is_string() && !model.at(key).as_string().empty())
      fail(std::string("model.") + key + " is not supported");
  m.ignore_merges = flag("ignore_merges");

  // Vocabulary and merges.
  const auto& vocab = model.at("vocab").as_object("model.vocab");
  for (const auto& [tok, id] : vocab) {
    const int64_t i = id.as_int("model.vocab[" + tok + "]");
    if (i < 0 || i > 10'000'000) fail("model.vocab[" + tok + "]: id " + std::to_string(i));
    if (m.token.size() <= static_cast<size_t>(i)) m.token.resize(static_cast<size_t>(i) + 1);
    m.token[static_cast<size_t>(i)] = tok;
    m.vocab[tok] = static_cast<int32_t>(i);
  }
  for (int b = 0; b < 256; ++b)
    if (!m.vocab.count(alphabet().of_byte[b]))
      fail("model.vocab lacks the byte-level token of byte " + std::to_string(b) +
           " (not a byte-level BPE vocabulary)");
  const auto& merges = model.at("merges").as_array("model.merges");
  for (size_t r = 0; r < merges.size(); ++r) {
    std::string a, b;
    const Json& e = merges[r];
    if (e.is_string()) {  // "a b"
      const std::string s = e.as_string();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0) fail("model.merges[" + std::to_string(r) + "]");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else {  // ["a", "b"]
      const auto& p = e.as_array("model.merges[" + std::to_string(r) + "]");
      if (p.size() != 2) fail("model.merges[" + std::to_string(r) + "] is not a pair");
      a = p[0].as_string("merge");
      b = p[1].as_string("merge");
    }
    const auto ia = m.vocab.find(a), ib = m.vocab.find(b), ab = m.vocab.find(a + b);
    if (ia == m.vocab.end() || ib == m.vocab.end() || ab == m.vocab.end())
      fail("model.merges[" + std::to_string(r) + "] (\"" + a + "\", \"" + b +
           "\") names a token that is not in the vocabulary");
    m.merges.emplace(Impl::pair_key(ia->second, ib->second),
                     std::make_pair(static_cast<int32_t>(r), ab->second));
  }

  // Added tokens.
  if (t.contains("added_tokens") && !t.at("added_tokens").is_null())
    for (const auto& a : t.at("added_tokens").as_array("added_tokens")) {
      const std::string content = a.at("content").as_string("added_tokens content");
      for (const char* key : {"lstrip", "rstrip", "single_word"})
        if (a.contains(key) && a.at(key).as_bool(key))
          fail("added token \"" + content + "\": " + key + " is not supported");
      const int64_t id = a.at("id").as_int("added_tokens id");
      if (id < 0 || id > 10'000'000) fail("added token \"" + content + "\": id out of range");
      const bool special = a.contains("special") && a.at("special").as_bool("special");
      if (m.token.size() <= static_cast<size_t>(id)) m.token.resize(static_cast<size_t>(id) + 1);
      m.token[static_cast<size_t>(id)] = content;
      m.vocab[content] = static_cast<int32_t>(id);
      m.added.push_back({content, static_cast<int32_t>(id), special});
    }
  m.index_added();

  // Normalizer (none, NFC, or a Sequence of them: DeepSeek-V3's is empty) and pre-tokenizer.
  const Json& norm = t.contains("normalizer") ? t.at("normalizer") : Json();
  if (!norm.is_null()) {
    const std::string nt = norm.at("type").as_string("normalizer.type");
    std::vector<Json> parts = {norm};
    if (nt == "Sequence") parts = norm.at("normalizers").as_array("normalizer.normalizers");
    for (const Json& p : parts) {
      const std::string pnt = p.at("type").as_string("normalizer.type");
      if (pnt != "NFC") fail("normalizer \"" + pnt + "\" is not supported (none or NFC)");
      m.nfc = true;
    }
  }
  std::vector<std::string> patterns;
  const Json& pre = t.contains("pre_tokenizer") ? t.at("pre_tokenizer") : Json();
  auto byte_level = [&](const Json& p, bool with_regex_allowed) {
    if (p.contains("add_prefix_space") && p.at("add_prefix_space").as_bool("add_prefix_space"))
      fail("pre_tokenizer ByteLevel add_prefix_space is not supported");
    const bool use_regex = !p.contains("use_regex") || p.at("use_regex").as_bool("use_regex");
    if (use_regex) {
      if (!with_regex_allowed) fail("pre_tokenizer: Split regexes and ByteLevel's own regex");
      patterns.push_back(kGpt2Pattern);
    }
  };
  if (pre.is_null()) fail("no pre_tokenizer (a byte-level BPE needs ByteLevel)");
  const std::string pt = pre.at("type").as_string("pre_tokenizer.type");
  if (pt == "ByteLevel") {
    byte_level(pre, true);
  } else if (pt == "Sequence") {
    // Splits (Qwen's one, DeepSeek-V3's three: digits, CJK, the rest), then ByteLevel.
    const auto& seq = pre.at("pretokenizers").as_array("pre_tokenizer.pretokenizers");
    if (seq.size() < 2 || seq.back().at("type").as_string() != "ByteLevel")
      fail("pre_tokenizer: only Sequence[Split…, ByteLevel] is supported");
    for (size_t i = 0; i + 1 < seq.size(); ++i) {
      const Json& split = seq[i];
      if (split.at("type").as_string("pre_tokenizer type") != "Split")
        fail("pre_tokenizer: only Sequence[Split…, ByteLevel] is supported");
      if (split.at("behavior").as_string("Split.behavior") != "Isolated" ||
          (split.contains("invert") && split.at("invert").as_bool("Split.invert")))
        fail("pre_tokenizer Split: only behavior Isolated without invert is supported");
      patterns.push_back(split.at("pattern").at("Regex").as_string("Split.pattern.Regex"));
    }
    byte_level(seq.back(), false);
  } else {
    fail("pre_tokenizer \"" + pt + "\" is not supported (ByteLevel, or Splits then ByteLevel)");
  }
  if (t.contains("decoder") && !t.at("decoder").is_null() &&
      t.at("decoder").at("type").as_string("decoder.type") != "ByteLevel")
    fail("decoder \"" + t.at("decoder").at("type").as_string() + "\" is not supported");

  m.compile(patterns, fail);

  // eos and pad from tokenizer_config.json.
  auto id_of = [&](const char* key) -> std::optional<int32_t> {
    if (!config.is_object() || !config.contains(key) || config.at(key).is_null())
      return std::nullopt;
    const std::string name = token_content(config.at(key), std::string("tokenizer_config ") + key);
    const auto it = m.vocab.find(name);
    if (it == m.vocab.end())
      throw Error(where + ": tokenizer_config.json " + key + " \"" + name +
                  "\" is not a token of the tokenizer");
    return it->second;
  };
  m.eos = id_of("eos_token");
  m.pad = id_of("pad_token");
  return BpeTokenizer(std::move(impl));
}

namespace {

// Standard base64 (RFC 4648, '=' padding) to bytes; nullopt when s is not base64.
std::optional<std::string> from_base64(std::string_view s) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  if (s.empty() || s.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < s.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = s[i + k];
      if (c == '=' && i + 4 == s.size() && k >= 2) {
        ++pad;
        v <<= 6;
        continue;
      }
      const int d = value(c);
      if (d < 0 || pad > 0) return std::nullopt;
      v = (v << 6) | static_cast<uint32_t>(d);
    }
    out += static_cast<char>((v >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

}  // namespace

BpeTokenizer BpeTokenizer::from_tiktoken(
    const std::string& ranks_path, const std::string& pattern,
    const std::vector<std::pair<std::string, int32_t>>& special, const Json& config) {
  check(available(),
        "this build has no ICU: Hugging Face tokenizers are not available (" + ranks_path + ")");
  auto fail = [&](const std::string& what) { throw Error(ranks_path + ": " + what); };
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.ranks = true;
  m.ignore_merges = true;  // tiktoken emits a piece that is a token as it is
  const std::string text = read_text_file(ranks_path);
  size_t line_no = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + at, end - at);
    at = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    const auto bytes =
        sp == std::string_view::npos ? std::nullopt : from_base64(line.substr(0, sp));
    char* rest = nullptr;
    const std::string rank_text(sp == std::string_view::npos ? "" : line.substr(sp + 1));
    const long long rank = std::strtoll(rank_text.c_str(), &rest, 10);
    if (!bytes || bytes->empty() || rank_text.empty() || *rest != '\0' || rank < 0 ||
        rank > 10'000'000)
      fail("line " + std::to_string(line_no) +
           " is not \"<base64 token> <rank>\" (a tiktoken ranks file)");
    std::string tok;
    for (unsigned char b : *bytes) tok += alphabet().of_byte[b];
    if (m.token.size() <= static_cast<size_t>(rank)) m.token.resize(static_cast<size_t>(rank) + 1);
    if (!m.token[static_cast<size_t>(rank)].empty() || m.vocab.count(tok))
      fail("line " + std::to_string(line_no) + ": rank " + std::to_string(rank) +
           " or its token appears twice");
    m.token[static_cast<size_t>(rank)] = tok;
    m.vocab[tok] = static_cast<int32_t>(rank);
  }
  for (int b = 0; b < 256; ++b)
    if (!m.vocab.count(alphabet().of_byte[b]))
      fail("no token for byte " + std::to_string(b) + " (not a byte-level ranks file)");
  for (const auto& [content, id] : special) {
    if (id < 0 || id > 10'000'000) fail("special token \"" + content + "\": id out of range");
    if (m.token.size() <= static_cast<size_t>(id)) m.token.resize(static_cast<size_t>(id) + 1);
    if (!m.token[static_cast<size_t>(id)].empty())
      fail("special token \"" + content + "\" takes id " + std::to_string(id) +
           ", which a rank has");
    m.token[static_cast<size_t>(id)] = content;
    m.vocab[content] = id;
    m.added.push_back({content, id, true});
  }
  m.index_added();
  m.compile({pattern}, fail);
  auto id_of = [&](const char* key) -> std::optional<int32_t> {
    if (!config.is_object() || !config.contains(key) || config.at(key).is_null())
      return std::nullopt;
    const std::string name = token_content(config.at(key), std::string("tokenizer_config ") + key);
    const auto it = m.vocab.find(name);
    if (it == m.vocab.end())
      fail("tokenizer_config.json " + std::string(key) + " \"" + name +
           "\" is not a token of the tokenizer");
    return it->second;
  };
  m.eos = id_of("eos_token");
  m.pad = id_of("pad_token");
  return BpeTokenizer(std::move(impl));
}

BpeTokenizer BpeTokenizer::load_tiktoken(const std::string& dir) {
  const std::string ranks = dir + "/tiktoken.model";
  const std::string config_path = dir + "/tokenizer_config.json";
  check(std::filesystem::exists(config_path),
        config_path + " does not exist (a tiktoken folder names its special tokens there)");
  const Json config = read_json_file(config_path);
  // Moonshot's layout: kMoonshotReservedSpecial ids after the ranks, named by the config's
  // added_tokens_decoder, the others <|reserved_token_{id}|>.
  int32_t base = 0;
  {
    const std::string text = read_text_file(ranks);
    for (char c : text) base += c == '\n';
    if (!text.empty() && text.back() != '\n') ++base;
  }
  std::map<int32_t, std::string> named;
  if (config.contains("added_tokens_decoder"))
    for (const auto& [id, t] : config.at("added_tokens_decoder").as_object("added_tokens_decoder"))
      named[static_cast<int32_t>(std::stol(id))] = token_content(t, "added_tokens_decoder " + id);
  std::vector<std::pair<std::string, int32_t>> special;
  for (int32_t id = base; id < base + kMoonshotReservedSpecial; ++id) {
    const auto it = named.find(id);
    special.emplace_back(
        it != named.end() ? it->second : "<|reserved_token_" + std::to_string(id) + "|>", id);
  }
  for (const auto& [id, content] : named)
    if (id < base || id >= base + kMoonshotReservedSpecial)
      throw Error(config_path + ": added token \"" + content + "\" has id " + std::to_string(id) +
                  ", outside the " + std::to_string(kMoonshotReservedSpecial) +
                  " special ids after the " + std::to_string(base) + " ranks");
  return from_tiktoken(ranks, kMoonshotPattern, special, config);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool special) const {
  const Impl& m = *impl_;
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    check(n > 0, "tokenizer: the text is not valid UTF-8 at byte " + std::to_string(i));
    i += n;
  }
  std::vector<int32_t> out;
  size_t start = 0, i = 0;
  while (i < text.size()) {
    const Impl::Added* hit = nullptr;
    for (size_t k : m.by_first[static_cast<unsigned char>(text[i])]) {
      const auto& a = m.added[k];
      if ((special || !a.special) && text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;  // longest first
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    m.encode_text(text.substr(start, i - start), out);
    out.push_back(hit->id);
    i += hit->content.size();
    start = i;
  }
  m.encode_text(text.substr(start), out);
  return out;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  const Impl& m = *impl_;
  std::string out;
  for (int32_t id : ids) {
    check(id >= 0 && static_cast<size_t>(id) < m.token.size() &&
              !m.token[static_cast<size_t>(id)].empty(),
          "tokenizer: id " + std::to_string(id) + " is not in the vocabulary (" +
              std::to_string(m.token.size()) + " ids)");
    if (m.special[static_cast<size_t>(id)] && skip_special) continue;
    const std::string& tok = m.token[static_cast<size_t>(id)];
    out += m.is_added[static_cast<size_t>(id)] ? tok : token_bytes(tok);
  }
  return out;
}

std::string BpeTokenizer::token_text(int32_t id) const {
  const std::string bytes = decode(std::span(&id, 1));
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = utf8_sequence_length(bytes, i);
    if (n == 0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned char>(bytes[i]));
      out += buf;
      ++i;
    } else {
      out += bytes.substr(i, n);
      i += n;
    }
  }
  return out;
}

int32_t BpeTokenizer::size() const {
  return static_cast<int32_t>(impl_->token.size());
}

std::optional<int32_t> BpeTokenizer::token_id(std::string_view token) const {
  const auto it = impl_->vocab.find(std::string(token));
  if (it == impl_->vocab.end()) return std::nullopt;
  return it->second;
}

std::optional<int32_t> BpeTokenizer::eos_id() const {
  return impl_->eos;
}

std::optional<int32_t> BpeTokenizer::pad_id() const {
  return impl_->pad;
}

bool BpeTokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->special.size() &&
         impl_->special[static_cast<size_t>(id)];
}

}  // namespace fp8rl
