#include "loadgen/options.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace peregrine::loadgen {
namespace {

bool ParseInt(std::string_view text, int64_t min, int64_t max, int64_t& out) {
  if (text.empty()) return false;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < min || v > max) return false;
  out = v;
  return true;
}

bool ParseDouble(std::string_view text, double& out) {
  if (text.empty()) return false;
  std::string s(text);
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  out = v;
  return true;
}

char Lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
}

bool StartsWithIgnoreCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (Lower(s[i]) != Lower(prefix[i])) return false;
  }
  return true;
}

// Letters that take a value (ab's, plus -W -P -R).
bool TakesValue(char c) {
  switch (c) {
    case 'n':
    case 'c':
    case 't':
    case 'H':
    case 'C':
    case 'A':
    case 'p':
    case 'T':
    case 'u':
    case 'm':
    case 's':
    case 'v':
    case 'e':
    case 'g':
    case 'X':
    case 'B':
    case 'W':
    case 'P':
    case 'R':
      return true;
    default:
      return false;
  }
}

std::string ApplyShort(char c, const std::string& v, Options& o) {
  int64_t n = 0;
  double d = 0;
  switch (c) {
    case 'n':
      if (!ParseInt(v, 1, INT64_MAX / 2, n))
        return "-n wants a number of requests >= 1, not '" + v + "'";
      o.requests = n;
      o.requests_given = true;
      return "";
    case 'c':
      if (!ParseInt(v, 1, 1'000'000, n))
        return "-c wants a concurrency between 1 and 1000000, not '" + v + "'";
      o.concurrency = static_cast<int>(n);
      return "";
    case 't':
      d = parse_duration(v);
      if (d <= 0) return "-t wants a time limit in seconds, not '" + v + "'";
      o.time_limit_s = d;
      return "";
    case 'H':
      if (v.find(':') == std::string::npos) return "-H wants 'Name: value', not '" + v + "'";
      o.headers.push_back(v);
      return "";
    case 'C':
      o.cookies.push_back(v);
      return "";
    case 'A':
      if (v.find(':') == std::string::npos) return "-A wants user:password";
      o.basic_auth = v;
      return "";
    case 'p':
      o.post_file = v;
      return "";
    case 'u':
      o.put_file = v;
      return "";
    case 'T':
      o.content_type = v;
      return "";
    case 'm':
      if (v.empty()) return "-m wants a method";
      // h2load's -m (streams per connection) when the value is a number; see parse_options.
      if (ParseInt(v, 1, 1'000'000, n)) o.streams = static_cast<int>(n);
      for (char ch : v) {
        if (ch <= ' ' || ch >= 0x7f) return "-m wants a method token, not '" + v + "'";
      }
      o.method = v;
      return "";
    case 's':
      d = parse_duration(v);
      if (d <= 0) return "-s wants a timeout in seconds, not '" + v + "'";
      o.timeout_s = d;
      return "";
    case 'v':
      if (!ParseInt(v, 0, 10, n)) return "-v wants a verbosity level 0-10";
      o.verbosity = static_cast<int>(n);
      return "";
    case 'e':
      o.csv_file = v;
      return "";
    case 'g':
      o.gnuplot_file = v;
      return "";
    case 'X':
      o.proxy = v;
      return "";
    case 'B':
      o.bind_address = v;
      return "";
    case 'W':
      if (!ParseInt(v, 1, 1024, n)) return "-W wants a number of worker threads between 1 and 1024";
      o.workers = static_cast<int>(n);
      return "";
    case 'P':
      if (!ParseInt(v, 1, 1024, n)) return "-P wants a pipelining depth between 1 and 1024";
      o.pipeline = static_cast<int>(n);
      return "";
    case 'R':
      if (!ParseDouble(v, d) || d <= 0) return "-R wants a request rate > 0 (requests per second)";
      o.rate = d;
      return "";
    case 'k':
      o.keep_alive = true;
      return "";
    case 'l':
      o.accept_variable_length = true;
      return "";
    case 'q':
      o.quiet = true;
      return "";
    case 'r':
      o.continue_on_error = true;
      return "";
    case 'i':
      o.head = true;
      return "";
    case 'S':
      o.no_median_sd = true;
      return "";
    case 'd':
      o.no_percentiles = true;
      return "";
    case 'h':
      o.help = true;
      return "";
    case 'V':
      o.version = true;
      return "";
    default:
      return std::string("unknown option -") + c + " (see --help)";
  }
}

}  // namespace

