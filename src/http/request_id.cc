#include "http/request_id.h"

#include <sys/random.h>

#include <chrono>
#include <cstdint>
#include <cstring>

#include "core/strings.h"

namespace peregrine::http {
namespace {

// xoshiro256** (Blackman and Vigna): fast, and its output does not repeat in any realistic
// run. Not for secrets: IDs only need to be unique.
struct Generator {
  uint64_t s[4];
  Generator() {
    if (getrandom(s, sizeof s, 0) != static_cast<ssize_t>(sizeof s)) {
      // No entropy source: the clock and this object's address still differ per thread and run.
      const auto now =
          static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
      s[0] = now;
      s[1] = reinterpret_cast<uintptr_t>(this);
      s[2] = now * 0x9e3779b97f4a7c15ull;
      s[3] = 0x2545f4914f6cdd1dull;
    }
    if ((s[0] | s[1] | s[2] | s[3]) == 0) s[0] = 1;  // the one state that never leaves zero
  }
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t next() {
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }
};

void put_hex(char* out, uint64_t value) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 15; i >= 0; --i) {
    out[i] = kHex[value & 15];
    value >>= 4;
  }
}

}  // namespace

void make_request_id(char out[kRequestIdLength]) {
  thread_local Generator generator;
  put_hex(out, generator.next());
  put_hex(out + 16, generator.next());
}

bool valid_request_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxIncomingRequestIdLength) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == ':' || c == '/' || c == '+' ||
                    c == '=' || c == '@';
    if (!ok) return false;
  }
  return true;
}

void assign_request_id(Request& request, std::string_view header_name, bool trust_incoming,
                       char storage[kRequestIdLength]) {
  int first = -1;
  bool duplicates = false;
  for (uint16_t i = 0; i < request.header_count; ++i) {
    if (!ascii_iequals(request.headers[i].name, header_name)) continue;
    if (first < 0)
      first = i;
    else
      duplicates = true;
  }
  if (first >= 0 && trust_incoming && valid_request_id(request.headers[first].value)) {
    request.request_id = request.headers[first].value;
  } else {
    make_request_id(storage);
    request.request_id = std::string_view(storage, kRequestIdLength);
  }
  if (duplicates) {  // rare: keep only the first copy
    uint16_t kept = 0;
    for (uint16_t i = 0; i < request.header_count; ++i) {
      if (static_cast<int>(i) != first && ascii_iequals(request.headers[i].name, header_name))
        continue;
      request.headers[kept++] = request.headers[i];
    }
    request.header_count = kept;
    first = -1;
    for (uint16_t i = 0; i < request.header_count && first < 0; ++i)
      if (ascii_iequals(request.headers[i].name, header_name)) first = i;
  }
  if (first >= 0) {
    request.headers[first].value = request.request_id;
  } else if (request.header_count < kMaxHeaders) {
    request.headers[request.header_count++] = {header_name, request.request_id};
  }
}

}  // namespace peregrine::http
