#include "http/header_edits.h"

#include <algorithm>

#include "core/strings.h"

namespace peregrine::http {

namespace {

std::string lower(std::string_view name) {
  std::string out(name);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

HeaderEditList compile(const HeaderRuleSet& rules) {
  HeaderEditList list;
  auto drop = [&](std::string_view name) {
    std::string key = lower(name);
    if (std::find(list.drop.begin(), list.drop.end(), key) == list.drop.end())
      list.drop.push_back(std::move(key));
  };
  for (const std::string& name : rules.remove) drop(name);
  for (const auto& [name, value] : rules.set) drop(name);
  for (const auto* group : {&rules.set, &rules.add})
    for (const auto& [name, value] : *group)
      list.lines.append(name).append(": ").append(value).append("\r\n");
  return list;
}

}  // namespace

bool HeaderEditList::drops(std::string_view name) const {
  for (const std::string& d : drop)
    if (ascii_iequals(d, name)) return true;
  return false;
}

void HeaderEditList::append_kept(std::string& out, std::string_view head) const {
  if (drop.empty()) {
    out.append(head);
    return;
  }
  while (!head.empty()) {
    size_t end = head.find('\n');
    std::string_view line = head.substr(0, end == std::string_view::npos ? head.size() : end + 1);
    head.remove_prefix(line.size());
    std::string_view name = line.substr(0, line.find(':'));
    if (!drops(name)) out.append(line);
  }
}

void HeaderEditList::then(const HeaderEditList& next) {
  std::string kept;
  next.append_kept(kept, lines);
  lines = std::move(kept);
  lines.append(next.lines);
  for (const std::string& d : next.drop)
    if (std::find(drop.begin(), drop.end(), d) == drop.end()) drop.push_back(d);
}

void HeaderEdits::then(const HeaderRuleSet& rules) {
  HeaderEditList list = compile(rules);
  success.then(list);
  if (rules.always) always.then(list);
}

}  // namespace peregrine::http
