// Tests for the per-thread recycling of request-rate objects (src/core/spares.h).
#include "core/spares.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "peregrine/response.h"

namespace peregrine {
namespace {

struct Node : RecycledAllocation<Node> {
  char payload[48];
};

TEST(RecycledAllocation, AFreedBlockIsHandedOutAgainOnTheSameThread) {
  if (!kRecycleAllocations) GTEST_SKIP() << "AddressSanitizer build: fresh memory every time";
  auto* a = new Node;
  void* where = a;
  delete a;
  auto* b = new Node;
  EXPECT_EQ(static_cast<void*>(b), where);
  delete b;
}

TEST(RecycledAllocation, ThreadsKeepTheirOwnFreeLists) {
  if (!kRecycleAllocations) GTEST_SKIP() << "AddressSanitizer build: fresh memory every time";
  auto* a = new Node;
  void* where = a;
  delete a;
  void* other = nullptr;
  std::thread([&] {
    auto* b = new Node;  // this thread's list is empty: a fresh block
    other = b;
    delete b;
  }).join();
  EXPECT_NE(other, where);
  auto* c = new Node;
  EXPECT_EQ(static_cast<void*>(c), where);
  delete c;
}

TEST(Spares, AStringComesBackEmptyWithItsCapacity) {
  std::string first(4000, 'x');
  const size_t capacity = first.capacity();
  const char* buffer = first.data();
  Spares<std::string>::give(first);
  std::string next;
  Spares<std::string>::take(next);
  EXPECT_TRUE(next.empty());
  EXPECT_EQ(next.capacity(), capacity);
  EXPECT_EQ(next.data(), buffer);
}

TEST(Spares, LargeBuffersAreNotKept) {
  std::string huge(1 << 20, 'x');
  Spares<std::string>::give(huge);
  EXPECT_EQ(huge.size(), size_t{1} << 20);  // left as it was: the caller frees it
  std::string next;
  Spares<std::string>::take(next);
  EXPECT_LT(next.capacity(), size_t{1} << 20);
}

TEST(Spares, AResponseIsClearedBeforeItIsKept) {
  Response r;
  r.set_status(404);
  r.add_header("X-Test", "1");
  r.set_body("body");
  Spares<Response>::give(r);
  Response next;
  Spares<Response>::take(next);
  EXPECT_EQ(next.status(), 200);
  EXPECT_TRUE(next.extra_headers().empty());
  EXPECT_TRUE(next.segments().empty());
  EXPECT_GT(next.capacity(), 0u);
}

// php-fpm's usual answer: one short header and a borrowed body (the exchange's buffer). Its
// strings alone hold less than the 64-byte floor; its segment list makes it worth keeping, or
// every PHP request allocated a header buffer and a segment list again.
TEST(Spares, AResponseWithOneShortHeaderAndABorrowedBodyIsKept) {
  Spares<Response>::take(*std::make_unique<Response>());  // empty the list this test checks
  Response r;
  r.add_header("Content-Type", "text/html; charset=UTF-8");
  const std::string body = "hello world";
  r.append_borrowed_body(body);
  const size_t capacity = r.capacity();
  Spares<Response>::give(r);
  Response next;
  Spares<Response>::take(next);
  EXPECT_EQ(next.capacity(), capacity);
  EXPECT_TRUE(next.segments().empty());
}

}  // namespace
}  // namespace peregrine
