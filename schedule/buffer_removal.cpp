#include "schedule/buffer_removal.hpp"

#include "ir/buffer_access.hpp"
#include "ir/planted_fault.hpp"
#include "ir/range_split.hpp"
#include "schedule/stage.hpp"

#include <algorithm>
#include <numeric>
#include <unordered_set>

namespace loom {

namespace {

// Inlining a value into a consumer that reads it at other indices computes it
// once per read. Past three distinct input buffers, those repeated reads cost
// more than one write and one read of a materialised buffer (tinygrad's limit).
constexpr size_t kMaxInlinedBuffers = 3;
// LOOM_PCONTIG levels above this allow a reduce that reads a buffer to be
// inlined (recomputed per read) when its buffer would be much larger than its
// inputs; at this level and below such a reduce always keeps its buffer.
constexpr int kPcontigInlineLevel = 2;
// ... and "much larger" means at least this many output elements per input
// element: the recomputation then costs less than writing the big buffer.
constexpr double kMinOutputToInput = 10.0;
// A value holding a transcendental op, inlined, runs at each element its reader visits;
// past this many visits per element of its buffer (a pad much larger than its source),
// the buffer's write and read cost less than the repeated ops (the fuzzer's recompute bound).
constexpr double kMaxVisitsPerElement = 1.25;

int64_t buffer_size(const UOp& b) {
  return b.op == Op::BUFFER ? b.get<std::vector<int64_t>>().at(1) : int64_t{element_count(b.get<Shape>())};
}

// What a BUFFERIZE's value reads: the distinct buffers, and whether a reduce
// inside it reads one. Other BUFFERIZEs are read, not entered.
struct Reads {
  std::vector<const UOp*> buffers;
  std::vector<const UOp*> reduces;  // the REDUCEs of the value (other buffers are read, not entered)
  bool reduce_reads_buffer = false;
  bool transcendental = false;  // an op of the value (not of the buffers it reads) is one
};

Reads reads_of(const UOpPtr& value) {
  Reads out;
  std::unordered_set<const UOp*> buffers, seen[2];  // seen outside / inside a reduce
  std::vector<std::pair<const UOp*, bool>> stack{{value.get(), false}};
  while (!stack.empty()) {
    auto [u, in_reduce] = stack.back();
    stack.pop_back();
    if (!seen[in_reduce].insert(u).second) continue;
    if (u->op == Op::REDUCE && !seen[!in_reduce].contains(u)) out.reduces.push_back(u);
    out.transcendental |= is_transcendental(u->op);
    if (u->op == Op::BUFFER || u->op == Op::BUFFERIZE) {
      if (buffers.insert(u).second) out.buffers.push_back(u);
      out.reduce_reads_buffer |= in_reduce;
      continue;
    }
    for (const auto& s : u->src) stack.emplace_back(s.get(), in_reduce || u->op == Op::REDUCE);
  }
  return out;
}

// Whether the buffer is read at more than one index and a transcendental op of its value,
// outside its reduces, runs at every element of it (x + erf(y), read by its row's max and by
// the subtraction of that max): inlined, the op would run once per read. (One that runs per
// row, a normalisation's rsqrt, costs a fraction of the loads beside it.)
bool transcendental_read_twice(const UOpPtr& buffer, const StageContext& ctx) {
  std::vector<const UOp*> ranges;
  for (size_t i = 1; i < buffer->src.size(); ++i)
    if (buffer->src[i]->op == Op::RANGE) ranges.push_back(buffer->src[i].get());
  if (ranges.empty()) return false;
  const auto place = ctx.range_places.find(ranges[0]);
  if (place == ctx.range_places.end() || place->second.reads < 2) return false;
  std::unordered_set<const UOp*> seen;
  std::vector<const UOp*> stack{buffer->src[0].get()};
  while (!stack.empty()) {
    const UOp* u = stack.back();
    stack.pop_back();
    if (!seen.insert(u).second || u->op == Op::BUFFER || u->op == Op::BUFFERIZE || u->op == Op::REDUCE)
      continue;
    if (is_transcendental(u->op) &&
        std::all_of(ranges.begin(), ranges.end(), [&](const UOp* r) { return u->ranges().contains(r); }))
      return true;
    for (const auto& s : u->src) stack.push_back(s.get());
  }
  return false;
}

bool reads_in_reduce_loop(const UOpPtr& index) { return index->ranges().has_kind(AxisKind::Reduce); }

// The iterations at which `index`'s reader computes an inlined value: one per combination
// of the ranges the read varies with (a broadcast read varies with fewer, and codegen runs
// it outside the others' loops).
double visits(const UOpPtr& index) {
  double n = 1;
  for (const UOp* r : index->ranges()) n *= static_cast<double>(std::max<int64_t>(r->src.at(0)->vmax(), 0));
  return n;
}

// A reduce per row that the reader computes once per row: every reduce in the value,
// read at `index`, is over the reader's outermost loop ranges (the leading ranges of
// the buffer it fills, not a reduce's) and the read goes on along other ranges
// (the row's elements). The kernel's loops nest outermost first and codegen places a
// reduce inside the loops it needs only, so it runs once per row, its row still in
// L1 for the reader: softmax's max and sum, layernorm's mean, in the kernel over
// rows that reads them (docs/pipeline.md). A reduce over all of the reader's ranges
// (a matmul read elementwise) would be computed again beside its buffer; one over
// inner ranges (a transposed reader) once per outer iteration; one over none (a
// full sum) once per thread's chunk.
bool reduced_once_per_row(const UOpPtr& buffer, const Reads& reads, const UOpPtr& index,
                          const StageContext& ctx) {
  // Reduces of one buffer's rows (softmax's x): a product of two buffers (a matmul,
  // whose gradient's kernels read it back) keeps its buffer.
  if (reads.buffers.size() != 1) return false;
  const std::vector<UOpPtr> idx = index_of(index);
  const std::vector<const UOp*>& reduces = reads.reduces;
  if (reduces.empty()) return false;
  for (const UOp* red : reduces) {
    std::unordered_set<const UOp*> rows;  // the reader's ranges the reduce depends on
    for (const UOp* r : red->ranges()) {
      size_t i = 0;
      while (i < idx.size() && buffer->src[i + 1].get() != r) ++i;
      if (i == idx.size() || idx[i]->op != Op::RANGE || idx[i]->get<AxisArg>().kind != AxisKind::Loop)
        return false;
      rows.insert(idx[i].get());
    }
    if (rows.empty()) return false;
    const auto place = ctx.range_places.find(*rows.begin());
    if (place == ctx.range_places.end()) return false;
    for (const UOp* r : rows) {
      const auto p = ctx.range_places.find(r);
      if (p == ctx.range_places.end() || p->second.buffer != place->second.buffer ||
          p->second.position >= rows.size())
        return false;
    }
    // A reader whose own reduces run under more of its ranges (the matmul that reads a
    // softmax as its a) may read this inside them, which would split its tile by rows.
    if (place->second.reduce_reach > rows.size()) return false;
    bool read_along_more = rows.size() < place->second.count;
    for (const UOp* r : index->ranges()) read_along_more |= !rows.contains(r);
    if (!read_along_more) return false;
  }
  return true;
}

// Should this proposed buffer stay? (Its consumers' reads are what decide.)
bool keep(const UOpPtr& buffer, const UOpPtr& index, const StageContext& ctx) {
  const UOpPtr& value = buffer->src[0];
  if (value->op == Op::CONTIGUOUS) return true;  // a realization point
  if (planted_fault() == PlantedFault::InlineEveryBuffer) return false;
  const Reads r = reads_of(value);
  if (r.buffers.size() > kMaxInlinedBuffers) return true;
  if (r.reduce_reads_buffer && !reduced_once_per_row(buffer, r, index, ctx)) {
    if (ctx.flags.pcontig <= kPcontigInlineLevel) return true;
    int64_t in = 1;
    for (const UOp* b : r.buffers) in += buffer_size(*b);
    const double ratio = static_cast<double>(buffer_size(*buffer) + 1) / static_cast<double>(in);
    // Axes read at a reduce's index would need a buffer local to the consumer's
    // loop, which kernels do not have: such a read keeps the whole buffer.
    if (ratio < kMinOutputToInput || reads_in_reduce_loop(index)) return true;
  }
  // A transcendental value is read at more than one index: inlined it would run once
  // per read (softmax's exp, read by its sum and by its normalisation, twice per
  // element; once per iteration of a reduce's loop that reads it). NEG, TRUNC and
  // casts cost less than the load that would replace them, so argmin's negation
  // stays fused, unlike on a GPU.
  if (is_transcendental(value->op) || transcendental_read_twice(buffer, ctx)) return true;
  // Read through a pad much larger than itself, it would run in the padding too: a select
  // keeps the value only where the pad's guard holds, but computes it everywhere.
  if (r.transcendental && visits(index) > kMaxVisitsPerElement * static_cast<double>(buffer_size(*buffer)))
    return true;
  return false;
}

UOpPtr remove_buffer(const Match& m) {
  const UOpPtr &index = m["idx"], &buffer = m["buf"];
  if (keep(buffer, index, m.ctx<StageContext>())) return nullptr;
  return inline_at(buffer, index);
}

// A buffer read at exactly the ranges it was built over is its value: the
// reader runs inside those very loops. (A buffer with no range axis, read at
// its constant index, is not: its reader may loop over anything.)
UOpPtr read_at_own_ranges(const Match& m) {
  const UOpPtr &index = m["idx"], &buffer = m["buf"];
  if (buffer->src[0]->op == Op::CONTIGUOUS) return nullptr;
  const std::vector<UOpPtr> idx = index_of(index);
  bool any_range = false;
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] != buffer->src[i + 1]) return nullptr;
    any_range |= idx[i]->op == Op::RANGE;
  }
  return any_range ? where_valid(valid_of(index), buffer->src[0]) : nullptr;
}

