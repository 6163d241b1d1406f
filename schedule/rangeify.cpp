#include "schedule/rangeify.hpp"

#include "ir/contraction.hpp"
#include "ir/kernel_cost.hpp"
#include "ir/widening.hpp"
#include "schedule/movement_index.hpp"

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

namespace loom {

namespace {

bool is_point(Op op) { return op == Op::CONTIGUOUS || op == Op::ASSIGN || op == Op::COPY; }
bool is_leaf(Op op) { return op == Op::BUFFER || op == Op::CONST || op == Op::DEFINE_VAR || op == Op::IOTA; }
// (An axis of size 1 becomes one of another size, 0 aside; a symbolic size broadcasts.)
bool broadcasts(const UOp& u) {
  if (u.op != Op::EXPAND) return false;
  const Shape &out = *u.shape(), &in = *u.src[0]->shape();
  for (size_t a = 0; a < out.size(); ++a)
    if (in[a] == 1 && out[a] != 1 && out[a] != 0) return true;
  return false;
}

// How a node is read: one index per axis, and where (null: everywhere).
struct Access {
  std::vector<UOpPtr> idx;
  UOpPtr valid;
};

enum class Placement : uint8_t {
  Unused,     // nothing reads it (an ASSIGN's target view)
  Fused,      // computed inside its consumers' loops, at the one index they all read
  Realized,   // a realization point: a BUFFERIZE no stage removes
  Candidate,  // a proposed BUFFERIZE: buffer_removal keeps or inlines it
  Forwarded,  // a broadcast read at several indices: each consumer reads its source instead
};

struct NodeInfo {
  std::vector<Access> requests;         // how each consumer reads the node
  bool under_expand = false;            // a consumer broadcasts it before the next buffer
  bool under_candidate_expand = false;  // or a candidate's does, which buffer_removal may inline
  bool shared_by_broadcast = false;     // a broadcast of it is read at several indices
  bool in_reduce = false;               // a consumer is computed inside a reduce's loop
  // Fused, how many times each element would be computed: the broadcasts around it whose
  // loops nest outside the innermost one it reads, which codegen cannot hoist it out of.
  double repeats = 1;
  Placement placement = Placement::Unused;
  Access out;                 // where its value is computed
  std::vector<Access> needs;  // how it reads each source (by source slot)
  std::vector<UOpPtr> reduce_ranges;
  UOpPtr inside;  // PAD: where its source is read
  UOpPtr value, buffer;
};

UOpPtr read(const UOpPtr& source, const Access& a) {
  std::vector<UOpPtr> src{source};
  src.insert(src.end(), a.idx.begin(), a.idx.end());
  if (a.valid) src.push_back(a.valid);
  UOpPtr index = UOp::make(Op::INDEX, source->dtype.ptr_to(), std::move(src));
  return UOp::make(Op::LOAD, source->dtype, {index});
}

UOpPtr leaf_value(const UOpPtr& u, const Access& a) {
  switch (u->op) {
    case Op::BUFFER: return read(u, a);
    case Op::IOTA: return cast(a.idx.at(0), u->dtype);
    default: return u;  // CONST, DEFINE_VAR
  }
}

class Rangeifier {
 public:
  explicit Rangeifier(const std::vector<UOpPtr>& targets) {
    for (const auto& p : realization_points(targets)) points_.insert(p.get());
    const std::vector<UOpPtr> nodes = toposort(targets);
    // A value with a contiguous copy is realized too: the copy is its buffer (buffer_of),
    // and its other readers load it there rather than compute it again.
    for (const auto& n : nodes)
      if (n->op == Op::CONTIGUOUS && points_.contains(n.get()) && !is_leaf(n->src[0]->op))
        points_.insert(n->src[0].get());
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) place(*it);
    for (const auto& n : nodes) build(n);
  }
  UOpPtr buffer_of(const UOpPtr& x) {
    // A contiguous copy of a value realized in a buffer of its own (a target, another
    // copy) holds the same elements in the same order: that buffer. Not an ASSIGN's or a
    // COPY's, whose buffer is another tensor's.
    if (copies_point(*x)) return buffer_of(x->src[0]);
    NodeInfo& ni = info_.at(x.get());
    if (!ni.buffer) {
      std::vector<UOpPtr> src{ni.placement == Placement::Realized
                                  ? UOp::make(Op::CONTIGUOUS, ni.value->dtype, {ni.value})
                                  : ni.value};
      src.insert(src.end(), ni.out.idx.begin(), ni.out.idx.end());
      ni.buffer = UOp::make(Op::BUFFERIZE, x->dtype, std::move(src), *x->shape());
    }
    return ni.buffer;
  }

