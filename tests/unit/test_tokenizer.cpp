// Hugging Face byte-level BPE tokenizers: the real Qwen3 tokenizer against reference ids from an
// independent implementation (tests/data/README.md), round trips of any UTF-8 text, added and
// special tokens, the chat template against Jinja2's rendering, and errors that name the file and
// the field. A small tokenizer written here covers merges by rank without the fetched files.
#include <QtTest>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <random>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/utf8.hpp"
#include "error_of.hpp"
#include "small_tokenizer.hpp"
#include "text/bpe_tokenizer.hpp"
#include "text/chat_template.hpp"
#include "text/tokenizer.hpp"

using namespace fp8rl;

namespace {

const QString kData = QStringLiteral(FP8RL_TEST_DATA);
const QString kQwen3 = QStringLiteral(FP8RL_QWEN3_TOKENIZER);
const QString kLlama3 = QStringLiteral(FP8RL_LLAMA3_TOKENIZER);
const QString kDeepseekV3 = QStringLiteral(FP8RL_DEEPSEEK_V3_TOKENIZER);
const QString kTiktoken = QStringLiteral(FP8RL_TIKTOKEN_RANKS);

QJsonObject read_json(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QJsonDocument::fromJson(f.readAll()).object();
}

std::vector<int32_t> ids_of(const QJsonArray& a) {
  std::vector<int32_t> v;
  for (const auto& x : a) v.push_back(x.toInt());
  return v;
}

QString show(const std::vector<int32_t>& ids) {
  QStringList s;
  for (int32_t i : ids) s << QString::number(i);
  return s.join(',');
}

}  // namespace

class TestTokenizer : public QObject {
  Q_OBJECT
  std::optional<BpeTokenizer> qwen3_, llama3_, deepseek_v3_;

  // The reference ids of tests/data/<name>_tokenizer_reference.json, and round trips.
  void matchesReference(const BpeTokenizer& tok, const QString& name) {
    const QJsonObject ref = read_json(kData + "/" + name + "_tokenizer_reference.json");
    const QJsonArray cases = ref["cases"].toArray();
    QVERIFY(cases.size() >= 30);
    QStringList wrong;
    for (const auto& c : cases) {
      const std::string text = c.toObject()["text"].toString().toStdString();
      const auto want = ids_of(c.toObject()["ids"].toArray());
      const auto got = tok.encode(text);
      if (got != want)
        wrong << QStringLiteral("%1\n  want %2\n  got  %3")
                     .arg(QString::fromStdString(text).left(60), show(want), show(got));
      // Round trip, but for the strings NFC changes (combining marks, U+212B, U+1E9B): those
      // decode to their composed form, which encodes to the same ids again.
      const std::string back = tok.decode(got);
      if (back != text && tok.encode(back) != got)
        wrong << QStringLiteral("round trip of %1").arg(QString::fromStdString(text).left(60));
    }
    QVERIFY2(wrong.isEmpty(), qPrintable(wrong.join('\n')));
  }

 private slots:
  void initTestCase() {
    if (!BpeTokenizer::available()) QSKIP("this build has no ICU: no Hugging Face tokenizers");
    if (QFile::exists(kQwen3 + "/tokenizer.json"))
      qwen3_.emplace(BpeTokenizer::load(kQwen3.toStdString()));
    if (QFile::exists(kLlama3 + "/tokenizer.json"))
      llama3_.emplace(BpeTokenizer::load(kLlama3.toStdString()));
    if (QFile::exists(kDeepseekV3 + "/tokenizer.json"))
      deepseek_v3_.emplace(BpeTokenizer::load(kDeepseekV3.toStdString()));
  }

  void smallTokenizerMergesByRank() {
    const BpeTokenizer t = BpeTokenizer::from_json(
        small_tokenizer_json({{"<|end|>", true}, {"<x>", false}}), Json(), "small");
    auto id = [&](const char* tok) { return *t.token_id(tok); };
    QCOMPARE(t.encode("low"), (std::vector<int32_t>{id("low")}));
    QCOMPARE(t.encode("lower"), (std::vector<int32_t>{id("low"), id("er")}));
    // " low": ("l","o") first, then ("lo","w") (rank 1) before ("Ġ","lo") (rank 3).
    QCOMPARE(t.encode(" low"), (std::vector<int32_t>{id("\xc4\xa0"), id("low")}));
    QCOMPARE(t.encode(" lo"), (std::vector<int32_t>{id("\xc4\xa0lo")}));
    QCOMPARE(t.encode("a<|end|>b<x>"),
             (std::vector<int32_t>{id("a"), id("<|end|>"), id("b"), id("<x>")}));
    // Special tokens as text: <|end|> is bytes, the plain added <x> is still matched.
    const auto plain = t.encode("<|end|><x>", false);
    QVERIFY(std::find(plain.begin(), plain.end(), id("<|end|>")) == plain.end());
    QCOMPARE(plain.back(), id("<x>"));
    QCOMPARE(t.decode(plain), std::string("<|end|><x>"));
    QCOMPARE(t.decode(t.encode("a<|end|>b"), /*skip_special=*/true), std::string("ab"));
    QVERIFY(t.is_special(id("<|end|>")) && !t.is_special(id("<x>")));
    QCOMPARE(t.token_text(id("\xc4\xa0lo")), std::string(" lo"));
  }

