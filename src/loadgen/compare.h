// compare mode: the same load against several servers, alternately, for several rounds; a
// side-by-side table of medians with ratios to the first server, its JSON form, and an SVG
// latency-distribution chart. Pure: results in, text out.
#pragma once

#include <string>
#include <vector>

#include "loadgen/histogram.h"
#include "loadgen/report.h"

namespace peregrine::loadgen {

// The figures of one run that the comparison shows.
struct RunSummary {
  double requests_per_second = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, p999_ms = 0, p9999_ms = 0, max_ms = 0, mean_ms = 0;
  double failed = 0;
  double non2xx = 0;
  double transfer_kbps = 0;
  double client_cpu_us_per_request = 0;
  double server_closes = 0;
};

RunSummary summarize(const RunInfo& info, const RunStats& stats);

double median(std::vector<double> values);

struct CompareTarget {
  std::string url;
  std::string server_software;
  std::vector<RunSummary> rounds;
  Histogram latency;  // every round merged, for the plot
};

// The table: one row per figure, one column per target (median over rounds), then ratios of
// each target to the first ("x1.00").
std::string format_compare_table(const std::vector<CompareTarget>& targets);
std::string format_compare_json(const std::vector<CompareTarget>& targets, int rounds);
// Latency by percentile (x: 0 %, 90 %, 99 %, ... on a log scale of 1/(1-p)), one line per target.
std::string render_latency_svg(const std::vector<CompareTarget>& targets);

}  // namespace peregrine::loadgen
