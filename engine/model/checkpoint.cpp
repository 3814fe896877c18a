#include "model/checkpoint.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "model/fp8_checkpoint.hpp"

namespace fp8rl {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

bool is_fp8_dtype(const std::string& dtype) {
  return dtype == "F8_E4M3" || dtype == "F8_E5M2";
}

Json read_config_json(const std::string& dir) {
  return read_json_file(dir + "/config.json");
}

constexpr const char* kChecksums = "checksums.json";

// "00c0ffee"
std::string hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

void write_checksums(const std::string& dir) {
  Json files = Json::Object{};
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const FileChecksum c = file_checksum(e.path().string());
    Json f;
    f["bytes"] = static_cast<int64_t>(c.bytes);
    f["crc32c"] = hex32(c.crc32c);
    files[e.path().filename().string()] = f;
  }
  Json doc;
  doc["algorithm"] = "crc32c";
  doc["files"] = files;
  write_private_file(dir + "/" + kChecksums, doc.dump(2) + "\n");
}

}  // namespace

void write_checkpoint_dir(const std::string& dir,
                          const std::function<void(const std::string& tmp)>& fill) {
  namespace fs = std::filesystem;
  const fs::path target = fs::path(dir).lexically_normal();
  check(!target.filename().empty(), "checkpoint folder '" + dir + "' names no folder");
  const std::string tmp = target.string() + ".partial", previous = target.string() + ".previous";
  // The folder is replaced as a whole: never one that holds something else.
  if (fs::exists(target) && !fs::is_empty(target))
    check(fs::exists(target / kChecksums) || fs::exists(target / "trainer_state.json"),
          "will not replace " + target.string() +
              ": it holds files but no checkpoint (choose another folder)");
  fs::remove_all(tmp);
  create_private_directories(tmp);
  try {
    fill(tmp);
    write_checksums(tmp);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  if (!fs::exists(target)) {
    fs::rename(tmp, target);
  } else if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(tmp);  // now the previous checkpoint
  } else {
    check(errno == EINVAL || errno == ENOSYS || errno == ENOTSUP,
          "checkpoint: cannot replace " + target.string() + ": " + std::strerror(errno));
    fs::remove_all(previous);
    fs::rename(target, previous);
    fs::rename(tmp, target);
    fs::remove_all(previous);
  }
  fs::remove_all(previous);  // a fallback's leftover from a killed writer
}

std::string checkpoint_dir_to_read(const std::string& dir) {
  namespace fs = std::filesystem;
  if (fs::exists(dir)) return dir;
  const std::string previous = fs::path(dir).lexically_normal().string() + ".previous";
  if (fs::exists(previous)) return previous;
  throw Error("checkpoint folder " + dir + " does not exist");
}

void verify_checkpoint(const std::string& dir) {
  const std::string listing = dir + "/" + kChecksums;
  if (!std::filesystem::exists(listing)) return;
  const Json doc = read_json_file(listing);
  check(doc.contains("algorithm") && doc.at("algorithm").as_string("algorithm") == "crc32c",
        listing + ": unknown checksum algorithm");
  for (const auto& [name, want] : doc.at("files").as_object(listing + " files")) {
    const std::string path = dir + "/" + name;
    check(std::filesystem::exists(path),
          "checkpoint " + dir + ": " + name + " is missing (listed in " + kChecksums + ")");
    const FileChecksum got = file_checksum(path);
    const int64_t bytes = want.at("bytes").as_int(listing + " " + name + ".bytes");
    const std::string crc = want.at("crc32c").as_string(listing + " " + name + ".crc32c");
    check(static_cast<int64_t>(got.bytes) == bytes,
          "checkpoint " + dir + ": " + name + " has " + std::to_string(got.bytes) + " bytes, " +
              kChecksums + " records " + std::to_string(bytes) +
              " (written incompletely or changed since)");
    check(hex32(got.crc32c) == crc, "checkpoint " + dir + ": " + name + " has CRC-32C " +
                                        hex32(got.crc32c) + ", " + kChecksums + " records " + crc +
                                        " (damaged or changed since it was written)");
  }
}

