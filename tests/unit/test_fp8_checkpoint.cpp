// Hugging Face block-FP8 checkpoints: BF16 → FP8 → BF16 and FP8 → load → export round trips,
// bit-identical FP8 logits after a reload, shards, modules_to_not_convert, E5M2/F16 tensors,
// refusals naming the tensor or field, and `fp8rl convert` on a run's checkpoint.
#include <QtTest>

#include <QTemporaryDir>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend/backend_registry.hpp"
#include "commands.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "fp8/codec.hpp"
#include "model/checkpoint.hpp"
#include "model/fp8_checkpoint.hpp"
#include "model/optimizer.hpp"
#include "rl/run_config.hpp"
#include "test_models.hpp"

using namespace fp8rl;

namespace {

// Partial tiles on both axes (192 = 128 + 64, 200 = 128 + 72) and an L4-padded scale grid.
ModelConfig small() {
  return testing::test_decoder(192, 48, 200, 50, 64, 10000);
}

std::vector<int32_t> token_ids(int64_t n, int64_t vocab) {
  Rng rng(17);
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(rng.next() % vocab));
  return ids;
}

template <class F>
QString error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return QString::fromStdString(e.message());
  }
  return "(no error)";
}

Json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str());
}

void write_json(const std::string& path, const Json& j) {
  std::ofstream(path, std::ios::trunc) << j.dump(2) << "\n";
}

