// Test helper: the shared data folder (../shared beside the source tree, NEARDUP_SHARED_DIR) holds
// the large corpus and the labelled pairs. Tests that need it skip with a visible message when it
// is absent (a fresh clone has only the repository and its small sample/ corpus).
#ifndef NEARDUP_TESTS_SHARED_DATA_H_
#define NEARDUP_TESTS_SHARED_DATA_H_

#include <gtest/gtest.h>

#include <filesystem>

// Skips the current test, saying why, unless ../shared/corpus exists.
#define NEARDUP_SKIP_WITHOUT_SHARED_CORPUS()                                                    \
  do {                                                                                          \
    if (!std::filesystem::is_directory(NEARDUP_SHARED_DIR "/corpus")) {                         \
      GTEST_SKIP() << "skipped: the shared corpus " NEARDUP_SHARED_DIR                          \
                      "/corpus is not there (this test needs ../shared beside the repository)"; \
    }                                                                                           \
  } while (0)

#endif  // NEARDUP_TESTS_SHARED_DATA_H_
