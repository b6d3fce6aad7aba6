// The ACME order as a pure state machine (RFC 8555 §7.1, figure "Order lifecycle"): it gets each
// response (status, headers, body) and says what to do next: send a request (method, URL,
// signed body), wait (Retry-After), set up a challenge's answer, or that it is done (the PEM
// chain) or failed (the step and the CA's problem). No sockets, no clock of its own: the driver
// does the I/O (tools/acme-order's blocking runner now, the worker's HTTP client later; see
// docs/acme.md), so it is unit-tested message by message and fuzzable.
//
//   directory ─► [newNonce] ─► newAccount ─► newOrder ─► per authorization:
//     POST-as-GET authz ─► provision (driver) ─► POST challenge {} ─► poll authz until valid
//   ─► poll order until ready ─► finalize (CSR) ─► poll order until valid ─► download chain
//
// Every POST is signed with the latest Replay-Nonce; a badNonce problem resends the same request
// with the nonce that came with it (RFC 8555 §6.5), a few times at most.
#pragma once

#include <chrono>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "acme/crypto.h"
#include "acme/messages.h"

namespace peregrine::acme {

struct OrderOptions {
  std::string directory_url;
  std::vector<std::string> names;     // the order's identifiers; the first is the CSR's CN
  std::vector<std::string> contacts;  // "admin@example.com" or "mailto:..."
  bool terms_agreed = true;
  // External Account Binding (RFC 8555 §7.3.4): both or neither.
  std::string eab_kid;
  std::string eab_hmac_key;
  // The challenge types we can answer, in the order we prefer them.
  std::vector<std::string> challenge_types = {"http-01", "tls-alpn-01"};
  // Without a Retry-After, polls of one resource start after first_poll and double up to
  // default_poll: a CA that validates at once (pebble, a local one) is not waited on for seconds,
  // and a slow one is not asked more than every default_poll.
  std::chrono::milliseconds first_poll{250};
  std::chrono::milliseconds default_poll{2'000};
  std::chrono::seconds max_poll{60};  // a Retry-After longer than this is cut to it
  int max_polls = 120;                // over the whole order
  int max_nonce_retries = 5;          // badNonce resends of one request
};

enum class Step : uint8_t {
  kDirectory,
  kNonce,
  kAccount,
  kNewOrder,
  kAuthorization,
  kChallenge,
  kPollAuthorization,
  kPollOrder,
  kFinalize,
  kCertificate,
};
std::string_view step_name(Step step);  // "newAccount", "finalize"...

struct Request {
  std::string method;  // GET, HEAD or POST
  std::string url;
  std::string body;  // a flattened JWS for POST
  // Content-Type and Accept to send (empty: none).
  std::string content_type;
  std::string accept;
};

struct Response {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::optional<std::string_view> header(std::string_view name) const;  // case-insensitive
};

// What the driver must make reachable before the machine tells the CA to validate.
struct Provision {
  std::string challenge_type;  // "http-01": serve key_authorization at
                               //   http://<identifier>/.well-known/acme-challenge/<token>;
                               // "tls-alpn-01": make_tls_alpn_certificate(identifier, ...)
  std::string identifier;
  std::string token;
  std::string key_authorization;
};

struct Action {
  enum class Kind : uint8_t { kSend, kWait, kProvision, kDone, kFailed };
  Kind kind = Kind::kFailed;
  Step step = Step::kDirectory;
  Request request;                    // kSend
  std::chrono::milliseconds wait{0};  // kWait: then call on_wait_over()
  Provision provision;                // kProvision: then call on_provisioned()
  std::string chain_pem;              // kDone
  std::string error;                  // kFailed: "newOrder: rateLimited: ... (HTTP 429)"
  std::optional<Problem> problem;     // kFailed: the CA's problem document, when it sent one
  std::optional<std::chrono::seconds> retry_after;  // kFailed: when the CA said when to retry
};

class OrderMachine {
 public:
  // `account_key` and `certificate_key` must outlive the machine.
  OrderMachine(OrderOptions options, const AccountKey& account_key, EVP_PKEY* certificate_key);

  Action start();
  // `now` reads a Retry-After given as a date.
  Action on_response(const Response& response, time_t now);
  Action on_wait_over();
  Action on_provisioned();

  const std::string& account_url() const { return account_url_; }
  const std::string& order_url() const { return order_url_; }
  const std::optional<Directory>& directory() const { return directory_; }
  bool finished() const { return finished_; }

 private:
  struct Pending {
    Step step = Step::kDirectory;
    std::string url;
    std::string payload;  // POST-as-GET: empty
    bool use_jwk = false;
  };

  Action send(Pending pending);
  Action post(Step step, std::string url, std::string payload, bool use_jwk = false);
  Action poll(Step step, std::string url, const Response* response, time_t now);
  Action fail(Step step, std::string what);
  Action fail_problem(Step step, const Response& response, time_t now);
  Action next_authorization();
  Action on_order(const Order& order, const Response& response, time_t now);
  Action on_authorization(const Authorization& authz, const Response& response, time_t now);
  Action finalize(const std::string& url);

  OrderOptions options_;
  const AccountKey& account_key_;
  EVP_PKEY* certificate_key_;
  std::optional<Directory> directory_;
  std::string nonce_;
  std::string account_url_;
  std::string order_url_;
  std::string finalize_url_;
  std::vector<std::string> authorizations_;
  size_t authz_index_ = 0;
  Provision provision_;
  std::string challenge_url_;
  Pending pending_;  // what the response in flight (or the wait) is for
  int nonce_retries_ = 0;
  int polls_ = 0;
  int poll_streak_ = 0;  // polls in a row of poll_url_, for the doubling interval
  std::string poll_url_;
  bool awaiting_nonce_ = false;  // the request in flight is newNonce, for pending_
  bool finalized_ = false;
  bool waiting_ = false;       // a kWait is out: on_wait_over() is next
  bool provisioning_ = false;  // a kProvision is out: on_provisioned() is next
  bool finished_ = false;
};

}  // namespace peregrine::acme
