#include "ui/charts/replot_queue.hpp"

#include <qcustomplot.h>

#include <QCoreApplication>
#include <QPointer>
#include <QTimer>
#include <deque>

namespace fp8rl::ui {

namespace {

class ReplotQueue : public QObject {
 public:
  ReplotQueue() : QObject(QCoreApplication::instance()), timer_(new QTimer(this)) {
    setObjectName(QStringLiteral("replot_queue"));
    timer_->setObjectName(QStringLiteral("replots"));  // named in event profiles
    timer_->setInterval(0);  // a zero timer fires once per pass, after the pending events
    connect(timer_, &QTimer::timeout, this, [this] { replotOne(); });
  }

  void add(QCustomPlot* plot) {
    for (const auto& p : waiting_)
      if (p == plot) return;
    waiting_.emplace_back(plot);
    if (!timer_->isActive()) timer_->start();
  }

  void replotOne() {
    while (!waiting_.empty()) {
      const QPointer<QCustomPlot> p = waiting_.front();
      waiting_.pop_front();
      if (!p) continue;  // deleted while waiting
      p->replot(QCustomPlot::rpRefreshHint);
      break;
    }
    if (waiting_.empty()) timer_->stop();
  }

  void flush() {
    while (!waiting_.empty()) replotOne();
  }

 private:
  QTimer* timer_;
  std::deque<QPointer<QCustomPlot>> waiting_;
};

ReplotQueue* queue() {
  // Owned by the application (gone with it); the GUI thread's only.
  static QPointer<ReplotQueue> q;
  if (!q) q = new ReplotQueue;
  return q;
}

}  // namespace

void queueReplot(QCustomPlot* plot) {
  queue()->add(plot);
}

void flushReplots() {
  queue()->flush();
}

}  // namespace fp8rl::ui