  void qwen3MatchesTheReferenceIds() {
    if (!qwen3_)
      QSKIP(qPrintable(QStringLiteral("no Qwen3 tokenizer files in %1 (./test.sh fetches "
                                      "them with npm; npm missing or offline)")
                           .arg(kQwen3)));
    matchesReference(*qwen3_, QStringLiteral("qwen3"));
  }

  // Llama 3.1's tokenizer.json (byte-level BPE with Llama 3's pre-tokenizer: digits in runs of
  // up to three, case-insensitive contractions; ignore_merges) against its reference ids.
  void llama3MatchesTheReferenceIds() {
    if (!llama3_)
      QSKIP(qPrintable(QStringLiteral("no Llama 3.1 tokenizer files in %1 (./test.sh fetches "
                                      "them with npm; npm missing or offline)")
                           .arg(kLlama3)));
    matchesReference(*llama3_, QStringLiteral("llama3"));
    QCOMPARE(*llama3_->token_id("<|begin_of_text|>"), 128000);
    QCOMPARE(*llama3_->token_id("<|eot_id|>"), 128009);
    QCOMPARE(*llama3_->eos_id(), 128009);  // tokenizer_config.json's eos_token
  }

  // DeepSeek-V3's tokenizer.json: three Splits in turn (digits in runs of up to three, CJK runs,
  // then letters, punctuation and spaces), byte level without its own regex, an empty normalizer
  // sequence.
  void deepseekV3MatchesTheReferenceIds() {
    if (!deepseek_v3_)
      QSKIP(qPrintable(QStringLiteral("no DeepSeek-V3 tokenizer files in %1 (./test.sh fetches "
                                      "them with npm; npm missing or offline)")
                           .arg(kDeepseekV3)));
    matchesReference(*deepseek_v3_, QStringLiteral("deepseek_v3"));
    QCOMPARE(*deepseek_v3_->token_id("<｜begin▁of▁sentence｜>"), 0);
    QCOMPARE(*deepseek_v3_->eos_id(), 1);  // <｜end▁of▁sentence｜>
    // The chat markers are added tokens (not special ones: they stay when special tokens are
    // read as text).
    QCOMPARE(deepseek_v3_->encode("<｜User｜>", /*special=*/false).size(), size_t{1});
  }

  void deepseekV3ChatTemplateMatchesJinja() {
    const QJsonObject ref = read_json(kData + "/deepseek_v3_chat_reference.json");
    const QJsonArray cases = ref["cases"].toArray();
    QCOMPARE(cases.size(), 2);
    for (const auto& cv : cases) {
      ChatOptions o;
      o.template_name = "deepseek_v3";
      std::string user;
      for (const auto& m : cv.toObject()["messages"].toArray())
        (m.toObject()["role"].toString() == "system" ? o.system : user) =
            m.toObject()["content"].toString().toStdString();
      QCOMPARE(QString::fromStdString(chat_prompt(user, o)), cv.toObject()["text"].toString());
    }
  }

  // tiktoken's ranks-file format: cl100k_base and o200k_base (their ranks as files, their split
  // patterns and special tokens) against js-tiktoken's ids, and round trips.
  void tiktokenMatchesTheReferenceIds() {
    if (!QFile::exists(kTiktoken + "/o200k_base.tiktoken"))
      QSKIP(qPrintable(QStringLiteral("no tiktoken ranks in %1 (./test.sh converts js-tiktoken's "
                                      "with npm and node; missing or offline)")
                           .arg(kTiktoken)));
    const QJsonObject ref = read_json(kData + "/tiktoken_reference.json")["encodings"].toObject();
    QCOMPARE(ref.size(), 2);
    for (const QString& name : {QStringLiteral("cl100k_base"), QStringLiteral("o200k_base")}) {
      const Json meta =
          Json::parse(read_text_file((kTiktoken + "/" + name + ".json").toStdString()));
      std::vector<std::pair<std::string, int32_t>> special;
      for (const auto& [content, id] : meta.at("special_tokens").as_object())
        special.emplace_back(content, static_cast<int32_t>(id.as_int()));
      const BpeTokenizer tok =
          BpeTokenizer::from_tiktoken((kTiktoken + "/" + name + ".tiktoken").toStdString(),
                                      meta.at("pat_str").as_string(), special);
      const QJsonArray cases = ref[name].toArray();
      QVERIFY(cases.size() >= 25);
      QStringList wrong;
      for (const auto& c : cases) {
        const std::string text = c.toObject()["text"].toString().toStdString();
        const auto want = ids_of(c.toObject()["ids"].toArray());
        const auto got = tok.encode(text);
        if (got != want)
          wrong << QStringLiteral("%1 %2\n  want %3\n  got  %4")
                       .arg(name, QString::fromStdString(text).left(60), show(want), show(got));
        if (tok.decode(got) != text)
          wrong << QStringLiteral("%1: round trip of %2").arg(name, QString::fromStdString(text));
      }
      QVERIFY2(wrong.isEmpty(), qPrintable(wrong.join('\n')));
    }
  }

