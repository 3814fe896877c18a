// Layer sensitivity in the studio: the report of `fp8rl sensitivity --json` parsed (and refused
// with the bad key named), its progress lines, the heatmap grid, the runner against a stand-in
// command, the panel in the Precision tab (heatmap, Apply recommendation through the run view's
// live-edit signal) and a screenshot of the tab with a synthetic report.
#include <qcustomplot.h>

#include <QComboBox>
#include <QFile>
#include <QProcess>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "core/error.hpp"
#include "ui/charts/heatmap_view.hpp"
#include "ui/data/run_data.hpp"
#include "ui/data/sensitivity_report.hpp"
#include "ui/data/sensitivity_runner.hpp"
#include "ui/run/precision_tab.hpp"
#include "ui/run/run_view.hpp"
#include "ui/run/sensitivity_panel.hpp"

using namespace fp8rl;
using namespace fp8rl::ui;

namespace {

constexpr int kLayers = 2;

Json measure(double kl) {
  Json m;
  m["kl"] = kl;
  m["abs_dlogp"] = kl * 10;
  m["token_mult_prob_error"] = 1 + kl;
  m["loss"] = 0.5;
  m["delta_loss"] = kl / 2;
  m["grad_norm"] = 2.0;
  m["delta_grad_norm"] = kl * 3;
  return m;
}

// The only-FP8 KL of a layer's linear in the synthetic report: L1.down most sensitive, then
// L0.up; L0.q changes nothing (0).
double onlyKl(int layer, int module) {
  if (layer == 1 && module == static_cast<int>(Module::down)) return 5e-3;
  if (layer == 0 && module == static_cast<int>(Module::up)) return 2e-3;
  if (layer == 0 && module == 0) return 0;
  return 1e-6 * (1 + layer * kDenseModules + module);
}

// A report as `fp8rl sensitivity --json` prints it, for kLayers layers.
Json reportJson() {
  Json doc;
  doc["batch"] = Json::parse(R"({"prompts":8,"group_size":8,"sequences":64,
      "response_tokens":400,"vocab_size":40,"temperature":1.0,"mean_reward":0.3})");
  doc["reference"] = measure(0);
  doc["all_fp8"] = measure(8e-3);
  doc["all_fp8_lm_head_fp8"] = measure(9e-3);
  Json::Array ranking;
  for (int l = 0; l < kLayers; ++l)
    for (int m = 0; m < kDenseModules; ++m) {
      Json e;
      e["module"] = "L" + std::to_string(l) + "." + module_short(static_cast<Module>(m));
      e["layer"] = l;
      e["only_fp8"] = measure(onlyKl(l, m));
      e["all_fp8_but_kl"] = 8e-3 - onlyKl(l, m);
      ranking.push_back(e);
    }
  Json head;
  head["module"] = "lm_head";
  head["layer"] = Json();
  head["only_fp8"] = measure(1e-3);
  head["all_fp8_but_kl"] = 7e-3;
  ranking.push_back(head);
  std::stable_sort(ranking.begin(), ranking.end(), [](const Json& a, const Json& b) {
    return a.at("only_fp8").at("kl").as_number() > b.at("only_fp8").at("kl").as_number();
  });
  for (size_t i = 0; i < ranking.size(); ++i) ranking[i]["rank"] = static_cast<int64_t>(i + 1);
  doc["ranking"] = Json(ranking);
  doc["budget"] = 1e-4;
  doc["budget_is_default"] = true;
  doc["recommendation"] = Json::parse(R"({"keep_bf16":["L1.down","L0.up"],
      "overrides":["1.down=bf16","0.up=bf16"],
      "steps":[{"module":"L1.down","kl":3e-3},{"module":"L0.up","kl":9e-5}],
      "kl":9e-5,"meets_budget":true,"lm_head_fp8_kl":1e-3,"keep_lm_head_bf16":true})");
  doc["recommendation"]["measure"] = measure(9e-5);
  doc["recommendation"]["override_setting"] =
      "precision.overrides=[\"1.down=bf16\", \"0.up=bf16\"]";
  doc["seconds"] = 12.3;
  return doc;
}

