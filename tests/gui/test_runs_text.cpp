// The runs panel's filter grammar, a configuration as text, what validation messages name and how
// the runs table's columns share a width: the studio's plain C++ (no Qt in the code under test;
// Qt Test only runs it).
#include <QtTest>
#include <cmath>
#include <string>
#include <vector>

#include "ui/runs/column_fit.hpp"
#include "ui/runs/config_text.hpp"
#include "ui/runs/run_filter.hpp"
#include "ui/runs/validation_message.hpp"

using fp8rl::Json;
using namespace fp8rl::ui;

namespace {

const char* kConfig = R"({
  "name": "my run",
  "checkpoint": {"dir": "", "every": 0},
  "grpo": {"steps": 400, "temperature": 1, "clip_low": 0.2},
  "model": {"num_hidden_layers": 2, "init_std": 0.05},
  "optimizer": {"lr": 0.0005, "betas": [0.9, 0.999], "warmup": null},
  "precision": {"default": "bf16", "overrides": ["0.gate=fp8"]},
  "task": {"name": "reverse", "path": ""}
})";

// One run as the filter sees it; the strings live in the struct.
struct Run {
  std::string name = "my run", status = "running", preset = "demo", precision = "bf16",
              tags = "baseline, seed-1", notes = "Looks stable", config;
  int64_t id = 7;
  std::optional<int64_t> step = 120;
  Run() : config(flattenConfig(Json::parse(kConfig))) {}
  RunFilterSubject subject() const {
    return {id, name, status, preset, precision, tags, notes, step, config};
  }
};

bool passes(const std::string& filter, const Run& run = Run()) {
  return RunFilter::parse(filter).matches(run.subject());
}

// The message parsing `filter` throws, "" when it parses.
QString errorOf(const std::string& filter) {
  try {
    RunFilter::parse(filter);
  } catch (const RunFilterError& e) {
    return QString::fromStdString(e.what());
  }
  return {};
}

}  // namespace

class TestRunsText : public QObject {
  Q_OBJECT
 private slots:
  // --- RunFilter

  void emptyFilterPassesAll() {
    QVERIFY(passes(""));
    QVERIFY(passes("   \t "));
    QVERIFY(RunFilter::parse("  ").terms().empty());
    QVERIFY(RunFilter().matches(Run().subject()));
  }

  void textTerms() {
    QVERIFY(passes("MY"));        // name, any case
    QVERIFY(passes("dem"));       // preset
    QVERIFY(passes("BF16"));      // precision
    QVERIFY(passes("seed-1"));    // tags
    QVERIFY(passes("stable"));    // notes
    QVERIFY(passes("runn"));      // status
    QVERIFY(!passes("reverse"));  // configuration values are not text
    QVERIFY(passes("my demo"));   // all terms must match
    QVERIFY(!passes("my tiny"));
    QVERIFY(passes("\"my run\""));  // quotes group words
    QVERIFY(!passes("\"run my\""));
    QVERIFY(passes("\"\" my"));  // an empty term is no term
    const RunFilter f = RunFilter::parse("a \"b c\"  d");
    QCOMPARE(f.terms().size(), size_t(3));
    QCOMPARE(f.terms()[1].value, std::string("b c"));
    QVERIFY(f.terms()[1].op == RunFilter::Op::kText);
  }

  void keyValueTerms() {
    QVERIFY(passes("precision.default=bf16"));
    QVERIFY(passes("default=BF16"));            // a key may omit its section; any case
    QVERIFY(passes("PRECISION.DEFAULT:bf16"));  // ':' is '='
    QVERIFY(!passes("default=fp8"));
    QVERIFY(!passes("ault=bf16"));  // a whole dotted part, not a suffix
    QVERIFY(passes("task.name=reverse name=\"my run\""));
    QVERIFY(passes("lr=5e-4"));  // numbers compare as numbers
    QVERIFY(passes("lr=0.00050"));
    QVERIFY(passes("steps=400.0"));
    QVERIFY(passes("betas=0.999"));           // one item of a list
    QVERIFY(passes("overrides=0.gate=fp8"));  // the value runs to the end of the term
    QVERIFY(passes("task.path="));            // an empty value matches an empty one
    QVERIFY(!passes("task.name="));
    QVERIFY(passes("warmup=null"));
    QVERIFY(!passes("nosuch=1"));
    const RunFilter f = RunFilter::parse("Grpo.Steps>=100");
    QCOMPARE(f.terms()[0].key, std::string("grpo.steps"));
    QVERIFY(f.terms()[0].op == RunFilter::Op::kGreaterEqual);
    QCOMPARE(*f.terms()[0].number, 100.0);
  }

