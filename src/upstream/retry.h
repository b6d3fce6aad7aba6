// The one retry policy of every upstream protocol (FastCGI, the proxy, and any later one): after
// a failed attempt, is the request sent to another server, or answered, and with which status?
// Pure: no sockets, no clock, no group. upstream::UpstreamExchange (exchange.h) fills an Attempt
// and follows the Verdict; tests/unit/upstream/retry_test.cc checks the whole table.
//
// The rules (docs/configuration.md, `tries` and `try_timeout`):
//  - Nothing of the response may have reached the client: once a byte went out, the response
//    cannot be replaced, whatever the method.
//  - The whole request must still be at hand (the replay buffer, exchange.h) unless none of it
//    was sent.
//  - A request none of whose bytes reached a back end (a refused or timed-out connect) may go to
//    the next server whatever its method; one that may have reached it only when its method is
//    idempotent (RFC 9110, section 9.2.2), since the back end may have acted on it.
//  - At most `tries` servers, within `try_timeout` of the first attempt (0: no limit).
// A status is chosen even when the client already saw bytes: the caller then closes the
// connection (Downstream::fail), and the status only reaches the access log.
#pragma once

#include <cstdint>

#include "peregrine/request.h"

namespace peregrine::upstream {

// RFC 9110, section 9.2.2: GET, HEAD, PUT, DELETE, OPTIONS, TRACE.
bool is_idempotent(Method method);

// How an attempt failed.
enum class Failure : uint8_t {
  kRefused,         // the connection could not be opened (refused, unreachable, no socket)
  kConnectTimeout,  // the connect did not complete within connect_timeout
  kReset,           // the connection broke or closed (reset, EOF), or the back end rejected it
  kTimeout,         // send_timeout or read_timeout before the response head was complete
  kTimeoutInBody,   // read_timeout after the head, before the end of the response
  kMalformed,       // the response (its head, records or framing) is invalid
};

const char* to_string(Failure failure);

// 504 for a timeout, 502 for everything else.
int status_for(Failure failure);

// True when the request cannot have reached the back end.
inline bool before_request(Failure failure) {
  return failure == Failure::kRefused || failure == Failure::kConnectTimeout;
}

struct Attempt {
  Method method = Method::kGet;
  Failure failure = Failure::kReset;
  bool request_sent = false;      // some request byte was written to the back end on this try
  bool replayable = true;         // every request byte is still at hand to send again
  bool client_saw_bytes = false;  // some response byte was sent (or queued) to the client
  uint32_t tries = 1;             // servers tried so far, this one included
  uint32_t max_tries = 1;         // the group's `tries` (0 counts as 1)
  int64_t elapsed_ms = 0;         // since the first attempt started
  int64_t try_timeout_ms = 0;     // the group's `try_timeout`; 0 = no limit
};

struct Verdict {
  bool retry = false;  // ask the group for another server
  int status = 502;    // otherwise the answer (502 or 504)
};

Verdict decide(const Attempt& attempt);

}  // namespace peregrine::upstream
