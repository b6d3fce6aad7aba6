#include "handlers/proxy/headers.h"

#include <gtest/gtest.h>

#include <vector>

namespace peregrine::proxy {
namespace {

using Views = std::vector<HeaderView>;

RequestContext context(std::string_view ip = "192.0.2.7", std::string_view scheme = "https") {
  RequestContext c;
  c.client_ip = ip;
  c.scheme = scheme;
  c.upstream_host = "10.0.0.5:8080";
  return c;
}

RequestOptions bare() {
  RequestOptions o;
  o.forwarding = {false, false, false, false, false};
  return o;
}

const std::string* get(const HeaderList& h, std::string_view name) {
  for (const Header& x : h)
    if (x.name == name) return &x.value;
  return nullptr;
}

int count(const HeaderList& h, std::string_view name) {
  int n = 0;
  for (const Header& x : h) n += x.name == name;
  return n;
}

// ---- hop-by-hop --------------------------------------------------------------------------------

TEST(ProxyHeadersHopByHop, RequestStripsAll) {
  Views in = {{"Host", "example.com"},
              {"Connection", "keep-alive"},
              {"Keep-Alive", "timeout=5"},
              {"TE", "trailers"},
              {"Trailer", "X-Checksum"},
              {"Transfer-Encoding", "chunked"},
              {"Upgrade", "websocket"},
              {"Proxy-Connection", "keep-alive"},
              {"Proxy-Authorization", "Basic x"},
              {"Accept", "*/*"}};
  HeaderList out = rewrite_request_headers(in, context(), bare());
  EXPECT_EQ(out, (HeaderList{{"Host", "example.com"}, {"Accept", "*/*"}}));
}

TEST(ProxyHeadersHopByHop, ResponseStripsAll) {
  Views in = {{"Content-Type", "text/html"},
              {"Connection", "close"},
              {"Keep-Alive", "timeout=5"},
              {"Transfer-Encoding", "chunked"},
              {"Proxy-Authenticate", "Basic"},
              {"Trailer", "Expires"},
              {"Upgrade", "h2c"},
              {"Set-Cookie", "a=1"}};
  HeaderList out = rewrite_response_headers(in, {});
  EXPECT_EQ(out, (HeaderList{{"Content-Type", "text/html"}, {"Set-Cookie", "a=1"}}));
}

TEST(ProxyHeadersHopByHop, ConnectionNamesCustomHeaders) {
  Views in = {{"Connection", "X-Secret, x-trace ,close"},
              {"X-Secret", "1"},
              {"X-Trace", "abc"},
              {"X-Kept", "yes"}};
  HeaderList out = rewrite_request_headers(in, context(), bare());
  EXPECT_EQ(get(out, "X-Secret"), nullptr);
  EXPECT_EQ(get(out, "X-Trace"), nullptr);
  ASSERT_NE(get(out, "X-Kept"), nullptr);
  HeaderList resp = rewrite_response_headers(in, {});
  EXPECT_EQ(resp, (HeaderList{{"X-Kept", "yes"}}));
}

TEST(ProxyHeadersHopByHop, SeveralConnectionHeadersAndEmptyTokens) {
  Views in = {
      {"Connection", ",, X-A"}, {"connection", "X-B,"}, {"X-A", "1"}, {"X-B", "2"}, {"X-C", "3"}};
  HeaderList out = rewrite_response_headers(in, {});
  EXPECT_EQ(out, (HeaderList{{"X-C", "3"}}));
}

TEST(ProxyHeadersHopByHop, ConnectionCannotRemoveHostThroughCase) {
  // A Connection header naming an end-to-end header removes it (that is the rule), whatever the
  // case it is written in.
  Views in = {{"Connection", "COOKIE"}, {"Cookie", "a=1"}, {"Accept", "x"}};
  HeaderList out = rewrite_request_headers(in, context(), bare());
  EXPECT_EQ(get(out, "Cookie"), nullptr);
  EXPECT_NE(get(out, "Accept"), nullptr);
}

TEST(ProxyHeadersHopByHop, TunnelKeepsUpgrade) {
  Views in = {{"Host", "chat.example"},
              {"Connection", "Upgrade"},
              {"Upgrade", "websocket"},
              {"Sec-WebSocket-Key", "abc=="}};
  RequestContext c = context();
  c.tunnel = true;
  HeaderList out = rewrite_request_headers(in, c, bare());
  EXPECT_EQ(out, (HeaderList{{"Host", "chat.example"},
                             {"Upgrade", "websocket"},
                             {"Sec-WebSocket-Key", "abc=="},
                             {"Connection", "upgrade"}}));
  Views resp = {{"Upgrade", "websocket"}, {"Connection", "upgrade"}, {"Sec-WebSocket-Accept", "x"}};
  EXPECT_EQ(rewrite_response_headers(resp, {}, true), (HeaderList{{"Upgrade", "websocket"},
                                                                  {"Sec-WebSocket-Accept", "x"},
                                                                  {"Connection", "upgrade"}}));
}

// Found by tests/fuzz/proxy_forwarding: a Connection header may not remove the Host the request
// was routed by (the back end would get the upstream's name instead).
TEST(ProxyHeadersHopByHop, ConnectionCannotNameHostAway) {
  Views in = {{"Host", "a.test"}, {"Connection", "host, X-Gone"}, {"X-Gone", "1"}};
  EXPECT_EQ(rewrite_request_headers(in, context(), bare()), (HeaderList{{"Host", "a.test"}}));
}

// h2c is never offered to a back end, not even beside another protocol: a back end that took
// it up would read requests that never passed our routes ("h2c smuggling").
TEST(ProxyHeadersHopByHop, TunnelNeverForwardsH2c) {
  RequestContext c = context();
  c.tunnel = true;
  Views in = {{"Host", "a"},
              {"Connection", "Upgrade, HTTP2-Settings"},
              {"Upgrade", "H2C, websocket"},
              {"HTTP2-Settings", "AAMAAABkAAQCAAAAAAIAAAAA"}};
  EXPECT_EQ(rewrite_request_headers(in, c, bare()),
            (HeaderList{{"Host", "a"}, {"Upgrade", "websocket"}, {"Connection", "upgrade"}}));
  Views only_h2c = {{"Host", "a"}, {"Connection", "Upgrade"}, {"Upgrade", "h2c"}};
  EXPECT_EQ(rewrite_request_headers(only_h2c, c, bare()), (HeaderList{{"Host", "a"}}));
}

TEST(ProxyHeadersHopByHop, TunnelWithoutUpgradeAddsNoConnection) {
  RequestContext c = context();
  c.tunnel = true;
  HeaderList out = rewrite_request_headers(Views{{"Host", "a"}}, c, bare());
  EXPECT_EQ(out, (HeaderList{{"Host", "a"}}));
}

// ---- Host
// ----------------------------------------------------------------------------------------

TEST(ProxyHeadersHost, PassKeepsClientHost) {
  HeaderList out = rewrite_request_headers(Views{{"host", "www.example.com"}}, context(), bare());
  EXPECT_EQ(out, (HeaderList{{"host", "www.example.com"}}));
}

TEST(ProxyHeadersHost, PassWithoutClientHostUsesUpstream) {
  HeaderList out = rewrite_request_headers(Views{{"Accept", "*/*"}}, context(), bare());
  EXPECT_EQ(get(out, "Host") ? *get(out, "Host") : "", "10.0.0.5:8080");
}

TEST(ProxyHeadersHost, UpstreamMode) {
  RequestOptions o = bare();
  o.host_mode = HostMode::kUpstream;
  HeaderList out =
      rewrite_request_headers(Views{{"Accept", "a"}, {"HOST", "www.example.com"}}, context(), o);
  EXPECT_EQ(out, (HeaderList{{"Accept", "a"}, {"HOST", "10.0.0.5:8080"}}));
}

TEST(ProxyHeadersHost, FixedMode) {
  RequestOptions o = bare();
  o.host_mode = HostMode::kFixed;
  o.fixed_host = "backend.internal";
  HeaderList out = rewrite_request_headers(Views{{"Host", "www.example.com"}}, context(), o);
  EXPECT_EQ(out, (HeaderList{{"Host", "backend.internal"}}));
}

// ---- forwarding headers ------------------------------------------------------------------------

TEST(ProxyHeadersForwarding, DefaultsAddAllXForwarded) {
  HeaderList out = rewrite_request_headers(Views{{"Host", "www.example.com"}}, context(), {});
  EXPECT_EQ(out, (HeaderList{{"Host", "www.example.com"},
                             {"X-Forwarded-For", "192.0.2.7"},
                             {"X-Forwarded-Proto", "https"},
                             {"X-Forwarded-Host", "www.example.com"},
                             {"X-Real-IP", "192.0.2.7"}}));
  EXPECT_EQ(get(out, "Forwarded"), nullptr);  // RFC 7239 is opt-in
}

TEST(ProxyHeadersForwarding, XffAppends) {
  HeaderList out =
      rewrite_request_headers(Views{{"X-Forwarded-For", "203.0.113.1"}}, context(), {});
  EXPECT_EQ(*get(out, "X-Forwarded-For"), "203.0.113.1, 192.0.2.7");
}

TEST(ProxyHeadersForwarding, XffJoinsRepeatedHeadersCaseInsensitively) {
  HeaderList out = rewrite_request_headers(Views{{"x-forwarded-for", "1.1.1.1, 2.2.2.2"},
                                                 {"Accept", "x"},
                                                 {"X-FORWARDED-FOR", " 3.3.3.3 "}},
                                           context("2001:db8::9"), {});
  EXPECT_EQ(count(out, "X-Forwarded-For"), 1);
  EXPECT_EQ(count(out, "x-forwarded-for"), 0);
  EXPECT_EQ(*get(out, "X-Forwarded-For"), "1.1.1.1, 2.2.2.2, 3.3.3.3, 2001:db8::9");
}

TEST(ProxyHeadersForwarding, SpoofedSingleValueHeadersReplaced) {
  HeaderList out = rewrite_request_headers(Views{{"Host", "a.example"},
                                                 {"X-Real-IP", "6.6.6.6"},
                                                 {"x-forwarded-proto", "gopher"},
                                                 {"X-Forwarded-Host", "evil.example"}},
                                           context("192.0.2.7", "http"), {});
  EXPECT_EQ(*get(out, "X-Real-IP"), "192.0.2.7");
  EXPECT_EQ(*get(out, "X-Forwarded-Proto"), "http");
  EXPECT_EQ(get(out, "x-forwarded-proto"), nullptr);
  EXPECT_EQ(*get(out, "X-Forwarded-Host"), "a.example");
}

TEST(ProxyHeadersForwarding, DisabledHeadersPassThrough) {
  HeaderList out = rewrite_request_headers(
      Views{{"X-Forwarded-For", "1.1.1.1"}, {"X-Real-IP", "9.9.9.9"}}, context(), bare());
  EXPECT_EQ(*get(out, "X-Forwarded-For"), "1.1.1.1");
  EXPECT_EQ(*get(out, "X-Real-IP"), "9.9.9.9");
}

TEST(ProxyHeadersForwarding, ForwardedIpv4) {
  RequestOptions o = bare();
  o.forwarding.forwarded = true;
  HeaderList out = rewrite_request_headers(Views{{"Host", "example.com"}}, context(), o);
  EXPECT_EQ(*get(out, "Forwarded"), "for=192.0.2.7;proto=https;host=example.com");
}

TEST(ProxyHeadersForwarding, ForwardedIpv6QuotedAndBracketed) {
  RequestOptions o = bare();
  o.forwarding.forwarded = true;
  HeaderList out =
      rewrite_request_headers(Views{{"Host", "example.com:8443"}}, context("2001:db8::1"), o);
  EXPECT_EQ(*get(out, "Forwarded"), "for=\"[2001:db8::1]\";proto=https;host=\"example.com:8443\"");
}

TEST(ProxyHeadersForwarding, ForwardedAppendsToExisting) {
  RequestOptions o = bare();
  o.forwarding.forwarded = true;
  HeaderList out = rewrite_request_headers(Views{{"forwarded", "for=198.51.100.17"}, {"Host", "h"}},
                                           context("192.0.2.7", "http"), o);
  EXPECT_EQ(count(out, "Forwarded"), 1);
  EXPECT_EQ(*get(out, "Forwarded"), "for=198.51.100.17, for=192.0.2.7;proto=http;host=h");
}

TEST(ProxyHeadersForwarding, ForwardedElementEscapes) {
  EXPECT_EQ(forwarded_element("", "http", "a\"b"), "proto=http;host=\"a\\\"b\"");
  EXPECT_EQ(forwarded_element("[::1]", "", ""), "for=\"[::1]\"");
  EXPECT_EQ(forwarded_element("unknown", "", ""), "for=unknown");
}

// ---- route rules
// ---------------------------------------------------------------------------------

TEST(ProxyHeadersRules, RemoveSetAddOrder) {
  RequestOptions o = bare();
  o.rules.remove = {"cookie"};
  o.rules.set = {{"X-App", "one"}};
  o.rules.add = {{"X-App", "two"}, {"Cookie", "added=1"}};
  HeaderList out = rewrite_request_headers(
      Views{{"Cookie", "a=1"}, {"x-app", "client"}, {"x-app", "client2"}}, context(), o);
  // remove drops the client's Cookie, set replaces the first X-App in place (and drops the
  // second), add appends after.
  EXPECT_EQ(
      out,
      (HeaderList{
          {"x-app", "one"}, {"Host", "10.0.0.5:8080"}, {"X-App", "two"}, {"Cookie", "added=1"}}));
}

TEST(ProxyHeadersRules, SetEmptyRemoves) {
  RequestOptions o = bare();
  o.rules.set = {{"Accept-Encoding", ""}};
  HeaderList out =
      rewrite_request_headers(Views{{"Host", "h"}, {"accept-encoding", "gzip"}}, context(), o);
  EXPECT_EQ(out, (HeaderList{{"Host", "h"}}));
}

TEST(ProxyHeadersRules, RulesSeeForwardingHeaders) {
  RequestOptions o;
  o.rules.remove = {"x-real-ip"};
  o.rules.set = {{"X-Forwarded-Proto", "https"}};
  HeaderList out = rewrite_request_headers(Views{{"Host", "h"}}, context("1.2.3.4", "http"), o);
  EXPECT_EQ(get(out, "X-Real-IP"), nullptr);
  EXPECT_EQ(*get(out, "X-Forwarded-Proto"), "https");
}

TEST(ProxyHeadersRules, ResponseRules) {
  ResponseOptions o;
  o.rules.remove = {"Server", "X-Powered-By"};
  o.rules.set = {{"Cache-Control", "no-store"}};
  o.rules.add = {{"X-Frame-Options", "DENY"}};
  HeaderList out = rewrite_response_headers(Views{{"server", "Apache-Coyote/1.1"},
                                                  {"X-Powered-By", "JSP"},
                                                  {"Content-Length", "5"},
                                                  {"Cache-Control", "public"}},
                                            o);
  EXPECT_EQ(out, (HeaderList{{"Content-Length", "5"},
                             {"Cache-Control", "no-store"},
                             {"X-Frame-Options", "DENY"}}));
}

TEST(ProxyHeadersRules, ApplyRulesDirect) {
  HeaderList h = {{"A", "1"}};
  HeaderRules r;
  r.set = {{"B", "2"}};
  apply_rules(h, r);
  EXPECT_EQ(h, (HeaderList{{"A", "1"}, {"B", "2"}}));
}

// ---- path mapping
// --------------------------------------------------------------------------------

TEST(ProxyHeadersPath, StripPrefix) {
  EXPECT_EQ(map_path("/app/x/y?q=1", "/app/", ""), "/x/y?q=1");
  EXPECT_EQ(map_path("/app/x", "/app", ""), "/x");
  EXPECT_EQ(map_path("/app", "/app", ""), "/");
  EXPECT_EQ(map_path("/app?x=1", "/app", ""), "/?x=1");
  EXPECT_EQ(map_path("/app/", "/app/", ""), "/");
}

TEST(ProxyHeadersPath, ReplacePrefix) {
  EXPECT_EQ(map_path("/app/x", "/app/", "/tomcat/app/"), "/tomcat/app/x");
  EXPECT_EQ(map_path("/app/x", "/app", "/v2"), "/v2/x");
  EXPECT_EQ(map_path("/app/x", "/app", "/v2/"), "/v2/x");
  EXPECT_EQ(map_path("/app/x", "/app/", "/"), "/x");
  EXPECT_EQ(map_path("/app", "/app", "/v2"), "/v2");
  EXPECT_EQ(map_path("/app/x", "/app/", "v2"), "/v2/x");
}

TEST(ProxyHeadersPath, PrefixMustEndAtSegment) {
  EXPECT_EQ(map_path("/application", "/app", ""), std::nullopt);
  EXPECT_EQ(map_path("/other", "/app", ""), std::nullopt);
  EXPECT_EQ(map_path("/x", "/", "/base/"), "/base/x");
}

// ---- Location / Refresh
// --------------------------------------------------------------------------

TEST(ProxyHeadersLocation, RewritesUpstreamOrigin) {
  EXPECT_EQ(rewrite_url("http://10.0.0.5:8080/login?next=/a", "http://10.0.0.5:8080",
                        "https://www.example.com"),
            "https://www.example.com/login?next=/a");
}

TEST(ProxyHeadersLocation, CaseInsensitiveSchemeAndHost) {
  EXPECT_EQ(rewrite_url("HTTP://Backend.Local:8080/x", "http://backend.local:8080",
                        "https://example.com"),
            "https://example.com/x");
}

TEST(ProxyHeadersLocation, DefaultPortEquivalence) {
  EXPECT_EQ(rewrite_url("http://backend/x", "http://backend:80", "https://e.com"),
            "https://e.com/x");
  EXPECT_EQ(rewrite_url("http://backend:80/x", "http://backend", "https://e.com"),
            "https://e.com/x");
  EXPECT_EQ(rewrite_url("https://backend/x", "http://backend", "https://e.com"), std::nullopt);
}

TEST(ProxyHeadersLocation, OtherOriginsUntouched) {
  EXPECT_EQ(rewrite_url("http://10.0.0.5:8081/x", "http://10.0.0.5:8080", "https://e.com"),
            std::nullopt);
  EXPECT_EQ(rewrite_url("http://10.0.0.50:8080/x", "http://10.0.0.5:8080", "https://e.com"),
            std::nullopt);
  EXPECT_EQ(rewrite_url("/relative/path", "http://10.0.0.5:8080", "https://e.com"), std::nullopt);
  EXPECT_EQ(rewrite_url("http://user@10.0.0.5:8080/x", "http://10.0.0.5:8080", "https://e.com"),
            std::nullopt);
  // A host that merely starts with the upstream's name is another host.
  EXPECT_EQ(rewrite_url("http://backend.evil/x", "http://backend", "https://e.com"), std::nullopt);
}

TEST(ProxyHeadersLocation, BareOriginAndFragment) {
  EXPECT_EQ(rewrite_url("http://up:8080", "http://up:8080", "https://e.com"), "https://e.com/");
  EXPECT_EQ(rewrite_url("http://up:8080#top", "http://up:8080", "https://e.com/"),
            "https://e.com/#top");
  EXPECT_EQ(rewrite_url("http://up:8080?a=1", "http://up:8080", "https://e.com:8443"),
            "https://e.com:8443/?a=1");
}

TEST(ProxyHeadersLocation, Ipv6Upstream) {
  EXPECT_EQ(rewrite_url("http://[::1]:8080/a", "http://[::1]:8080", "https://e.com"),
            "https://e.com/a");
  EXPECT_EQ(rewrite_url("http://[::2]:8080/a", "http://[::1]:8080", "https://e.com"), std::nullopt);
}

TEST(ProxyHeadersLocation, ResponseHeaderRewritten) {
  ResponseOptions o;
  o.upstream_origin = "http://127.0.0.1:8080";
  o.client_origin = "https://shop.example";
  HeaderList out = rewrite_response_headers(Views{{"location", "http://127.0.0.1:8080/cart"},
                                                  {"Content-Location", "http://127.0.0.1:8080/c"}},
                                            o);
  EXPECT_EQ(out, (HeaderList{{"location", "https://shop.example/cart"},
                             {"Content-Location", "http://127.0.0.1:8080/c"}}));
  o.rewrite_location = false;
  out = rewrite_response_headers(Views{{"Location", "http://127.0.0.1:8080/cart"}}, o);
  EXPECT_EQ(*get(out, "Location"), "http://127.0.0.1:8080/cart");
}

TEST(ProxyHeadersLocation, NoOriginsNoRewrite) {
  HeaderList out = rewrite_response_headers(Views{{"Location", "http://up/x"}}, {});
  EXPECT_EQ(*get(out, "Location"), "http://up/x");
}

TEST(ProxyHeadersRefresh, Forms) {
  const char* up = "http://up:8080";
  const char* client = "https://e.com";
  EXPECT_EQ(rewrite_refresh("5; url=http://up:8080/next", up, client), "5; url=https://e.com/next");
  EXPECT_EQ(rewrite_refresh("0;URL='http://up:8080/a?b'", up, client), "0;URL='https://e.com/a?b'");
  EXPECT_EQ(rewrite_refresh("3 ; Url = \"http://up:8080/q\" ", up, client),
            "3 ; Url = \"https://e.com/q\" ");
  EXPECT_EQ(rewrite_refresh("5", up, client), std::nullopt);
  EXPECT_EQ(rewrite_refresh("5; url=/local", up, client), std::nullopt);
  EXPECT_EQ(rewrite_refresh("5; link=http://up:8080/", up, client), std::nullopt);
}

TEST(ProxyHeadersRefresh, ResponseHeaderRewritten) {
  ResponseOptions o;
  o.upstream_origin = "http://up:8080";
  o.client_origin = "https://e.com";
  HeaderList out = rewrite_response_headers(Views{{"Refresh", "1; url=http://up:8080/x"}}, o);
  EXPECT_EQ(*get(out, "Refresh"), "1; url=https://e.com/x");
}

// ---- serialization ------------------------------------------------------------------------------

TEST(ProxyHeadersBlock, Serializes) {
  std::string out = "GET / HTTP/1.1\r\n";
  append_header_block(out, {{"Host", "h"}, {"X-Forwarded-For", "1.2.3.4"}});
  EXPECT_EQ(out, "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1.2.3.4\r\n");
}

TEST(ProxyHeadersBlock, FullRequestPipeline) {
  Views in = {{"Host", "www.example.com"},
              {"Connection", "keep-alive, X-Hop"},
              {"X-Hop", "1"},
              {"User-Agent", "curl"},
              {"X-Forwarded-For", "10.9.8.7"}};
  RequestOptions o;
  o.forwarding.forwarded = true;
  o.rules.add = {{"X-Route", "java"}};
  std::string block;
  append_header_block(block, rewrite_request_headers(in, context("2001:db8::5", "https"), o));
  EXPECT_EQ(block,
            "Host: www.example.com\r\n"
            "User-Agent: curl\r\n"
            "X-Forwarded-For: 10.9.8.7, 2001:db8::5\r\n"
            "X-Forwarded-Proto: https\r\n"
            "X-Forwarded-Host: www.example.com\r\n"
            "X-Real-IP: 2001:db8::5\r\n"
            "Forwarded: for=\"[2001:db8::5]\";proto=https;host=www.example.com\r\n"
            "X-Route: java\r\n");
}

}  // namespace
}  // namespace peregrine::proxy
