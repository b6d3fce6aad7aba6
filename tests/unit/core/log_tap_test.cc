#include "core/log_tap.h"

#include <gtest/gtest.h>

namespace peregrine::log_tap {
namespace {

TEST(LogTap, StreamNames) {
  EXPECT_EQ(streams_from("access"), kAccess);
  EXPECT_EQ(streams_from("error"), kError);
  EXPECT_EQ(streams_from("both"), kAccess | kError);
  EXPECT_EQ(streams_from("all"), 0);
}

TEST(LogTap, InactiveWithoutSubscribers) {
  EXPECT_FALSE(active());
  Subscriber s(kAccess, "");
  subscribe(&s);
  EXPECT_TRUE(active());
  unsubscribe(&s);
  EXPECT_FALSE(active());
}

TEST(LogTap, SplitsLinesFiltersAndKeepsStreams) {
  Subscriber access(kAccess, "");
  Subscriber both(kAccess | kError, "app");
  subscribe(&access);
  subscribe(&both);
  offer(kAccess, "GET /app 200\nGET /other 404\n");
  offer(kError, "upstream app: down\n");
  unsubscribe(&access);
  unsubscribe(&both);
  offer(kAccess, "after\n");  // nobody listens any more

  std::deque<Subscriber::Line> lines;
  EXPECT_EQ(access.take(lines), 0u);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].text, "GET /app 200");
  EXPECT_EQ(lines[1].text, "GET /other 404");
  lines.clear();
  both.take(lines);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].stream, kAccess);
  EXPECT_EQ(lines[0].text, "GET /app 200");
  EXPECT_EQ(lines[1].stream, kError);
  lines.clear();
  EXPECT_EQ(both.take(lines), 0u);
  EXPECT_TRUE(lines.empty());
}

TEST(LogTap, FullQueueDropsAndCounts) {
  Subscriber s(kError, "");
  const std::string line(1000, 'x');
  const size_t fit = Subscriber::kMaxQueuedBytes / line.size();
  for (size_t i = 0; i < fit + 5; ++i) s.offer(kError, line);
  std::deque<Subscriber::Line> lines;
  EXPECT_EQ(s.take(lines), 5u);
  EXPECT_EQ(lines.size(), fit);
  // Taking empties the queue: there is room again.
  s.offer(kError, line);
  lines.clear();
  EXPECT_EQ(s.take(lines), 0u);
  EXPECT_EQ(lines.size(), 1u);
}

}  // namespace
}  // namespace peregrine::log_tap
