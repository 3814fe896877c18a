#include "tblog/run_folder.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unordered_map>
#include <unordered_set>

#include "contract/metrics.hpp"
#include "core/error.hpp"
#include "tblog/tb_event.hpp"
#include "tblog/tfrecord.hpp"

namespace fp8rl::tblog {
namespace fs = std::filesystem;

namespace {

constexpr const char* kEventFilePrefix = "events.out.tfevents.";

// The bytes of path from offset to its end ("" when it cannot be read or has no more).
std::string read_from(const std::string& path, uint64_t offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path);
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  if (size <= offset) return {};
  std::string data(size - offset, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<size_t>(in.gcount()));
  return data;
}

// Stored names of a read, decided once per logged name (FolderState::names).
class Names {
 public:
  Names(FolderState& state, const MetricNames& names, std::vector<std::string>& warnings)
      : state_(state), names_(names), warnings_(warnings) {
    for (const auto& [logged, stored] : state_.names) used_.insert(stored);
  }
  const std::string& stored(const std::string& logged) {
    if (auto it = state_.names.find(logged); it != state_.names.end()) return it->second;
    std::string ours = names_.map(logged);
    if (ours != logged && used_.count(ours)) {
      warnings_.push_back("'" + logged + "' means '" + ours +
                          "' too, which another name of this run already holds: kept as '" +
                          logged + "'");
      ours = logged;
    }
    used_.insert(ours);
    return state_.names.emplace(logged, std::move(ours)).first->second;
  }

 private:
  FolderState& state_;
  const MetricNames& names_;
  std::vector<std::string>& warnings_;
  std::unordered_set<std::string> used_;
};

}  // namespace

Json FolderState::to_json() const {
  Json::Object j;
  Json::Object files;
  for (const auto& [f, o] : offsets) files[f] = static_cast<double>(o);
  j["files"] = Json(std::move(files));
  Json::Array bad;
  for (const auto& f : damaged) bad.emplace_back(f);
  j["damaged"] = Json(std::move(bad));
  Json::Object p;
  for (const auto& [t, n] : plugins) p[t] = n;
  j["plugins"] = Json(std::move(p));
  Json::Object n;
  for (const auto& [t, s] : names) n[t] = s;
  j["names"] = Json(std::move(n));
  if (start) j["start"] = *start;
  if (end) j["end"] = *end;
  if (last_step) j["last_step"] = *last_step;
  return Json(std::move(j));
}

FolderState FolderState::from_text(const std::string& text) {
  FolderState s;
  if (text.empty()) return s;
  try {
    const Json j = Json::parse(text);
    for (const auto& [f, o] : j.at("files").as_object())
      s.offsets[f] = static_cast<uint64_t>(o.as_int());
    for (const auto& f : j.at("damaged").as_array()) s.damaged.insert(f.as_string());
    for (const auto& [t, p] : j.at("plugins").as_object()) s.plugins[t] = p.as_string();
    for (const auto& [t, n] : j.at("names").as_object()) s.names[t] = n.as_string();
    if (j.contains("start")) s.start = j.at("start").as_number();
    if (j.contains("end")) s.end = j.at("end").as_number();
    if (j.contains("last_step")) s.last_step = j.at("last_step").as_int();
  } catch (const Error&) {
    return FolderState{};
  }
  return s;
}

std::vector<std::string> event_files(const std::string& folder) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kEventFilePrefix, 0) == 0 && e.is_regular_file(ec)) files.push_back(name);
  }
  std::sort(files.begin(), files.end());
  return files;
}

FolderRead read_folder(const std::string& folder, FolderState& state, const MetricNames& names,
                       bool live) {
  FolderRead out;
  RunStore::ImportBatch& b = out.batch;
  Names stored(state, names, out.warnings);
  std::unordered_map<std::string, uint32_t> key_index;
  const auto key_of = [&](const std::string& tag) {
    const std::string& name = stored.stored(tag);
    auto [it, added] = key_index.emplace(name, static_cast<uint32_t>(b.keys.size()));
    if (added) b.keys.push_back(name);
    return it->second;
  };
  for (const std::string& file : event_files(folder)) {
    if (state.damaged.count(file)) continue;
    const std::string path = (fs::path(folder) / file).string();
    uint64_t& offset = state.offsets[file];
    std::string data;
    try {
      data = read_from(path, offset);
    } catch (const Error& e) {
      out.warnings.push_back(e.message());
      continue;
    }
    if (data.empty()) continue;
    int64_t malformed = 0;
    std::string first_error;
    const RecordScan scan = scan_records(data, offset, [&](std::string_view record) {
      TbEvent ev;
      try {
        ev = decode_event(record, state.plugins);
      } catch (const Error& e) {
        if (malformed++ == 0) first_error = e.message();
        return;
      }
      ++out.records;
      out.skipped += ev.skipped;
      if (!state.start) state.start = ev.wall_time;
      state.end = std::max(state.end.value_or(ev.wall_time), ev.wall_time);
      if (!ev.file_version.empty() || ev.values.empty()) return;
      const double wall = ev.wall_time - *state.start;
      bool data_value = false;
      for (TbValue& v : ev.values) {
        switch (v.kind) {
          case TbValue::Kind::kScalar:
            b.scalars.push_back({ev.step, wall, key_of(v.tag), v.scalar});
            data_value = true;
            break;
          case TbValue::Kind::kHistogram:
            b.histograms.push_back(
                {ev.step, HistogramRecord{stored.stored(v.tag), std::move(v.hist)}});
            data_value = true;
            break;
          case TbValue::Kind::kText:
            b.events.push_back(
                {ev.step, wall, EventRecord{event::kText, v.tag + ": " + v.text, Json()}});
            data_value = true;
            break;
          case TbValue::Kind::kHparams:
            out.hparams = std::move(v.hparams);
            break;
          case TbValue::Kind::kOther:
            break;
        }
      }
      if (data_value) state.last_step = std::max(state.last_step.value_or(ev.step), ev.step);
    });
    offset = scan.end;
    std::vector<std::string> problems;
    if (scan.bad_crc > 0)
      problems.push_back(std::to_string(scan.bad_crc) + " record(s) with a bad CRC skipped");
    if (malformed > 0)
      problems.push_back(std::to_string(malformed) + " malformed record(s) skipped (" +
                         first_error + ")");
    if (scan.bad_length) {
      problems.push_back("a record header at byte " + std::to_string(scan.end) +
                         " fails its CRC: the rest of the file is skipped");
      state.damaged.insert(file);
    }
    if (scan.partial > 0 && !live)
      problems.push_back("it ends in an incomplete record (" + std::to_string(scan.partial) +
                         " bytes): truncated");
    if (!problems.empty()) {
      std::string w = path + ": " + std::to_string(scan.records) + " record(s) read; ";
      for (size_t i = 0; i < problems.size(); ++i) w += (i ? "; " : "") + problems[i];
      out.warnings.push_back(w);
    }
  }
  b.last_step = state.last_step;
  // Key by key, each in step order: the store's (run, key, step) index then grows at its end
  // rather than at a dozen places at once.
  std::stable_sort(b.scalars.begin(), b.scalars.end(),
                   [](const auto& x, const auto& y) { return x.key < y.key; });
  return out;
}

}  // namespace fp8rl::tblog
