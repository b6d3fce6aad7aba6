#include "http/conditional.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "support/random_inputs.h"

namespace peregrine::http {
namespace {

using peregrine::testing::for_random_inputs;

constexpr time_t kMtime = 784111777;  // Sun, 06 Nov 1994 08:49:37 GMT
constexpr const char* kDate = "Sun, 06 Nov 1994 08:49:37 GMT";
constexpr const char* kEarlier = "Sun, 06 Nov 1994 08:49:36 GMT";
constexpr const char* kLater = "Sun, 06 Nov 1994 08:49:38 GMT";

const Validators kStrong{"\"5f-1a2b\"", kMtime};
const Validators kWeak{"W/\"5f-1a2b\"", kMtime};
const Validators kNoEtag{"", kMtime};

Precondition eval(const ConditionalHeaders& h, const Validators& v = kStrong, bool get = true) {
  return evaluate_preconditions(h, v, get);
}

ConditionalHeaders im(std::string_view v) {
  return {.if_match = v};
}
ConditionalHeaders inm(std::string_view v) {
  return {.if_none_match = v};
}
ConditionalHeaders ims(std::string_view v) {
  return {.if_modified_since = v};
}
ConditionalHeaders ius(std::string_view v) {
  return {.if_unmodified_since = v};
}

TEST(Preconditions, NoHeadersProceed) {
  EXPECT_EQ(eval({}), Precondition::kProceed);
  EXPECT_EQ(eval({}, kStrong, false), Precondition::kProceed);
}

// ---- If-Match (strong comparison) ----

TEST(IfMatch, StrongMatchProceeds) {
  EXPECT_EQ(eval(im("\"5f-1a2b\"")), Precondition::kProceed);
  EXPECT_EQ(eval(im("\"x\", \"5f-1a2b\"")), Precondition::kProceed);
  EXPECT_EQ(eval(im(" \"x\" ,\t\"5f-1a2b\" ")), Precondition::kProceed);
  EXPECT_EQ(eval(im("\"5f-1a2b\""), kStrong, false), Precondition::kProceed);
}

TEST(IfMatch, MismatchFails) {
  EXPECT_EQ(eval(im("\"other\"")), Precondition::kFailed);
  EXPECT_EQ(eval(im("\"5f-1a2B\"")), Precondition::kFailed);
  EXPECT_EQ(eval(im("\"5f-1a2b\""), kStrong, false), Precondition::kProceed);
  EXPECT_EQ(eval(im("\"other\""), kStrong, false), Precondition::kFailed);
}

TEST(IfMatch, WeakTagsNeverMatch) {
  EXPECT_EQ(eval(im("W/\"5f-1a2b\"")), Precondition::kFailed);
  EXPECT_EQ(eval(im("\"5f-1a2b\""), kWeak), Precondition::kFailed);
  EXPECT_EQ(eval(im("W/\"5f-1a2b\""), kWeak), Precondition::kFailed);
}

TEST(IfMatch, StarMatchesAnyExistingRepresentation) {
  EXPECT_EQ(eval(im("*")), Precondition::kProceed);
  EXPECT_EQ(eval(im(" * ")), Precondition::kProceed);
  EXPECT_EQ(eval(im("*"), kWeak), Precondition::kProceed);
  EXPECT_EQ(eval(im("*"), kNoEtag), Precondition::kProceed);
}

TEST(IfMatch, NoEtagOrMalformedFails) {
  EXPECT_EQ(eval(im("\"5f-1a2b\""), kNoEtag), Precondition::kFailed);
  EXPECT_EQ(eval(im("")), Precondition::kFailed);
  EXPECT_EQ(eval(im("5f-1a2b")), Precondition::kFailed);
  EXPECT_EQ(eval(im("\"5f-1a2b")), Precondition::kFailed);
  EXPECT_EQ(eval(im("junk, \"5f-1a2b\"")), Precondition::kFailed);  // a bad member ends the list
  EXPECT_EQ(eval(im("\"5f-1a2b\" junk")), Precondition::kFailed);
}

TEST(IfMatch, TakesPrecedenceOverIfUnmodifiedSince) {
  // If-Match passes: a failing If-Unmodified-Since is not consulted.
  EXPECT_EQ(eval({.if_match = "\"5f-1a2b\"", .if_unmodified_since = kEarlier}),
            Precondition::kProceed);
  // If-Match fails: a passing If-Unmodified-Since does not rescue it.
  EXPECT_EQ(eval({.if_match = "\"nope\"", .if_unmodified_since = kLater}), Precondition::kFailed);
}

// ---- If-Unmodified-Since ----

TEST(IfUnmodifiedSince, Evaluates) {
  EXPECT_EQ(eval(ius(kDate)), Precondition::kProceed);
  EXPECT_EQ(eval(ius(kLater)), Precondition::kProceed);
  EXPECT_EQ(eval(ius(kEarlier)), Precondition::kFailed);
  EXPECT_EQ(eval(ius(kEarlier), kStrong, false), Precondition::kFailed);
}

TEST(IfUnmodifiedSince, InvalidDateIsIgnored) {
  EXPECT_EQ(eval(ius("yesterday")), Precondition::kProceed);
  EXPECT_EQ(eval(ius(std::string(kEarlier) + ", " + kEarlier)), Precondition::kProceed);
}

// ---- If-None-Match (weak comparison) ----

TEST(IfNoneMatch, MatchIsNotModifiedForGetHead) {
  EXPECT_EQ(eval(inm("\"5f-1a2b\"")), Precondition::kNotModified);
  EXPECT_EQ(eval(inm("W/\"5f-1a2b\"")), Precondition::kNotModified);
  EXPECT_EQ(eval(inm("\"5f-1a2b\""), kWeak), Precondition::kNotModified);
  EXPECT_EQ(eval(inm("W/\"5f-1a2b\""), kWeak), Precondition::kNotModified);
  EXPECT_EQ(eval(inm("\"a\", W/\"b\", \"5f-1a2b\"")), Precondition::kNotModified);
  EXPECT_EQ(eval(inm("\"a\",\"5f-1a2b\"")), Precondition::kNotModified);
}

TEST(IfNoneMatch, MatchFailsForOtherMethods) {
  EXPECT_EQ(eval(inm("\"5f-1a2b\""), kStrong, false), Precondition::kFailed);
  EXPECT_EQ(eval(inm("*"), kStrong, false), Precondition::kFailed);
}

TEST(IfNoneMatch, StarMatchesExisting) {
  EXPECT_EQ(eval(inm("*")), Precondition::kNotModified);
  EXPECT_EQ(eval(inm("*"), kNoEtag), Precondition::kNotModified);
}

TEST(IfNoneMatch, NoMatchProceeds) {
  EXPECT_EQ(eval(inm("\"other\"")), Precondition::kProceed);
  EXPECT_EQ(eval(inm("\"5f-1a2b\""), kNoEtag), Precondition::kProceed);
  EXPECT_EQ(eval(inm("\"5F-1A2B\"")), Precondition::kProceed);
  EXPECT_EQ(eval(inm("5f-1a2b")), Precondition::kProceed);
  EXPECT_EQ(eval(inm("")), Precondition::kProceed);
  EXPECT_EQ(eval(inm("\"other\""), kStrong, false), Precondition::kProceed);
}

TEST(IfNoneMatch, TakesPrecedenceOverIfModifiedSince) {
  // Tag does not match: If-Modified-Since (which would say 304) is ignored.
  EXPECT_EQ(eval({.if_none_match = "\"other\"", .if_modified_since = kLater}),
            Precondition::kProceed);
  // Tag matches: 304 even though If-Modified-Since says modified.
  EXPECT_EQ(eval({.if_none_match = "\"5f-1a2b\"", .if_modified_since = kEarlier}),
            Precondition::kNotModified);
}

// ---- If-Modified-Since ----

TEST(IfModifiedSince, Evaluates) {
  EXPECT_EQ(eval(ims(kDate)), Precondition::kNotModified);
  EXPECT_EQ(eval(ims(kLater)), Precondition::kNotModified);
  EXPECT_EQ(eval(ims(kEarlier)), Precondition::kProceed);
  EXPECT_EQ(eval(ims("Sunday, 06-Nov-94 08:49:37 GMT")), Precondition::kNotModified);
  EXPECT_EQ(eval(ims("Sun Nov  6 08:49:37 1994")), Precondition::kNotModified);
}

TEST(IfModifiedSince, OnlyForGetAndHead) {
  EXPECT_EQ(eval(ims(kDate), kStrong, false), Precondition::kProceed);
}

TEST(IfModifiedSince, InvalidDateIsIgnored) {
  EXPECT_EQ(eval(ims("not a date")), Precondition::kProceed);
  EXPECT_EQ(eval(ims("")), Precondition::kProceed);
  EXPECT_EQ(eval(ims(std::string(kDate) + "; length=100")), Precondition::kProceed);
}

// ---- Evaluation order across steps ----

TEST(EvaluationOrder, FailedIfMatchWinsOverNotModified) {
  EXPECT_EQ(eval({.if_match = "\"nope\"", .if_none_match = "\"5f-1a2b\""}), Precondition::kFailed);
  EXPECT_EQ(eval({.if_match = "\"nope\"", .if_modified_since = kDate}), Precondition::kFailed);
}

TEST(EvaluationOrder, FailedIfUnmodifiedSinceWinsOverNotModified) {
  EXPECT_EQ(eval({.if_modified_since = kDate, .if_unmodified_since = kEarlier}),
            Precondition::kFailed);
}

TEST(EvaluationOrder, PassingStep1ThenIfNoneMatch) {
  EXPECT_EQ(eval({.if_match = "\"5f-1a2b\"", .if_none_match = "\"5f-1a2b\""}),
            Precondition::kNotModified);
  EXPECT_EQ(eval({.if_match = "*", .if_none_match = "*"}, kStrong, false), Precondition::kFailed);
  EXPECT_EQ(eval({.if_match = "*", .if_none_match = "\"x\""}, kStrong, false),
            Precondition::kProceed);
}

TEST(EvaluationOrder, AllFourPresent) {
  ConditionalHeaders h{.if_match = "\"5f-1a2b\"",
                       .if_none_match = "\"x\"",
                       .if_modified_since = kLater,
                       .if_unmodified_since = kEarlier};
  EXPECT_EQ(eval(h), Precondition::kProceed);
  h.if_none_match.reset();
  EXPECT_EQ(eval(h), Precondition::kNotModified);
  h.if_match.reset();
  EXPECT_EQ(eval(h), Precondition::kFailed);
}

// ---- If-Range ----

TEST(IfRange, StrongEtag) {
  EXPECT_TRUE(if_range_matches("\"5f-1a2b\"", kStrong));
  EXPECT_TRUE(if_range_matches(" \"5f-1a2b\" ", kStrong));
  EXPECT_FALSE(if_range_matches("\"other\"", kStrong));
  EXPECT_FALSE(if_range_matches("\"5f-1a2b\"", kNoEtag));
  EXPECT_FALSE(if_range_matches("\"5f-1a2b\", \"x\"", kStrong));
  EXPECT_FALSE(if_range_matches("\"5f-1a2b", kStrong));
}

TEST(IfRange, WeakEtagsNeverMatch) {
  EXPECT_FALSE(if_range_matches("W/\"5f-1a2b\"", kStrong));
  EXPECT_FALSE(if_range_matches("\"5f-1a2b\"", kWeak));
  EXPECT_FALSE(if_range_matches("W/\"5f-1a2b\"", kWeak));
}

TEST(IfRange, DateMustEqualExactly) {
  EXPECT_TRUE(if_range_matches(kDate, kStrong));
  EXPECT_TRUE(if_range_matches("Sun Nov  6 08:49:37 1994", kStrong));
  EXPECT_FALSE(if_range_matches(kLater, kStrong));
  EXPECT_FALSE(if_range_matches(kEarlier, kStrong));
  EXPECT_FALSE(if_range_matches("garbage", kStrong));
  EXPECT_FALSE(if_range_matches("", kStrong));
}

// ---- ETag formatting ----

TEST(FormatEtag, Formats) {
  char buf[kEtagMaxLength];
  size_t n = format_etag(0x5f3e1c2a, 1234, buf, sizeof(buf));
  EXPECT_EQ(std::string_view(buf, n), "\"5f3e1c2a-4d2\"");
  n = format_etag(0, 0, buf, sizeof(buf));
  EXPECT_EQ(std::string_view(buf, n), "\"0-0\"");
  n = format_etag(~uint64_t{0}, ~uint64_t{0}, buf, sizeof(buf));
  EXPECT_EQ(std::string_view(buf, n), "\"ffffffffffffffff-ffffffffffffffff\"");
  EXPECT_EQ(n, kEtagMaxLength);
}

TEST(FormatEtag, TooSmallBuffer) {
  char buf[5];
  EXPECT_EQ(format_etag(0x5f3e1c2a, 1234, buf, sizeof(buf)), 0u);
  char exact[14];
  EXPECT_EQ(format_etag(0x5f3e1c2a, 1234, exact, sizeof(exact)), 14u);
}

TEST(FormatEtag, RoundTripsThroughPreconditions) {
  char buf[kEtagMaxLength];
  const size_t n = format_etag(1700000000, 4096, buf, sizeof(buf));
  const Validators v{std::string_view(buf, n), 1700000000};
  EXPECT_EQ(eval(inm(std::string_view(buf, n)), v), Precondition::kNotModified);
  EXPECT_EQ(eval(im(std::string_view(buf, n)), v), Precondition::kProceed);
  EXPECT_TRUE(if_range_matches(std::string_view(buf, n), v));
}

TEST(Preconditions, RandomInputsAreSafe) {
  for_random_inputs("W/\"*, 5f-1a2b\t", 24, 100000, [](std::string_view s) {
    (void)eval(im(s));
    (void)eval(inm(s));
    (void)eval({.if_match = s, .if_none_match = s}, kWeak, false);
    (void)if_range_matches(s, kStrong);
    (void)if_range_matches(s, kNoEtag);
  });
}

}  // namespace
}  // namespace peregrine::http
