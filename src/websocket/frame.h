// RFC 6455 section 5: the frame format. Pure: bytes in, frame headers and unmasked payload out;
// frames out as bytes. No sockets (the session in session.h drives these for a connection).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace peregrine::websocket {

enum class Opcode : uint8_t {
  kContinuation = 0x0,
  kText = 0x1,
  kBinary = 0x2,
  kClose = 0x8,
  kPing = 0x9,
  kPong = 0xA,
};

constexpr bool is_control(Opcode op) {
  return (static_cast<uint8_t>(op) & 0x8) != 0;
}

// Status codes of a close frame (RFC 6455 7.4.1) that this codec sends.
namespace close_code {
inline constexpr uint16_t kNormal = 1000;
inline constexpr uint16_t kGoingAway = 1001;
inline constexpr uint16_t kProtocolError = 1002;
inline constexpr uint16_t kUnsupportedData = 1003;
inline constexpr uint16_t kNoStatus = 1005;  // never on the wire: a close frame without a body
inline constexpr uint16_t kInvalidPayload = 1007;
inline constexpr uint16_t kPolicyViolation = 1008;
inline constexpr uint16_t kMessageTooBig = 1009;
inline constexpr uint16_t kInternalError = 1011;
}  // namespace close_code

// Whether a peer may send `code` in a close frame: the defined codes other than those reserved
// for local use (1004-1006, 1015), the IANA-registered 1012-1014, and 3000-4999 (libraries and
// applications). Everything else is a protocol error.
constexpr bool is_valid_close_code(uint16_t code) {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
         (code >= 3000 && code <= 4999);
}

// Which end of the connection this codec is: a server requires masked frames from its client
// and sends unmasked ones; a client the reverse (section 5.1).
enum class Role : uint8_t { kServer, kClient };

struct FrameHeader {
  bool fin = false;
  uint8_t rsv = 0;  // RSV1..RSV3 as bits 2..0
  Opcode opcode = Opcode::kContinuation;
  bool masked = false;
  std::array<uint8_t, 4> mask{};
  uint64_t length = 0;
};

// An incremental frame parser: feed it whatever bytes have arrived, in order, and it returns at
// each frame's header and each frame's end. Payload bytes are unmasked as they are appended to
// the caller's buffer, so a frame is never held whole in the input.
class FrameParser {
 public:
  enum class Status : uint8_t {
    kNeedMore,  // every byte of the input was consumed
    kHeader,    // a frame's header is complete and valid: header() describes it
    kFrameEnd,  // the current frame's payload is complete (also right after a 0-length kHeader)
    kError,     // a protocol violation: error_code() and error_reason(); the parser stays failed
  };
  struct Result {
    Status status = Status::kNeedMore;
    size_t consumed = 0;
  };

  // `rsv_allowed`: the RSV bits a negotiated extension defines (none without one).
  explicit FrameParser(Role role, uint8_t rsv_allowed = 0)
      : role_(role), rsv_allowed_(rsv_allowed) {}

  // Consumes a prefix of `input`. Payload bytes of the current frame, unmasked, are appended to
  // `*payload`. Call again with the rest of the input until kNeedMore: after a kHeader the next
  // call returns kFrameEnd as soon as the payload is complete, without needing more input.
  Result parse(std::string_view input, std::string* payload);

  const FrameHeader& header() const { return header_; }
  // Payload bytes of the current frame not yet received.
  uint64_t remaining() const { return remaining_; }
  uint16_t error_code() const { return error_code_; }
  const char* error_reason() const { return error_reason_; }

 private:
  enum class State : uint8_t { kHeader, kPayload, kFailed };
  Result fail(size_t consumed, const char* reason);
  // Checks the header bytes gathered so far; returns false with the error set when invalid.
  bool header_complete(bool* valid);

  Role role_;
  uint8_t rsv_allowed_;
  State state_ = State::kHeader;
  std::array<uint8_t, 14> head_{};  // 2 + 8 length + 4 mask at most
  size_t head_size_ = 0;
  FrameHeader header_;
  uint64_t remaining_ = 0;
  uint64_t mask_offset_ = 0;
  uint16_t error_code_ = 0;
  const char* error_reason_ = "";
};

// The RSV bits of FrameHeader::rsv (RSV1..RSV3 as bits 2..0).
inline constexpr uint8_t kRsv1 = 0x4;  // permessage-deflate: a compressed message (RFC 7692 6)

// Appends one frame. A server's frames are unmasked; a client's are masked with `mask`, which
// the caller draws from a strong random source for each frame (section 5.3). `rsv`: the bits a
// negotiated extension sets, as in FrameHeader::rsv.
void write_frame(std::string& out, Opcode opcode, std::string_view payload, bool fin = true,
                 uint8_t rsv = 0);
void write_masked_frame(std::string& out, Opcode opcode, std::string_view payload,
                        std::array<uint8_t, 4> mask, bool fin = true, uint8_t rsv = 0);

// The body of a close frame: the code in network order, then the reason (UTF-8, cut so the body
// stays within a control frame's 125 bytes). kNoStatus gives an empty body.
std::string close_payload(uint16_t code, std::string_view reason);

}  // namespace peregrine::websocket
