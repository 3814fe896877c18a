#include "tblog/importer.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <future>

#include "contract/metrics.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/yaml.hpp"

namespace fp8rl::tblog {
namespace fs = std::filesystem;

namespace {

// Configuration files a trainer saves beside its logs, in the order they are looked for in a
// run's folder and then in each folder above it (up to the log folder): a saved config
// (NeMo RL's and others' config.yaml, JSON ones), Hydra's copy of the composed config (verl's
// `.hydra/config.yaml`), Lightning's hparams.yaml.
constexpr const char* kConfigFiles[] = {"config.yaml",        "config.yml",   "config.json",
                                        ".hydra/config.yaml", "hparams.yaml", "hparams.json"};

bool is_ancestor(const std::string& a, const std::string& b) {
  return b.size() > a.size() && b.compare(0, a.size(), a) == 0 && b[a.size()] == '/';
}

// "policy=bfloat16, vllm_cfg=fp8": the string settings named precision or dtype in a trainer's
// configuration, each with the key above it, for the run list's precision column.
void collect_precisions(const Json& j, const std::string& parent, std::vector<std::string>& out,
                        int depth) {
  if (!j.is_object() || depth > 16) return;
  for (const auto& [key, value] : j.as_object()) {
    if (value.is_string() && (key == "precision" || key == "dtype") && !value.as_string().empty())
      out.push_back((parent.empty() ? key : parent) + "=" + value.as_string());
    else
      collect_precisions(value, key, out, depth + 1);
  }
}

}  // namespace

std::string precision_summary_of(const Json& config) {
  std::vector<std::string> found;
  collect_precisions(config, "", found, 0);
  std::string s;
  for (const auto& f : found) s += (s.empty() ? "" : ", ") + f;
  return s;
}

Json unflatten(const Json& flat) {
  if (!flat.is_object()) return flat;
  Json::Object nested;
  for (const auto& [key, value] : flat.as_object()) {
    Json* at = nullptr;
    Json::Object* level = &nested;
    size_t begin = 0;
    for (;;) {
      const size_t dot = key.find('.', begin);
      const std::string part = key.substr(begin, dot == std::string::npos ? dot : dot - begin);
      if (part.empty()) return flat;
      if (dot == std::string::npos) {
        if (level->count(part)) return flat;  // a value and a prefix, or a repeat
        at = &(*level)[part];
        break;
      }
      Json& next = (*level)[part];
      if (next.is_null()) next = Json(Json::Object{});
      if (!next.is_object()) return flat;  // a key both a value and a prefix
      level = &next.as_object();
      begin = dot + 1;
    }
    *at = value;
  }
  return Json(std::move(nested));
}

std::vector<std::string> run_folders(const std::string& logdir) {
  std::vector<std::string> out;
  if (!event_files(logdir).empty()) out.push_back(logdir);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(
           logdir, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_directory(ec) && !event_files(it->path().string()).empty())
      out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Importer::Pending {
  std::string folder;
  Tracked run;
  bool is_new = false;
  FolderRead read;
};

Importer::Importer(RunStore& store, const std::string& logdir, MetricNames names,
                   ImportOptions options)
    : store_(store), names_(std::move(names)), options_(std::move(options)) {
  std::error_code ec;
  check(fs::is_directory(logdir, ec), "'" + logdir + "' is not a folder");
  logdir_ = fs::canonical(logdir, ec).string();
  check(!ec, "cannot resolve '" + logdir + "': " + ec.message());
  store_.prepare_bulk_writes();
  checkpointer_ = std::make_unique<RunStore>(store_.path());
}

Importer::Pending Importer::read(Pending p) const {
  // Runs on the reading thread: it touches only p and what no pass changes (names, options).
  p.read = read_folder(p.folder, p.run.state, p.run.ours ? identity_ : names_, options_.follow);
  // What the writing thread committed so far goes into the database from here.
  checkpointer_->checkpoint();
  return p;
}

std::string Importer::run_name(const std::string& folder, size_t folders) const {
  const fs::path rel = fs::path(folder).lexically_relative(logdir_);
  fs::path p = rel == "." ? fs::path(logdir_) : rel;
  // NeMo RL logs into <log_dir>/tensorboard: the run is the folder above.
  if (p.filename() == "tensorboard" && p.has_parent_path() && p.parent_path() != "/")
    p = p.parent_path();
  std::string name = rel == "." ? p.filename().string() : p.generic_string();
  if (options_.name.empty()) return name;
  return folders == 1 ? options_.name : options_.name + "/" + name;
}

Json Importer::find_config(const std::string& folder, Json* description) const {
  const fs::path run(folder);
  if (std::error_code ec; fs::exists(run / kRunDescriptionFile, ec)) {
    *description = read_json_file((run / kRunDescriptionFile).string());
    return description->contains("config") ? description->at("config") : Json(Json::Object{});
  }
  for (fs::path dir = run;; dir = dir.parent_path()) {
    for (const char* name : kConfigFiles) {
      const fs::path f = dir / name;
      std::error_code ec;
      if (!fs::is_regular_file(f, ec)) continue;
      const std::string text = read_text_file(f.string());
      return f.extension() == ".json" ? Json::parse(text) : parse_yaml(text, f.string());
    }
    if (dir.string() == logdir_ || !is_ancestor(logdir_, dir.string())) break;
  }
  return Json();
}

ImportReport Importer::pass() {
  ImportReport rep;
  const std::vector<std::string> folders = run_folders(logdir_);
  std::vector<std::string> todo;
  for (const auto& f : folders) {
    if (hparams_folders_.count(f) || busy_.count(f)) continue;
    if (!runs_.count(f)) {
      if (auto row = store_.find_imported(f)) {
        // Imported before (by this command run earlier, or another): continue where it stopped,
        // unless a live process follows it now.
        if (run_status::is_live(row->status) && row->pid != getpid() && !run_process_gone(*row)) {
          busy_.insert(f);
          rep.warnings.push_back("run " + std::to_string(row->id) + " (" + f +
                                 ") is followed by process " + std::to_string(row->pid) + " on " +
                                 row->host + ": left to it");
          continue;
        }
        Tracked t;
        t.id = row->id;
        t.name = row->name;
        t.state = FolderState::from_text(store_.import_state(row->id));
        // Left running or crashed by a follow that ended without finishing it.
        t.unfinished = row->status != run_status::kFinished;
        std::error_code ec;
        t.ours = fs::exists(fs::path(f) / kRunDescriptionFile, ec);
        runs_[f] = std::move(t);
      }
    }
    todo.push_back(f);
  }
  // New folders inside another run's folder first: they may hold only that run's
  // hyperparameters (PyTorch's add_hparams writes them into a folder of their own), which
  // must be known before the run is created.
  const auto nested_new = [&](const std::string& f) {
    if (runs_.count(f)) return false;
    return std::any_of(folders.begin(), folders.end(),
                       [&](const std::string& a) { return is_ancestor(a, f); });
  };
  std::stable_partition(todo.begin(), todo.end(), nested_new);

  // The next folder is read on another thread while this one writes the last. What each read
  // starts from is taken here: the reading thread must not look at runs_ while this one
  // changes it.
  std::vector<Pending> inputs(todo.size());
  for (size_t i = 0; i < todo.size(); ++i) {
    Pending& in = inputs[i];
    in.folder = todo[i];
    if (auto it = runs_.find(todo[i]); it != runs_.end()) {
      in.run = it->second;
    } else {
      in.is_new = true;
      std::error_code ec;
      in.run.ours = fs::exists(fs::path(todo[i]) / kRunDescriptionFile, ec);
    }
  }
  std::future<Pending> next;
  const auto start = [&](size_t i) {
    next = std::async(std::launch::async,
                      [this, in = std::move(inputs[i])]() mutable { return read(std::move(in)); });
  };
  if (!todo.empty()) start(0);
  for (size_t i = 0; i < todo.size(); ++i) {
    Pending p = next.get();
    if (i + 1 < todo.size()) start(i + 1);
    for (auto& w : p.read.warnings)
      rep.warnings.push_back(w.rfind(p.folder, 0) == 0 ? std::move(w) : p.folder + ": " + w);
    rep.records += p.read.records;
    if (p.is_new) {
      if (p.read.only_hparams()) {
        hparams_folders_.insert(p.folder);
        std::string owner;
        for (const auto& a : folders)
          if (is_ancestor(a, p.folder) && a.size() > owner.size()) owner = a;
        if (!owner.empty()) hparams_[owner] = p.read.hparams;
        continue;
      }
      // Not a run until it logs something: a trainer creates its event file (one version
      // record) before it logs its hyperparameters into the folder beside it, and a followed
      // run created in between would miss its configuration.
      if (p.read.batch.empty() || !p.run.state.start) continue;
      Json description;
      Json config;
      try {
        config = find_config(p.folder, &description);
      } catch (const Error& e) {
        rep.warnings.push_back(p.folder + ": its configuration is not read: " + e.message());
      }
      if (config.is_null()) {
        if (auto h = hparams_.find(p.folder); h != hparams_.end())
          config = unflatten(h->second);
        else if (p.read.hparams.is_object())
          config = unflatten(p.read.hparams);
        else
          config = Json(Json::Object{});
      }
      RunStore::ImportedRun r;
      const auto text = [&](const char* key, std::string fallback) {
        return description.is_object() && description.contains(key) &&
                       description.at(key).is_string()
                   ? description.at(key).as_string()
                   : fallback;
      };
      r.name = text("name", run_name(p.folder, folders.size()));
      r.preset = text("preset", "tensorboard");
      r.precision_summary = text("precision_summary", precision_summary_of(config));
      r.notes = text("notes", "");
      std::string tags = text("tags", "");
      for (const auto& t : options_.tags) tags += (tags.empty() ? "" : ", ") + t;
      r.tags = tags;
      r.config = std::move(config);
      r.source = "tensorboard";
      r.source_path = p.folder;
      r.started_at = *p.run.state.start;
      r.status = options_.follow ? run_status::kRunning : run_status::kFinished;
      r.ended_at = p.run.state.end;
      p.run.live = options_.follow;
      p.run.id = store_.create_imported_run(r);
      p.run.name = r.name;
    }
    ImportReport::Run summary{p.run.id, p.run.name, p.folder, p.is_new, 0, 0, 0};
    summary.scalars = static_cast<int64_t>(p.read.batch.scalars.size());
    summary.histograms = static_cast<int64_t>(p.read.batch.histograms.size());
    summary.texts = static_cast<int64_t>(p.read.batch.events.size());
    if (p.read.records > 0 || p.is_new) {
      p.read.batch.state = p.run.state.to_json().dump();
      store_.append_import(p.run.id, p.read.batch);
    }
    // A new run was created running (followed) or finished (ended at its last event).
    if (options_.follow && !p.run.live) {
      store_.set_import_status(p.run.id, run_status::kRunning, {});
      p.run.live = true;
    } else if (!options_.follow && !p.is_new && (p.read.records > 0 || p.run.unfinished)) {
      store_.set_import_status(p.run.id, run_status::kFinished, p.run.state.end);
      p.run.unfinished = false;
    }
    const bool gained = p.is_new || summary.scalars || summary.histograms || summary.texts;
    runs_[p.folder] = std::move(p.run);
    if (gained) rep.runs.push_back(std::move(summary));
  }
  return rep;
}

void Importer::finish() {
  if (!options_.follow) return;
  for (auto& [folder, t] : runs_)
    if (t.live) {
      store_.set_import_status(t.id, run_status::kFinished, t.state.end);
      t.live = false;
    }
}

}  // namespace fp8rl::tblog
