#include "compress/decision.h"

#include <gtest/gtest.h>

#include <string_view>

namespace peregrine::compress {
namespace {

Coding pick(std::string_view accept, const Options& options = Options{}) {
  return negotiate(&accept, options);
}

TEST(CompressNegotiate, NoHeaderOrEmptyMeansIdentity) {
  EXPECT_EQ(negotiate(nullptr, Options{}), Coding::kIdentity);
  EXPECT_EQ(pick(""), Coding::kIdentity);
  EXPECT_EQ(pick("identity"), Coding::kIdentity);
  EXPECT_EQ(pick("deflate, compress"), Coding::kIdentity);
}

TEST(CompressNegotiate, EqualWeightsFollowTheServersOrder) {
  EXPECT_EQ(pick("gzip, deflate, br, zstd"), Coding::kBrotli);
  EXPECT_EQ(pick("gzip, zstd"), Coding::kZstd);
  EXPECT_EQ(pick("gzip"), Coding::kGzip);
  Options gzip_first;
  gzip_first.order = {Coding::kGzip, Coding::kBrotli};
  EXPECT_EQ(pick("gzip, br, zstd", gzip_first), Coding::kGzip);
  EXPECT_EQ(pick("zstd", gzip_first), Coding::kIdentity);  // zstd not offered
}

TEST(CompressNegotiate, HigherWeightWins) {
  EXPECT_EQ(pick("br;q=0.5, gzip"), Coding::kGzip);
  EXPECT_EQ(pick("br;q=0.5, gzip;q=0.4"), Coding::kBrotli);
  EXPECT_EQ(pick("br;q=0, gzip;q=0.001"), Coding::kGzip);
  EXPECT_EQ(pick("br;q=0, gzip;q=0"), Coding::kIdentity);
  EXPECT_EQ(pick("GZIP;Q=1.0"), Coding::kGzip);
  EXPECT_EQ(pick("x-gzip"), Coding::kGzip);
}

TEST(CompressNegotiate, StarCoversUnlistedCodings) {
  EXPECT_EQ(pick("*"), Coding::kBrotli);
  EXPECT_EQ(pick("br;q=0, *"), Coding::kZstd);
  EXPECT_EQ(pick("br;q=0, zstd;q=0, *;q=0.3"), Coding::kGzip);
  EXPECT_EQ(pick("*;q=0"), Coding::kIdentity);
  EXPECT_EQ(pick("gzip;q=0.2, *;q=0.5"), Coding::kBrotli);
}

TEST(CompressNegotiate, IdentityWeights) {
  // identity;q=0 forbids the identity: a coding is chosen whenever one is acceptable.
  EXPECT_EQ(pick("identity;q=0, gzip;q=0.1"), Coding::kGzip);
  // The client prefers identity to every coding it listed: identity.
  EXPECT_EQ(pick("identity, gzip;q=0.5"), Coding::kIdentity);
  EXPECT_EQ(pick("identity;q=0.4, gzip;q=0.5"), Coding::kGzip);
  // Nothing acceptable at all: identity anyway (we never answer 406).
  EXPECT_EQ(pick("identity;q=0, deflate"), Coding::kIdentity);
}

TEST(CompressNegotiate, MalformedWeightsIgnoreTheElement) {
  EXPECT_EQ(pick("br;q=2, gzip"), Coding::kGzip);
  EXPECT_EQ(pick("br;q=abc"), Coding::kIdentity);
  EXPECT_EQ(pick("br;q=0.5;level=3, gzip;q=0.1"), Coding::kBrotli);
}

TEST(CompressMediaTypes, DefaultList) {
  Options o;
  EXPECT_TRUE(media_type_listed("text/html; charset=utf-8", o));
  EXPECT_TRUE(media_type_listed("TEXT/CSS", o));
  EXPECT_TRUE(media_type_listed("text/event-stream", o));
  EXPECT_TRUE(media_type_listed("application/json", o));
  EXPECT_TRUE(media_type_listed("application/javascript;charset=utf-8", o));
  EXPECT_TRUE(media_type_listed("image/svg+xml", o));
  EXPECT_TRUE(media_type_listed("application/wasm", o));
  EXPECT_TRUE(media_type_listed("application/xml", o));
  EXPECT_FALSE(media_type_listed("image/png", o));
  EXPECT_FALSE(media_type_listed("application/octet-stream", o));
  EXPECT_FALSE(media_type_listed("text/", o));
  EXPECT_FALSE(media_type_listed("", o));
  EXPECT_FALSE(media_type_listed("texts/html", o));
}

ResponseFacts html(int64_t length) {
  ResponseFacts f;
  f.content_type = "text/html";
  f.length = length;
  return f;
}

TEST(CompressDecide, CompressesAListedTypeAboveTheMinimum) {
  Options on;
  on.enabled = true;
  EXPECT_EQ(decide(html(1000), on, Coding::kGzip), Verdict::kCompress);
  EXPECT_EQ(decide(html(-1), on, Coding::kGzip), Verdict::kCompress);  // streamed
  EXPECT_EQ(decide(html(256), on, Coding::kGzip), Verdict::kCompress);
  EXPECT_EQ(decide(html(255), on, Coding::kGzip), Verdict::kNever);
  EXPECT_EQ(decide(html(1000), Options{}, Coding::kGzip), Verdict::kNever);  // off
}

TEST(CompressDecide, ClientWithoutACodingGetsIdentityButVary) {
  Options on;
  on.enabled = true;
  EXPECT_EQ(decide(html(1000), on, Coding::kIdentity), Verdict::kIdentity);
}

TEST(CompressDecide, NeverForBodilessPartialOrEncodedResponses) {
  Options on;
  on.enabled = true;
  for (int status : {101, 204, 206, 304}) {
    ResponseFacts f = html(1000);
    f.status = status;
    EXPECT_EQ(decide(f, on, Coding::kGzip), Verdict::kNever) << status;
  }
  ResponseFacts encoded = html(1000);
  encoded.has_content_encoding = true;
  EXPECT_EQ(decide(encoded, on, Coding::kGzip), Verdict::kNever);
  ResponseFacts no_transform = html(1000);
  no_transform.no_transform = true;
  EXPECT_EQ(decide(no_transform, on, Coding::kGzip), Verdict::kNever);
  ResponseFacts png = html(1000);
  png.content_type = "image/png";
  EXPECT_EQ(decide(png, on, Coding::kGzip), Verdict::kNever);
  ResponseFacts untyped = html(1000);
  untyped.content_type = {};
  EXPECT_EQ(decide(untyped, on, Coding::kGzip), Verdict::kNever);
}

TEST(CompressDecide, HeadAndRangeRequestsGetIdentityWithVary) {
  Options on;
  on.enabled = true;
  ResponseFacts head = html(1000);
  head.head_request = true;
  EXPECT_EQ(decide(head, on, Coding::kGzip), Verdict::kIdentity);
  ResponseFacts range = html(1000);
  range.range_request = true;
  EXPECT_EQ(decide(range, on, Coding::kBrotli), Verdict::kIdentity);
}

TEST(CompressDecide, ErrorPagesAreCompressedToo) {
  Options on;
  on.enabled = true;
  ResponseFacts f = html(5000);
  f.status = 404;
  EXPECT_EQ(decide(f, on, Coding::kZstd), Verdict::kCompress);
}

}  // namespace
}  // namespace peregrine::compress
