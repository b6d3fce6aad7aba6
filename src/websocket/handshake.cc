#include "websocket/handshake.h"

#include <openssl/evp.h>

#include "core/strings.h"

namespace peregrine::websocket {

namespace {

constexpr std::string_view kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

// Calls `fn` on each element of a comma-separated header list, over every line of that header,
// trimmed; stops when fn returns true, and returns whether it did.
template <typename Fn>
bool any_list_element(const Request& request, std::string_view name, Fn fn) {
  for (const Header& h : request.header_list()) {
    if (!ascii_iequals(h.name, name)) continue;
    std::string_view rest = h.value;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view element = trim_ows(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (!element.empty() && fn(element)) return true;
    }
  }
  return false;
}

bool list_has_token(const Request& request, std::string_view name, std::string_view token) {
  return any_list_element(request, name,
                          [&](std::string_view e) { return ascii_iequals(e, token); });
}

// 16 bytes in base64 with padding: 22 alphabet characters and "==" (RFC 6455 4.1, item 7).
bool valid_key(std::string_view key) {
  if (key.size() != 24 || key.substr(22) != "==") return false;
  unsigned char decoded[24];
  // EVP_DecodeBlock rejects characters outside the alphabet and counts the padding in its length.
  return EVP_DecodeBlock(decoded, reinterpret_cast<const unsigned char*>(key.data()), 24) == 18 &&
         key.substr(0, 22).find('=') == std::string_view::npos;
}

HandshakeAnswer refuse(int status, std::string_view error) {
  HandshakeAnswer answer;
  answer.status = status;
  answer.error = error;
  if (status == 426) {
    // RFC 9110 15.5.22: a 426 names the protocol to upgrade to; RFC 6455 4.4: the version.
    answer.headers = {
        {"Upgrade", "websocket"}, {"Connection", "Upgrade"}, {"Sec-WebSocket-Version", "13"}};
  }
  return answer;
}

}  // namespace

std::string accept_key(std::string_view key) {
  std::string input(key);
  input.append(kGuid);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  EVP_Digest(input.data(), input.size(), digest, &digest_size, EVP_sha1(), nullptr);
  std::string out(4 * ((digest_size + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), digest,
                                static_cast<int>(digest_size));
  out.resize(static_cast<size_t>(n));
  return out;
}

HandshakeAnswer check_upgrade(const Request& request) {
  if (!list_has_token(request, "upgrade", "websocket") ||
      !list_has_token(request, "connection", "upgrade")) {
    return refuse(426, "not a WebSocket upgrade request");
  }
  if (request.method != Method::kGet)
    return refuse(400, "WebSocket upgrade with a method other than GET");
  if (request.version_major != 1 || request.version_minor < 1)
    return refuse(400, "WebSocket upgrade needs HTTP/1.1");
  // Its bytes would be read as the first frames: the body is not framed apart from them.
  if (request.has_body()) return refuse(400, "WebSocket upgrade with a body");
  const std::optional<std::string_view> version = request.header("sec-websocket-version");
  if (!version) return refuse(400, "WebSocket upgrade without Sec-WebSocket-Version");
  if (*version != "13") return refuse(426, "unsupported Sec-WebSocket-Version");
  const std::optional<std::string_view> key = request.header("sec-websocket-key");
  if (!key || !valid_key(*key)) return refuse(400, "missing or malformed Sec-WebSocket-Key");
  HandshakeAnswer answer;
  answer.headers = {{"Upgrade", "websocket"},
                    {"Connection", "Upgrade"},
                    {"Sec-WebSocket-Accept", accept_key(*key)}};
  return answer;
}

std::string_view select_subprotocol(const Request& request,
                                    std::span<const std::string_view> supported) {
  std::string_view chosen;
  any_list_element(request, "sec-websocket-protocol", [&](std::string_view offered) {
    for (std::string_view s : supported) {
      if (s == offered) {
        chosen = s;
        return true;
      }
    }
    return false;
  });
  return chosen;
}

void set_subprotocol(HandshakeAnswer& answer, std::string_view protocol) {
  if (answer.status == 101 && !protocol.empty())
    answer.headers.emplace_back("Sec-WebSocket-Protocol", std::string(protocol));
}

void set_extensions(HandshakeAnswer& answer, std::string_view value) {
  if (answer.status == 101 && !value.empty())
    answer.headers.emplace_back("Sec-WebSocket-Extensions", std::string(value));
}

std::string response_head(const HandshakeAnswer& answer) {
  std::string head = "HTTP/1.1 101 Switching Protocols\r\n";
  for (const auto& [name, value] : answer.headers) {
    head.append(name).append(": ").append(value).append("\r\n");
  }
  head += "\r\n";
  return head;
}

}  // namespace peregrine::websocket