void copy_dir(const std::string& from, const std::string& to) {
  std::filesystem::create_directories(to);
  std::filesystem::copy(
      from, to,
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
}

// The first difference between two tensor sets (dtype, shape, bytes), or "".
std::string first_difference(const SafeTensorsFile& a, const SafeTensorsFile& b) {
  for (const auto& [name, t] : a.tensors) {
    const auto it = b.tensors.find(name);
    if (it == b.tensors.end()) return name + " missing";
    if (it->second.dtype != t.dtype) return name + " dtype " + it->second.dtype;
    if (it->second.shape != t.shape) return name + " shape";
    if (it->second.data != t.data) return name + " bytes";
  }
  for (const auto& [name, t] : b.tensors)
    if (!a.tensors.count(name)) return name + " unexpected";
  return "";
}

Fp8WeightTiles tiles_in(const SafeTensorsFile& f, const std::string& name) {
  const SafeTensor& w = f.tensors.at(name);
  return read_fp8_weight(w, f.tensors.at(name + "_scale_inv"), name, name + "_scale_inv",
                         w.shape[0], w.shape[1], "test");
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

int run_cli(std::vector<std::string> args) {
  return cli::cmd_convert(args);
}

}  // namespace

class TestFp8Checkpoint : public QObject {
  Q_OBJECT
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();
  const ModelConfig cfg_ = small();
  const int64_t L_ = cfg_.num_hidden_layers;

  PrecisionMap all(Precision p) const { return PrecisionMap(L_, p); }

 private slots:
  void bf16ToFp8ToBf16IsExact() {
    QTemporaryDir tmp;
    const std::string root = tmp.path().toStdString();
    const std::string src = root + "/bf16", f8 = root + "/fp8", back = root + "/back";
    DecoderModel a(*cpu_, cfg_, all(Precision::fp32), 1, 0.05);
    save_bf16_checkpoint(src, a);
    QCOMPARE(run_cli({"--checkpoint", src, "--to", "fp8", "--output", f8}), 0);
    QCOMPARE(
        run_cli({"--checkpoint", f8, "--to", "bf16", "--output", back, "--max-shard-size", "40KB"}),
        0);
    QVERIFY(std::filesystem::exists(back + "/model.safetensors.index.json"));

    const auto S = SafeTensorsFile::read_dir(src), F = SafeTensorsFile::read_dir(f8),
               B = SafeTensorsFile::read_dir(back);
    QCOMPARE(B.tensors.size(), S.tensors.size());
    int fp8 = 0;
    auto loaded = load_checkpoint(*cpu_, f8, all(Precision::bf16));
    for (const auto& [name, t] : S.tensors) {
      const SafeTensor& q = F.tensors.at(name);
      if (q.dtype != "F8_E4M3") {
        // Embeddings, norms, lm_head: BF16 all the way.
        QVERIFY2(q.data == t.data && B.tensors.at(name).data == t.data, name.c_str());
        continue;
      }
      ++fp8;
      const auto dq = dequantize_tiles(tiles_in(F, name), q.shape[0], q.shape[1]);
      // Loading FP8 gives the dequantized weights exactly; BF16 holds them rounded once.
      QVERIFY2(same_bits(download_floats(*cpu_, loaded->find(name)->master), dq), name.c_str());
      QVERIFY2(B.tensors.at(name).data == make_safetensor(dq, q.shape, "BF16").data, name.c_str());
    }
    QCOMPARE(fp8, 2 * kDenseModules);

    const Json qc = read_json(f8 + "/config.json").at("quantization_config");
    QCOMPARE(qc.at("quant_method").as_string(), std::string("fp8"));
    QCOMPARE(qc.at("fmt").as_string(), std::string("e4m3"));
    QCOMPARE(qc.at("activation_scheme").as_string(), std::string("dynamic"));
    QCOMPARE(qc.at("weight_block_size").dump(), std::string("[128,128]"));
    QVERIFY(!read_json(back + "/config.json").contains("quantization_config"));
    QCOMPARE(read_json(back + "/config.json").at("torch_dtype").as_string(),
             std::string("bfloat16"));

    // With power-of-two scales the dequantized weights are BF16 values: lossless both ways.
    auto p2 = load_checkpoint(*cpu_, src, all(Precision::fp8), {Fp8Format::e4m3, true});
    save_fp8_checkpoint(root + "/fp8p2", *p2);
    auto from_fp8 = load_checkpoint(*cpu_, root + "/fp8p2", all(Precision::bf16));
    save_bf16_checkpoint(root + "/backp2", *from_fp8);
    auto from_bf16 = load_checkpoint(*cpu_, root + "/backp2", all(Precision::bf16));
    const auto pa = from_fp8->parameters(), pb = from_bf16->parameters();
    for (size_t i = 0; i < pa.size(); ++i)
      QVERIFY2(
          same_bits(download_floats(*cpu_, pa[i]->master), download_floats(*cpu_, pb[i]->master)),
          pa[i]->name.c_str());
  }

  void fp8LoadExportIsByteIdentical() {
    QTemporaryDir tmp;
    const std::string root = tmp.path().toStdString();
    DecoderModel a(*cpu_, cfg_, all(Precision::fp8), 2, 0.05);
    save_fp8_checkpoint(root + "/d1", a);
    auto b = load_checkpoint(*cpu_, root + "/d1", all(Precision::fp8));
    save_fp8_checkpoint(root + "/d2", *b);
    const auto d1 = SafeTensorsFile::read_dir(root + "/d1");
    const std::string diff1 = first_difference(d1, SafeTensorsFile::read_dir(root + "/d2"));
    QVERIFY2(diff1.empty(), diff1.c_str());

    // A publisher's tiles our quantizer would not make (largest code 224, scales doubled and
    // stored as BF16, as Qwen3.5-FP8 does): kept byte for byte.
    auto foreign = d1;
    for (auto& [name, t] : foreign.tensors) {
      if (t.dtype == "F8_E4M3")
        for (auto& c : t.data) c = float_to_e4m3(e4m3_to_float(c) * 0.5f);
      if (name.ends_with("_scale_inv")) {
        auto v = safetensor_floats(t, name);
        for (auto& x : v) x *= 2.0f;
        t = make_safetensor(v, t.shape, "BF16");
      }
    }
    copy_dir(root + "/d1", root + "/d3");
    foreign.write_dir(root + "/d3");
    auto c = load_checkpoint(*cpu_, root + "/d3", all(Precision::fp8));
    // Inference computes with exactly the file's tiles, not a re-quantization of the masters.
    for (int64_t l = 0; l < L_; ++l)
      for (int mi = 0; mi < kDenseModules; ++mi) {
        const std::string name = DecoderModel::linear_weight_name(l, Module(mi));
        const Fp8WeightTiles file = tiles_in(foreign, name);
        const Fp8Matrix& q = *c->linear(l, Module(mi)).fp8_weight();
        QVERIFY2(std::memcmp(q.codes, file.codes.data(), file.codes.size()) == 0, name.c_str());
        QVERIFY2(same_bits(tile_scales_to_hf(
                               std::vector<float>(q.scale_inv, q.scale_inv + file.scale_inv.size()),
                               q.rows, q.cols),
                           tile_scales_to_hf(file.scale_inv, q.rows, q.cols)),
                 name.c_str());
      }
    save_fp8_checkpoint(root + "/d4", *c);
    const std::string diff2 = first_difference(foreign, SafeTensorsFile::read_dir(root + "/d4"));
    QVERIFY2(diff2.empty(), diff2.c_str());

    // Our quantizer on our own dequantized tiles: the same codes always; a scale may come out
    // one ulp off (1/s and s = 448/amax do not invert exactly), which is why loaded tiles are
    // kept rather than re-made.
    int64_t scales = 0, ulp_off = 0;
    for (int64_t l = 0; l < L_; ++l)
      for (int mi = 0; mi < kDenseModules; ++mi) {
        const std::string name = DecoderModel::linear_weight_name(l, Module(mi));
        const Param* p = b->find(name);
        const Fp8WeightTiles file = tiles_in(d1, name);
        Fp8Tensor q = Fp8Tensor::make(*cpu_, p->master.rows, p->master.cols,
                                      ScaleBlock::tile128x128, Fp8Format::e4m3);
        cpu_->quantize(p->master.m(), q.q, QuantOptions{}, nullptr);
        QVERIFY2(std::memcmp(q.q.codes, file.codes.data(), file.codes.size()) == 0, name.c_str());
        const auto mine = tile_scales_to_hf(
            std::vector<float>(q.q.scale_inv, q.q.scale_inv + file.scale_inv.size()),
            p->master.rows, p->master.cols);
        const auto theirs = tile_scales_to_hf(file.scale_inv, p->master.rows, p->master.cols);
        for (size_t i = 0; i < mine.size(); ++i, ++scales) {
          ulp_off += mine[i] != theirs[i];
          QVERIFY(std::fabs(mine[i] - theirs[i]) <=
                  std::nextafter(theirs[i], INFINITY) - theirs[i]);
        }
      }
    qInfo("re-quantized dequantized tiles: codes identical, %lld of %lld scales one ulp off",
          static_cast<long long>(ulp_off), static_cast<long long>(scales));
  }

  void reloadedFp8GivesBitIdenticalLogits() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString() + "/ckpt";
    PrecisionMap pm = all(Precision::fp8);
    pm.set(1, Module::down, Precision::bf16);
    DecoderModel a(*cpu_, cfg_, pm, 3, 0.05);
    const auto ids = token_ids(2 * 9, cfg_.vocab_size);
    const auto before = a.logits(ids, 2, 9);
    save_fp8_checkpoint(dir, a);
    auto b = load_checkpoint(*cpu_, dir, pm);
    QVERIFY(b->logits(ids, 2, 9) == before);
    // Asked for all-fp8, the linear the file keeps in BF16 runs in bf16, as it did.
    auto c = load_checkpoint(*cpu_, dir, all(Precision::fp8));
    QVERIFY(c->precision().at(1, Module::down) == Precision::bf16);
    QVERIFY(c->logits(ids, 2, 9) == before);
    // A precision change keeps the file's tiles (the masters did not change) ...
    c->set_precision(pm);
    QVERIFY(c->linear(0, Module::q).given_fp8_weight() != nullptr);
    QVERIFY(c->logits(ids, 2, 9) == before);
    // ... and refresh() (after an optimizer step) drops them.
    c->refresh();
    QVERIFY(c->linear(0, Module::q).given_fp8_weight() == nullptr);
  }

  void shardedEqualsSingleFile() {
    QTemporaryDir tmp;
    const std::string one = tmp.path().toStdString() + "/one",
                      many = tmp.path().toStdString() + "/many";
    DecoderModel a(*cpu_, cfg_, all(Precision::fp8), 4, 0.05);
    QCOMPARE(save_fp8_checkpoint(one, a).files, int64_t{1});
    Fp8ExportOptions opt;
    opt.max_shard_bytes = 50000;
    const ExportSummary s = save_fp8_checkpoint(many, a, opt);
    QVERIFY(s.files > 2);
    QVERIFY(!std::filesystem::exists(many + "/model.safetensors"));
    const Json index = read_json(many + "/model.safetensors.index.json");
    QCOMPARE(index.at("metadata").at("total_size").as_int(), static_cast<int64_t>(s.bytes));
    const auto single = SafeTensorsFile::read_dir(one);
    const std::string diff3 = first_difference(single, SafeTensorsFile::read_dir(many));
    QVERIFY2(diff3.empty(), diff3.c_str());
    const auto ids = token_ids(7, cfg_.vocab_size);
    QVERIFY(load_checkpoint(*cpu_, many, all(Precision::fp8))->logits(ids, 1, 7) ==
            load_checkpoint(*cpu_, one, all(Precision::fp8))->logits(ids, 1, 7));

    // A broken index is refused naming the shard or the tensor.
    const std::string shard2 = "model-00002-of-" + [&] {
      char b[8];
      std::snprintf(b, sizeof b, "%05lld", static_cast<long long>(s.files));
      return std::string(b);
    }() + ".safetensors";
    Json bad = index;
    const std::string moved = bad.at("weight_map").as_object().begin()->first;
    bad["weight_map"][moved] = shard2;
    write_json(many + "/model.safetensors.index.json", bad);
    QVERIFY2(error_of([&] {
               SafeTensorsFile::read_dir(many);
             }).contains(QString::fromStdString("tensor " + moved)),
             "misplaced tensor accepted");
    write_json(many + "/model.safetensors.index.json", index);
    std::filesystem::rename(many + "/" + shard2, many + "/moved");
    QVERIFY(error_of([&] {
              SafeTensorsFile::read_dir(many);
            }).contains(QString::fromStdString("shard " + shard2)));
    std::filesystem::rename(many + "/moved", many + "/" + shard2);

    // Writing one file over shards removes them (else the stale index would be read).
    single.write_dir(many);
    QVERIFY(!std::filesystem::exists(many + "/model.safetensors.index.json"));
    QVERIFY(!std::filesystem::exists(many + "/" + shard2));
    const std::string diff4 = first_difference(single, SafeTensorsFile::read_dir(many));
    QVERIFY2(diff4.empty(), diff4.c_str());
  }

  void refusalsNameTheTensorOrField() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString() + "/ckpt";
    DecoderModel a(*cpu_, cfg_, all(Precision::fp8), 5, 0.05);
    save_fp8_checkpoint(dir, a);
    const auto good = SafeTensorsFile::read_dir(dir);
    const Json good_cfg = read_json(dir + "/config.json");
    auto load = [&] { load_checkpoint(*cpu_, dir, all(Precision::fp8)); };

    auto f = good;
    f.tensors["model.layers.0.self_attn.q_proj.weight_scale_inv"].shape = {1, 4};
    f.write_dir(dir);
    QString e = error_of(load);
    QVERIFY2(e.contains("model.layers.0.self_attn.q_proj.weight_scale_inv has shape [1, 4], "
                        "expected [2, 2]"),
             qPrintable(e));

    f = good;
    f.tensors.erase("model.layers.1.mlp.up_proj.weight_scale_inv");
    f.write_dir(dir);
    e = error_of(load);
    QVERIFY2(e.contains("model.layers.1.mlp.up_proj.weight has dtype F8_E4M3 but its scale "
                        "model.layers.1.mlp.up_proj.weight_scale_inv"),
             qPrintable(e));

    f = good;
    f.tensors["model.layers.1.mlp.up_proj.weight_scale_inv"].dtype = "I32";
    f.write_dir(dir);
    e = error_of(load);
    QVERIFY2(e.contains("model.layers.1.mlp.up_proj.weight_scale_inv has dtype I32, expected F32"),
             qPrintable(e));
    f.tensors["model.layers.1.mlp.up_proj.weight_scale_inv"] =
        make_safetensor(std::vector<float>(4, 0.5f), {1, 4}, "BF16");
    f.write_dir(dir);
    e = error_of(load);
    QVERIFY2(e.contains("up_proj.weight_scale_inv has shape [1, 4], expected [2, 2] (one scale "
                        "per 128x128 tile of model.layers.1.mlp.up_proj.weight [200, 192])"),
             qPrintable(e));
    good.write_dir(dir);

    auto with_config = [&](const char* key, Json value) {
      Json c = good_cfg;
      c["quantization_config"][key] = std::move(value);
      write_json(dir + "/config.json", c);
      return error_of(load);
    };
    e = with_config("quant_method", "gptq");
    QVERIFY2(e.contains("quantization_config.quant_method is \"gptq\"; supported: \"fp8\""),
             qPrintable(e));
    e = with_config("weight_block_size", Json(Json::Array{Json(64), Json(64)}));
    QVERIFY2(e.contains("quantization_config.weight_block_size is [64, 64]; supported: [128, 128]"),
             qPrintable(e));
    e = with_config("activation_scheme", "static");
    QVERIFY2(e.contains("quantization_config.activation_scheme is \"static\""), qPrintable(e));
    e = with_config("fmt", "e5m2");
    QVERIFY2(e.contains("quantization_config.fmt is \"e5m2\""), qPrintable(e));

    Json plain = good_cfg;
    plain.as_object().erase("quantization_config");
    write_json(dir + "/config.json", plain);
    e = error_of(load);
    QVERIFY2(e.contains("tensor model.layers.0.self_attn.q_proj.weight has dtype F8_E4M3 but") &&
                 e.contains("has no quantization_config"),
             qPrintable(e));
  }

  void modulesToNotConvertAreHonoured() {
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString() + "/ckpt";
    DecoderModel a(*cpu_, cfg_, all(Precision::fp8), 6, 0.05);
    Fp8ExportOptions opt;
    opt.keep_bf16 = {"model.layers.0.*", "*.down_proj"};
    const ExportSummary s = save_fp8_checkpoint(dir, a, opt);
    QCOMPARE(s.fp8_linears, int64_t{6});
    QCOMPARE(s.bf16_linears, int64_t{8});
    QVERIFY(s.split_fused.empty());

    const auto f = SafeTensorsFile::read_dir(dir);
    std::vector<std::string> listed;
    const Json config = read_json(dir + "/config.json");
    for (const auto& m : config.at("quantization_config").at("modules_to_not_convert").as_array())
      listed.push_back(m.as_string());
    for (int64_t l = 0; l < L_; ++l)
      for (int mi = 0; mi < kDenseModules; ++mi) {
        const std::string w = DecoderModel::linear_weight_name(l, Module(mi));
        const std::string module = w.substr(0, w.size() - 7);
        const bool kept = l == 0 || Module(mi) == Module::down;
        QCOMPARE(f.tensors.at(w).dtype, std::string(kept ? "BF16" : "F8_E4M3"));
        QCOMPARE(f.tensors.count(w + "_scale_inv"), size_t{kept ? 0u : 1u});
        QCOMPARE(std::count(listed.begin(), listed.end(), module), kept ? 1l : 0l);
      }
    QVERIFY(std::count(listed.begin(), listed.end(), "lm_head") == 1);

    auto b = load_checkpoint(*cpu_, dir, all(Precision::fp8));
    QVERIFY(b->precision().at(0, Module::q) == Precision::bf16);
    QVERIFY(b->precision().at(1, Module::down) == Precision::bf16);
    QVERIFY(b->precision().at(1, Module::gate) == Precision::fp8);
    QVERIFY(b->linear(0, Module::q).given_fp8_weight() == nullptr);
    QVERIFY(b->linear(1, Module::q).given_fp8_weight() != nullptr);
    const std::string w0 = DecoderModel::linear_weight_name(0, Module::q);
    QVERIFY(same_bits(download_floats(*cpu_, b->find(w0)->master),
                      safetensor_floats(f.tensors.at(w0), w0)));

    opt.keep_bf16 = {"model.layers.9.*"};
    QVERIFY(error_of([&] {
              save_fp8_checkpoint(dir, a, opt);
            }).contains("pattern 'model.layers.9.*' matches no module"));
    opt.keep_bf16 = {"model.layers.1.self_attn.q_proj"};
    QVERIFY(save_fp8_checkpoint(dir, a, opt).split_fused ==
            std::vector<std::string>{"model.layers.1: q/k/v_proj"});

    QVERIFY(module_name_matches("*.down_proj", "model.layers.3.mlp.down_proj"));
    QVERIFY(module_name_matches("model.layers.1?.*", "model.layers.12.mlp.up_proj"));
    QVERIFY(!module_name_matches("model.layers.1.*", "model.layers.12.mlp.up_proj"));
    QVERIFY(module_name_matches("lm_head", "lm_head"));
    QVERIFY(!module_name_matches("lm_head", "lm_head2"));
  }

  void e5m2AndF16TensorsAreRead() {
    SafeTensor e5;
    e5.dtype = "F8_E5M2";
    e5.shape = {256};
    for (int c = 0; c < 256; ++c) e5.data.push_back(static_cast<uint8_t>(c));
    const auto v = safetensor_floats(e5, "e5");
    for (int c = 0; c < 256; ++c) {
      const float want = e5m2_to_float(static_cast<uint8_t>(c));
      QVERIFY2(std::memcmp(&v[size_t(c)], &want, 4) == 0, qPrintable(QString::number(c)));
    }
    SafeTensor h;
    h.dtype = "F16";
    h.shape = {6};
    for (uint16_t b : {0x3c00, 0xc000, 0x0001, 0x7bff, 0x8000, 0x7c00})
      for (int i = 0; i < 2; ++i) h.data.push_back(static_cast<uint8_t>(b >> (8 * i)));
    const auto hv = safetensor_floats(h, "h");
    QCOMPARE(hv[0], 1.0f);
    QCOMPARE(hv[1], -2.0f);
    QCOMPARE(hv[2], std::ldexp(1.0f, -24));
    QCOMPARE(hv[3], 65504.0f);
    QVERIFY(hv[4] == 0.0f && std::signbit(hv[4]));
    QVERIFY(std::isinf(hv[5]));

    // A checkpoint with one E5M2 linear and an F16 norm.
    QTemporaryDir tmp;
    const std::string dir = tmp.path().toStdString() + "/ckpt";
    DecoderModel a(*cpu_, cfg_, all(Precision::fp8), 7, 0.05);
    save_fp8_checkpoint(dir, a);
    auto f = SafeTensorsFile::read_dir(dir);
    const std::string gate = DecoderModel::linear_weight_name(1, Module::gate);
    for (auto& c : f.tensors[gate].data) c = float_to_e5m2(e4m3_to_float(c));
    f.tensors[gate].dtype = "F8_E5M2";
    SafeTensor& norm = f.tensors["model.norm.weight"];
    norm.dtype = "F16";
    norm.data.clear();
    std::vector<float> norm_want;
    for (int64_t i = 0; i < cfg_.hidden_size; ++i) {
      const uint16_t bits = static_cast<uint16_t>(0x3c00 + i);  // 1 + i/1024
      norm.data.push_back(static_cast<uint8_t>(bits));
      norm.data.push_back(static_cast<uint8_t>(bits >> 8));
      norm_want.push_back(1.0f + static_cast<float>(i) / 1024.0f);
    }
    f.write_dir(dir);
    auto b = load_checkpoint(*cpu_, dir, all(Precision::fp8));
    const Fp8WeightTiles t = tiles_in(f, gate);
    QVERIFY(t.format == Fp8Format::e5m2);
    const auto& shape = f.tensors.at(gate).shape;
    QVERIFY(same_bits(download_floats(*cpu_, b->find(gate)->master),
                      dequantize_tiles(t, shape[0], shape[1])));
    QVERIFY(same_bits(download_floats(*cpu_, b->find("model.norm.weight")->master), norm_want));
    for (float x : b->logits(token_ids(5, cfg_.vocab_size), 1, 5)) QVERIFY(std::isfinite(x));
  }

  void convertHonoursTheRunsPrecisionMap() {
    QTemporaryDir tmp;
    const std::string run = tmp.path().toStdString() + "/run",
                      out = tmp.path().toStdString() + "/out";
    Json doc = RunConfig::defaults();
    doc["precision"]["overrides"] = Json(Json::Array{Json("0.*=bf16"), Json("1.down=bf16")});
    doc["precision"]["scale_format"] = "pow2";
    const RunConfig rc = RunConfig::from_json(doc);
    const PrecisionMap pm = rc.precision_map(cfg_);
    DecoderModel a(*cpu_, cfg_, pm, 8, 0.05, QuantOptions{Fp8Format::e4m3, true});
    AdamW opt(*cpu_, a.parameters(), OptimizerConfig{});
    Json st;
    st["config"] = doc;
    save_checkpoint(run, a, &opt, st);
    std::ofstream(run + "/generation_config.json") << "{}\n";

    QCOMPARE(run_cli({"--checkpoint", run, "--to", "fp8", "--output", out}), 0);
    QVERIFY(std::filesystem::exists(out + "/generation_config.json"));
    QVERIFY(!std::filesystem::exists(out + "/trainer_state.json"));
    QVERIFY(!std::filesystem::exists(out + "/optimizer.safetensors"));
    const auto f = SafeTensorsFile::read_dir(out);
    int fp8 = 0;
    for (int64_t l = 0; l < L_; ++l)
      for (int mi = 0; mi < kDenseModules; ++mi) {
        const std::string w = DecoderModel::linear_weight_name(l, Module(mi));
        if (pm.at(l, Module(mi)) == Precision::bf16) {
          QCOMPARE(f.tensors.at(w).dtype, std::string("BF16"));
          continue;
        }
        ++fp8;
        // Exactly the tiles the run computes with (power-of-two scales included).
        const Fp8Matrix* q = a.linear(l, Module(mi)).fp8_weight();
        const Fp8WeightTiles t = tiles_in(f, w);
        QVERIFY2(std::memcmp(q->codes, t.codes.data(), t.codes.size()) == 0, w.c_str());
        const auto hf = tile_scales_to_hf(t.scale_inv, q->rows, q->cols);
        const auto run_scales = tile_scales_to_hf(
            std::vector<float>(q->scale_inv, q->scale_inv + t.scale_inv.size()), q->rows, q->cols);
        QVERIFY2(same_bits(hf, run_scales), w.c_str());
        for (float s : hf) QCOMPARE(std::exp2(std::round(std::log2(s))), s);
      }
    QCOMPARE(fp8, 6);

    QVERIFY(error_of([&] {
              run_cli({"--checkpoint", run, "--to", "int8", "--output", out});
            }).contains("--to: 'int8' is not fp8 or bf16"));
    QVERIFY(error_of([&] {
              run_cli({"--checkpoint", run, "--to", "fp8", "--output", out, "--keep-bf16", "x.*"});
            }).contains("pattern 'x.*' matches no module"));
    QVERIFY(error_of([&] {
              run_cli({"--checkpoint", run, "--to", "fp8", "--output", run});
            }).contains("--output must differ"));
    // Several patterns after one --keep-bf16, and comma lists.
    QCOMPARE(run_cli({"--checkpoint", run, "--to", "fp8", "--output", out, "--keep-bf16", "lm_head",
                      "*.gate_proj,*.up_proj", "--max-shard-size", "1GB"}),
             0);
    QCOMPARE(SafeTensorsFile::read_dir(out)
                 .tensors.at(DecoderModel::linear_weight_name(1, Module::up))
                 .dtype,
             std::string("BF16"));
  }
};

QTEST_APPLESS_MAIN(TestFp8Checkpoint)
#include "test_fp8_checkpoint.moc"