// The parse error of the report with `edit` applied.
QString parseError(const std::function<void(Json&)>& edit) {
  Json doc = reportJson();
  edit(doc);
  try {
    SensitivityReport::parse(doc.dump());
  } catch (const Error& e) {
    return QString::fromStdString(e.message());
  }
  return {};
}

RunData makeRun(int64_t id, const std::string& status = "running") {
  RunData run;
  run.id = id;
  run.row.id = id;
  run.row.name = "run" + std::to_string(id);
  run.row.status = status;
  run.row.created_at = 1000 + id;
  run.row.config = Json::parse(R"({"model": {"num_hidden_layers": 2},
                                   "precision": {"default": "fp8", "overrides": []}})");
  Json::Array layers;
  for (int l = 0; l < kLayers; ++l) {
    Json::Object row;
    for (const auto& m : module_short_names()) row[m] = "fp8";
    layers.push_back(Json(row));
  }
  run.precision.emplace_back(1, Json(layers));
  return run;
}

QCPColorMap* colorMap(HeatmapView* view) {
  for (int i = 0; i < view->plot()->plottableCount(); ++i)
    if (view->plot()->plottable(i)->name() == "heatmap")
      return qobject_cast<QCPColorMap*>(view->plot()->plottable(i));
  return nullptr;
}

// Whether the image has a pixel within `tolerance` (per channel) of colour c.
bool hasColour(const QImage& image, QColor c, int tolerance = 12) {
  const QImage img = image.convertToFormat(QImage::Format_RGB32);
  for (int y = 0; y < img.height(); ++y) {
    const auto* line = reinterpret_cast<const QRgb*>(img.constScanLine(y));
    for (int x = 0; x < img.width(); ++x)
      if (std::abs(qRed(line[x]) - c.red()) <= tolerance &&
          std::abs(qGreen(line[x]) - c.green()) <= tolerance &&
          std::abs(qBlue(line[x]) - c.blue()) <= tolerance)
        return true;
  }
  return false;
}

}  // namespace

class TestSensitivityPanel : public QObject {
  Q_OBJECT
 private slots:
  void parsesReport() {
    const SensitivityReport r = SensitivityReport::parse(reportJson().dump(2));
    QCOMPARE(r.layers, int64_t{kLayers});
    QCOMPARE(r.ranking.size(), size_t{kLayers * kDenseModules + 1});
    QCOMPARE(r.batch.sequences, int64_t{64});
    QCOMPARE(r.ranking.front().module, std::string("L1.down"));
    QCOMPARE(r.ranking.front().rank, int64_t{1});
    const SensitivityEntry* e = r.find(0, Module::up);
    QVERIFY(e);
    QCOMPARE(e->only_fp8.kl, 2e-3);
    QCOMPARE(e->all_fp8_but_kl, 8e-3 - 2e-3);
    QVERIFY(r.recommended(*e));
    QVERIFY(!r.recommended(*r.find(0, Module::q)));
    QVERIFY(r.lmHead());
    QVERIFY(!r.lmHead()->layer);
    QVERIFY(r.recommended(*r.lmHead()));  // keep_lm_head_bf16
    const auto& o = r.recommendation.overrides;
    QCOMPARE(o.size(), size_t{2});
    QCOMPARE(o[0].layer, std::optional<int64_t>(1));
    QCOMPARE(o[0].module, std::optional<Module>(Module::down));
    QCOMPARE(o[0].precision, Precision::bf16);
    QCOMPARE(r.recommendation.overrideTexts(),
             std::vector<std::string>({"1.down=bf16", "0.up=bf16"}));
    QVERIFY(r.recommendation.meets_budget);
    QCOMPARE(r.seconds, 12.3);
    QVERIFY(QString::fromStdString(r.describe(*e)).contains("token_mult_prob_error"));
  }

