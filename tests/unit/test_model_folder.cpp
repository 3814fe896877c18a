// A Hugging Face model folder end to end, as a user brings one: a tiny random Qwen3 (config.json,
// BF16 weights in shards with model.safetensors.index.json, generation_config.json) with a
// byte-level BPE tokenizer and its tokenizer_config.json — a small one written here, and the real
// Qwen3 tokenizer when ./test.sh could fetch it — and a GSM8K-style JSONL dataset. `fp8rl train
// --model DIR` runs two GRPO steps on it (prompts through the chat template, the maths reward) and
// its checkpoint carries the tokenizer on; `generate` and `score` take the same folder; and a
// malformed JSONL line, a missing tokenizer and an unsupported architecture are named.
#include <QtTest>

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>

#include "run_process.hpp"
#include "small_tokenizer.hpp"

namespace {

ProcessResult run_cli(const QStringList& args) {
  return run_process(QStringLiteral(FP8RL_CLI), args);
}

void write_file(const QString& path, const QByteArray& text) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
  f.write(text);
}

QJsonObject last_json_line(const QString& out) {
  QJsonObject o;
  for (const QString& l : out.split('\n', Qt::SkipEmptyParts)) {
    const auto d = QJsonDocument::fromJson(l.toUtf8());
    if (d.isObject()) o = d.object();
  }
  return o;
}

// GSM8K's shape: a question, a worked answer ending in "#### N".
QByteArray dataset() {
  QByteArray d;
  for (int i = 1; i <= 12; ++i)
    d += QStringLiteral(
             "{\"question\": \"Tom has %1 apples and buys %2 more. How many apples does he "
             "have?\", \"answer\": \"%1 + %2 = %3\\n#### %3\"}\n")
             .arg(i)
             .arg(2 * i)
             .arg(3 * i)
             .toUtf8();
  return d;
}

}  // namespace

class TestModelFolder : public QObject {
  Q_OBJECT

  QTemporaryDir root_;

  // A tiny Qwen3 folder with the tokenizer files in `tokenizer` (vocab_size: the model's
  // embedding rows): random weights written by `fp8rl init`, converted to sharded BF16.
  QString makeModel(const QString& name, const QString& tokenizer, int vocab_size,
                    const QJsonObject& family = {}) {
    const QString dir = root_.filePath(name), fp32 = root_.filePath(name + "-fp32");
    QJsonObject cfg{{"hidden_size", 32},
                    {"num_hidden_layers", 2},
                    {"num_attention_heads", 2},
                    {"num_key_value_heads", 1},
                    {"head_dim", 16},
                    {"intermediate_size", 64},
                    {"vocab_size", vocab_size},
                    {"max_position_embeddings", 512},
                    {"tie_word_embeddings", true},
                    {"model_type", "qwen3"}};
    for (auto it = family.begin(); it != family.end(); ++it) cfg[it.key()] = it.value();
    write_file(root_.filePath(name + ".json"), QJsonDocument(cfg).toJson());
    ProcessResult r =
        run_cli({"init", "--config", root_.filePath(name + ".json"), "--output", fp32});
    if (r.code != 0) return "init: " + r.out;
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      QFile::copy(tokenizer + "/" + f, fp32 + "/" + f);
    write_file(fp32 + "/generation_config.json", R"({"eos_token_id": 0})");
    r = run_cli({"convert", "--checkpoint", fp32, "--to", "bf16", "--output", dir,
                 "--max-shard-size", "20000"});
    if (r.code != 0) return "convert: " + r.out;
    return dir;
  }

