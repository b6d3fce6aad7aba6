#include "blocking_http.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "client/url.h"

namespace peregrine::acme_tool {
namespace {

constexpr size_t kMaxResponse = 4 << 20;

std::string ssl_error_text() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "closed";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof buf);
  return buf;
}

int connect_to(const std::string& host, uint16_t port, int timeout_seconds, std::string* error) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  if (rc != 0) {
    *error = "cannot resolve " + host + ": " + gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  std::string last = "no address";
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    timeval tv{timeout_seconds, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
    last = strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(list);
  if (fd < 0) *error = "cannot connect to " + host + ":" + std::to_string(port) + ": " + last;
  return fd;
}

// Parses a complete response in `raw`; false while more is needed (or *error when it is bad).
bool parse_response(const std::string& raw, bool head_request, bool at_eof, acme::Response* out,
                    std::string* error) {
  size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos) {
    if (at_eof) *error = "the response ended inside its head";
    return false;
  }
  std::string_view head(raw.data(), end);
  size_t line_end = head.find("\r\n");
  std::string_view status_line = head.substr(0, line_end);
  if (status_line.substr(0, 7) != "HTTP/1." || status_line.size() < 12) {
    *error = "not an HTTP/1.x response";
    return false;
  }
  out->status = std::atoi(std::string(status_line.substr(9, 3)).c_str());
  out->headers.clear();
  bool chunked = false;
  long length = -1;
  while (line_end != std::string_view::npos) {
    size_t start = line_end + 2;
    line_end = head.find("\r\n", start);
    std::string_view line =
        head.substr(start, line_end == std::string_view::npos ? head.npos : line_end - start);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string name(line.substr(0, colon));
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (strcasecmp(name.c_str(), "Content-Length") == 0)
      length = std::atol(std::string(value).c_str());
    if (strcasecmp(name.c_str(), "Transfer-Encoding") == 0 && value.find("chunked") != value.npos)
      chunked = true;
    out->headers.emplace_back(std::move(name), std::string(value));
  }
  std::string_view body(raw.data() + end + 4, raw.size() - end - 4);
  if (head_request || out->status == 204 || out->status == 304) {
    out->body.clear();
    return true;
  }
  if (chunked) {
    std::string decoded;
    size_t at = 0;
    for (;;) {
      size_t nl = body.find("\r\n", at);
      if (nl == std::string_view::npos) break;
      size_t size = std::strtoul(std::string(body.substr(at, nl - at)).c_str(), nullptr, 16);
      if (size == 0) {
        out->body = std::move(decoded);
        return true;
      }
      if (nl + 2 + size + 2 > body.size()) break;
      decoded.append(body.substr(nl + 2, size));
      at = nl + 2 + size + 2;
    }
    if (at_eof) *error = "the chunked body ended early";
    return false;
  }
  if (length >= 0) {
    if (body.size() < static_cast<size_t>(length)) {
      if (at_eof) *error = "the body ended early";
      return false;
    }
    out->body.assign(body.substr(0, static_cast<size_t>(length)));
    return true;
  }
  if (!at_eof) return false;
  out->body.assign(body);
  return true;
}

}  // namespace

