#include "text/bpe_tokenizer.hpp"

#include <algorithm>
#include <climits>
#include <filesystem>
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
  std::unique_ptr<icu::RegexPattern> pattern;
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
    std::unique_ptr<icu::RegexMatcher> m(pattern->matcher(u, st));
    check(U_SUCCESS(st), std::string("tokenizer: regex matcher: ") + u_errorName(st));
    // Isolated: each match is a piece, and so is the text between matches.
    int32_t last = 0;
    std::string piece;
    auto emit = [&](int32_t from, int32_t to) {
      if (to <= from) return;
      piece.clear();
      u.tempSubStringBetween(from, to).toUTF8String(piece);
      encode_piece(piece, out);
    };
    while (m->find(st)) {
      const int32_t s = m->start(st), e = m->end(st);
      emit(last, s);
      emit(s, e);
      last = e;
    }
    check(U_SUCCESS(st), std::string("tokenizer: regex: ") + u_errorName(st));
    emit(last, u.length());
#else
    (void)out;
    throw Error("this build has no ICU: Hugging Face tokenizers are not available");
#endif
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
  std::stable_sort(m.added.begin(), m.added.end(), [](const Impl::Added& x, const Impl::Added& y) {
    return x.content.size() > y.content.size();
  });
  m.special.assign(m.token.size(), false);
  m.is_added.assign(m.token.size(), false);
  m.by_first.assign(256, {});
  for (size_t k = 0; k < m.added.size(); ++k) {
    const auto& a = m.added[k];
    m.special[static_cast<size_t>(a.id)] = a.special;
    m.is_added[static_cast<size_t>(a.id)] = true;
    if (!a.content.empty()) m.by_first[static_cast<unsigned char>(a.content[0])].push_back(k);
  }

  // Normalizer and pre-tokenizer.
  const Json& norm = t.contains("normalizer") ? t.at("normalizer") : Json();
  if (!norm.is_null()) {
    const std::string nt = norm.at("type").as_string("normalizer.type");
    if (nt != "NFC") fail("normalizer \"" + nt + "\" is not supported (none or NFC)");
    m.nfc = true;
  }
  std::string pattern;
  const Json& pre = t.contains("pre_tokenizer") ? t.at("pre_tokenizer") : Json();
  auto byte_level = [&](const Json& p, bool with_regex_allowed) {
    if (p.contains("add_prefix_space") && p.at("add_prefix_space").as_bool("add_prefix_space"))
      fail("pre_tokenizer ByteLevel add_prefix_space is not supported");
    const bool use_regex = !p.contains("use_regex") || p.at("use_regex").as_bool("use_regex");
    if (use_regex) {
      if (!with_regex_allowed) fail("pre_tokenizer: two regexes");
      pattern = kGpt2Pattern;
    }
  };
  if (pre.is_null()) fail("no pre_tokenizer (a byte-level BPE needs ByteLevel)");
  const std::string pt = pre.at("type").as_string("pre_tokenizer.type");
  if (pt == "ByteLevel") {
    byte_level(pre, true);
  } else if (pt == "Sequence") {
    const auto& seq = pre.at("pretokenizers").as_array("pre_tokenizer.pretokenizers");
    if (seq.size() != 2 || seq[0].at("type").as_string() != "Split" ||
        seq[1].at("type").as_string() != "ByteLevel")
      fail("pre_tokenizer: only Sequence[Split, ByteLevel] is supported");
    const Json& split = seq[0];
    if (split.at("behavior").as_string("Split.behavior") != "Isolated" ||
        (split.contains("invert") && split.at("invert").as_bool("Split.invert")))
      fail("pre_tokenizer Split: only behavior Isolated without invert is supported");
    pattern = split.at("pattern").at("Regex").as_string("Split.pattern.Regex");
    byte_level(seq[1], false);
  } else {
    fail("pre_tokenizer \"" + pt + "\" is not supported (ByteLevel, or Split then ByteLevel)");
  }
  if (t.contains("decoder") && !t.at("decoder").is_null() &&
      t.at("decoder").at("type").as_string("decoder.type") != "ByteLevel")
    fail("decoder \"" + t.at("decoder").at("type").as_string() + "\" is not supported");

#if defined(FP8RL_HAVE_ICU)
  // ICU's \s lacks U+000B and U+0085, which the Hugging Face pattern's \s (White_Space) has.
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
  m.pattern.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(icu_pattern), 0, pe, st));
  if (U_FAILURE(st))
    fail("the pre-tokenizer's regex does not compile (" + std::string(u_errorName(st)) +
         " at offset " + std::to_string(pe.offset) + ")");
  m.normalizer = icu::Normalizer2::getNFCInstance(st);
  check(U_SUCCESS(st), std::string("ICU NFC: ") + u_errorName(st));
#endif

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
