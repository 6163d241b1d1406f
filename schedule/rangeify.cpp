#include "schedule/rangeify.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace loom {

namespace {

int64_t numel(const Shape& s) { return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()); }

UOpPtr idx_const(int64_t v) { return const_int(DType::Int64, v); }

// Row-major strides of a shape.
std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

UOpPtr linear_index(const std::vector<UOpPtr>& idx, const Shape& shape) {
  auto st = strides_of(shape);
  UOpPtr lin = idx_const(0);
  for (size_t i = 0; i < idx.size(); ++i)
    if (shape[i] != 1) lin = lin + idx[i] * st[i];
  return lin;
}

UOpPtr and_valid(const UOpPtr& a, const UOpPtr& b) { return a ? land(a, b) : b; }

// The kernel-size cap. LLVM's optimiser and machine scheduler are superlinear in
// a function's size: a 20,000-op elementwise chain fused into one kernel took
// 23 s to compile, 100,000 ops 9 minutes. Past the cap the scheduler
// materialises an intermediate, so a huge chain becomes one kernel per cap.
// Why 4,000: a kernel also costs a fixed ~70 ms of pipeline and JIT, so small
// caps lose too. On a 100,000-op chain (2 loaded cores) a cap of 250 compiled in
// 34 s of CPU, 1,000 in 13 s, 4,000 in 6 s, 8,000 in 6 s and rising. Real
// fusions (a training step's elementwise tail, a softmax) stay far below it.
// Buffer removal keeps these points (its "kernel size" keep rule).
constexpr int64_t kMaxKernelOps = 4000;

// Adds to `points` the nodes where a fused region would grow past the cap: each
// node's size is its own cost (1 for arithmetic, casts and reduces; 0 for
// constants and movement, which become index math) plus the sizes of its
// sources inside the same region (a shared source counts once per use, an
// overestimate). A source that would take the region past the cap is realized.
void cap_kernel_size(const std::vector<UOpPtr>& targets, std::unordered_set<const UOp*>& points) {
  std::unordered_map<const UOp*, int64_t> size;
  for (const auto& n : toposort(targets)) {
    int64_t s = is_movement(n->op) || n->op == Op::CONST || n->op == Op::IOTA ? 0 : 1;
    for (const auto& src : n->src) {
      if (src->op == Op::BUFFER || points.count(src.get())) continue;
      if (s + size[src.get()] > kMaxKernelOps) {
        points.insert(src.get());  // too big to fuse in: its region ends at its own buffer
        continue;
      }
      s += size[src.get()];
    }
    size[n.get()] = s;
  }
}

}  // namespace

std::vector<UOpPtr> realization_points(const std::vector<UOpPtr>& targets) {
  std::unordered_set<const UOp*> targets_set;
  for (const auto& t : targets) targets_set.insert(t.get());
  auto is_point = [&](const UOp* u) {
    return targets_set.count(u) || u->op == Op::CONTIGUOUS || u->op == Op::ASSIGN;
  };

  // Walk (node, under_expand) pairs from every target; a realization point
  // starts a fresh kernel, so the flag resets below it.
  std::unordered_set<const UOp*> reduce_points;
  std::set<std::pair<const UOp*, bool>> seen;
  std::vector<std::pair<const UOp*, bool>> stack;
  for (const auto& t : targets) stack.emplace_back(t.get(), false);
  while (!stack.empty()) {
    auto [u, expanded] = stack.back();
    stack.pop_back();
    if (!seen.insert({u, expanded}).second) continue;
    if (u->op == Op::REDUCE_AXIS && expanded) reduce_points.insert(u);
    bool below = expanded && !is_point(u) && !reduce_points.count(u);
    if (u->op == Op::EXPAND && numel(*u->shape()) > numel(*u->src[0]->shape())) below = true;
    if (u->op == Op::BUFFER) continue;
    for (const auto& s : u->src) stack.emplace_back(s.get(), below);
  }
  std::unordered_set<const UOp*> points = reduce_points;
  for (const auto& n : toposort(targets))
    if (is_point(n.get())) points.insert(n.get());
  cap_kernel_size(targets, points);
  std::vector<UOpPtr> out;
  for (const auto& n : toposort(targets))
    if (points.count(n.get())) out.push_back(n);
  return out;
}

namespace {

struct Rangeifier {
  std::unordered_set<const UOp*> points;
  std::unordered_map<const UOp*, UOpPtr> bufferized;
  int64_t next_axis = 0;

  // One value to find: tensor-level `u` at `idx`, needed only where `valid` holds.
  struct Request {
    UOpPtr u;
    std::vector<UOpPtr> idx;
    UOpPtr valid;  // null: always
  };
  // What a request needs from its sources, and what build() needs besides them.
  struct Plan {
    std::vector<Request> needs;
    std::vector<UOpPtr> ranges;  // REDUCE_AXIS: its fresh reduce ranges
    UOpPtr inside;               // PAD: where the source is read
  };