void save_checkpoint(const std::string& dir, DecoderModel& model, const AdamW* optimizer,
                     const Json& trainer_state) {
  create_private_directories(dir);
  Json cfg = model.config().to_json();
  cfg["torch_dtype"] = "float32";
  write_private_file(dir + "/config.json", cfg.dump(2) + "\n");
  SafeTensorsFile f;
  for (Param* p : model.parameters()) {
    SafeTensor t;
    t.dtype = "F32";
    t.shape = p->master.rows == 1 ? std::vector<int64_t>{p->master.cols}
                                  : std::vector<int64_t>{p->master.rows, p->master.cols};
    t.data.resize(static_cast<size_t>(p->master.size()) * 4);
    model.backend().download(t.data.data(), p->master.buf.data(), t.data.size());
    f.tensors[p->name] = std::move(t);
  }
  f.metadata["format"] = "pt";
  f.write_dir(dir);
  if (optimizer) {
    optimizer->state().write(dir + "/optimizer.safetensors");
    Json st = trainer_state.is_null() ? Json(Json::Object{}) : trainer_state;
    st["optimizer_step"] = optimizer->steps();
    write_private_file(dir + "/trainer_state.json", st.dump(2) + "\n");
  }
}

CheckpointInfo read_checkpoint_info(const std::string& folder) {
  CheckpointInfo info;
  info.dir = checkpoint_dir_to_read(folder);
  verify_checkpoint(info.dir);  // a damaged file is named as such before it is parsed
  const std::string path = info.dir + "/config.json";
  const Json j = read_json_file(path);
  try {
    info.model = ModelConfig::from_json(j);
  } catch (const Error& e) {
    throw Error(path + ": " + e.message());
  }
  info.block_fp8 = parse_block_fp8_config(j, path);
  info.notes = checkpoint_notes(info.model);
  return info;
}

std::vector<std::string> checkpoint_notes(const ModelConfig& cfg) {
  if (cfg.mtp_layers <= 0) return {};
  const int64_t L = cfg.num_hidden_layers;
  return {"config.json declares " + std::to_string(cfg.mtp_layers) +
          " multi-token-prediction layer" + (cfg.mtp_layers > 1 ? "s" : "") +
          " (num_nextn_predict_layers): not run; its tensors (model.layers." + std::to_string(L) +
          (cfg.mtp_layers > 1 ? "…" + std::to_string(L + cfg.mtp_layers - 1) : std::string()) +
          ".*) are skipped when loading and passed through by fp8rl convert"};
}

bool is_mtp_tensor(const ModelConfig& cfg, const std::string& name) {
  for (int64_t i = 0; i < cfg.mtp_layers; ++i)
    if (name.starts_with("model.layers." + std::to_string(cfg.num_hidden_layers + i) + "."))
      return true;
  return false;
}

ModelConfig read_checkpoint_config(const std::string& dir) {
  const Json j = read_config_json(dir);
  try {
    return ModelConfig::from_json(j);
  } catch (const Error& e) {
    throw Error(dir + "/config.json: " + e.message());
  }
}

std::unique_ptr<DecoderModel> load_checkpoint(Backend& be, const std::string& folder,
                                              const PrecisionMap& precision, QuantOptions qopt) {
  return load_checkpoint(be, read_checkpoint_info(folder), precision, qopt);
}

