// Write-ahead log encoding, appending and replay; see wal.h and docs/storage_format.md.
#include "store/wal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "store/store_format.h"

namespace neardup::store {
namespace {

constexpr char kWalMagic[8] = {'N', 'D', 'U', 'P', 'W', 'A', 'L', '\0'};
constexpr uint32_t kWalVersion = 1;

bool AllZero(std::string_view bytes) {
  for (char c : bytes) {
    if (c != 0) return false;
  }
  return true;
}

// Decodes a batch payload; false if malformed.
bool DecodeBatch(std::string_view payload, int bits, std::vector<WalOp>* ops) {
  ByteReader reader(payload);
  uint32_t count;
  if (!reader.U32(&count)) return false;
  if (count > payload.size()) return false;  // every op takes at least one byte
  ops->clear();
  ops->reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    WalOp op;
    uint8_t type;
    uint32_t id_len;
    std::string_view id;
    if (!reader.U8(&type) || !reader.U32(&id_len) || !reader.Bytes(id_len, &id)) return false;
    op.id.assign(id);
    if (type == static_cast<uint8_t>(WalOpType::kAdd) || type == kWalOpAddWithSketch) {
      uint8_t fp_bits;
      uint64_t hi, lo;
      uint32_t meta_len;
      std::string_view meta;
      if (!reader.U8(&fp_bits) || !reader.U64(&hi) || !reader.U64(&lo) || !reader.U32(&meta_len) ||
          !reader.Bytes(meta_len, &meta)) {
        return false;
      }
      if (fp_bits != bits) return false;
      op.type = WalOpType::kAdd;
      op.fingerprint = Fingerprint{hi, lo, fp_bits};
      op.metadata.assign(meta);
      if (type == kWalOpAddWithSketch) {
        SketchRecord& sketch = op.sketch;
        uint32_t n_keys, set_len;
        std::string_view set;
        if (!reader.U64(&sketch.hashes.content_hash) || !reader.U64(&sketch.hashes.text_bytes) ||
            !reader.U64(&sketch.hashes.squeezed_hash) || !reader.U32(&n_keys) ||
            n_keys > payload.size() / 4) {
          return false;
        }
        sketch.band_keys.resize(n_keys);
        for (uint32_t& key : sketch.band_keys) {
          if (!reader.U32(&key)) return false;
        }
        if (!reader.U32(&set_len) || !reader.Bytes(set_len, &set)) return false;
        sketch.set.assign(set);
        op.has_sketch = true;
      }
    } else if (type == static_cast<uint8_t>(WalOpType::kRemove)) {
      op.type = WalOpType::kRemove;
    } else {
      return false;
    }
    ops->push_back(std::move(op));
  }
  return reader.done();
}

}  // namespace

void AppendWalOp(const WalOp& op, std::string* payload) {
  const bool with_sketch = op.type == WalOpType::kAdd && op.has_sketch;
  payload->push_back(
      static_cast<char>(with_sketch ? kWalOpAddWithSketch : static_cast<uint8_t>(op.type)));
  PutU32(payload, static_cast<uint32_t>(op.id.size()));
  payload->append(op.id);
  if (op.type == WalOpType::kAdd) {
    payload->push_back(static_cast<char>(op.fingerprint.bits));
    PutU64(payload, op.fingerprint.hi);
    PutU64(payload, op.fingerprint.lo);
    PutU32(payload, static_cast<uint32_t>(op.metadata.size()));
    payload->append(op.metadata);
  }
  if (with_sketch) {
    const SketchRecord& sketch = op.sketch;
    PutU64(payload, sketch.hashes.content_hash);
    PutU64(payload, sketch.hashes.text_bytes);
    PutU64(payload, sketch.hashes.squeezed_hash);
    PutU32(payload, static_cast<uint32_t>(sketch.band_keys.size()));
    for (uint32_t key : sketch.band_keys) PutU32(payload, key);
    PutU32(payload, static_cast<uint32_t>(sketch.set.size()));
    payload->append(sketch.set);
  }
}

std::string EncodeWalRecord(uint32_t op_count, std::string_view ops) {
  std::string record;
  record.reserve(kWalRecordHeaderSize + 4 + ops.size());
  PutU64(&record, 0);  // checksum, filled below
  PutU32(&record, static_cast<uint32_t>(4 + ops.size()));
  PutU32(&record, kWalRecordBatch);
  PutU32(&record, op_count);
  record.append(ops);
  uint64_t checksum = Checksum(record.data() + 8, record.size() - 8);
  std::memcpy(record.data(), &checksum, 8);
  return record;
}

Result<std::unique_ptr<WalWriter>> WalWriter::Create(FileSystem* fs, const std::string& dir,
                                                     uint64_t number, int bits) {
  const std::string path = JoinPath(dir, WalFileName(number));
  Result<std::unique_ptr<WritableFile>> file = fs->NewWritableFile(path);
  if (!file.ok()) return file.status();
  std::string header(kWalMagic, 8);
  PutU32(&header, kWalVersion);
  PutU32(&header, static_cast<uint32_t>(bits));
  PutU64(&header, number);
  PutU64(&header, Checksum(header));
  Status status = (*file)->Append(header);
  if (status.ok()) status = (*file)->Sync();
  if (status.ok()) status = fs->SyncDir(dir);
  if (!status.ok()) return status;
  return std::unique_ptr<WalWriter>(new WalWriter(std::move(*file), header.size()));
}

