#include "auth/htpasswd.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <array>
#include <cstring>
#include <memory>
#include <set>

namespace peregrine::auth {

namespace {

constexpr std::string_view kApr1Magic = "$apr1$";
constexpr char kCryptAlphabet[] =
    "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

// Appends `count` characters of the crypt base-64 alphabet, least significant 6 bits first.
void append_base64(std::string& out, unsigned value, int count) {
  while (count-- > 0) {
    out += kCryptAlphabet[value & 0x3f];
    value >>= 6;
  }
}

class Md5 {
 public:
  Md5() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_md5(), nullptr); }
  ~Md5() { EVP_MD_CTX_free(ctx_); }
  Md5(const Md5&) = delete;
  Md5& operator=(const Md5&) = delete;
  void reset() { EVP_DigestInit_ex(ctx_, EVP_md5(), nullptr); }
  void update(std::string_view bytes) { EVP_DigestUpdate(ctx_, bytes.data(), bytes.size()); }
  void update(const std::array<unsigned char, 16>& digest, size_t length = 16) {
    EVP_DigestUpdate(ctx_, digest.data(), length);
  }
  std::array<unsigned char, 16> final() {
    std::array<unsigned char, 16> digest{};
    unsigned int length = 0;
    EVP_DigestFinal_ex(ctx_, digest.data(), &length);
    return digest;
  }

 private:
  EVP_MD_CTX* ctx_;
};

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;  // the length of a hash of a known kind is no secret
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool crypt_matches(std::string_view hash, std::string_view password) {
  // libcrypt wants NUL-terminated strings; a password with a NUL in it cannot match.
  if (password.find('\0') != std::string_view::npos || password.size() > 1024) return false;
  thread_local std::unique_ptr<crypt_data> data = std::make_unique<crypt_data>();
  std::string phrase(password);
  std::string setting(hash);
  std::memset(data.get(), 0, sizeof(crypt_data));
  const char* out = crypt_rn(phrase.c_str(), setting.c_str(), data.get(), sizeof(crypt_data));
  bool ok = out != nullptr && out[0] != '*' && equal_in_constant_time(out, hash);
  OPENSSL_cleanse(phrase.data(), phrase.size());
  return ok;
}

}  // namespace

bool hash_kind(std::string_view hash, HashKind* kind) {
  if (hash.starts_with("$2y$") || hash.starts_with("$2b$") || hash.starts_with("$2a$")) {
    *kind = HashKind::kBcrypt;
  } else if (hash.starts_with("$6$")) {
    *kind = HashKind::kSha512;
  } else if (hash.starts_with("$5$")) {
    *kind = HashKind::kSha256;
  } else if (hash.starts_with("$y$")) {
    *kind = HashKind::kYescrypt;
  } else if (hash.starts_with(kApr1Magic)) {
    *kind = HashKind::kApr1;
  } else {
    return false;
  }
  return true;
}

std::string apr1_crypt(std::string_view password, std::string_view salt) {
  salt = salt.substr(0, std::min(salt.find('$'), size_t{8}));
  Md5 main;
  main.update(password);
  main.update(kApr1Magic);
  main.update(salt);
  Md5 alternate;
  alternate.update(password);
  alternate.update(salt);
  alternate.update(password);
  std::array<unsigned char, 16> digest = alternate.final();
  for (size_t left = password.size(); left > 0; left -= std::min(left, size_t{16}))
    main.update(digest, std::min(left, size_t{16}));
  // The bits of the length choose, from the lowest up, a NUL byte or the password's first.
  for (size_t bits = password.size(); bits != 0; bits >>= 1)
    main.update(bits & 1 ? std::string_view("\0", 1) : password.substr(0, 1));
  digest = main.final();
  // A thousand rounds, to make each guess cost more.
  Md5 round;
  for (int i = 0; i < 1000; ++i) {
    round.reset();
    if (i & 1)
      round.update(password);
    else
      round.update(digest);
    if (i % 3) round.update(salt);
    if (i % 7) round.update(password);
    if (i & 1)
      round.update(digest);
    else
      round.update(password);
    digest = round.final();
  }
  std::string out(kApr1Magic);
  out.append(salt).append("$");
  auto d = [&](int i) { return static_cast<unsigned>(digest[static_cast<size_t>(i)]); };
  append_base64(out, (d(0) << 16) | (d(6) << 8) | d(12), 4);
  append_base64(out, (d(1) << 16) | (d(7) << 8) | d(13), 4);
  append_base64(out, (d(2) << 16) | (d(8) << 8) | d(14), 4);
  append_base64(out, (d(3) << 16) | (d(9) << 8) | d(15), 4);
  append_base64(out, (d(4) << 16) | (d(10) << 8) | d(5), 4);
  append_base64(out, d(11), 2);
  return out;
}

bool verify_hash(std::string_view hash, HashKind kind, std::string_view password) {
  if (kind == HashKind::kApr1) {
    std::string_view salt = hash.substr(kApr1Magic.size());
    std::string computed = apr1_crypt(password, salt);
    bool ok = equal_in_constant_time(computed, hash);
    OPENSSL_cleanse(computed.data(), computed.size());
    return ok;
  }
  return crypt_matches(hash, password);
}

Htpasswd Htpasswd::parse(std::string_view text, std::vector<HtpasswdProblem>* problems) {
  Htpasswd file;
  std::set<std::string, std::less<>> seen;
  size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    auto problem = [&](size_t column, std::string message, std::string hint) {
      problems->push_back({line_number, column, std::move(message), std::move(hint)});
    };
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      problem(1, "not a \"user:hash\" line", "create entries with htpasswd -B FILE USER");
      continue;
    }
    std::string_view user = line.substr(0, colon);
    std::string_view hash = line.substr(colon + 1);
    // Apache's files may carry more fields after the hash (htdigest-like extras): ignore them.
    if (size_t extra = hash.find(':'); extra != std::string_view::npos)
      hash = hash.substr(0, extra);
    HashKind kind;
    if (!hash_kind(hash, &kind)) {
      std::string what = hash.starts_with("{SHA}") ? "an unsalted SHA-1 ({SHA}) hash"
                         : hash.empty()            ? "an empty hash"
                         : hash.starts_with("$1$") ? "an MD5-crypt ($1$) hash"
                                                   : "a plaintext or DES-crypt password";
      problem(colon + 2, "user '" + std::string(user) + "' has " + what + ", which is refused",
              "hash it with bcrypt: htpasswd -B FILE " + std::string(user) +
                  " (also accepted: $6$, $5$, $y$, $apr1$)");
      continue;
    }
    if (!seen.emplace(user).second) {
      problem(1, "user '" + std::string(user) + "' is listed twice", "keep one line per user");
      continue;
    }
    file.entries_.push_back({std::string(user), std::string(hash), kind});
  }
  for (size_t i = 0; i < file.entries_.size(); ++i) file.by_user_.emplace(file.entries_[i].user, i);
  return file;
}

const Htpasswd::Entry* Htpasswd::find(std::string_view user) const {
  auto it = by_user_.find(user);
  return it == by_user_.end() ? nullptr : &entries_[it->second];
}

const Htpasswd::Entry* Htpasswd::verify(std::string_view user, std::string_view password) const {
  const Entry* entry = find(user);
  if (entry == nullptr) {
    // The same work as for a real user: the first entry's hash (same kind and cost as the rest,
    // usually), with a result that is thrown away.
    if (!entries_.empty()) verify_hash(entries_[0].hash, entries_[0].kind, password);
    return nullptr;
  }
  return verify_hash(entry->hash, entry->kind, password) ? entry : nullptr;
}

}  // namespace peregrine::auth