bool fetch(const acme::Request& request, const std::string& ca_file, int timeout_seconds,
           acme::Response* response, std::string* error) {
  auto url = client::parse_url(request.url, error);
  if (!url) {
    *error = "bad URL '" + request.url + "': " + *error;
    return false;
  }
  int fd = connect_to(url->host, url->port, timeout_seconds, error);
  if (fd < 0) return false;
  SSL_CTX* ctx = nullptr;
  SSL* ssl = nullptr;
  auto cleanup = [&] {
    if (ssl != nullptr) SSL_free(ssl);
    if (ctx != nullptr) SSL_CTX_free(ctx);
    close(fd);
  };
  if (url->tls) {
    ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx) != 1
                        : SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1) {
      *error = "cannot load the CA bundle '" + ca_file + "': " + ssl_error_text();
      cleanup();
      return false;
    }
    ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    unsigned char ip[16];
    bool is_ip = inet_pton(AF_INET, url->host.c_str(), ip) == 1 ||
                 inet_pton(AF_INET6, url->host.c_str(), ip) == 1;
    if (is_ip) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), url->host.c_str());
    } else {
      SSL_set_tlsext_host_name(ssl, url->host.c_str());
      SSL_set1_host(ssl, url->host.c_str());
    }
    if (SSL_connect(ssl) != 1) {
      long verify = SSL_get_verify_result(ssl);
      *error = "TLS handshake with " + url->address() + " failed: " +
               (verify != X509_V_OK ? X509_verify_cert_error_string(verify) : ssl_error_text());
      cleanup();
      return false;
    }
  }
  std::string target = url->path + (url->query.empty() ? "" : "?" + url->query);
  std::string out = request.method + " " + target + " HTTP/1.1\r\nHost: " + url->authority +
                    "\r\nUser-Agent: peregrine-acme-order\r\nConnection: close\r\n";
  if (!request.content_type.empty()) out += "Content-Type: " + request.content_type + "\r\n";
  if (!request.accept.empty()) out += "Accept: " + request.accept + "\r\n";
  if (request.method == "POST" || !request.body.empty())
    out += "Content-Length: " + std::to_string(request.body.size()) + "\r\n";
  out += "\r\n" + request.body;
  size_t sent = 0;
  while (sent < out.size()) {
    long n = ssl ? SSL_write(ssl, out.data() + sent, static_cast<int>(out.size() - sent))
                 : ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      *error =
          "cannot send to " + url->address() + ": " + (ssl ? ssl_error_text() : strerror(errno));
      cleanup();
      return false;
    }
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[16384];
  bool head_request = request.method == "HEAD";
  for (;;) {
    long n = ssl ? SSL_read(ssl, buf, sizeof buf) : ::recv(fd, buf, sizeof buf, 0);
    bool eof = n <= 0;
    if (!eof) raw.append(buf, static_cast<size_t>(n));
    if (raw.size() > kMaxResponse) {
      *error = "the response from " + url->address() + " is over " + std::to_string(kMaxResponse) +
               " bytes";
      cleanup();
      return false;
    }
    if (eof && n < 0 && !ssl && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      *error =
          "no answer from " + url->address() + " within " + std::to_string(timeout_seconds) + " s";
      cleanup();
      return false;
    }
    std::string parse_error;
    if (parse_response(raw, head_request, eof, response, &parse_error)) break;
    if (eof) {
      ERR_clear_error();
      *error = "bad response from " + url->address() + ": " +
               (parse_error.empty() ? "the connection closed early" : parse_error);
      cleanup();
      return false;
    }
  }
  cleanup();
  return true;
}

namespace {

int listen_on(const std::string& address, int port, std::string* error) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    *error = "'" + address + "' is not an IPv4 address";
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 64) != 0) {
    *error = "cannot listen on " + address + ":" + std::to_string(port) + ": " + strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

// Waits for a connection while checking `stopping` every 100 ms.
int accept_one(int fd, const std::atomic<bool>& stopping) {
  while (!stopping) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    int conn = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    timeval tv{5, 0};
    setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return conn;
  }
  return -1;
}

}  // namespace

bool Http01Responder::start(const std::string& address, int port, std::string* error) {
  fd_ = listen_on(address, port, error);
  if (fd_ < 0) return false;
  thread_ = std::thread([this] { run(); });
  return true;
}

void Http01Responder::stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  thread_.join();
  close(fd_);
  fd_ = -1;
}

void Http01Responder::set(const std::string& token, const std::string& key_authorization) {
  std::lock_guard<std::mutex> lock(mutex_);
  answers_[token] = key_authorization;
}