 private:
  std::unordered_set<const UOp*> points_;
  std::unordered_map<const UOp*, NodeInfo> info_;
  int64_t next_axis_ = 0;

  // A CONTIGUOUS has one source, of its own shape.
  bool copies_point(const UOp& x) const {
    if (x.op != Op::CONTIGUOUS) return false;
    const UOp& s = *x.src.at(0);
    return points_.contains(&s) && s.op != Op::ASSIGN && s.op != Op::COPY;
  }

  Access fresh(const Shape& shape) {
    Access a;
    for (const Dim& n : shape) a.idx.push_back(n == 1 ? const_i64(0) : make_range(n, next_axis_++));
    return a;
  }

  // Where `x` is computed, from how its consumers read it (all of them are
  // placed already: this runs in reverse toposort order). A reduce read under a
  // validity condition (a PAD's inside: the gradient of a slice, a cat) is a
  // candidate, not fused: fused, its loop would run at every element of the
  // padded consumer, the masked ones too, and outside any tile of its own (the
  // gradient of attention's qkv split ran three masked [2048, 384, 64] products).
  void place(const UOpPtr& x) {
    NodeInfo& ni = info_[x.get()];
    const bool agree = std::all_of(ni.requests.begin(), ni.requests.end(),
                                   [&](const Access& a) { return a.idx == ni.requests[0].idx; });
    if (points_.count(x.get())) {
      ni.placement = Placement::Realized;
      ni.out = fresh(*x->shape());
    } else if (ni.requests.empty() || is_leaf(x->op)) {
      return;  // a leaf is read directly by each consumer at its own index
    } else if (broadcasts(*x) && (!agree || ni.shared_by_broadcast)) {
      forward(x, ni);
      return;
    } else if (costly_chain_under_broadcast(*x, ni)) {
      ni.placement = Placement::Realized;
      ni.out = fresh(*x->shape());
    } else if (agree && !ni.shared_by_broadcast && !costly_under_broadcast(*x, ni)) {
      ni.placement = Placement::Fused;
      ni.out = {ni.requests[0].idx, any_of_valids(ni.requests)};
    } else {
      ni.placement = Placement::Candidate;
      ni.out = fresh(*x->shape());
    }
    if (!is_leaf(x->op)) plan(x, ni);
  }

  // Where a fused node must be computed: wherever any consumer reads it. Consumers
  // that agree on an index with no range in it (a scalar, size-1 axes) may sit in
  // different kernels, each valid over its own kernel's ranges: their OR would carry
  // one kernel's ranges into the other. Such an index is a constant inside the
  // node's bounds, so it is read everywhere instead, and each consumer masks its own.
  static UOpPtr any_of_valids(const std::vector<Access>& requests) {
    UOpPtr any;
    for (const auto& a : requests) {
      if (!a.valid) return nullptr;
      any = !any ? a.valid : any == a.valid ? any : alu(Op::OR, {any, a.valid});
    }
    const auto& idx = requests[0].idx;
    const bool range_free =
        std::none_of(idx.begin(), idx.end(), [](const UOpPtr& i) { return !i->ranges().empty(); });
    if (any && any != requests[0].valid && range_free) return nullptr;
    return any;
  }