  // train, generate, score and tokenize on the folder; the tokenizer's ids of the chat prompt
  // (Qwen3's, or Llama 3.1's with llama) as the family's template renders it. sets: more for
  // train.
  void endToEnd(const QString& model, bool llama = false, const QStringList& sets = {}) {
    QVERIFY2(QFile::exists(model + "/model.safetensors.index.json"), qPrintable(model));
    QVERIFY(QFile::exists(model + "/tokenizer.json"));
    const QString data = root_.filePath("gsm8k.jsonl");
    write_file(data, dataset());
    const QString out = model + "-trained";
    QStringList train = {"train",
                         "--preset",
                         "math",
                         "--model",
                         model,
                         "--no-db",
                         "--json",
                         "--backend",
                         "cpu",
                         "--output",
                         out,
                         "--set",
                         "task.path=" + data,
                         "--set",
                         "grpo.steps=2",
                         "--set",
                         "grpo.prompts_per_step=2",
                         "--set",
                         "grpo.group_size=2",
                         "--set",
                         "task.max_response_tokens=6",
                         "--set",
                         "validation.every=0",
                         "--set",
                         "grpo.micro_batch_size=4"};
    ProcessResult r = run_cli(train + sets);
    QVERIFY2(r.code == 0, qPrintable(r.out));
    QCOMPARE(last_json_line(r.out)["rl_steps"].toInt(), 2);
    // The checkpoint carries the model's tokenizer on (a later run or generate reads it).
    QVERIFY(QFile::exists(out + "/tokenizer.json") &&
            QFile::exists(out + "/tokenizer_config.json"));

    const QString prompt = QStringLiteral("Tom has 5 apples and buys 3 more. How many?");
    r = run_cli({"generate", "--model", model, "--prompt", prompt, "--max-new-tokens", "4",
                 "--temperature", "0", "--backend", "cpu"});
    QVERIFY2(r.code == 0, qPrintable(r.out));
    const QJsonObject gen = last_json_line(r.out);
    QVERIFY(gen.contains("text"));
    // Its prompt is the chat template's, as `tokenize` encodes it.
    const QString chat =
        llama ? "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge "
                "Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>"
                "user<|end_header_id|>\n\n" +
                    prompt + "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
              : "<|im_start|>user\n" + prompt + "<|im_end|>\n<|im_start|>assistant\n";
    r = run_cli({"tokenize", "--model", model, "--text", chat});
    QVERIFY2(r.code == 0, qPrintable(r.out));
    const QJsonArray ids = QJsonDocument::fromJson(r.out.trimmed().toUtf8()).array();
    QCOMPARE(gen["prompt_ids"].toArray(), ids);
    QStringList id_list;
    for (const auto& v : ids) id_list << QString::number(v.toInt());
    r = run_cli({"score", "--model", model, "--token-ids", id_list.join(','), "--backend", "cpu"});
    QVERIFY2(r.code == 0, qPrintable(r.out));
    const QJsonArray lp = last_json_line(r.out)["logprobs"].toArray();
    QCOMPARE(lp.size(), ids.size() - 1);
    for (const auto& v : lp) QVERIFY(v.isDouble() && v.toDouble() <= 0);
  }

 private slots:
  void smallTokenizer() {
    const QString tok = root_.filePath("small-tokenizer");
    QDir().mkpath(tok);
    const fp8rl::Json t = small_tokenizer_json({{"<|endoftext|>", true},
                                                {"<|im_start|>", true},
                                                {"<|im_end|>", true},
                                                {"<think>", false},
                                                {"</think>", false}});
    write_file(tok + "/tokenizer.json", QByteArray::fromStdString(t.dump()));
    write_file(tok + "/tokenizer_config.json",
               R"({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})");
    const QString model = makeModel("small", tok, 272);
    endToEnd(model);
  }

  // Llama 3.1 (Llama 3's rotary scaling, several eos ids) and Qwen3-MoE (experts in every
  // other layer; GRPO with routing replay) folders with the small tokenizer.
  void otherFamilies() {
    const QString tok = root_.filePath("small-tokenizer");
    const QJsonObject llama{
        {"model_type", "llama"},
        {"architectures", QJsonArray{"LlamaForCausalLM"}},
        {"rope_theta", 500000.0},
        {"eos_token_id", QJsonArray{0, 1}},
        {"rope_scaling", QJsonObject{{"rope_type", "llama3"},
                                     {"factor", 8.0},
                                     {"low_freq_factor", 1.0},
                                     {"high_freq_factor", 4.0},
                                     {"original_max_position_embeddings", 64}}}};
    endToEnd(makeModel("llama", tok, 272, llama), true);
    const QJsonObject moe{{"model_type", "qwen3_moe"},
                          {"architectures", QJsonArray{"Qwen3MoeForCausalLM"}},
                          {"num_experts", 4},
                          {"num_experts_per_tok", 2},
                          {"moe_intermediate_size", 32},
                          {"norm_topk_prob", true},
                          {"decoder_sparse_step", 2}};
    const QString moe_dir = makeModel("moe", tok, 272, moe);
    endToEnd(moe_dir, false,
             {"--set", "moe.routing_replay=rollout", "--set", "precision.kv_cache=fp8"});
    // Routing replay off: the trainer routes by its own routers and reports how often they
    // differ from the generator's (the FP8 KV cache makes them differ).
    const ProcessResult r = run_cli({"train",
                                     "--preset",
                                     "math",
                                     "--model",
                                     moe_dir,
                                     "--no-db",
                                     "--json",
                                     "--backend",
                                     "cpu",
                                     "--set",
                                     "task.path=" + root_.filePath("gsm8k.jsonl"),
                                     "--set",
                                     "grpo.steps=1",
                                     "--set",
                                     "grpo.prompts_per_step=2",
                                     "--set",
                                     "grpo.group_size=2",
                                     "--set",
                                     "task.max_response_tokens=6",
                                     "--set",
                                     "validation.every=0",
                                     "--set",
                                     "precision.kv_cache=fp8",
                                     "--set",
                                     "moe.routing_replay=off"});
    QVERIFY2(r.code == 0, qPrintable(r.out));
    bool reported = false;
    for (const QString& l : r.out.split('\n', Qt::SkipEmptyParts)) {
      const QJsonObject o = QJsonDocument::fromJson(l.toUtf8()).object();
      if (o["phase"].toString() == "rl")
        reported = o["scalars"].toObject().contains("moe/L1/routing_mismatch") &&
                   !o["scalars"].toObject().contains("moe/L0/routing_mismatch");
    }
    QVERIFY2(reported, "no routing mismatch of the layer with experts (and only of it)");
  }

