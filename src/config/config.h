// The validated, immutable configuration snapshot. Loaded once (from TOML or the command line),
// shared read-only by all workers, replaced as a whole on SIGHUP.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "access/options.h"
#include "admin/options.h"
#include "compress/options.h"
#include "config/handler_type.h"
#include "config/log_format.h"
#include "core/cidr.h"
#include "core/log.h"
#include "core/regex.h"
#include "event/batch_wait.h"
#include "http/header_edits.h"

namespace peregrine::auth {
class Htpasswd;
}

namespace peregrine::config {

using Millis = std::chrono::milliseconds;

// Where a value came from, for messages of the form file:line:col.
struct SourcePos {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;
};

struct ListenAddress {
  std::string text;  // as written: "127.0.0.1:8080", "[::1]:8080", "*:80", "unix:/run/p.sock"
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  int backlog = 4096;
  // Unix sockets ("unix:/path") only: the file's permissions (-1: as the umask leaves them) and
  // owner/group names ("": unchanged).
  int mode = -1;
  std::string owner;
  std::string group;
  // TLS on this listener (certificates come from the sites). HTTP/2: offered through ALPN on a
  // TLS listener (default on); on a plain one, h2c with prior knowledge (default off).
  bool tls = false;
  bool http2 = false;
  // The PROXY protocol (v1 or v2) header precedes everything else on each connection; its
  // source address replaces the socket's peer (see docs/access.md).
  bool proxy_protocol = false;
  bool admin = false;  // the [admin] listener: its connections go to the admin API only
  SourcePos pos;
};

// [client_address]: believing proxies about who the client is (docs/access.md).
enum class ClientAddressHeader : uint8_t { kXForwardedFor, kForwarded };
struct ClientAddress {
  std::vector<Cidr> trusted_proxies;  // empty: no header is believed (and no cost per request)
  ClientAddressHeader header = ClientAddressHeader::kXForwardedFor;
  std::vector<Cidr> proxy_protocol_from;  // empty: any peer of a proxy_protocol listener
};

// [request_id]: an ID per request for the back ends and the log.
struct RequestIdOptions {
  bool enabled = false;  // the table is present, or a log format uses $request_id
  std::string header = "X-Request-Id";
  bool trust_incoming = false;  // pass a valid incoming ID on instead of making one
  bool response = false;        // echo it in the response
};

struct Limits {
  Millis header_timeout{20'000};      // whole request head must arrive within this (slowloris)
  Millis keepalive_timeout{75'000};   // idle time between requests on a kept-alive connection
  Millis body_timeout{60'000};        // between two reads of a request body
  Millis send_timeout{60'000};        // between two successful writes to a slow client
  Millis shutdown_timeout{30'000};    // graceful stop (SIGQUIT) gives in-flight requests this long
  uint32_t max_connections = 16384;   // whole server; each worker takes its share
  uint32_t max_header_bytes = 16384;  // request line + headers
  uint64_t max_body_bytes = 1 << 20;  // 413 beyond
  uint32_t max_requests_per_connection = 1000;
};

enum class AccessLogFormat { kCombined, kJson, kOff, kCustom };

struct AccessLog {
  AccessLogFormat format = AccessLogFormat::kCombined;
  std::string path;  // "" or "stdout"/"stderr"; ignored when kOff
  LogFormat custom;  // kCustom: the compiled access_log_format string
};

struct StaticOptions {
  std::string root;    // directory the request path maps into (absolute)
  bool alias = false;  // true: the route's matched prefix is replaced by root (nginx `alias`)
  std::vector<std::string> index{"index.html"};
  bool directory_listing = false;
  bool dotfiles = false;  // serve names starting with '.' (except .well-known, always allowed)
  bool symlinks_outside_root = false;  // follow symlinks that leave the root
  bool precompressed = true;           // serve NAME.br / NAME.gz when the client accepts them
  bool etag = true;
  Millis cache_valid{1000};  // how long a cached stat() result is trusted
};

// A back-end server of an upstream group.
struct UpstreamServer {
  std::string address;  // as written: "127.0.0.1:9000", "[::1]:8080", "unix:/run/php/fpm.sock"
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  uint32_t weight = 1;
  bool backup = false;  // only used when no primary server is up
  // Concurrent requests to this server from the whole server (0 = unlimited). Each worker gets
  // its share, at least 1: max_conns / workers, rounded down. Requests beyond it wait in the
  // queue. FastCGI connections are kept alive (FCGI_KEEP_CONN) only with a cap: a php-fpm child
  // serves one connection at a time, so idle connections beyond pm.max_children would starve it.
  uint32_t max_conns = 0;
  std::string route;  // AJP: the Tomcat jvmRoute of this server, for sticky sessions ("" none)
  SourcePos pos;
};

enum class Balance { kRoundRobin, kLeastConn, kIpHash, kHash };

// Active health check: an HTTP GET per server every `interval` (proxy groups only).
struct HealthCheck {
  bool enabled = false;
  std::string path = "/";
  std::string host;  // Host header; "" = the server's address
  Millis interval{5'000};
  Millis timeout{2'000};
  int expect_status_min = 200;  // accepted status range, inclusive
  int expect_status_max = 399;
  uint32_t rise = 2;  // consecutive successes that bring a down server back
  uint32_t fall = 3;  // consecutive failures that take it out
  // The group serves ajp routes: the probe is AJP13's CPING, answered by CPONG (path, host and
  // status do not apply). Set when a route names the group.
  bool ajp_cping = false;
};

// What balance = "hash" hashes: hash_key = "$uri", "$http_NAME" or "$cookie_NAME".
struct HashKey {
  enum class Source { kNone, kUri, kHeader, kCookie };
  Source source = Source::kNone;
  // kHeader: lower-case, '_' read as '-' ("$http_X_User_Id" -> "x-user-id", as nginx spells
  // it); kCookie: as written (cookie names are case-sensitive).
  std::string name;
};

// TLS to the servers of a group (https back ends): `proxy = "https://..."`, or tls = true in
// an [[upstream]]. Each worker builds its own client context from this (upstream/group_runtime.h).
struct UpstreamTls {
  bool enabled = false;
  // Verify the server's certificate chain and name. Off only when written (a warning is logged
  // at load): it makes the connection open to anyone on the path.
  bool verify = true;
  std::string ca_file;  // PEM bundle the chain must lead to; "" = the system store
  // The name verified in the certificate (DNS name or IP address) and sent as SNI (names only).
  // Filled at load: tls_server_name, else the host the proxy URL names (a declared group: its
  // name, as nginx's proxy_ssl_name defaults to $proxy_host).
  std::string server_name;
  std::string certificate;  // client certificate chain (PEM) for back ends that ask; "" = none
  std::string key;          // its private key
  SourcePos pos;            // where TLS was asked for, for messages
};

// [[upstream]]: a named group of back ends shared by fastcgi and proxy routes. A route that names
// an address instead of a group gets an implicit one-server group with these defaults.
struct UpstreamGroup {
  std::string name;
  std::vector<UpstreamServer> servers;
  Balance balance = Balance::kRoundRobin;
  HashKey hash_key;  // kHash only
  uint32_t max_fails = 1;
  Millis fail_timeout{10'000};
  // Idle connections kept per worker and server (0: close after use). Generous, because a pool
  // smaller than the concurrency opens and closes a connection for every request beyond it;
  // reuse is most-recent-first, so connections a quieter period no longer needs sit at the
  // end of the list and keepalive_timeout closes them.
  uint32_t keepalive = 1024;
  Millis keepalive_timeout{60'000};
  // Written in the file (else a group fastcgi routes use gets FastCGI's defaults, below).
  bool keepalive_written = false;
  bool keepalive_timeout_written = false;
  // Set when fastcgi routes use the group and `keepalive` is not written: a php-fpm child stays
  // with one connection while it is open, so each server keeps idle only what leaves a quarter
  // of its max_conns to the pool's other clients (upstream/group_runtime.cc, idle_limit).
  bool keepalive_leaves_children = false;
  uint32_t keepalive_requests = 1000;  // requests per upstream connection, then it is closed
  uint32_t queue = 1024;               // requests waiting for a free slot, per worker
  Millis queue_timeout{30'000};        // a request that waited this long gets 503 + Retry-After
  Millis connect_timeout{5'000};
  Millis send_timeout{60'000};  // between two writes to the back end
  Millis read_timeout{60'000};  // between two reads from the back end
  uint32_t tries = 3;           // servers tried per request (connect failures, idempotent retries)
  Millis try_timeout{0};        // total time budget for all tries; 0 = unlimited
  HealthCheck health_check;
  UpstreamTls tls;
  SourcePos pos;
};

// Response headers of a site or route (`headers`; see docs/access.md).
struct ResponseHeaders {
  http::HeaderRuleSet rules;  // as written in this table
  // Compiled when loaded: a route's holds its site's rules, then its own. Null: no rules, and
  // writing a response costs one branch.
  std::shared_ptr<const http::HeaderEdits> edits;
};

// Basic authentication of a site or route (`auth`; see docs/access.md and src/auth/).
struct AuthOptions {
  std::shared_ptr<const auth::Htpasswd> users;  // read when loaded; null: no authentication
  std::string challenge;                        // WWW-Authenticate: Basic realm="...", ...
  std::string file;                             // the htpasswd path, for messages
};

enum class MatchKind { kExact, kPrefix, kExtension, kRegex };

struct Route {
  MatchKind match = MatchKind::kPrefix;
  std::string pattern;                 // exact path, prefix, extension (without dot) or regex
  std::shared_ptr<const Regex> regex;  // compiled, for kRegex
  // The route's handler (a static object, see config/handler_type.h) and its own options, of the
  // type its folder defines (handlers/NAME/options.h); null options: it has none of its own. A
  // loaded route always has a type; one made in code without one serves static files.
  const HandlerType* type = nullptr;
  std::shared_ptr<const HandlerOptions> options;
  StaticOptions static_files;        // shared by the handlers that serve files (static, FastCGI)
  std::vector<std::string> methods;  // allowed methods; empty = the handler's default
  compress::Options compress;        // the site's, overridden by the route's `compress`
  access::Options access;            // the site's, overridden by the route's `access`/`limit`
  ResponseHeaders headers;           // applied after the site's
  AuthOptions auth;                  // the site's unless the route has its own or "off"
  SourcePos pos;

  // The handler's options as its own type; null when the route has another handler. For setting
  // up (route tables, tests), never per request: a handler keeps a reference to its options.
  template <class T>
  const T* options_as() const {
    return dynamic_cast<const T*>(options.get());
  }
};

// A certificate chain and its key, read (and checked) when the configuration is loaded, so that
// every worker builds its TLS contexts from the same bytes and a reload re-reads the files.
struct TlsCertificate {
  std::string certificate_path;  // "" for a generated certificate (--tls-self-signed)
  std::string key_path;
  std::string chain_pem;  // leaf first, then intermediates
  std::string key_pem;
  SourcePos pos;
};

// A site's TLS keys ([[site]] tls = {...}); see docs/tls.md.
struct SiteTls {
  std::vector<TlsCertificate> certificates;  // at most one per key type (ECDSA, RSA)
  std::string ocsp_response;                 // DER bytes of the stapled OCSP response ("" none)
  std::string hsts;  // the Strict-Transport-Security value sent on TLS responses ("" none)
  // Client certificates (nginx's ssl_verify_client, Apache's SSLVerifyClient): off asks for
  // none; optional and on ask at the handshake and verify against client_ca (on: 400 without a
  // valid one, optional: 400 only for an invalid one); optional_no_ca asks and never refuses.
  enum class VerifyClient : uint8_t { kOff, kOptional, kOn, kOptionalNoCa };
  VerifyClient verify_client = VerifyClient::kOff;
  std::string client_ca;  // PEM bytes of the trusted CAs, also sent as acceptable CA names
  int verify_depth = 1;   // certificates allowed above the client's (nginx's default, 1)
};

// The global [tls] table: what every TLS listener negotiates.
struct TlsOptions {
  bool tls12 = true;  // "protocols"; nothing older than 1.2 is offered
  bool tls13 = true;
  std::string ciphers;       // TLS 1.2 cipher list ("" = the built-in modern list)
  std::string ciphersuites;  // TLS 1.3 suites ("" = OpenSSL's)
  std::string curves;        // groups ("" = the built-in list)
  // Session ticket keys: 80 bytes each; the first encrypts, all decrypt. Empty: random keys
  // made at start and rotated every ticket_rotation.
  std::vector<std::string> ticket_keys;
  bool tickets = true;
  Millis ticket_rotation{6 * 60 * 60 * 1000};
  uint32_t session_cache = 20480;  // sessions per worker (0: no cache)
  Millis session_timeout{6 * 60 * 60 * 1000};
  bool log_tls = false;  // access log lines carry the protocol version and cipher
};

struct Site {
  std::vector<std::string> hosts;  // lower-case; "*.example.com" wildcards allowed
  bool is_default = false;
  StaticOptions static_files;  // the site's root and defaults, inherited by its static routes
  std::vector<Route> routes;   // first match wins, in declared order
  std::map<int, std::string> error_pages;  // status -> path under the site root
  AccessLog access_log;
  SiteTls tls;
  compress::Options compress;  // on-the-fly compression, inherited by the site's routes
  access::Options access;      // allow/deny rules and limits (docs/access.md)
  ResponseHeaders headers;     // on every response of the site, before a route's own
  AuthOptions auth;            // inherited by the site's routes
  SourcePos pos;
};

using peregrine::LogLevel;  // core/log.h

// `event_backend`: how workers wait for readiness (event/poller.h has the backends; the process
// turns this into one at start, see docs/io_uring.md).
enum class EventBackend { kEpoll, kIoUring, kAuto };

struct Config {
  std::string source;  // file path, or "<command line>"
  std::string
      text;  // the TOML it was read from (empty in quick mode): the admin API's GET /api/config
  std::vector<ListenAddress> listen;
  int workers = 0;    // 0: one per core
  std::string user;   // drop privileges to this user after binding, when started as root
  std::string group;  // default: the user's primary group
  std::string pid_file;
  std::string error_log = "stderr";
  LogLevel log_level = LogLevel::kInfo;
  // Read at start: a reload keeps the running backend.
  EventBackend event_backend = EventBackend::kEpoll;
  // How long a busy worker's wait may hold for more events (event/batch_wait.h), read at start
  // too; 0 turns it off.
  unsigned batch_wait_us = event::kDefaultBatchWaitUs;
  std::string server_header = "peregrine";  // Server: value; "" sends none
  Limits limits;
  ClientAddress client_address;
  RequestIdOptions request_id;
  TlsOptions tls;
  admin::Options admin;  // [admin]; its listener is the last entry of `listen`
  std::map<std::string, std::string> mime_types;  // extension (no dot, lower-case) -> type
  std::vector<UpstreamGroup> upstreams;           // named and implicit groups
  access::Definitions access;                     // the [[limit]] tables
  std::vector<Site> sites;
  size_t default_site = 0;  // index into sites
  // The handlers it was read with: a reload or the admin API's check of a new text reads with the
  // same (handlers/builtin.h lists the built-in ones).
  HandlerSet handlers;
};

struct ConfigError {
  SourcePos pos;
  std::string message;
  std::string hint;      // may be empty
  bool warning = false;  // printed as "warning:", never stops a load
  // "file:line:col: error: message (hint: ...)"
  std::string to_string() const;
};

struct LoadResult {
  std::shared_ptr<const Config> config;  // null when errors is not empty
  std::vector<ConfigError> errors;
  std::vector<ConfigError> warnings;  // e.g. a certificate that expires soon
};

// `handlers`: the route handlers the document may use (handlers::builtin() for the server's).
LoadResult load_file(const std::string& path, const HandlerSet& handlers);
LoadResult load_string(std::string_view toml_text, const std::string& source_name,
                       const HandlerSet& handlers);

}  // namespace peregrine::config
