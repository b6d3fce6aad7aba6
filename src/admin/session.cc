#include "admin/session.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/random.h>
#include <time.h>

#include <cctype>

#include "admin/config.h"
#include "core/strings.h"

namespace peregrine::admin {

namespace {

bool is_ipv4_literal(std::string_view host) {
  int dots = 0;
  for (char c : host) {
    if (c == '.')
      ++dots;
    else if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  }
  return dots == 3;
}

std::string digest(std::string_view id) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(id.data(), id.size(), out, &length, EVP_sha256(), nullptr) != 1) return {};
  return std::string(reinterpret_cast<const char*>(out), length);
}

}  // namespace

int64_t monotonic_seconds() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec;
}

std::string SessionTable::create(int64_t now) {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return {};
    }
    got += static_cast<size_t>(n);
  }
  std::string id = hex_digits(bytes, sizeof bytes);
  std::string key = digest(id);
  if (key.empty()) return {};
  std::lock_guard lock(mutex_);
  std::erase_if(expiry_, [now](const auto& entry) { return entry.second <= now; });
  if (expiry_.size() >= kCapacity) {
    auto oldest = expiry_.begin();
    for (auto it = expiry_.begin(); it != expiry_.end(); ++it)
      if (it->second < oldest->second) oldest = it;
    expiry_.erase(oldest);
  }
  expiry_[std::move(key)] = now + kLifetimeSeconds;
  return id;
}

bool SessionTable::valid(std::string_view id, int64_t now) {
  if (id.size() != 64) return false;
  std::string key = digest(id);
  std::lock_guard lock(mutex_);
  auto it = expiry_.find(key);
  if (it == expiry_.end()) return false;
  if (it->second <= now) {
    expiry_.erase(it);
    return false;
  }
  return true;
}

void SessionTable::remove(std::string_view id) {
  std::string key = digest(id);
  std::lock_guard lock(mutex_);
  expiry_.erase(key);
}

size_t SessionTable::size() {
  std::lock_guard lock(mutex_);
  return expiry_.size();
}

int64_t LoginLimiter::retry_after(const std::string& client, int64_t now) {
  std::lock_guard lock(mutex_);
  auto it = windows_.find(client);
  if (it == windows_.end()) return 0;
  const int64_t end = it->second.start + kWindowSeconds;
  if (end <= now) {
    windows_.erase(it);
    return 0;
  }
  return it->second.failures >= kMaxFailures ? end - now : 0;
}

void LoginLimiter::failed(const std::string& client, int64_t now) {
  std::lock_guard lock(mutex_);
  if (windows_.size() >= kCapacity && !windows_.contains(client)) {
    std::erase_if(windows_,
                  [now](const auto& entry) { return entry.second.start + kWindowSeconds <= now; });
    // Still full: many addresses are failing at once. Forgetting one of them weakens the limit
    // for it alone; refusing to count would weaken it for all.
    if (windows_.size() >= kCapacity) windows_.erase(windows_.begin());
  }
  Window& w = windows_[client];
  if (w.failures == 0 || w.start + kWindowSeconds <= now) w = Window{now, 0};
  ++w.failures;
}

void LoginLimiter::succeeded(const std::string& client) {
  std::lock_guard lock(mutex_);
  windows_.erase(client);
}

SessionTable& sessions() {
  static SessionTable table;
  return table;
}

LoginLimiter& login_limiter() {
  static LoginLimiter limiter;
  return limiter;
}

std::string_view cookie_value(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    size_t end = header.find(';');
    std::string_view pair = header.substr(0, end);
    header = end == std::string_view::npos ? std::string_view() : header.substr(end + 1);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos || pair.substr(0, eq) != name) continue;
    std::string_view value = pair.substr(eq + 1);
    while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
    return value;
  }
  return {};
}

std::string own_origin(const Request& request) {
  std::string origin = request.secure ? "https://" : "http://";
  origin += request.host;
  return origin;
}

bool host_allowed(std::string_view host, const std::vector<std::string>& names) {
  if (host.empty()) return true;
  if (host.front() == '[') return host.find(']') != std::string_view::npos;  // an IPv6 literal
  if (size_t colon = host.rfind(':'); colon != std::string_view::npos) host = host.substr(0, colon);
  if (host.ends_with('.')) host.remove_suffix(1);
  if (is_ipv4_literal(host) || ascii_iequals(host, "localhost")) return true;
  for (const std::string& name : names)
    if (ascii_iequals(host, name)) return true;
  return false;
}

bool bearer_matches(std::string_view authorization, std::string_view token) {
  constexpr std::string_view kScheme = "bearer ";
  if (token.empty() || authorization.size() < kScheme.size() ||
      !ascii_iequals(authorization.substr(0, kScheme.size()), kScheme))
    return false;
  std::string_view given = authorization.substr(kScheme.size());
  while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
  while (!given.empty() && given.back() == ' ') given.remove_suffix(1);
  // The length is no secret worth hiding (the token file's length is up to the operator); the
  // bytes are compared in constant time.
  if (given.size() != token.size()) return false;
  return CRYPTO_memcmp(given.data(), token.data(), token.size()) == 0;
}

Access authorize(const Request& request, const Options& options) {
  if (!host_allowed(request.host, options.hosts))
    return {403, "Host not allowed (add it to [admin] hosts if the admin is reached by that name)"};
  Access access;
  if (options.auth == Auth::kLogin) {
    std::optional<std::string_view> authorization = request.header("Authorization");
    std::optional<std::string_view> cookie = request.header("Cookie");
    std::string_view session = cookie ? cookie_value(*cookie, kSessionCookie) : std::string_view();
    if (authorization) {
      if (!bearer_matches(*authorization, options.token)) return {401, "wrong credentials"};
    } else if (!session.empty()) {
      if (!sessions().valid(session, monotonic_seconds()))
        return {401, "session expired or unknown: log in again"};
      access.by_cookie = true;
    } else {
      return {401, "credentials required: Authorization: Bearer TOKEN, or POST /api/login"};
    }
  }
  if (request.method != Method::kGet && request.method != Method::kHead) {
    std::optional<std::string_view> origin = request.header("Origin");
    if (origin ? !ascii_iequals(*origin, own_origin(request)) : access.by_cookie)
      return {403, origin ? "cross-origin request refused (Origin is not this admin's)"
                          : "a state change by session cookie needs an Origin header"};
  }
  return access;
}

}  // namespace peregrine::admin