  // Fused under a broadcast, a node runs once per element of the broadcast: a reduce
  // repeats its loop, a transcendental computed inside a reduce's loop its polynomial
  // (an exp under a pooling window, a GELU's tanh inside a matmul's). Either is a
  // candidate instead, and buffer_removal's keep rules decide. One computed outside
  // any reduce stays fused: codegen hoists it out of the broadcast's inner loops (a
  // layernorm's rsqrt per row). A reduce read through a pad is a candidate too: fused,
  // its loop would run at the masked elements as well; so is a transcendental read
  // through a pad that masks more elements than it has (its polynomial runs at each).
  // A transcendental computed again at each repeat of an outer broadcast (an erf of [7, 4, 4]
  // read by [3, 7, 4, 4], its 7 x 4 x 4 loops inside the 3), whose repeats cost more than its
  // buffer's store, load and kernel, is a candidate too.
  static bool costly_under_broadcast(const UOp& x, const NodeInfo& ni) {
    if (x.op == Op::REDUCE_AXIS) return ni.under_expand || padded_read(ni.requests[0], *x.shape(), 1);
    return is_transcendental(x.op) &&
           (((ni.under_expand || ni.under_candidate_expand) && computed_in_reduce(ni)) ||
            padded_read(ni.requests[0], *x.shape(), kMostlyMasked) || repeats_cost_a_buffer(x, ni));
  }
  static bool repeats_cost_a_buffer(const UOp& x, const NodeInfo& ni) {
    const double elements = max_elements(*x.shape());
    return (ni.repeats - 1) * elements * op_cost(x) > 2 * elements + kKernelLaunchOps;
  }
  static double max_elements(const Shape& shape) {
    double n = 1;  // a symbolic size at its upper bound
    for (const Dim& d : shape) n *= static_cast<double>(d.max());
    return n;
  }
  // Likewise a chain of more than kCheapFactorOps ALU ops (integer arithmetic, a
  // normalisation's (x - mean) * rstd * w + b inside a matmul): stored once and loaded
  // it costs less, so it is a buffer no stage removes. A chain rounded to a half (an
  // Autocast operand: a gradient through an activation) is stored rounded, in half the bytes.
  bool costly_chain_under_broadcast(const UOp& x, const NodeInfo& ni) const {
    const bool rounded = x.op == Op::CAST && x.dtype.is_half() && is_alu(x.src[0]->op);
    const UOp& chain = rounded ? *x.src[0] : x;
    return (is_alu(x.op) || rounded) && !is_transcendental(chain.op) && ni.under_expand &&
           computed_in_reduce(ni) && costly_chain(chain);
  }
  // A consumer may compute it inside a reduce's loop: it reads it there, or it is
  // itself computed there (fused, or a candidate buffer_removal may inline).
  static bool computed_in_reduce(const NodeInfo& ni) {
    return ni.in_reduce || std::any_of(ni.requests.begin(), ni.requests.end(), read_in_reduce);
  }

  // Whether the ALU ops `x`'s value runs per element, with what it reads fused into it
  // down to buffers, realization points, reduces and broadcasts (what is computed below
  // a broadcast runs at its source's size, and is judged there), are more than kCheapFactorOps (a
  // chain of integer arithmetic, a normalisation's (x - mean) * rstd * w + b). Shared
  // nodes count once; a chain that computes on an arange is addressing (a one-hot's
  // compare, which reduce_collapse turns into a gather only while it stays fused); a
  // compare or a logical op, a mask (relu's gradient's), costs nothing beside its select,
  // and what it compares is not walked (relu's output, which its forward stores).
  bool costly_chain(const UOp& x) const {
    constexpr size_t kMaxVisited = 64;  // a walk's bound: past it, the chain is costly
    std::unordered_set<const UOp*> seen{&x};
    std::vector<const UOp*> stack{&x};
    int64_t ops = 0;
    while (!stack.empty()) {
      const UOp* u = stack.back();
      stack.pop_back();
      if (u->op == Op::IOTA) return false;
      ops += is_alu(u->op) && u->dtype.scalar != Scalar::Bool && !joins_pieces(*u) ? 1 : 0;
      if (ops > kCheapFactorOps || seen.size() > kMaxVisited) return true;
      if (u != &x && u->dtype.scalar == Scalar::Bool) continue;
      for (const UOpPtr& s : u->src)
        if (!is_leaf(s->op) || s->op == Op::IOTA)
          if (s->op != Op::REDUCE_AXIS && !broadcasts(*s) && !points_.contains(s.get()) &&
              seen.insert(s.get()).second)
            stack.push_back(s.get());
    }
    return false;
  }
  // A pick of a padded piece: a concatenation or a stack (the hand-built convolution's
  // shifted slices), whose WHERE's condition is a padded mask (or an ADD of disjoint
  // padded pieces), chooses one piece per element and computes nothing.
  static bool joins_pieces(const UOp& u) {
    const auto padded = [](UOpPtr s) {
      while (is_movement(s->op) && s->op != Op::PAD) s = s->src[0];
      return s->op == Op::PAD;
    };
    if (u.op == Op::WHERE) return padded(u.src[0]);
    return u.op == Op::ADD && std::any_of(u.src.begin(), u.src.end(), padded);
  }
  static bool read_in_reduce(const Access& a) {
    return std::any_of(a.idx.begin(), a.idx.end(),
                       [](const UOpPtr& i) { return i->ranges().has_kind(AxisKind::Reduce); });
  }

