// Streaming UTF-8 validation (RFC 3629): text messages are checked fragment by fragment as they
// arrive, so an invalid byte fails the connection at once, and a character split across two
// fragments is still checked whole.
#pragma once

#include <cstdint>
#include <string_view>

namespace peregrine::websocket {

class Utf8Validator {
 public:
  // False once any byte so far cannot be UTF-8 (overlong forms, surrogates, above U+10FFFF).
  bool feed(std::string_view bytes) {
    if (!ok_) return false;
    for (char ch : bytes) {
      const auto b = static_cast<uint8_t>(ch);
      if (need_ == 0) {
        if (b < 0x80) continue;
        lo_ = 0x80;
        hi_ = 0xBF;
        if (b >= 0xC2 && b <= 0xDF) {
          need_ = 1;
        } else if (b >= 0xE0 && b <= 0xEF) {
          need_ = 2;
          if (b == 0xE0) lo_ = 0xA0;  // overlong
          if (b == 0xED) hi_ = 0x9F;  // UTF-16 surrogates
        } else if (b >= 0xF0 && b <= 0xF4) {
          need_ = 3;
          if (b == 0xF0) lo_ = 0x90;  // overlong
          if (b == 0xF4) hi_ = 0x8F;  // above U+10FFFF
        } else {
          return ok_ = false;
        }
      } else {
        if (b < lo_ || b > hi_) return ok_ = false;
        lo_ = 0x80;
        hi_ = 0xBF;
        --need_;
      }
    }
    return ok_;
  }
  // True when everything fed is valid and no character is left unfinished.
  bool complete() const { return ok_ && need_ == 0; }
  bool ok() const { return ok_; }
  void reset() { *this = Utf8Validator(); }

 private:
  uint8_t need_ = 0;  // continuation bytes still expected
  uint8_t lo_ = 0x80, hi_ = 0xBF;
  bool ok_ = true;
};

inline bool is_valid_utf8(std::string_view bytes) {
  Utf8Validator v;
  return v.feed(bytes) && v.complete();
}

}  // namespace peregrine::websocket
