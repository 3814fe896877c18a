// Bad input, table-driven: configurations, tasks, checkpoints, models and run stores that are
// wrong in one way each, given to the fp8rl command as a user would. Every case must exit
// non-zero with one error line that names the file, setting or tensor and what is wrong (not our
// source file and line) — and leave what is already stored as it was: the run database's
// recorded run (its rows, its integrity) and the checkpoint it wrote (its checksums, its scores).
#include <QtTest>

#include <sys/resource.h>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <csignal>
#include <cstring>
#include <functional>

#include "run_process.hpp"

namespace {

const QString kCli = QStringLiteral(FP8RL_CLI);

// Runs fp8rl; limit_bytes > 0: with writes beyond that file size failing (as on a full disk).
ProcessResult fp8rl(const QStringList& args, const QProcessEnvironment& env,
                    qint64 limit_bytes = 0) {
  std::function<void()> limit;
  if (limit_bytes > 0)
    limit = [limit_bytes] {
      std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails with EFBIG
      const rlimit r{static_cast<rlim_t>(limit_bytes), static_cast<rlim_t>(limit_bytes)};
      setrlimit(RLIMIT_FSIZE, &r);
    };
  return run_process(kCli, args, env, limit);
}

QByteArray read_all(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

void write_all(const QString& path, const QByteArray& bytes) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
  f.write(bytes);
}

// A safetensors file as its header (JSON) and data, to be changed and written back.
struct SafeTensors {
  QJsonObject header;
  QByteArray data;

  static SafeTensors read(const QString& path) {
    const QByteArray b = read_all(path);
    quint64 n = 0;
    std::memcpy(&n, b.constData(), 8);
    return {QJsonDocument::fromJson(b.mid(8, static_cast<qsizetype>(n))).object(),
            b.mid(8 + static_cast<qsizetype>(n))};
  }
  void write(const QString& path) const {
    const QByteArray h = QJsonDocument(header).toJson(QJsonDocument::Compact);
    const quint64 n = static_cast<quint64>(h.size());
    QByteArray b(reinterpret_cast<const char*>(&n), 8);
    write_all(path, b + h + data);
  }
  // Sets element i of an F32 tensor.
  void set_float(const QString& name, qsizetype i, float v) {
    const qsizetype at = header[name].toObject()["data_offsets"].toArray()[0].toInteger() + 4 * i;
    std::memcpy(data.data() + at, &v, 4);
  }
  void set_field(const QString& name, const QString& key, const QJsonValue& v) {
    QJsonObject t = header[name].toObject();
    t[key] = v;
    header[name] = t;
  }
};

// A copy of folder `from` as `to` (files only).
void copy_folder(const QString& from, const QString& to) {
  QDir().mkpath(to);
  for (const QString& f : QDir(from).entryList(QDir::Files))
    QVERIFY(QFile::copy(from + "/" + f, to + "/" + f));
}

struct Case {
  const char* name;
  // Prepares what the case needs in dir and returns fp8rl's arguments.
  std::function<QStringList(const QString& dir)> setup;
  const char* says;  // in the error line
  qint64 limit_bytes = 0;
};

}  // namespace

class TestBadInputs : public QObject {
  Q_OBJECT

  QTemporaryDir root_;
  QString good_, fp8_, db_;
  QProcessEnvironment env_;

  // What a case must leave alone: the recorded run and the checkpoint, as text.
  QString stored() {
    QString s;
    for (const QStringList& a : {QStringList{"runs", "show", "1"},
                                 {"runs", "export", "1", "--csv"},
                                 {"runs", "check"},
                                 {"score", "--checkpoint", good_, "--token-ids", "1,2,3"}}) {
      const ProcessResult r = fp8rl(a, env_);
      s += QString::number(r.code) + ": " + r.out;
    }
    s += read_all(good_ + "/checksums.json");
    // No run was added either (the list's age column changes: count its rows).
    s += QString::number(fp8rl({"runs", "list"}, env_).out.count('\n'));
    return s;
  }

