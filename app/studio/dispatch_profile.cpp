#include "dispatch_profile.hpp"

#include <sys/resource.h>
#include <time.h>

#include <QElapsedTimer>
#include <QEvent>
#include <QMetaEnum>
#include <QThread>
#include <QTimer>
#include <algorithm>
#include <cstdio>

namespace fp8rl::studio {

namespace {

int64_t nowNs() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// The GUI thread's CPU time and how often it gave the CPU up: blocked (waiting on a lock, a
// page, a pipe) or preempted.
struct Usage {
  double cpu_ms = 0;
  long blocked = 0, preempted = 0;
};

Usage threadUsage() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  const auto ms = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3;
  };
  return {ms(u.ru_utime) + ms(u.ru_stime), u.ru_nvcsw, u.ru_nivcsw};
}

QString objectLabel(const QObject* o) {
  QString s = QString::fromLatin1(o->metaObject()->className());
  if (!o->objectName().isEmpty()) s += QLatin1Char('/') + o->objectName();
  return s;
}

// "Timer", "UpdateRequest", … (the number of a type without a name).
QString typeName(const QEvent* event) {
  static const QMetaEnum types = QMetaEnum::fromType<QEvent::Type>();
  const char* type = types.valueToKey(event->type());
  return type ? QString::fromLatin1(type) : QString::number(event->type());
}

// Inserts `item` into `worst` (sorted by `ms`, largest first) and keeps the `keep` largest.
template <class T>
void keepWorst(std::vector<T>& worst, T item, double T::*ms, size_t keep) {
  const auto at = std::upper_bound(worst.begin(), worst.end(), item,
                                   [ms](const T& a, const T& b) { return a.*ms > b.*ms; });
  worst.insert(at, std::move(item));
  if (worst.size() > keep) worst.pop_back();
}

}  // namespace

DispatchProfile::DispatchProfile(double threshold_ms)
    : threshold_ms_(threshold_ms), start_ns_(nowNs()) {}

QString DispatchProfile::describe(const QObject* receiver, const QEvent* event) {
  const QString s = typeName(event) + QLatin1Char(' ');
  // A timer's slot belongs to whoever owns the timer: name that (and the timer, when named).
  if (qobject_cast<const QTimer*>(receiver) && receiver->parent())
    return s + objectLabel(receiver->parent()) + QLatin1Char('/') +
           (receiver->objectName().isEmpty() ? QStringLiteral("timer") : receiver->objectName());
  return s + objectLabel(receiver);
}

QString DispatchProfile::describe(const Frame& f) {
  if (f.receiver) return describe(f.receiver, f.event);
  // Deleted by its own event (a deferred delete, a single-shot timer's owner).
  return typeName(f.event) + QLatin1Char(' ') + QString::fromLatin1(f.class_name) +
         QStringLiteral(" (deleted)");
}

void DispatchProfile::begin(QObject* receiver, QEvent* event) {
  Frame f{receiver, receiver->metaObject()->className(), event, nowNs(), 0, 0, 0};
  if (stack_.empty()) {
    const Usage u = threadUsage();
    f.cpu0_ms = u.cpu_ms;
    f.blocked0 = u.blocked;
    f.preempted0 = u.preempted;
  }
  stack_.push_back(f);
}

void DispatchProfile::end() {
  const Frame f = stack_.back();
  stack_.pop_back();
  const double ms = static_cast<double>(nowNs() - f.wall0_ns) / 1e6;
  if (!stack_.empty()) {
    // Children of the outermost dispatch only: what a slow one spent its time on.
    if (stack_.size() == 1 && ms >= 0.2) inner_[describe(f)] += ms;
    return;
  }
  ++dispatches_;
  const Usage u = threadUsage();
  const double cpu_ms = u.cpu_ms - f.cpu0_ms;
  const int blocked = static_cast<int>(u.blocked - f.blocked0);
  const int preempted = static_cast<int>(u.preempted - f.preempted0);
  if (ms >= 0.3) since_tick_.push_back({describe(f), ms, cpu_ms, blocked, preempted});
  if (ms >= threshold_ms_) {
    Slow s;
    s.wall_ms = ms;
    s.cpu_ms = cpu_ms;
    s.blocked = blocked;
    s.preempted = preempted;
    s.at_s = static_cast<double>(f.wall0_ns - start_ns_) / 1e9;
    s.what = describe(f);
    s.inner.assign(inner_.begin(), inner_.end());
    std::sort(s.inner.begin(), s.inner.end(),
              [](const auto& a, const auto& b) { return a.second > b.second; });
    if (s.inner.size() > 5) s.inner.resize(5);
    auto& o = over_[s.what];
    ++o.first;
    o.second += ms;
    keepWorst(slow_, std::move(s), &Slow::wall_ms, kKeep);
  }
  inner_.clear();
}

