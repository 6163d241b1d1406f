#include "tools/unified_diff.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace loom::tools {

std::vector<std::string> text_lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

namespace {

enum class Edit : char { Keep = ' ', Remove = '-', Add = '+' };

constexpr long kMaxEdits = 4000;  // beyond this many changed lines, the middle is replaced whole

// A shortest edit script from a[lo_a, hi_a) to b[lo_b, hi_b) (Myers' greedy
// algorithm, keeping each round's frontier to walk back through).
std::vector<Edit> shortest_edits(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  const long n = static_cast<long>(a.size()), m = static_cast<long>(b.size()), offset = n + m + 1;
  std::vector<long> v(static_cast<size_t>(2 * offset + 1), 0);
  std::vector<std::vector<long>> trace;
  long found = -1;
  for (long d = 0; d <= std::min(n + m, kMaxEdits) && found < 0; ++d) {
    trace.push_back(v);
    for (long k = -d; k <= d; k += 2) {
      const bool down = k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1]);
      long x = down ? v[offset + k + 1] : v[offset + k - 1] + 1;
      long y = x - k;
      while (x < n && y < m && a[x] == b[y]) ++x, ++y;
      v[offset + k] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
  }
  if (found < 0) {  // too different: everything out, everything in
    std::vector<Edit> out(a.size(), Edit::Remove);
    out.insert(out.end(), b.size(), Edit::Add);
    return out;
  }
  std::vector<Edit> reversed;
  long x = n, y = m;
  for (long d = found; d > 0; --d) {
    const std::vector<long>& prev = trace[static_cast<size_t>(d)];
    const long k = x - y;
    const bool down = k == -d || (k != d && prev[offset + k - 1] < prev[offset + k + 1]);
    const long prev_k = down ? k + 1 : k - 1;
    const long prev_x = prev[offset + prev_k], prev_y = prev_x - prev_k;
    while (x > prev_x && y > prev_y) reversed.push_back(Edit::Keep), --x, --y;
    reversed.push_back(down ? Edit::Add : Edit::Remove);
    x = prev_x;
    y = prev_y;
  }
  while (x > 0 && y > 0) reversed.push_back(Edit::Keep), --x, --y;
  return {reversed.rbegin(), reversed.rend()};
}

}  // namespace

std::string unified_diff(const std::string& before, const std::string& after, const std::string& before_name,
                         const std::string& after_name, int context) {
  if (before == after) return "";
  const std::vector<std::string> a = text_lines(before), b = text_lines(after);
  const std::vector<Edit> edits = shortest_edits(a, b);
  // Position of each edit in a and b.
  std::vector<size_t> at_a(edits.size() + 1), at_b(edits.size() + 1);
  for (size_t i = 0; i < edits.size(); ++i) {
    at_a[i + 1] = at_a[i] + (edits[i] != Edit::Add);
    at_b[i + 1] = at_b[i] + (edits[i] != Edit::Remove);
  }
  std::string out = fmt::format("--- {}\n+++ {}\n", before_name, after_name);
  const size_t c = static_cast<size_t>(std::max(context, 0));
  size_t i = 0;
  while (i < edits.size()) {
    if (edits[i] == Edit::Keep) {
      ++i;
      continue;
    }
    // A hunk: from `context` lines before this change to `context` after the
    // last change that is within 2*context unchanged lines of the one before.
    const size_t start = i >= c ? i - c : 0;
    size_t end = i, kept = 0;
    for (size_t j = i; j < edits.size() && kept <= 2 * c; ++j) {
      kept = edits[j] == Edit::Keep ? kept + 1 : 0;
      if (edits[j] != Edit::Keep) end = j + 1;
    }
    const size_t stop = std::min(edits.size(), end + c);
    const size_t na = at_a[stop] - at_a[start], nb = at_b[stop] - at_b[start];
    out +=
        fmt::format("@@ -{},{} +{},{} @@\n", at_a[start] + (na ? 1 : 0), na, at_b[start] + (nb ? 1 : 0), nb);
    for (size_t j = start; j < stop; ++j)
      out += static_cast<char>(edits[j]) + (edits[j] == Edit::Add ? b[at_b[j]] : a[at_a[j]]) + "\n";
    i = stop;
  }
  return out;
}

}  // namespace loom::tools