  // A Moonshot tiktoken folder (Moonlight's layout: tiktoken.model, tokenizer_config.json with the
  // special tokens after the ranks): its pattern keeps Han runs apart, the 256 ids after the
  // ranks are special (named or reserved), and a DeepSeek-V3 model's prompts take Moonlight's
  // template.
  void moonshotTiktokenFolder() {
    QTemporaryDir dir;
    const std::string d = dir.path().toStdString();
    std::string ranks;
    auto b64 = [](const std::string& bytes) {
      return QByteArray::fromStdString(bytes).toBase64().toStdString();
    };
    for (int b = 0; b < 256; ++b)
      ranks += b64(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
    const std::vector<std::string> merged = {"he", "ll", "hell", "hello", "中文", " w", "or"};
    for (size_t i = 0; i < merged.size(); ++i)
      ranks += b64(merged[i]) + " " + std::to_string(256 + i) + "\n";
    write_private_file(d + "/tiktoken.model", ranks);
    write_private_file(d + "/tokenizer_config.json", R"({"tokenizer_class": "TikTokenTokenizer",
      "eos_token": "[EOS]", "added_tokens_decoder": {"263": {"content": "[BOS]", "special": true},
      "264": {"content": "[EOS]", "special": true}, "265": {"content": "<|im_end|>",
      "special": true}, "266": {"content": "<|im_system|>", "special": true}, "267":
      {"content": "<|im_middle|>", "special": true}, "273": {"content": "<|im_user|>",
      "special": true}}})");
    const BpeTokenizer tok = BpeTokenizer::load_tiktoken(d);
    QCOMPARE(tok.size(), 263 + 256);
    QCOMPARE(*tok.eos_id(), 264);
    QCOMPARE(*tok.token_id("<|reserved_token_300|>"), 300);
    QVERIFY(tok.is_special(265) && tok.is_special(300) && !tok.is_special(259));
    auto id = [&](const char* t) { return *tok.token_id(t); };
    // "hello" is one token; the Han run its own piece (without the pattern's Han branch it would
    // join the letters before it).
    QCOMPARE(tok.encode("hello中文<|im_end|>"), (std::vector<int32_t>{id("hello"), 260, 265}));
    // " w" (rank 261) merges before "or" (262); nothing merges with them after.
    QCOMPARE(tok.encode(" world"), (std::vector<int32_t>{261, 262, 'l', 'd'}));
    QCOMPARE(tok.decode(tok.encode("hello 中文 world!")), std::string("hello 中文 world!"));
    ChatOptions chat;
    chat.template_name = "deepseek_v3";
    const auto folder = load_tokenizer(d, chat);
    QVERIFY(folder != nullptr);
    const auto prompt = folder->encode_prompt("hi");
    QCOMPARE(prompt.front(), 266);  // <|im_system|>: Moonlight's template
    QCOMPARE(prompt[1], int32_t{'s'});
    QCOMPARE(folder->decode(prompt).substr(0, 6), std::string("system"));  // specials left out
  }

  void llama3ChatTemplateMatchesJinja() {
    const QJsonObject ref = read_json(kData + "/llama3_chat_reference.json");
    const QJsonArray cases = ref["cases"].toArray();
    QCOMPARE(cases.size(), 3);
    for (const auto& cv : cases) {
      const QJsonObject c = cv.toObject();
      const QJsonArray messages = c["messages"].toArray();
      ChatOptions o;
      o.template_name = "llama3";
      o.date = c["date"].toString().toStdString();
      std::string user;
      for (const auto& m : messages) {
        const auto role = m.toObject()["role"].toString();
        const auto content = m.toObject()["content"].toString().toStdString();
        (role == "system" ? o.system : user) = content;
      }
      QCOMPARE(QString::fromStdString(chat_prompt(user, o)), c["text"].toString());
    }
  }