std::string Url::authority() const {
  std::string h = ipv6_literal ? "[" + host + "]" : host;
  if (port_given && port != (tls ? 443 : 80)) h += ":" + std::to_string(port);
  return h;
}

std::string parse_url(std::string_view text, Url& out) {
  out = Url();
  std::string_view rest;
  if (StartsWithIgnoreCase(text, "http://")) {
    rest = text.substr(7);
  } else if (StartsWithIgnoreCase(text, "https://")) {
    rest = text.substr(8);
    out.tls = true;
    out.port = 443;
  } else {
    return "invalid URL '" + std::string(text) + "' (want http://host[:port]/path or https://...)";
  }
  size_t slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    out.path = std::string(rest.substr(slash));
    if (out.path[0] == '?') out.path.insert(out.path.begin(), '/');
  }
  size_t hash = out.path.find('#');
  if (hash != std::string::npos) out.path.resize(hash);
  for (char c : out.path) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f)
      return "invalid URL: a space or control character in the path";
  }
  if (authority.find('@') != std::string_view::npos)
    return "invalid URL: user@host is not supported (use -A)";
  std::string_view port_text;
  if (!authority.empty() && authority[0] == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return "invalid URL: unterminated [IPv6 literal]";
    out.host = std::string(authority.substr(1, close - 1));
    out.ipv6_literal = true;
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return "invalid URL: junk after the IPv6 literal";
      port_text = after.substr(1);
      out.port_given = true;
    }
    if (out.host.empty() ||
        out.host.find_first_not_of("0123456789abcdefABCDEF:.%") != std::string::npos) {
      return "invalid URL: bad IPv6 literal";
    }
  } else {
    size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      out.port_given = true;
    }
  }
  if (out.host.empty()) return "invalid URL: no host";
  for (char c : out.host) {
    if (static_cast<unsigned char>(c) <= ' ' || c == '/' || c == 0x7f)
      return "invalid URL: bad host";
  }
  if (out.port_given) {
    int64_t p = 0;
    if (!ParseInt(port_text, 1, 65535, p))
      return "invalid URL: bad port '" + std::string(port_text) + "'";
    out.port = static_cast<uint16_t>(p);
  }
  return "";
}

double parse_duration(std::string_view text) {
  double scale = 1.0;
  if (text.size() > 2 && text.substr(text.size() - 2) == "ms") {
    scale = 0.001;
    text.remove_suffix(2);
  } else if (!text.empty() && (text.back() == 's' || text.back() == 'm' || text.back() == 'h')) {
    scale = text.back() == 's' ? 1.0 : text.back() == 'm' ? 60.0 : 3600.0;
    text.remove_suffix(1);
  }
  double v = 0;
  if (!ParseDouble(text, v) || v < 0) return -1;
  return v * scale;
}

std::string Options::effective_method() const {
  if (!method.empty()) return method;
  if (head) return "HEAD";
  if (!post_file.empty()) return "POST";
  if (!put_file.empty()) return "PUT";
  return "GET";
}