  // A read under a validity condition by a reader whose output (its loop ranges, not a
  // reduce's) has at least `times` the node's elements: a padded reader of all of it. (A
  // smaller one, a strided convolution's dx folding its window sums, would make the
  // node a buffer larger than what it computes.)
  static constexpr double kMostlyMasked = 2;  // as many masked elements as the node's own
  static bool padded_read(const Access& a, const Shape& shape, double times) {
    if (!a.valid) return false;
    std::unordered_set<const UOp*> ranges;
    double covered = 1;
    // The guard's ranges count too: a size-1 axis padded to n is read at index 0 under a
    // guard on a range the index never names.
    std::vector<UOpPtr> reads = a.idx;
    reads.push_back(a.valid);
    for (const auto& i : reads)
      for (const UOp* r : i->ranges()) {
        if (r->get<AxisArg>().kind != AxisKind::Loop || !ranges.insert(r).second) continue;
        if (r->src.at(0)->op != Op::CONST) return false;
        covered *= static_cast<double>(r->src[0]->const_int());
      }
    return covered >= times * max_elements(shape);
  }

  // A broadcast its consumers read at different indices (a matmul's operand, read by the
  // product and by the other operand's gradient) holds nothing its source does not: a
  // buffer of it would hold each element as many times as it is broadcast, the
  // product's whole iteration space. So each consumer reads the source at its own index
  // through the broadcast, and the source is the candidate, its buffer of its own size.
  void forward(const UOpPtr& x, NodeInfo& ni) {
    ni.placement = Placement::Forwarded;
    NodeInfo& si = info_[x->src[0].get()];
    for (const Access& a : ni.requests) si.requests.push_back(through(x, a));
    si.under_expand = true;
    si.shared_by_broadcast = true;
  }
  static Access through(const UOpPtr& broadcast, const Access& a) {
    return {movement_source_index(broadcast, a.idx).idx, a.valid};
  }

