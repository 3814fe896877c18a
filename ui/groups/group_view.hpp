// The Groups view: a sweep's groups (the runs sharing every axis value but the seed's) compared
// like runs — every headline chart of a run (validation and train accuracy, reward, loss,
// mismatch, entropy, throughput, step time) with each group's mean and 95 % bootstrap band over
// its seeds; the verdict of group A against group B in words and as a table (difference or
// ratio of the means with bootstrap and t intervals, the seeds, what it would take to detect a
// given difference); each group's outcomes; the settings that differ between the groups; and
// an HTML report to share. It shows a GroupSnapshot (the session reads it off the GUI thread);
// the statistics are engine/groups' (Qt-free).
#pragma once

#include <QWidget>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "groups/verdict.hpp"
#include "ui/data/group_data.hpp"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QPushButton;
class QTabWidget;
class QTableWidget;
class QTextBrowser;

namespace fp8rl::ui {

class ChartView;

class GroupView : public QWidget {
  Q_OBJECT
 public:
  explicit GroupView(QWidget* parent = nullptr);

  // What to show (the same sweep again: its charts are updated in place).
  void setSnapshot(std::shared_ptr<const GroupSnapshot> snapshot);
  const GroupSnapshot* snapshot() const { return snap_.get(); }
  // Group A is compared against group B (labels); an unknown label keeps the current choice.
  void setPair(const QString& a, const QString& b);
  // The verdict shown (nullptr with fewer than two groups).
  const Verdict* verdict() const { return verdict_ ? &*verdict_ : nullptr; }
  // Writes the HTML report of what is shown (fp8rl report's): false with *error.
  bool exportReport(const QString& path, QString* error) const;

  QLabel* title() const { return title_; }
  QLabel* legend() const { return legend_; }
  QComboBox* aBox() const { return a_; }
  QComboBox* bBox() const { return b_; }
  QDoubleSpinBox* targetBox() const { return target_; }
  QPushButton* reportButton() const { return report_; }
  ChartView* chart(const std::string& key) const;
  const std::vector<ChartView*>& charts() const { return charts_; }
  QTabWidget* detailTabs() const { return details_; }
  QTableWidget* verdictTable() const { return verdict_table_; }
  QTextBrowser* verdictText() const { return verdict_text_; }
  QTableWidget* groupsTable() const { return groups_table_; }
  QTableWidget* diffTable() const { return diff_table_; }

 signals:
  // The user set the validation target of time-to-target (the session reads outcomes again).
  void targetChanged(double target);
  void runChosen(qint64 run);

 private:
  void updateCharts();
  void updateVerdict();
  void updateGroupsTable();
  void updateDiff();
  int groupIndex(const QString& label) const;

  std::shared_ptr<const GroupSnapshot> snap_;
  std::optional<Verdict> verdict_;
  QStringList labels_;  // the groups whose curves the charts hold, in order
  QString pending_a_, pending_b_;  // setPair() before the groups were known
  QLabel* title_;
  QComboBox* a_;
  QComboBox* b_;
  QDoubleSpinBox* target_;
  QPushButton* report_;
  QLabel* legend_ = nullptr;        // the groups' colours, above the charts
  std::vector<ChartView*> charts_;  // one per group chart metric
  QTabWidget* details_;
  QTableWidget* verdict_table_;
  QTextBrowser* verdict_text_;
  QTableWidget* groups_table_;
  QTableWidget* diff_table_;
};

}  // namespace fp8rl::ui