  void numericComparisons() {
    QVERIFY(passes("lr<0.001"));
    QVERIFY(!passes("lr>0.001"));
    QVERIFY(passes("lr<=0.0005"));
    QVERIFY(!passes("lr<0.0005"));
    QVERIFY(passes("lr>=5e-4"));
    QVERIFY(!passes("lr>0.0005"));
    QVERIFY(passes("grpo.steps>100 grpo.steps<1000"));
    QVERIFY(passes("betas<0.95"));  // 0.9 of [0.9, 0.999]
    QVERIFY(!passes("betas>1"));
    QVERIFY(!passes("default<1"));  // text is no number
  }

  void runColumns() {
    Run run;
    QVERIFY(passes("status=running", run));
    QVERIFY(passes("status=RUNNING", run));
    QVERIFY(!passes("status=runn", run));  // the whole value
    QVERIFY(passes("preset=demo", run));
    QVERIFY(passes("id=7 id>=7 id<8", run));
    QVERIFY(passes("step>100", run));
    QVERIFY(!passes("step<100", run));
    QVERIFY(passes("tags=baseline tag=seed", run));  // tags and notes: found in
    QVERIFY(passes("notes=STABLE", run));
    run.step.reset();
    QVERIFY(!passes("step>0", run));
    QVERIFY(!passes("step=0", run));
    // A configuration key wins over a column: "name" is the config's.
    run.name = "other";
    QVERIFY(passes("name=\"my run\"", run));
    QCOMPARE(RunFilter::runKeys(),
             (std::vector<std::string>{"status", "preset", "id", "step", "tags", "notes"}));
  }

  void statusFilter() {
    RunFilter f = RunFilter::parse("my");
    f.setStatus("finished");
    QCOMPARE(f.status(), std::string("finished"));
    QVERIFY(!f.matches(Run().subject()));
    f.setStatus("running");
    QVERIFY(f.matches(Run().subject()));
    f.setStatus("");
    QVERIFY(f.matches(Run().subject()));
  }

  void badFiltersSayWhy() {
    QVERIFY(errorOf("lr<0.1 my").isEmpty());
    QString e = errorOf("name=\"my run");
    QVERIFY2(e.contains("unclosed quote"), qPrintable(e));
    e = errorOf("=bf16");
    QVERIFY2(e.contains("'=bf16'") && e.contains("no key"), qPrintable(e));
    e = errorOf(">3");
    QVERIFY2(e.contains("no key before '>'"), qPrintable(e));
    e = errorOf("lr<abc");
    QVERIFY2(e.contains("'lr<abc'") && e.contains("compares numbers") &&
                 e.contains("'abc' is not a number"),
             qPrintable(e));
    e = errorOf("grpo.steps>=");
    QVERIFY2(e.contains("'grpo.steps>='") && e.contains("needs a number after '>='"),
             qPrintable(e));
    e = errorOf("my lr>");
    QVERIFY2(e.contains("'lr>'"), qPrintable(e));
  }

  // --- Configuration text

  void numbers() {
    QCOMPARE(numberText(400), std::string("400"));
    QCOMPARE(numberText(-3), std::string("-3"));
    QCOMPARE(numberText(0.0005), std::string("0.0005"));
    QCOMPARE(numberText(0.2), std::string("0.2"));
    QCOMPARE(numberText(2.5), std::string("2.5"));
    QCOMPARE(numberText(1e-6), std::string("1e-06"));
    QCOMPARE(numberText(1e20), std::string("1e+20"));
    QCOMPARE(numberText(0.1 + 0.2), std::string("0.30000000000000004"));
    QCOMPARE(parseNumber(" 1e-3 "), std::optional<double>(0.001));
    QCOMPARE(parseNumber("+2"), std::optional<double>(2));
    QCOMPARE(parseNumber("-0.5"), std::optional<double>(-0.5));
    for (const char* none : {"", " ", "abc", "1x", "1,5", "inf", "nan", "--1"})
      QVERIFY2(!parseNumber(none), none);
  }

