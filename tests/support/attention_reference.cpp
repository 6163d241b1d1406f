#include "support/attention_reference.hpp"

#include <cmath>
#include <limits>

namespace loom::test {

AttentionReference attention_reference(const AttentionSizes& z, const std::vector<double>& q,
                                       const std::vector<double>& k, const std::vector<double>& v,
                                       const std::vector<double>& w, double scale,
                                       const std::function<bool(int64_t b, int64_t i, int64_t j)>& allowed) {
  const auto n = static_cast<size_t>(z.n), L = static_cast<size_t>(z.L), S = static_cast<size_t>(z.S),
             E = static_cast<size_t>(z.E), Ev = static_cast<size_t>(z.Ev);
  AttentionReference r;
  r.out.assign(n * L * Ev, 0);
  r.dq.assign(n * L * E, 0);
  r.dk.assign(n * S * E, 0);
  r.dv.assign(n * S * Ev, 0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> p(S), dp(S);
  std::vector<char> seen(S);
  for (size_t b = 0; b < n; ++b) {
    const double* kb = &k[b * S * E];
    const double* vb = &v[b * S * Ev];
    double* dkb = &r.dk[b * S * E];
    double* dvb = &r.dv[b * S * Ev];
    for (size_t i = 0; i < L; ++i) {
      const double* qi = &q[(b * L + i) * E];
      const double* wi = &w[(b * L + i) * Ev];
      double* oi = &r.out[(b * L + i) * Ev];
      double* dqi = &r.dq[(b * L + i) * E];
      // softmax over the allowed keys: p_j = exp(s_j - max) / sum, 0 where masked
      double m = -std::numeric_limits<double>::infinity();
      for (size_t j = 0; j < S; ++j) {
        seen[j] = allowed(static_cast<int64_t>(b), static_cast<int64_t>(i), static_cast<int64_t>(j));
        if (!seen[j]) continue;
        double s = 0;
        for (size_t e = 0; e < E; ++e) s += qi[e] * kb[j * E + e];
        p[j] = s * scale;
        m = std::max(m, p[j]);
      }
      if (std::isinf(m)) {  // no key allowed: 0/0, NaN through everything it touches
        for (size_t c = 0; c < Ev; ++c) oi[c] = nan;
        for (size_t e = 0; e < E; ++e) dqi[e] = nan;
        for (size_t x = 0; x < S * E; ++x) dkb[x] = nan;
        for (size_t x = 0; x < S * Ev; ++x) dvb[x] = nan;
        continue;
      }
      double total = 0;
      for (size_t j = 0; j < S; ++j) {
        p[j] = seen[j] ? std::exp(p[j] - m) : 0;
        total += p[j];
      }
      for (size_t j = 0; j < S; ++j) p[j] /= total;
      // out_i = sum_j p_j v_j; with dout_i = w_i: dP_ij = w_i . v_j, dv_j += p_j w_i,
      // dS_ij = p_j (dP_ij - sum_l p_l dP_il), dq_i += scale sum_j dS_ij k_j, dk_j += scale dS_ij q_i.
      double pdp = 0;
      for (size_t j = 0; j < S; ++j) {
        if (p[j] == 0) {
          dp[j] = 0;
          continue;
        }
        double d = 0;
        for (size_t c = 0; c < Ev; ++c) {
          oi[c] += p[j] * vb[j * Ev + c];
          d += wi[c] * vb[j * Ev + c];
          dvb[j * Ev + c] += p[j] * wi[c];
        }
        dp[j] = d;
        pdp += p[j] * d;
      }
      for (size_t j = 0; j < S; ++j) {
        if (p[j] == 0) continue;
        const double ds = p[j] * (dp[j] - pdp) * scale;
        for (size_t e = 0; e < E; ++e) {
          dqi[e] += ds * kb[j * E + e];
          dkb[j * E + e] += ds * qi[e];
        }
      }
    }
  }
  return r;
}

}  // namespace loom::test
