// The state folder (/var/lib/peregrine by default, [acme] state): account keys, certificate keys,
// chains and their metadata, and the lock that makes a fleet sharing the folder order each
// certificate once.
//
//   <state>/accounts/<ca>/account.key      PKCS#8 PEM, 0600
//   <state>/accounts/<ca>/account.json     {"url": ...} once registered
//   <state>/certificates/<name>/key.pem    PKCS#8 PEM, 0600
//   <state>/certificates/<name>/chain.pem  the chain as the CA sent it
//   <state>/certificates/<name>/meta.json  names, issuer, notBefore/notAfter, ARI id, order URL
//   <state>/certificates/<name>/lock       holder and expiry (see OrderLock)
//
// <ca> is the directory URL's host and port with every other byte made '_' ("acme-v02.api.
// letsencrypt.org", "127.0.0.1_14000"); <name> the first host name of the certificate ("*"
// written "_wildcard_"). Every file is written atomically; a damaged one is reported with its
// path and what is wrong, never a crash.
#pragma once

#include <sys/types.h>

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace peregrine::acme {

// Writes `data` to a temporary file beside `path` (mode `mode`), fsyncs it, renames it over
// `path` and fsyncs the folder, so a crash leaves the old file or the new one, never half of one.
// Creates missing parent folders (0700). false with *error ("PATH: what") on failure.
bool write_file_atomic(const std::string& path, std::string_view data, mode_t mode,
                       std::string* error);
// nullopt with *error ("PATH: No such file or directory") when it cannot be read; refuses files
// over `limit` bytes.
std::optional<std::string> read_file(const std::string& path, size_t limit, std::string* error);
bool make_dirs(const std::string& path, std::string* error);

std::string account_folder(std::string_view state, std::string_view directory_url);
std::string certificate_folder(std::string_view state, std::string_view first_name);

struct CertificateMeta {
  std::vector<std::string> names;
  std::string issuer;
  time_t not_before = 0;
  time_t not_after = 0;
  std::string ari_id;     // RFC 9773 certificate identifier, empty when none
  std::string order_url;  // where it came from
  std::string directory_url;
};
std::string format_meta(const CertificateMeta& meta);
std::optional<CertificateMeta> parse_meta(std::string_view text, std::string* error);

// A stored certificate, checked: the chain parses, the key parses and matches the chain's first
// certificate, meta.json parses. nullopt with *error ("<folder>/key.pem: ...") naming the file
// and what is wrong; a folder without chain.pem is "not issued yet" (*error says so too).
struct StoredCertificate {
  CertificateMeta meta;
  std::string chain_pem;
  std::string key_pem;
  time_t not_before = 0;
  time_t not_after = 0;
};
std::optional<StoredCertificate> load_certificate(const std::string& folder, std::string* error);

// A lock with an expiry in a shared folder: created with O_CREAT|O_EXCL, holding
// "holder\nexpiry-unix-seconds\n". One that has expired (its holder died or hangs) is taken over.
// The take-over renames the stale file aside and checks it moved the very file it judged stale
// (the same inode), putting back a fresh lock another instance made meanwhile: two instances
// never both hold it. On NFS, O_EXCL is atomic since NFSv3, as rename(2) always is.
class OrderLock {
 public:
  enum class Result { kAcquired, kHeld, kError };
  struct Outcome {
    Result result = Result::kError;
    std::string holder;  // kHeld: who holds it
    time_t expires = 0;  // kHeld: until when
    std::string error;   // kError, or a note when a stale or damaged lock was taken over
  };
  // `holder` identifies this instance ("host:pid"); the lock expires at now + ttl.
  static Outcome acquire(const std::string& path, std::string_view holder, time_t now, time_t ttl);
  // Pushes the expiry on while a long order runs; false if the lock is no longer ours.
  static bool refresh(const std::string& path, std::string_view holder, time_t now, time_t ttl);
  // Removes the lock if it is still ours.
  static bool release(const std::string& path, std::string_view holder);
};

// "host:pid", what OrderLock names a holder by.
std::string lock_holder_name();

}  // namespace peregrine::acme
