// The store's write-ahead log: an append-only file of checksummed records, each an atomic batch
// of add/remove operations.
//
// Internal header. A WalWriter is used by one thread at a time (the store's commit leader).
// ReadWal distinguishes a torn final record (a crash mid-append: reported so the caller truncates
// it) from damage in the middle of the log (Corruption naming the file and offset).
#ifndef NEARDUP_STORE_WAL_H_
#define NEARDUP_STORE_WAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "neardup/fingerprint.h"
#include "neardup/status.h"
#include "store/file_system.h"
#include "store/sketch_record.h"

namespace neardup::store {

enum class WalOpType : uint8_t { kAdd = 1, kRemove = 2 };
// On disk, an add that carries a sketch (kDedup stores) is op byte 3: the add's fields, then
// content_hash u64 | text_bytes u64 | squeezed_hash u64 | n_keys u32 | keys u32 x n_keys |
// set_len u32 | set (EncodeShingleSet).
inline constexpr uint8_t kWalOpAddWithSketch = 3;

struct WalOp {
  WalOpType type = WalOpType::kAdd;
  std::string id;
  Fingerprint fingerprint;  // kAdd only
  std::string metadata;     // kAdd only
  bool has_sketch = false;  // kAdd only: `sketch` is set (op byte 3)
  SketchRecord sketch;
};

inline constexpr size_t kWalHeaderSize = 32;
inline constexpr size_t kWalRecordHeaderSize = 16;  // u64 checksum, u32 length, u32 type
inline constexpr uint32_t kWalRecordBatch = 1;
inline constexpr uint32_t kMaxWalRecordBytes = 1u << 30;

// Appends the encoding of one op to a batch payload (the payload starts with a u32 op count,
// which EncodeWalRecord fills in).
void AppendWalOp(const WalOp& op, std::string* payload);
// A complete record (header + payload) for a batch of `op_count` ops whose encodings are `ops`.
std::string EncodeWalRecord(uint32_t op_count, std::string_view ops);

class WalWriter {
 public:
  // Creates a new empty log (header written and fsynced, directory fsynced).
  static Result<std::unique_ptr<WalWriter>> Create(FileSystem* fs, const std::string& dir,
                                                   uint64_t number, int bits);
  // Opens an existing log for appending after its first `valid_bytes` bytes (anything after is
  // truncated: a torn tail).
  static Result<std::unique_ptr<WalWriter>> OpenForAppend(FileSystem* fs, const std::string& path,
                                                          uint64_t valid_bytes);

  // Appends with one write(2). On failure size() is unchanged, but part of the record may be in
  // the file: TruncateTo(size()) removes it.
  Status Append(std::string_view record);
  Status Sync();
  // Cuts the file back to `size` bytes (<= size()) and syncs.
  Status TruncateTo(uint64_t size);
  uint64_t size() const { return size_; }
  const std::string& path() const { return file_->path(); }

 private:
  WalWriter(std::unique_ptr<WritableFile> file, uint64_t size)
      : file_(std::move(file)), size_(size) {}
  std::unique_ptr<WritableFile> file_;
  uint64_t size_;
};

struct WalReadResult {
  uint64_t valid_bytes = 0;    // offset just past the last good record
  uint64_t records = 0;        // good records
  uint64_t dropped_bytes = 0;  // bytes of a torn or damaged tail after valid_bytes
  // Why the tail was dropped, e.g. "the last record fails its checksum"; empty if none was.
  std::string dropped_reason;
  bool dropped_all_zero = false;  // the tail is zero bytes only (space left by a power loss)
};

// Reads the log at `path`, calling `on_batch` for every intact record in order. A torn final
// record (truncated, or a bad checksum with nothing valid after it) ends the log: it is reported
// in dropped_bytes and dropped_reason (the caller warns and keeps the bytes aside). If `salvage` is
// false, damage followed by more data is Corruption; if true, reading simply stops at the first bad
// record.
Result<WalReadResult> ReadWal(const std::string& path, int bits,
                              const std::function<Status(std::vector<WalOp>&)>& on_batch,
                              bool salvage = false);

}  // namespace neardup::store

#endif  // NEARDUP_STORE_WAL_H_
