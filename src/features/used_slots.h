// UsedSlots: the bitmap of occupied slots that places the double-array tries (jieba's dictionary
// and the CJ break dictionary), answering "which of the 64 slots from p are used" in one read.

#ifndef NEARDUP_FEATURES_USED_SLOTS_H_
#define NEARDUP_FEATURES_USED_SLOTS_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace neardup {

class UsedSlots {
 public:
  // Room for `slots` slots to start with; slot 0 (the root) is used.
  explicit UsedSlots(size_t slots) : words_(slots / 64 + 2, 0) { words_[0] = 1; }

  // Bit j: whether slot p + j is used (slots past the end are free).
  uint64_t At(size_t p) const {
    const size_t word = p / 64;
    const unsigned shift = p % 64;
    const uint64_t lo = word < words_.size() ? words_[word] : 0;
    if (shift == 0) return lo;
    const uint64_t hi = word + 1 < words_.size() ? words_[word + 1] : 0;
    return (lo >> shift) | (hi << (64 - shift));
  }

  // The first base from `start` on at which slot base + code is free for every element of
  // [begin, end) (`code_of` gives an element's code); each read tests 64 candidate bases.
  template <typename Iterator, typename CodeOf>
  size_t FirstFreeBase(Iterator begin, Iterator end, CodeOf code_of, size_t start) const {
    for (size_t window = start;; window += 64) {
      uint64_t fits = ~uint64_t{0};  // bit j: base window + j fits the elements seen so far
      for (Iterator it = begin; it != end && fits != 0; ++it) fits &= ~At(window + code_of(*it));
      if (fits != 0) return window + static_cast<size_t>(std::countr_zero(fits));
    }
  }

  void Mark(size_t i) {
    if (i / 64 >= words_.size()) words_.resize(i / 64 + 2, 0);
    words_[i / 64] |= uint64_t{1} << (i % 64);
  }

 private:
  std::vector<uint64_t> words_;
};

}  // namespace neardup

#endif  // NEARDUP_FEATURES_USED_SLOTS_H_