  void refusesBadReports() {
    QVERIFY(parseError([](Json& d) { d.as_object().erase("budget"); }).contains("\"budget\""));
    QVERIFY(parseError([](Json& d) {
              d["recommendation"].as_object().erase("kl");
            }).contains("missing key \"recommendation.kl\""));
    QVERIFY(parseError([](Json& d) {
              d["ranking"].as_array()[3]["only_fp8"].as_object().erase("loss");
            }).contains("\"ranking[3].only_fp8.loss\""));
    QVERIFY(parseError([](Json& d) {
              d["ranking"].as_array()[0]["module"] = "L1.qq";
            }).contains("ranking[0].module"));
    QVERIFY(parseError([](Json& d) { d["seconds"] = "soon"; }).contains("not a number"));
    QVERIFY(parseError([](Json& d) {
              d["recommendation"]["overrides"] = Json::Array{"9.q=bf16"};
            }).contains("recommendation.overrides[0]"));
    try {
      SensitivityReport::parse("{\"batch\": ");
      QFAIL("parsed a truncated document");
    } catch (const Error& e) {
      QVERIFY(QString::fromStdString(e.message()).startsWith("sensitivity report: "));
    }
  }

  void parsesProgressLines() {
    const auto p = parseSensitivityProgress("[#####...................] 12/120 only L0.q in FP8");
    QVERIFY(p);
    QCOMPARE(p->done, int64_t{12});
    QCOMPARE(p->planned, int64_t{120});
    QCOMPARE(p->what, std::string("only L0.q in FP8"));
    QVERIFY(parseSensitivityProgress("[] 0/3"));
    QVERIFY(!parseSensitivityProgress("loading checkpoint ckpt/step-20"));
    QVERIFY(!parseSensitivityProgress("fp8rl sensitivity: error: no such preset"));
  }

  void gridOfReport() {
    const SensitivityReport r = SensitivityReport::parse(reportJson().dump());
    const SensitivityGrid g = sensitivityGrid(r, SensitivityValue::only_fp8_kl);
    QCOMPARE(g.rows, kLayers + 1);
    QCOMPARE(g.cols, kDenseModules);
    auto at = [&](int c, int row) { return static_cast<size_t>(c * g.rows + row); };
    const int down = static_cast<int>(Module::down), up = static_cast<int>(Module::up);
    QCOMPARE(g.values[at(down, 1)], std::log10(5e-3));
    QCOMPARE(g.values[at(1, 0)], std::log10(onlyKl(0, 1)));
    // KL 0 reads as the least sensitive measured: the lowest positive KL's colour.
    QCOMPARE(g.values[at(0, 0)], std::log10(onlyKl(0, 1)));
    for (int c = 0; c < kDenseModules; ++c) {  // the lm_head row
      QCOMPARE(g.values[at(c, kLayers)], std::log10(1e-3));
      QVERIFY(g.recommended[at(c, kLayers)]);
    }
    QVERIFY(g.recommended[at(down, 1)]);
    QVERIFY(g.recommended[at(up, 0)]);
    QVERIFY(!g.recommended[at(down, 0)]);
    QCOMPARE(g.entries[at(down, 1)]->module, std::string("L1.down"));
    const SensitivityGrid but = sensitivityGrid(r, SensitivityValue::all_fp8_but_kl);
    QCOMPARE(but.values[at(down, 1)], std::log10(8e-3 - 5e-3));
  }

