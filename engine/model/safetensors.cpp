#include "model/safetensors.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/json.hpp"

namespace fp8rl {

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
    f.tensors.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    check(ranges[i].first >= ranges[i - 1].second, "safetensors: " + path + ": tensors overlap");
  return f;
}

void SafeTensorsFile::write(const std::string& path) const {
  Json header;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    Json::Array shape;
    uint64_t n = 1;
    for (int64_t d : t.shape) {
      shape.push_back(Json(d));
      n *= static_cast<uint64_t>(d);
    }
    check(n * safetensors_dtype_size(t.dtype) == t.data.size(),
          "safetensors: tensor " + name + " holds " + std::to_string(t.data.size()) +
              " bytes, its shape and dtype need " +
              std::to_string(n * safetensors_dtype_size(t.dtype)));
    Json d;
    d["dtype"] = t.dtype;
    d["shape"] = Json(std::move(shape));
    d["data_offsets"] = Json(Json::Array{Json(static_cast<int64_t>(offset)),
                                         Json(static_cast<int64_t>(offset + t.data.size()))});
    header[name] = std::move(d);
    offset += t.data.size();
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
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    check(out.good(), "safetensors: cannot write " + tmp);
    uint8_t len[8];
    uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& [name, t] : tensors)
      out.write(reinterpret_cast<const char*>(t.data.data()),
                static_cast<std::streamsize>(t.data.size()));
    check(out.good(), "safetensors: write failed for " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace fp8rl
