#include "tblog/exporter.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.hpp"
#include "tblog/importer.hpp"
#include "tblog/run_folder.hpp"
#include "tblog/tb_event.hpp"
#include "tblog/tfrecord.hpp"

namespace fp8rl::tblog {
namespace fs = std::filesystem;

ExportReport export_run(RunStore& store, int64_t run, const std::string& folder) {
  const auto row = store.find_run(run);
  check(row.has_value(), "no run " + std::to_string(run) + " in " + store.path());
  std::error_code ec;
  fs::create_directories(folder, ec);
  check(!ec, "cannot create '" + folder + "': " + ec.message());
  check(event_files(folder).empty(),
        "'" + folder + "' holds event files already: export into an empty folder");
  const double start = row->started_at.value_or(row->created_at);

  // Step → wall → the scalars logged at that step and wall (one event each).
  std::map<int64_t, std::map<double, std::vector<std::pair<std::string, double>>>> scalars;
  std::map<int64_t, double> step_wall;
  ExportReport rep;
  for (const std::string& key : store.scalar_keys(run))
    for (const auto& p : store.scalar_series(run, key)) {
      scalars[p.step][p.wall].emplace_back(key, p.value);
      step_wall.emplace(p.step, p.wall);
      ++rep.scalars;
    }
  std::map<int64_t, std::vector<HistogramRecord>> histograms;
  for (const std::string& name : store.histogram_names(run))
    for (auto& [step, h] : store.histogram_series(run, name)) {
      histograms[step].push_back({name, std::move(h)});
      ++rep.histograms;
    }

  char host[256] = {};
  gethostname(host, sizeof host - 1);
  rep.file =
      (fs::path(folder) / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(start)) +
                           "." + host + ".fp8rl-run" + std::to_string(run)))
          .string();
  std::string out;
  append_record(out, encode_file_version(start));
  std::map<int64_t, bool> steps;
  for (const auto& [step, by_wall] : scalars) steps[step] = true;
  for (const auto& [step, list] : histograms) steps[step] = true;
  for (const auto& [step, unused] : steps) {
    if (auto s = scalars.find(step); s != scalars.end())
      for (const auto& [wall, values] : s->second)
        append_record(out, encode_scalars(start + wall, step, values));
    if (auto h = histograms.find(step); h != histograms.end()) {
      const auto w = step_wall.find(step);
      const double wall = start + (w == step_wall.end() ? 0.0 : w->second);
      for (const auto& rec : h->second)
        append_record(out, encode_histogram(wall, step, rec.name, rec.hist));
    }
  }
  rep.steps = static_cast<int64_t>(steps.size());
  {
    std::ofstream f(rep.file, std::ios::binary);
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    f.close();
    check(!f.fail(), "cannot write " + rep.file);
  }

  Json::Object d;
  d["name"] = row->name;
  d["preset"] = row->preset;
  d["precision_summary"] = row->precision_summary;
  d["tags"] = row->tags;
  d["notes"] = row->notes;
  d["status"] = row->status;
  d["run_id"] = row->id;
  d["config"] = row->config;
  const std::string desc = (fs::path(folder) / kRunDescriptionFile).string();
  std::ofstream f(desc);
  f << Json(std::move(d)).dump(2) << '\n';
  f.close();
  check(!f.fail(), "cannot write " + desc);
  return rep;
}

}  // namespace fp8rl::tblog
