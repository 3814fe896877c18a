// Where the studio's event-loop stalls come from: the GUI thread's event dispatches timed one by
// one (QApplication::notify), the slowest kept with the nested dispatches that took their time
// (a repaint's Paint events per widget, a timer slot's layout requests). Used by
// `fp8rl-studio --bench --profile`; off, it costs one pointer test per event.
#pragma once

#include <QApplication>
#include <QPointer>
#include <QString>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fp8rl::studio {

class DispatchProfile {
 public:
  // One outermost dispatch that took at least the threshold.
  struct Slow {
    double wall_ms = 0, cpu_ms = 0;  // cpu: the GUI thread's own CPU time in it
    double at_s = 0;                 // seconds since the profile started
    int blocked = 0, preempted = 0;  // times the thread gave the CPU up in it
    QString what;                    // "Timer StudioSession/drain", "UpdateRequest MainWindow"
    std::vector<std::pair<QString, double>> inner;  // nested dispatches by label, ms, largest first
  };

  // One late tick of the benchmark's 10 ms timer, with the outermost dispatches run since the
  // tick before it: what delayed it (or, when they add up to little, that the thread was not
  // running: preempted, or woken late).
  struct Stall {
    double late_ms = 0, at_s = 0;
    double dispatched_ms = 0, cpu_ms = 0;  // the dispatches' wall time and the thread's CPU time
    int blocked = 0, preempted = 0;        // in those dispatches
    std::vector<std::pair<QString, double>> dispatches;  // the largest, in the order they ran
  };

  explicit DispatchProfile(double threshold_ms = 8.0);

  void begin(QObject* receiver, QEvent* event);
  void end();
  // The benchmark's tick fired `late_ms` late: keep what ran since the previous tick when it is
  // among the worst.
  void tick(double late_ms);

  // The `n` slowest dispatches over the threshold, slowest first.
  std::vector<Slow> slowest(size_t n) const;
  // Per label: how many outermost dispatches took at least the threshold, and their total ms.
  std::map<QString, std::pair<int, double>> overThreshold() const;
  int64_t dispatches() const { return dispatches_; }
  // The report printed by the benchmark.
  std::string report(size_t n) const;

  // "Type receiver": the receiver's class (a timer: its parent's class and its own name).
  static QString describe(const QObject* receiver, const QEvent* event);

 private:
  struct Frame {
    QPointer<QObject> receiver;  // null once the dispatch deleted it
    const char* class_name;      // the receiver's, for then
    const QEvent* event;
    int64_t wall0_ns;
    double cpu0_ms;
    long blocked0, preempted0;
  };
  static QString describe(const Frame& f);

  double threshold_ms_;
  int64_t start_ns_;
  std::vector<Frame> stack_;
  std::map<QString, double> inner_;  // the current outermost dispatch's children
  std::vector<Slow> slow_;           // kept sorted by wall time, at most kKeep
  std::map<QString, std::pair<int, double>> over_;
  int64_t dispatches_ = 0;
  static constexpr size_t kKeep = 64;
  struct Ran {
    QString what;
    double wall_ms, cpu_ms;
    int blocked, preempted;
  };
  std::vector<Ran> since_tick_;  // outermost dispatches since the last tick
  double tick_cpu_ms_ = -1;      // the thread's CPU time at the last tick
  std::vector<Stall> stalls_;    // the worst, latest first
  static constexpr size_t kKeepStalls = 12;
};

// The studio's QApplication: notify() reports to a profile while one is set.
class StudioApplication : public QApplication {
 public:
  StudioApplication(int& argc, char** argv) : QApplication(argc, argv) {}
  bool notify(QObject* receiver, QEvent* event) override;
  // Starts timing the GUI thread's dispatches (replacing a profile set before); nullptr stops.
  static void setProfile(std::shared_ptr<DispatchProfile> profile);
};

}  // namespace fp8rl::studio