  void valuesAndFlattening() {
    const Json c = Json::parse(kConfig);
    QCOMPARE(valueText(c.at("optimizer").at("betas")), std::string("0.9, 0.999"));
    QCOMPARE(valueText(c.at("optimizer").at("betas"), ","), std::string("0.9,0.999"));
    QCOMPARE(valueText(c.at("optimizer").at("warmup")), std::string());
    QCOMPARE(valueText(Json(true)), std::string("true"));
    QCOMPARE(valueText(c.at("grpo").at("clip_low")), std::string("0.2"));
    QCOMPARE(valueText(c.at("task")), c.at("task").dump());
    const std::string flat = flattenConfig(c);
    for (const char* line :
         {"name=my run\n", "optimizer.lr=0.0005\n", "optimizer.betas=0.9,0.999\n",
          "optimizer.warmup=null\n", "checkpoint.dir=\n", "grpo.steps=400\n",
          "precision.overrides=0.gate=fp8\n"})
      QVERIFY2(flat.find(line) != std::string::npos, line);
    QCOMPARE(flattenConfig(Json(3)), std::string());
  }

  void settingsByDottedKey() {
    Json c = Json::parse(kConfig);
    QCOMPARE(findSetting(c, "grpo.steps")->as_number(), 400.0);
    QCOMPARE(findSetting(c, "name")->as_string(), std::string("my run"));
    QVERIFY(!findSetting(c, "grpo.nosuch"));
    QVERIFY(!findSetting(c, "name.deeper"));
    setSetting(c, "grpo.steps", Json(5));
    setSetting(c, "new.section.key", Json("x"));
    QCOMPARE(c.at("grpo").at("steps").as_number(), 5.0);
    QCOMPARE(c.at("new").at("section").at("key").as_string(), std::string("x"));
    QCOMPARE(split("a,,b", ','), (std::vector<std::string_view>{"a", "", "b"}));
    QCOMPARE(split("", '.'), std::vector<std::string_view>{""});
  }

  void fieldsBackToJson() {
    const Json c = Json::parse(kConfig);
    QVERIFY(fieldKind(c.at("grpo").at("steps")) == FieldKind::kNumber);
    QVERIFY(fieldKind(c.at("task").at("name")) == FieldKind::kText);
    QVERIFY(fieldKind(Json(false)) == FieldKind::kBool);
    QVERIFY(fieldKind(c.at("optimizer").at("betas")) == FieldKind::kList);
    QVERIFY(fieldKind(c.at("optimizer").at("warmup")) == FieldKind::kNullable);

    QCOMPARE(fieldValue(FieldKind::kNumber, "1e-3", nullptr).as_number(), 0.001);
    // Not a number: stays text, for the engine's validation to name.
    QCOMPARE(fieldValue(FieldKind::kNumber, "many", nullptr).as_string(), std::string("many"));
    QCOMPARE(fieldValue(FieldKind::kBool, "true", nullptr).as_bool(), true);
    QCOMPARE(fieldValue(FieldKind::kBool, "no", nullptr).as_bool(), false);
    QVERIFY(fieldValue(FieldKind::kNullable, "  ", nullptr).is_null());
    QCOMPARE(fieldValue(FieldKind::kNullable, "10", nullptr).as_number(), 10.0);
    QCOMPARE(fieldValue(FieldKind::kText, " a b ", nullptr).as_string(), std::string(" a b "));
    const Json* betas = &c.at("optimizer").at("betas");
    QCOMPARE(fieldValue(FieldKind::kList, "0.8, 0.99,", betas).dump(),
             Json(Json::Array{Json(0.8), Json(0.99)}).dump());
    // A list of text keeps "1" as text; an empty or unknown list takes numbers as numbers.
    const Json words(Json::Array{Json("a")});
    QCOMPARE(fieldValue(FieldKind::kList, "b, 1", &words).dump(), std::string(R"(["b","1"])"));
    QCOMPARE(fieldValue(FieldKind::kList, "b, 1", nullptr).dump(), std::string(R"(["b",1])"));
    QCOMPARE(fieldValue(FieldKind::kList, "", betas).dump(), std::string("[]"));
  }