void DispatchProfile::tick(double late_ms) {
  const double cpu = threadUsage().cpu_ms;
  if (tick_cpu_ms_ >= 0 && late_ms >= threshold_ms_ &&
      (stalls_.size() < kKeepStalls || late_ms > stalls_.back().late_ms)) {
    Stall s;
    s.late_ms = late_ms;
    s.at_s = static_cast<double>(nowNs() - start_ns_) / 1e9;
    s.cpu_ms = cpu - tick_cpu_ms_;
    for (const Ran& r : since_tick_) {
      s.dispatched_ms += r.wall_ms;
      s.blocked += r.blocked;
      s.preempted += r.preempted;
    }
    // The largest eight, kept in the order they ran.
    std::vector<size_t> order(since_tick_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return since_tick_[a].wall_ms > since_tick_[b].wall_ms; });
    if (order.size() > 8) order.resize(8);
    std::sort(order.begin(), order.end());
    for (size_t i : order) s.dispatches.emplace_back(since_tick_[i].what, since_tick_[i].wall_ms);
    keepWorst(stalls_, std::move(s), &Stall::late_ms, kKeepStalls);
  }
  since_tick_.clear();
  tick_cpu_ms_ = cpu;
}

std::vector<DispatchProfile::Slow> DispatchProfile::slowest(size_t n) const {
  return {slow_.begin(), slow_.begin() + static_cast<std::ptrdiff_t>(std::min(n, slow_.size()))};
}

std::map<QString, std::pair<int, double>> DispatchProfile::overThreshold() const {
  return over_;
}

std::string DispatchProfile::report(size_t n) const {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "GUI-thread dispatches: %lld; at least %.0f ms, by what:\n",
                static_cast<long long>(dispatches_), threshold_ms_);
  out += line;
  std::vector<std::pair<QString, std::pair<int, double>>> by(over_.begin(), over_.end());
  std::sort(by.begin(), by.end(),
            [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  for (const auto& [what, c] : by) {
    std::snprintf(line, sizeof line, "  %5d × %-60s %9.1f ms in all\n", c.first,
                  what.toLocal8Bit().constData(), c.second);
    out += line;
  }
  std::snprintf(
      line, sizeof line,
      "the %zu ticks that fired latest (late ms, at s; the dispatches since the tick before: "
      "wall ms, the GUI thread's CPU ms):\n",
      stalls_.size());
  out += line;
  for (const Stall& s : stalls_) {
    std::snprintf(line, sizeof line,
                  "  %6.1f late at %7.1f s: dispatched %.1f ms, CPU %.1f ms, blocked %d×, "
                  "preempted %d×\n",
                  s.late_ms, s.at_s, s.dispatched_ms, s.cpu_ms, s.blocked, s.preempted);
    out += line;
    for (const auto& [what, ms] : s.dispatches) {
      std::snprintf(line, sizeof line, "  %14.1f %s\n", ms, what.toLocal8Bit().constData());
      out += line;
    }
  }
  std::snprintf(line, sizeof line,
                "the %zu slowest dispatches (wall ms, the GUI thread's CPU ms, at s):\n",
                std::min(n, slow_.size()));
  out += line;
  for (const Slow& s : slowest(n)) {
    std::snprintf(line, sizeof line, "  %6.1f %6.1f %7.1f  %s (blocked %d×, preempted %d×)\n",
                  s.wall_ms, s.cpu_ms, s.at_s, s.what.toLocal8Bit().constData(), s.blocked,
                  s.preempted);
    out += line;
    for (const auto& [what, ms] : s.inner) {
      std::snprintf(line, sizeof line, "  %6.1f %14s %s\n", ms, "", what.toLocal8Bit().constData());
      out += line;
    }
  }
  return out;
}

namespace {
std::shared_ptr<DispatchProfile> current_profile;  // the GUI thread's
}  // namespace

void StudioApplication::setProfile(std::shared_ptr<DispatchProfile> profile) {
  current_profile = std::move(profile);
}

bool StudioApplication::notify(QObject* receiver, QEvent* event) {
  if (!current_profile || QThread::currentThread() != thread())
    return QApplication::notify(receiver, event);
  // Held for the dispatch: the profile may be replaced by what the dispatch runs.
  const std::shared_ptr<DispatchProfile> p = current_profile;
  p->begin(receiver, event);
  const bool r = QApplication::notify(receiver, event);
  p->end();
  return r;
}

}  // namespace fp8rl::studio
