#include "loadgen/compare.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "core/strings.h"

namespace peregrine::loadgen {
namespace {

std::string xml_escaped(std::string_view text) {
  std::string out;
  append_html_escaped(out, text);
  return out;
}

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

double Ms(uint64_t us) {
  return static_cast<double>(us) / 1000.0;
}

struct Row {
  const char* label;
  const char* format;
  double RunSummary::*field;
};

const Row kRows[] = {
    {"Requests per second", "%.2f", &RunSummary::requests_per_second},
    {"Latency p50 (ms)", "%.3f", &RunSummary::p50_ms},
    {"Latency p90 (ms)", "%.3f", &RunSummary::p90_ms},
    {"Latency p99 (ms)", "%.3f", &RunSummary::p99_ms},
    {"Latency p99.9 (ms)", "%.3f", &RunSummary::p999_ms},
    {"Latency p99.99 (ms)", "%.3f", &RunSummary::p9999_ms},
    {"Latency max (ms)", "%.3f", &RunSummary::max_ms},
    {"Latency mean (ms)", "%.3f", &RunSummary::mean_ms},
    {"Failed requests", "%.0f", &RunSummary::failed},
    {"Non-2xx responses", "%.0f", &RunSummary::non2xx},
    {"Transfer rate (KB/s)", "%.2f", &RunSummary::transfer_kbps},
    {"Client CPU (us/req)", "%.2f", &RunSummary::client_cpu_us_per_request},
    {"Server closes", "%.0f", &RunSummary::server_closes},
};

double MedianOf(const CompareTarget& t, double RunSummary::*field) {
  std::vector<double> v;
  v.reserve(t.rounds.size());
  for (const RunSummary& r : t.rounds) v.push_back(r.*field);
  return median(std::move(v));
}

std::string Ratio(double value, double base) {
  if (base == 0) return value == 0 ? "x1.00" : "-";
  return Fmt("x%.2f", value / base);
}

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace

RunSummary summarize(const RunInfo& info, const RunStats& s) {
  RunSummary r;
  const double elapsed = info.elapsed_s > 0 ? info.elapsed_s : 1e-9;
  r.requests_per_second = static_cast<double>(s.completed) / elapsed;
  r.p50_ms = Ms(s.total.percentile(50));
  r.p90_ms = Ms(s.total.percentile(90));
  r.p99_ms = Ms(s.total.percentile(99));
  r.p999_ms = Ms(s.total.percentile(99.9));
  r.p9999_ms = Ms(s.total.percentile(99.99));
  r.max_ms = Ms(s.total.max());
  r.mean_ms = s.total.mean() / 1000.0;
  r.failed = static_cast<double>(s.failed(info.strict_length));
  r.non2xx = static_cast<double>(s.non2xx);
  r.transfer_kbps = static_cast<double>(s.bytes_read) / 1024.0 / elapsed;
  r.client_cpu_us_per_request = client_cpu_us_per_request(info, s);
  double closes = 0;
  for (uint64_t n : s.server_closes) closes += static_cast<double>(n);
  r.server_closes = closes;
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

std::string format_compare_table(const std::vector<CompareTarget>& targets) {
  std::string o;
  size_t rounds = targets.empty() ? 0 : targets[0].rounds.size();
  o += "Medians over " + std::to_string(rounds) + " round" + (rounds == 1 ? "" : "s") +
       "; ratios are to #1 (for latency, CPU and failures lower is better)\n";
  for (size_t i = 0; i < targets.size(); ++i) {
    o += "  #" + std::to_string(i + 1) + "  " + targets[i].url;
    if (!targets[i].server_software.empty()) o += "  (" + targets[i].server_software + ")";
    o += "\n";
  }
  o += "\n";
  const size_t label_w = 24;
  const size_t col_w = 22;
  std::string header = Pad("", label_w);
  for (size_t i = 0; i < targets.size(); ++i) header += Pad("#" + std::to_string(i + 1), col_w);
  while (!header.empty() && header.back() == ' ') header.pop_back();
  o += header + "\n";
  for (const Row& row : kRows) {
    std::string line = Pad(row.label, label_w);
    const double base = targets.empty() ? 0 : MedianOf(targets[0], row.field);
    for (size_t i = 0; i < targets.size(); ++i) {
      double v = MedianOf(targets[i], row.field);
      std::string cell = Fmt(row.format, v);
      if (i > 0) cell += " (" + Ratio(v, base) + ")";
      line += Pad(cell, col_w);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    o += line + "\n";
  }
  return o;
}

std::string format_compare_json(const std::vector<CompareTarget>& targets, int rounds) {
  std::string o = "{\n  \"rounds\": " + std::to_string(rounds) + ",\n  \"targets\": [\n";
  for (size_t i = 0; i < targets.size(); ++i) {
    const CompareTarget& t = targets[i];
    o += "    {\n      \"url\": " + json_escape(t.url) +
         ",\n      \"server_software\": " + json_escape(t.server_software) +
         ",\n      \"median\": {";
    bool first = true;
    for (const Row& row : kRows) {
      double v = MedianOf(t, row.field);
      o += std::string(first ? "" : ", ") + json_escape(row.label) + ": " + Fmt("%.6g", v);
      first = false;
    }
    o += "},\n      \"ratio_to_first\": {";
    first = true;
    for (const Row& row : kRows) {
      double base = MedianOf(targets[0], row.field);
      double v = MedianOf(t, row.field);
      o += std::string(first ? "" : ", ") + json_escape(row.label) + ": " +
           (base == 0 ? std::string("null") : Fmt("%.6g", v / base));
      first = false;
    }
    o += "},\n      \"rounds\": [";
    for (size_t r = 0; r < t.rounds.size(); ++r) {
      o += r ? ", {" : "{";
      first = true;
      for (const Row& row : kRows) {
        o += std::string(first ? "" : ", ") + json_escape(row.label) + ": " +
             Fmt("%.6g", t.rounds[r].*row.field);
        first = false;
      }
      o += "}";
    }
    o += "]\n    }";
    o += i + 1 < targets.size() ? ",\n" : "\n";
  }
  o += "  ]\n}\n";
  return o;
}

std::string render_latency_svg(const std::vector<CompareTarget>& targets) {
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                  "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  static const double kPercentiles[] = {0,    10,   20,   30,    40,    50,    60,     70,    75,
                                        80,   85,   90,   92.5,  95,    96,    97,     98,    99,
                                        99.5, 99.7, 99.9, 99.95, 99.97, 99.99, 99.995, 99.999};
  const double width = 860, height = 500, left = 70, right = 220, top = 50, bottom = 60;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  const double x_max = 5.0;  // log10(1 / (1 - 0.99999))
  double y_max = 0;
  for (const CompareTarget& t : targets) y_max = std::max(y_max, Ms(t.latency.max()));
  if (y_max <= 0) y_max = 1;
  // A round upper bound: 1, 2 or 5 times a power of ten.
  double step = std::pow(10.0, std::floor(std::log10(y_max)));
  double nice = step;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * step >= y_max) {
      nice = m * step;
      break;
    }
  }
  y_max = nice;
  auto x_of = [&](double p) {
    double x = p >= 100 ? x_max : std::min(x_max, std::log10(1.0 / (1.0 - p / 100.0)));
    return left + plot_w * x / x_max;
  };
  auto y_of = [&](double ms) { return top + plot_h * (1.0 - ms / y_max); };

