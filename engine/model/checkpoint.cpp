#include "model/checkpoint.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/bf16.hpp"
#include "core/error.hpp"

namespace fp8rl {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  check(in.good(), "cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    check(out.good(), "cannot write " + tmp);
    out << text;
  }
  std::filesystem::rename(tmp, path);
}

// IEEE half → float (for F16 checkpoints).
float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace

void save_checkpoint(const std::string& dir, Qwen3Model& model, const AdamW* optimizer,
                     const Json& trainer_state) {
  std::filesystem::create_directories(dir);
  Json cfg = model.config().to_json();
  cfg["torch_dtype"] = "float32";
  write_text(dir + "/config.json", cfg.dump(2) + "\n");
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
  f.write(dir + "/model.safetensors");
  if (optimizer) {
    optimizer->state().write(dir + "/optimizer.safetensors");
    Json st = trainer_state.is_null() ? Json(Json::Object{}) : trainer_state;
    st["optimizer_step"] = optimizer->steps();
    write_text(dir + "/trainer_state.json", st.dump(2) + "\n");
  }
}

ModelConfig read_checkpoint_config(const std::string& dir) {
  try {
    return ModelConfig::from_json(Json::parse(read_text(dir + "/config.json")));
  } catch (const Error& e) {
    throw Error(dir + "/config.json: " + e.message());
  }
}

std::unique_ptr<Qwen3Model> load_checkpoint(Backend& be, const std::string& dir,
                                            const PrecisionMap& precision, QuantOptions qopt) {
  const ModelConfig cfg = read_checkpoint_config(dir);
  auto model = std::make_unique<Qwen3Model>(be, cfg, precision, 0, 0.02, qopt);
  const std::string path = dir + "/model.safetensors";
  SafeTensorsFile f = SafeTensorsFile::read(path);
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
    check(ok,
          path + ": tensor " + p->name + " has shape " + shape_str(t.shape) + ", expected " + want);
    std::vector<float> v(static_cast<size_t>(rows * cols));
    if (t.dtype == "F32") {
      std::memcpy(v.data(), t.data.data(), t.data.size());
    } else if (t.dtype == "BF16" || t.dtype == "F16") {
      for (size_t i = 0; i < v.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, &t.data[i * 2], 2);
        v[i] = t.dtype == "BF16" ? bf16_to_float(bf16{h}) : half_to_float(h);
      }
    } else {
      throw Error(path + ": tensor " + p->name + " has dtype " + t.dtype +
                  " (supported here: F32, BF16, F16)");
    }
    upload_floats(be, p->master, v);
    f.tensors.erase(it);
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw Error(path + ": missing tensors: " + list);
  }
  if (!f.tensors.empty()) {
    std::string list;
    for (const auto& [name, t] : f.tensors) list += (list.empty() ? "" : ", ") + name;
    throw Error(path + ": unexpected tensors: " + list);
  }
  model->refresh();
  return model;
}

void load_optimizer_state(const std::string& dir, AdamW& optimizer) {
  optimizer.load_state(SafeTensorsFile::read(dir + "/optimizer.safetensors"));
}

}  // namespace fp8rl
