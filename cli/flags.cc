#include "cli/flags.h"

#include "common/user_input.h"

namespace paratune::cli {

Flags::Flags(std::set<std::string> with_value, std::set<std::string> booleans,
             std::map<std::string, std::string> aliases)
    : with_value_(std::move(with_value)), booleans_(std::move(booleans)), aliases_(std::move(aliases)) {}

Status Flags::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a.size() < 2 || a[0] != '-' || a == "-") {
      positionals_.push_back(a);
      continue;
    }
    if (a == "--") {
      for (++i; i < args.size(); ++i) positionals_.push_back(args[i]);
      break;
    }
    std::string name = a, value;
    bool has_inline = false;
    if (size_t eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_inline = true;
    }
    if (auto it = aliases_.find(name); it != aliases_.end()) name = it->second;
    if (booleans_.count(name)) {
      if (has_inline) return Status::InvalidArgument(name + " takes no value");
      values_.emplace(name, "true");
      continue;
    }
    if (!with_value_.count(name)) {
      std::vector<std::string> known(with_value_.begin(), with_value_.end());
      known.insert(known.end(), booleans_.begin(), booleans_.end());
      const std::string hint = DidYouMean(name, known);
      return Status::InvalidArgument("unknown flag '" + a + "' (" + (hint.empty() ? "" : hint + " ") +
                                     "see --help)");
    }
    if (!has_inline) {
      if (i + 1 >= args.size()) return Status::InvalidArgument(name + " needs a value");
      value = args[++i];
    }
    values_.emplace(name, value);
  }
  return Status::Ok();
}

bool Flags::Has(const std::string& name) const { return values_.count(name) > 0; }

std::optional<std::string> Flags::Get(const std::string& name) const {
  auto range = values_.equal_range(name);
  if (range.first == range.second) return std::nullopt;
  auto last = range.second;
  --last;
  return last->second;
}

std::string Flags::GetOr(const std::string& name, const std::string& def) const {
  auto v = Get(name);
  return v ? *v : def;
}

std::vector<std::string> Flags::GetAll(const std::string& name) const {
  std::vector<std::string> out;
  auto range = values_.equal_range(name);
  for (auto it = range.first; it != range.second; ++it) out.push_back(it->second);
  return out;
}

}  // namespace paratune::cli
