#!/usr/bin/env python3
"""Fits the erfc polynomials of src/tensor_erf.cpp (run: python3 tools/fit_erf.py; needs mpmath).

For z = |x| in [0.5, z_max], erfc(z) = exp(-z^2) * t * Q(t) with t = 2 / (2 + z), where
Q(t) = erfcx(z) / t is smooth and bounded on the interval. Q is interpolated at the Chebyshev
points of t's interval and evaluated by Clenshaw's recurrence in s = (t - mid) / half, which
stays stable at high degree. z_max is where erf rounds to 1: 6 for Float64, 4 for Float32.
Prints the C++ coefficient arrays and the largest relative error of t * Q(t) on a fine grid.
"""
import mpmath as mp

mp.mp.dps = 50


def erfcx(z):
    return mp.erfc(z) * mp.exp(z * z)


def chebyshev(fun, a, b, degree):
    n = degree + 1
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    values = [fun((b - a) / 2 * s + (a + b) / 2) for s in nodes]
    c = [2 * mp.fsum(values[k] * mp.cos(j * mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)) / n
         for j in range(n)]
    c[0] /= 2
    return c


def clenshaw(c, s):
    b1 = b2 = 0
    for cj in reversed(c[1:]):
        b1, b2 = 2 * s * b1 - b2 + cj, b1
    return s * b1 - b2 + c[0]


for name, z_max, degree in [("kErfcFloat64", 6, 17), ("kErfcFloat32", 4, 7)]:
    a, b = 2 / (2 + mp.mpf(z_max)), 2 / (2 + mp.mpf("0.5"))
    q = lambda t: erfcx(2 / t - 2) / t
    c = chebyshev(q, a, b, degree)
    worst = max(abs(clenshaw(c, -1 + 2 * mp.mpf(i) / 2000) / q(a + (b - a) * mp.mpf(i) / 2000) - 1)
                for i in range(2001))
    print(f"// t in [{mp.nstr(a, 17)}, {mp.nstr(b, 17)}]: largest relative error {mp.nstr(worst, 3)}")
    print(f"constexpr double {name}[] = {{")
    print(",\n".join(f"    {mp.nstr(x, 20)}" for x in c) + "};")