  std::string o;
  o += Fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" ", width) +
       Fmt("height=\"%.0f\" ", height) + "font-family=\"sans-serif\" font-size=\"12\">\n";
  o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o += Fmt("<text x=\"%.0f\" y=\"28\" font-size=\"16\">Latency by percentile</text>\n", left);
  // Axes and grid.
  for (int i = 0; i <= 5; ++i) {
    double v = y_max * i / 5.0;
    double y = y_of(v);
    o += Fmt("<line x1=\"%.1f\" ", left) + Fmt("y1=\"%.1f\" ", y) +
         Fmt("x2=\"%.1f\" ", left + plot_w) + Fmt("y2=\"%.1f\" stroke=\"#ddd\"/>\n", y);
    o += Fmt("<text x=\"%.1f\" ", left - 8) + Fmt("y=\"%.1f\" text-anchor=\"end\">", y + 4) +
         Fmt("%g</text>\n", v);
  }
  static const struct {
    double p;
    const char* label;
  } kTicks[] = {{0, "0%"},       {90, "90%"},       {99, "99%"},
                {99.9, "99.9%"}, {99.99, "99.99%"}, {99.999, "99.999%"}};
  for (const auto& tick : kTicks) {
    double x = x_of(tick.p);
    o += Fmt("<line x1=\"%.1f\" ", x) + Fmt("y1=\"%.1f\" ", top) + Fmt("x2=\"%.1f\" ", x) +
         Fmt("y2=\"%.1f\" stroke=\"#ddd\"/>\n", top + plot_h);
    o += Fmt("<text x=\"%.1f\" ", x) +
         Fmt("y=\"%.1f\" text-anchor=\"middle\">", top + plot_h + 18) + tick.label + "</text>\n";
  }
  o += Fmt("<rect x=\"%.1f\" ", left) + Fmt("y=\"%.1f\" ", top) + Fmt("width=\"%.1f\" ", plot_w) +
       Fmt("height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n", plot_h);
  o += Fmt("<text x=\"%.1f\" ", left + plot_w / 2) +
       Fmt("y=\"%.1f\" text-anchor=\"middle\">percentile</text>\n", height - 15);
  o += Fmt("<text x=\"18\" y=\"%.1f\" ", top + plot_h / 2) +
       Fmt("transform=\"rotate(-90 18 %.1f)\" text-anchor=\"middle\">latency (ms)</text>\n",
           top + plot_h / 2);
  // One line per target.
  for (size_t i = 0; i < targets.size(); ++i) {
    const CompareTarget& t = targets[i];
    const char* color = kColors[i % (sizeof kColors / sizeof kColors[0])];
    if (t.latency.count()) {
      o += std::string("<polyline fill=\"none\" stroke-width=\"2\" stroke=\"") + color +
           "\" points=\"";
      for (double p : kPercentiles) {
        double v = p == 0 ? Ms(t.latency.min()) : Ms(t.latency.percentile(p));
        o += Fmt("%.1f,", x_of(p)) + Fmt("%.1f ", y_of(v));
      }
      o += Fmt("%.1f,", x_of(100)) + Fmt("%.1f", y_of(Ms(t.latency.max()))) + "\"/>\n";
    }
    double ly = top + 10 + 36.0 * static_cast<double>(i);
    double lx = left + plot_w + 15;
    o += Fmt("<line x1=\"%.1f\" ", lx) + Fmt("y1=\"%.1f\" ", ly) + Fmt("x2=\"%.1f\" ", lx + 20) +
         Fmt("y2=\"%.1f\" stroke-width=\"3\" stroke=\"", ly) + color + "\"/>\n";
    std::string name =
        "#" + std::to_string(i + 1) + (t.server_software.empty() ? "" : " " + t.server_software);
    o += Fmt("<text x=\"%.1f\" ", lx + 26) + Fmt("y=\"%.1f\">", ly + 4) + xml_escaped(name) +
         "</text>\n";
    std::string url = t.url.substr(0, t.url.size() > 30 ? 29 : 30);
    if (t.url.size() > 30) url.append("...");  // not substr() + "...": GCC 12's -Warray-bounds
    o += Fmt("<text x=\"%.1f\" ", lx + 26) +
         Fmt("y=\"%.1f\" font-size=\"10\" fill=\"#555\">", ly + 18) + xml_escaped(url) +
         "</text>\n";
  }
  o += "</svg>\n";
  return o;
}

}  // namespace peregrine::loadgen
