// What the studio tests that drive real worker processes share: waiting for a condition while
// the event loop runs, and reaping the workers a test started.
#pragma once

#include <QElapsedTimer>
#include <QtTest>
#include <csignal>

#include "ui/data/run_data.hpp"
#include "ui/data/studio_session.hpp"

// Kills the workers of a session's live runs when a test ends, passed or failed, so a failed
// check never leaves a worker training in the background.
struct WorkerReaper {
  fp8rl::ui::StudioSession& session;
  ~WorkerReaper() {
    session.refresh();
    for (const auto& r : session.runs())
      if (fp8rl::run_status::is_live(r.status) && r.pid > 0) ::kill(static_cast<pid_t>(r.pid), SIGKILL);
  }
};

// Runs the event loop until cond() holds (true) or ms have passed (false).
template <typename F>
bool wait_for(F&& cond, int ms) {
  QElapsedTimer t;
  t.start();
  while (!cond()) {
    if (t.elapsed() > ms) return false;
    QTest::qWait(50);
  }
  return true;
}
