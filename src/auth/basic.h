// HTTP basic authentication (RFC 7617) of one request against a route's htpasswd users, with a
// per-worker cache of recent successes so that a keep-alive client does not pay a bcrypt check
// (tens to hundreds of milliseconds of CPU) per request.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "auth/htpasswd.h"
#include "core/clock.h"
#include "peregrine/request.h"

namespace peregrine::auth {

// "Basic <base64 of user:password>" → user and password (views into `storage`). False for any
// other scheme, bad base64, no colon, or credentials longer than `kMaxCredentials`.
inline constexpr size_t kMaxCredentials = 1024;
bool parse_basic(std::string_view header, std::string& storage, std::string_view* user,
                 std::string_view* password);

class BasicAuth {
 public:
  // Successes are remembered this long...
  static constexpr int64_t kCacheMs = 30'000;
  // ...for at most this many distinct credentials per worker; when full, the cache starts over.
  static constexpr size_t kCacheEntries = 1024;

  explicit BasicAuth(const Clock& clock) : clock_(clock) {}

  // The authenticated user's name (a view into `users`, which lives as long as the
  // configuration) or empty when the request has no valid credentials for these users.
  std::string_view check(const Htpasswd& users, const Request& request);

  size_t cached() const { return cache_.size(); }
  uint64_t verifications() const { return verifications_; }

 private:
  struct Cached {
    const Htpasswd* users;
    std::string header;  // the Authorization value, compared in full (the key is its hash)
    const std::string* user;
    int64_t expires_ms;
  };
  const Clock& clock_;
  std::unordered_map<size_t, Cached> cache_;
  std::string scratch_;
  uint64_t verifications_ = 0;
};

}  // namespace peregrine::auth
