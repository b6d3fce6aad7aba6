// Reason phrases for status lines.
#pragma once

#include <string_view>

namespace peregrine::http {

// The reason phrase for `status`: every code in RFC 9110 15, plus 102/103 (RFC 2518/8297),
// 207/208/226, 425 (RFC 8470), 428/429/431/511 (RFC 6585), 451 (RFC 7725) and 418.
// Never empty: an unregistered code gets its class's name ("Informational", "Success",
// "Redirection", "Client Error", "Server Error"), and anything outside 100..599 gets "Unknown".
// The returned view points at static storage.
std::string_view reason_phrase(int status);

// Whether a response with `status` has a body to frame (RFC 9110 6.4.1, 15.3.5, 15.4.5): not
// 1xx, 204 or 304. What both client protocols ask before they announce a length or send DATA.
constexpr bool status_has_body(int status) {
  return status >= 200 && status != 204 && status != 304;
}

}  // namespace peregrine::http