Result<std::unique_ptr<WalWriter>> WalWriter::OpenForAppend(FileSystem* fs, const std::string& path,
                                                            uint64_t valid_bytes) {
  Result<std::unique_ptr<WritableFile>> file = fs->ReopenWritableFile(path);
  if (!file.ok()) return file.status();
  Status status = (*file)->Truncate(valid_bytes);
  if (status.ok()) status = (*file)->Sync();
  if (!status.ok()) return status.WithContext("truncating the torn tail");
  return std::unique_ptr<WalWriter>(new WalWriter(std::move(*file), valid_bytes));
}

Status WalWriter::Append(std::string_view record) {
  NEARDUP_RETURN_IF_ERROR(file_->Append(record));
  size_ += record.size();
  return Status::Ok();
}

Status WalWriter::TruncateTo(uint64_t size) {
  if (size > size_) return Status::InvalidArgument(path() + ": cannot truncate the log forward");
  NEARDUP_RETURN_IF_ERROR(file_->Truncate(size));
  NEARDUP_RETURN_IF_ERROR(file_->Sync());
  size_ = size;
  return Status::Ok();
}

Status WalWriter::Sync() { return file_->Sync(); }

Result<WalReadResult> ReadWal(const std::string& path, int bits,
                              const std::function<Status(std::vector<WalOp>&)>& on_batch,
                              bool salvage) {
  Result<std::string> contents = ReadFile(path);
  if (!contents.ok()) return contents.status();
  std::string_view bytes = *contents;
  if (bytes.size() < kWalHeaderSize || std::memcmp(bytes.data(), kWalMagic, 8) != 0 ||
      LoadU64(bytes.data() + 24) != Checksum(bytes.data(), 24)) {
    return Status::Corruption(path + ": bad log header (magic or checksum)");
  }
  if (LoadU32(bytes.data() + 8) != kWalVersion) {
    return Status::Unsupported(path + ": log format version " +
                               std::to_string(LoadU32(bytes.data() + 8)) + " is not supported");
  }
  if (static_cast<int>(LoadU32(bytes.data() + 12)) != bits) {
    return Status::Corruption(path + ": log holds " + std::to_string(LoadU32(bytes.data() + 12)) +
                              "-bit fingerprints, store is " + std::to_string(bits) + "-bit");
  }
  WalReadResult result;
  size_t pos = kWalHeaderSize;
  std::vector<WalOp> ops;
  while (pos < bytes.size()) {
    const size_t remaining = bytes.size() - pos;
    bool bad = false;
    bool torn = false;
    size_t record_size = 0;
    std::string why;
    uint32_t length = 0;
    if (remaining < kWalRecordHeaderSize) {
      torn = true;
      why = "a record header cut short (" + std::to_string(remaining) + " of " +
            std::to_string(kWalRecordHeaderSize) + " bytes)";
    } else {
      length = LoadU32(bytes.data() + pos + 8);
      if (length < 4 || length > kMaxWalRecordBytes) {
        bad = true;  // record_size stays 0: the extent is unknown
        why = "a record length of " + std::to_string(length) + " bytes, outside [4, " +
              std::to_string(kMaxWalRecordBytes) + "] (the length field is damaged)";
      } else if ((record_size = kWalRecordHeaderSize + static_cast<size_t>(length)) > remaining) {
        torn = true;
        why = "a record of " + std::to_string(record_size) +
              " bytes runs past the end of the file (" + std::to_string(remaining) +
              " bytes left: cut short by a crash mid-append, or its length field is damaged)";
      } else if (LoadU64(bytes.data() + pos) != Checksum(bytes.data() + pos + 8, record_size - 8)) {
        bad = true;
        why = "the record fails its checksum";
      } else if (LoadU32(bytes.data() + pos + 12) != kWalRecordBatch ||
                 !DecodeBatch(bytes.substr(pos + kWalRecordHeaderSize, length), bits, &ops)) {
        bad = true;
        why = "the record passes its checksum but does not decode (unknown type or layout)";
      }
    }
    const bool zeros = AllZero(bytes.substr(pos));
    if (bad && ((record_size != 0 && pos + record_size == bytes.size()) || zeros)) {
      torn = true;  // the last record, or zero-filled space after a power loss
    }
    if (torn || (bad && salvage)) {
      result.dropped_bytes = remaining;
      result.dropped_all_zero = zeros;
      result.dropped_reason =
          zeros ? std::to_string(remaining) + " zero bytes (space left by a power loss)" : why;
      break;
    }
    if (bad) {
      if (record_size == 0) {
        return Status::Corruption(path + ": log record at offset " + std::to_string(pos) + " has " +
                                  why + "; " + std::to_string(remaining) +
                                  " bytes of the log from there cannot be read");
      }
      return Status::Corruption(path + ": log record at offset " + std::to_string(pos) + ": " +
                                why + ", and " + std::to_string(remaining - record_size) +
                                " more bytes of the log follow it");
    }
    NEARDUP_RETURN_IF_ERROR(on_batch(ops));
    pos += record_size;
    ++result.records;
  }
  result.valid_bytes = pos;
  return result;
}

}  // namespace neardup::store
