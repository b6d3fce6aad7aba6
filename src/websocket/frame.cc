#include "websocket/frame.h"

#include <algorithm>

namespace peregrine::websocket {

namespace {

bool known_opcode(uint8_t op) {
  return op <= 0x2 || (op >= 0x8 && op <= 0xA);
}

void append_header(std::string& out, Opcode opcode, uint64_t length, bool fin, bool masked,
                   uint8_t rsv) {
  out += static_cast<char>((fin ? 0x80 : 0) | ((rsv & 0x7) << 4) | static_cast<uint8_t>(opcode));
  const uint8_t mask_bit = masked ? 0x80 : 0;
  if (length < 126) {
    out += static_cast<char>(mask_bit | length);
  } else if (length <= 0xFFFF) {
    out += static_cast<char>(mask_bit | 126);
    out += static_cast<char>(length >> 8);
    out += static_cast<char>(length & 0xFF);
  } else {
    out += static_cast<char>(mask_bit | 127);
    for (int shift = 56; shift >= 0; shift -= 8) out += static_cast<char>((length >> shift) & 0xFF);
  }
}

}  // namespace

FrameParser::Result FrameParser::fail(size_t consumed, const char* reason) {
  state_ = State::kFailed;
  error_code_ = close_code::kProtocolError;
  error_reason_ = reason;
  return {Status::kError, consumed};
}

bool FrameParser::header_complete(bool* valid) {
  *valid = true;
  if (head_size_ < 2) return false;
  const uint8_t b0 = head_[0], b1 = head_[1];
  // Checked on the first two bytes, so that a bad frame fails before its length arrives.
  const uint8_t op = b0 & 0x0F;
  const uint8_t rsv = (b0 >> 4) & 0x7;
  const bool masked = (b1 & 0x80) != 0;
  const uint8_t len7 = b1 & 0x7F;
  const char* bad = nullptr;
  if ((rsv & ~rsv_allowed_) != 0) {
    bad = "reserved bits set without a negotiated extension";
  } else if (!known_opcode(op)) {
    bad = "reserved opcode";
  } else if ((op & 0x8) != 0 && (b0 & 0x80) == 0) {
    bad = "fragmented control frame";
  } else if ((op & 0x8) != 0 && len7 > 125) {
    bad = "control frame payload over 125 bytes";
  } else if (role_ == Role::kServer && !masked) {
    bad = "unmasked frame from a client";
  } else if (role_ == Role::kClient && masked) {
    bad = "masked frame from a server";
  }
  if (bad != nullptr) {
    error_reason_ = bad;
    *valid = false;
    return true;
  }
  const size_t length_bytes = len7 == 126 ? 2 : len7 == 127 ? 8 : 0;
  if (head_size_ < 2 + length_bytes) return false;
  uint64_t length = len7;
  if (length_bytes != 0) {
    length = 0;
    for (size_t i = 0; i < length_bytes; ++i) length = (length << 8) | head_[2 + i];
    if (length_bytes == 8 && (length >> 63) != 0) {
      error_reason_ = "64-bit payload length with its most significant bit set";
      *valid = false;
      return true;
    }
  }
  if (head_size_ < 2 + length_bytes + (masked ? 4 : 0)) return false;
  header_.fin = (b0 & 0x80) != 0;
  header_.rsv = rsv;
  header_.opcode = static_cast<Opcode>(op);
  header_.masked = masked;
  header_.mask = {};
  if (masked) std::copy_n(head_.begin() + 2 + length_bytes, 4, header_.mask.begin());
  header_.length = length;
  return true;
}

FrameParser::Result FrameParser::parse(std::string_view input, std::string* payload) {
  size_t used = 0;
  if (state_ == State::kFailed) return {Status::kError, 0};
  if (state_ == State::kHeader) {
    bool valid = true;
    // Header bytes arrive one at a time at worst; at most 14 are ever copied.
    while (!header_complete(&valid)) {
      if (used == input.size()) return {Status::kNeedMore, used};
      head_[head_size_++] = static_cast<uint8_t>(input[used++]);
    }
    if (!valid) return fail(used, error_reason_);
    head_size_ = 0;
    remaining_ = header_.length;
    mask_offset_ = 0;
    state_ = State::kPayload;
    return {Status::kHeader, used};
  }
  // kPayload
  if (remaining_ == 0) {
    state_ = State::kHeader;
    return {Status::kFrameEnd, 0};
  }
  const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, input.size()));
  if (take == 0) return {Status::kNeedMore, 0};
  const size_t start = payload->size();
  payload->append(input.data(), take);
  if (header_.masked) {
    char* p = payload->data() + start;
    for (size_t i = 0; i < take; ++i)
      p[i] ^= static_cast<char>(header_.mask[(mask_offset_ + i) & 3]);
    mask_offset_ += take;
  }
  remaining_ -= take;
  if (remaining_ == 0) {
    state_ = State::kHeader;
    return {Status::kFrameEnd, take};
  }
  return {Status::kNeedMore, take};
}

void write_frame(std::string& out, Opcode opcode, std::string_view payload, bool fin, uint8_t rsv) {
  append_header(out, opcode, payload.size(), fin, false, rsv);
  out.append(payload);
}

void write_masked_frame(std::string& out, Opcode opcode, std::string_view payload,
                        std::array<uint8_t, 4> mask, bool fin, uint8_t rsv) {
  append_header(out, opcode, payload.size(), fin, true, rsv);
  out.append(reinterpret_cast<const char*>(mask.data()), 4);
  const size_t start = out.size();
  out.append(payload);
  for (size_t i = 0; i < payload.size(); ++i) out[start + i] ^= static_cast<char>(mask[i & 3]);
}

std::string close_payload(uint16_t code, std::string_view reason) {
  std::string body;
  if (code == close_code::kNoStatus) return body;
  body += static_cast<char>(code >> 8);
  body += static_cast<char>(code & 0xFF);
  if (reason.size() > 123) {
    // Never cut a UTF-8 sequence: back off from continuation bytes to a character's start.
    size_t end = 123;
    while (end > 0 && (static_cast<uint8_t>(reason[end]) & 0xC0) == 0x80) --end;
    reason = reason.substr(0, end);
  }
  body.append(reason);
  return body;
}

}  // namespace peregrine::websocket