 private slots:
  void initTestCase() {
    env_ = QProcessEnvironment::systemEnvironment();
    db_ = root_.filePath("runs.sqlite");
    env_.insert("FP8RL_DB", db_);
    env_.remove("FP8RL_PRESETS");
    good_ = root_.filePath("good");
    fp8_ = root_.filePath("good-fp8");
    const ProcessResult t = fp8rl({"train", "--preset", "demo", "--backend", "cpu", "--output",
                                   good_, "--set", "sft.steps=1", "--set", "grpo.steps=2", "--set",
                                   "grpo.prompts_per_step=2", "--set", "task.validation_size=8"},
                                  env_);
    QVERIFY2(t.code == 0, qPrintable(t.out));
    const ProcessResult c =
        fp8rl({"convert", "--checkpoint", good_, "--to", "fp8", "--output", fp8_}, env_);
    QVERIFY2(c.code == 0, qPrintable(c.out));
  }

  void eachNamesTheProblemAndChangesNothing() {
    const QString good = good_, fp8 = fp8_, db = db_;
    auto train_with = [](QStringList sets) {
      QStringList a = {"train", "--preset", "demo", "--backend", "cpu"};
      for (const QString& s : sets) a << "--set" << s;
      return a;
    };
    auto config_file = [](const QString& dir, const char* name, const QByteArray& text) {
      write_all(dir + "/" + name, text);
      return QStringList{"train", "--backend", "cpu", "--config", dir + "/" + name};
    };
    // A copy of the good checkpoint changed by f, scored.
    auto broken_checkpoint = [good](const QString& dir,
                                    const std::function<void(const QString&)>& f,
                                    bool keep_checksums = false) {
      const QString ck = dir + "/ckpt";
      copy_folder(good, ck);
      if (!keep_checksums) QFile::remove(ck + "/checksums.json");  // the structural check speaks
      f(ck);
      return QStringList{"score", "--checkpoint", ck, "--token-ids", "1,2,3"};
    };
    auto tensors = [](const QString& ck, const std::function<void(SafeTensors&)>& f) {
      SafeTensors st = SafeTensors::read(ck + "/model.safetensors");
      f(st);
      st.write(ck + "/model.safetensors");
    };
    const char* q1 = "model.layers.1.self_attn.q_proj.weight";

    const std::vector<Case> cases = {
        // --- configurations
        {"unknown key", [&](auto) { return train_with({"grpo.stepz=3"}); },
         "unknown setting 'grpo.stepz'"},
        {"unknown section", [&](auto) { return train_with({"foo.bar=1"}); },
         "unknown setting 'foo'"},
        {"wrong type", [&](auto) { return train_with({"grpo.steps=abc"}); },
         "setting 'grpo.steps' must be a number"},
        {"negative step count", [&](auto) { return train_with({"grpo.steps=-1"}); }, "grpo.steps"},
        {"negative model size", [&](auto) { return train_with({"model.hidden_size=-64"}); },
         "setting 'model.hidden_size' must be positive, got -64"},
        {"zero group size", [&](auto) { return train_with({"grpo.group_size=0"}); },
         "setting 'grpo.group_size' must be positive"},
        {"unknown precision name", [&](auto) { return train_with({"precision.default=fp16"}); },
         "'fp16'"},
        {"override of a layer that does not exist",
         [&](auto) { return train_with({"precision.overrides=[\"5.q=bf16\"]"}); }, "layer '5'"},
        {"override of an unknown module",
         [&](auto) { return train_with({"precision.overrides=[\"0.qq=bf16\"]"}); }, "module 'qq'"},
        {"override without a precision",
         [&](auto) { return train_with({"precision.overrides=[\"0.q\"]"}); },
         "is not LAYER.MODULE=PRECISION"},
        {"unknown KV-cache type", [&](auto) { return train_with({"precision.kv_cache=int8"}); },
         "setting 'precision.kv_cache' is 'int8'"},
        {"learning rate out of range", [&](auto) { return train_with({"optimizer.lr=5"}); },
         "setting 'optimizer.lr'"},
        {"zero temperature", [&](auto) { return train_with({"grpo.temperature=0"}); },
         "setting 'grpo.temperature'"},
        {"importance bounds that meet",
         [&](auto) {
           return train_with({"grpo.is_min=1", "grpo.is_max=1"});
         },
         "is_min < is_max"},
        {"mini-batches that do not divide the batch",
         [&](auto) { return train_with({"grpo.mini_batches=7"}); }, "grpo.mini_batches"},
        {"config file missing",
         [&](const QString& d) {
           return QStringList{"train", "--config", d + "/missing.yaml"};
         },
         "cannot open"},
        {"YAML syntax error",
         [&](const QString& d) { return config_file(d, "c.yaml", "grpo: [unclosed\n"); },
         "c.yaml:1:"},
        {"JSON syntax error",
         [&](const QString& d) { return config_file(d, "c.json", "{\"grpo\": }"); },
         "c.json: json: unexpected character"},
        {"config that is a list",
         [&](const QString& d) { return config_file(d, "c.yaml", "- a\n- b\n"); },
         "c.yaml: expected a mapping of settings"},
        {"section that is a number",
         [&](const QString& d) { return config_file(d, "c.yaml", "grpo: 3\n"); },
         "setting 'grpo' must be a mapping"},
        {"unknown preset",
         [&](auto) {
           return QStringList{"train", "--preset", "nope"};
         },
         "unknown preset 'nope'"},
        {"task file missing",
         [&](const QString& d) {
           return train_with({"task.name=jsonl", "task.path=" + d + "/missing.jsonl"});
         },
         "missing.jsonl"},
        {"task file line that is not JSON",
         [&](const QString& d) {
           write_all(d + "/t.jsonl", "{\"prompt\": \"1+1=\", \"answer\": \"2\"}\nnot json\n");
           return train_with({"task.name=jsonl", "task.path=" + d + "/t.jsonl"});
         },
         "t.jsonl:2: not valid JSON"},
        {"resume of a run that does not exist",
         [&](auto) {
           return QStringList{"train", "--resume", "99"};
         },
         "99"},
        {"resume of a finished run",
         [&](auto) {
           return QStringList{"train", "--resume", "1"};
         },
         "run 1 has finished"},
        // --- checkpoints and models
        {"checkpoint folder missing",
         [&](const QString& d) {
           return QStringList{"score", "--checkpoint", d + "/nothing", "--token-ids", "1,2"};
         },
         "nothing/config.json"},
        {"config.json missing",
         [&](const QString& d) {
           return broken_checkpoint(d,
                                    [](const QString& ck) { QFile::remove(ck + "/config.json"); });
         },
         "ckpt/config.json"},
        {"config.json not JSON",
         [&](const QString& d) {
           return broken_checkpoint(
               d, [](const QString& ck) { write_all(ck + "/config.json", "{x"); });
         },
         "ckpt/config.json: json:"},
        {"unsupported architecture",
         [&](const QString& d) {
           return broken_checkpoint(d, [](const QString& ck) {
             QByteArray c = read_all(ck + "/config.json");
             write_all(ck + "/config.json", c.replace("Qwen3ForCausalLM", "GPT2LMHeadModel"));
           });
         },
         "model architecture \"GPT2LMHeadModel\" is not supported"},
        {"truncated safetensors",
         [&](const QString& d) {
           return broken_checkpoint(d, [](const QString& ck) {
             QFile f(ck + "/model.safetensors");
             QVERIFY(f.resize(f.size() / 2));
           });
         },
         "model.safetensors: tensor"},
        {"safetensors header larger than the file",
         [&](const QString& d) {
           return broken_checkpoint(d, [](const QString& ck) {
             QByteArray b = read_all(ck + "/model.safetensors");
             b.replace(0, 8, QByteArray(6, '\xff') + QByteArray(2, '\0'));
             write_all(ck + "/model.safetensors", b);
           });
         },
         "model.safetensors declares a header of"},
        {"wrong dtype",
         [&](const QString& d) {
           return broken_checkpoint(d, [&](const QString& ck) {
             tensors(ck, [&](SafeTensors& st) { st.set_field(q1, "dtype", "I32"); });
           });
         },
         "model.layers.1.self_attn.q_proj.weight"},
        {"shape mismatch",
         [&](const QString& d) {
           return broken_checkpoint(d, [](const QString& ck) {
             QByteArray c = read_all(ck + "/config.json");
             write_all(ck + "/config.json",
                       c.replace("\"intermediate_size\": 256", "\"intermediate_size\": 128"));
           });
         },
         "has shape"},
        {"missing tensor",
         [&](const QString& d) {
           return broken_checkpoint(d, [&](const QString& ck) {
             tensors(ck, [&](SafeTensors& st) { st.header.remove(q1); });
           });
         },
         "missing tensors: model.layers.1.self_attn.q_proj.weight"},
        {"NaN weights",
         [&](const QString& d) {
           return broken_checkpoint(d, [&](const QString& ck) {
             tensors(ck, [&](SafeTensors& st) { st.set_float(q1, 5, std::nanf("")); });
           });
         },
         "tensor model.layers.1.self_attn.q_proj.weight holds NaN at [0, 5]"},
        {"corrupt FP8 scale",
         [&](const QString& d) {
           const QString ck = d + "/ckpt";
           copy_folder(fp8, ck);
           SafeTensors st = SafeTensors::read(ck + "/model.safetensors");
           st.set_float("model.layers.0.mlp.down_proj.weight_scale_inv", 0, -1.0f);
           st.write(ck + "/model.safetensors");
           return QStringList{"score", "--checkpoint", ck,   "--token-ids",
                              "1,2,3", "--precision",  "fp8"};
         },
         "model.layers.0.mlp.down_proj.weight_scale_inv holds -1 at [0, 0]"},
        {"file changed since written (checksum)",
         [&](const QString& d) {
           return broken_checkpoint(
               d,
               [&](const QString& ck) {
                 tensors(ck, [&](SafeTensors& st) { st.set_float(q1, 3, 0.5f); });
               },
               true);
         },
         "model.safetensors has CRC-32C"},
        // --- run stores and disks
        {"store from a newer version",
         [&](const QString& d) {
           QFile::copy(db, d + "/newer.sqlite");
           // Stamped by SQLite's own pragma through python3's sqlite3 (a newer build's file).
           QProcess::execute("python3", {"-c",
                                         "import sqlite3,sys;c=sqlite3.connect(sys.argv[1]);"
                                         "c.execute('PRAGMA user_version=99');c.commit()",
                                         d + "/newer.sqlite"});
           return QStringList{"runs", "list", "--db", d + "/newer.sqlite"};
         },
         "newer.sqlite': database schema version 99 is newer than this build supports"},
        {"store that is not a database",
         [&](const QString& d) {
           write_all(d + "/x.sqlite", "these are not the runs you are looking for");
           return QStringList{"runs", "list", "--db", d + "/x.sqlite"};
         },
         "x.sqlite': reading the schema version: file is not a database"},
        {"store on a read-only file system",
         [&](auto) {
           return QStringList{"train", "--preset", "demo", "--db", "/proc/self/fp8rl/runs.sqlite"};
         },
         "run store '/proc/self/fp8rl/runs.sqlite': cannot create directory"},
        {"store on a full device",
         [&](auto) {
           return QStringList{"train", "--preset", "demo", "--db", "/dev/full"};
         },
         "database or disk is full"},
        {"checkpoint on a full disk",
         [&](const QString& d) {
           return train_with({"sft.steps=1", "grpo.steps=1", "grpo.prompts_per_step=2"})
                  << "--no-db"
                  << "--output" << d + "/ck";
         },
         "write failed for", 300 * 1024},
    };
    QVERIFY(cases.size() >= 30);

    const QString before = stored();
    QStringList failures;
    int n = 0;
    const QRegularExpression location(QStringLiteral(R"(\(\w+\.(cpp|hpp):\d+\))"));
    for (const Case& c : cases) {
      QTemporaryDir dir;
      const QStringList args = c.setup(dir.path());
      const ProcessResult r = fp8rl(args, env_, c.limit_bytes);
      const QStringList errors = r.out.split('\n').filter(QStringLiteral(": error: "));
      // One line naming the problem, without our source location (that is for --debug).
      const bool ok = r.code != 0 && errors.size() == 1 && errors[0].contains(c.says) &&
                      !errors[0].contains(QStringLiteral(" error: : ")) &&
                      !location.match(errors[0]).hasMatch();
      if (!ok)
        failures << QStringLiteral("%1: exit %2, wanted one error line with '%3', got:\n%4")
                        .arg(c.name)
                        .arg(r.code)
                        .arg(c.says, r.out.trimmed());
      ++n;
    }
    QVERIFY2(failures.isEmpty(), qPrintable(failures.join(QStringLiteral("\n\n"))));
    QCOMPARE(n, int(cases.size()));
    // What was stored before is as it was.
    QCOMPARE(stored(), before);
  }
};

QTEST_GUILESS_MAIN(TestBadInputs)
#include "test_bad_inputs.moc"
