// RecoverStore: salvages the intact part of a damaged store directory into a fresh segment, log
// and MANIFEST; see include/neardup/store.h.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <optional>
#include <unordered_map>

#include "index/table_segment.h"
#include "neardup/store.h"
#include "store/manifest.h"
#include "store/segment.h"
#include "store/store_format.h"
#include "store/wal.h"

namespace neardup {
namespace {

struct RecoveredDoc {
  Fingerprint fingerprint;
  std::string metadata;
  bool tombstone = false;
};

// Reads the bits field of a segment or log header without trusting the rest.
int GuessBits(const std::string& dir, const std::vector<std::string>& files) {
  for (const std::string& name : files) {
    Result<std::string> bytes = store::ReadFile(store::JoinPath(dir, name));
    if (!bytes.ok() || bytes->size() < 16) continue;
    uint32_t bits = store::LoadU32(bytes->data() + 12);
    if (bits == 64 || bits == 128) return static_cast<int>(bits);
  }
  return 64;
}

}  // namespace

Result<RecoveryReport> RecoverStore(const std::string& dir) {
  RecoveryReport report;
  const std::string lock_path = store::JoinPath(dir, store::kLockName);
  int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) return store::ErrnoStatus("open lock file", lock_path, errno);
  struct LockCloser {
    int fd;
    ~LockCloser() { ::close(fd); }
  } closer{lock_fd};
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    return Status::IoError(dir + ": store is open in another process (LOCK held)");
  }
  Result<std::vector<std::string>> listed = store::ListDataFiles(dir);
  if (!listed.ok()) return listed.status();

  // Which files to read, oldest content first.
  std::vector<uint64_t> segment_numbers;
  std::vector<uint64_t> wal_numbers;
  int bits = 64;
  int max_k = 3;
  uint64_t max_number = 0;
  for (const std::string& name : *listed) {
    bool is_segment;
    uint64_t number;
    if (store::ParseFileName(name, &is_segment, &number)) max_number = std::max(max_number, number);
  }
  Result<store::Manifest> manifest = store::ReadManifest(dir);
  std::optional<IndexDesign> design;
  std::string fingerprint_options;
  uint64_t expected_segment_docs = 0;  // live documents the MANIFEST counts in its segments
  if (manifest.ok()) {
    bits = manifest->bits;
    max_k = manifest->max_k;
    segment_numbers = manifest->segments;
    expected_segment_docs = manifest->segments_live;
    fingerprint_options = manifest->fingerprint_options;
    if (Result<IndexDesign> d = index::DecodeDesign(manifest->design); d.ok()) design = *d;
    wal_numbers.push_back(manifest->wal_number);
    max_number = std::max(max_number, manifest->next_file_number);
  } else {
    if (manifest.status().code() != StatusCode::kNotFound) {
      report.messages.push_back(manifest.status().message() +
                                " (using every file in the directory)");
    }
    bits = GuessBits(dir, *listed);
    uint64_t newest_wal = 0;
    for (const std::string& name : *listed) {
      bool is_segment;
      uint64_t number;
      store::ParseFileName(name, &is_segment, &number);
      if (is_segment) {
        segment_numbers.push_back(number);
      } else {
        newest_wal = std::max(newest_wal, number);
      }
    }
    std::sort(segment_numbers.begin(), segment_numbers.end());
    if (newest_wal > 0) wal_numbers.push_back(newest_wal);
  }

  // The index design of the recovered store: the MANIFEST's, else planned as for a new store.
  if (!design) {
    StoreOptions defaults;
    PlanRequest request;
    request.bits = bits;
    request.k = max_k;
    request.n = defaults.expected_documents;
    request.memory_budget_bytes = defaults.index_memory_budget.TotalFor(request.n);
    Result<IndexDesign> planned = PlanIndex(request);
    if (!planned.ok()) return planned.status().WithContext(dir + ": recover");
    design = *planned;
  }
  Result<std::shared_ptr<const index::CompiledDesign>> compiled = index::CompileDesign(*design);
  if (!compiled.ok()) return compiled.status().WithContext(dir + ": recover");

  std::unordered_map<std::string, RecoveredDoc> docs;
  std::vector<std::string> damaged;   // renamed to *.corrupt
  std::vector<std::string> consumed;  // intact inputs, deleted once the new store is written
  for (uint64_t number : segment_numbers) {
    const std::string name = store::SegmentFileName(number);
    const std::string path = store::JoinPath(dir, name);
    Result<std::shared_ptr<store::Segment>> seg = store::Segment::Open(path, *compiled, true);
    if (seg.ok()) {
      const store::Segment& s = **seg;
      for (uint32_t i = 0; i < s.size(); ++i) {
        docs[std::string(s.id(i))] = {s.fingerprint(i), std::string(s.metadata(i)), s.tombstone(i)};
      }
      ++report.segments_kept;
      consumed.push_back(path);
      continue;
    }
    if (seg.status().code() == StatusCode::kNotFound) {
      report.messages.push_back(seg.status().message());
      continue;
    }
    report.messages.push_back(seg.status().message());
    Result<uint64_t> lost = store::SalvageSegment(path, bits, [&](const store::SegmentEntry& e) {
      docs[std::string(e.id)] = {e.fingerprint, std::string(e.metadata), e.tombstone};
    });
    if (lost.ok()) {
      ++report.segments_salvaged;
      report.entries_lost += *lost;
      report.messages.push_back(path + ": salvaged entries whose records are in bounds (" +
                                std::to_string(*lost) + " unreadable)");
    } else {
      report.messages.push_back(lost.status().message());
    }
    damaged.push_back(path);
  }
  // Documents lost with missing or unreadable segments: the MANIFEST's count of live documents in
  // its segments against what could be read back from them.
  uint64_t segment_docs = 0;
  for (const auto& [id, doc] : docs) segment_docs += doc.tombstone || id.empty() ? 0 : 1;
  if (manifest.ok() && segment_docs < expected_segment_docs) {
    const uint64_t deficit = expected_segment_docs - segment_docs;
    report.messages.push_back(std::to_string(deficit) + " of the " +
                              std::to_string(expected_segment_docs) +
                              " documents the MANIFEST counts in its segments could not be read");
    report.entries_lost = std::max(report.entries_lost, deficit);
  }
  for (uint64_t number : wal_numbers) {
    const std::string path = store::JoinPath(dir, store::WalFileName(number));
    Result<store::WalReadResult> read = store::ReadWal(
        path, bits,
        [&](std::vector<store::WalOp>& ops) {
          for (store::WalOp& op : ops) {
            docs[op.id] = {op.fingerprint, std::move(op.metadata),
                           op.type == store::WalOpType::kRemove};
          }
          return Status::Ok();
        },
        /*salvage=*/true);
    if (!read.ok()) {
      report.messages.push_back(read.status().message());
      if (read.status().code() != StatusCode::kNotFound) damaged.push_back(path);
      continue;
    }
    report.wal_records_kept += read->records;
    report.wal_bytes_dropped += read->dropped_bytes;
    if (read->dropped_bytes > 0) {
      report.messages.push_back(path + ": dropped " + std::to_string(read->dropped_bytes) +
                                " bytes after the last intact record");
      damaged.push_back(path);
    } else {
      consumed.push_back(path);
    }
  }

  // Write the survivors as one segment plus an empty log and a fresh MANIFEST.
  std::vector<store::SegmentEntry> entries;
  for (const auto& [id, doc] : docs) {
    if (doc.tombstone || id.empty()) continue;
    entries.push_back({id, doc.fingerprint, doc.metadata, false});
  }
  report.documents = entries.size();
  store::Manifest fresh;
  fresh.bits = bits;
  fresh.max_k = max_k;
  fresh.design = index::EncodeDesign(*design);
  fresh.fingerprint_options = fingerprint_options;
  uint64_t next = max_number + 1;
  if (!entries.empty()) {
    const uint64_t number = next++;
    NEARDUP_RETURN_IF_ERROR(store::WriteSegment(
        store::FileSystem::Default(), store::JoinPath(dir, store::SegmentFileName(number)),
        *compiled, std::move(entries)));
    fresh.segments.push_back(number);
  }
  fresh.wal_number = next++;
  fresh.next_file_number = next;
  fresh.segments_live = report.documents;
  Result<std::unique_ptr<store::WalWriter>> wal =
      store::WalWriter::Create(store::FileSystem::Default(), dir, fresh.wal_number, bits);
  if (!wal.ok()) return wal.status();
  for (const std::string& path : damaged) {
    if (::rename(path.c_str(), (path + ".corrupt").c_str()) != 0) {
      return store::ErrnoStatus("rename to .corrupt", path, errno);
    }
  }
  NEARDUP_RETURN_IF_ERROR(store::WriteManifest(store::FileSystem::Default(), dir, fresh));
  for (const std::string& path : consumed) ::unlink(path.c_str());
  return report;
}

}  // namespace neardup
