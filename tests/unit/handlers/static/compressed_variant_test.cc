// The static handler's compressed variants, through handle(): negotiation, headers, ETags,
// conditional and range requests, and a changed file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <fstream>
#include <string>
#include <vector>

#include "handlers/static/mime.h"
#include "handlers/static/static_handler.h"
#include "unit/compress/decode.h"
#include "unit/config/config_test_support.h"

namespace peregrine::static_files {
namespace {

using compress::test_support::page_like;

std::string body_of(const Response& r) {
  std::string out;
  for (const Response::Segment& s : r.segments()) {
    if (s.kind == Response::Segment::Kind::kOwned) out += r.owned_bytes(s);
    if (s.kind == Response::Segment::Kind::kBorrowed) out.append(s.data, s.length);
    if (s.kind == Response::Segment::Kind::kFile) {
      std::string part(s.length, '\0');
      EXPECT_EQ(pread(s.file->fd(), part.data(), s.length, s.file_offset),
                static_cast<ssize_t>(s.length));
      out += part;
    }
  }
  return out;
}

std::string header_of(const Response& r, std::string_view name) {
  std::string all = std::string(r.prebuilt_headers()) + std::string(r.extra_headers());
  const std::string key = std::string(name) + ": ";
  size_t at = all.find(key);
  if (at == std::string::npos) return {};
  at += key.size();
  return all.substr(at, all.find("\r\n", at) - at);
}

class CompressedVariantTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.root = dir_.path();
    options_.cache_valid = config::Millis(0);  // notice changes at once
    compress_.enabled = true;
    page_ = page_like(54 * 1024);
    write("index.html", page_);
    write("tiny.html", "<p>hi</p>");
    write("logo.png", page_);
  }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_.path(name), std::ios::binary | std::ios::trunc) << text;
  }
  Response get(std::string_view path, std::vector<Header> headers, Method method = Method::kGet) {
    Request r;
    r.method = method;
    r.path = path;
    for (const Header& h : headers) r.headers[r.header_count++] = h;
    Response response;
    handler_->handle(r, response);
    return response;
  }
  void SetUpHandler() {
    handler_ = std::make_unique<StaticHandler>(options_, std::string(), mime_, clock_, compress_);
  }

  config::test_support::TempDir dir_;
  config::StaticOptions options_;
  compress::Options compress_;
  MimeTable mime_;
  Clock clock_;
  std::string page_;
  std::unique_ptr<StaticHandler> handler_;
};

TEST_F(CompressedVariantTest, EachCodingRoundTripsWithLengthDistinctETagAndVary) {
  SetUpHandler();
  const Response plain = get("/index.html", {});
  EXPECT_EQ(body_of(plain), page_);
  EXPECT_EQ(header_of(plain, "Vary"), "Accept-Encoding");
  EXPECT_EQ(header_of(plain, "Content-Encoding"), "");
  const std::string etag = header_of(plain, "ETag");
  ASSERT_FALSE(etag.empty());
  for (auto [accept, coding] :
       {std::pair{"gzip", compress::Coding::kGzip}, std::pair{"br", compress::Coding::kBrotli},
        std::pair{"zstd", compress::Coding::kZstd}}) {
    const Response r = get("/index.html", {{"Accept-Encoding", accept}});
    EXPECT_EQ(r.status(), 200);
    EXPECT_EQ(header_of(r, "Content-Encoding"), accept);
    EXPECT_EQ(header_of(r, "Vary"), "Accept-Encoding");
    EXPECT_EQ(header_of(r, "Accept-Ranges"), "");
    const std::string variant_etag = header_of(r, "ETag");
    EXPECT_NE(variant_etag, etag);
    EXPECT_EQ(variant_etag, etag.substr(0, etag.size() - 1) + "-" + accept + "\"");
    EXPECT_LT(r.body_length(), page_.size() / 3);
    EXPECT_EQ(compress::test_support::decode(coding, body_of(r)), page_) << accept;
  }
}

TEST_F(CompressedVariantTest, ConditionalRequestsUseTheVariantsValidators) {
  SetUpHandler();
  const Response first = get("/index.html", {{"Accept-Encoding", "br"}});
  const std::string variant_etag = header_of(first, "ETag");
  const Response again =
      get("/index.html", {{"Accept-Encoding", "br"}, {"If-None-Match", variant_etag}});
  EXPECT_EQ(again.status(), 304);
  EXPECT_EQ(header_of(again, "ETag"), variant_etag);
  EXPECT_EQ(header_of(again, "Vary"), "Accept-Encoding");
  EXPECT_EQ(again.body_length(), 0u);
  // The identity's ETag does not validate the variant: the client gets the full variant.
  const std::string identity_etag = header_of(get("/index.html", {}), "ETag");
  const Response other =
      get("/index.html", {{"Accept-Encoding", "br"}, {"If-None-Match", identity_etag}});
  EXPECT_EQ(other.status(), 200);
  EXPECT_EQ(header_of(other, "Content-Encoding"), "br");
}

