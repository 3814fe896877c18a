// The runs panel's Sweeps tab: every sweep of the database as a tree — the sweep with its
// progress (done / running / queued, the time left), its groups (the runs sharing every axis
// value but the seed's), and each group's runs with their seed, status and step. Choosing a
// sweep or a group shows its groups; choosing a run shows the run; two groups selected compare.
// The panel is given what to show (it never touches the store).
#pragma once

#include <QWidget>
#include <vector>

#include "groups/run_groups.hpp"
#include "groups/sweep_progress.hpp"
#include "store/run_store.hpp"

class QLabel;
class QPushButton;
class QTreeWidget;
class QTreeWidgetItem;

namespace fp8rl::ui {

struct SweepEntry {
  RunStore::SweepRow sweep;
  SweepProgress progress;
  std::vector<RunGroup> groups;
};

class SweepsPanel : public QWidget {
  Q_OBJECT
 public:
  enum Column { kName, kProgress, kStatus, kColumns };
  // Item data roles: the sweep id (every item), the group label (groups and runs), the run id
  // (runs).
  static constexpr int kSweepRole = Qt::UserRole + 1;
  static constexpr int kGroupRole = Qt::UserRole + 2;
  static constexpr int kRunRole = Qt::UserRole + 3;

  explicit SweepsPanel(QWidget* parent = nullptr);

  // Shows these sweeps (newest first), keeping what is expanded and selected.
  void setSweeps(const std::vector<SweepEntry>& sweeps);
  QTreeWidget* tree() const { return tree_; }
  QPushButton* compareButton() const { return compare_; }
  // The groups selected (sweep id and labels; the labels of one sweep only).
  int64_t selectedSweep() const;
  QStringList selectedGroups() const;
  // Selects a group's item (tests, screenshots).
  void selectGroups(int64_t sweep, const QStringList& labels);

 signals:
  // A sweep or one of its groups was chosen: show the sweep's groups (label "" for the sweep).
  void groupsChosen(qint64 sweep, const QString& label);
  // Two groups of a sweep to compare (A against B).
  void compareChosen(qint64 sweep, const QString& a, const QString& b);
  void runChosen(qint64 run);

 private:
  void onCurrentChanged(QTreeWidgetItem* item);
  void updateCompareButton();

  QTreeWidget* tree_;
  QPushButton* compare_;
  QLabel* empty_;
  QString shown_;  // what the tree shows, to rebuild only on change
};

}  // namespace fp8rl::ui
