#include "metrics/render.h"

#include <cinttypes>
#include <cstdio>

namespace peregrine::metrics {

namespace {

constexpr const char* kStatusClassNames[kStatusClasses] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
constexpr const char* kConnectionKinds[2] = {"http1", "http2"};
// The Prometheus histogram's bounds: every power of two of microseconds from 128 us to 2^26 us
// (67 s). They fall on bucket edges of the log-linear histogram, so the counts are exact.
constexpr int kFirstBoundBit = 7;
constexpr int kLastBoundBit = 26;

void append_number(std::string& out, uint64_t v) {
  char text[24];
  int n = std::snprintf(text, sizeof text, "%" PRIu64, v);
  out.append(text, static_cast<size_t>(n));
}

void append_signed(std::string& out, int64_t v) {
  char text[24];
  int n = std::snprintf(text, sizeof text, "%" PRId64, v);
  out.append(text, static_cast<size_t>(n));
}

void append_double(std::string& out, double v) {
  char text[40];
  int n = std::snprintf(text, sizeof text, "%.9g", v);
  out.append(text, static_cast<size_t>(n));
}

void append_seconds(std::string& out, uint64_t micros) {
  char text[40];
  int n = std::snprintf(text, sizeof text, "%" PRIu64 ".%06" PRIu64, micros / 1000000,
                        micros % 1000000);
  // Trailing zeros say nothing: 0.000128, 1.048576, 2.
  while (n > 1 && text[n - 1] == '0') --n;
  if (text[n - 1] == '.') --n;
  out.append(text, static_cast<size_t>(n));
}

// Builds one metric family: its HELP and TYPE lines once, then samples.
class Family {
 public:
  Family(std::string& out, const char* name, const char* type, const char* help)
      : out_(out), name_(name) {
    out_.append("# HELP ").append(name).append(" ").append(help).append("\n");
    out_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
  }
  // labels: pairs of (name, value); an empty list gives a bare sample.
  Family& sample(std::initializer_list<std::pair<const char*, std::string_view>> labels,
                 const char* suffix = "") {
    out_.append(name_).append(suffix);
    if (labels.size() > 0) {
      out_.push_back('{');
      bool first = true;
      for (const auto& [label, value] : labels) {
        if (!first) out_.push_back(',');
        first = false;
        out_.append(label).append("=\"");
        append_label_value(out_, value);
        out_.push_back('"');
      }
      out_.push_back('}');
    }
    out_.push_back(' ');
    return *this;
  }
  void value(uint64_t v) {
    append_number(out_, v);
    out_.push_back('\n');
  }
  void value_signed(int64_t v) {
    append_signed(out_, v);
    out_.push_back('\n');
  }
  void value_double(double v) {
    append_double(out_, v);
    out_.push_back('\n');
  }
  void value_seconds(uint64_t micros) {
    append_seconds(out_, micros);
    out_.push_back('\n');
  }

