// RFC 7692: the permessage-deflate extension. The negotiation is pure (the client's
// Sec-WebSocket-Extensions offers and the server's policy in, the parameters and the response
// header value out); MessageInflater and MessageDeflater are the zlib state a Session uses once
// the extension is on (session.h: Session::enable_permessage_deflate).
//
// At the upgrade, a connection does:
//   std::string extensions;
//   std::optional<PerMessageDeflate> pmd = negotiate_permessage_deflate(request, policy,
//                                                                       &extensions);
//   HandshakeAnswer answer = check_upgrade(request);
//   set_extensions(answer, extensions);  // only on a 101
//   Session session(Role::kServer, limits);
//   if (pmd) session.enable_permessage_deflate(*pmd);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "peregrine/request.h"
#include "websocket/frame.h"

namespace peregrine::websocket {

// What the server is willing to do. The defaults keep a connection's zlib memory at zero between
// messages (see docs/websocket.md, "permessage-deflate"): both directions without context
// takeover, so the server compresses with a per-thread compressor and inflates with state that
// lives only while a compressed message is being received.
struct DeflateServerPolicy {
  bool enabled = true;
  // Keep our compressor's LZ77 window from one message to the next (better ratio for similar
  // messages) at the price of a compressor per connection: about 2^(window+2) + 2^(mem_level+9)
  // bytes, 256 KiB at 15/8. Without it, every response carries server_no_context_takeover.
  bool server_context_takeover = false;
  // Let the client keep its window between messages: we then keep an inflater per connection
  // (2^window + 7 KiB). Without it, every response carries client_no_context_takeover.
  bool client_context_takeover = false;
  int server_max_window_bits = 15;  // 8-15: our compressor's window (the client may ask less)
  int client_max_window_bits = 15;  // 8-15: the client's, when its offer lets us choose
  int mem_level = 8;                // 1-9: zlib's hash memory for our compressor
  int compression_level = 6;        // 1-9: zlib's level
  size_t min_compress_bytes = 64;   // smaller messages are sent uncompressed
};

// The agreed parameters (named as on the wire, whichever role the session has) and the local
// choices a Session needs to apply them.
struct PerMessageDeflate {
  bool server_no_context_takeover = false;
  bool client_no_context_takeover = false;
  int server_max_window_bits = 15;
  int client_max_window_bits = 15;
  int mem_level = 8;
  int compression_level = 6;
  size_t min_compress_bytes = 64;
};

// Picks the first permessage-deflate offer, in the client's order, that is well formed and that
// the policy can accept (RFC 7692 7.1): an offer with an unknown parameter, a parameter given
// twice or a bad value is declined, not the handshake. On success `*response_value` is the
// Sec-WebSocket-Extensions value for the 101; nullopt (and the header left out) otherwise.
// `header_values`: each Sec-WebSocket-Extensions line of the request, in order.
std::optional<PerMessageDeflate> negotiate_permessage_deflate(
    std::span<const std::string_view> header_values, const DeflateServerPolicy& policy,
    std::string* response_value);
std::optional<PerMessageDeflate> negotiate_permessage_deflate(const Request& request,
                                                              const DeflateServerPolicy& policy,
                                                              std::string* response_value);

// The Sec-WebSocket-Extensions value that announces `params` (what the negotiation returns).
std::string permessage_deflate_response(const PerMessageDeflate& params);

// Bytes zlib holds for this thread's compressors and inflaters (all sessions and the shared
// per-thread compressors): for memory accounting and the tests that measure it.
int64_t deflate_memory_in_use();

class ZStream;

// Inflates one compressed message after another (RFC 7692 7.2.2), appending the output to the
// caller's message and stopping as soon as it would pass the size limit: a 1 KiB zip bomb costs
// at most the limit, never its full inflated size.
class MessageInflater {
 public:
  enum class Status : uint8_t { kOk, kTooBig, kCorrupt };

  // `window_bits`: the peer compressor's window (8-15); `context_takeover`: the peer keeps it
  // between messages, so ours must too.
  MessageInflater(int window_bits, bool context_takeover);
  ~MessageInflater();
  MessageInflater(const MessageInflater&) = delete;
  MessageInflater& operator=(const MessageInflater&) = delete;

  // Compressed bytes of the current message, in order. Data after a final deflate block (BFINAL)
  // is ignored until the message ends.
  Status inflate(std::string_view compressed, std::string& out, uint64_t limit);
  // The message's last frame has been fed: inflates the 00 00 ff ff tail the sender stripped and
  // readies the next message (releasing the zlib state without context takeover).
  Status finish(std::string& out, uint64_t limit);

 private:
  Status run(std::string_view compressed, std::string& out, uint64_t limit);

  int window_bits_;
  bool context_takeover_;
  bool stream_ended_ = false;        // a BFINAL block ended the current message's deflate stream
  std::unique_ptr<ZStream> stream_;  // null between messages without context takeover
};

// Compresses whole messages (RFC 7692 7.2.1): deflate with a sync flush, the trailing
// 00 00 ff ff removed. Without context takeover the work is done by a compressor shared by every
// session of the thread, reset for each message, so a connection holds no zlib memory at all.
class MessageDeflater {
 public:
  // `window_bits`: 8-15 as negotiated for our side (8 is compressed without back-references,
  // zlib's raw deflate having no 256-byte window).
  MessageDeflater(int window_bits, bool context_takeover, int mem_level, int level);
  ~MessageDeflater();
  MessageDeflater(const MessageDeflater&) = delete;
  MessageDeflater& operator=(const MessageDeflater&) = delete;

  // The compressed payload in `*out`; false when the message is better sent uncompressed
  // (without context takeover, when compressing does not make it smaller).
  bool compress(std::string_view message, std::string* out);

 private:
  int window_bits_;
  bool context_takeover_;
  int mem_level_;
  int level_;
  std::unique_ptr<ZStream> stream_;  // with context takeover only, created on first use
};

}  // namespace peregrine::websocket
