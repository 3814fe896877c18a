// TensorBoard event files (engine/tblog): the protobuf wire format both ways, TFRecord framing
// with bad CRCs, bad lengths and truncation, TensorFlow's and PyTorch's histogram layouts, the
// names files, and one of our runs exported and imported back equal (NaN, ±inf, warm-up steps,
// doubles no float holds), read again incrementally as a followed folder is. The independent
// writer and reader (Python's protobuf) are in tests/tblog/test_tensorboard_files.py.
#include <QTemporaryDir>
#include <QtTest>

#include <cfloat>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "contract/metrics.hpp"
#include "core/error.hpp"
#include "store/run_store.hpp"
#include "tblog/exporter.hpp"
#include "tblog/importer.hpp"
#include "tblog/metric_names.hpp"
#include "tblog/proto_wire.hpp"
#include "tblog/run_folder.hpp"
#include "tblog/tb_event.hpp"
#include "tblog/tfrecord.hpp"

using namespace fp8rl;
namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

bool same(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

void write_bytes(const std::string& path, const std::string& bytes, bool append = false) {
  std::ofstream f(path, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

class TestTblog : public QObject {
  Q_OBJECT
 private slots:
  void wire_format_round_trip() {
    proto::Writer w;
    w.varint(1, 300);
    w.int64(2, -5);
    w.f64(3, -0.1);
    w.f32(4, 1.5f);
    w.bytes(5, "abc");
    w.packed_doubles(6, {1.0, kInf});
    proto::Reader r(w.data(), "test");
    proto::Field f;
    QVERIFY(r.next(&f) && f.number == 1 && f.varint == 300);
    QVERIFY(r.next(&f) && f.as_int64() == -5);
    QVERIFY(r.next(&f) && f.as_double() == -0.1);
    QVERIFY(r.next(&f) && f.as_float() == 1.5f);
    QVERIFY(r.next(&f) && f.bytes == "abc");
    QVERIFY(r.next(&f));
    std::vector<double> d;
    proto::append_doubles(f, d, "test");
    QCOMPARE(d, (std::vector<double>{1.0, kInf}));
    QVERIFY(!r.next(&f));
    // A length past the end, and a group, are errors that say what is wrong.
    const std::string cut = w.data().substr(0, w.data().size() - 3);
    proto::Reader bad(cut, "Event");
    try {
      while (bad.next(&f)) {
      }
      QFAIL("a truncated message read");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("Event: field 6 says 16 bytes") != std::string::npos,
               e.what());
    }
    proto::Reader group(std::string("\x0b", 1), "Summary");
    QVERIFY_THROWS_EXCEPTION(Error, group.next(&f));
  }

  void records_with_bad_crc_bad_length_and_truncation() {
    // crc32c("123456789") = 0xe3069283, masked as TensorFlow masks it.
    const uint32_t c = 0xe3069283u;
    QCOMPARE(tblog::masked_crc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
    std::string file;
    for (const char* p : {"one", "two", "three", "four"}) tblog::append_record(file, p);
    std::string damaged = file;
    damaged[16 + 3 + 12 + 1] ^= 1;  // a byte of "two": its data CRC fails
    std::vector<std::string> got;
    auto scan = tblog::scan_records(damaged + std::string("\x05\x00", 2), 0,
                                    [&](std::string_view r) { got.emplace_back(r); });
    QCOMPARE(got, (std::vector<std::string>{"one", "three", "four"}));
    QCOMPARE(scan.bad_crc, int64_t{1});
    QCOMPARE(scan.partial, uint64_t{2});
    QCOMPARE(scan.end, uint64_t{file.size()});
    // A header whose CRC fails ends the scan: nothing after it can be framed.
    std::string bad_length = file;
    bad_length[19 + 8] ^= 1;  // the length CRC of "two"
    got.clear();
    scan = tblog::scan_records(bad_length, 100, [&](std::string_view r) { got.emplace_back(r); });
    QCOMPARE(got, (std::vector<std::string>{"one"}));
    QVERIFY(scan.bad_length);
    QCOMPARE(scan.end, uint64_t{100 + 19});
  }

  void histogram_layouts() {
    // TensorFlow: limits end with DBL_MAX; bucket 0 is below limits[0], the last above limits[n−2].
    auto h = tblog::histogram_from_buckets(-3, {-1, 0, 1, DBL_MAX}, {2, 3, 4, 5});
    QCOMPARE(h.edges, (std::vector<double>{-1, 0, 1}));
    QCOMPARE(h.counts, (std::vector<int64_t>{2, 3, 4, 5}));
    // PyTorch (numpy bins): finite limits, no overflow.
    h = tblog::histogram_from_buckets(-1, {-1, 0, 1}, {0, 3, 4});
    QCOMPARE(h.edges, (std::vector<double>{-1, 0, 1}));
    QCOMPARE(h.counts, (std::vector<int64_t>{0, 3, 4, 0}));
    // Ours, through the encoder and the decoder: equal.
    const Histogram ours{{-0.5, 0.0, 0.25, 0.5}, {7, 1, 2, 3, 9}};
    std::map<std::string, std::string> plugins;
    const auto ev = tblog::decode_event(tblog::encode_histogram(10, -2, "w", ours), plugins);
    QCOMPARE(ev.step, int64_t{-2});
    QCOMPARE(ev.values.size(), size_t{1});
    QCOMPARE(ev.values[0].hist.edges, ours.edges);
    QCOMPARE(ev.values[0].hist.counts, ours.counts);
  }

  void names_files() {
    tblog::MetricNames names;
    names.add(
        "# NeMo RL\ntrain/reward reward/mean\nval-core/*/acc/mean@1 accuracy/validation\n"
        "train/reward other  # a later line loses\n",
        "names.txt");
    QCOMPARE(names.map("train/reward"), std::string("reward/mean"));
    QCOMPARE(names.map("val-core/openai/gsm8k/acc/mean@1"), std::string("accuracy/validation"));
    QCOMPARE(names.map("val-core/x/reward/mean@1"), std::string("val-core/x/reward/mean@1"));
    QVERIFY(tblog::glob_match("a*b*c", "axxbyybc"));
    QVERIFY(!tblog::glob_match("a*b", "ab/c"));
    try {
      names.add("\n\nlonely\n", "mine.txt");
      QFAIL("a line with one name read");
    } catch (const Error& e) {
      QCOMPARE(
          e.message(),
          std::string("mine.txt:3: 'lonely' has no name of ours after it (THEIR_NAME OUR_NAME)"));
    }
    // Flattened hyperparameters nest again, unless a key is both a value and a prefix.
    Json flat = Json::Object{};
    flat["a.b"] = 1;
    flat["a.c"] = "x";
    flat["d"] = true;
    QCOMPARE(tblog::unflatten(flat).dump(), std::string(R"({"a":{"b":1,"c":"x"},"d":true})"));
    flat["a"] = 2;
    QCOMPARE(tblog::unflatten(flat).dump(), flat.dump());
    // The precision column of an imported run, from its trainer's settings.
    const Json nemo = Json::parse(
        R"({"policy": {"precision": "bfloat16", "generation": {"vllm_cfg": {"precision": "fp8"}}}})");
    QCOMPARE(tblog::precision_summary_of(nemo), std::string("vllm_cfg=fp8, policy=bfloat16"));
  }

  // One of our runs (warm-up steps, NaN and ±inf, doubles no float holds, histograms with
  // under- and overflow) exported and imported back: every scalar and histogram equal, walls
  // within a microsecond (unix times as doubles); then the same folder read as a followed one.
  void export_then_import_is_exact() {
    QTemporaryDir tmp;
    const std::string src = tmp.filePath("src.sqlite").toStdString();
    const std::string back = tmp.filePath("back.sqlite").toStdString();
    const std::string dir = tmp.filePath("export").toStdString();
    int64_t run = 0;
    {
      RunStore store(src);
      Json config = Json::Object{};
      config["task"] = Json(Json::Object{{"name", Json("reverse")}});
      run = store.create_run("fp8-seed3", "demo", config, "fp8 (all layers)");
      std::vector<StepRecord> steps;
      for (int64_t s : {-2, -1, 1, 2, 3}) {
        StepRecord r;
        r.step = s;
        r.wall_seconds = 0.1 * static_cast<double>(s + 3) + 1e-9;
        r.scalars[metric::kReward] = 1.0 / 3.0 * static_cast<double>(s);
        r.scalars[metric::kTokenMultProbError] = s == 2 ? kNaN : 1 + 1e-12;
        r.scalars[metric::kGradNorm] = s == 3 ? kInf : (s == 1 ? -kInf : 0.1);
        if (s > 0)
          r.histograms.push_back(
              {histogram::kImportanceLogWeight, Histogram{{-0.5, 0.0, 0.5}, {s, 2, 3, 4}}});
        steps.push_back(r);
      }
      store.record_steps(run, steps);
      store.set_tags_notes(run, "baseline", "a note");
      store.set_status(run, run_status::kFinished);
    }
    RunStore store(src, true);
    const auto rep = tblog::export_run(store, run, dir);
    QCOMPARE(rep.steps, int64_t{5});
    QCOMPARE(rep.scalars, int64_t{15});
    QCOMPARE(rep.histograms, int64_t{3});
    QVERIFY_THROWS_EXCEPTION(Error, tblog::export_run(store, run, dir));  // not into event files

    RunStore target(back);
    tblog::MetricNames names;
    names.add("reward/mean something_else\n", "names");  // an export of ours keeps its names
    tblog::Importer importer(target, dir, names, {});
    const auto pass = importer.pass();
    QVERIFY2(pass.warnings.empty(), pass.warnings.empty() ? "" : pass.warnings[0].c_str());
    QCOMPARE(pass.runs.size(), size_t{1});
    const int64_t id = pass.runs[0].id;
    const auto a = store.find_run(run), b = target.find_run(id);
    QCOMPARE(b->name, a->name);
    QCOMPARE(b->preset, a->preset);
    QCOMPARE(b->precision_summary, a->precision_summary);
    QCOMPARE(b->tags, a->tags);
    QCOMPARE(b->notes, a->notes);
    QCOMPARE(b->config.dump(), a->config.dump());
    QCOMPARE(b->status, std::string(run_status::kFinished));
    QCOMPARE(b->source, std::string("tensorboard"));
    QCOMPARE(b->last_step, a->last_step);
    QCOMPARE(target.scalar_keys(id), store.scalar_keys(run));
    for (const auto& key : store.scalar_keys(run)) {
      const auto x = store.scalar_series(run, key), y = target.scalar_series(id, key);
      QCOMPARE(y.size(), x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        QCOMPARE(y[i].step, x[i].step);
        QVERIFY2(same(y[i].value, x[i].value), key.c_str());
        QVERIFY(std::abs(y[i].wall - x[i].wall) < 1e-6);
      }
    }
    const auto hx = store.histogram_series(run, histogram::kImportanceLogWeight);
    const auto hy = target.histogram_series(id, histogram::kImportanceLogWeight);
    QCOMPARE(hy.size(), hx.size());
    for (size_t i = 0; i < hx.size(); ++i) {
      QCOMPARE(hy[i].first, hx[i].first);
      QCOMPARE(hy[i].second.edges, hx[i].second.edges);
      QCOMPARE(hy[i].second.counts, hx[i].second.counts);
    }
    // A second pass finds nothing new; the folder's state is kept with the run.
    QVERIFY(importer.pass().runs.empty());
    QVERIFY(target.import_state(id).find("\"files\"") != std::string::npos);
  }

  // A folder read as it grows, record by record and half a record at a time: every record
  // once, the followed run live until finished.
  void follow_a_growing_folder() {
    QTemporaryDir tmp;
    const std::string dir = tmp.filePath("logs/run").toStdString();
    fs::create_directories(dir);
    const std::string file = dir + "/events.out.tfevents.1700000000.host.1.0";
    std::string all;
    tblog::append_record(all, tblog::encode_file_version(1.7e9));
    for (int s = 1; s <= 20; ++s)
      tblog::append_record(
          all, tblog::encode_simple_value(1.7e9 + s, s, "train/loss", static_cast<float>(s) / 4));
    RunStore store(tmp.filePath("db.sqlite").toStdString());
    tblog::ImportOptions opt;
    opt.follow = true;
    tblog::MetricNames names;
    names.add("train/loss loss", "names");
    tblog::Importer importer(store, tmp.filePath("logs").toStdString(), names, opt);
    int64_t id = -1;
    for (size_t at = 0; at < all.size();) {
      const size_t n = std::min<size_t>(37, all.size() - at);  // cuts records in two
      write_bytes(file, all.substr(at, n), at > 0);
      at += n;
      const auto rep = importer.pass();
      QVERIFY(rep.warnings.empty());
      for (const auto& r : rep.runs) id = r.id;
    }
    QVERIFY(id > 0);
    QCOMPARE(store.find_run(id)->status, std::string(run_status::kRunning));
    QCOMPARE(store.find_run(id)->name, std::string("run"));
    const auto loss = store.scalar_series(id, metric::kLoss);
    QCOMPARE(loss.size(), size_t{20});
    for (int s = 1; s <= 20; ++s) QCOMPARE(loss[static_cast<size_t>(s - 1)].value, s / 4.0);
    importer.finish();
    const auto row = store.find_run(id);
    QCOMPARE(row->status, std::string(run_status::kFinished));
    QCOMPARE(*row->ended_at, 1.7e9 + 20);
    QCOMPARE(*row->started_at, 1.7e9);
  }
};

QTEST_GUILESS_MAIN(TestTblog)
#include "test_tblog.moc"
