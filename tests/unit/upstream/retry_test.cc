// The shared retry policy (src/upstream/retry.h), as one table: method x failure kind x what the
// client already got -> retried, or answered with which status. Every upstream protocol follows
// this table through upstream::UpstreamExchange::fail().
#include "upstream/retry.h"

#include <gtest/gtest.h>

#include <string>

namespace peregrine::upstream {
namespace {

constexpr int kRetry = 0;  // in the table: the request goes to the next server

struct Row {
  Method method;
  Failure failure;
  bool request_sent;
  bool client_saw_bytes;
  int expected;  // kRetry, or the status answered
};

std::string describe(const Row& row) {
  static const char* const kMethods[] = {"GET",     "HEAD",  "POST",  "PUT",     "DELETE",
                                         "OPTIONS", "PATCH", "TRACE", "CONNECT", "unknown"};
  return std::string(kMethods[static_cast<int>(row.method)]) + " " + to_string(row.failure) +
         (row.request_sent ? ", request sent" : ", nothing sent") +
         (row.client_saw_bytes ? ", client saw bytes" : ", client saw nothing");
}

Verdict run(const Row& row, uint32_t tries = 1, uint32_t max_tries = 3) {
  Attempt a;
  a.method = row.method;
  a.failure = row.failure;
  a.request_sent = row.request_sent;
  a.replayable = true;
  a.client_saw_bytes = row.client_saw_bytes;
  a.tries = tries;
  a.max_tries = max_tries;
  return decide(a);
}

TEST(RetryPolicyTest, Table) {
  using F = Failure;
  const Method G = Method::kGet, P = Method::kPost;
  const Row rows[] = {
      // A refused or timed-out connect sent nothing: any method goes to the next server.
      {G, F::kRefused, false, false, kRetry},
      {P, F::kRefused, false, false, kRetry},
      {Method::kPatch, F::kRefused, false, false, kRetry},
      {G, F::kConnectTimeout, false, false, kRetry},
      {P, F::kConnectTimeout, false, false, kRetry},
      // Even when the caller believes bytes went out: a connect failure cannot have sent any.
      {P, F::kRefused, true, false, kRetry},
      // Reset (the connection broke or closed before the response was complete).
      {G, F::kReset, true, false, kRetry},
      {Method::kHead, F::kReset, true, false, kRetry},
      {P, F::kReset, true, false, 502},  // the back end may have acted on it
      {P, F::kReset, false, false, kRetry},
      {G, F::kReset, true, true, 502},  // the client has part of the answer
      // Timeout before the head (send_timeout or read_timeout).
      {G, F::kTimeout, true, false, kRetry},
      {Method::kPut, F::kTimeout, true, false, kRetry},
      {Method::kDelete, F::kTimeout, true, false, kRetry},
      {P, F::kTimeout, true, false, 504},
      {Method::kPatch, F::kTimeout, true, false, 504},
      // Timeout in the body: retried while the client has seen nothing (a buffered response).
      {G, F::kTimeoutInBody, true, false, kRetry},
      {G, F::kTimeoutInBody, true, true, 504},
      {P, F::kTimeoutInBody, true, false, 504},
      // A malformed head is an error like any other.
      {G, F::kMalformed, true, false, kRetry},
      {Method::kOptions, F::kMalformed, true, false, kRetry},
      {Method::kTrace, F::kMalformed, true, false, kRetry},
      {P, F::kMalformed, true, false, 502},
      {G, F::kMalformed, true, true, 502},
      // Methods outside RFC 9110's idempotent set.
      {Method::kConnect, F::kReset, true, false, 502},
      {Method::kUnknown, F::kTimeout, true, false, 504},
      // Once the client saw bytes, nothing is retried, whatever the method or failure.
      {G, F::kRefused, false, true, 502},
      {Method::kHead, F::kTimeout, true, true, 504},
  };
  for (const Row& row : rows) {
    Verdict v = run(row);
    if (row.expected == kRetry) {
      EXPECT_TRUE(v.retry) << describe(row);
    } else {
      EXPECT_FALSE(v.retry) << describe(row);
      EXPECT_EQ(v.status, row.expected) << describe(row);
    }
  }
}

TEST(RetryPolicyTest, StatusFollowsTheFailure) {
  EXPECT_EQ(status_for(Failure::kRefused), 502);
  EXPECT_EQ(status_for(Failure::kReset), 502);
  EXPECT_EQ(status_for(Failure::kMalformed), 502);
  EXPECT_EQ(status_for(Failure::kConnectTimeout), 504);
  EXPECT_EQ(status_for(Failure::kTimeout), 504);
  EXPECT_EQ(status_for(Failure::kTimeoutInBody), 504);
}

TEST(RetryPolicyTest, IdempotentMethodsAreRfc9110s) {
  for (Method m : {Method::kGet, Method::kHead, Method::kPut, Method::kDelete, Method::kOptions,
                   Method::kTrace})
    EXPECT_TRUE(is_idempotent(m));
  for (Method m : {Method::kPost, Method::kPatch, Method::kConnect, Method::kUnknown})
    EXPECT_FALSE(is_idempotent(m));
}

TEST(RetryPolicyTest, TriesBoundTheRetries) {
  const Row get_reset{Method::kGet, Failure::kReset, true, false, kRetry};
  EXPECT_TRUE(run(get_reset, 1, 3).retry);
  EXPECT_TRUE(run(get_reset, 2, 3).retry);
  EXPECT_FALSE(run(get_reset, 3, 3).retry);
  EXPECT_EQ(run(get_reset, 3, 3).status, 502);
  EXPECT_FALSE(run(get_reset, 1, 1).retry);
  EXPECT_FALSE(run(get_reset, 1, 0).retry);  // 0 counts as one try
}

TEST(RetryPolicyTest, TryTimeoutBoundsTheRetries) {
  Attempt a;
  a.method = Method::kGet;
  a.failure = Failure::kTimeout;
  a.request_sent = true;
  a.max_tries = 3;
  a.try_timeout_ms = 1000;
  a.elapsed_ms = 999;
  EXPECT_TRUE(decide(a).retry);
  a.elapsed_ms = 1000;
  EXPECT_FALSE(decide(a).retry);
  EXPECT_EQ(decide(a).status, 504);
  a.try_timeout_ms = 0;  // no limit
  a.elapsed_ms = 1'000'000;
  EXPECT_TRUE(decide(a).retry);
}

TEST(RetryPolicyTest, AForgottenRequestIsNotSentAgain) {
  Attempt a;
  a.method = Method::kPut;
  a.failure = Failure::kReset;
  a.max_tries = 3;
  a.replayable = false;  // a long body, streamed and dropped
  a.request_sent = true;
  EXPECT_FALSE(decide(a).retry);
  a.request_sent = false;  // but nothing of it went out: the buffer still has it all
  EXPECT_TRUE(decide(a).retry);
  a.failure = Failure::kRefused;
  EXPECT_TRUE(decide(a).retry);
}

}  // namespace
}  // namespace peregrine::upstream
