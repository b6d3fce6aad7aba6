// An htpasswd file (Apache's format: "user:hash" per line), parsed when the configuration is
// loaded, and the verification of a password against it. bcrypt ($2y$/$2b$/$2a$), SHA-512 and
// SHA-256 crypt ($6$/$5$) and yescrypt ($y$) go through libcrypt; apr1-MD5 ($apr1$, htpasswd -m)
// is computed here with OpenSSL's MD5. Plaintext, {SHA} (unsalted SHA-1) and DES crypt are
// refused when the file is read.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace peregrine::auth {

enum class HashKind { kBcrypt, kSha512, kSha256, kYescrypt, kApr1 };

// The kind of a stored hash by its prefix; false when it is not one we accept.
bool hash_kind(std::string_view hash, HashKind* kind);

// apr1-MD5 (Apache's variant of the FreeBSD MD5 crypt) of `password` with `salt` (up to 8
// characters): "$apr1$SALT$22 characters".
std::string apr1_crypt(std::string_view password, std::string_view salt);

// True when `password` hashes to `hash` (compared in constant time).
bool verify_hash(std::string_view hash, HashKind kind, std::string_view password);

struct HtpasswdProblem {
  size_t line = 0;    // 1-based
  size_t column = 0;  // 1-based
  std::string message;
  std::string hint;
};

class Htpasswd {
 public:
  struct Entry {
    std::string user;
    std::string hash;
    HashKind kind;
  };

  // Parses the file's text. Blank lines and lines starting with '#' are skipped. Every problem
  // is reported; the result is usable only when there are none.
  static Htpasswd parse(std::string_view text, std::vector<HtpasswdProblem>* problems);

  size_t size() const { return entries_.size(); }
  const Entry* find(std::string_view user) const;
  // The entry whose password this is, or null. A user not in the file costs one verification
  // against another entry's hash all the same, so the time taken does not tell who exists.
  const Entry* verify(std::string_view user, std::string_view password) const;

 private:
  std::vector<Entry> entries_;
  std::unordered_map<std::string_view, size_t> by_user_;  // views into entries_ (not moved after)
};

}  // namespace peregrine::auth