// A buffer of no elements has no index its reader's valid can hold at: every
// read of it is 0. (Inlined instead, a load in its value that no range guards,
// its ranges being empty, would run where nothing exists.)
UOpPtr read_empty(const Match& m) {
  const UOpPtr& buffer = m["buf"];
  if (element_count(buffer->get<Shape>()) != 0) return nullptr;
  return const_like(buffer->dtype, 0);
}

// A buffer of no elements computes nothing: its value, and the buffers only it
// reads, are never needed (an empty slice of a reduce's result ran the reduce).
UOpPtr compute_nothing(const Match& m) {
  const UOpPtr& buffer = m.root();
  if (element_count(buffer->get<Shape>()) != 0) return nullptr;
  const UOpPtr& value = buffer->src[0];
  const bool point = value->op == Op::CONTIGUOUS;
  if ((point ? value->src[0] : value)->op == Op::CONST) return nullptr;
  const UOpPtr zero = const_like(buffer->dtype, 0);
  std::vector<UOpPtr> src = buffer->src;
  src[0] = point ? UOp::make(Op::CONTIGUOUS, buffer->dtype, {zero}) : zero;
  return buffer->with_src(std::move(src));
}

// A buffer of one constant reads as that constant, a realization point's too (a
// reduce over nothing, realized, is its identity: nothing to compute again).
UOpPtr read_constant(const Match& m) {
  const UOpPtr& index = m["idx"];
  return where_valid(valid_of(index), m["c"]);
}

}  // namespace

