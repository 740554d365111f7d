// Matrix-free preconditioned conjugate gradients across ranks, for any vector type and precision:
// FLIP's pressure (float fields of a brick store; multigrid, Jacobi or no preconditioner) and the
// cloth's implicit step (Vector3<double> rows, dot products summed in fixed point). The algorithm
// is here once; everything that touches a vector is the caller's:
//   apply(d, q)         q = A d. Returns void, or the global d.q (double) where the caller's
//                       kernel forms it in the same pass (then dot is not asked for it).
//   precondition(r, z)  z = M^-1 r, the same way: void, or the global r.z. Or
//                       IdentityPreconditioner{}: z is r itself (pass r as z), r.z = dot(r, r).
//   dot(a, b)           the global float64 a.b, reduced as the caller needs: a sum over ranks
//                       (decomposition/reductions.hpp), or a reproducible fixed-point one. Or
//                       FusedDots{} where apply and precondition both return theirs.
//   update(alpha, d, q, x, r)  x += alpha d, r -= alpha q.
//   direction(beta, z, d)      d = z + beta d. The first call, before any iteration, passes
//                              beta = 0 and must give d = z whatever d holds (garbage, at first).
//   rule, max_iterations       when to stop (below).
// Each runs on the host and may launch device work; nothing here touches an element, so under
// nvcc the callables are plain host lambdas. The scalars come from global reductions, so every
// rank makes the same calls in the same order and the collectives inside them (halo exchanges,
// reductions) match up. Callers keep their arithmetic: each call below is one step of the loops
// FLIP and the cloth wrote by hand, in their order (FLIP's restart and the cloth on 1-4 ranks stay
// bit for bit).
//
// From r = b - A x (the caller's):
//   rz = precondition(r, z); direction(0, z, d)
//   until rule.done(rz), or !(rz > 0), or max_iterations done:
//     dAd = apply(d, q); stop (breakdown) unless dAd > 0
//     alpha = rz / dAd; update(alpha, d, q, x, r)
//     stop if rule.done_after(iteration)
//     rz' = precondition(r, z); direction(rz' / rz, z, d); rz = rz'
// The rule: done(rz) is asked before every iteration (the first too), done_after(k) after
// iteration k's update of x and r; done_after may recompute r from x (residual replacement).
// CgRule{done, done_after} makes one of two lambdas; RelativeResidual is the common one. How it
// ended is returned (CgResult), never decided here: a caller that needs convergence checks it.
#pragma once

#include <type_traits>

namespace apron {

// The vectors, each the caller's handle (a field pointer, a DeviceVector, ...), bound by
// reference: x the solution (on entry the first guess), r the residual b - A x (on entry that of
// the first guess), z = M^-1 r (r itself with IdentityPreconditioner), d the search direction,
// q = A d.
template <class Vector>
struct CgVectors {
  Vector& x;
  Vector& r;
  Vector& z;
  Vector& d;
  Vector& q;
};

struct IdentityPreconditioner {};
struct FusedDots {};

// Why the iteration ended. Only stopping_rule can mean converged, and whether it did is the
// rule's to say (a rule written !(residual >= tolerance) also stops on a NaN residual).
enum class CgStop {
  stopping_rule,    // rule.done() or rule.done_after() said so
  iteration_limit,  // max_iterations done
  breakdown,        // d.Ad not > 0: A is not positive definite along d (or float round-off, NaN)
  no_descent,       // r.z not > 0 before an iteration: r = 0 exactly, or M not positive
                    // definite (or NaN)
};

inline const char* cg_stop_name(CgStop stop) {
  switch (stop) {
    case CgStop::stopping_rule:
      return "stopping rule met";
    case CgStop::iteration_limit:
      return "iteration limit";
    case CgStop::breakdown:
      return "breakdown (d.Ad <= 0)";
    case CgStop::no_descent:
      return "no descent (r.z <= 0)";
  }
  return "?";
}

struct CgResult {
  long iterations = 0;  // apply() calls (a breakdown's iteration counts)
  CgStop stop = CgStop::stopping_rule;
  double rz = 0;         // the last r.z (at a breakdown: the one d was built from)
  double curvature = 0;  // d.Ad of the last iteration (at a breakdown: the offending one)
};

template <class Done, class DoneAfter>
struct CgRule {
  Done done;             // bool(double rz)
  DoneAfter done_after;  // bool(long iteration)
};
template <class Done, class DoneAfter>
CgRule(Done, DoneAfter) -> CgRule<Done, DoneAfter>;

// r.z <= tolerance^2 times its first value: with no preconditioner |r| <= tolerance |r0|.
struct RelativeResidual {
  double tolerance;
  double target = 0;
  bool started = false;
  bool done(double rz) {
    if (!started) {
      target = tolerance * tolerance * rz;
      started = true;
    }
    return !(rz > target);
  }
  bool done_after(long) { return false; }
};

namespace cg_detail {

// The global a.b of apply() or precondition(), fused into the callable or asked of dot.
template <class Op, class Dot, class Vector>
double with_dot(Op& op, Dot& dot, Vector& in, Vector& out) {
  if constexpr (std::is_void_v<decltype(op(in, out))>) {
    static_assert(!std::is_same_v<std::decay_t<Dot>, FusedDots>,
                  "conjugate_gradient: FusedDots, but an operation returns no dot product");
    op(in, out);
    return dot(in, out);
  } else {
    (void)dot;
    return op(in, out);
  }
}

}  // namespace cg_detail

template <class Vector, class Apply, class Precondition, class Dot, class Update, class Direction,
          class Rule>
CgResult conjugate_gradient(const CgVectors<Vector>& v, Apply&& apply, Precondition&& precondition,
                            Dot&& dot, Update&& update, Direction&& direction, Rule&& rule,
                            long max_iterations) {
  constexpr bool identity = std::is_same_v<std::decay_t<Precondition>, IdentityPreconditioner>;
  const auto preconditioned = [&]() -> double {
    if constexpr (identity) {
      static_assert(!std::is_same_v<std::decay_t<Dot>, FusedDots>,
                    "conjugate_gradient: IdentityPreconditioner needs dot for r.r");
      (void)precondition;
      return dot(v.r, v.r);
    } else {
      return cg_detail::with_dot(precondition, dot, v.r, v.z);
    }
  };
  CgResult out;
  double rz = preconditioned();
  direction(0.0, v.z, v.d);
  long it = 0;
  for (;;) {
    if (rule.done(rz)) {
      out.stop = CgStop::stopping_rule;
      break;
    }
    if (!(rz > 0)) {
      out.stop = CgStop::no_descent;
      break;
    }
    if (it >= max_iterations) {
      out.stop = CgStop::iteration_limit;
      break;
    }
    ++it;
    const double curvature = cg_detail::with_dot(apply, dot, v.d, v.q);
    out.curvature = curvature;
    if (!(curvature > 0)) {
      out.stop = CgStop::breakdown;
      break;
    }
    const double alpha = rz / curvature;
    update(alpha, v.d, v.q, v.x, v.r);
    if (rule.done_after(it)) {
      out.stop = CgStop::stopping_rule;
      break;
    }
    const double rz_next = preconditioned();
    direction(rz_next / rz, v.z, v.d);
    rz = rz_next;
  }
  out.iterations = it;
  out.rz = rz;
  return out;
}

}  // namespace apron
