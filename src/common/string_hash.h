// StringHash: the transparent hash that lets unordered containers keyed by std::string be looked
// up with a std::string_view (with std::equal_to<>), without building a string per lookup.
//
// Internal header. Stateless.
#ifndef NEARDUP_COMMON_STRING_HASH_H_
#define NEARDUP_COMMON_STRING_HASH_H_

#include <cstddef>
#include <functional>
#include <string_view>

namespace neardup {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace neardup

#endif  // NEARDUP_COMMON_STRING_HASH_H_