void place_ranges(const UOpPtr& root, StageContext& ctx) {
  const std::vector<UOpPtr> nodes = toposort(root);
  const std::unordered_map<const UOp*, int> reads = buffer_reads(nodes);
  for (const UOpPtr& u : nodes) {
    if (u->op != Op::BUFFERIZE) continue;
    std::vector<UOpPtr> ranges;
    for (size_t i = 1; i < u->src.size(); ++i)
      if (u->src[i]->op == Op::RANGE) ranges.push_back(u->src[i]);
    size_t reach = 0;
    for (const UOp* red : reads_of(u->src[0]).reduces)
      for (size_t i = 0; i < ranges.size(); ++i)
        if (red->ranges().contains(ranges[i])) reach = std::max(reach, i + 1);
    const auto read = reads.find(u.get());
    const size_t read_count = read == reads.end() ? 0 : static_cast<size_t>(read->second);
    for (size_t i = 0; i < ranges.size(); ++i)
      ctx.range_places[ranges[i].get()] = {u.get(), i, ranges.size(), reach, read_count};
    ctx.held.push_back(u);
  }
}

const PatternMatcher& buffer_removal() {
  using P = UPat;
  const P buf = P::op(Op::BUFFERIZE, {P::var("value")}, "buf").allow_more_src();
  const P cbuf = P::op(Op::BUFFERIZE, {P::cvar("c")}).allow_more_src();
  const P realized_cbuf = P::op(Op::BUFFERIZE, {P::op(Op::CONTIGUOUS, {P::cvar("c")})}).allow_more_src();
  static const PatternMatcher pm(
      "buffer_removal",
      {
          {buf, compute_nothing},
          {P::op(Op::LOAD, {P::op(Op::INDEX, {buf}, "idx").allow_more_src()}), read_empty},
          {P::op(Op::LOAD, {P::op(Op::INDEX, {cbuf}, "idx").allow_more_src()}), read_constant},
          {P::op(Op::LOAD, {P::op(Op::INDEX, {realized_cbuf}, "idx").allow_more_src()}), read_constant},
          {P::op(Op::LOAD, {P::op(Op::INDEX, {buf}, "idx").allow_more_src()}), read_at_own_ranges},
          {P::op(Op::LOAD, {P::op(Op::INDEX, {buf}, "idx").allow_more_src()}), remove_buffer},
      });
  return pm;
}

}  // namespace loom
