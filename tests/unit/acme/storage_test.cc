#include "acme/storage.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "acme/crypto.h"

namespace peregrine::acme {
namespace {

class AcmeStorage : public ::testing::Test {
 protected:
  AcmeStorage() {
    char tmpl[] = "/tmp/acme-storage-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~AcmeStorage() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(AcmeStorage, AtomicWriteMakesFoldersAndSetsTheMode) {
  std::string path = dir_ + "/certificates/a.test/key.pem";
  std::string error;
  mode_t old = umask(0);
  ASSERT_TRUE(write_file_atomic(path, "secret", 0600, &error)) << error;
  umask(old);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((dir_ + "/certificates").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(read_file(path, 100, &error), "secret");
  ASSERT_TRUE(write_file_atomic(path, "second", 0600, &error)) << error;
  EXPECT_EQ(read_file(path, 100, &error), "second");
  // No temporary file is left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/certificates/a.test")) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST_F(AcmeStorage, ErrorsNameThePath) {
  std::string error;
  EXPECT_FALSE(read_file(dir_ + "/missing", 100, &error));
  EXPECT_EQ(error, dir_ + "/missing: No such file or directory");
  ASSERT_TRUE(write_file_atomic(dir_ + "/big", std::string(200, 'x'), 0644, &error));
  EXPECT_FALSE(read_file(dir_ + "/big", 100, &error));
  EXPECT_EQ(error, dir_ + "/big: larger than 100 bytes");
  ASSERT_TRUE(write_file_atomic(dir_ + "/file", "x", 0644, &error));
  EXPECT_FALSE(write_file_atomic(dir_ + "/file/inside", "x", 0644, &error));
  EXPECT_EQ(error, dir_ + "/file: exists and is not a folder");
}

TEST_F(AcmeStorage, FolderNames) {
  EXPECT_EQ(account_folder("/s", "https://acme-v02.api.letsencrypt.org/directory"),
            "/s/accounts/acme-v02.api.letsencrypt.org");
  EXPECT_EQ(account_folder("/s", "https://127.0.0.1:14000/dir"), "/s/accounts/127.0.0.1_14000");
  EXPECT_EQ(certificate_folder("/s", "www.a.test"), "/s/certificates/www.a.test");
  EXPECT_EQ(certificate_folder("/s", "*.a.test"), "/s/certificates/_wildcard_.a.test");
  EXPECT_EQ(certificate_folder("/s", "../../etc"), "/s/certificates/.._.._etc");
  EXPECT_EQ(certificate_folder("/s", ".."), "/s/certificates/_..");
}

TEST_F(AcmeStorage, MetaRoundTripAndDamage) {
  CertificateMeta meta{{"a.test", "www.a.test"}, "Pebble Intermediate", 100, 200, "aa.bb",
                       "https://ca/o/1",         "https://ca/dir"};
  std::string error;
  auto back = parse_meta(format_meta(meta), &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->names, meta.names);
  EXPECT_EQ(back->not_after, 200);
  EXPECT_EQ(back->ari_id, "aa.bb");
  EXPECT_FALSE(parse_meta("{\"names\":[\"a\"],\"not_bef", &error));
  EXPECT_EQ(error, "not a JSON object");
  EXPECT_FALSE(parse_meta(R"({"names":[],"not_before":1,"not_after":2})", &error));
  EXPECT_EQ(error, "\"names\" is missing or not a list of names");
  EXPECT_FALSE(parse_meta(R"({"names":["a"],"not_before":"x","not_after":2})", &error));
  EXPECT_FALSE(parse_meta(R"({"names":["a",5],"not_before":1,"not_after":2})", &error));
}

TEST_F(AcmeStorage, LockIsExclusiveUntilReleasedOrExpired) {
  std::string lock = dir_ + "/certificates/a.test/lock";
  auto a = OrderLock::acquire(lock, "host-a:1", 1000, 600);
  ASSERT_EQ(a.result, OrderLock::Result::kAcquired) << a.error;
  auto b = OrderLock::acquire(lock, "host-b:2", 1001, 600);
  EXPECT_EQ(b.result, OrderLock::Result::kHeld);
  EXPECT_EQ(b.holder, "host-a:1");
  EXPECT_EQ(b.expires, 1600);
  EXPECT_FALSE(OrderLock::release(lock, "host-b:2"));  // not b's to release
  EXPECT_TRUE(OrderLock::refresh(lock, "host-a:1", 1500, 600));
  EXPECT_EQ(OrderLock::acquire(lock, "host-b:2", 1700, 600).result, OrderLock::Result::kHeld);
  // Past the expiry the lock is stale and taken over, with a note saying whose it was.
  auto c = OrderLock::acquire(lock, "host-b:2", 2101, 600);
  ASSERT_EQ(c.result, OrderLock::Result::kAcquired) << c.error;
  EXPECT_EQ(c.error, "took over the lock of host-a:1, expired 1 s ago");
  EXPECT_FALSE(OrderLock::refresh(lock, "host-a:1", 2102, 600));  // a's is gone
  EXPECT_TRUE(OrderLock::release(lock, "host-b:2"));
  EXPECT_EQ(OrderLock::acquire(lock, "host-a:1", 2200, 600).result, OrderLock::Result::kAcquired);
  // Nothing but the lock is left in the folder (no ".stale" file).
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/certificates/a.test")) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST_F(AcmeStorage, DamagedLockIsTakenOverOnlyOnceItIsOld) {
  std::string lock = dir_ + "/lock";
  { std::ofstream(lock) << "garbage"; }
  time_t now = time(nullptr);
  auto young = OrderLock::acquire(lock, "me:1", now, 600);
  EXPECT_EQ(young.result, OrderLock::Result::kHeld);  // maybe being written this instant
  auto old = OrderLock::acquire(lock, "me:1", now + 60, 600);
  ASSERT_EQ(old.result, OrderLock::Result::kAcquired) << old.error;
  EXPECT_EQ(old.error, "took over a damaged lock (" + lock + ")");
}

TEST_F(AcmeStorage, ManyProcessesRacingForAStaleLockGetOneHolder) {
  std::string lock = dir_ + "/lock";
  { std::ofstream(lock) << "dead:1\n5\n"; }  // expired long ago
  std::string winners = dir_ + "/winners";
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      auto out = OrderLock::acquire(lock, "child:" + std::to_string(i), 1000, 600);
      if (out.result == OrderLock::Result::kAcquired) {
        FILE* f = fopen(winners.c_str(), "a");
        fprintf(f, "%d\n", i);
        fclose(f);
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  std::string error;
  auto text = read_file(winners, 1000, &error);
  ASSERT_TRUE(text) << error;
  EXPECT_EQ(std::count(text->begin(), text->end(), '\n'), 1) << *text;
}

TEST_F(AcmeStorage, StoredCertificateIsCheckedAndDamageNamesTheFile) {
  std::string error;
  auto cert = make_tls_alpn_certificate("a.test", "k", &error);
  ASSERT_TRUE(cert) << error;
  std::string folder = certificate_folder(dir_, "a.test");
  EXPECT_FALSE(load_certificate(folder, &error));
  EXPECT_EQ(error, folder + "/chain.pem: No such file or directory");
  CertificateMeta meta{{"a.test"}, "issuer", 1, 2, "", "", ""};
  ASSERT_TRUE(write_file_atomic(folder + "/chain.pem", cert->certificate_pem, 0644, &error));
  ASSERT_TRUE(write_file_atomic(folder + "/key.pem", cert->key_pem, 0600, &error));
  ASSERT_TRUE(write_file_atomic(folder + "/meta.json", format_meta(meta), 0644, &error));
  auto stored = load_certificate(folder, &error);
  ASSERT_TRUE(stored) << error;
  EXPECT_EQ(stored->meta.names, meta.names);
  EXPECT_GT(stored->not_after, stored->not_before);

  PkeyPtr other = generate_key(KeyType::kEcdsaP256);
  ASSERT_TRUE(write_file_atomic(folder + "/key.pem", private_key_pem(other.get()), 0600, &error));
  EXPECT_FALSE(load_certificate(folder, &error));
  EXPECT_EQ(error, folder + "/key.pem: the key does not match the certificate in " + folder +
                       "/chain.pem");
  ASSERT_TRUE(write_file_atomic(folder + "/key.pem", "junk", 0600, &error));
  EXPECT_FALSE(load_certificate(folder, &error));
  EXPECT_EQ(error.rfind(folder + "/key.pem: not a PEM private key", 0), 0u) << error;
  ASSERT_TRUE(write_file_atomic(folder + "/key.pem", cert->key_pem, 0600, &error));
  ASSERT_TRUE(write_file_atomic(folder + "/meta.json", "{\"names\":", 0644, &error));
  EXPECT_FALSE(load_certificate(folder, &error));
  EXPECT_EQ(error, folder + "/meta.json: not a JSON object");
  ASSERT_TRUE(
      write_file_atomic(folder + "/chain.pem", cert->certificate_pem.substr(0, 100), 0644, &error));
  EXPECT_FALSE(load_certificate(folder, &error));
  EXPECT_EQ(error, folder + "/chain.pem: certificate 1 of the chain is cut short");
}

}  // namespace
}  // namespace peregrine::acme
