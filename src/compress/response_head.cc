#include "compress/response_head.h"

#include "core/strings.h"

namespace peregrine::compress {
namespace {

// Calls fn(name, value) for each "Name: value\r\n" line of `lines`.
template <class Fn>
void for_each_line(std::string_view lines, Fn&& fn) {
  while (!lines.empty()) {
    size_t end = lines.find("\r\n");
    std::string_view line = lines.substr(0, end);
    lines = end == std::string_view::npos ? std::string_view{} : lines.substr(end + 2);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    fn(line.substr(0, colon), trim_ows(line.substr(colon + 1)));
  }
}

// Does the comma-separated `list` hold `token` (case-insensitive)?
bool list_has(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = trim_ows(list.substr(0, comma));
    if (ascii_iequals(item, token)) return true;
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
  return false;
}

void read_line(std::string_view name, std::string_view value, HeadFacts* head) {
  ResponseFacts& f = head->facts;
  switch (name.size()) {
    case 4:
      if (ascii_iequals(name, "vary") && (list_has(value, "accept-encoding") || value == "*"))
        head->vary_accept_encoding = true;
      break;
    case 12:
      if (ascii_iequals(name, "content-type")) {
        f.content_type = value;
        if (ascii_iequals(trim_ows(value.substr(0, value.find(';'))), "text/event-stream"))
          head->flush_each_write = true;
      }
      break;
    case 13:
      if (ascii_iequals(name, "cache-control") && list_has(value, "no-transform"))
        f.no_transform = true;
      break;
    case 16:
      if (ascii_iequals(name, "content-encoding")) f.has_content_encoding = true;
      break;
    case 17:
      if (ascii_iequals(name, "x-accel-buffering") && ascii_iequals(value, "no"))
        head->flush_each_write = true;
      break;
    default:
      break;
  }
}

}  // namespace

RequestFacts read_request(const Request& request) {
  RequestFacts facts;
  for (const Header& h : request.header_list()) {
    if (h.name.size() == 15 && ascii_iequals(h.name, "accept-encoding")) {
      facts.has_accept_encoding = true;
      facts.accept_encoding = h.value;
    } else if (h.name.size() == 5 && ascii_iequals(h.name, "range")) {
      facts.range = true;
    }
  }
  return facts;
}

HeadFacts read_head(const Request& request, const Response& response, int64_t length) {
  HeadFacts head;
  head.facts.head_request = request.is_head();
  head.facts.status = response.status();
  head.facts.length = length;
  for_each_line(response.prebuilt_headers(),
                [&](std::string_view n, std::string_view v) { read_line(n, v, &head); });
  for_each_line(response.extra_headers(),
                [&](std::string_view n, std::string_view v) { read_line(n, v, &head); });
  return head;
}

void add_vary(Response& response, const HeadFacts& head) {
  // A second Vary line is the same as one list (RFC 9110 5.3): no need to rebuild the head.
  if (!head.vary_accept_encoding) response.add_header("Vary", "Accept-Encoding");
}

void rewrite_for_coding(Response& response, Coding coding, const HeadFacts& head) {
  thread_local std::string saved;
  saved.assign(response.prebuilt_headers()).append(response.extra_headers());
  const int status = response.status();
  const bool close = response.closes_connection();
  response.clear();
  response.set_status(status);
  if (close) response.close_connection();
  thread_local std::string weak;
  for_each_line(saved, [&](std::string_view name, std::string_view value) {
    if (ascii_iequals(name, "content-length") || ascii_iequals(name, "accept-ranges") ||
        ascii_iequals(name, "x-accel-buffering"))
      return;
    if (ascii_iequals(name, "etag") && value.starts_with('"')) {
      weak.assign("W/").append(value);
      response.add_header(name, weak);
      return;
    }
    response.add_header(name, value);
  });
  response.add_header("Content-Encoding", coding_name(coding));
  add_vary(response, head);
}

}  // namespace peregrine::compress
