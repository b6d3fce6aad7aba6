#include "upstream/retry.h"

namespace peregrine::upstream {

bool is_idempotent(Method method) {
  switch (method) {
    case Method::kGet:
    case Method::kHead:
    case Method::kPut:
    case Method::kDelete:
    case Method::kOptions:
    case Method::kTrace:
      return true;
    case Method::kPost:
    case Method::kPatch:
    case Method::kConnect:
    case Method::kUnknown:
      break;
  }
  return false;
}

const char* to_string(Failure failure) {
  switch (failure) {
    case Failure::kRefused:
      return "connect failed";
    case Failure::kConnectTimeout:
      return "connect timed out";
    case Failure::kReset:
      return "connection broken";
    case Failure::kTimeout:
      return "timed out before the response head";
    case Failure::kTimeoutInBody:
      return "timed out in the response body";
    case Failure::kMalformed:
      return "malformed response";
  }
  return "failed";
}

int status_for(Failure failure) {
  switch (failure) {
    case Failure::kConnectTimeout:
    case Failure::kTimeout:
    case Failure::kTimeoutInBody:
      return 504;
    case Failure::kRefused:
    case Failure::kReset:
    case Failure::kMalformed:
      break;
  }
  return 502;
}

Verdict decide(const Attempt& a) {
  Verdict v;
  v.status = status_for(a.failure);
  const bool sent = a.request_sent && !before_request(a.failure);
  const uint32_t max_tries = a.max_tries == 0 ? 1 : a.max_tries;
  v.retry = !a.client_saw_bytes && (a.replayable || !sent) && (!sent || is_idempotent(a.method)) &&
            a.tries < max_tries && (a.try_timeout_ms <= 0 || a.elapsed_ms < a.try_timeout_ms);
  return v;
}

}  // namespace peregrine::upstream