  struct Key {
    std::vector<UOpPtr> parts;  // node, indices..., valid (held: keys are compared by address)
    bool operator==(const Key& o) const { return parts == o.parts; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      size_t h = 0;
      for (const auto& p : k.parts) h = h * 1000003u ^ std::hash<const UOp*>()(p.get());
      return h;
    }
  };
  std::unordered_map<Key, UOpPtr, KeyHash> memo;

  static Key key_of(const Request& r) {
    Key key{{r.u}};
    key.parts.insert(key.parts.end(), r.idx.begin(), r.idx.end());
    key.parts.push_back(r.valid);
    return key;
  }

  UOpPtr bufferize(const UOpPtr& point) {
    if (auto it = bufferized.find(point.get()); it != bufferized.end()) return it->second;
    const Shape& shape = *point->shape();
    std::vector<UOpPtr> idx;
    for (int64_t n : shape) idx.push_back(n == 1 ? idx_const(0) : make_range(n, next_axis++, AxisKind::Loop));
    const UOpPtr& body = point->op == Op::CONTIGUOUS ? point->src[0]
                         : point->op == Op::ASSIGN   ? point->src[1]
                                                     : point;
    UOpPtr value = evaluate({body, idx, nullptr}, body == point);
    std::vector<UOpPtr> src{value};
    src.insert(src.end(), idx.begin(), idx.end());
    UOpPtr b = UOp::make(Op::BUFFERIZE, point->dtype, std::move(src), std::vector<int64_t>(shape));
    bufferized[point.get()] = b;
    return b;
  }

  // A value already known: memoised, or a read of another realization point.
  // `own` marks the point being bufferized, which is computed, not read.
  UOpPtr known(const Request& r, bool own) {
    if (!own && points.count(r.u.get())) return read(bufferize(r.u), r.idx, r.valid);
    auto it = memo.find(key_of(r));
    return it == memo.end() ? nullptr : it->second;
  }

