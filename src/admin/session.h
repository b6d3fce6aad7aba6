// Who may use the admin API: the one check every endpoint goes through (authorize), the login
// sessions behind the `peregrine_admin` cookie, and the per-address limit on login attempts.
//
// Sessions and the limiter are process-wide (a login on one worker's connection is valid on
// another's) and guarded by a mutex each. Only admin requests take them, never a site's.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "admin/options.h"
#include "peregrine/request.h"

namespace peregrine::admin {

inline constexpr std::string_view kSessionCookie = "peregrine_admin";

// Session ids (32 bytes from getrandom, as 64 hex digits) with their expiry. The table keeps a
// SHA-256 of each id, not the id: a lookup's timing then tells nothing about a valid id.
class SessionTable {
 public:
  static constexpr int64_t kLifetimeSeconds = 12 * 3600;
  static constexpr size_t kCapacity = 1024;

  // A new session valid until now + kLifetimeSeconds; "" when the random source fails. When
  // the table is full the session closest to expiry makes room.
  std::string create(int64_t now);
  bool valid(std::string_view id, int64_t now);
  void remove(std::string_view id);
  size_t size();

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, int64_t> expiry_;  // SHA-256 of the id -> expiry
};

// At most kMaxFailures failed logins per client address within kWindowSeconds; then every
// attempt is refused (429) until the window ends, without looking at the password.
class LoginLimiter {
 public:
  static constexpr int kMaxFailures = 5;
  static constexpr int64_t kWindowSeconds = 60;
  static constexpr size_t kCapacity = 4096;

  // Seconds until `client` may try again; 0 when it may now.
  int64_t retry_after(const std::string& client, int64_t now);
  void failed(const std::string& client, int64_t now);
  void succeeded(const std::string& client);

 private:
  struct Window {
    int64_t start = 0;
    int failures = 0;
  };
  std::mutex mutex_;
  std::unordered_map<std::string, Window> windows_;
};

SessionTable& sessions();
LoginLimiter& login_limiter();
int64_t monotonic_seconds();

// The value of cookie `name` in a Cookie header ("a=1; b=2"), or "".
std::string_view cookie_value(std::string_view header, std::string_view name);

// "http://HOST" or "https://HOST": the origin a browser names in Origin for this admin.
std::string own_origin(const Request& request);

// The outcome of authorize(): status 0 lets the request through; otherwise answer `status`
// with `why` (401 also gets WWW-Authenticate).
struct Access {
  int status = 0;
  const char* why = "";
  bool by_cookie = false;
};

// Every admin endpoint except the public ones (GET /, GET /ui.*, POST /api/login) asks this
// first: the Host (DNS rebinding), then the credentials (Bearer token or session cookie; none
// with auth = "none"), then, for a state change (any method but GET/HEAD), the Origin: a
// cookie-authenticated one must carry our own origin, and any that carries an Origin must name
// ours (a cross-site page can make a browser POST to a loopback admin with auth = "none").
Access authorize(const Request& request, const Options& options);

bool host_allowed(std::string_view host, const std::vector<std::string>& names);
bool bearer_matches(std::string_view authorization, std::string_view token);

}  // namespace peregrine::admin
