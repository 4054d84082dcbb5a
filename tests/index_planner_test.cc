// Tests of the index planner: the designs of Manku et al. 3.1.1 are enumerated with the right
// tables and key widths, budgets are respected, radii make every design exact (pigeonhole), and
// `neardup plan` prints them.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "neardup/index_planner.h"

namespace neardup {
namespace {

const IndexDesign* Find(const std::vector<IndexDesign>& designs, const std::string& description) {
  for (const IndexDesign& d : designs)
    if (d.description == description) return &d;
  return nullptr;
}

TEST(IndexPlannerTest, ReproducesMankuDesignsFor64Bits3Errors) {
  PlanRequest request;
  request.bits = 64;
  request.indexed_k = 3;
  request.expected_size = std::ldexp(1.0, 34);
  auto designs = EnumerateIndexDesigns(request);
  ASSERT_TRUE(designs.ok());
  struct Expected {
    const char* description;
    size_t tables;
    int min_key, max_key;
  };
  for (const Expected& e : std::array<Expected, 4>{{
           {"6 blocks (11,11,11,11,10,10), choose 3, probe radius 0", 20, 31, 33},
           {"4 blocks (16,16,16,16), choose 1; rest in 4 blocks (12,12,12,12), choose 1, probe "
            "radius 0",
            16, 28, 28},
           {"5 blocks (13,13,13,13,12), choose 2, probe radius 0", 10, 25, 26},
           {"4 blocks (16,16,16,16), choose 1, probe radius 0", 4, 16, 16},
       }}) {
    const IndexDesign* d = Find(*designs, e.description);
    ASSERT_NE(d, nullptr) << e.description;
    EXPECT_EQ(d->tables.size(), e.tables);
    EXPECT_EQ(d->min_key_bits(), e.min_key);
    EXPECT_EQ(d->max_key_bits(), e.max_key);
    // Expected candidates: tables * n / 2^keybits.
    EXPECT_GT(d->candidates_per_query, 0);
    EXPECT_EQ(d->probes_per_query, static_cast<double>(e.tables));
  }
  // The 4-table design expects 4 * 2^34 / 2^16 = 2^20 candidates per query.
  const IndexDesign* four = Find(*designs, "4 blocks (16,16,16,16), choose 1, probe radius 0");
  EXPECT_DOUBLE_EQ(four->candidates_per_query, std::ldexp(1.0, 20));
  // The first table of every design is the identity projection (shares the row arrays).
  for (const IndexDesign& d : *designs) EXPECT_TRUE(IsIdentityProjection(d.tables[0], 64));
}

TEST(IndexPlannerTest, BudgetsAndFrontier) {
  PlanRequest request;
  request.indexed_k = 3;
  request.expected_size = 1e7;
  request.memory_budget.bytes = 64 * 1e7;
  auto chosen = PlanIndex(request);
  ASSERT_TRUE(chosen.ok());
  EXPECT_LE(chosen->bytes_per_fingerprint, 64);
  request.memory_budget = {};
  auto unlimited = PlanIndex(request);
  ASSERT_TRUE(unlimited.ok());
  EXPECT_LE(unlimited->cost_ns, chosen->cost_ns);
  request.memory_budget.bytes = 1;  // nothing fits
  EXPECT_EQ(PlanIndex(request).status().code(), StatusCode::kResourceExhausted);
  auto designs = EnumerateIndexDesigns(request);
  ASSERT_TRUE(designs.ok());
  auto frontier = ParetoFrontier(*designs);
  ASSERT_GE(frontier.size(), 2u);
  for (size_t i = 1; i < frontier.size(); ++i) {
    EXPECT_GE(frontier[i].bytes_per_fingerprint, frontier[i - 1].bytes_per_fingerprint);
    EXPECT_LT(frontier[i].cost_ns, frontier[i - 1].cost_ns);
  }
}

TEST(IndexPlannerTest, BadRequests) {
  PlanRequest request;
  request.bits = 32;
  EXPECT_FALSE(EnumerateIndexDesigns(request).ok());
  request.bits = 64;
  request.indexed_k = -1;
  EXPECT_FALSE(EnumerateIndexDesigns(request).ok());
  request.indexed_k = 3;
  request.expected_size = 0;
  EXPECT_FALSE(EnumerateIndexDesigns(request).ok());
}

// Every design covers every bit exactly once in its projection and has a radius for every k.
TEST(IndexPlannerTest, DesignsAreWellFormed) {
  for (int bits : {64, 128}) {
    for (int k : {0, 1, 4, 8, 16}) {
      if (bits == 64 && k > 8) continue;
      PlanRequest request;
      request.bits = bits;
      request.indexed_k = k;
      request.expected_size = 1e6;
      auto designs = EnumerateIndexDesigns(request);
      ASSERT_TRUE(designs.ok());
      ASSERT_FALSE(designs->empty()) << bits << " " << k;
      for (const IndexDesign& d : *designs) {
        ASSERT_EQ(d.probe_radius.size(), static_cast<size_t>(k + 1));
        for (const IndexTableSpec& t : d.tables) {
          int width = 0;
          for (const BitRange& r : ProjectionRanges(t, bits)) width += r.width;
          EXPECT_EQ(width, 64);
          EXPECT_LE(t.key_bits, 64);
        }
      }
      EXPECT_TRUE(PlanIndex(request).ok());
    }
  }
}

TEST(IndexPlannerTest, PlanCommandListsPaperDesigns) {
  std::string command = std::string(NEARDUP_BINARY) + " plan --bits 64 -k 3 -n 17179869184 --list";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  size_t got;
  while ((got = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, got);
  EXPECT_EQ(pclose(pipe), 0);
  EXPECT_NE(output.find("6 blocks (11,11,11,11,10,10), choose 3"), std::string::npos);
  EXPECT_NE(output.find("rest in 4 blocks (12,12,12,12), choose 1"), std::string::npos);
  EXPECT_NE(output.find("5 blocks (13,13,13,13,12), choose 2"), std::string::npos);
  EXPECT_NE(output.find("chosen:"), std::string::npos);
  EXPECT_NE(output.find("picked when budget"), std::string::npos);
}

}  // namespace
}  // namespace neardup