  // What `x` reads from each source at its `out` index, handed to the sources.
  void plan(const UOpPtr& x, NodeInfo& ni) {
    const Access& o = ni.out;
    ni.needs.assign(x->src.size(), Access{});
    if (is_movement(x->op)) {
      SourceIndex si = movement_source_index(x, o.idx);
      ni.inside = si.inside;
      ni.needs[0] = {std::move(si.idx),
                     si.inside ? (o.valid ? land(o.valid, si.inside) : si.inside) : o.valid};
    } else if (x->op == Op::REDUCE_AXIS) {
      const Shape& in = *x->src[0]->shape();
      ni.needs[0] = {o.idx, o.valid};
      for (int64_t a : x->get<ReduceArg>().axes) {
        if (in[a] == 1) continue;  // the output index there is already 0
        ni.reduce_ranges.push_back(make_range(in[a], next_axis_++, AxisKind::Reduce));
        ni.needs[0].idx[a] = ni.reduce_ranges.back();
      }
    } else if (x->op == Op::ASSIGN) {
      ni.needs[1] = o;  // ASSIGN(target, value) has the value's value; the target is not read here
    } else if (is_alu(x->op) || x->op == Op::CAST || x->op == Op::BITCAST || x->op == Op::CONTIGUOUS ||
               x->op == Op::DETACH || x->op == Op::COPY) {
      std::fill(ni.needs.begin(), ni.needs.end(), o);
    } else {
      throw Error("rangeify: cannot index " + std::string(op_name(x->op)) + " (no rule for this op)");
    }
    // A broadcast's source is read under it whatever the broadcast's placement (a
    // realized broadcast of a column max reads each max once per row); so are the
    // sources of a fused node under one. A candidate buffer_removal may inline there
    // (not a reduce's: it keeps its buffer) passes it on for the transcendentals alone: a
    // cheap chain's recomputation there (relu's gradient's mask in the next product's
    // loads) costs less than a kernel of its own.
    // A view candidate computes nothing: what it reads is under its broadcast too.
    const bool fused = ni.placement == Placement::Fused;
    const bool view = ni.placement == Placement::Candidate && is_movement(x->op);
    const bool expands = broadcasts(*x) || ((fused || view) && ni.under_expand);
    const bool candidate_expands =
        (fused || (ni.placement == Placement::Candidate && x->op != Op::REDUCE_AXIS)) &&
        (ni.under_expand || ni.under_candidate_expand);
    const bool in_reduce = ni.placement != Placement::Realized && computed_in_reduce(ni);
    const double repeats =
        (fused || view ? ni.repeats : 1) * (broadcasts(*x) ? outer_repeats(o, ni.needs[0]) : 1);
    for (size_t i = 0; i < x->src.size(); ++i) {
      if (x->op == Op::ASSIGN && i == 0) continue;
      NodeInfo& si = info_[x->src[i].get()];
      si.requests.push_back(ni.needs[i]);
      si.under_expand |= expands;
      si.under_candidate_expand |= candidate_expands;
      si.in_reduce |= in_reduce;
      si.repeats = std::max(si.repeats, repeats);
    }
  }
  // The iterations of a broadcast's loops that its source's computation sits inside: the
  // ranges the broadcast adds (read in `out`, not in `in`) that nest outside the innermost
  // range the source reads. Ranges nest in the order of their ids (a buffer's outermost
  // first, a reduce's inside its reader's loops).
  static double outer_repeats(const Access& out, const Access& in) {
    int64_t innermost = -1;
    std::unordered_set<const UOp*> read;
    for (const UOpPtr& i : in.idx)
      for (const UOp* r : i->ranges()) {
        read.insert(r);
        innermost = std::max(innermost, r->get<AxisArg>().id);
      }
    double n = 1;
    std::unordered_set<const UOp*> added;
    for (const UOpPtr& i : out.idx)
      for (const UOp* r : i->ranges())
        if (!read.contains(r) && r->get<AxisArg>().id < innermost && added.insert(r).second)
          n *= static_cast<double>(std::max<int64_t>(r->src.at(0)->vmax(), 1));
    return n;
  }

  UOpPtr source_value(const UOpPtr& s, const Access& a) {
    const NodeInfo& si = info_.at(s.get());
    if (si.placement == Placement::Forwarded) return source_value(s->src[0], through(s, a));
    if (si.placement == Placement::Realized || si.placement == Placement::Candidate)
      return read(buffer_of(s), a);
    return is_leaf(s->op) ? leaf_value(s, a) : si.value;
  }

  void build(const UOpPtr& x) {
    NodeInfo& ni = info_.at(x.get());
    if (ni.placement == Placement::Unused || ni.placement == Placement::Forwarded) return;
    if (is_leaf(x->op)) {
      ni.value = leaf_value(x, ni.out);
      return;
    }
    std::vector<UOpPtr> parts(x->src.size());
    for (size_t i = 0; i < x->src.size(); ++i)
      if (!(x->op == Op::ASSIGN && i == 0)) parts[i] = source_value(x->src[i], ni.needs[i]);
    ni.value = combine(x, ni, parts);
  }

