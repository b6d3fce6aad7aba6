#include "access/check.h"

#include <netinet/in.h>
#include <strings.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "access/limit_table.h"
#include "core/address_text.h"
#include "core/log.h"

namespace peregrine::access {

namespace {

// The address bytes of a peer, IPv4-mapped IPv6 folded to IPv4 (one client, one key, whatever
// socket it came through). 0 for anything else.
size_t address_bytes(const sockaddr* peer, char (&out)[16]) {
  if (!peer) return 0;
  if (peer->sa_family == AF_INET) {
    std::memcpy(out, &reinterpret_cast<const sockaddr_in*>(peer)->sin_addr, 4);
    return 4;
  }
  if (peer->sa_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6*>(peer)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a)) {
      std::memcpy(out, a.s6_addr + 12, 4);
      return 4;
    }
    std::memcpy(out, a.s6_addr, 16);
    return 16;
  }
  return 0;
}

std::string_view cookie_value(std::string_view cookies, std::string_view name) {
  while (!cookies.empty()) {
    size_t end = cookies.find(';');
    std::string_view pair = cookies.substr(0, end);
    cookies = end == std::string_view::npos ? std::string_view() : cookies.substr(end + 1);
    while (!pair.empty() && (pair.front() == ' ' || pair.front() == '\t')) pair.remove_prefix(1);
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos || pair.substr(0, eq) != name) continue;
    std::string_view value = pair.substr(eq + 1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    return value;
  }
  return {};
}

// The key as a log line shows it: the client address, or the header or cookie value (cut, with
// control bytes replaced, since it is the client's text).
std::string printable_key(const Limit& limit, const Request& request, std::string_view key) {
  if (limit.key == KeyKind::kAddress) return std::string(AddressText(request.peer).ip_view());
  std::string text(key.substr(0, 64));
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '"') c = '?';
  return (limit.key == KeyKind::kHeader ? "header " : "cookie ") + limit.key_name + "=\"" + text +
         "\"" + (key.size() > 64 ? "..." : "") + " from " +
         std::string(AddressText(request.peer).ip_view());
}

}  // namespace

bool allowed(const std::vector<Rule>& rules, const sockaddr* peer) {
  if (!peer || (peer->sa_family != AF_INET && peer->sa_family != AF_INET6)) return true;
  for (const Rule& rule : rules)
    if (rule.all || rule.network.contains(peer)) return rule.allow;
  return true;
}

std::string_view key_of(const Limit& limit, const Request& request, char (&buffer)[16]) {
  switch (limit.key) {
    case KeyKind::kAddress:
      return {buffer, address_bytes(request.peer, buffer)};
    case KeyKind::kHeader:
      return request.header(limit.key_name).value_or(std::string_view());
    case KeyKind::kCookie: {
      for (const Header& h : request.header_list()) {
        if (h.name.size() != 6 || strncasecmp(h.name.data(), "cookie", 6) != 0) continue;
        std::string_view value = cookie_value(h.value, limit.key_name);
        if (!value.empty()) return value;
      }
      return {};
    }
  }
  return {};
}

Decision check(const Options& options, const Request& request, int64_t now_us) {
  Decision decision;
  if (!options.rules.empty() && !allowed(options.rules, request.peer)) {
    decision.status = 403;
    return decision;
  }
  for (const auto& limit : options.limits) {
    if (limit->connections_limit) continue;
    char buffer[16];
    std::string_view key = key_of(*limit, request, buffer);
    if (key.empty()) continue;
    LimitTable& table = *limit->table;
    LimitTable::Take take = table.take(table.hash(key), now_us, limit->interval_us, limit->burst,
                                       limit->log_interval_ms * 1000);
    if (!take.allowed) {
      if (take.log)
        LOG_WARN("limit \"%s\": refusing requests over the rate from %s (logged once per %lld ms)",
                 limit->name.c_str(), printable_key(*limit, request, key).c_str(),
                 static_cast<long long>(limit->log_interval_ms));
      decision.status = limit->status;
      decision.retry_after_s = static_cast<uint32_t>((take.retry_us + 999'999) / 1'000'000);
      if (decision.retry_after_s == 0) decision.retry_after_s = 1;
      decision.delay_ms = 0;
      return decision;
    }
    if (limit->delay) decision.delay_ms = std::max(decision.delay_ms, (take.wait_us + 999) / 1000);
  }
  return decision;
}

int64_t timer_duration_ms(int64_t delay_ms) {
  auto up = [](int64_t value, int64_t step) { return (value + step - 1) / step * step; };
  if (delay_ms <= 100) return up(delay_ms, 10);
  if (delay_ms <= 1000) return up(delay_ms, 50);
  if (delay_ms <= 10'000) return up(delay_ms, 500);
  return up(delay_ms, 5000);
}

void add_retry_after(Response& response, uint32_t seconds) {
  if (seconds == 0) return;
  char digits[12];
  char* end = put_decimal(digits, seconds);
  response.add_header("Retry-After", std::string_view(digits, static_cast<size_t>(end - digits)));
}

ConnectionCount::~ConnectionCount() {
  for (Entry& e : entries_) e.table->release(e.slot, e.key);
}

void ConnectionCount::add(std::shared_ptr<LimitTable> table, uint32_t slot, uint64_t key) {
  entries_.push_back({std::move(table), slot, key});
}

int count_connection(const Options& options, const Request& request, int64_t now_us,
                     std::unique_ptr<ConnectionCount>* count) {
  for (const auto& limit : options.limits) {
    if (!limit->connections_limit) continue;
    char buffer[16];
    std::string_view key = key_of(*limit, request, buffer);
    if (key.empty()) continue;
    LimitTable& table = *limit->table;
    const uint64_t hash = table.hash(key);
    LimitTable::Acquire got =
        table.acquire(hash, limit->max_connections, now_us, limit->log_interval_ms * 1000);
    if (!got.allowed) {
      if (got.log)
        LOG_WARN("limit \"%s\": refusing connections over %u from %s (logged once per %lld ms)",
                 limit->name.c_str(), limit->max_connections,
                 printable_key(*limit, request, key).c_str(),
                 static_cast<long long>(limit->log_interval_ms));
      return limit->status;  // the counts taken so far go with the connection's
    }
    if (!*count) *count = std::make_unique<ConnectionCount>();
    (*count)->add(limit->table, got.slot, hash);
  }
  return 0;
}

}  // namespace peregrine::access
