#include "loadgen/report.h"

#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "core/strings.h"

namespace peregrine::loadgen {
namespace {

void Append(std::string& out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void Append(std::string& out, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (static_cast<size_t>(n) < sizeof buf) {
    out.append(buf, static_cast<size_t>(n));
    return;
  }
  std::string big(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, fmt);
  std::vsnprintf(big.data(), big.size(), fmt, ap);
  va_end(ap);
  big.resize(static_cast<size_t>(n));
  out += big;
}

// Microseconds to whole milliseconds, rounded as ab rounds.
long long RoundMs(double us) {
  return static_cast<long long>(std::floor((us + 500.0) / 1000.0));
}
double Ms(double us) {
  return us / 1000.0;
}

const double kPercents[] = {50, 66, 75, 80, 90, 95, 98, 99, 99.9, 99.99};

}  // namespace

const char* close_reason_text(CloseReason reason, bool http10_response) {
  switch (reason) {
    case CloseReason::kConnectionClose:
      return "the server sent 'Connection: close' (keep-alive off, or its per-connection request "
             "limit)";
    case CloseReason::kHttp10NoKeepAlive:
      return "HTTP/1.0 response without 'Connection: keep-alive'";
    case CloseReason::kNoLength:
      return http10_response
                 ? "HTTP/1.0 response without Content-Length (body ends at close)"
                 : "response without Content-Length or chunked encoding (body ends at close)";
    case CloseReason::kTeAndLength:
      return "response with both Transfer-Encoding and Content-Length (must close)";
    case CloseReason::kIdleClose:
      return "the server closed an idle kept-alive connection (its keep-alive timeout or request "
             "limit)";
    case CloseReason::kReset:
      return "the server reset a kept-alive connection";
    case CloseReason::kCount:
      break;
  }
  return "?";
}

void RunStats::merge(const RunStats& o) {
  completed += o.completed;
  responses += o.responses;
  fail_connect += o.fail_connect;
  fail_read += o.fail_read;
  fail_write += o.fail_write;
  fail_timeout += o.fail_timeout;
  fail_protocol += o.fail_protocol;
  length_mismatch += o.length_mismatch;
  non2xx += o.non2xx;
  keep_alive_responses += o.keep_alive_responses;
  bytes_read += o.bytes_read;
  head_bytes += o.head_bytes;
  body_wire_bytes += o.body_wire_bytes;
  bytes_written += o.bytes_written;
  body_bytes_sent += o.body_bytes_sent;
  connections_opened += o.connections_opened;
  for (size_t i = 0; i < server_closes.size(); ++i) server_closes[i] += o.server_closes[i];
  close_reason_http10 |= o.close_reason_http10;
  retried += o.retried;
  in_flight_at_end += o.in_flight_at_end;
  tls_handshakes += o.tls_handshakes;
  tls_resumed += o.tls_resumed;
  h2_rst_stream += o.h2_rst_stream;
  h2_goaway += o.h2_goaway;
  for (size_t i = 0; i < status.size(); ++i) status[i] += o.status[i];
  total.merge(o.total);
  connect.merge(o.connect);
  processing.merge(o.processing);
  waiting.merge(o.waiting);
}

double client_cpu_percent(const RunInfo& info) {
  if (info.elapsed_s <= 0) return 0;
  return 100.0 * (info.cpu_user_s + info.cpu_system_s) / info.elapsed_s;
}

double client_cpu_us_per_request(const RunInfo& info, const RunStats& stats) {
  if (stats.completed == 0) return 0;
  return 1e6 * (info.cpu_user_s + info.cpu_system_s) / static_cast<double>(stats.completed);
}

std::string format_text_report(const RunInfo& info, const RunStats& s) {
  std::string o;
  const double elapsed = info.elapsed_s > 0 ? info.elapsed_s : 1e-9;
  const uint64_t failed = s.failed(info.strict_length);
  Append(o, "Server Software:        %s\n", info.server_software.c_str());
  Append(o, "Server Hostname:        %s\n", info.hostname.c_str());
  Append(o, "Server Port:            %u\n", static_cast<unsigned>(info.port));
  if (!info.tls_protocol.empty()) {
    Append(o, "SSL/TLS Protocol:       %s\n", info.tls_protocol.c_str());
    if (!info.tls_server_name.empty())
      Append(o, "TLS Server Name:        %s\n", info.tls_server_name.c_str());
  }
  o += "\n";
  Append(o, "Document Path:          %s\n", info.path.c_str());
  if (s.length_mismatch && !info.strict_length) {
    o += "Document Length:        Variable\n";
  } else {
    Append(o, "Document Length:        %" PRId64 " bytes\n", info.document_length);
  }
  o += "\n";
  Append(o, "Concurrency Level:      %d\n", info.concurrency);
  Append(o, "Time taken for tests:   %.3f seconds\n", info.elapsed_s);
  Append(o, "Complete requests:      %" PRIu64 "\n", s.completed);
  Append(o, "Failed requests:        %" PRIu64 "\n", failed);
  if (failed) {
    Append(o,
           "   (Connect: %" PRIu64 ", Receive: %" PRIu64 ", Length: %" PRIu64
           ", Exceptions: %" PRIu64 ")\n",
           s.fail_connect, s.fail_read, info.strict_length ? s.length_mismatch : 0,
           s.fail_write + s.fail_timeout + s.fail_protocol);
  }
  if (s.fail_write) Append(o, "Write errors:           %" PRIu64 "\n", s.fail_write);
  if (s.non2xx) Append(o, "Non-2xx responses:      %" PRIu64 "\n", s.non2xx);
  if (info.keep_alive) Append(o, "Keep-Alive requests:    %" PRIu64 "\n", s.keep_alive_responses);
  Append(o, "Total transferred:      %" PRIu64 " bytes\n", s.bytes_read);
  if (info.posting) Append(o, "Total body sent:        %" PRIu64 "\n", s.bytes_written);
  Append(o, "HTML transferred:       %" PRIu64 " bytes\n", s.body_wire_bytes);
  const double rps = static_cast<double>(s.completed) / elapsed;
  Append(o, "Requests per second:    %.2f [#/sec] (mean)\n", rps);
  const double tpr =
      s.completed ? 1000.0 * elapsed * info.concurrency / static_cast<double>(s.completed) : 0;
  Append(o, "Time per request:       %.3f [ms] (mean)\n", tpr);
  Append(o, "Time per request:       %.3f [ms] (mean, across all concurrent requests)\n",
         s.completed ? 1000.0 * elapsed / static_cast<double>(s.completed) : 0);
  Append(o, "Transfer rate:          %.2f [Kbytes/sec] received\n",
         static_cast<double>(s.bytes_read) / 1024.0 / elapsed);
  if (info.posting) {
    Append(o, "                        %.2f kb/s sent\n",
           static_cast<double>(s.bytes_written) / 1024.0 / elapsed);
    Append(o, "                        %.2f kb/s total\n",
           static_cast<double>(s.bytes_read + s.bytes_written) / 1024.0 / elapsed);
  }

  if (s.total.count()) {
    o += "\nConnection Times (ms)\n";
    const Histogram* rows[] = {&s.connect, &s.processing, &s.waiting, &s.total};
    const char* names[] = {"Connect:", "Processing:", "Waiting:", "Total:"};
    if (info.no_median_sd) {
      o += "              min   avg   max\n";
      for (int i = 0; i < 4; ++i) {
        Append(o, "%-11s %5lld %5lld%5lld\n", names[i],
               RoundMs(static_cast<double>(rows[i]->min())), RoundMs(rows[i]->mean()),
               RoundMs(static_cast<double>(rows[i]->max())));
      }
    } else {
      o += "              min  mean[+/-sd] median   max\n";
      for (int i = 0; i < 4; ++i) {
        Append(o, "%-11s %5lld %4lld %5.1f %6lld %7lld\n", names[i],
               RoundMs(static_cast<double>(rows[i]->min())), RoundMs(rows[i]->mean()),
               Ms(rows[i]->stddev()), RoundMs(static_cast<double>(rows[i]->percentile(50))),
               RoundMs(static_cast<double>(rows[i]->max())));
      }
    }
    if (!info.no_percentiles) {
      o += "\nPercentage of the requests served within a certain time (ms)\n";
      for (double p : kPercents) {
        char label[16];
        std::snprintf(label, sizeof label, "%g%%", p);
        Append(o, "%5s  %5lld\n", label, RoundMs(static_cast<double>(s.total.percentile(p))));
      }
      Append(o, " 100%%  %5lld (longest request)\n", RoundMs(static_cast<double>(s.total.max())));
    }
  }

  // What ab does not say.
  o += "\n--- peregrine-bench ---\n";
  if (s.total.count()) {
    Append(
        o,
        "Latency (ms):           p50 %.3f, p90 %.3f, p99 %.3f, p99.9 %.3f, p99.99 %.3f, max %.3f\n",
        Ms(static_cast<double>(s.total.percentile(50))),
        Ms(static_cast<double>(s.total.percentile(90))),
        Ms(static_cast<double>(s.total.percentile(99))),
        Ms(static_cast<double>(s.total.percentile(99.9))),
        Ms(static_cast<double>(s.total.percentile(99.99))), Ms(static_cast<double>(s.total.max())));
    if (info.rate > 0) {
      Append(o,
             "                        (measured from each request's scheduled time at %.1f/s: "
             "corrected for coordinated omission)\n",
             info.rate);
    }
  }
  o += "Status codes:          ";
  bool any_status = false;
  for (size_t code = 0; code < s.status.size(); ++code) {
    if (!s.status[code]) continue;
    Append(o, "%s %zu: %" PRIu64, any_status ? "," : "", code, s.status[code]);
    any_status = true;
  }
  o += any_status ? "\n" : " none\n";
  Append(o,
         "Failures by kind:       connect %" PRIu64 ", read %" PRIu64 ", write %" PRIu64
         ", timeout %" PRIu64 ", protocol %" PRIu64 ", length %" PRIu64 "; non-2xx %" PRIu64
         " (listed, not failed, as in ab)\n",
         s.fail_connect, s.fail_read, s.fail_write, s.fail_timeout, s.fail_protocol,
         info.strict_length ? s.length_mismatch : 0, s.non2xx);
  if (s.length_mismatch) {
    if (info.strict_length) {
      Append(o,
             "Length mismatches:      %" PRIu64 " responses differed from the first (%" PRId64
             " bytes): failed (--strict-length)\n",
             s.length_mismatch, info.document_length);
    } else {
      Append(o,
             "Length mismatches:      %" PRIu64 " responses differed from the first (%" PRId64
             " bytes): not failures (ab would count them; --strict-length does)\n",
             s.length_mismatch, info.document_length);
    }
  }
  Append(o, "Protocol:               %s", info.protocol.c_str());
  if (info.protocol.starts_with("h2"))
    Append(o, ", %d concurrent stream%s per connection", info.streams,
           info.streams == 1 ? "" : "s");
  o += "\n";
  Append(o, "Connections:            %" PRIu64 " opened", s.connections_opened);
  if (info.pipeline > 1) Append(o, ", %d requests pipelined on each", info.pipeline);
  o += "\n";
  if (!info.tls_protocol.empty()) {
    Append(o, "TLS handshakes:         %" PRIu64 ", %" PRIu64 " of them resumed%s\n",
           s.tls_handshakes, s.tls_resumed,
           info.tls_resume ? " (--tls-resume)" : " (full handshakes: no --tls-resume)");
  }
  if (s.h2_rst_stream || s.h2_goaway) {
    Append(o,
           "HTTP/2 errors:          %" PRIu64
           " RST_STREAM received (REFUSED_STREAM retried, others "
           "failed), %" PRIu64 " GOAWAY received\n",
           s.h2_rst_stream, s.h2_goaway);
  }
  uint64_t server_closed = 0;
  for (uint64_t n : s.server_closes) server_closed += n;
  if (info.keep_alive && server_closed) {
    Append(o,
           "Closed by the server:   %" PRIu64
           " connections that were asked to stay open; likely because:\n",
           server_closed);
    for (size_t i = 0; i < s.server_closes.size(); ++i) {
      if (!s.server_closes[i]) continue;
      Append(o, "  %10" PRIu64 "  %s\n", s.server_closes[i],
             close_reason_text(static_cast<CloseReason>(i), s.close_reason_http10));
    }
  }
  if (s.retried && info.protocol.starts_with("h2")) {
    Append(o,
           "Retried:                %" PRIu64
           " requests, refused unprocessed by the server (REFUSED_STREAM, or past a GOAWAY's "
           "last stream) and sent again\n",
           s.retried);
  } else if (s.retried) {
    Append(o,
           "Retried:                %" PRIu64
           " requests, resent on a new connection after the server closed an idle one\n",
           s.retried);
  }
  if (s.in_flight_at_end) {
    Append(o, "In flight at the end:   %" PRIu64 " requests %s (not counted)\n", s.in_flight_at_end,
           info.interrupted ? "when interrupted" : "when the time limit stopped the run");
  }
  const double cpu = info.cpu_user_s + info.cpu_system_s;
  Append(o,
         "Client CPU:             user %.2f s, system %.2f s: %.0f%% of %d worker thread%s, %.2f "
         "us per request\n",
         info.cpu_user_s, info.cpu_system_s, client_cpu_percent(info), info.workers,
         info.workers == 1 ? "" : "s", client_cpu_us_per_request(info, s));
  if (cpu > 0.2 && client_cpu_percent(info) > 90.0 * info.workers) {
    o += "WARNING: the client was saturated (its CPU was busy all the time): these figures may "
         "measure\n"
         "         peregrine-bench, not the server. Add -W threads or cores, or lower -c.\n";
  }
  for (const std::string& note : info.notes) o += "Note: " + note + "\n";
  return o;
}

std::string json_escape(const std::string& s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

namespace {

void AppendTimes(std::string& o, const char* name, const Histogram& h, bool last) {
  Append(
      o,
      "    %s: {\"min\": %.3f, \"mean\": %.3f, \"sd\": %.3f, \"median\": %.3f, \"max\": %.3f}%s\n",
      json_escape(name).c_str(), Ms(static_cast<double>(h.min())), Ms(h.mean()), Ms(h.stddev()),
      Ms(static_cast<double>(h.percentile(50))), Ms(static_cast<double>(h.max())), last ? "" : ",");
}

}  // namespace

std::string format_json_report(const RunInfo& info, const RunStats& s) {
  std::string o = "{\n";
  const double elapsed = info.elapsed_s > 0 ? info.elapsed_s : 1e-9;
  Append(o, "  \"url\": %s,\n", json_escape(info.url).c_str());
  Append(o, "  \"server_software\": %s,\n", json_escape(info.server_software).c_str());
  Append(o, "  \"server_hostname\": %s,\n", json_escape(info.hostname).c_str());
  Append(o, "  \"server_port\": %u,\n", static_cast<unsigned>(info.port));
  Append(o, "  \"tls_protocol\": %s,\n", json_escape(info.tls_protocol).c_str());
  Append(o, "  \"protocol\": %s,\n", json_escape(info.protocol).c_str());
  Append(o, "  \"streams\": %d,\n", info.streams);
  Append(o,
         "  \"tls\": {\"handshakes\": %" PRIu64 ", \"resumed\": %" PRIu64
         ", \"resume_requested\": %s},\n",
         s.tls_handshakes, s.tls_resumed, info.tls_resume ? "true" : "false");
  Append(o, "  \"h2\": {\"rst_stream\": %" PRIu64 ", \"goaway\": %" PRIu64 "},\n", s.h2_rst_stream,
         s.h2_goaway);
  Append(o, "  \"protocol\": %s,\n", json_escape(info.protocol).c_str());
  Append(o, "  \"streams\": %d,\n", info.streams);
  Append(o,
         "  \"tls\": {\"handshakes\": %" PRIu64 ", \"resumed\": %" PRIu64
         ", \"resume_requested\": %s},\n",
         s.tls_handshakes, s.tls_resumed, info.tls_resume ? "true" : "false");
  Append(o, "  \"h2\": {\"rst_stream\": %" PRIu64 ", \"goaway\": %" PRIu64 "},\n", s.h2_rst_stream,
         s.h2_goaway);
  Append(o, "  \"document_path\": %s,\n", json_escape(info.path).c_str());
  Append(o, "  \"document_length\": %" PRId64 ",\n", info.document_length);
  Append(o, "  \"variable_length\": %s,\n", s.length_mismatch ? "true" : "false");
  Append(o, "  \"concurrency\": %d,\n", info.concurrency);
  Append(o, "  \"workers\": %d,\n", info.workers);
  Append(o, "  \"pipeline\": %d,\n", info.pipeline);
  Append(o, "  \"rate\": %.3f,\n", info.rate);
  Append(o, "  \"keep_alive\": %s,\n", info.keep_alive ? "true" : "false");
  Append(o, "  \"time_taken_s\": %.6f,\n", info.elapsed_s);
  Append(o, "  \"complete_requests\": %" PRIu64 ",\n", s.completed);
  Append(o, "  \"responses\": %" PRIu64 ",\n", s.responses);
  Append(o, "  \"failed_requests\": %" PRIu64 ",\n", s.failed(info.strict_length));
  Append(o,
         "  \"failures\": {\"connect\": %" PRIu64 ", \"read\": %" PRIu64 ", \"write\": %" PRIu64
         ", \"timeout\": %" PRIu64 ", \"protocol\": %" PRIu64 ", \"length\": %" PRIu64 "},\n",
         s.fail_connect, s.fail_read, s.fail_write, s.fail_timeout, s.fail_protocol,
         info.strict_length ? s.length_mismatch : 0);
  Append(o, "  \"length_mismatches\": %" PRIu64 ",\n", s.length_mismatch);
  Append(o, "  \"non_2xx_responses\": %" PRIu64 ",\n", s.non2xx);
  o += "  \"status_codes\": {";
  bool first = true;
  for (size_t code = 0; code < s.status.size(); ++code) {
    if (!s.status[code]) continue;
    Append(o, "%s\"%zu\": %" PRIu64, first ? "" : ", ", code, s.status[code]);
    first = false;
  }
  o += "},\n";
  Append(o, "  \"keep_alive_requests\": %" PRIu64 ",\n", s.keep_alive_responses);
  Append(o, "  \"total_transferred\": %" PRIu64 ",\n", s.bytes_read);
  Append(o, "  \"html_transferred\": %" PRIu64 ",\n", s.body_wire_bytes);
  Append(o, "  \"total_sent\": %" PRIu64 ",\n", s.bytes_written);
  Append(o, "  \"requests_per_second\": %.3f,\n", static_cast<double>(s.completed) / elapsed);
  Append(
      o, "  \"time_per_request_ms\": %.6f,\n",
      s.completed ? 1000.0 * elapsed * info.concurrency / static_cast<double>(s.completed) : 0.0);
  Append(o, "  \"time_per_request_all_ms\": %.6f,\n",
         s.completed ? 1000.0 * elapsed / static_cast<double>(s.completed) : 0.0);
  Append(o, "  \"transfer_rate_kbps\": %.3f,\n",
         static_cast<double>(s.bytes_read) / 1024.0 / elapsed);
  o += "  \"connection_times_ms\": {\n";
  AppendTimes(o, "connect", s.connect, false);
  AppendTimes(o, "processing", s.processing, false);
  AppendTimes(o, "waiting", s.waiting, false);
  AppendTimes(o, "total", s.total, true);
  o += "  },\n  \"percentiles_ms\": {";
  first = true;
  for (double p : kPercents) {
    Append(o, "%s\"%g\": %.3f", first ? "" : ", ", p,
           Ms(static_cast<double>(s.total.percentile(p))));
    first = false;
  }
  Append(o, ", \"100\": %.3f},\n", Ms(static_cast<double>(s.total.max())));
  Append(o, "  \"latency_corrected_for_coordinated_omission\": %s,\n",
         info.rate > 0 ? "true" : "false");
  Append(o, "  \"connections_opened\": %" PRIu64 ",\n", s.connections_opened);
  o += "  \"server_closes\": {";
  first = true;
  static const char* kKeys[] = {"connection_close", "http10_no_keep_alive", "no_length",
                                "te_and_length",    "idle_close",           "reset"};
  for (size_t i = 0; i < s.server_closes.size(); ++i) {
    Append(o, "%s\"%s\": %" PRIu64, first ? "" : ", ", kKeys[i], s.server_closes[i]);
    first = false;
  }
  o += "},\n";
  o += "  \"server_close_reasons\": [";
  first = true;
  for (size_t i = 0; i < s.server_closes.size(); ++i) {
    if (!s.server_closes[i]) continue;
    Append(
        o, "%s%s", first ? "" : ", ",
        json_escape(close_reason_text(static_cast<CloseReason>(i), s.close_reason_http10)).c_str());
    first = false;
  }
  o += "],\n";
  Append(o, "  \"retried\": %" PRIu64 ",\n", s.retried);
  Append(o, "  \"in_flight_at_end\": %" PRIu64 ",\n", s.in_flight_at_end);
  Append(o, "  \"interrupted\": %s,\n", info.interrupted ? "true" : "false");
  Append(o,
         "  \"client_cpu\": {\"user_s\": %.4f, \"system_s\": %.4f, \"percent\": %.2f, "
         "\"us_per_request\": %.3f},\n",
         info.cpu_user_s, info.cpu_system_s, client_cpu_percent(info),
         client_cpu_us_per_request(info, s));
  o += "  \"notes\": [";
  for (size_t i = 0; i < info.notes.size(); ++i)
    Append(o, "%s%s", i ? ", " : "", json_escape(info.notes[i]).c_str());
  o += "]\n}\n";
  return o;
}

std::string format_percentile_csv(const Histogram& total) {
  std::string o = "Percentage served,Time in ms\n";
  for (int i = 0; i < 100; ++i) {
    double v = i == 0 ? static_cast<double>(total.min()) : static_cast<double>(total.percentile(i));
    Append(o, "%d,%.3f\n", i, Ms(v));
  }
  return o;
}

}  // namespace peregrine::loadgen
