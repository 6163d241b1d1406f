// einsum, as torch.einsum: subscripts parsed into one letter per axis (an ellipsis into
// letters of its own, broadcast from the right as numpy does), then the operands contracted
// left to right, each pair as one matmul of [batch, rows, sum] by [batch, sum, columns]
// (PyTorch's sumproduct_pair), so a contraction gets matmul's kernels, gradients and
// Autocast. A letter repeated in one operand takes its diagonal; a letter no later operand
// and not the output needs is summed away before its pair's product.
#include "src/tensor_ops.hpp"

#include <loom/tensor.hpp>

#include <algorithm>
#include <map>
#include <numeric>

namespace loom {

namespace {

// One axis letter per character; an ellipsis's axes are characters past 'z' (their order
// is the ellipsis's, from its first axis).
using Letters = std::string;
constexpr char kEllipsisFirst = '{';
constexpr int kMaxEllipsisAxes = 64;

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string show(const Letters& letters) {
  std::string out;
  for (const char c : letters)
    out += is_letter(c) ? std::string(1, c) : fmt::format("(...{})", c - kEllipsisFirst);
  return out;
}

[[noreturn]] void fail(std::string_view equation, const std::string& what) {
  throw Error(fmt::format("einsum(\"{}\"): {}", equation, what));
}

// The subscripts of one operand or of the output, as written: letters and at most one "...".
struct Subscripts {
  std::string before, after;  // around the ellipsis; all of it in `before` when there is none
  bool ellipsis = false;
};

Subscripts parse_subscripts(std::string_view equation, std::string_view text, const std::string& whose) {
  Subscripts s;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ') continue;
    if (c == '.') {
      if (text.substr(i, 3) != "..." || s.ellipsis)
        fail(equation, fmt::format("{}: a lone '.' or a second \"...\"", whose));
      s.ellipsis = true;
      i += 2;
    } else if (is_letter(c)) {
      (s.ellipsis ? s.after : s.before) += c;
    } else {
      fail(equation,
           fmt::format("{}: '{}' is no subscript (expected letters a-z, A-Z and \"...\")", whose, c));
    }
  }
  return s;
}

// An operand's letters, one per axis: its ellipsis covers the axes its letters leave, the
// last of them the ellipsis's last letter.
Letters operand_letters(std::string_view equation, const Subscripts& s, int rank, int ellipsis_rank,
                        size_t n) {
  const int named = static_cast<int>(s.before.size() + s.after.size());
  if (s.ellipsis ? named > rank : named != rank)
    fail(equation, fmt::format("operand {} has {} axes, its subscripts name {}{}", n, rank, named,
                               s.ellipsis ? " and an ellipsis" : ""));
  Letters out = s.before;
  for (int a = rank - named; a > 0; --a) out += static_cast<char>(kEllipsisFirst + ellipsis_rank - a);
  return out + s.after;
}

// `t` with the diagonal of each letter it repeats: x[i, i] -> d[i], the repeated axis
// dropped, as torch.diagonal then moved where the letter first stands.
Tensor take_diagonals(std::string_view equation, Tensor t, Letters& letters, size_t n) {
  for (size_t first = 0; first < letters.size(); ++first)
    for (size_t again = letters.size() - 1; again > first; --again) {
      if (letters[again] != letters[first]) continue;
      const Shape& shape = t.shape();
      if (!(shape[first] == shape[again]))
        fail(equation, fmt::format("operand {} repeats '{}' over axes of sizes {} and {}", n, letters[first],
                                   shape[first].str(), shape[again].str()));
      const int64_t size = shape[first].concrete(fmt::format("einsum's diagonal of '{}'", letters[first]));
      // The two axes last, flattened, every (size + 1)-th element: the diagonal, in the first's place.
      std::vector<int> order;
      for (int a = 0; a < t.ndim(); ++a)
        if (a != static_cast<int>(first) && a != static_cast<int>(again)) order.push_back(a);
      order.push_back(static_cast<int>(first));
      order.push_back(static_cast<int>(again));
      Tensor moved = t.permute(order).flatten(t.ndim() - 2, t.ndim() - 1);
      moved = moved.slice(moved.ndim() - 1, 0, size * size, size + 1);
      std::vector<int> back(static_cast<size_t>(moved.ndim()));
      std::iota(back.begin(), back.end(), 0);
      back.pop_back();
      back.insert(back.begin() + static_cast<long>(first), moved.ndim() - 1);
      t = moved.permute(back);
      letters.erase(again, 1);
    }
  return t;
}

// `t` (axes `letters`) with the axes of the letters `keep` does not hold summed away.
Tensor sum_away(Tensor t, Letters& letters, const Letters& keep) {
  std::vector<int> axes;
  Letters kept;
  for (size_t a = 0; a < letters.size(); ++a)
    if (keep.find(letters[a]) == Letters::npos)
      axes.push_back(static_cast<int>(a));
    else
      kept += letters[a];
  letters = kept;
  return axes.empty() ? t : t.sum(axes);
}

Dim product(const Tensor& t, const Letters& letters, const Letters& of) {
  Dim p = 1;
  for (const char c : of) p *= t.shape()[letters.find(c)];
  return p;
}

// `t` permuted to the letters `order` (each of its letters once).
Tensor arranged(const Tensor& t, const Letters& letters, const Letters& order) {
  std::vector<int> perm;
  for (const char c : order) perm.push_back(static_cast<int>(letters.find(c)));
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int>(i);
  return identity ? t : t.permute(perm);
}

// The product of `a` and `b` summed over their common letters that `keep` does not hold,
// as one matmul; its letters are the batch (common, kept), a's own, then b's own.
Tensor contract(const Tensor& a, const Letters& la, const Tensor& b, const Letters& lb, const Letters& keep,
                Letters& out) {
  Letters batch, rows, sum, cols;
  for (const char c : la) {
    const bool common = lb.find(c) != Letters::npos;
    (common ? (keep.find(c) != Letters::npos ? batch : sum) : rows) += c;
  }
  for (const char c : lb)
    if (la.find(c) == Letters::npos) cols += c;
  // A summed letter of size 1 on one side only broadcasts: the other side is summed alone.
  Tensor x = a, y = b;
  Letters lx = la, ly = lb;
  Letters summed;
  for (const char c : sum) {
    const Dim &nx = x.shape()[lx.find(c)], &ny = y.shape()[ly.find(c)];
    if (nx == ny) {
      summed += c;
    } else if (nx == 1) {
      x = x.squeeze(static_cast<int>(lx.find(c)));
      lx.erase(lx.find(c), 1);
      y = y.sum(static_cast<int>(ly.find(c)));
      ly.erase(ly.find(c), 1);
    } else {
      y = y.squeeze(static_cast<int>(ly.find(c)));
      ly.erase(ly.find(c), 1);
      x = x.sum(static_cast<int>(lx.find(c)));
      lx.erase(lx.find(c), 1);
    }
  }
  Shape batch_shape;
  for (const char c : batch) {
    const Dim &nx = x.shape()[lx.find(c)], &ny = y.shape()[ly.find(c)];
    batch_shape.push_back(nx == 1 ? ny : nx);
  }
  const Dim m = product(x, lx, rows), k = product(x, lx, summed), n = product(y, ly, cols);
  Shape xs, ys;
  for (const char c : batch) xs.push_back(x.shape()[lx.find(c)]), ys.push_back(y.shape()[ly.find(c)]);
  xs.push_back(m), xs.push_back(k), ys.push_back(k), ys.push_back(n);
  const Tensor product2d = arranged(x, lx, batch + rows + summed)
                               .reshape(xs)
                               .matmul(arranged(y, ly, batch + summed + cols).reshape(ys));
  Shape shape = batch_shape;
  for (const char c : rows) shape.push_back(x.shape()[lx.find(c)]);
  for (const char c : cols) shape.push_back(y.shape()[ly.find(c)]);
  out = batch + rows + cols;
  return product2d.reshape(shape);
}

}  // namespace

Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands) {
  if (operands.empty()) fail(equation, "no operands (expected at least one)");
  for (const Tensor& t : operands)
    if (!t.defined()) fail(equation, "an operand is an undefined tensor");
  const size_t arrow = equation.find("->");
  const std::string_view inputs = equation.substr(0, arrow);
  std::vector<Subscripts> subs;
  for (size_t start = 0;;) {
    const size_t comma = inputs.find(',', start);
    subs.push_back(parse_subscripts(equation, inputs.substr(start, comma - start),
                                    fmt::format("operand {}", subs.size())));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (subs.size() != operands.size())
    fail(equation,
         fmt::format("the subscripts name {} operands, {} were given", subs.size(), operands.size()));
  int ellipsis_rank = 0;
  for (size_t n = 0; n < subs.size(); ++n)
    if (subs[n].ellipsis)
      ellipsis_rank =
          std::max(ellipsis_rank, static_cast<int>(operands[n].ndim()) -
                                      static_cast<int>(subs[n].before.size() + subs[n].after.size()));
  if (ellipsis_rank > kMaxEllipsisAxes) fail(equation, "an ellipsis of more than 64 axes");
  std::vector<Tensor> ts;
  std::vector<Letters> letters;
  for (size_t n = 0; n < subs.size(); ++n) {
    letters.push_back(
        operand_letters(equation, subs[n], static_cast<int>(operands[n].ndim()), ellipsis_rank, n));
    ts.push_back(take_diagonals(equation, operands[n], letters.back(), n));
  }
  // Each letter's size: equal across operands, or 1 (broadcast).
  std::map<char, Dim> size;
  for (size_t n = 0; n < ts.size(); ++n)
    for (size_t a = 0; a < letters[n].size(); ++a) {
      const char c = letters[n][a];
      const Dim& d = ts[n].shape()[a];
      auto [it, fresh] = size.emplace(c, d);
      if (fresh || it->second == d || d == 1) continue;
      if (it->second == 1) {
        it->second = d;
        continue;
      }
      fail(equation,
           fmt::format("'{}' is {} in operand {} and {} in an earlier one (expected equal sizes, or 1)",
                       show(std::string(1, c)), d.str(), n, it->second.str()));
    }
  // The output's letters: as written, or torch's implicit order (the ellipsis, then the letters
  // used once, sorted).
  Letters output;
  if (arrow != std::string_view::npos) {
    const Subscripts o = parse_subscripts(equation, equation.substr(arrow + 2), "the output");
    output = o.before;
    for (int a = 0; a < ellipsis_rank && o.ellipsis; ++a) output += static_cast<char>(kEllipsisFirst + a);
    output += o.after;
    const bool any_ellipsis =
        std::any_of(subs.begin(), subs.end(), [](const Subscripts& s) { return s.ellipsis; });
    if (any_ellipsis && !o.ellipsis && ellipsis_rank > 0)
      fail(equation, "the operands have an ellipsis and the output none (expected \"...\" in the output)");
    for (size_t i = 0; i < output.size(); ++i) {
      if (!size.contains(output[i]))
        fail(equation, fmt::format("the output's '{}' is in no operand", show(std::string(1, output[i]))));
      if (output.find(output[i], i + 1) != Letters::npos)
        fail(equation, fmt::format("the output repeats '{}'", output[i]));
    }
  } else {
    for (int a = 0; a < ellipsis_rank; ++a) output += static_cast<char>(kEllipsisFirst + a);
    std::map<char, int> uses;
    for (const Subscripts& s : subs)
      for (const char c : s.before + s.after) ++uses[c];
    Letters once;
    for (const auto& [c, count] : uses)
      if (count == 1) once += c;
    output += once;  // std::map's order: 'A'..'Z' before 'a'..'z', as torch sorts them
  }
  // Left to right: each step keeps what the output or a later operand reads.
  const auto needed_after = [&](size_t n) {
    Letters keep = output;
    for (size_t later = n + 1; later < ts.size(); ++later) keep += letters[later];
    return keep;
  };
  Tensor acc = sum_away(ts[0], letters[0], ts.size() > 1 ? needed_after(0) + letters[1] : output);
  Letters acc_letters = letters[0];
  for (size_t n = 1; n < ts.size(); ++n) {
    const Letters keep = needed_after(n);
    Tensor next = sum_away(ts[n], letters[n], keep + acc_letters);
    acc = sum_away(acc, acc_letters, keep + letters[n]);
    acc = contract(acc, acc_letters, next, letters[n], keep, acc_letters);
  }
  // Broadcast letters of size 1 the output holds at another size are expanded; then the output's order.
  Tensor result = arranged(acc, acc_letters, output);
  Shape shape;
  for (const char c : output) shape.push_back(size.at(c));
  return result.shape() == shape ? result : result.expand(shape);
}

}  // namespace loom