  void runnerReadsProgressAndReport() {
    QTemporaryDir dir;
    {
      QFile f(dir.filePath("report.json"));
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(QByteArray::fromStdString(reportJson().dump()));
    }
    // A stand-in for fp8rl: progress on stderr, the report on stdout, its arguments in a file.
    const QString script = dir.filePath("fp8rl");
    {
      QFile f(script);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(QStringLiteral("#!/bin/sh\necho \"$@\" > '%1/args'\n"
                             "printf '[#....] 1/2 all FP8\\n[##...] 2/2 only L0.q in FP8\\n' >&2\n"
                             "cat '%1/report.json'\n")
                  .arg(dir.path())
                  .toUtf8());
      f.setPermissions(f.permissions() | QFileDevice::ExeUser);
    }
    RunData run = makeRun(7);
    run.row.checkpoint_dir = dir.path().toStdString();
    SensitivityRunner runner(script);
    QSignalSpy progress(&runner, &SensitivityRunner::progress);
    QSignalSpy finished(&runner, &SensitivityRunner::finished);
    QSignalSpy failed(&runner, &SensitivityRunner::failed);
    QString err;
    QVERIFY2(runner.start(run.row, &err), qPrintable(err));
    QVERIFY(finished.wait(10000));
    QCOMPARE(failed.count(), 0);
    QCOMPARE(progress.count(), 2);
    QCOMPARE(progress.at(1).at(0).toLongLong(), 2);
    QCOMPARE(progress.at(1).at(1).toLongLong(), 2);
    QCOMPARE(progress.at(1).at(2).toString(), QString("only L0.q in FP8"));
    QCOMPARE(finished.at(0).at(0).toLongLong(), 7);
    QCOMPARE(finished.at(0).at(1).value<SensitivityReport>().layers, int64_t{kLayers});
    QFile args(dir.filePath("args"));
    QVERIFY(args.open(QIODevice::ReadOnly));
    const QStringList a = QString::fromUtf8(args.readAll()).trimmed().split(' ');
    QCOMPARE(a.first(), QString("sensitivity"));
    QCOMPARE(a.at(a.indexOf("--checkpoint") + 1), dir.path());
    QVERIFY(a.contains("--config"));
    QCOMPARE(a.last(), QString("--json"));

    // A failing command: the message carries the end of its stderr, not the progress lines.
    {
      QFile f(script);
      QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
      f.write(
          "#!/bin/sh\nprintf '[#...] 1/4 all FP8\\n' >&2\n"
          "echo 'fp8rl sensitivity: error: no checkpoint here' >&2\nexit 3\n");
    }
    QVERIFY(runner.start(run.row, &err));
    QVERIFY(failed.wait(10000));
    const QString msg = failed.at(0).at(1).toString();
    QVERIFY2(msg.contains("code 3") && msg.contains("no checkpoint here"), qPrintable(msg));
    QVERIFY(!msg.contains("1/4"));
  }

