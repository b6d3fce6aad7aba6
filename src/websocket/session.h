// One WebSocket connection's protocol state, after the handshake: received bytes in, events
// (messages, pings, pongs, the close, a failure) and bytes to send out. Pure: the connection that
// owns it reads the socket, calls receive(), hands the events to the application and writes
// `output`. Pongs and the close reply are queued by the session itself (RFC 6455 5.5, 7.1).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "websocket/deflate.h"
#include "websocket/frame.h"
#include "websocket/utf8.h"

namespace peregrine::websocket {

struct SessionLimits {
  // A message (all its fragments) over this many payload bytes fails the connection with 1009,
  // as soon as a frame header announces it: the payload is never buffered. A compressed message
  // is held to it once inflated, checked as it inflates (and its compressed size to the limit
  // plus deflate's overhead).
  uint64_t max_message_bytes = 16 * 1024 * 1024;
};

struct Event {
  enum class Type : uint8_t {
    kText,    // a complete text message, valid UTF-8, in `data`
    kBinary,  // a complete binary message in `data`
    kPing,    // `data`: the ping's payload (the pong is already queued)
    kPong,    // `data`: the pong's payload
    kClose,   // the peer closed: `code` (kNoStatus without one) and `data` (its reason); the reply
              // is queued; once it is written, close the TCP connection
    kError,   // the peer broke the protocol: `code` (1002, 1007, 1009; 1007 for compressed data
              // that does not inflate) and `data` (why, for the
              // log); a close frame with that code is queued; write it, then close the TCP
              // connection without waiting for the peer (RFC 6455 7.1.7)
  };
  Type type;
  uint16_t code = 0;
  std::string data;
  bool operator==(const Event&) const = default;
};

class Session {
 public:
  enum class State : uint8_t {
    kOpen,     // messages flow both ways
    kClosing,  // we sent a close and wait for the peer's (its messages until then still arrive)
    kClosed,   // the closing handshake is over or the connection failed: only `output` is left
  };

  explicit Session(Role role = Role::kServer, SessionLimits limits = {})
      : role_(role), limits_(limits), parser_(role) {}
  // A session with permessage-deflate on (see enable_permessage_deflate).
  Session(Role role, SessionLimits limits, const PerMessageDeflate& deflate);
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  // Turns on permessage-deflate (RFC 7692) with the negotiated parameters, before any byte is
  // received: RSV1 then marks a compressed message (on its first frame only), received messages
  // are inflated, and send_text/send_binary compress what is at least
  // `params.min_compress_bytes` long. Which parameters apply to which direction follows the role.
  void enable_permessage_deflate(const PerMessageDeflate& params);
  bool permessage_deflate() const { return deflater_ != nullptr; }

  // Consumes all of `bytes`: appends what they complete to `events` and what must be sent in
  // answer to `output`. Bytes after the close or a failure are ignored.
  void receive(std::string_view bytes, std::vector<Event>& events, std::string& output);

  // Frames to send, appended to `output`. A text message must be valid UTF-8 (the caller's
  // contract; not checked here). Nothing is sent once a close was sent.
  void send_text(std::string_view text, std::string& output);
  void send_binary(std::string_view data, std::string& output);
  void send_ping(std::string_view payload, std::string& output);  // payload ≤ 125 bytes
  // Starts the closing handshake (State::kClosing until the peer's close arrives).
  void close(uint16_t code, std::string_view reason, std::string& output);

  State state() const { return state_; }
  // After kClosed: whether the peer's close was received (a clean close) or the connection failed.
  bool close_received() const { return close_received_; }

 private:
  void send(Opcode opcode, std::string_view payload, std::string& output, uint8_t rsv = 0);
  void send_message(Opcode opcode, std::string_view payload, std::string& output);
  // Inflates the compressed bytes received (all of them at the message's end) and validates the
  // text that adds; false when the connection failed.
  bool take_payload(bool last, std::vector<Event>& events, std::string& output);
  void fail(uint16_t code, const char* why, std::vector<Event>& events, std::string& output);
  // Called at each frame header and each frame's end; false when the connection failed.
  bool on_header(std::vector<Event>& events, std::string& output);
  bool on_frame_end(std::vector<Event>& events, std::string& output);
  bool on_close(std::vector<Event>& events, std::string& output);

  Role role_;
  SessionLimits limits_;
  FrameParser parser_;
  State state_ = State::kOpen;
  bool close_received_ = false;
  bool in_message_ = false;  // a fragmented message has started and awaits its last frame
  Opcode message_opcode_ = Opcode::kText;
  std::string message_;   // the data message being assembled
  size_t validated_ = 0;  // bytes of message_ the UTF-8 validator has seen
  Utf8Validator utf8_;
  std::string control_;  // the control frame being received (≤ 125 bytes)
  bool current_is_control_ = false;
  // permessage-deflate, when negotiated.
  std::unique_ptr<MessageInflater> inflater_;
  std::unique_ptr<MessageDeflater> deflater_;
  size_t min_compress_bytes_ = 0;
  bool message_compressed_ = false;  // the message being received has RSV1
  uint64_t compressed_bytes_ = 0;    // its compressed size so far
  std::string compressed_;           // received compressed bytes not yet inflated
};

}  // namespace peregrine::websocket