  void qwen3RoundTripsAnyText() {
    if (!qwen3_) QSKIP("no Qwen3 tokenizer files (see qwen3MatchesTheReferenceIds)");
    // Code points NFC leaves alone: ASCII (controls included), Latin-1, CJK, Hangul syllables,
    // emoji, whitespace of all kinds (not U+2000/2001: NFC maps them to U+2002/2003), private
    // use, astral planes.
    const std::vector<std::pair<uint32_t, uint32_t>> ranges = {
        {0x01, 0x7F},       {0xA0, 0xFF},     {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3},
        {0x1F300, 0x1F5FF}, {0x2002, 0x200A}, {0xE000, 0xE0FF}, {0x20000, 0x2A6DF}};
    std::mt19937 rng(20261125);
    for (int n = 0; n < 300; ++n) {
      std::string s;
      const int len = static_cast<int>(rng() % 80);
      for (int i = 0; i < len; ++i) {
        const auto& [lo, hi] = ranges[rng() % ranges.size()];
        append_utf8(s, lo + rng() % (hi - lo + 1));
        if (rng() % 5 == 0) s += " ";
      }
      const auto ids = qwen3_->encode(s);
      QVERIFY2(qwen3_->decode(ids) == s, qPrintable(QString::fromStdString(s)));
    }
  }

  void qwen3SpecialTokens() {
    if (!qwen3_) QSKIP("no Qwen3 tokenizer files (see qwen3MatchesTheReferenceIds)");
    const int32_t im_start = *qwen3_->token_id("<|im_start|>");
    const int32_t think = *qwen3_->token_id("<think>");
    QCOMPARE(im_start, 151644);
    QCOMPARE(*qwen3_->eos_id(), 151645);  // <|im_end|>, tokenizer_config.json's eos_token
    QCOMPARE(*qwen3_->pad_id(), 151643);  // <|endoftext|>
    const std::string text = "<|im_start|>user\n<think>x</think><|im_end|>";
    const auto plain = qwen3_->encode(text, /*special=*/false);
    for (int32_t id : plain) QVERIFY2(!qwen3_->is_special(id), qPrintable(QString::number(id)));
    QVERIFY(std::find(plain.begin(), plain.end(), think) != plain.end());  // not special
    QCOMPARE(qwen3_->decode(plain), text);
    QCOMPARE(qwen3_->decode(qwen3_->encode(text), /*skip_special=*/true),
             std::string("user\n<think>x</think>"));
  }

  void chatTemplateMatchesJinja() {
    const QJsonObject ref = read_json(kData + "/qwen3_chat_reference.json");
    const QJsonArray cases = ref["cases"].toArray();
    QCOMPARE(cases.size(), 4);
    for (const auto& v : cases) {
      const QJsonObject c = v.toObject();
      ChatOptions o;
      std::string user;
      for (const auto& m : c["messages"].toArray()) {
        const QJsonObject msg = m.toObject();
        if (msg["role"] == QStringLiteral("system"))
          o.system = msg["content"].toString().toStdString();
        if (msg["role"] == QStringLiteral("user")) user = msg["content"].toString().toStdString();
      }
      o.thinking = c["enable_thinking"].toBool();
      QCOMPARE(QString::fromStdString(qwen3_chat_prompt(user, o)), c["text"].toString());
    }
  }

  void badInputIsNamed() {
    const BpeTokenizer t = BpeTokenizer::from_json(
        small_tokenizer_json({{"<|end|>", true}, {"<x>", false}}), Json(), "small");
    QVERIFY(error_of([&] { t.encode("ok \xff bad"); }).contains("not valid UTF-8 at byte 3"));
    QVERIFY(error_of([&] { t.decode(std::vector<int32_t>{99999}); }).contains("id 99999"));
    QTemporaryDir dir;
    QVERIFY(error_of([&] {
              BpeTokenizer::load(dir.path().toStdString());
            }).contains("tokenizer.json does not exist"));
    Json j = small_tokenizer_json({{"<|end|>", true}, {"<x>", false}});
    j["model"]["type"] = "WordPiece";
    QVERIFY(error_of([&] {
              BpeTokenizer::from_json(j, Json(), "x/tokenizer.json");
            }).contains("x/tokenizer.json: model.type \"WordPiece\" is not supported"));
    j = small_tokenizer_json({{"<|end|>", true}, {"<x>", false}});
    j["model"]["merges"] = Json::Array{Json("q z")};
    QVERIFY(error_of([&] {
              BpeTokenizer::from_json(j, Json(), "t");
            }).contains("model.merges[0] (\"q\", \"z\") names a token that is not in the"));
    Json config;
    config["eos_token"] = "<|nope|>";
    QVERIFY(error_of([&] {
              BpeTokenizer::from_json(small_tokenizer_json({{"<|end|>", true}, {"<x>", false}}),
                                      config, "t");
            }).contains("eos_token \"<|nope|>\" is not a token"));
  }
};

QTEST_GUILESS_MAIN(TestTokenizer)
#include "test_tokenizer.moc"
