#include "groups/run_groups.hpp"

#include <algorithm>
#include <map>

#include "core/error.hpp"

namespace fp8rl {
namespace {

std::string text_of(const Json& v) {
  return v.is_string() ? v.as_string() : v.dump();
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t next = s.find(sep, pos);
    out.push_back(s.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) return out;
    pos = next + 1;
  }
}

int64_t parse_id(const std::string& text, const std::string& spec) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw Error("group '" + spec + "': '" + text + "' is not a run or sweep id");
}

std::string labels(const std::vector<RunGroup>& groups) {
  std::string s;
  for (const auto& g : groups) s += (s.empty() ? "" : ", ") + g.label;
  return s;
}

}  // namespace

std::string RunGroup::replicate_of(const RunStore::RunRow& run) const {
  if (replicate.empty() || !run.axis_values.is_object() || !run.axis_values.contains(replicate))
    return "";
  return text_of(run.axis_values.at(replicate));
}

std::vector<RunGroup> sweep_groups(const RunStore::SweepRow& sweep,
                                   const std::vector<RunStore::SweepPoint>& points,
                                   const std::vector<RunStore::RunRow>& runs) {
  std::map<int64_t, const RunStore::RunRow*> by_id;
  for (const auto& r : runs) by_id[r.id] = &r;
  std::vector<RunGroup> groups;
  std::map<std::string, size_t> index;  // key dump → group
  std::vector<std::string> others;
  for (const auto& a : sweep.axes)
    if (a != sweep.replicate) others.push_back(a);
  for (const auto& p : points) {
    Json::Object key;
    std::string label;
    for (const auto& a : others) {
      const std::string v = p.axis_values.is_object() && p.axis_values.contains(a)
                                ? text_of(p.axis_values.at(a))
                                : "";
      key[a] = Json(v);
      label += (label.empty() ? "" : ", ") + (others.size() == 1 ? v : a + "=" + v);
    }
    if (others.empty()) label = sweep.name;
    const std::string k = Json(key).dump();
    auto [it, fresh] = index.emplace(k, groups.size());
    if (fresh) {
      RunGroup g;
      g.label = label;
      g.sweep_id = sweep.id;
      g.sweep_name = sweep.name;
      g.key = Json(key);
      g.replicate = sweep.replicate;
      groups.push_back(std::move(g));
    }
    RunGroup& g = groups[it->second];
    const auto run = p.run_id ? by_id.find(*p.run_id) : by_id.end();
    if (run == by_id.end())
      ++g.queued;
    else
      g.runs.push_back(*run->second);
  }
  return groups;
}

std::vector<RunGroup> sweep_groups(RunStore& store, int64_t sweep) {
  const auto row = store.find_sweep(sweep);
  if (!row) throw Error("no sweep " + std::to_string(sweep) + " in " + store.path());
  return sweep_groups(*row, store.sweep_points(sweep), store.list_runs());
}

RunGroup resolve_group(RunStore& store, const std::string& spec) {
  std::string list;
  if (spec.rfind("runs:", 0) == 0)
    list = spec.substr(5);
  else if (spec.find(',') != std::string::npos && spec.find(':') == std::string::npos)
    list = spec;
  if (!list.empty()) {
    RunGroup g;
    g.label = "runs " + list;
    for (const auto& item : split(list, ',')) {
      const int64_t id = parse_id(item, spec);
      auto row = store.find_run(id);
      if (!row) throw Error("group '" + spec + "': no run " + item + " in " + store.path());
      // Runs of one sweep keep its replicate axis, so that they pair by seed.
      if (row->sweep_id && g.runs.empty())
        if (auto s = store.find_sweep(*row->sweep_id)) g.replicate = s->replicate;
      g.runs.push_back(std::move(*row));
    }
    return g;
  }
  const size_t colon = spec.find(':');
  const int64_t sweep = parse_id(spec.substr(0, colon), spec);
  std::vector<RunGroup> groups = sweep_groups(store, sweep);
  if (colon == std::string::npos) {
    if (groups.size() == 1) return groups.front();
    throw Error("group '" + spec + "': sweep " + std::to_string(sweep) + " has " +
                std::to_string(groups.size()) + " groups (" + labels(groups) +
                "): name one as " + spec + ":VALUE");
  }
  const std::string want = spec.substr(colon + 1);
  std::vector<RunGroup> found;
  for (auto& g : groups) {
    bool match = true;
    for (const auto& part : split(want, ',')) {
      const size_t eq = part.find('=');
      if (eq == std::string::npos) {
        bool any = false;
        for (const auto& [axis, v] : g.key.as_object()) any = any || text_of(v) == part;
        match = match && any;
      } else {
        const std::string axis = part.substr(0, eq), value = part.substr(eq + 1);
        match = match && g.key.contains(axis) && text_of(g.key.at(axis)) == value;
      }
    }
    if (match) found.push_back(std::move(g));
  }
  if (found.size() == 1) return found.front();
  const auto again = sweep_groups(store, sweep);
  if (found.empty())
    throw Error("group '" + spec + "': no group of sweep " + std::to_string(sweep) + " has " +
                want + " (groups: " + labels(again) + ")");
  throw Error("group '" + spec + "': " + std::to_string(found.size()) + " groups match (" +
              labels(found) + "): name more axes, as AXIS=VALUE,AXIS=VALUE");
}

}  // namespace fp8rl