std::unique_ptr<DecoderModel> load_checkpoint(Backend& be, const CheckpointInfo& info,
                                              const PrecisionMap& precision, QuantOptions qopt) {
  const std::string& dir = info.dir;
  const ModelConfig& cfg = info.model;
  const std::optional<BlockFp8Config>& block_fp8 = info.block_fp8;
  SafeTensorsFile f = SafeTensorsFile::read_dir(dir);
  auto file_of = [&](const std::string& name) {
    const auto it = f.origin.find(name);
    return it == f.origin.end() ? dir : it->second;
  };
  auto where = [&](const std::string& name) { return file_of(name) + ": tensor " + name; };

  // A linear the block-FP8 file keeps unquantized (modules_to_not_convert) runs in BF16 where
  // the map asks for fp8, as in the serving engines that read the file.
  PrecisionMap pm = precision;
  if (block_fp8 && pm.layers() == cfg.num_hidden_layers)
    for (const LinearSlot& s : pm.linears()) {
      const auto it = f.tensors.find(DecoderModel::weight_name(s));
      if (pm.get(s) == Precision::fp8 && it != f.tensors.end() && !is_fp8_dtype(it->second.dtype))
        pm.set(s, Precision::bf16);
    }

  auto model = std::make_unique<DecoderModel>(be, cfg, pm, 0, 0.02, qopt);
  std::map<std::string, Linear*> linears;
  for (const LinearSlot& s : model->linear_slots()) {
    Linear& lin = model->linear(s);
    linears[lin.weight().name] = &lin;
  }
  std::vector<std::pair<Linear*, Fp8WeightTiles>> given;
  std::map<std::string, std::string> loaded_dtype;
  std::vector<std::string> missing;
  for (Param* p : model->parameters()) {
    auto it = f.tensors.find(p->name);
    if (it == f.tensors.end()) {
      missing.push_back(p->name);
      continue;
    }
    const SafeTensor& t = it->second;
    const int64_t rows = p->master.rows, cols = p->master.cols;
    const bool ok = rows == 1 ? (t.shape == std::vector<int64_t>{cols} ||
                                 t.shape == std::vector<int64_t>{1, cols})
                              : t.shape == std::vector<int64_t>{rows, cols};
    const std::string want = rows == 1 ? shape_str({cols}) : shape_str({rows, cols});
    check(ok, where(p->name) + " has shape " + shape_str(t.shape) + ", expected " + want);
    std::vector<float> v;
    if (is_fp8_dtype(t.dtype)) {
      check(block_fp8.has_value(), where(p->name) + " has dtype " + t.dtype + " but " + dir +
                                       "/config.json has no quantization_config (block FP8 "
                                       "needs quant_method \"fp8\", weight_block_size [128, 128])");
      check(rows > 1, where(p->name) + " has dtype " + t.dtype +
                          "; FP8 is supported for matrices only, expected BF16, F16 or F32");
      const std::string scale_name = p->name + "_scale_inv";
      const auto s = f.tensors.find(scale_name);
      check(s != f.tensors.end(),
            where(p->name) + " has dtype " + t.dtype + " but its scale " + scale_name +
                " (F32 or BF16, " + shape_str({blocks_of(rows), blocks_of(cols)}) + ") is missing");
      Fp8WeightTiles tiles =
          read_fp8_weight(t, s->second, p->name, scale_name, rows, cols, file_of(scale_name));
      v = dequantize_tiles(tiles, rows, cols);
      f.tensors.erase(s);
      if (const auto lin = linears.find(p->name); lin != linears.end())
        given.emplace_back(lin->second, std::move(tiles));
    } else {
      v = safetensor_floats(t, where(p->name));
    }
    // No silent NaN: a weight that is not finite would poison every output it touches.
    const auto bad = std::find_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
    if (bad != v.end()) {
      const int64_t i = bad - v.begin();
      throw Error(where(p->name) + " holds " + (std::isnan(*bad) ? "NaN" : "an infinity") + " at " +
                  (rows == 1
                       ? "[" + std::to_string(i) + "]"
                       : "[" + std::to_string(i / cols) + ", " + std::to_string(i % cols) + "]") +
                  "; weights must be finite");
    }
    upload_floats(be, p->master, v);
    loaded_dtype[p->name] = t.dtype;
    f.tensors.erase(it);
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw Error(dir + ": missing tensors: " + list);
  }
  // Multi-token-prediction layers are not run (checkpoint_notes says so).
  std::erase_if(f.tensors, [&](const auto& t) { return is_mtp_tensor(cfg, t.first); });
  if (!f.tensors.empty()) {
    std::string list;
    for (const auto& [name, t] : f.tensors) {
      // A scale beside a weight that is not FP8 is a broken file, not a stray tensor.
      const std::string suffix = "_scale_inv";
      if (name.size() > suffix.size() && name.ends_with(suffix)) {
        const auto w = loaded_dtype.find(name.substr(0, name.size() - suffix.size()));
        if (w != loaded_dtype.end())
          throw Error(where(name) + " scales " + w->first + ", which is stored as " + w->second +
                      ", not F8_E4M3");
      }
      list += (list.empty() ? "" : ", ") + name;
    }
    throw Error(dir + ": unexpected tensors: " + list);
  }
  model->refresh();
  // After refresh(): the file's own FP8 tiles replace the re-quantized masters.
  for (auto& [lin, tiles] : given)
    lin->set_fp8_weight(tiles.codes, tiles.scale_inv, tiles.format, tiles.scale_dtype);
  if (!given.empty()) model->refresh_decode_weights();
  return model;
}

void load_optimizer_state(const std::string& dir, AdamW& optimizer) {
  optimizer.load_state(SafeTensorsFile::read(dir + "/optimizer.safetensors"));
}

}  // namespace fp8rl
