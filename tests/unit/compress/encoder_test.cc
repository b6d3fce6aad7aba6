#include "compress/encoder.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "unit/compress/decode.h"

namespace peregrine::compress {
namespace {

using test_support::decode;
using test_support::page_like;

constexpr Coding kAll[] = {Coding::kGzip, Coding::kBrotli, Coding::kZstd};

TEST(CompressEncoder, OneShotRoundTripsAndShrinksText) {
  const std::string page = page_like(54 * 1024);
  for (Coding coding : kAll) {
    for (int level : {1, 4, 6}) {
      std::string out;
      ASSERT_TRUE(compress_all(coding, level, page, &out)) << coding_name(coding);
      EXPECT_LT(out.size(), page.size() / 3) << coding_name(coding) << " " << level;
      EXPECT_EQ(decode(coding, out), page) << coding_name(coding) << " " << level;
    }
  }
}

TEST(CompressEncoder, EmptyAndTinyInputsRoundTrip) {
  for (Coding coding : kAll) {
    for (std::string input : {std::string(), std::string("x"), std::string(300, 'a')}) {
      std::string out;
      ASSERT_TRUE(compress_all(coding, 5, input, &out));
      EXPECT_EQ(decode(coding, out), input) << coding_name(coding);
    }
  }
}

TEST(CompressEncoder, StreamingInPiecesOfUnknownLengthRoundTrips) {
  const std::string page = page_like(300 * 1024);  // beyond every stream window
  for (Coding coding : kAll) {
    std::unique_ptr<Encoder> e = make_encoder(coding, 4, -1);
    ASSERT_NE(e, nullptr);
    std::string out;
    for (size_t at = 0; at < page.size(); at += 777)
      ASSERT_TRUE(e->encode(std::string_view(page).substr(at, 777), Encoder::Flush::kNone, &out));
    ASSERT_TRUE(e->encode({}, Encoder::Flush::kFinish, &out));
    EXPECT_EQ(decode(coding, out), page) << coding_name(coding);
  }
}

TEST(CompressEncoder, SyncFlushMakesEverythingSoFarDecodable) {
  std::unique_ptr<Encoder> e = make_encoder(Coding::kGzip, 6, -1);
  std::string out;
  ASSERT_TRUE(e->encode("data: one\n\n", Encoder::Flush::kSync, &out));
  EXPECT_EQ(test_support::gunzip_partial(out), "data: one\n\n");
  ASSERT_TRUE(e->encode("data: two\n\n", Encoder::Flush::kSync, &out));
  EXPECT_EQ(test_support::gunzip_partial(out), "data: one\n\ndata: two\n\n");
  ASSERT_TRUE(e->encode({}, Encoder::Flush::kFinish, &out));
  EXPECT_EQ(test_support::gunzip(out), "data: one\n\ndata: two\n\n");
  // brotli and zstd flush too: after each flush the stream so far decodes to the input so far.
  for (Coding coding : {Coding::kBrotli, Coding::kZstd}) {
    std::unique_ptr<Encoder> s = make_encoder(coding, 4, -1);
    std::string bytes;
    ASSERT_TRUE(s->encode("event one\n", Encoder::Flush::kSync, &bytes));
    const size_t flushed = bytes.size();
    EXPECT_GT(flushed, 0u) << coding_name(coding);
    ASSERT_TRUE(s->encode({}, Encoder::Flush::kFinish, &bytes));
    EXPECT_EQ(decode(coding, bytes), "event one\n");
  }
}

TEST(CompressEncoder, WindowShrinksForSmallKnownLengths) {
  EXPECT_EQ(window_log_for(Coding::kGzip, -1), 15);
  EXPECT_EQ(window_log_for(Coding::kGzip, 1000), 10);
  EXPECT_EQ(window_log_for(Coding::kGzip, 10), 9);
  EXPECT_EQ(window_log_for(Coding::kGzip, 1 << 20), 15);
  EXPECT_EQ(window_log_for(Coding::kBrotli, 5000), 13);
  EXPECT_EQ(window_log_for(Coding::kZstd, -1), max_window_log(Coding::kZstd));
}

TEST(CompressEncoder, BadLevelsGiveNoEncoder) {
  EXPECT_EQ(make_encoder(Coding::kGzip, 0, -1), nullptr);
  EXPECT_EQ(make_encoder(Coding::kGzip, 10, -1), nullptr);
  EXPECT_EQ(make_encoder(Coding::kBrotli, 12, -1), nullptr);
  EXPECT_EQ(make_encoder(Coding::kZstd, 20, -1), nullptr);
  EXPECT_EQ(make_encoder(Coding::kIdentity, 1, -1), nullptr);
}

// A thread_local made before the encoder pool (a spare HTTP/2 stream holding its decorator) is
// destroyed after the pool and the block cache at thread exit: recycling its encoder then must
// free it to the heap, not push it into the destroyed pool (heap corruption, seen as "corrupted
// double-linked list" when a worker stopped; AddressSanitizer reports a use after free).
TEST(CompressEncoder, AnEncoderRecycledAfterItsThreadsPoolIsFreed) {
  for (Coding coding : kAll) {
    std::thread([coding] {
      struct Holder {
        std::unique_ptr<Encoder> encoder;
        ~Holder() { recycle_encoder(std::move(encoder)); }
      };
      thread_local Holder holder;  // constructed first, so destroyed last
      holder.encoder = acquire_encoder(coding, 1, -1);
      ASSERT_TRUE(holder.encoder);
      std::string out;
      EXPECT_TRUE(holder.encoder->encode("hello", Encoder::Flush::kFinish, &out));
    }).join();
  }
}

TEST(CompressEncoder, RecycledEncodersStartFreshStreams) {
  const std::string a = page_like(5000), b = page_like(7000);
  for (Coding coding : kAll) {
    std::unique_ptr<Encoder> e = acquire_encoder(coding, 3, -1);
    std::string out;
    ASSERT_TRUE(e->encode(a, Encoder::Flush::kFinish, &out));
    EXPECT_EQ(decode(coding, out), a);
    Encoder* before = e.get();
    recycle_encoder(std::move(e));
    std::unique_ptr<Encoder> again = acquire_encoder(coding, 3, -1);
    if (coding != Coding::kBrotli) {
      EXPECT_EQ(again.get(), before) << coding_name(coding);
    }
    out.clear();
    ASSERT_TRUE(again->encode(b, Encoder::Flush::kFinish, &out));
    EXPECT_EQ(decode(coding, out), b) << coding_name(coding);
  }
}

}  // namespace
}  // namespace peregrine::compress
