#include "admin/json.h"

#include <cstdint>

namespace peregrine::admin {

namespace {

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool take(char c) {
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  char peek() {
    skip_space();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool at_end() {
    skip_space();
    return pos_ == text_.size();
  }

  bool string(std::string* out) {
    if (!take('"')) return false;
    while (pos_ < text_.size()) {
      char c = text_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) return false;
      switch (char e = text_[pos_++]) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t code;
          if (!hex4(&code)) return false;
          if (code >= 0xD800 && code < 0xDC00) {  // a surrogate pair
            uint32_t low;
            if (pos_ + 2 > text_.size() || text_[pos_] != '\\' || text_[pos_ + 1] != 'u')
              return false;
            pos_ += 2;
            if (!hex4(&low) || low < 0xDC00 || low >= 0xE000) return false;
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          } else if (code >= 0xDC00 && code < 0xE000) {
            return false;
          }
          append_utf8(code, out);
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }

  // Any value, discarded.
  bool skip_value(int depth = 0) {
    if (depth > 64) return false;
    char c = peek();
    if (c == '"') {
      std::string ignored;
      return string(&ignored);
    }
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++pos_;
      if (take(close)) return true;
      for (;;) {
        if (c == '{') {
          std::string key;
          if (!string(&key) || !take(':')) return false;
        }
        if (!skip_value(depth + 1)) return false;
        if (take(close)) return true;
        if (!take(',')) return false;
      }
    }
    // A number, true, false or null: a run of their characters.
    size_t start = pos_;
    while (pos_ < text_.size() &&
           std::string_view("+-.0123456789eEtruefalsn").find(text_[pos_]) != std::string_view::npos)
      ++pos_;
    return pos_ > start;
  }

 private:
  bool hex4(uint32_t* code) {
    if (pos_ + 4 > text_.size()) return false;
    *code = 0;
    for (int i = 0; i < 4; ++i) {
      char h = text_[pos_++];
      uint32_t digit;
      if (h >= '0' && h <= '9')
        digit = static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        digit = static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        digit = static_cast<uint32_t>(h - 'A' + 10);
      else
        return false;
      *code = *code * 16 + digit;
    }
    return true;
  }
  static void append_utf8(uint32_t code, std::string* out) {
    if (code < 0x80) {
      out->push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (code >> 6)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else if (code < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (code >> 12)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (code >> 18)));
      out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::optional<std::string> json_string_member(std::string_view text, std::string_view name) {
  Scanner s(text);
  if (!s.take('{')) return std::nullopt;
  std::optional<std::string> found;
  if (!s.take('}')) {
    for (;;) {
      std::string key;
      if (!s.string(&key) || !s.take(':')) return std::nullopt;
      if (key == name && s.peek() == '"') {
        std::string value;
        if (!s.string(&value)) return std::nullopt;
        found = std::move(value);
      } else if (!s.skip_value()) {
        return std::nullopt;
      }
      if (s.take('}')) break;
      if (!s.take(',')) return std::nullopt;
    }
  }
  if (!s.at_end()) return std::nullopt;
  return found;
}

}  // namespace peregrine::admin