  // The real command on the demo preset (two prompts): its progress lines and its report are
  // what the studio parses; the report covers every layer and recommends a reachable set.
  void runnerWithTheRealCommand() {
    QProcess print;
    print.start(FP8RL_CLI, {"train", "--preset", "demo", "--print-config"});
    QVERIFY(print.waitForFinished(60000));
    RunData run = makeRun(9, "finished");
    run.row.config = Json::parse(print.readAllStandardOutput().toStdString());
    run.row.config["grpo"]["prompts_per_step"] = 2;
    SensitivityRunner runner(FP8RL_CLI);
    QSignalSpy progress(&runner, &SensitivityRunner::progress);
    QSignalSpy finished(&runner, &SensitivityRunner::finished);
    QSignalSpy failed(&runner, &SensitivityRunner::failed);
    QString err;
    QVERIFY2(runner.start(run.row, &err), qPrintable(err));
    QVERIFY(finished.wait(240000) || !failed.isEmpty());
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.at(0).at(1).toString()));
    QVERIFY(progress.count() > 10);
    const auto last = progress.back();
    QCOMPARE(last.at(0).toLongLong(), last.at(1).toLongLong());
    const auto report = finished.at(0).at(1).value<SensitivityReport>();
    QCOMPARE(report.layers, run.row.config["model"]["num_hidden_layers"].as_int());
    QVERIFY(report.recommendation.meets_budget);
  }

  void panelShowsHeatmap() {
    RunData run = makeRun(3);
    PrecisionTab tab;
    tab.setRun(&run);
    SensitivityPanel* p = tab.sensitivity();
    QVERIFY(p);
    QVERIFY(!p->report());
    QVERIFY(!p->applyButton()->isEnabled());
    p->setReport(SensitivityReport::parse(reportJson().dump()));
    const HeatmapData& d = p->heatmap()->data();
    QCOMPARE(d.rows, kLayers + 1);
    QCOMPARE(d.row_labels, QStringList({"lm_head", "L1", "L0"}));  // bottom up
    QCOMPARE(d.column_labels, QStringList({"q", "k", "v", "o", "gate", "up", "down"}));
    const int down = static_cast<int>(Module::down);
    QCOMPARE(d.values[down * d.rows + 1], std::log10(5e-3));
    QVERIFY(d.cell_tips[down * d.rows + 1].contains("L1.down (rank 1"));
    QVERIFY(d.cell_tips[down * d.rows + 1].contains("keep in BF16"));
    QCOMPARE(std::count(d.marked.begin(), d.marked.end(), 1), 2 + kDenseModules);
    QCOMPARE(d.values[static_cast<int>(Module::up) * d.rows + 2], std::log10(2e-3));  // L0.up
    // One outline per recommended linear and one for the whole lm_head row.
    QCOMPARE(p->heatmap()->plot()->itemCount(), 3);
    // Colours: the most sensitive cell at the top of the scale, the least at the bottom.
    QCPColorMap* map = colorMap(p->heatmap());
    QVERIFY(map);
    QCOMPARE(map->data()->cell(down, 1), std::log10(5e-3));
    const QCPRange range = map->dataRange();
    QCOMPARE(range.upper, std::log10(5e-3));
    QCOMPARE(range.lower, std::log10(onlyKl(0, 1)));
    const QRgb top = map->gradient().color(range.upper, range);
    const QRgb bottom = map->gradient().color(range.lower, range);
    QCOMPARE(QColor(top), QColor(253, 231, 37));
    QCOMPARE(QColor(bottom), QColor(68, 1, 84));
    // The other KL.
    p->valueChoice()->setCurrentIndex(1);
    QCOMPARE(p->heatmap()->data().values[down * d.rows + 1], std::log10(8e-3 - 5e-3));
    // The report stays with its run.
    RunData other = makeRun(4);
    tab.setRun(&other);
    QVERIFY(!p->report());
    tab.setRun(&run);
    QVERIFY(p->report());
  }

  void applyRecommendationSendsOverrides() {
    RunData run = makeRun(42);
    RunView view;
    view.setRun(&run);
    SensitivityPanel* p = view.precision()->sensitivity();
    p->setReport(SensitivityReport::parse(reportJson().dump()));
    QVERIFY(p->applyButton()->isEnabled());
    QString asked;
    bool answer = false;
    p->setConfirmation([&](const QString& text) {
      asked = text;
      return answer;
    });
    QSignalSpy spy(&view, &RunView::liveEditRequested);
    p->applyButton()->click();
    QVERIFY(asked.contains("1.down=bf16, 0.up=bf16"));
    QCOMPARE(spy.count(), 0);  // refused
    answer = true;
    p->applyButton()->click();
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.at(0).at(0).value<qint64>(), qint64{42});
    const auto sent = spy.at(0).at(1).value<LiveEdit>();
    QCOMPARE(QString::fromStdString(sent.describe()), QString("1.down=bf16, 0.up=bf16"));
    QVERIFY(sent.settings.empty());

    run.row.status = "finished";
    view.refresh();
    QVERIFY(!p->applyButton()->isEnabled());

    // A report of a model with other layers is not applied.
    RunData wider = makeRun(43);
    wider.precision.back().second.as_array().push_back(wider.precision.back().second.as_array()[0]);
    view.setRun(&wider);
    p->setReport(SensitivityReport::parse(reportJson().dump()));
    QVERIFY(!p->applyButton()->isEnabled());
    QVERIFY(p->applyButton()->toolTip().contains("3"));
  }

  // The Precision tab with a synthetic report, as the studio shows it; written to
  // $FP8RL_SCREENSHOTS/studio-run-sensitivity.png when that is set.
  void screenshotShowsHeatmap() {
    RunData run = makeRun(5);
    RunView view;
    view.resize(1100, 900);  // the run view beside the runs panel
    view.setRun(&run);
    for (int i = 0; i < view.tabs()->count(); ++i)  // the tab may wrap the page in a scroll area
      if (view.tabs()->tabText(i) == "Precision") view.tabs()->setCurrentIndex(i);
    view.precision()->sensitivity()->setReport(SensitivityReport::parse(reportJson().dump()));
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QTest::qWait(200);  // queued replots
    const QImage shot = view.grab().toImage();
    const QString dir = qEnvironmentVariable("FP8RL_SCREENSHOTS");
    if (!dir.isEmpty()) QVERIFY(shot.save(QDir(dir).filePath("studio-run-sensitivity.png")));
    QVERIFY(hasColour(shot, QColor(253, 231, 37)));    // the most sensitive cell
    QVERIFY(hasColour(shot, QColor(68, 1, 84)));       // the least
    QVERIFY(hasColour(shot, QColor(230, 30, 30), 4));  // the recommendation's outlines
  }
};

QTEST_MAIN(TestSensitivityPanel)
#include "test_sensitivity_panel.moc"
