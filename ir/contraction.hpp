#pragma once
// One contraction analysis: a float sum over a product of loads,
//
//   out[batch.., m.., n..] = epilogue(sum_k a(batch.., m.., k..) * b(batch.., k.., n..))
//
// classified by which ranges each factor's loads move along, and by how much. Every
// stage that asks "is this a matmul?" asks this one: split_reduceop on the tensor graph
// (its addresses made by pushing ranges through the movement ops), panel_packing and
// multi_output on rangeify's graph, the register tile on a kernel.
//
//   M      output ranges a uses and b does not (only(a));  N: b and not a (only(b))
//   batch  output ranges both use (both());                 K: the sum's ranges (k)
//   window a load moving along an output range and a reduce range over overlapping
//          addresses: a convolution's x[i + k] (windows())
//
// A factor uses a range when one of its loads' addresses (or validity) does: the range
// a factor does not use is one it is broadcast along. Which factor is a is the caller's
// question (the one b is contiguous along its columns, say): the analysis answers for both.
#include "ir/uop.hpp"

#include <array>
#include <optional>
#include <vector>

namespace loom {

// Float ALU ops a factor's value may cost and still be computed again wherever it is
// read (a cast, a scale): the register tile computes a again per column tile, panel
// packing per panel. A costlier a (attention's fused softmax) is computed once.
inline constexpr int64_t kCheapFactorOps = 2;

// A float WHERE that picks between two computed values (a stack's or a concatenation's
// chain of pieces), not a mask: a padding's WHERE(valid, x, 0) has a constant branch.
bool is_pick(const UOpPtr& u);
// `value` picks by `range`: one of its picks' conditions uses it.
bool picks_by(const UOpPtr& value, const UOpPtr& range);

struct ContractionRead {
  UOpPtr access;     // the INDEX (on the tensor graph, the address itself): the ranges it uses
  UOpPtr address;    // the element it reads, as one linear index (null: the INDEX's, made when asked)
  int64_t itemsize;  // bytes of one element
};

struct Contraction {
  UOpPtr reduce;                 // the float ADD sum (null on the tensor graph)
  std::vector<UOpPtr> outs;      // output ranges, outermost first
  std::vector<UOpPtr> k;         // the sum's ranges
  std::array<UOpPtr, 2> factor;  // the MUL's operands; factor[0] null: a sum of loads alone
  std::array<std::vector<ContractionRead>, 2> loads;  // each factor's reads
  std::array<int64_t, 2> ops{0, 0};                   // float ALU ops computing one value of each factor
  std::array<bool, 2> nested{false, false};           // the factor holds a REDUCE of its own
  // Every read of the value: the factors' and the epilogue's (a STORE's own INDEX is no read).
  std::vector<ContractionRead> reads;
  UOpPtr store;  // the output's INDEX, if known (a kernel's STORE)
  // A read uses a range it reaches, not only one open at it: rangeify's graph where
  // other buffers' bodies may use the same ranges (schedule/multi_output.cpp).
  bool walk = false;

  bool product() const { return factor[0] != nullptr; }
  bool uses(const ContractionRead& read, const UOpPtr& range) const;
  // Some load of factor f uses `range`.
  bool uses(int f, const UOpPtr& range) const;
  // The step of `read`'s address when `range` steps by one, if constant (0: unused).
  static std::optional<int64_t> stride(const ContractionRead& read, const UOpPtr& range);
  // Every load of factor f steps by a constant along `range` (transposed or not).
  bool strided(int f, const UOpPtr& range) const;
  // Every load of factor f, and the store if known, is contiguous along `range`.
  bool contiguous(int f, const UOpPtr& range) const;
  // Output ranges factor f uses and the other does not, outermost first: a's M, b's N.
  std::vector<UOpPtr> only(int f) const;
  // Output ranges both factors use: the batch.
  std::vector<UOpPtr> both() const;
  // Each factor reads along a range (output or summed) the other is broadcast along.
  bool broadcast_both() const;
  // Terms of the sum per output: the product of k's trip counts; none when one is symbolic.
  std::optional<int64_t> sum_length() const;
  // Factor f picks its value by `range`: a WHERE whose condition uses it (a stack's or a
  // concatenation's pieces, each a load of its own). With `range` a constant, as in a
  // tile that unrolls all of it, each pick folds to one load.
  bool selects(int f, const UOpPtr& range) const;
  // Some read of the value uses every output range: a pass over a buffer of the
  // product's whole iteration space with a sum, which no register tile keeps.
  bool reads_all_outputs() const;

  struct Window {
    UOpPtr out, reduce;  // x[.. out * s + reduce * d ..] with the two overlapping
  };
  // Loads of either factor whose address moves along an output range and a reduce
  // range of constant extents, one range's span (extent times stride) past the other's
  // stride when one stride divides the other: neighbouring outputs read overlapping
  // windows (a convolution), where a matmul's a[i * K + k] tiles its rows.
  std::vector<Window> windows() const;
};

// The contraction `value` computes (a BUFFERIZE's value, or a kernel's STORE) over the
// output ranges `outs`: the one REDUCE among its own nodes (not those of the buffers it
// reads), a float ADD of one lane, over MUL(a, b) or over loads alone. The reads are
// INDEX nodes of a BUFFER, BUFFERIZE or DEFINE_GLOBAL. `store` (may be null) is the
// output's INDEX; `walk` as in Contraction.
std::optional<Contraction> contraction(const UOpPtr& value, std::vector<UOpPtr> outs,
                                       const UOpPtr& store = nullptr, bool walk = false);

// The same analysis for a sum of a product whose factors are given by their element
// addresses (the tensor graph: split_reduceop pushes ranges through the movement ops
// to each factor's data): one read per factor, `itemsize` bytes each.
Contraction contraction_of_addresses(const std::array<UOpPtr, 2>& address,
                                     const std::array<int64_t, 2>& itemsize, std::vector<UOpPtr> outs,
                                     std::vector<UOpPtr> k);

}  // namespace loom