std::string parse_options(const std::vector<std::string>& args, Options& o) {
  o = Options();
  size_t i = 0;
  if (!args.empty() && args[0] == "compare") {
    o.compare = true;
    i = 1;
  }
  bool only_urls = false;
  bool streams_given = false;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (only_urls || a.size() < 2 || a[0] != '-') {
      o.urls.push_back(a);
      continue;
    }
    if (a == "--") {
      only_urls = true;
      continue;
    }
    if (a[1] == '-') {
      std::string name = a.substr(2);
      std::string value;
      bool has_value = false;
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
        has_value = true;
      }
      auto need_value = [&](std::string& v) -> std::string {
        if (has_value) {
          v = value;
          return "";
        }
        if (i + 1 >= args.size()) return "--" + name + " wants a value";
        v = args[++i];
        return "";
      };
      auto no_value = [&]() -> std::string {
        return has_value ? "--" + name + " takes no value" : "";
      };
      std::string err;
      if (name == "json") {
        err = no_value();
        o.json = true;
      } else if (name == "http1.0") {
        err = no_value();
        o.http10 = true;
      } else if (name == "strict-length") {
        err = no_value();
        o.strict_length = true;
      } else if (name == "h2") {
        err = no_value();
        o.h2 = true;
      } else if (name == "tls-resume") {
        err = no_value();
        o.tls_resume = true;
      } else if (name == "streams") {
        std::string v;
        err = need_value(v);
        int64_t n = 0;
        if (err.empty() && !ParseInt(v, 1, 1024, n))
          err = "--streams wants a number of streams per connection between 1 and 1024";
        o.streams = static_cast<int>(n);
        streams_given = true;
      } else if (name == "help") {
        o.help = true;
      } else if (name == "version") {
        o.version = true;
      } else if (name == "duration") {
        std::string v;
        err = need_value(v);
        if (err.empty()) {
          double d = parse_duration(v);
          if (d <= 0) err = "--duration wants a duration like 10s, 500ms or 2m, not '" + v + "'";
          o.time_limit_s = d;
        }
      } else if (name == "rounds") {
        std::string v;
        err = need_value(v);
        int64_t n = 0;
        if (err.empty() && !ParseInt(v, 1, 1000, n))
          err = "--rounds wants a number between 1 and 1000";
        o.rounds = static_cast<int>(n);
      } else if (name == "plot") {
        err = need_value(o.plot_file);
      } else if (name == "proxy-auth") {
        err = need_value(o.proxy_auth);
        if (err.empty() && o.proxy_auth.find(':') == std::string::npos)
          err = "--proxy-auth wants user:password";
      } else {
        err = "unknown option --" + name + " (see --help)";
      }
      if (!err.empty()) return err;
      continue;
    }
    // A cluster of short options: flags, then at most one letter taking a value (the rest of
    // the word, or the next argument).
    for (size_t j = 1; j < a.size(); ++j) {
      char c = a[j];
      if (TakesValue(c)) {
        std::string v;
        if (j + 1 < a.size()) {
          v = a.substr(j + 1);
        } else if (i + 1 < args.size()) {
          v = args[++i];
        } else {
          return std::string("-") + c + " wants a value";
        }
        std::string err = ApplyShort(c, v, o);
        if (!err.empty()) return err;
        break;
      }
      std::string err = ApplyShort(c, "", o);
      if (!err.empty()) return err;
    }
  }
  if (o.help || o.version) return "";
  if (o.compare) {
    if (o.urls.size() < 2) return "compare wants at least two URLs";
  } else {
    if (o.urls.empty()) return "no URL given (see --help)";
    if (o.urls.size() > 1)
      return "one URL at a time (use 'peregrine-bench compare URL1 URL2 ...' to compare)";
    if (!o.plot_file.empty()) return "--plot is for compare mode";
  }
  if (!o.post_file.empty() && !o.put_file.empty()) return "-p and -u cannot be used together";
  if (o.head && (!o.post_file.empty() || !o.put_file.empty()))
    return "-i cannot be used with -p or -u";
  if (o.requests_given && o.time_limit_s <= 0 && o.concurrency > o.requests) {
    return "cannot use concurrency level greater than total number of requests";
  }
  if (o.pipeline > 1) o.keep_alive = true;  // pipelining needs a connection that stays open
  // -m is ab's method, and h2load's streams per connection: with --h2 a number means streams.
  const bool numeric_method =
      !o.method.empty() && o.method.find_first_not_of("0123456789") == std::string::npos;
  if (o.h2) {
    if (numeric_method) {
      if (o.streams > 1024) return "-m wants a number of streams per connection up to 1024";
      o.method.clear();
    }
    if (o.pipeline > 1) return "-P (pipelining) is HTTP/1.1's; with --h2 use -m N streams";
    if (o.http10) return "--http1.0 and --h2 cannot be used together";
    if (!o.proxy.empty()) return "-X (a proxy) is not supported with --h2";
    if (o.rate > 0) return "-R (a constant rate) is not supported with --h2";
    o.keep_alive = true;  // an HTTP/2 connection always stays open
  } else {
    if (streams_given) return "--streams is for --h2 (HTTP/1.1 uses -P to pipeline)";
    o.streams = 1;
  }
  return "";
}