  // --- Validation messages

  // --- The runs table's columns in a width

  void columnsFitTheWidth() {
    using fp8rl::ui::ColumnNeed;
    using fp8rl::ui::fitColumns;
    using W = std::vector<int>;
    // id, name (the stretch column), status, preset: {min, want, priority, stretch, grow
    // priority}. The name and the status grow only once the id and preset are shown.
    const std::vector<ColumnNeed> needs = {{50, 50, 80, false},
                                           {90, 200, 100, true, 62},
                                           {50, 90, 95, false, 65},
                                           {70, 70, 70, false}};
    QCOMPARE(fitColumns(needs, 1000), W({50, 790, 90, 70}));  // every want, the rest to the name
    QCOMPARE(fitColumns(needs, 300), W({50, 90, 90, 70}));    // all shown, then the status grows
    QCOMPARE(fitColumns(needs, 250), W({50, 110, 90, 0}));    // the preset goes first…
    QCOMPARE(fitColumns(needs, 100), W({0, 100, 0, 0}));      // …then the id, then the status
    QCOMPARE(fitColumns(needs, 40), W({0, 90, 0, 0}));        // never the name
    // Growing right after showing (no grow priority): the name takes its want before the id
    // and the preset are even shown.
    std::vector<ColumnNeed> eager = needs;
    eager[1].grow_priority = -1;
    QCOMPARE(fitColumns(eager, 300), W({50, 200, 50, 0}));
    // What is shown fills the width exactly: no horizontal scrollbar, no gap.
    for (int width = 90; width <= 600; width += 7) {
      const W w = fitColumns(needs, width);
      int sum = 0;
      for (int x : w) sum += x;
      QCOMPARE(sum, width);
      for (size_t i = 0; i < w.size(); ++i) QVERIFY(w[i] == 0 || w[i] >= needs[i].min);
    }
  }

  void cleanMessages() {
    QCOMPARE(cleanEngineMessage("fp8rl train: error: optimizer.lr must be positive "
                                "(optimizer.cpp:11)\n"),
             std::string("optimizer.lr must be positive"));
    QCOMPARE(cleanEngineMessage("setting 'x' is bad (run_config.cpp:135)"),
             std::string("setting 'x' is bad"));
    QCOMPARE(cleanEngineMessage("  plain  "), std::string("plain"));
  }

  void settingsNamed() {
    const std::vector<std::string> keys = {"name",           "task.name",
                                           "optimizer.lr",   "grpo.clip_low",
                                           "grpo.clip_high", "precision.overrides"};
    const auto named = [&keys](const std::string& m) {
      return settingNamedIn(m, keys, "precision.overrides");
    };
    QCOMPARE(named("setting 'grpo.clip_low' must be ≥ 0"), std::string("grpo.clip_low"));
    QCOMPARE(named("setting 'task.name' is 'zz' (allowed: reverse)"), std::string("task.name"));
    QCOMPARE(named("optimizer.lr must be positive"), std::string("optimizer.lr"));
    QCOMPARE(named("grpo.clip_low must be in [0, 1) and grpo.clip_high ≥ 0"),
             std::string("grpo.clip_high"));  // the longest
    QCOMPARE(named("setting 'name' is empty"), std::string("name"));
    QCOMPARE(named("precision override: layer '7' is not * or 0…1"),
             std::string("precision.overrides"));
    QCOMPARE(named("Precision map: layer 3 has no 'down'"), std::string("precision.overrides"));
    QCOMPARE(settingNamedIn("precision map: bad", {"name"}, "precision.overrides"), std::string());
    QCOMPARE(named("optimizer.lrx is unknown"), std::string());  // not a whole word
    QCOMPARE(named("the moon"), std::string());
    QCOMPARE(sectionNamedIn("unknown setting 'grpo.foo' (allowed here: steps)"),
             std::string("grpo"));
    QCOMPARE(sectionNamedIn("setting 'name' is empty"), std::string());
  }
};

QTEST_MAIN(TestRunsText)
#include "test_runs_text.moc"
