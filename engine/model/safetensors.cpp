#include "model/safetensors.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "fp8/codec.hpp"

namespace fp8rl {
namespace {

// IEEE half → float (exact).
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

const char* const kSingleFile = "model.safetensors";
const char* const kIndexFile = "model.safetensors.index.json";

std::string shard_name(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i, n);
  return buf;
}

bool is_shard_name(const std::string& name) {
  static const std::regex re(R"(model-[0-9]{5}-of-[0-9]{5}\.safetensors)");
  return std::regex_match(name, re);
}

using TensorList = std::vector<std::pair<const std::string*, const SafeTensor*>>;

// Writes the listed tensors (in list order) and the metadata to path, atomically.
void write_tensors(const std::string& path, const TensorList& list,
                   const std::map<std::string, std::string>& metadata) {
  Json header;
  uint64_t offset = 0;
  for (const auto& [name, t] : list) {
    Json::Array shape;
    uint64_t n = 1;
    for (int64_t d : t->shape) {
      shape.push_back(Json(d));
      n *= static_cast<uint64_t>(d);
    }
    check(n * safetensors_dtype_size(t->dtype) == t->data.size(),
          "safetensors: tensor " + *name + " holds " + std::to_string(t->data.size()) +
              " bytes, its shape and dtype need " +
              std::to_string(n * safetensors_dtype_size(t->dtype)));
    Json d;
    d["dtype"] = t->dtype;
    d["shape"] = Json(std::move(shape));
    d["data_offsets"] = Json(Json::Array{Json(static_cast<int64_t>(offset)),
                                         Json(static_cast<int64_t>(offset + t->data.size()))});
    header[*name] = std::move(d);
    offset += t->data.size();
  }
  if (!metadata.empty()) {
    Json m;
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  if (!header.is_object()) header = Json(Json::Object{});
  std::string text = header.dump();
  while ((8 + text.size()) % 8) text += ' ';  // keep the data 8-byte aligned
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out = open_private_file(tmp, std::ios::binary | std::ios::trunc);
    uint8_t len[8];
    uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& [name, t] : list)
      out.write(reinterpret_cast<const char*>(t->data.data()),
                static_cast<std::streamsize>(t->data.size()));
    out.flush();
    // errno: what the failing write(2) said (no space left, file too large, ...).
    check(out.good(), "safetensors: write failed for " + tmp + ": " + std::strerror(errno));
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace

size_t safetensors_dtype_size(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U8", 1},      {"BOOL", 1}};
  auto it = sizes.find(dtype);
  if (it == sizes.end()) throw Error("safetensors: unknown dtype \"" + dtype + "\"");
  return it->second;
}

SafeTensorsFile SafeTensorsFile::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "safetensors: cannot open " + path);
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  uint8_t len_bytes[8];
  check(file_size >= 8 && in.read(reinterpret_cast<char*>(len_bytes), 8).good(),
        "safetensors: " + path + " is too short to hold a header");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | len_bytes[i];
  check(header_len <= file_size - 8 && header_len <= (100u << 20),
        "safetensors: " + path + " declares a header of " + std::to_string(header_len) +
            " bytes, larger than the file");
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  Json j;
  try {
    j = Json::parse(header);
  } catch (const Error& e) {
    throw Error("safetensors: " + path + ": bad header: " + e.message());
  }
  const uint64_t data_size = file_size - 8 - header_len;
  SafeTensorsFile f;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, desc] : j.as_object("safetensors header")) {
    if (name == "__metadata__") {
      for (const auto& [k, v] : desc.as_object("__metadata__"))
        f.metadata[k] = v.as_string("__metadata__." + k);
      continue;
    }
    const std::string where = "safetensors: " + path + ": tensor " + name;
    SafeTensor t;
    try {
      t.dtype = desc.at("dtype").as_string("dtype");
      for (const auto& d : desc.at("shape").as_array("shape")) t.shape.push_back(d.as_int("shape"));
      const auto& off = desc.at("data_offsets").as_array("data_offsets");
      check(off.size() == 2, "data_offsets must have two entries");
      const uint64_t b = static_cast<uint64_t>(off[0].as_int("data_offsets")),
                     e = static_cast<uint64_t>(off[1].as_int("data_offsets"));
      check(b <= e && e <= data_size, "data_offsets [" + std::to_string(b) + ", " +
                                          std::to_string(e) + "] outside the data (" +
                                          std::to_string(data_size) + " bytes)");
      uint64_t n = 1;
      for (int64_t d : t.shape) {
        check(d >= 0, "negative dimension");
        n *= static_cast<uint64_t>(d);
      }
      check(n * safetensors_dtype_size(t.dtype) == e - b,
            "size " + std::to_string(e - b) + " bytes does not match shape and dtype");
      ranges.emplace_back(b, e);
      t.data.resize(e - b);
      in.seekg(static_cast<std::streamoff>(8 + header_len + b));
      check(in.read(reinterpret_cast<char*>(t.data.data()), static_cast<std::streamsize>(e - b))
                    .good() ||
                e == b,
            "short read");
    } catch (const Error& e) {
      throw Error(where + ": " + e.message());
    }
    f.origin[name] = path;
    f.tensors.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    check(ranges[i].first >= ranges[i - 1].second, "safetensors: " + path + ": tensors overlap");
  return f;
}

void SafeTensorsFile::write(const std::string& path) const {
  TensorList list;
  for (const auto& [name, t] : tensors) list.emplace_back(&name, &t);
  write_tensors(path, list, metadata);
}

uint64_t SafeTensorsFile::data_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, t] : tensors) n += t.data.size();
  return n;
}

