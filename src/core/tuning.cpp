// Tuning tables: fingerprint, buckets, and the JSON form (read as untrusted input).
#include "kernelop/tuning.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/file_io.hpp"
#include "core/hash.hpp"
#include "core/json_util.hpp"

namespace kernelop {
namespace {

using Json = nlohmann::json;

class TableReader {
 public:
  explicit TableReader(std::string_view origin) : origin_(origin) {}

  TuningTable read(const Json& j) const {
    if (!j.is_object()) fail("a tuning table is a JSON object");
    if (!j.contains("format") || !j["format"].is_number_integer() ||
        j["format"].get<std::int64_t>() != kTuningFormatVersion) {
      fail("format is not " + std::to_string(kTuningFormatVersion));
    }
    TuningTable t;
    t.op = string(j, "op");
    t.fingerprint = string(j, "fingerprint");
    t.device = string(j, "device");
    t.arch = string(j, "arch");
    t.version = string(j, "kernelop");
    const Json& configs = array(j, "configs");
    for (const Json& c : configs) {
      if (!c.is_string()) fail("configs holds a non-string");
      t.configs.push_back(c.get<std::string>());
    }
    const Json& entries = array(j, "entries");
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const Json& e = entries[i];
      std::string where = "entries[" + std::to_string(i) + "]";
      if (!e.is_object()) fail(where + " is not an object");
      TuningEntry entry;
      for (const Json& k : array(e, "key", where)) {
        if (!k.is_number_integer()) fail(where + ".key holds a non-integer");
        entry.key.push_back(k.get<std::int64_t>());
      }
      if (entry.key.empty() || entry.key.size() > kMaxTuningKeyWords) {
        fail(where + ".key has a bad length");
      }
      entry.text = string(e, "text", where);
      if (!e.contains("config") || !e["config"].is_number_integer()) {
        fail(where + ".config is not an integer");
      }
      std::int64_t config = e["config"].get<std::int64_t>();
      if (config < 0 || static_cast<std::size_t>(config) >= t.configs.size()) {
        fail(where + ".config " + std::to_string(config) + " is not one of the " +
             std::to_string(t.configs.size()) + " configs");
      }
      entry.config = static_cast<int>(config);
      for (const Json& ms : array(e, "times_ms", where)) {
        if (!ms.is_number()) fail(where + ".times_ms holds a non-number");
        double v = ms.get<double>();
        if (!std::isfinite(v)) fail(where + ".times_ms holds a non-finite time");
        entry.times_ms.push_back(v);
      }
      if (entry.times_ms.size() != t.configs.size()) {
        fail(where + ".times_ms has " + std::to_string(entry.times_ms.size()) + " times for " +
             std::to_string(t.configs.size()) + " configs");
      }
      t.entries.push_back(std::move(entry));
    }
    return t;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    KERNELOP_FAIL(Format) << "tuning table " << origin_ << ": " << what;
  }
  std::string string(const Json& j, const char* key, const std::string& where = "") const {
    if (!j.contains(key) || !j[key].is_string()) {
      fail((where.empty() ? "" : where + ".") + key + " is missing or not a string");
    }
    return j[key].get<std::string>();
  }
  const Json& array(const Json& j, const char* key, const std::string& where = "") const {
    if (!j.contains(key) || !j[key].is_array()) {
      fail((where.empty() ? "" : where + ".") + key + " is missing or not an array");
    }
    return j[key];
  }
  std::string_view origin_;
};

Json table_json(const TuningTable& t) {
  Json entries = Json::array();
  for (const TuningEntry& e : t.entries) {
    entries.push_back(
        Json{{"key", e.key}, {"text", e.text}, {"config", e.config}, {"times_ms", e.times_ms}});
  }
  return Json{{"format", kTuningFormatVersion},
              {"op", t.op},
              {"fingerprint", t.fingerprint},
              {"device", t.device},
              {"arch", t.arch},
              {"kernelop", t.version},
              {"configs", t.configs},
              {"entries", std::move(entries)}};
}

Json parse(std::string_view text, std::string_view origin) {
  std::string why;
  std::optional<Json> j = detail::parse_json_strict<Json>(text, &why);
  if (!j) KERNELOP_FAIL(Format) << "tuning table " << origin << ": not valid JSON: " << why;
  return *j;
}

}  // namespace

std::string op_fingerprint(const CompiledImage& image) {
  detail::Hasher h;
  // What decides a launch, as the plan derives it (the same whether the image was compiled here
  // or read from a package), and the machine code.
  const OpPlan& p = image.plan;
  h.field("kernelop.op").field(p.qualified_schema());
  for (const ArgSlot& a : p.args) h.field(p.c_type(a)).field(a.name);
  if (p.geometry) {
    for (const auto* part : {&p.geometry->grid, &p.geometry->block, &p.geometry->cluster}) {
      for (const Expr& e : *part) h.field(e.to_string());
    }
    h.field(p.geometry->shared_mem.to_string());
  }
  for (const ConfigPlan& c : p.configs) {
    h.field(c.text);
    for (const RequirementPlan& r : c.requirements) h.field(r.text);
  }
  for (const Expr& e : p.tuning_key) h.field(e.to_string());
  for (const std::string& name : image.lowered_names) h.field(name);
  for (const ArchImage& a : image.images) {
    h.field(a.arch).field(static_cast<std::int64_t>(a.program)).field(a.data);
  }
  return h.digest().hex();
}

