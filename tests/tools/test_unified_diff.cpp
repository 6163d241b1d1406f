#include "tools/unified_diff.hpp"

#include <doctest/doctest.h>

using loom::tools::unified_diff;

TEST_CASE("equal texts have no diff") { CHECK(unified_diff("a\nb\n", "a\nb\n", "x", "y") == ""); }

TEST_CASE("one changed line shows with its context, in diff -u's form") {
  const std::string before = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
  const std::string after = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
  CHECK(unified_diff(before, after, "before", "after") ==
        "--- before\n+++ after\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
  CHECK(unified_diff(before, after, "a", "b", 1) == "--- a\n+++ b\n@@ -4,3 +4,3 @@\n 4\n-5\n+five\n 6\n");
}

TEST_CASE("far-apart changes make separate hunks; near ones share one") {
  std::string before, after;
  for (int i = 1; i <= 20; ++i) {
    before += std::to_string(i) + "\n";
    after += (i == 2 || i == 18 ? "x" : std::to_string(i)) + "\n";
  }
  const std::string d = unified_diff(before, after, "a", "b", 2);
  CHECK(
      d ==
      "--- a\n+++ b\n@@ -1,4 +1,4 @@\n 1\n-2\n+x\n 3\n 4\n@@ -16,5 +16,5 @@\n 16\n 17\n-18\n+x\n 19\n 20\n");
  const std::string near = unified_diff("1\n2\n3\n4\n5\n", "x\n2\n3\n4\ny\n", "a", "b", 2);
  CHECK(near == "--- a\n+++ b\n@@ -1,5 +1,5 @@\n-1\n+x\n 2\n 3\n 4\n-5\n+y\n");
}

TEST_CASE("insertions and deletions alone, and texts with nothing in common") {
  CHECK(unified_diff("a\nc\n", "a\nb\nc\n", "a", "b") == "--- a\n+++ b\n@@ -1,2 +1,3 @@\n a\n+b\n c\n");
  CHECK(unified_diff("a\nb\nc\n", "a\nc\n", "a", "b") == "--- a\n+++ b\n@@ -1,3 +1,2 @@\n a\n-b\n c\n");
  CHECK(unified_diff("", "x\n", "a", "b") == "--- a\n+++ b\n@@ -0,0 +1,1 @@\n+x\n");
  CHECK(unified_diff("p\nq\n", "r\n", "a", "b") == "--- a\n+++ b\n@@ -1,2 +1,1 @@\n-p\n-q\n+r\n");
}
