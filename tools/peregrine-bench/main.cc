// peregrine-bench: an ab-compatible load generator. See docs/bench.md.
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "engine.h"
#include "loadgen/compare.h"
#include "loadgen/options.h"
#include "loadgen/report.h"

#ifndef PEREGRINE_VERSION
#define PEREGRINE_VERSION "0.1.0"
#endif

namespace {

using namespace peregrine::loadgen;

int Fail(const std::string& message) {
  std::fprintf(stderr, "peregrine-bench: %s\n", message.c_str());
  return 1;
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return false;
  out << text;
  return static_cast<bool>(out);
}

std::string GnuplotText(const std::vector<GnuplotRecord>& records) {
  std::string o = "starttime\tseconds\tctime\tdtime\tttime\twait\n";
  char line[256];
  for (const GnuplotRecord& r : records) {
    time_t secs = static_cast<time_t>(r.start_us_wall / 1'000'000);
    char when[64];
    tm parts{};
    localtime_r(&secs, &parts);
    std::strftime(when, sizeof when, "%a %b %e %H:%M:%S %Y", &parts);
    std::snprintf(line, sizeof line, "%s\t%lld\t%lld\t%lld\t%lld\t%lld\n", when,
                  static_cast<long long>(secs), static_cast<long long>((r.connect_us + 500) / 1000),
                  static_cast<long long>((r.processing_us + 500) / 1000),
                  static_cast<long long>((r.total_us + 500) / 1000),
                  static_cast<long long>((r.wait_us + 500) / 1000));
    o += line;
  }
  return o;
}

// File descriptors: one per connection, plus the poller, stdio and some slack per worker.
std::string RaiseLimit(const Options& o, std::vector<std::string>& notes) {
  std::string note;
  std::string err = ensure_nofile(static_cast<uint64_t>(o.concurrency) + 64 + 8ull * 64, note);
  if (!note.empty()) notes.push_back(note);
  return err;
}

int RunSingle(const Options& o) {
  Target target;
  std::string err = prepare_target(o, o.urls[0], target);
  if (!err.empty()) return Fail(err);
  std::vector<std::string> notes;
  err = RaiseLimit(o, notes);
  if (!err.empty()) {
    release_target(target);
    return Fail(err);
  }
  if (!o.json) {
    std::printf("This is peregrine-bench, version %s (ab-compatible options and report)\n\n",
                PEREGRINE_VERSION);
    std::printf("Benchmarking %s (be patient)%s\n", target.url.host.c_str(),
                o.quiet ? "....." : "");
    std::fflush(stdout);
  }
  if (o.verbosity >= 2) {
    std::fprintf(stderr, "INFO: request:\n---\n%s\n---\n", target.request.c_str());
  }
  RunOutput out;
  run_load(o, target, !o.quiet && !o.json, out);
  out.info.notes.insert(out.info.notes.begin(), notes.begin(), notes.end());
  release_target(target);
  if (!o.csv_file.empty() && !WriteFile(o.csv_file, format_percentile_csv(out.stats.total))) {
    return Fail("cannot write " + o.csv_file);
  }
  if (!o.gnuplot_file.empty() && !WriteFile(o.gnuplot_file, GnuplotText(out.records))) {
    return Fail("cannot write " + o.gnuplot_file);
  }
  if (o.json) {
    std::fputs(format_json_report(out.info, out.stats).c_str(), stdout);
  } else {
    if (o.quiet) std::printf("done\n");
    std::printf("\n\n%s", format_text_report(out.info, out.stats).c_str());
  }
  return 0;
}

int RunCompare(Options o) {
  if (o.time_limit_s <= 0 && !o.requests_given) o.time_limit_s = 5;  // a sensible default per run
  std::vector<Target> targets(o.urls.size());
  for (size_t i = 0; i < o.urls.size(); ++i) {
    std::string err = prepare_target(o, o.urls[i], targets[i]);
    if (!err.empty()) {
      for (Target& t : targets) release_target(t);
      return Fail(o.urls[i] + ": " + err);
    }
  }
  std::vector<std::string> notes;
  std::string err = RaiseLimit(o, notes);
  if (!err.empty()) return Fail(err);
  std::vector<CompareTarget> results(o.urls.size());
  for (size_t i = 0; i < o.urls.size(); ++i) results[i].url = o.urls[i];
  for (int round = 0; round < o.rounds; ++round) {
    // Alternate, and rotate who goes first, so drift on the machine hits every server alike.
    for (size_t k = 0; k < targets.size(); ++k) {
      size_t i = (k + static_cast<size_t>(round)) % targets.size();
      RunOutput out;
      run_load(o, targets[i], false, out);
      RunSummary summary = summarize(out.info, out.stats);
      results[i].rounds.push_back(summary);
      results[i].latency.merge(out.stats.total);
      if (results[i].server_software.empty()) results[i].server_software = out.info.server_software;
      std::fprintf(stderr, "round %d/%d  #%zu %s: %.2f req/s, p99 %.3f ms, %.0f failed\n",
                   round + 1, o.rounds, i + 1, o.urls[i].c_str(), summary.requests_per_second,
                   summary.p99_ms, summary.failed);
      if (out.info.interrupted) break;
    }
  }
  for (Target& t : targets) release_target(t);
  if (!o.plot_file.empty() && !WriteFile(o.plot_file, render_latency_svg(results))) {
    return Fail("cannot write " + o.plot_file);
  }
  if (o.json) {
    std::fputs(format_compare_json(results, o.rounds).c_str(), stdout);
  } else {
    std::fputs(format_compare_table(results).c_str(), stdout);
    for (const std::string& n : notes) std::printf("Note: %s\n", n.c_str());
    if (!o.plot_file.empty()) std::printf("Latency chart written to %s\n", o.plot_file.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  Options o;
  std::string err = parse_options(args, o);
  if (!err.empty()) {
    std::fprintf(stderr, "peregrine-bench: %s\n%s", err.c_str(), usage_text().c_str());
    return 22;  // ab exits with EINVAL for usage errors
  }
  if (o.help) {
    std::fputs(usage_text().c_str(), stdout);
    return 0;
  }
  if (o.version) {
    std::printf("peregrine-bench %s\n", PEREGRINE_VERSION);
    return 0;
  }
  install_interrupt_handler();
  return o.compare ? RunCompare(o) : RunSingle(o);
}
