#include "peregrine/request.h"

#include <gtest/gtest.h>
#include <netinet/in.h>

namespace peregrine {
namespace {

struct NoTls final : TlsSession {
  std::string_view version() const override { return {}; }
  std::string_view cipher() const override { return {}; }
  int cipher_bits() const override { return 0; }
  std::string session_id_hex() const override { return {}; }
  std::string client_certificate_pem() const override { return {}; }
  std::string_view client_verify() const override { return "NONE"; }
  std::string_view client_subject_dn() const override { return {}; }
  std::string_view client_issuer_dn() const override { return {}; }
  std::string_view client_serial() const override { return {}; }
  std::string_view client_fingerprint() const override { return {}; }
};

TEST(RequestAssign, CopiesEveryField) {
  // assign() lists the members by hand; a new member changes the size and must be added there.
  EXPECT_EQ(sizeof(Request), 3512u) << "Request changed: update Request::assign()";

  sockaddr_in peer{}, local{};
  Request a;
  a.method = Method::kPost;
  a.method_text = "POST";
  a.target = "/a%20b?x=1";
  a.raw_path = "/a%20b";
  a.query = "x=1";
  a.authority = "example.com";
  a.version_minor = 0;
  a.version_major = 2;
  a.headers[0] = {"Host", "example.com"};
  a.headers[1] = {"Content-Type", "text/plain"};
  a.header_count = 2;
  a.host = "example.com";
  a.content_length = 5;
  a.chunked = true;
  a.keep_alive = false;
  a.expect_continue = true;
  a.upgrade = true;
  a.path_storage = "/a b";
  a.path = a.path_storage;
  a.body = "hello";
  a.peer = reinterpret_cast<const sockaddr*>(&peer);
  a.peer_len = sizeof peer;
  a.local = reinterpret_cast<const sockaddr*>(&local);
  a.local_len = sizeof local;
  a.socket_peer = reinterpret_cast<const sockaddr*>(&local);
  a.socket_peer_len = sizeof local;
  a.request_id = "id-1";
  a.remote_user = "alice";
  a.upstream = {"127.0.0.1:9000", 200, 12};
  NoTls tls;
  a.tls = &tls;

  Request b;
  b.headers[2] = {"Stale", "untouched"};
  b.assign(a);
  EXPECT_EQ(b.method, Method::kPost);
  EXPECT_EQ(b.method_text, "POST");
  EXPECT_EQ(b.target, a.target);
  EXPECT_EQ(b.raw_path, a.raw_path);
  EXPECT_EQ(b.query, a.query);
  EXPECT_EQ(b.authority, a.authority);
  EXPECT_EQ(b.version_minor, 0);
  EXPECT_EQ(b.version_major, 2);
  ASSERT_EQ(b.header_count, 2);
  EXPECT_EQ(b.headers[1].name, "Content-Type");
  EXPECT_EQ(b.headers[2].name, "Stale");  // beyond header_count: not copied
  EXPECT_EQ(b.host, "example.com");
  EXPECT_EQ(b.content_length, 5);
  EXPECT_TRUE(b.chunked);
  EXPECT_FALSE(b.keep_alive);
  EXPECT_TRUE(b.expect_continue);
  EXPECT_TRUE(b.upgrade);
  EXPECT_EQ(b.path, "/a b");
  EXPECT_EQ(b.path.data(), b.path_storage.data()) << "path must point at the copy's storage";
  EXPECT_EQ(b.body, "hello");
  EXPECT_EQ(b.peer, a.peer);
  EXPECT_EQ(b.peer_len, a.peer_len);
  EXPECT_EQ(b.local, a.local);
  EXPECT_EQ(b.local_len, a.local_len);
  EXPECT_EQ(b.socket_peer, a.socket_peer);
  EXPECT_EQ(b.socket_peer_len, a.socket_peer_len);
  EXPECT_EQ(b.request_id, "id-1");
  EXPECT_EQ(b.remote_user, "alice");
  EXPECT_EQ(b.upstream.address, "127.0.0.1:9000");
  EXPECT_EQ(b.upstream.status, 200);
  EXPECT_EQ(b.upstream.time_ms, 12);
  EXPECT_EQ(b.tls, &tls);

  // A path that is a view into the read buffer (not path_storage) stays that view.
  a.path = a.raw_path;
  b.assign(a);
  EXPECT_EQ(b.path.data(), a.raw_path.data());
}

}  // namespace
}  // namespace peregrine
