// Test helper: the options of a simhash-rule store, for the tests that store bare fingerprints
// (a store created with the default options applies the dedup rule and needs texts).
#ifndef NEARDUP_TESTS_SIMHASH_STORE_H_
#define NEARDUP_TESTS_SIMHASH_STORE_H_

#include "neardup/store.h"

namespace neardup::testing_store {

inline StoreOptions SimHashStoreOptions() {
  StoreOptions options;
  options.rule = StoreRule::kSimHash;
  return options;
}

}  // namespace neardup::testing_store

#endif  // NEARDUP_TESTS_SIMHASH_STORE_H_
