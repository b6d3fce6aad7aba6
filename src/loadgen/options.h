// peregrine-bench's command line: ab's options with ab's meaning, plus our own. Pure: argv in,
// an Options (or an error message) out. Also the pieces of request building that need no I/O:
// URL parsing, Basic credentials, the bytes of the request.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace peregrine::loadgen {

struct Url {
  bool tls = false;  // https
  std::string host;  // without brackets for an IPv6 literal
  bool ipv6_literal = false;
  uint16_t port = 80;
  bool port_given = false;
  std::string path = "/";  // path and query, as sent
  // host[:port] as it goes into the Host header (brackets kept, default port omitted).
  std::string authority() const;
};

// Parses http://host[:port][/path] and https://...; host may be [v6]. Returns "" or an error.
std::string parse_url(std::string_view text, Url& out);

struct Options {
  // ab's options
  int64_t requests = 1;  // -n
  bool requests_given = false;
  int concurrency = 1;                  // -c
  double time_limit_s = 0;              // -t / --duration; 0: none
  bool keep_alive = false;              // -k
  std::vector<std::string> headers;     // -H, as given ("Name: value")
  std::vector<std::string> cookies;     // -C
  std::string basic_auth;               // -A user:pass
  std::string proxy_auth;               // --proxy-auth user:pass (ab's -P; our -P is pipelining)
  std::string post_file;                // -p
  std::string put_file;                 // -u
  std::string content_type;             // -T
  std::string method;                   // -m
  double timeout_s = 30;                // -s
  bool accept_variable_length = false;  // -l
  int verbosity = 0;                    // -v
  bool quiet = false;                   // -q
  bool continue_on_error = false;       // -r (we never abort on receive errors; accepted for ab)
  bool head = false;                    // -i
  std::string csv_file;                 // -e
  std::string gnuplot_file;             // -g
  std::string proxy;                    // -X host:port
  std::string bind_address;             // -B
  bool no_median_sd = false;            // -S
  bool no_percentiles = false;          // -d
  // ours
  int workers = 0;             // -W; 0: one per available core (capped at -c)
  int pipeline = 1;            // -P
  double rate = 0;             // -R requests/s in total; 0: as fast as possible
  bool http10 = false;         // --http1.0
  bool json = false;           // --json
  bool strict_length = false;  // --strict-length
  bool h2 = false;             // --h2: HTTP/2 (ALPN "h2" on https://, prior knowledge on http://)
  int streams = 1;             // --streams, or -m N with --h2: concurrent streams per connection
  bool tls_resume = false;     // --tls-resume: reconnect with the session ticket of the last one
  // compare mode
  bool compare = false;
  int rounds = 3;         // --rounds
  std::string plot_file;  // --plot
  // both
  std::vector<std::string> urls;
  bool help = false;
  bool version = false;

  bool unlimited_requests() const { return time_limit_s > 0 && !requests_given; }
  // The request method, from -m, -i, -p and -u.
  std::string effective_method() const;
};

// Parses the arguments after argv[0] ("compare" as the first one selects compare mode).
// Returns "" or an error message (for "peregrine-bench: <message>").
std::string parse_options(const std::vector<std::string>& args, Options& out);

// A duration: "30", "30s", "500ms", "2m", "1.5s". Returns seconds, or a negative on error.
double parse_duration(std::string_view text);

std::string usage_text();

std::string base64_encode(std::string_view data);

// The bytes of one request. `proxied`: absolute-form request target (through -X).
std::string build_request(const Options& options, const Url& url, std::string_view body,
                          bool proxied);

// The header list of one HTTP/2 request (pseudo-headers first, lower-case names), the same
// request as build_request() makes for HTTP/1.1: -H headers (connection-specific ones, which
// RFC 9113 8.2.2 forbids, left out; a Host header becomes :authority), cookies, credentials,
// Content-Type and Content-Length of a body.
std::vector<std::pair<std::string, std::string>> build_h2_headers(const Options& options,
                                                                  const Url& url, size_t body_size);

}  // namespace peregrine::loadgen