void Http01Responder::run() {
  constexpr std::string_view kPrefix = "/.well-known/acme-challenge/";
  for (;;) {
    int conn = accept_one(fd_, stopping_);
    if (conn < 0) return;
    std::string head;
    char buf[4096];
    while (head.find("\r\n\r\n") == std::string::npos && head.size() < 16384) {
      ssize_t n = recv(conn, buf, sizeof buf, 0);
      if (n <= 0) break;
      head.append(buf, static_cast<size_t>(n));
    }
    std::string status = "404 Not Found", body = "no such challenge\n";
    size_t sp1 = head.find(' ');
    size_t sp2 = sp1 == std::string::npos ? sp1 : head.find(' ', sp1 + 1);
    if (sp2 != std::string::npos && head.compare(0, sp1, "GET") == 0) {
      std::string path = head.substr(sp1 + 1, sp2 - sp1 - 1);
      if (path.compare(0, kPrefix.size(), kPrefix) == 0) {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = answers_.find(path.substr(kPrefix.size()));
        if (it != answers_.end()) {
          status = "200 OK";
          body = it->second;
        }
      }
      fprintf(stderr, "acme-order: http-01: GET %s -> %s\n", path.c_str(), status.c_str());
    }
    std::string reply = "HTTP/1.1 " + status + "\r\nContent-Type: text/plain\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    ::send(conn, reply.data(), reply.size(), MSG_NOSIGNAL);
    close(conn);
  }
}

struct AlpnCallbacks {
  static int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen,
                         const unsigned char* in, unsigned int inlen, void*) {
    for (unsigned int i = 0; i < inlen;) {
      unsigned int len = in[i];
      if (i + 1 + len > inlen) break;
      if (std::string_view(reinterpret_cast<const char*>(in + i + 1), len) == acme::kAcmeTlsAlpn) {
        *out = in + i + 1;
        *outlen = static_cast<unsigned char>(len);
        return SSL_TLSEXT_ERR_OK;
      }
      i += 1 + len;
    }
    // RFC 8737 §3: only acme-tls/1 is answered here.
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  static int servername(SSL* ssl, int*, void* arg) {
    auto* self = static_cast<TlsAlpn01Responder*>(arg);
    const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    std::lock_guard<std::mutex> lock(self->mutex_);
    auto it = self->certificates_.find(name ? name : "");
    if (it == self->certificates_.end()) {
      fprintf(stderr, "acme-order: tls-alpn-01: no certificate for SNI '%s'\n", name ? name : "");
      return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    SSL_use_certificate(ssl, it->second.certificate.get());
    SSL_use_PrivateKey(ssl, it->second.key.get());
    fprintf(stderr, "acme-order: tls-alpn-01: handshake for %s\n", name);
    return SSL_TLSEXT_ERR_OK;
  }
};

bool TlsAlpn01Responder::start(const std::string& address, int port, std::string* error) {
  fd_ = listen_on(address, port, error);
  if (fd_ < 0) return false;
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_alpn_select_cb(ctx, &AlpnCallbacks::select_alpn, this);
  SSL_CTX_set_tlsext_servername_callback(ctx, &AlpnCallbacks::servername);
  SSL_CTX_set_tlsext_servername_arg(ctx, this);
  ctx_ = ctx;
  thread_ = std::thread([this] { run(); });
  return true;
}

void TlsAlpn01Responder::stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  thread_.join();
  close(fd_);
  fd_ = -1;
  SSL_CTX_free(static_cast<SSL_CTX*>(ctx_));
  ctx_ = nullptr;
}

bool TlsAlpn01Responder::set(const std::string& name, const std::string& key_authorization,
                             std::string* error) {
  auto cert = acme::make_tls_alpn_certificate(name, key_authorization, error);
  if (!cert) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  certificates_[name] = std::move(*cert);
  return true;
}

void TlsAlpn01Responder::run() {
  for (;;) {
    int conn = accept_one(fd_, stopping_);
    if (conn < 0) return;
    SSL* ssl = SSL_new(static_cast<SSL_CTX*>(ctx_));
    SSL_set_fd(ssl, conn);
    // The validation ends after the handshake: the CA only looks at the certificate.
    if (SSL_accept(ssl) == 1) SSL_shutdown(ssl);
    ERR_clear_error();
    SSL_free(ssl);
    close(conn);
  }
}

}  // namespace peregrine::acme_tool
