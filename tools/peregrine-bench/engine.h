// peregrine-bench's load engine: worker threads, each with its own epoll loop (src/event),
// driving connections that send the prebuilt request and parse responses with
// http1::ResponseParser. Everything it measures goes into a RunStats per worker, merged at the end.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "loadgen/options.h"
#include "loadgen/report.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace peregrine::loadgen {

struct Target {
  std::string url_text;
  Url url;
  bool proxied = false;
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  std::string connect_host;  // what we connect to: the URL's host or the proxy's
  uint16_t connect_port = 0;
  std::string request;  // one request, body included
  std::string body;     // -p / -u: the body alone (HTTP/2 sends it in DATA frames)
  uint64_t body_size = 0;
  std::vector<std::pair<std::string, std::string>> h2_headers;  // --h2: the request's headers
  SSL_CTX* ssl_ctx = nullptr;
  std::string sni;  // empty for IP literals
  sockaddr_storage bind_addr{};
  socklen_t bind_len = 0;
};

// Resolves the URL (or -X proxy), reads -p/-u files, builds the request, sets up TLS.
// Returns "" or an error message.
std::string prepare_target(const Options& options, const std::string& url_text, Target& out);
void release_target(Target& target);

struct GnuplotRecord {
  int64_t start_us_wall;  // microseconds since the epoch
  int64_t connect_us, processing_us, total_us, wait_us;
};

struct RunOutput {
  RunInfo info;
  RunStats stats;
  std::vector<GnuplotRecord> records;  // only with -g
};

// Runs the load described by `options` against `target`. `progress`: print ab's
// "Completed N requests" lines on stderr.
void run_load(const Options& options, const Target& target, bool progress, RunOutput& out);

// Raises RLIMIT_NOFILE to cover `needed` descriptors. Returns "" or a message saying it cannot;
// `note` says what was done.
std::string ensure_nofile(uint64_t needed, std::string& note);

// Set by SIGINT: stop and report what was measured, as ab does.
void install_interrupt_handler();

}  // namespace peregrine::loadgen