 private:
  std::string& out_;
  const char* name_;
};

}  // namespace

void append_label_value(std::string& out, std::string_view value) {
  for (char c : value) {
    if (c == '\\')
      out.append("\\\\");
    else if (c == '"')
      out.append("\\\"");
    else if (c == '\n')
      out.append("\\n");
    else
      out.push_back(c);
  }
}

void append_json_string(std::string& out, std::string_view value) {
  out.push_back('"');
  for (char c : value) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", u);
      out.append(esc);
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
}

std::string render_prometheus(const Snapshot& s) {
  std::string out;
  out.reserve(4096 + s.routes.size() * 600 + s.upstream_servers.size() * 1200);

  Family(out, "peregrine_build_info", "gauge", "The running version (always 1).")
      .sample({{"version", s.version}})
      .value(1);
  Family(out, "peregrine_workers", "gauge", "Worker threads.").sample({}).value_signed(s.workers);
  Family(out, "peregrine_uptime_seconds", "gauge", "Seconds since the server started.")
      .sample({})
      .value_double(s.uptime_seconds);
  Family(out, "process_start_time_seconds", "gauge", "Start time of the process since the epoch.")
      .sample({})
      .value_signed(s.start_seconds);
  if (s.resident_bytes >= 0)
    Family(out, "process_resident_memory_bytes", "gauge", "Resident memory size.")
        .sample({})
        .value_signed(s.resident_bytes);
  if (s.open_fds >= 0)
    Family(out, "process_open_fds", "gauge", "Open file descriptors.")
        .sample({})
        .value_signed(s.open_fds);
  Family(out, "peregrine_config_generation", "gauge",
         "Configuration generation: 1 at start, one more per applied reload.")
      .sample({})
      .value_signed(s.generation);
  {
    Family f(out, "peregrine_reloads_total", "counter", "Configuration reloads by result.");
    f.sample({{"result", "succeeded"}}).value(s.reloads_succeeded);
    f.sample({{"result", "failed"}}).value(s.reloads_failed);
  }
  Family(out, "peregrine_access_log_dropped_lines_total", "counter",
         "Access-log lines dropped because the log writer fell behind.")
      .sample({})
      .value(s.access_log_dropped);

  {
    Family f(out, "peregrine_http_requests_total", "counter",
             "Requests answered, by site, route, protocol, TLS and status class.");
    for (const RouteFigures& r : s.routes)
      for (int p = 0; p < kProtocols; ++p)
        for (int t = 0; t < 2; ++t)
          for (int k = 0; k < kStatusClasses; ++k) {
            const uint64_t n = r.requests[p][t][k];
            if (n == 0) continue;
            f.sample({{"site", r.site},
                      {"route", r.route},
                      {"protocol", to_string(static_cast<Protocol>(p))},
                      {"tls", t ? "true" : "false"},
                      {"code", kStatusClassNames[k]}})
                .value(n);
          }
  }
  {
    Family f(out, "peregrine_http_response_body_bytes_total", "counter",
             "Response body bytes sent, by site and route.");
    for (const RouteFigures& r : s.routes)
      f.sample({{"site", r.site}, {"route", r.route}}).value(r.response_body_bytes);
  }
  {
    Family f(out, "peregrine_http_request_duration_seconds", "histogram",
             "Time from a request's complete head to its access-log line.");
    uint64_t cumulative = 0;
    size_t bucket = 0;
    char le[40];
    for (int bit = kFirstBoundBit; bit <= kLastBoundBit; ++bit) {
      const uint64_t bound = uint64_t{1} << bit;
      while (bucket < s.duration_buckets.size() && DurationHistogram::upper_micros(bucket) <= bound)
        cumulative += s.duration_buckets[bucket++];
      std::string text;
      append_seconds(text, bound);
      std::snprintf(le, sizeof le, "%s", text.c_str());
      f.sample({{"le", le}}, "_bucket").value(cumulative);
    }
    f.sample({{"le", "+Inf"}}, "_bucket").value(s.duration_count);
    f.sample({}, "_sum").value_seconds(s.duration_sum_micros);
    f.sample({}, "_count").value(s.duration_count);
  }
  {
    Family f(out, "peregrine_received_bytes_total", "counter",
             "Bytes read from clients (after TLS decryption), by connection protocol.");
    for (int k = 0; k < 2; ++k)
      f.sample({{"protocol", kConnectionKinds[k]}}).value(s.bytes_received[k]);
  }
  {
    Family f(out, "peregrine_sent_bytes_total", "counter",
             "Bytes written to clients (before TLS encryption), by connection protocol.");
    for (int k = 0; k < 2; ++k)
      f.sample({{"protocol", kConnectionKinds[k]}}).value(s.bytes_sent[k]);
  }
  Family(out, "peregrine_connections_accepted_total", "counter", "Client connections accepted.")
      .sample({})
      .value(s.connections_accepted);
  {
    Family f(out, "peregrine_connections", "gauge",
             "Open client connections by protocol (sampled by each worker once a second).");
    for (int k = 0; k < 2; ++k)
      f.sample({{"protocol", kConnectionKinds[k]}}).value_signed(s.connections_open[k]);
  }
  {
    Family f(out, "peregrine_connections_state", "gauge",
             "Open client connections by what they wait for (sampled once a second).");
    f.sample({{"state", "reading"}}).value_signed(s.connections_reading);
    f.sample({{"state", "writing"}}).value_signed(s.connections_writing);
    f.sample({{"state", "idle"}}).value_signed(s.connections_idle);
  }
  {
    Family f(out, "peregrine_read_buffers", "gauge",
             "Request buffers of the workers: held by connections, or kept for reuse (sampled "
             "once a second).");
    f.sample({{"state", "in_use"}}).value_signed(s.read_buffers_in_use);
    f.sample({{"state", "spare"}}).value_signed(s.read_buffers_spare);
  }
  {
    Family f(out, "peregrine_tls_handshakes_total", "counter", "TLS handshakes by result.");
    f.sample({{"result", "full"}}).value(s.tls_full);
    f.sample({{"result", "resumed"}}).value(s.tls_resumed);
    f.sample({{"result", "failed"}}).value(s.tls_failed);
  }
  Family(out, "peregrine_http2_streams_total", "counter", "HTTP/2 streams opened by clients.")
      .sample({})
      .value(s.http2_streams);

  {
    Family f(out, "peregrine_upstream_requests_total", "counter",
             "Tries sent to an upstream server (a retry is one more).");
    for (const auto& u : s.upstream_servers)
      f.sample({{"group", u.group}, {"server", u.server}}).value(u.requests);
  }
  {
    Family f(out, "peregrine_upstream_failures_total", "counter",
             "Failed tries against an upstream server, by kind.");
    for (const auto& u : s.upstream_servers)
      for (int k = 0; k < kFailureKinds; ++k)
        f.sample({{"group", u.group}, {"server", u.server}, {"kind", failure_kind_name(k)}})
            .value(u.failures[k]);
  }
  {
    Family f(out, "peregrine_upstream_server_state", "gauge",
             "1 for the state an upstream server is in (up, down, backup, drained, disabled), 0 "
             "for the others.");
    for (const auto& u : s.upstream_servers)
      for (const char* state : kUpstreamStates)
        f.sample({{"group", u.group}, {"server", u.server}, {"state", state}})
            .value(std::string_view(u.state) == state ? 1 : 0);
  }
  {
    Family f(out, "peregrine_upstream_in_flight", "gauge",
             "Requests holding a slot on an upstream server now.");
    for (const auto& u : s.upstream_servers)
      f.sample({{"group", u.group}, {"server", u.server}}).value_signed(u.in_flight);
  }
  {
    Family f(out, "peregrine_upstream_idle_connections", "gauge",
             "Pooled keep-alive connections to an upstream server.");
    for (const auto& u : s.upstream_servers)
      f.sample({{"group", u.group}, {"server", u.server}}).value_signed(u.idle);
  }
  {
    Family f(out, "peregrine_upstream_connections_opened_total", "counter",
             "New connections opened to an upstream server.");
    for (const auto& u : s.upstream_servers)
      f.sample({{"group", u.group}, {"server", u.server}}).value(u.connections_opened);
  }
  {
    Family f(out, "peregrine_upstream_connections_reused_total", "counter",
             "Requests sent on a pooled connection.");
    for (const auto& u : s.upstream_servers)
      f.sample({{"group", u.group}, {"server", u.server}}).value(u.connections_reused);
  }
  {
    Family f(out, "peregrine_upstream_health_check_ok", "gauge",
             "1 if the last active health check passed, 0 if it failed.");
    for (const auto& u : s.upstream_servers)
      if (u.last_check_seconds > 0)
        f.sample({{"group", u.group}, {"server", u.server}}).value(u.last_check_ok ? 1 : 0);
  }
  {
    Family f(out, "peregrine_upstream_health_check_timestamp_seconds", "gauge",
             "When the last active health check finished, since the epoch.");
    for (const auto& u : s.upstream_servers)
      if (u.last_check_seconds > 0)
        f.sample({{"group", u.group}, {"server", u.server}}).value_signed(u.last_check_seconds);
  }
  {
    Family f(out, "peregrine_upstream_queue_length", "gauge",
             "Requests waiting for a free slot in an upstream group.");
    for (const auto& g : s.upstream_groups)
      f.sample({{"group", g.group}}).value_signed(g.queue_length);
  }
  {
    Family f(out, "peregrine_upstream_queue_waits_total", "counter",
             "Requests that had to wait for a slot.");
    for (const auto& g : s.upstream_groups) f.sample({{"group", g.group}}).value(g.queue_waits);
  }
  {
    Family f(out, "peregrine_upstream_queue_timeouts_total", "counter",
             "Requests that waited queue_timeout and got 503.");
    for (const auto& g : s.upstream_groups) f.sample({{"group", g.group}}).value(g.queue_timeouts);
  }
  return out;
}

namespace {

// A small JSON writer: commas are placed by tracking whether a container has a first element.
class Json {
 public:
  explicit Json(std::string& out) : out_(out) {}
  Json& key(std::string_view k) {
    comma();
    append_json_string(out_, k);
    out_.push_back(':');
    first_ = true;  // the value follows without a comma
    pending_value_ = true;
    return *this;
  }
  Json& open(char c) {
    comma();
    out_.push_back(c);
    first_ = true;
    return *this;
  }
  Json& close(char c) {
    out_.push_back(c);
    first_ = false;
    return *this;
  }
  Json& str(std::string_view v) {
    comma();
    append_json_string(out_, v);
    first_ = false;
    return *this;
  }
  Json& num(uint64_t v) {
    comma();
    append_number(out_, v);
    first_ = false;
    return *this;
  }
  Json& inum(int64_t v) {
    comma();
    append_signed(out_, v);
    first_ = false;
    return *this;
  }
  Json& dbl(double v) {
    comma();
    append_double(out_, v);
    first_ = false;
    return *this;
  }
  Json& seconds(uint64_t micros) {
    comma();
    append_seconds(out_, micros);
    first_ = false;
    return *this;
  }
  Json& boolean(bool v) {
    comma();
    out_.append(v ? "true" : "false");
    first_ = false;
    return *this;
  }

