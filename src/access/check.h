// The per-request access checks of a site or route, in the order the issue fixes: allow/deny
// (403), then each rate limit (its status, 429 by default, with Retry-After; or a delay), before
// anything else looks at the request. RouteTable::select calls check() once it knows the route
// (or, for a 404, the site); connections call count_connection() on their first request.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "access/options.h"
#include "peregrine/request.h"
#include "peregrine/response.h"

namespace peregrine::access {

class LimitTable;

struct Decision {
  int status = 0;              // 0: go on; else 403 or the limit's status
  uint32_t retry_after_s = 0;  // with a refusal by a rate limit
  int64_t delay_ms = 0;        // allowed, but only after this long (delay mode)
};

// First matching rule wins; no rule matching (or no peer address, e.g. a unix socket) allows.
bool allowed(const std::vector<Rule>& rules, const sockaddr* peer);

// The key a limit counts the request by; empty when the request has none (no such header or
// cookie, a unix-socket peer): such requests are not limited by it, as in nginx. `buffer` holds
// the bytes of an address key.
std::string_view key_of(const Limit& limit, const Request& request, char (&buffer)[16]);

Decision check(const Options& options, const Request& request, int64_t now_us);

// The timer a delayed request waits on: delays are rounded up (10 ms steps to 100 ms, 50 ms to
// 1 s, 500 ms to 10 s, then 5 s), so a worker keeps few timer lists, each sorted by arrival.
int64_t timer_duration_ms(int64_t delay_ms);

// Retry-After on a refusal by a rate limit (0: none).
void add_retry_after(Response& response, uint32_t seconds);

// The connections a connection counts in, released when it is destroyed.
class ConnectionCount {
 public:
  ~ConnectionCount();
  void add(std::shared_ptr<LimitTable> table, uint32_t slot, uint64_t key);

 private:
  struct Entry {
    std::shared_ptr<LimitTable> table;  // keeps an old snapshot's table while counted in it
    uint32_t slot;
    uint64_t key;
  };
  std::vector<Entry> entries_;
};

// Counts the connection of `request` (its first) in each connection limit of `options`. Returns
// 0, or the status to answer (then the connection closes). `count` is created on first use.
int count_connection(const Options& options, const Request& request, int64_t now_us,
                     std::unique_ptr<ConnectionCount>* count);

}  // namespace peregrine::access
