// The per-document hashes dedup pairs documents by, shared by RunDedup and the Python/Dask bindings
// so a distributed run hashes texts exactly as `neardup dedup` does.
//
// Internal header. Pure functions; thread-safe.
#ifndef NEARDUP_DEDUP_DOCUMENT_HASHES_H_
#define NEARDUP_DEDUP_DOCUMENT_HASHES_H_

#include <cstdint>
#include <string_view>

namespace neardup {

// XXH3 of `text` with ASCII whitespace, U+3000 and U+00A0 removed: equal values are duplicates that
// differ only in whitespace.
uint64_t SqueezedHash(std::string_view text);

}  // namespace neardup

#endif  // NEARDUP_DEDUP_DOCUMENT_HASHES_H_