  // Iterative (an explicit stack), so graphs thousands of ops deep do not
  // overflow the C++ stack: plan a request's needs, find them, then build it.
  UOpPtr evaluate(const Request& root, bool own_point) {
    if (UOpPtr v = known(root, own_point)) return v;
    struct Frame {
      Request req;
      Plan plan;
      std::vector<UOpPtr> parts;
    };
    std::vector<Frame> stack;
    stack.push_back({root, plan(root), {}});
    UOpPtr result;
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.parts.size() < f.plan.needs.size()) {
        const Request& need = f.plan.needs[f.parts.size()];
        if (UOpPtr v = known(need, false)) {
          f.parts.push_back(v);
        } else {
          Request copy = need;  // `f` may move when the stack grows
          Plan p = plan(copy);
          stack.push_back({std::move(copy), std::move(p), {}});
        }
        continue;
      }
      result = build(f.req, f.plan, f.parts);
      memo.emplace(key_of(f.req), result);
      stack.pop_back();
      if (!stack.empty()) stack.back().parts.push_back(result);
    }
    return result;
  }

  static UOpPtr read(const UOpPtr& source, std::vector<UOpPtr> idx, const UOpPtr& valid) {
    std::vector<UOpPtr> src{source};
    src.insert(src.end(), idx.begin(), idx.end());
    if (valid) src.push_back(valid);
    UOpPtr index = UOp::make(Op::INDEX, source->dtype.ptr_to(), std::move(src));
    return UOp::make(Op::LOAD, source->dtype, {index});
  }

  Plan plan(const Request& r) {
    const UOpPtr& u = r.u;
    const Shape in = u->src.empty() ? Shape{} : u->src[0]->shape().value_or(Shape{});
    auto one = [&](std::vector<UOpPtr> idx, UOpPtr valid) {
      return Plan{{{u->src[0], std::move(idx), std::move(valid)}}, {}, {}};
    };
    switch (u->op) {
      case Op::BUFFER:
      case Op::CONST:
      case Op::DEFINE_VAR:
      case Op::IOTA: return {};
      case Op::RESHAPE: return one(reshape_index(r.idx, *u->shape(), in), r.valid);
      case Op::PERMUTE: {
        std::vector<UOpPtr> src_idx(r.idx.size());
        const auto& order = u->get<std::vector<int64_t>>();
        for (size_t i = 0; i < order.size(); ++i) src_idx[order[i]] = r.idx[i];
        return one(src_idx, r.valid);
      }
      case Op::EXPAND: {
        std::vector<UOpPtr> src_idx(r.idx);
        for (size_t i = 0; i < in.size(); ++i)
          if (in[i] == 1) src_idx[i] = idx_const(0);
        return one(src_idx, r.valid);
      }
      case Op::FLIP: {
        std::vector<UOpPtr> src_idx(r.idx);
        for (int64_t a : u->get<std::vector<int64_t>>()) src_idx[a] = idx_const(in[a] - 1) - r.idx[a];
        return one(src_idx, r.valid);
      }
      case Op::SHRINK: {
        std::vector<UOpPtr> src_idx(r.idx);
        const auto& b = u->get<std::vector<int64_t>>();
        for (size_t i = 0; i < in.size(); ++i)
          if (b[2 * i]) src_idx[i] = r.idx[i] + b[2 * i];
        return one(src_idx, r.valid);
      }
      case Op::PAD: return plan_pad(r, in);
      case Op::REDUCE_AXIS: return plan_reduce(r, in);
      case Op::CONTIGUOUS:
      case Op::DETACH:
      case Op::COPY: return one(r.idx, r.valid);
      case Op::ASSIGN:
        return {{{u->src[1], r.idx, r.valid}}, {}, {}};  // ASSIGN(target, value) has value's value
      default: break;
    }
    if (is_alu(u->op) || u->op == Op::CAST || u->op == Op::BITCAST) {
      Plan p;
      for (const auto& s : u->src) p.needs.push_back({s, r.idx, r.valid});
      return p;
    }
    throw Error("rangeify: cannot index " + std::string(op_name(u->op)) + " (no rule for this op)");
  }

  static UOpPtr build(const Request& r, const Plan& p, const std::vector<UOpPtr>& parts) {
    const UOpPtr& u = r.u;
    switch (u->op) {
      case Op::BUFFER: return read(u, r.idx, r.valid);
      case Op::CONST:
      case Op::DEFINE_VAR: return u;
      case Op::IOTA: return cast(r.idx[0], u->dtype);
      case Op::PAD:
        return p.inside ? where(p.inside, parts[0], const_like(u->dtype, 0))
                        : parts[0];  // outside the source: 0
      case Op::REDUCE_AXIS: {
        if (p.ranges.empty()) return parts[0];
        std::vector<UOpPtr> src{parts[0]};
        src.insert(src.end(), p.ranges.begin(), p.ranges.end());
        return UOp::make(Op::REDUCE, u->dtype, std::move(src), ReduceArg{u->get<ReduceArg>().op, {}});
      }
      default: break;
    }
    if (is_alu(u->op) || u->op == Op::CAST || u->op == Op::BITCAST)
      return UOp::make(u->op, u->dtype, parts, u->arg);
    return parts.at(0);  // movement ops and pass-throughs
  }

  // reshape: the linear index in the output shape, unravelled in the input shape.
  static std::vector<UOpPtr> reshape_index(const std::vector<UOpPtr>& idx, const Shape& out,
                                           const Shape& in) {
    UOpPtr lin = linear_index(idx, out);
    auto st = strides_of(in);
    std::vector<UOpPtr> src_idx;
    for (size_t j = 0; j < in.size(); ++j) {
      if (in[j] == 1)
        src_idx.push_back(idx_const(0));
      else if (j == 0)
        src_idx.push_back(lin / st[0]);
      else
        src_idx.push_back((lin / st[j]) % in[j]);
    }
    return src_idx;
  }

  // PAD: the source is read only inside its bounds.
  static Plan plan_pad(const Request& r, const Shape& in) {
    const auto& b = r.u->get<std::vector<int64_t>>();
    std::vector<UOpPtr> src_idx(r.idx);
    UOpPtr inside;
    for (size_t i = 0; i < in.size(); ++i) {
      const int64_t lo = b[2 * i], hi = b[2 * i + 1];
      if (lo == 0 && hi == 0) continue;
      src_idx[i] = r.idx[i] - lo;
      inside = and_valid(inside, land(idx_const(lo - 1) < r.idx[i], r.idx[i] < lo + in[i]));
    }
    UOpPtr valid = inside ? and_valid(r.valid, inside) : r.valid;
    return Plan{{{r.u->src[0], std::move(src_idx), std::move(valid)}}, {}, inside};
  }

  Plan plan_reduce(const Request& r, const Shape& in) {
    std::vector<UOpPtr> src_idx(r.idx), ranges;
    for (int64_t a : r.u->get<ReduceArg>().axes) {
      if (in[a] == 1) continue;  // the output index there is already 0
      UOpPtr range = make_range(in[a], next_axis++, AxisKind::Reduce);
      src_idx[a] = range;
      ranges.push_back(range);
    }
    return Plan{{{r.u->src[0], std::move(src_idx), r.valid}}, std::move(ranges), {}};
  }
};

}  // namespace

UOpPtr rangeify(const std::vector<UOpPtr>& targets) {
  Rangeifier rf;
  for (const auto& p : realization_points(targets)) rf.points.insert(p.get());
  std::vector<UOpPtr> roots;
  for (const auto& t : targets) roots.push_back(rf.bufferize(t));
  return UOp::make(Op::SINK, DType::Bool, std::move(roots));
}

}  // namespace loom
