// Tuning tables: which config (tactic) of a tuned op is fastest for a key, on one device model
// and architecture, with every timing that decided it. Written to disk beside the compile cache,
// embedded in packages, printed by `kernelop inspect`. Plain data: no CUDA needed.
//
// Note [tuning key]: a call's key is a list of integers: the dtype instantiation, the set of
// configs eligible for the call (their requires), and the tuning key's values (every dim of
// every tensor input unless the spec declares its own), each rounded up to a power of two. Two
// calls with one key are served by the same config; the eligible set in the key means a table
// can never choose a config that cannot run the call.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "kernelop/image.hpp"

namespace kernelop {

/// Version of the tuning table's JSON form; a table of another version is ignored (re-tuned).
inline constexpr int kTuningFormatVersion = 1;
/// The longest key a call can make (Note [tuning key]): the dtype combination, 4 words of
/// eligible configs, and for up to 64 tensor inputs a rank and 16 dims.
inline constexpr std::size_t kMaxTuningKeyWords = 1 + 4 + 64 * (16 + 1);

/// A stable identity of a compiled op: its spec, instantiations and machine code (hex).
std::string op_fingerprint(const CompiledImage& image);

/// The power of two at or above v (0 for v <= 0): how a tuning key's sizes are bucketed.
std::int64_t tuning_bucket(std::int64_t v);

/// The JSON text of a table (deterministic).
std::string tuning_table_json(const TuningTable& table);
/// Parses a table; throws Error(Format) naming `origin` and what is wrong (every field checked:
/// a table is untrusted input).
TuningTable parse_tuning_table(std::string_view text, std::string_view origin);
/// A list of tables (a package's, or `kernelop tune --output`): a JSON array or one table.
std::vector<TuningTable> parse_tuning_tables(std::string_view text, std::string_view origin);
std::string tuning_tables_json(const std::vector<TuningTable>& tables);

/// Adds `from` to `tables`: its entries join the table of the same op, device and arch (replacing
/// entries of the same key), or it is appended (replacing a table of another build of the op).
void merge_tuning_table(std::vector<TuningTable>& tables, const TuningTable& from);

/// The tables of a file written by write_tuning_file (empty when the file does not exist);
/// throws Error(Io) or Error(Format) naming the file.
std::vector<TuningTable> read_tuning_file(const std::filesystem::path& path);
/// Writes atomically; throws Error(Io).
void write_tuning_file(const std::filesystem::path& path, const std::vector<TuningTable>& tables);

/// Adds `table`'s entries to the table file `path` (one table, its op, device and arch): under an
/// exclusive lock of `path`.lock, reads what other processes wrote (ignored when corrupt or of
/// another build), merges (this table's entries win for their keys), writes atomically with mode
/// 0600. Returns "" or why it could not write.
std::string store_tuning_table(const std::filesystem::path& path, const TuningTable& table);

/// Checks that a table belongs to `image` (same op, fingerprint and configs); "" when it does,
/// else why not.
std::string tuning_table_mismatch(const TuningTable& table, const CompiledImage& image);

}  // namespace kernelop
