#include "auth/basic.h"

#include <openssl/crypto.h>

#include <functional>

#include "core/strings.h"

namespace peregrine::auth {

namespace {

int base64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with padding (RFC 4648 4), as RFC 7617 requires.
bool decode_base64(std::string_view in, std::string& out) {
  out.clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  uint32_t bits = 0;
  int count = 0;
  size_t padding = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(in[i]);
    if (c == '=') {
      if (i + 2 < in.size()) return false;  // only in the last two places
      ++padding;
      continue;
    }
    if (padding) return false;
    int v = base64_value(c);
    if (v < 0) return false;
    bits = (bits << 6) | static_cast<uint32_t>(v);
    if (++count == 4) {
      out += static_cast<char>(bits >> 16);
      out += static_cast<char>(bits >> 8);
      out += static_cast<char>(bits);
      bits = 0;
      count = 0;
    }
  }
  if (count == 3) {
    out += static_cast<char>(bits >> 10);
    out += static_cast<char>(bits >> 2);
  } else if (count == 2) {
    out += static_cast<char>(bits >> 4);
  } else if (count != 0) {
    return false;
  }
  return true;
}

}  // namespace

bool parse_basic(std::string_view header, std::string& storage, std::string_view* user,
                 std::string_view* password) {
  if (header.size() < 6 || !ascii_iequals(header.substr(0, 5), "basic") || header[5] != ' ')
    return false;
  std::string_view token = header.substr(6);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  if (token.size() > (kMaxCredentials + 2) / 3 * 4) return false;
  if (!decode_base64(token, storage)) return false;
  size_t colon = storage.find(':');
  if (colon == std::string::npos || colon == 0) return false;
  *user = std::string_view(storage).substr(0, colon);
  *password = std::string_view(storage).substr(colon + 1);
  return true;
}

std::string_view BasicAuth::check(const Htpasswd& users, const Request& request) {
  std::optional<std::string_view> header = request.header("Authorization");
  if (!header) return {};
  const size_t key = std::hash<std::string_view>{}(*header) ^ reinterpret_cast<uintptr_t>(&users);
  auto it = cache_.find(key);
  if (it != cache_.end() && it->second.users == &users &&
      it->second.expires_ms > clock_.monotonic_ms && it->second.header.size() == header->size() &&
      CRYPTO_memcmp(it->second.header.data(), header->data(), header->size()) == 0)
    return *it->second.user;
  std::string_view user, password;
  if (!parse_basic(*header, scratch_, &user, &password)) return {};
  ++verifications_;
  const Htpasswd::Entry* entry = users.verify(user, password);
  OPENSSL_cleanse(scratch_.data(), scratch_.size());
  if (entry == nullptr) return {};
  if (cache_.size() >= kCacheEntries) cache_.clear();
  cache_[key] = Cached{&users, std::string(*header), &entry->user, clock_.monotonic_ms + kCacheMs};
  return entry->user;
}

}  // namespace peregrine::auth
