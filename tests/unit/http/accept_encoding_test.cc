#include "http/accept_encoding.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "support/random_inputs.h"

namespace peregrine::http {
namespace {

using peregrine::testing::for_random_inputs;

void expect(std::string_view value, bool br, bool gzip) {
  const AcceptedEncodings a = parse_accept_encoding(value);
  EXPECT_EQ(a.br, br) << "br for: " << value;
  EXPECT_EQ(a.gzip, gzip) << "gzip for: " << value;
}

TEST(AcceptEncoding, EmptyMeansIdentityOnly) {
  expect("", false, false);
  expect("   ", false, false);
  expect(",,", false, false);
  expect("identity", false, false);
}

TEST(AcceptEncoding, BrowserDefaults) {
  expect("gzip, deflate, br", true, true);
  expect("gzip, deflate, br, zstd", true, true);
  expect("gzip, deflate", false, true);
  expect("br", true, false);
  expect("deflate", false, false);
}

TEST(AcceptEncoding, CaseInsensitive) {
  expect("GZIP, BR", true, true);
  expect("Gzip;Q=0.5", false, true);
  expect("X-GZIP", false, true);
}

TEST(AcceptEncoding, XGzipIsGzip) {
  expect("x-gzip", false, true);
  expect("x-gzip;q=0", false, false);
}

TEST(AcceptEncoding, QZeroMeansNotAcceptable) {
  expect("gzip;q=0", false, false);
  expect("gzip;q=0.0", false, false);
  expect("gzip;q=0.000", false, false);
  expect("br;q=0, gzip", false, true);
  expect("br, gzip;q=0", true, false);
}

TEST(AcceptEncoding, NonZeroQIsAcceptable) {
  expect("gzip;q=0.001", false, true);
  expect("gzip;q=0.5, br;q=1.0", true, true);
  expect("gzip;q=1", false, true);
  expect("gzip;q=1.000", false, true);
  expect("br;q=0.1", true, false);
}

TEST(AcceptEncoding, WhitespaceTolerated) {
  expect("  gzip  ,\tbr  ", true, true);
  expect("gzip ; q=0", false, false);
  expect("gzip;q = 0", false, false);
  expect("gzip ;\tq=0.5 , br ; q=0", false, true);
}

TEST(AcceptEncoding, StarAppliesToUnlistedCodings) {
  expect("*", true, true);
  expect("*;q=0", false, false);
  expect("gzip, *;q=0", false, true);
  expect("br;q=0, *", false, true);
  expect("*, gzip;q=0", true, false);
  expect("identity;q=1, *;q=0", false, false);
  expect("deflate, *;q=0.2", true, true);
}

TEST(AcceptEncoding, MalformedQIgnoresTheElement) {
  expect("gzip;q=2", false, false);
  expect("gzip;q=1.5", false, false);
  expect("gzip;q=1.001", false, false);
  expect("gzip;q=0.0001", false, false);
  expect("gzip;q=abc", false, false);
  expect("gzip;q=", false, false);
  expect("gzip;q=-1", false, false);
  expect("gzip;q=.5", false, false);
  expect("gzip;q=2, br", true, false);
  expect("gzip;q=2, *", true, true);  // gzip's own element is ignored; "*" then covers it
}

TEST(AcceptEncoding, RepeatedCodingTakesHighestWeight) {
  expect("gzip;q=0, gzip", false, true);
  expect("gzip, gzip;q=0", false, true);
  expect("gzip;q=0, x-gzip;q=0.3", false, true);
}

TEST(AcceptEncoding, OtherParametersAreSkipped) {
  expect("gzip;level=9", false, true);
  expect("gzip;level=9;q=0", false, false);
  expect("gzip;foo", false, false);
}

TEST(AcceptEncoding, SimilarNamesDoNotMatch) {
  expect("gzipx, brotli, b, gz", false, false);
  expect("x-br", false, false);
}

TEST(AcceptEncoding, RandomInputsAreSafe) {
  for_random_inputs("gzipbr*x-;q=0.1, \t", 32, 100000,
                    [](std::string_view s) { (void)parse_accept_encoding(s); });
}

}  // namespace
}  // namespace peregrine::http

namespace peregrine::http {
namespace {

TEST(AcceptEncodingWeights, EachCodingWithStarAndIdentity) {
  CodingWeights w = parse_coding_weights("gzip;q=0.8, br, zstd;q=0.25");
  EXPECT_EQ(w.gzip, 800);
  EXPECT_EQ(w.br, 1000);
  EXPECT_EQ(w.zstd, 250);
  EXPECT_EQ(w.identity, -1);  // acceptable by default, no preference

  w = parse_coding_weights("*;q=0.5, br;q=0");
  EXPECT_EQ(w.gzip, 500);
  EXPECT_EQ(w.zstd, 500);
  EXPECT_EQ(w.br, 0);
  EXPECT_EQ(w.identity, -1);

  w = parse_coding_weights("*;q=0");
  EXPECT_EQ(w.gzip, 0);
  EXPECT_EQ(w.identity, 0);  // "*;q=0" excludes identity too

  w = parse_coding_weights("identity;q=0, gzip");
  EXPECT_EQ(w.identity, 0);
  EXPECT_EQ(w.gzip, 1000);

  w = parse_coding_weights("IDENTITY;Q=0.3, *;q=0");
  EXPECT_EQ(w.identity, 300);

  w = parse_coding_weights("");
  EXPECT_EQ(w.gzip, -1);
  EXPECT_EQ(w.br, -1);
  EXPECT_EQ(w.zstd, -1);
}

TEST(AcceptEncodingWeights, HighestRepeatedWeightAndMalformedElements) {
  CodingWeights w = parse_coding_weights("gzip;q=0.1, gzip;q=0.7, zstd;q=1.5, br;q=");
  EXPECT_EQ(w.gzip, 700);
  EXPECT_EQ(w.zstd, -1);
  EXPECT_EQ(w.br, -1);
}

}  // namespace
}  // namespace peregrine::http