  static UOpPtr combine(const UOpPtr& x, const NodeInfo& ni, const std::vector<UOpPtr>& parts) {
    switch (x->op) {
      case Op::PAD: return ni.inside ? where(ni.inside, parts[0], const_like(x->dtype, 0)) : parts[0];
      case Op::REDUCE_AXIS: {
        if (ni.reduce_ranges.empty()) return parts[0];
        std::vector<UOpPtr> src{parts[0]};
        src.insert(src.end(), ni.reduce_ranges.begin(), ni.reduce_ranges.end());
        return UOp::make(Op::REDUCE, x->dtype, std::move(src), ReduceArg{x->get<ReduceArg>().op, {}});
      }
      case Op::ASSIGN: return parts[1];
      default: break;
    }
    if (is_alu(x->op) || x->op == Op::CAST || x->op == Op::BITCAST)
      return UOp::make(x->op, x->dtype, parts, x->arg);
    return parts.at(0);  // movement ops and pass-throughs
  }
};

// The kernel-size cap. LLVM's optimiser and machine scheduler are superlinear in
// a function's size: a 20,000-op elementwise chain fused into one kernel took
// 23 s to compile, 100,000 ops 9 minutes. Past the cap the scheduler
// materialises an intermediate, so a huge chain becomes one kernel per cap.
// Why 4,000: a kernel also costs a fixed ~70 ms of pipeline and JIT, so small
// caps lose too. On a 100,000-op chain (2 loaded cores) a cap of 250 compiled in
// 34 s of CPU, 1,000 in 13 s, 4,000 in 6 s, 8,000 in 6 s and rising. Real
// fusions (a training step's elementwise tail, a softmax) stay far below it.
// These points are proposed like realization points, which buffer_removal
// keeps (its first keep rule, docs/pipeline.md).
constexpr int64_t kMaxKernelOps = 4000;

// Sizes are only compared with the cap: any size past it is kept as this, so a shared
// source counted once per use (2^n for n doublings) cannot overflow.
constexpr int64_t kPastCap = kMaxKernelOps + 1;

int64_t own_cost(const UOp& n) { return is_movement(n.op) || n.op == Op::CONST || n.op == Op::IOTA ? 0 : 1; }

// The sizes of fused regions, for the kernel-size cap: each node's size is its own cost
// (1 for arithmetic, casts and reduces; 0 for constants and movement, which become
// index math) plus the sizes of its sources inside the same region (a shared source
// counts once per use, an overestimate).
class RegionSizes {
 public:
  explicit RegionSizes(std::unordered_set<const UOp*>& points) : points_(points) {}

  // Adds `n`, its sources added already; a source that would take the region past the
  // cap ends it. A broadcast is never that end: its buffer would hold each element as
  // often as it is broadcast (a matmul's operand, expanded over the product's iteration
  // space). The region ends below it instead, where the values are (its sources outside
  // the broadcast), and the broadcast and the ops on it stay in the region.
  // The largest sources end first: one buffer then takes the most off the region, and the
  // largest is the value later ones share (the residual stream a block adds to, not the
  // block's branch). Ended in the order they come, a source that happened to pass the cap
  // was cut instead, and the sizes kept growing until pieces of relu's form, which reads its
  // input four times, became kernels of their own.
  void add(const UOpPtr& n) {
    std::vector<const UOp*> sources;
    for (const auto& src : n->src)
      if (!ends_region(*src) && std::find(sources.begin(), sources.end(), src.get()) == sources.end())
        sources.push_back(src.get());
    const auto uses = [&](const UOp* src) {
      return std::count_if(n->src.begin(), n->src.end(), [&](const UOpPtr& x) { return x.get() == src; });
    };
    int64_t s = own_cost(*n);
    for (const UOp* src : sources) s += uses(src) * size_[src];
    std::stable_sort(sources.begin(), sources.end(),
                     [&](const UOp* a, const UOp* b) { return size_[a] > size_[b]; });
    for (const UOp* src : sources) {
      if (s <= kMaxKernelOps) break;
      s -= uses(src) * size_[src];
      if (!broadcast_.contains(src)) {
        end_at(*src);  // too big to fuse in: its region ends at its own buffer
        continue;
      }
      size_[src] = end_below(*src);
      s += uses(src) * size_[src];
    }
    size_[n.get()] = std::min(s, kPastCap);
    if (broadcasts(*n) || of_broadcasts(*n)) broadcast_.insert(n.get());
  }