std::int64_t tuning_bucket(std::int64_t v) {
  if (v <= 0) return 0;
  std::int64_t b = 1;
  while (b < v && b < (std::int64_t{1} << 62)) b <<= 1;
  return b;
}

std::string tuning_table_json(const TuningTable& table) {
  try {
    return table_json(table).dump(1) + "\n";
  } catch (const nlohmann::json::exception& e) {  // a string that is not UTF-8
    KERNELOP_FAIL(Format) << "cannot write the tuning table of op " << table.op << ": " << e.what();
  }
}

std::string tuning_tables_json(const std::vector<TuningTable>& tables) {
  Json arr = Json::array();
  for (const TuningTable& t : tables) arr.push_back(table_json(t));
  try {
    return arr.dump(1) + "\n";
  } catch (const nlohmann::json::exception& e) {
    KERNELOP_FAIL(Format) << "cannot write tuning tables: " << e.what();
  }
}

TuningTable parse_tuning_table(std::string_view text, std::string_view origin) {
  return TableReader(origin).read(parse(text, origin));
}

std::vector<TuningTable> parse_tuning_tables(std::string_view text, std::string_view origin) {
  Json j = parse(text, origin);
  std::vector<TuningTable> out;
  if (!j.is_array()) {
    out.push_back(TableReader(origin).read(j));
    return out;
  }
  for (const Json& t : j) out.push_back(TableReader(origin).read(t));
  return out;
}

void merge_tuning_table(std::vector<TuningTable>& tables, const TuningTable& from) {
  auto same = std::find_if(tables.begin(), tables.end(), [&](const TuningTable& t) {
    return t.op == from.op && t.device == from.device && t.arch == from.arch;
  });
  if (same == tables.end() || same->fingerprint != from.fingerprint ||
      same->configs != from.configs) {
    if (same != tables.end()) tables.erase(same);
    tables.push_back(from);
    return;
  }
  for (const TuningEntry& e : from.entries) {
    auto it = std::find_if(same->entries.begin(), same->entries.end(),
                           [&](const TuningEntry& x) { return x.key == e.key; });
    if (it == same->entries.end()) {
      same->entries.push_back(e);
    } else {
      *it = e;
    }
  }
}

std::vector<TuningTable> read_tuning_file(const std::filesystem::path& path) {
  std::string text, why;
  switch (detail::try_read_file(path, detail::kMaxTextFileBytes, &text, &why)) {
    case detail::ReadStatus::Ok:
      return parse_tuning_tables(text, path.string());
    case detail::ReadStatus::Missing:
      return {};
    case detail::ReadStatus::Failed:
      break;
  }
  KERNELOP_FAIL(Io) << "cannot read tuning table '" << path.string() << "': " << why;
}

void write_tuning_file(const std::filesystem::path& path, const std::vector<TuningTable>& tables) {
  detail::write_file(path, tuning_tables_json(tables), "tuning table");
}

std::string store_tuning_table(const std::filesystem::path& path, const TuningTable& table) {
  std::filesystem::path lock_path = path;
  lock_path += ".lock";
  int fd = detail::lock_file(lock_path);  // -1: uncoordinated, still atomic
  std::vector<TuningTable> merged;
  try {
    std::vector<TuningTable> disk = read_tuning_file(path);
    if (disk.size() == 1 && disk[0].fingerprint == table.fingerprint &&
        disk[0].configs == table.configs && disk[0].op == table.op &&
        disk[0].device == table.device && disk[0].arch == table.arch) {
      merged = std::move(disk);
    }
  } catch (const Error&) {  // corrupt or unreadable: replaced
  }
  merge_tuning_table(merged, table);
  std::string why = detail::write_file_atomically(path, tuning_table_json(merged.front()), 0600);
  if (fd >= 0) ::close(fd);
  return why;
}

std::string tuning_table_mismatch(const TuningTable& table, const CompiledImage& image) {
  if (table.op != image.plan.op_name) return "it is op " + table.op + "'s";
  if (table.fingerprint != op_fingerprint(image)) {
    return "it was tuned with another build of the op (fingerprint " + table.fingerprint + ")";
  }
  std::vector<std::string> configs;
  for (const ConfigPlan& c : image.plan.configs) configs.push_back(c.text);
  if (table.configs != configs) return "its configs differ from the op's";
  // Entries built in code (not parsed) get the parser's checks here.
  for (std::size_t i = 0; i < table.entries.size(); ++i) {
    const TuningEntry& e = table.entries[i];
    if (e.config < 0 || static_cast<std::size_t>(e.config) >= configs.size() ||
        e.times_ms.size() != configs.size() || e.key.empty() || e.key.size() > kMaxTuningKeyWords) {
      return "entry " + std::to_string(i) + " is malformed (its config, times or key)";
    }
  }
  return "";
}

}  // namespace kernelop