 private:
  void comma() {
    if (pending_value_) {
      pending_value_ = false;
      return;
    }
    if (!first_) out_.push_back(',');
  }
  std::string& out_;
  bool first_ = true;
  bool pending_value_ = false;
};

}  // namespace

std::string render_json(const Snapshot& s) {
  std::string out;
  out.reserve(2048 + s.routes.size() * 400 + s.upstream_servers.size() * 600);
  Json j(out);
  j.open('{');
  j.key("version").str(s.version);
  j.key("uptime_seconds").dbl(s.uptime_seconds);
  j.key("start_time_seconds").inum(s.start_seconds);
  j.key("workers").inum(s.workers);
  j.key("generation").inum(s.generation);
  j.key("reloads").open('{');
  j.key("succeeded").num(s.reloads_succeeded);
  j.key("failed").num(s.reloads_failed);
  j.close('}');
  j.key("access_log_dropped_lines").num(s.access_log_dropped);
  j.key("process").open('{');
  j.key("resident_memory_bytes").inum(s.resident_bytes);
  j.key("open_fds").inum(s.open_fds);
  j.close('}');

  uint64_t total = 0;
  for (const RouteFigures& r : s.routes) total += r.total();
  j.key("requests_total").num(total);
  j.key("routes").open('[');
  for (const RouteFigures& r : s.routes) {
    j.open('{');
    j.key("site").str(r.site);
    j.key("route").str(r.route);
    j.key("requests_total").num(r.total());
    j.key("response_body_bytes").num(r.response_body_bytes);
    j.key("requests").open('[');
    for (int p = 0; p < kProtocols; ++p)
      for (int t = 0; t < 2; ++t)
        for (int k = 0; k < kStatusClasses; ++k) {
          const uint64_t n = r.requests[p][t][k];
          if (n == 0) continue;
          j.open('{');
          j.key("protocol").str(to_string(static_cast<Protocol>(p)));
          j.key("tls").boolean(t != 0);
          j.key("code").str(kStatusClassNames[k]);
          j.key("count").num(n);
          j.close('}');
        }
    j.close(']');
    j.close('}');
  }
  j.close(']');

  j.key("duration").open('{');
  j.key("count").num(s.duration_count);
  j.key("sum_seconds").seconds(s.duration_sum_micros);
  j.key("p50_seconds").seconds(s.duration_percentile(50));
  j.key("p90_seconds").seconds(s.duration_percentile(90));
  j.key("p99_seconds").seconds(s.duration_percentile(99));
  j.key("buckets").open('[');  // non-empty buckets: upper bound and count (not cumulative)
  for (size_t i = 0; i < s.duration_buckets.size(); ++i) {
    if (s.duration_buckets[i] == 0) continue;
    j.open('{');
    j.key("le_seconds").seconds(DurationHistogram::upper_micros(i));
    j.key("count").num(s.duration_buckets[i]);
    j.close('}');
  }
  j.close(']');
  j.close('}');

  j.key("bytes").open('{');
  for (int k = 0; k < 2; ++k) {
    j.key(kConnectionKinds[k]).open('{');
    j.key("received").num(s.bytes_received[k]);
    j.key("sent").num(s.bytes_sent[k]);
    j.close('}');
  }
  j.close('}');
  j.key("connections").open('{');
  j.key("accepted_total").num(s.connections_accepted);
  j.key("open").open('{');
  for (int k = 0; k < 2; ++k) j.key(kConnectionKinds[k]).inum(s.connections_open[k]);
  j.close('}');
  j.key("reading").inum(s.connections_reading);
  j.key("writing").inum(s.connections_writing);
  j.key("idle").inum(s.connections_idle);
  j.close('}');
  j.key("read_buffers").open('{');
  j.key("in_use").inum(s.read_buffers_in_use);
  j.key("spare").inum(s.read_buffers_spare);
  j.close('}');
  j.key("tls_handshakes").open('{');
  j.key("full").num(s.tls_full);
  j.key("resumed").num(s.tls_resumed);
  j.key("failed").num(s.tls_failed);
  j.close('}');
  j.key("http2_streams_total").num(s.http2_streams);

  j.key("upstreams").open('[');
  for (const UpstreamGroupFigures& g : s.upstream_groups) {
    j.open('{');
    j.key("group").str(g.group);
    j.key("queue").open('{');
    j.key("length").inum(g.queue_length);
    j.key("waits").num(g.queue_waits);
    j.key("timeouts").num(g.queue_timeouts);
    j.close('}');
    j.key("servers").open('[');
    for (const UpstreamServerFigures& u : s.upstream_servers) {
      if (u.group != g.group) continue;
      j.open('{');
      j.key("server").str(u.server);
      j.key("state").str(u.state);
      j.key("backup").boolean(u.backup);
      j.key("requests").num(u.requests);
      j.key("failures").open('{');
      for (int k = 0; k < kFailureKinds; ++k) j.key(failure_kind_name(k)).num(u.failures[k]);
      j.close('}');
      j.key("in_flight").inum(u.in_flight);
      j.key("idle_connections").inum(u.idle);
      j.key("connections_opened").num(u.connections_opened);
      j.key("connections_reused").num(u.connections_reused);
      j.key("health_check").open('{');
      if (u.last_check_seconds > 0) {
        j.key("ok").boolean(u.last_check_ok);
        j.key("time_seconds").inum(u.last_check_seconds);
      }
      j.close('}');
      j.close('}');
    }
    j.close(']');
    j.close('}');
  }
  j.close(']');
  j.close('}');
  out.push_back('\n');
  return out;
}

}  // namespace peregrine::metrics