SafeTensorsFile SafeTensorsFile::read_dir(const std::string& dir) {
  const std::string index = dir + "/" + kIndexFile;
  if (!std::filesystem::exists(index)) return read(dir + "/" + kSingleFile);
  const std::string text = read_text_file(index);
  Json j;
  try {
    j = Json::parse(text);
    check(j.is_object() && j.contains("weight_map"), "no weight_map");
  } catch (const Error& e) {
    throw Error(index + ": " + e.message());
  }
  // file → the tensors the index puts there.
  std::map<std::string, std::vector<std::string>> by_file;
  const auto& weight_map = j.at("weight_map").as_object(index + ": weight_map");
  for (const auto& [name, file] : weight_map) {
    const std::string& f = file.as_string(index + ": weight_map." + name);
    // Shards live beside the index: a path would let an index read arbitrary files.
    check(!f.empty() && f.find('/') == std::string::npos && f.find('\\') == std::string::npos &&
              f != "." && f != "..",
          index + ": tensor " + name + " maps to \"" + f + "\", not a file name in " + dir);
    by_file[f].push_back(name);
  }
  check(!by_file.empty(), index + ": the weight_map is empty");
  SafeTensorsFile out;
  for (auto& [file, names] : by_file) {
    const std::string path = dir + "/" + file;
    check(std::filesystem::exists(path),
          index + ": shard " + file + " (holding " + names.front() + ") does not exist");
    SafeTensorsFile shard = read(path);
    for (const auto& name : names)
      check(shard.tensors.count(name) > 0,
            path + ": tensor " + name + " listed in " + kIndexFile + " is missing");
    for (auto& [name, t] : shard.tensors) {
      auto w = weight_map.find(name);
      check(w != weight_map.end() && w->second.as_string() == file,
            path + ": tensor " + name +
                (w == weight_map.end() ? " is not listed in " + std::string(kIndexFile)
                                       : " is listed in " + std::string(kIndexFile) + " under " +
                                             w->second.as_string()));
      out.origin[name] = path;
      out.tensors.emplace(name, std::move(t));
    }
    for (auto& [k, v] : shard.metadata) out.metadata.emplace(k, v);
  }
  return out;
}

int64_t SafeTensorsFile::write_dir(const std::string& dir, uint64_t max_shard_bytes) const {
  check(max_shard_bytes > 0, "safetensors: the shard size limit must be positive");
  create_private_directories(dir);
  std::set<std::string> written;
  if (data_bytes() <= max_shard_bytes) {
    write(dir + "/" + kSingleFile);
    written.insert(kSingleFile);
  } else {
    std::vector<TensorList> shards;
    uint64_t in_shard = 0;
    for (const auto& [name, t] : tensors) {
      if (shards.empty() || (in_shard > 0 && in_shard + t.data.size() > max_shard_bytes)) {
        shards.emplace_back();
        in_shard = 0;
      }
      shards.back().emplace_back(&name, &t);
      in_shard += t.data.size();
    }
    Json weight_map = Json(Json::Object{});
    for (size_t i = 0; i < shards.size(); ++i) {
      const std::string file = shard_name(i + 1, shards.size());
      write_tensors(dir + "/" + file, shards[i], metadata);
      written.insert(file);
      for (const auto& [name, t] : shards[i]) weight_map[*name] = file;
    }
    Json idx;
    idx["metadata"]["total_size"] = static_cast<int64_t>(data_bytes());
    idx["weight_map"] = std::move(weight_map);
    write_private_file(dir + "/" + kIndexFile, idx.dump(2) + "\n");
    written.insert(kIndexFile);
  }
  // Weight files of an earlier write in the other layout (or with more shards) would be read
  // instead of, or beside, these.
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if ((name == kSingleFile || name == kIndexFile || is_shard_name(name)) && !written.count(name))
      std::filesystem::remove(e.path());
  }
  return static_cast<int64_t>(written.size() - (written.count(kIndexFile) ? 1 : 0));
}

std::vector<float> safetensor_floats(const SafeTensor& t, const std::string& what) {
  const size_t n = t.data.size() / std::max<size_t>(1, safetensors_dtype_size(t.dtype));
  std::vector<float> v(n);
  if (t.dtype == "F32") {
    std::memcpy(v.data(), t.data.data(), n * 4);
  } else if (t.dtype == "BF16" || t.dtype == "F16") {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, &t.data[i * 2], 2);
      v[i] = t.dtype == "BF16" ? bf16_to_float(bf16{h}) : half_to_float(h);
    }
  } else if (t.dtype == "F8_E4M3" || t.dtype == "F8_E5M2") {
    const float* table = fp8_table(t.dtype == "F8_E4M3" ? Fp8Format::e4m3 : Fp8Format::e5m2);
    for (size_t i = 0; i < n; ++i) v[i] = table[t.data[i]];
  } else {
    throw Error(what + " has dtype " + t.dtype +
                " (supported here: F32, BF16, F16, F8_E4M3, F8_E5M2)");
  }
  return v;
}

SafeTensor make_safetensor(const std::vector<float>& v, std::vector<int64_t> shape,
                           const std::string& dtype) {
  SafeTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  if (dtype == "F32") {
    t.data.resize(v.size() * 4);
    std::memcpy(t.data.data(), v.data(), t.data.size());
  } else if (dtype == "BF16") {
    t.data.resize(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t b = float_to_bf16(v[i]).bits;
      std::memcpy(&t.data[i * 2], &b, 2);
    }
  } else {
    throw Error("make_safetensor: dtype " + dtype + " is not F32 or BF16");
  }
  return t;
}

}  // namespace fp8rl
