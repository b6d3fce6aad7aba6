// Response header rules of a site and a route (`headers = { set, add, remove, always }`),
// compiled when the configuration is loaded into what the response writers apply: the names to
// drop from the head the server and the handler wrote, and the ready "Name: value\r\n" lines to
// append. Pure: no I/O, nothing allocated while a response is written.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace peregrine::http {

struct HeaderEditList {
  std::vector<std::string> drop;  // lower-case names: `remove` and `set` (a set replaces)
  std::string lines;              // `set` then `add`, "Name: value\r\n" each

  bool empty() const { return drop.empty() && lines.empty(); }
  bool drops(std::string_view name) const;
  // Appends the "Name: value\r\n" lines of `head` whose name is not dropped.
  void append_kept(std::string& out, std::string_view head) const;
  // Applies `next` after this list: its drops also remove this list's lines.
  void then(const HeaderEditList& next);
};

// The rules as written in one table.
struct HeaderRuleSet {
  std::vector<std::string> remove;
  std::vector<std::pair<std::string, std::string>> set;
  std::vector<std::pair<std::string, std::string>> add;
  bool always = false;  // also for 1xx, 4xx and 5xx (nginx's `add_header ... always`)

  bool empty() const { return remove.empty() && set.empty() && add.empty(); }
};

struct HeaderEdits {
  HeaderEditList success;  // 2xx and 3xx: every rule
  HeaderEditList always;   // any other status: the rules of tables that say `always = true`

  // What a response of `status` gets; null when nothing (most error responses).
  const HeaderEditList* for_status(int status) const {
    if (status >= 200 && status < 400) return &success;
    return always.empty() ? nullptr : &always;
  }
  // Adds the rules of one table after what is there (a route's after its site's).
  void then(const HeaderRuleSet& rules);
  bool empty() const { return success.empty() && always.empty(); }
};

}  // namespace peregrine::http