TEST_F(CompressedVariantTest, RangeHeadSmallAndUnlistedFilesAreNotCompressed) {
  SetUpHandler();
  const Response range = get("/index.html", {{"Accept-Encoding", "gzip"}, {"Range", "bytes=0-99"}});
  EXPECT_EQ(range.status(), 206);
  EXPECT_EQ(body_of(range), page_.substr(0, 100));
  EXPECT_EQ(header_of(range, "Content-Encoding"), "");

  const Response head = get("/index.html", {{"Accept-Encoding", "gzip"}}, Method::kHead);
  EXPECT_EQ(header_of(head, "Content-Encoding"), "");
  EXPECT_EQ(header_of(head, "Vary"), "Accept-Encoding");

  const Response tiny = get("/tiny.html", {{"Accept-Encoding", "gzip"}});
  EXPECT_EQ(header_of(tiny, "Content-Encoding"), "");
  EXPECT_EQ(header_of(tiny, "Vary"), "");  // below min_length: never compressed, no Vary

  const Response png = get("/logo.png", {{"Accept-Encoding", "gzip"}});
  EXPECT_EQ(header_of(png, "Content-Encoding"), "");
  EXPECT_EQ(header_of(png, "Vary"), "");
}

TEST_F(CompressedVariantTest, PrecompressedSiblingsStillWin) {
  write("index.html.gz", "pretend-gzip");
  SetUpHandler();
  const Response r = get("/index.html", {{"Accept-Encoding", "gzip"}});
  EXPECT_EQ(header_of(r, "Content-Encoding"), "gzip");
  EXPECT_EQ(body_of(r), "pretend-gzip");
  // A coding without a sibling is made on the fly.
  const Response br = get("/index.html", {{"Accept-Encoding", "br"}});
  EXPECT_EQ(header_of(br, "Content-Encoding"), "br");
  EXPECT_EQ(compress::test_support::unbrotli(body_of(br)), page_);
}

TEST_F(CompressedVariantTest, AChangedFileGetsAFreshVariant) {
  SetUpHandler();
  const Response before = get("/index.html", {{"Accept-Encoding", "gzip"}});
  EXPECT_EQ(compress::test_support::gunzip(body_of(before)), page_);
  const std::string etag_before = header_of(before, "ETag");  // borrowed until the next request
  const std::string changed = page_like(40 * 1024) + "changed";
  write("index.html", changed);
  // Make sure the mtime differs even on a coarse clock.
  struct timeval times[2] = {{1'000'000'000, 0}, {1'000'000'000, 0}};
  ASSERT_EQ(utimes(dir_.path("index.html").c_str(), times), 0);
  clock_.monotonic_ms += 10;
  const Response after = get("/index.html", {{"Accept-Encoding", "gzip"}});
  EXPECT_EQ(compress::test_support::gunzip(body_of(after)), changed);
  EXPECT_NE(header_of(after, "ETag"), etag_before);
}

TEST_F(CompressedVariantTest, FilesSentWithSendfileAreCompressedUpToALimit) {
  const std::string big = page_like(300 * 1024);  // beyond the in-memory file limit
  write("big.html", big);
  write("huge.html", page_like(5 * 1024 * 1024));  // beyond the variant limit
  SetUpHandler();
  const Response r = get("/big.html", {{"Accept-Encoding", "zstd"}});
  EXPECT_EQ(header_of(r, "Content-Encoding"), "zstd");
  EXPECT_EQ(compress::test_support::unzstd(body_of(r)), big);
  const Response huge = get("/huge.html", {{"Accept-Encoding", "zstd"}});
  EXPECT_EQ(header_of(huge, "Content-Encoding"), "");
  EXPECT_EQ(header_of(huge, "Vary"), "Accept-Encoding");
  EXPECT_EQ(huge.body_length(), 5u * 1024 * 1024);
}

TEST_F(CompressedVariantTest, OffMeansNoVaryAndNoVariants) {
  compress_.enabled = false;
  SetUpHandler();
  const Response r = get("/index.html", {{"Accept-Encoding", "gzip"}});
  EXPECT_EQ(header_of(r, "Content-Encoding"), "");
  EXPECT_EQ(header_of(r, "Vary"), "");
  EXPECT_EQ(body_of(r), page_);
}

}  // namespace
}  // namespace peregrine::static_files
