// What a peregrine-bench run measured (RunStats: per worker thread, merged at the end) and the
// report made of it: ab's text layout, the JSON form, ab's -e CSV. Pure formatting, no I/O.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "loadgen/histogram.h"

namespace peregrine::loadgen {

// Why the server closed a connection that the client asked to keep open.
enum class CloseReason : uint8_t {
  kConnectionClose,    // the response said "Connection: close"
  kHttp10NoKeepAlive,  // an HTTP/1.0 response without "Connection: keep-alive"
  kNoLength,           // a body delimited by the close: no Content-Length and not chunked
  kTeAndLength,        // Transfer-Encoding together with Content-Length (must close)
  kIdleClose,          // closed a kept-alive connection without answering the next request
  kReset,              // reset a kept-alive connection
  kCount,
};

const char* close_reason_text(CloseReason reason, bool http10_response);

struct RunStats {
  uint64_t completed = 0;  // requests finished, by a response or by a failure
  uint64_t responses = 0;  // complete responses
  uint64_t fail_connect = 0;
  uint64_t fail_read = 0;
  uint64_t fail_write = 0;
  uint64_t fail_timeout = 0;
  uint64_t fail_protocol = 0;
  uint64_t length_mismatch = 0;  // body length differed from the first response's
  uint64_t non2xx = 0;
  uint64_t keep_alive_responses = 0;  // responses after which the connection stayed usable
  uint64_t bytes_read = 0;
  uint64_t head_bytes = 0;
  uint64_t body_wire_bytes = 0;
  uint64_t bytes_written = 0;
  uint64_t body_bytes_sent = 0;
  uint64_t connections_opened = 0;
  std::array<uint64_t, static_cast<size_t>(CloseReason::kCount)> server_closes{};
  bool close_reason_http10 = false;     // the kNoLength closes came from HTTP/1.0 responses
  uint64_t retried = 0;                 // requests resent after an idle keep-alive close
  uint64_t in_flight_at_end = 0;        // sent but unanswered when the time limit stopped the run
  uint64_t tls_handshakes = 0;          // completed TLS handshakes
  uint64_t tls_resumed = 0;             // of which resumed a session (--tls-resume)
  uint64_t h2_rst_stream = 0;           // RST_STREAM frames received (each fails its request,
                                        // or retries it when REFUSED_STREAM)
  uint64_t h2_goaway = 0;               // GOAWAY frames received
  std::array<uint64_t, 1000> status{};  // by status code
  Histogram total;  // us, per request: connect (if any) to last byte (-R: from the scheduled time)
  Histogram connect;     // us, connection set-up; 0 on a reused connection
  Histogram processing;  // us, total minus connect
  Histogram waiting;     // us, request written to first response byte

  void merge(const RunStats& other);
  // Failed requests as ab counts them: connect, receive, length (only with strict_length),
  // exceptions (write, timeout, protocol). Non-2xx responses are not failures (as in ab).
  uint64_t failed(bool strict_length) const {
    return fail_connect + fail_read + fail_write + fail_timeout + fail_protocol +
           (strict_length ? length_mismatch : 0);
  }
};

struct RunInfo {
  std::string url;
  std::string server_software;
  std::string hostname;
  uint16_t port = 0;
  std::string path;
  std::string tls_protocol;  // "TLSv1.3,TLS_AES_256_GCM_SHA384" for https
  std::string tls_server_name;
  std::string protocol = "HTTP/1.1";  // "HTTP/1.0", "HTTP/1.1", "h2" (over TLS) or "h2c"
  int streams = 1;                    // h2: concurrent streams per connection
  bool tls_resume = false;
  int64_t document_length = 0;  // body bytes of the first response
  int concurrency = 0;
  double elapsed_s = 0;
  bool keep_alive = false;
  bool strict_length = false;
  bool head = false;
  bool posting = false;         // -p / -u
  bool no_median_sd = false;    // -S
  bool no_percentiles = false;  // -d
  int workers = 1;
  int pipeline = 1;
  double rate = 0;
  bool interrupted = false;  // SIGINT
  bool time_limited = false;
  double cpu_user_s = 0;
  double cpu_system_s = 0;
  std::vector<std::string> notes;  // e.g. the file-descriptor limit
};

std::string format_text_report(const RunInfo& info, const RunStats& stats);
std::string format_json_report(const RunInfo& info, const RunStats& stats);
// ab's -e file: "Percentage served,Time in ms" then 0..99.
std::string format_percentile_csv(const Histogram& total);

// Helpers shared with compare mode.
std::string json_escape(const std::string& s);
double client_cpu_percent(const RunInfo& info);  // of the worker threads' cores
double client_cpu_us_per_request(const RunInfo& info, const RunStats& stats);

}  // namespace peregrine::loadgen