 private:
  std::unordered_set<const UOp*>& points_;
  std::unordered_map<const UOp*, int64_t> size_;
  std::unordered_set<const UOp*> broadcast_;       // computed over a broadcast's elements
  std::unordered_map<const UOp*, int64_t> ended_;  // end_below's result per broadcast

  bool ends_region(const UOp& u) const { return u.op == Op::BUFFER || points_.contains(&u); }

  // Ends a region at `u`: a buffer holds its value. A value widened exactly from a half (an
  // Autocast operand, bfloat16 to float32), or a reshape of one (a matmul's operand), ends
  // below the cast instead, at the half value: the same values in half the bytes, and a
  // product reads the bfloat16 factor that its pair-dot copies take. The cast stays in the
  // region, one op an element; over a leaf it is all there is, and nothing ends.
  void end_at(const UOp& u) {
    const UOp* v = &u;
    while (v->op == Op::RESHAPE) v = v->src[0].get();
    if (!is_exact_widening(*v)) {
      points_.insert(&u);
      return;
    }
    while (is_exact_widening(*v)) v = v->src[0].get();
    if (!is_leaf(v->op)) points_.insert(v);
  }

  // Computed from broadcasts alone (a product of two expanded operands, a cast or a view
  // of one); a reduce is not: it sums the broadcast away.
  bool of_broadcasts(const UOp& n) const {
    return n.op != Op::REDUCE_AXIS && !n.src.empty() &&
           std::all_of(n.src.begin(), n.src.end(), [&](const auto& x) {
             return x->op == Op::CONST || (!ends_region(*x) && broadcast_.contains(x.get()));
           });
  }

  // Realizes the sources of broadcast `b` outside the broadcast; its size is then its own.
  // Once per node: a broadcast shared by several paths (x + x, a chain of them) would
  // otherwise be walked once per path, exponentially many.
  int64_t end_below(const UOp& b) {
    if (const auto done = ended_.find(&b); done != ended_.end()) return done->second;
    int64_t s = own_cost(b);
    for (const auto& src : b.src) {
      if (ends_region(*src)) continue;
      if (broadcast_.contains(src.get())) {
        s += size_[src.get()] = end_below(*src);
      } else if (size_[src.get()] > 0) {
        end_at(*src);
      }
    }
    s = std::min(s, kPastCap);
    ended_.emplace(&b, s);
    return s;
  }
};

// Adds to `points` the nodes where a fused region would grow past the cap.
void cap_kernel_size(const std::vector<UOpPtr>& nodes, std::unordered_set<const UOp*>& points) {
  RegionSizes sizes(points);
  for (const auto& n : nodes) sizes.add(n);
}

}  // namespace

std::vector<UOpPtr> realization_points(const std::vector<UOpPtr>& targets) {
  const std::vector<UOpPtr> nodes = toposort(targets);
  std::unordered_set<const UOp*> points;
  for (const auto& t : targets) points.insert(t.get());
  for (const auto& n : nodes)
    if (is_point(n->op)) points.insert(n.get());
  cap_kernel_size(nodes, points);
  std::vector<UOpPtr> out;
  for (const auto& n : nodes)
    if (points.count(n.get())) out.push_back(n);
  return out;
}

UOpPtr rangeify(const std::vector<UOpPtr>& targets) {
  Rangeifier rf(targets);
  std::vector<UOpPtr> roots;
  for (const auto& t : targets) roots.push_back(rf.buffer_of(t));
  return UOp::make(Op::SINK, DType::Bool, std::move(roots));
}

}  // namespace loom
