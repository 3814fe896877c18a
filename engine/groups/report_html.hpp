// A self-contained HTML report of run groups (`fp8rl report`): the verdicts in words and as a
// table, the groups and their runs, and a chart per metric with each group's mean and 95 %
// bootstrap band over seeds, drawn as inline SVG — no script, no style sheet or font from
// elsewhere, so it reads in any browser without the studio or a network.
#pragma once

#include <string>
#include <vector>

#include "groups/group_series.hpp"
#include "groups/run_groups.hpp"
#include "groups/run_outcome.hpp"
#include "groups/verdict.hpp"

namespace fp8rl {

struct ReportChart {
  std::string key, title;
  std::vector<std::vector<BandPoint>> bands;  // one per group
};

struct ReportInput {
  std::string title;
  std::string source;  // the run database, for the header
  std::string generated;  // when and by what, for the header
  std::vector<RunGroup> groups;
  std::vector<std::vector<RunOutcome>> outcomes;  // per group, in its runs' order
  std::vector<Verdict> verdicts;
  std::vector<ReportChart> charts;
};

// The whole document.
std::string report_html(const ReportInput& in);
// One chart as an <svg> element (width × height pixels): a line and a band per group, axes
// with ticks, a legend; labels name the groups.
std::string svg_band_chart(const ReportChart& chart, const std::vector<std::string>& labels,
                           int width = 640, int height = 240);
// Text safe inside HTML.
std::string html_escape(const std::string& s);

}  // namespace fp8rl
