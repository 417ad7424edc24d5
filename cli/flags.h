// cli/flags.h: a small strict flag parser shared by the subcommands.
// Accepts "--name value", "--name=value", boolean "--name", and positionals;
// an unknown flag or a missing value is an error naming the flag.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace paratune::cli {

class Flags {
 public:
  // `with_value`: flags that take a value; `booleans`: flags that do not.
  // Short aliases map to long names, e.g. {"-b", "--minbytes"}.
  Flags(std::set<std::string> with_value, std::set<std::string> booleans,
        std::map<std::string, std::string> aliases = {});

  Status Parse(const std::vector<std::string>& args);

  bool Has(const std::string& name) const;
  std::optional<std::string> Get(const std::string& name) const;
  std::string GetOr(const std::string& name, const std::string& def) const;
  // Every value of a flag given several times, in order.
  std::vector<std::string> GetAll(const std::string& name) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  std::set<std::string> with_value_, booleans_;
  std::map<std::string, std::string> aliases_;
  std::multimap<std::string, std::string> values_;
  std::vector<std::string> order_;
  std::vector<std::string> positionals_;
};

}  // namespace paratune::cli
