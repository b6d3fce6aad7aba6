// Response header rules compiled into edits (http/header_edits.h): drop lists and appended lines,
// a route's rules after its site's, and which statuses get which part.
#include "http/header_edits.h"

#include <gtest/gtest.h>

#include <string>

namespace peregrine::http {
namespace {

HeaderRuleSet rules(std::vector<std::string> remove,
                    std::vector<std::pair<std::string, std::string>> set,
                    std::vector<std::pair<std::string, std::string>> add, bool always = false) {
  return HeaderRuleSet{std::move(remove), std::move(set), std::move(add), always};
}

TEST(HeaderEdits, SetReplacesAddAppendsRemoveDrops) {
  HeaderEdits edits;
  edits.then(rules({"X-Powered-By"}, {{"X-Frame-Options", "DENY"}}, {{"Link", "</a>; rel=x"}}));
  const HeaderEditList* list = edits.for_status(200);
  ASSERT_NE(list, nullptr);
  std::string out;
  list->append_kept(
      out,
      "Content-Type: text/html\r\nx-powered-by: PHP\r\nX-FRAME-OPTIONS: SAMEORIGIN\r\n"
      "Link: </b>; rel=y\r\n");
  out.append(list->lines);
  EXPECT_EQ(out,
            "Content-Type: text/html\r\nLink: </b>; rel=y\r\nX-Frame-Options: DENY\r\n"
            "Link: </a>; rel=x\r\n");
}

TEST(HeaderEdits, WithoutAlwaysErrorsGetNothing) {
  HeaderEdits edits;
  edits.then(rules({}, {{"X-A", "1"}}, {}));
  EXPECT_NE(edits.for_status(200), nullptr);
  EXPECT_NE(edits.for_status(204), nullptr);
  EXPECT_NE(edits.for_status(301), nullptr);
  EXPECT_NE(edits.for_status(304), nullptr);
  EXPECT_EQ(edits.for_status(404), nullptr);
  EXPECT_EQ(edits.for_status(502), nullptr);
  EXPECT_EQ(edits.for_status(101), nullptr);
}

TEST(HeaderEdits, AlwaysRulesReachEveryStatusOthersOnlySuccess) {
  HeaderEdits edits;
  edits.then(rules({}, {{"Strict-CSP", "default-src 'self'"}}, {}, /*always=*/true));
  edits.then(rules({}, {}, {{"X-Only-Ok", "1"}}));
  const HeaderEditList* error = edits.for_status(401);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->lines, "Strict-CSP: default-src 'self'\r\n");
  EXPECT_EQ(edits.for_status(200)->lines, "Strict-CSP: default-src 'self'\r\nX-Only-Ok: 1\r\n");
}

TEST(HeaderEdits, RouteRulesComeAfterTheSites) {
  HeaderEdits edits;
  edits.then(rules({}, {{"X-Site", "s"}, {"Cache-Control", "no-store"}}, {{"X-Keep", "k"}}));
  // The route replaces one of the site's headers and removes another.
  edits.then(rules({"X-Site"}, {{"Cache-Control", "max-age=60"}}, {}));
  const HeaderEditList& ok = edits.success;
  EXPECT_EQ(ok.lines, "X-Keep: k\r\nCache-Control: max-age=60\r\n");
  EXPECT_TRUE(ok.drops("x-site"));
  EXPECT_TRUE(ok.drops("CACHE-CONTROL"));
  EXPECT_FALSE(ok.drops("X-Keep"));
}

TEST(HeaderEdits, DropsTheServersOwnLines) {
  HeaderEdits edits;
  edits.then(rules({"Server"}, {}, {}));
  std::string out;
  edits.success.append_kept(out, "Date: Tue, 01 Dec 2026 05:00:00 GMT\r\nServer: peregrine\r\n");
  EXPECT_EQ(out, "Date: Tue, 01 Dec 2026 05:00:00 GMT\r\n");
}

TEST(HeaderEdits, EmptyRulesAreEmpty) {
  HeaderEdits edits;
  EXPECT_TRUE(edits.empty());
  edits.then(rules({}, {}, {}));
  EXPECT_TRUE(edits.empty());
}

}  // namespace
}  // namespace peregrine::http