  void realLlamaTokenizer() {
    const QString tok = QStringLiteral(FP8RL_LLAMA3_TOKENIZER);
    if (!QFile::exists(tok + "/tokenizer.json"))
      QSKIP(qPrintable("no Llama 3.1 tokenizer files in " + tok +
                       " (./test.sh fetches them with npm; npm missing or offline)"));
    const QJsonObject llama{{"model_type", "llama"},
                            {"architectures", QJsonArray{"LlamaForCausalLM"}},
                            {"eos_token_id", QJsonArray{128001, 128008, 128009}}};
    endToEnd(makeModel("llama-tiny", tok, 128256, llama), true);
  }

  void realQwen3Tokenizer() {
    const QString tok = QStringLiteral(FP8RL_QWEN3_TOKENIZER);
    if (!QFile::exists(tok + "/tokenizer.json"))
      QSKIP(qPrintable("no Qwen3 tokenizer files in " + tok +
                       " (./test.sh fetches them with npm; npm missing or offline)"));
    endToEnd(makeModel("qwen3-tiny", tok, 151936));
  }

  void problemsAreNamed() {
    const QString data = root_.filePath("bad.jsonl");
    write_file(data, dataset().left(200) + "\n{\"question\": \"no answer\"}\n");
    // A model folder without its tokenizer.
    const QString bare = root_.filePath("bare");
    QVERIFY(run_cli({"init", "--config", root_.filePath("small.json"), "--output", bare}).code ==
            0);
    ProcessResult r = run_cli({"train", "--preset", "math", "--model", bare, "--no-db", "--set",
                               "task.path=" + root_.filePath("gsm8k.jsonl")});
    QVERIFY2(r.code == 1 && r.out.contains(bare + "/tokenizer.json does not exist"),
             qPrintable(r.out));
    // A malformed record, named by file and line.
    r = run_cli({"train", "--preset", "math", "--model", root_.filePath("small"), "--no-db",
                 "--set", "task.path=" + data});
    QVERIFY2(r.code == 1 && r.out.contains("bad.jsonl:"), qPrintable(r.out));
    // An architecture this engine does not run.
    const QString mistral = root_.filePath("mistral");
    QDir().mkpath(mistral);
    for (const QString& f : QDir(root_.filePath("small")).entryList(QDir::Files))
      QFile::copy(root_.filePath("small") + "/" + f, mistral + "/" + f);
    QFile cfg(mistral + "/config.json");
    QVERIFY(cfg.open(QIODevice::ReadOnly));
    QByteArray text = cfg.readAll();
    cfg.close();
    write_file(
        mistral + "/config.json",
        text.replace("\"qwen3\"", "\"mistral\"").replace("Qwen3ForCausalLM", "MistralForCausalLM"));
    r = run_cli({"train", "--preset", "math", "--model", mistral, "--no-db", "--set",
                 "task.path=" + root_.filePath("gsm8k.jsonl")});
    QVERIFY2(
        r.code == 1 && r.out.contains("mistral/config.json") &&
            r.out.contains(
                "\"MistralForCausalLM\" is not supported (supported: "
                "Qwen3ForCausalLM, LlamaForCausalLM, Qwen3MoeForCausalLM, DeepseekV3ForCausalLM)"),
        qPrintable(r.out));
  }
};

QTEST_GUILESS_MAIN(TestModelFolder)
#include "test_model_folder.moc"