std::string base64_encode(std::string_view data) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= data.size(); i += 3) {
    uint32_t v = (uint32_t{static_cast<uint8_t>(data[i])} << 16) |
                 (uint32_t{static_cast<uint8_t>(data[i + 1])} << 8) |
                 static_cast<uint8_t>(data[i + 2]);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < data.size()) {
    uint32_t v = uint32_t{static_cast<uint8_t>(data[i])} << 16;
    if (i + 1 < data.size()) v |= uint32_t{static_cast<uint8_t>(data[i + 1])} << 8;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < data.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

namespace {

bool HasHeader(const Options& o, std::string_view name) {
  for (const std::string& h : o.headers) {
    size_t colon = h.find(':');
    std::string_view n(h.data(), colon);
    while (!n.empty() && n.back() == ' ') n.remove_suffix(1);
    if (n.size() == name.size() && StartsWithIgnoreCase(n, name)) return true;
  }
  return false;
}

}  // namespace

std::string build_request(const Options& o, const Url& url, std::string_view body, bool proxied) {
  const bool has_body = !o.post_file.empty() || !o.put_file.empty();
  std::string r = o.effective_method();
  r += ' ';
  if (proxied) {
    r += url.tls ? "https://" : "http://";
    r += url.ipv6_literal ? "[" + url.host + "]" : url.host;
    if (url.port_given) r += ":" + std::to_string(url.port);
  }
  r += url.path;
  r += o.http10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n";
  if (!HasHeader(o, "host")) r += "Host: " + url.authority() + "\r\n";
  if (!HasHeader(o, "user-agent"))
    r += "User-Agent: peregrine-bench/"
         "0.1"
         "\r\n";
  if (!HasHeader(o, "accept")) r += "Accept: */*\r\n";
  if (!HasHeader(o, "connection")) {
    if (o.keep_alive && o.http10) r += "Connection: keep-alive\r\n";
    if (!o.keep_alive && !o.http10) r += "Connection: close\r\n";
  }
  if (!o.cookies.empty()) {
    r += "Cookie: ";
    for (size_t i = 0; i < o.cookies.size(); ++i) {
      if (i) r += "; ";
      r += o.cookies[i];
    }
    r += "\r\n";
  }
  if (!o.basic_auth.empty()) r += "Authorization: Basic " + base64_encode(o.basic_auth) + "\r\n";
  if (proxied && !o.proxy_auth.empty())
    r += "Proxy-Authorization: Basic " + base64_encode(o.proxy_auth) + "\r\n";
  if (has_body) {
    if (!HasHeader(o, "content-type"))
      r +=
          "Content-Type: " + (o.content_type.empty() ? std::string("text/plain") : o.content_type) +
          "\r\n";
    if (!HasHeader(o, "content-length"))
      r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  } else if (!o.content_type.empty() && !HasHeader(o, "content-type")) {
    r += "Content-Type: " + o.content_type + "\r\n";
  }
  for (const std::string& h : o.headers) r += h + "\r\n";
  r += "\r\n";
  if (has_body) r += body;
  return r;
}

std::vector<std::pair<std::string, std::string>> build_h2_headers(const Options& o, const Url& url,
                                                                  size_t body_size) {
  std::vector<std::pair<std::string, std::string>> h;
  const bool has_body = !o.post_file.empty() || !o.put_file.empty();
  std::string authority = url.authority();
  for (const std::string& line : o.headers) {
    size_t colon = line.find(':');
    std::string_view name(line.data(), colon);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (name.size() == 4 && StartsWithIgnoreCase(name, "host")) {
      std::string_view v(line);
      v.remove_prefix(colon + 1);
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      authority = std::string(v);
    }
  }
  h.emplace_back(":method", o.effective_method());
  h.emplace_back(":scheme", url.tls ? "https" : "http");
  h.emplace_back(":authority", authority);
  h.emplace_back(":path", url.path);
  if (!HasHeader(o, "user-agent")) h.emplace_back("user-agent", "peregrine-bench/0.1");
  if (!HasHeader(o, "accept")) h.emplace_back("accept", "*/*");
  if (!o.cookies.empty()) {
    std::string c;
    for (size_t i = 0; i < o.cookies.size(); ++i) {
      if (i) c += "; ";
      c += o.cookies[i];
    }
    h.emplace_back("cookie", c);
  }
  if (!o.basic_auth.empty())
    h.emplace_back("authorization", "Basic " + base64_encode(o.basic_auth));
  if (has_body) {
    if (!HasHeader(o, "content-type"))
      h.emplace_back("content-type", o.content_type.empty() ? "text/plain" : o.content_type);
    if (!HasHeader(o, "content-length"))
      h.emplace_back("content-length", std::to_string(body_size));
  } else if (!o.content_type.empty() && !HasHeader(o, "content-type")) {
    h.emplace_back("content-type", o.content_type);
  }
  static constexpr std::string_view kConnectionSpecific[] = {
      "host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"};
  for (const std::string& line : o.headers) {
    size_t colon = line.find(':');
    std::string name = line.substr(0, colon);
    while (!name.empty() && name.back() == ' ') name.pop_back();
    for (char& ch : name) ch = Lower(ch);
    bool skip = false;
    for (std::string_view bad : kConnectionSpecific) skip |= name == bad;
    if (skip) continue;
    std::string_view v(line);
    v.remove_prefix(colon + 1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    h.emplace_back(std::move(name), std::string(v));
  }
  return h;
}

std::string usage_text() {
  return R"(Usage: peregrine-bench [options] http[s]://host[:port]/path
       peregrine-bench compare [options] URL1 URL2 ...
ab's options, with ab's meaning:
    -n requests     Number of requests to perform (default 1)
    -c concurrency  Number of connections open at a time (default 1)
    -t timelimit    Seconds to spend; stops on time. Without -n, no request cap
    -s timeout      Seconds each request may take (default 30)
    -k              Keep connections alive (HTTP keep-alive)
    -H header       Add a header, e.g. 'Accept-Encoding: gzip' (repeatable; replaces a default one)
    -C name=value   Add a cookie (repeatable)
    -A user:pass    HTTP Basic authentication
    -p file         POST the file's contents (also set -T)
    -u file         PUT the file's contents (also set -T)
    -T type         Content-Type of the body (default text/plain)
    -m method       Request method
    -i              HEAD instead of GET
    -l              Accept variable document lengths (the default here; cancels --strict-length)
    -v level        Verbosity: 2 prints the request, 4 every response head
    -q              No progress lines on stderr
    -r              Accepted for ab; receive errors never abort the run here
    -e file         Write a CSV of the percentiles 0-99 (ms)
    -g file         Write every request as a gnuplot (TSV) line
    -X proxy:port   Send requests through an HTTP proxy (http:// URLs)
    -B address      Local address to connect from
    -S              Leave out the median and standard deviation columns
    -d              Leave out the 'served within a certain time' table
    -V, -h          Version, help
Our own:
    -W threads      Worker threads, each with its own event loop (default: every usable core)
    -P depth        Pipeline this many requests per connection (implies -k)
    -R rate         Constant total request rate (per second); latency is measured from each
                    request's scheduled time, correcting coordinated omission
    --duration D    Time limit as 10s, 500ms, 2m (same as -t)
    --http1.0       Send HTTP/1.0 requests (default HTTP/1.1)
    --strict-length Count responses whose length differs from the first as failed (ab's default)
    --json          Print the whole report as JSON
    --proxy-auth user:pass  Proxy credentials (ab's -P)
    --h2            HTTP/2: ALPN "h2" on https://, prior knowledge (h2c) on http://
    --streams N     With --h2: concurrent streams per connection (default 1); -m N is the same
    --tls-resume    Resume the TLS session (ticket) of the previous connection on reconnects
compare mode:
    --rounds N      Rounds of alternating runs (default 3); the table shows medians
    --plot FILE.svg Write a latency-distribution chart
)";
}

}  // namespace peregrine::loadgen
