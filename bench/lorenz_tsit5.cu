// Hand-written fused CUDA kernels for Lorenz ensembles with Tsit5: the
// baselines the generated kernels of the CUDA engine are measured against.
//
//   lorenz_tsit5_forward         adaptive forward solve, final states only
//   lorenz_tsit5_record_adjoint  adaptive solve that records its accepted
//                                states, then the discrete adjoint of
//                                L = sum_i |y_i(t1)|^2 with respect to rho_i,
//                                in the same launch
//
// One thread per trajectory; every array is step-major / component-major
// ([c*n + i], [(s*3 + c)*n + i]) so that the threads of a warp touch
// consecutive addresses. The integrator is the one of bench.LorenzTsit5 and of
// the library's recorder: Hairer's initial step, the error norm
// sqrt(mean((e_c/(atol + rtol*max(|y_c|, |y+_c|)))^2)) accepted when <= 1,
// the integral controller h *= clip(0.9*max(err, 1e-10)^(-1/5), 0.2, 5)
// (exp/log form) after accepted and rejected steps alike, FSAL, and a last
// step that ends on t1. The adjoint holds the accepted step sizes fixed (the
// frozen-mesh discrete adjoint, the derivative ode.Grad returns) and
// recomputes the stages of each step from its recorded start state.
//
// The file is also valid host C++: without a CUDA compiler the qualifiers
// become ordinary C++ and the thread index is the global gs_host_tid, so a
// host harness can run every "thread" in a loop (bench's tests do that with
// g++ and compare with the Go baseline and the library's gradient).

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define GS_KERNEL extern "C" __global__
#define GS_DEVICE static __device__ __forceinline__
#define GS_TID ((long long)blockIdx.x * (long long)blockDim.x + (long long)threadIdx.x)
#define GS_NAN __longlong_as_double(0x7ff8000000000000LL)
#else
#include <cmath>
#define GS_KERNEL extern "C"
#define GS_DEVICE static inline
#define GS_TID gs_host_tid
#define GS_NAN std::nan("")
// gs_host_tid is the "thread" a host harness runs.
static long long gs_host_tid;
using std::exp;
using std::fabs;
using std::log;
using std::pow;
using std::sqrt;
#endif

#include "tsit5.cuh"

// gs_lorenz_params holds what every trajectory shares; its layout (88 bytes,
// no padding) is mirrored by bench's lorenzKernelParams.
struct gs_lorenz_params {
	double sigma, beta;
	double y0[3];
	double t0, t1;
	double rtol, atol;
	int max_steps; // attempted (accepted + rejected) steps per trajectory
	int rows;      // rows of the record buffer (record kernel only)
	long long n;   // trajectories
};

struct v3 {
	double x, y, z;
};

// lorenz is the field f(y) = (σ(y1 − y0), y0(ρ − y2) − y1, y0·y1 − β·y2).
GS_DEVICE v3 lorenz(v3 y, double sigma, double rho, double beta)
{
	v3 f;
	f.x = sigma * (y.y - y.x);
	f.y = y.x * (rho - y.z) - y.y;
	f.z = y.x * y.y - beta * y.z;
	return f;
}

// lorenz_vjp returns J(y)ᵀv and adds (∂f/∂ρ)ᵀv = y0·v1 to *rho_bar.
GS_DEVICE v3 lorenz_vjp(v3 y, v3 v, double sigma, double rho, double beta, double *rho_bar)
{
	v3 g;
	g.x = -sigma * v.x + (rho - y.z) * v.y + y.y * v.z;
	g.y = sigma * v.x - v.y + y.x * v.z;
	g.z = -y.x * v.y - beta * v.z;
	*rho_bar += y.x * v.y;
	return g;
}

// Stage inputs Y_j = y + h·Σ_l a_jl·k_l, component by component in the
// order of bench's baseline.
GS_DEVICE v3 stage2(v3 y, double h, v3 k1)
{
	v3 r = {y.x + h * (A21 * k1.x), y.y + h * (A21 * k1.y), y.z + h * (A21 * k1.z)};
	return r;
}
GS_DEVICE v3 stage3(v3 y, double h, v3 k1, v3 k2)
{
	v3 r = {y.x + h * (A31 * k1.x + A32 * k2.x),
	        y.y + h * (A31 * k1.y + A32 * k2.y),
	        y.z + h * (A31 * k1.z + A32 * k2.z)};
	return r;
}
GS_DEVICE v3 stage4(v3 y, double h, v3 k1, v3 k2, v3 k3)
{
	v3 r = {y.x + h * (A41 * k1.x + A42 * k2.x + A43 * k3.x),
	        y.y + h * (A41 * k1.y + A42 * k2.y + A43 * k3.y),
	        y.z + h * (A41 * k1.z + A42 * k2.z + A43 * k3.z)};
	return r;
}
GS_DEVICE v3 stage5(v3 y, double h, v3 k1, v3 k2, v3 k3, v3 k4)
{
	v3 r = {y.x + h * (A51 * k1.x + A52 * k2.x + A53 * k3.x + A54 * k4.x),
	        y.y + h * (A51 * k1.y + A52 * k2.y + A53 * k3.y + A54 * k4.y),
	        y.z + h * (A51 * k1.z + A52 * k2.z + A53 * k3.z + A54 * k4.z)};
	return r;
}
GS_DEVICE v3 stage6(v3 y, double h, v3 k1, v3 k2, v3 k3, v3 k4, v3 k5)
{
	v3 r = {y.x + h * (A61 * k1.x + A62 * k2.x + A63 * k3.x + A64 * k4.x + A65 * k5.x),
	        y.y + h * (A61 * k1.y + A62 * k2.y + A63 * k3.y + A64 * k4.y + A65 * k5.y),
	        y.z + h * (A61 * k1.z + A62 * k2.z + A63 * k3.z + A64 * k4.z + A65 * k5.z)};
	return r;
}

// gs_traj is the outcome of one trajectory's solve.
struct gs_traj {
	v3 y;       // final state (NaN unless status is GS_OK)
	int accepted, rejected, status;
};

// initial_step is Hairer's initial step size (Solving ODEs I, §II.4) with
// the library's clamps; k1 = f(y0).
GS_DEVICE double initial_step(const gs_lorenz_params &p, double rho, v3 y, v3 k1)
{
	const double rtol = p.rtol, atol = p.atol;
	v3 sc = {atol + rtol * fabs(y.x), atol + rtol * fabs(y.y), atol + rtol * fabs(y.z)};
	double d0 = sqrt((gs_sq(y.x / sc.x) + gs_sq(y.y / sc.y) + gs_sq(y.z / sc.z)) / 3);
	double d1 = sqrt((gs_sq(k1.x / sc.x) + gs_sq(k1.y / sc.y) + gs_sq(k1.z / sc.z)) / 3);
	double h0 = 1e-6;
	if (d0 >= 1e-5 && d1 >= 1e-5)
		h0 = 0.01 * d0 / d1;
	if (!(h0 > 0) || !gs_finite(h0))
		h0 = 1e-6;
	h0 = gs_min(h0, p.t1 - p.t0);
	v3 y1 = {y.x + h0 * k1.x, y.y + h0 * k1.y, y.z + h0 * k1.z};
	v3 f1 = lorenz(y1, p.sigma, rho, p.beta);
	double d2 = sqrt((gs_sq((f1.x - k1.x) / sc.x) + gs_sq((f1.y - k1.y) / sc.y) + gs_sq((f1.z - k1.z) / sc.z)) / 3) / h0;
	double dm = gs_max(d1, d2);
	double hh;
	if (dm <= 1e-15 || dm != dm)
		hh = gs_max(1e-6, h0 * 1e-3);
	else
		hh = pow(0.01 / dm, 1.0 / 6);
	return gs_min(100 * h0, hh);
}

// solve integrates trajectory i adaptively. With Record it stores the start
// state and the size of every accepted step s in ys[(s*3 + c)*n + i] and
// hs[s*n + i] (s < p.rows); a trajectory with more accepted steps ends with
// GS_RECORD_FULL.
template <bool Record>
GS_DEVICE gs_traj solve(const gs_lorenz_params &p, long long i, double rho, double *ys, double *hs)
{
	const double sigma = p.sigma, beta = p.beta, rtol = p.rtol, atol = p.atol, t1 = p.t1;
	const long long n = p.n;
	v3 y = {p.y0[0], p.y0[1], p.y0[2]};
	double t = p.t0;
	v3 k1 = lorenz(y, sigma, rho, beta);
	const double hmin = 4 * 2.220446049250313080847263336181640625e-16 * gs_max(fabs(p.t0), fabs(t1 - p.t0)); // 4·2⁻⁵²·…
	double h = initial_step(p, rho, y, k1);
	bool last = false;
	if (h >= t1 - t) {
		h = t1 - t;
		last = true;
	}
	gs_traj r;
	r.accepted = 0;
	r.rejected = 0;
	r.status = GS_OK;
	int nonfinite = 0;
	for (;;) {
		v3 k2 = lorenz(stage2(y, h, k1), sigma, rho, beta);
		v3 k3 = lorenz(stage3(y, h, k1, k2), sigma, rho, beta);
		v3 k4 = lorenz(stage4(y, h, k1, k2, k3), sigma, rho, beta);
		v3 k5 = lorenz(stage5(y, h, k1, k2, k3, k4), sigma, rho, beta);
		v3 k6 = lorenz(stage6(y, h, k1, k2, k3, k4, k5), sigma, rho, beta);
		v3 yn = {y.x + h * (B1 * k1.x + B2 * k2.x + B3 * k3.x + B4 * k4.x + B5 * k5.x + B6 * k6.x),
		         y.y + h * (B1 * k1.y + B2 * k2.y + B3 * k3.y + B4 * k4.y + B5 * k5.y + B6 * k6.y),
		         y.z + h * (B1 * k1.z + B2 * k2.z + B3 * k3.z + B4 * k4.z + B5 * k5.z + B6 * k6.z)};
		v3 k7 = lorenz(yn, sigma, rho, beta);
		v3 e = {h * (E1 * k1.x + E2 * k2.x + E3 * k3.x + E4 * k4.x + E5 * k5.x + E6 * k6.x + E7 * k7.x),
		        h * (E1 * k1.y + E2 * k2.y + E3 * k3.y + E4 * k4.y + E5 * k5.y + E6 * k6.y + E7 * k7.y),
		        h * (E1 * k1.z + E2 * k2.z + E3 * k3.z + E4 * k4.z + E5 * k5.z + E6 * k6.z + E7 * k7.z)};

		bool bad = !gs_finite(yn.x) || !gs_finite(yn.y) || !gs_finite(yn.z);
		double err = sqrt((gs_sq(e.x / (atol + rtol * gs_max(fabs(y.x), fabs(yn.x)))) +
		                   gs_sq(e.y / (atol + rtol * gs_max(fabs(y.y), fabs(yn.y)))) +
		                   gs_sq(e.z / (atol + rtol * gs_max(fabs(y.z), fabs(yn.z))))) / 3);
		if (!gs_finite(err))
			bad = true;
		double factor;
		bool accepted = false;
		if (bad) {
			r.rejected++;
			nonfinite++;
			factor = CTL_FAC_MIN;
		} else if (err <= 1) {
			if (Record) {
				if (r.accepted >= p.rows) {
					r.status = GS_RECORD_FULL;
					break;
				}
				long long s = r.accepted;
				ys[(s * 3 + 0) * n + i] = y.x;
				ys[(s * 3 + 1) * n + i] = y.y;
				ys[(s * 3 + 2) * n + i] = y.z;
				hs[s * n + i] = h;
			}
			accepted = true;
			r.accepted++;
			nonfinite = 0;
			t += h;
			y = yn;
			k1 = k7;
			factor = CTL_SAFETY * exp(-CTL_BETA * log(gs_max(err, CTL_ERR_FLOOR)));
		} else {
			r.rejected++;
			nonfinite = 0;
			factor = CTL_SAFETY * exp(-CTL_BETA * log(err));
		}
		if (accepted && last)
			break;
		if (r.accepted + r.rejected >= p.max_steps) {
			r.status = GS_MAX_STEPS;
			break;
		}
		h *= gs_min(CTL_FAC_MAX, gs_max(CTL_FAC_MIN, factor));
		if (h < hmin || t + h == t) {
			r.status = nonfinite > 0 ? GS_NON_FINITE : GS_STEP_UNDERFLOW;
			break;
		}
		double span = t1 - t;
		last = h >= span;
		if (last)
			h = span;
	}
	r.y = y;
	if (r.status != GS_OK)
		r.y.x = r.y.y = r.y.z = GS_NAN;
	return r;
}

// step_vjp returns the adjoint of the start state y of one Tsit5 step of
// size h (held fixed) given the adjoint lam of its end state, and adds the
// step's contribution to *rho_bar. It recomputes the stages from y.
GS_DEVICE v3 step_vjp(v3 y, double h, v3 lam, double sigma, double rho, double beta, double *rho_bar)
{
	// Forward: the stage inputs Y1 = y, ..., Y6 (k7 does not enter y⁺).
	v3 k1 = lorenz(y, sigma, rho, beta);
	v3 Y2 = stage2(y, h, k1);
	v3 k2 = lorenz(Y2, sigma, rho, beta);
	v3 Y3 = stage3(y, h, k1, k2);
	v3 k3 = lorenz(Y3, sigma, rho, beta);
	v3 Y4 = stage4(y, h, k1, k2, k3);
	v3 k4 = lorenz(Y4, sigma, rho, beta);
	v3 Y5 = stage5(y, h, k1, k2, k3, k4);
	v3 k5 = lorenz(Y5, sigma, rho, beta);
	v3 Y6 = stage6(y, h, k1, k2, k3, k4, k5);

	// Reverse: y⁺ = y + h·Σ b_j k_j, so ȳ = λ and k̄_j = h·b_j·λ; then
	// each stage j from the last: Ȳ_j = J(Y_j)ᵀ k̄_j, ȳ += Ȳ_j and
	// k̄_l += h·a_jl·Ȳ_j for l < j.
	v3 yb = lam;
	v3 kb1 = {h * B1 * lam.x, h * B1 * lam.y, h * B1 * lam.z};
	v3 kb2 = {h * B2 * lam.x, h * B2 * lam.y, h * B2 * lam.z};
	v3 kb3 = {h * B3 * lam.x, h * B3 * lam.y, h * B3 * lam.z};
	v3 kb4 = {h * B4 * lam.x, h * B4 * lam.y, h * B4 * lam.z};
	v3 kb5 = {h * B5 * lam.x, h * B5 * lam.y, h * B5 * lam.z};
	v3 kb6 = {h * B6 * lam.x, h * B6 * lam.y, h * B6 * lam.z};
	v3 g;

#define GS_ACC(dst, c, src) \
	(dst).x += (c) * (src).x; \
	(dst).y += (c) * (src).y; \
	(dst).z += (c) * (src).z

	g = lorenz_vjp(Y6, kb6, sigma, rho, beta, rho_bar);
	GS_ACC(yb, 1.0, g);
	GS_ACC(kb1, h * A61, g);
	GS_ACC(kb2, h * A62, g);
	GS_ACC(kb3, h * A63, g);
	GS_ACC(kb4, h * A64, g);
	GS_ACC(kb5, h * A65, g);

	g = lorenz_vjp(Y5, kb5, sigma, rho, beta, rho_bar);
	GS_ACC(yb, 1.0, g);
	GS_ACC(kb1, h * A51, g);
	GS_ACC(kb2, h * A52, g);
	GS_ACC(kb3, h * A53, g);
	GS_ACC(kb4, h * A54, g);

	g = lorenz_vjp(Y4, kb4, sigma, rho, beta, rho_bar);
	GS_ACC(yb, 1.0, g);
	GS_ACC(kb1, h * A41, g);
	GS_ACC(kb2, h * A42, g);
	GS_ACC(kb3, h * A43, g);

	g = lorenz_vjp(Y3, kb3, sigma, rho, beta, rho_bar);
	GS_ACC(yb, 1.0, g);
	GS_ACC(kb1, h * A31, g);
	GS_ACC(kb2, h * A32, g);

	g = lorenz_vjp(Y2, kb2, sigma, rho, beta, rho_bar);
	GS_ACC(yb, 1.0, g);
	GS_ACC(kb1, h * A21, g);

	g = lorenz_vjp(y, kb1, sigma, rho, beta, rho_bar);
	GS_ACC(yb, 1.0, g);
#undef GS_ACC
	return yb;
}

// lorenz_tsit5_forward integrates trajectory i = thread index (ρ = rho[i])
// and writes its final state to y[c*n + i] (NaN on failure), its accepted
// and rejected step counts and its status (GS_*).
GS_KERNEL void lorenz_tsit5_forward(gs_lorenz_params p, const double *__restrict__ rho, double *__restrict__ y,
                                    int *__restrict__ accepted, int *__restrict__ rejected, int *__restrict__ status)
{
	const long long i = GS_TID;
	if (i >= p.n)
		return;
	gs_traj r = solve<false>(p, i, rho[i], nullptr, nullptr);
	y[i] = r.y.x;
	y[p.n + i] = r.y.y;
	y[2 * p.n + i] = r.y.z;
	accepted[i] = r.accepted;
	rejected[i] = r.rejected;
	status[i] = r.status;
}

// lorenz_tsit5_record_adjoint integrates trajectory i as lorenz_tsit5_forward
// does, recording the start state and size of each accepted step in ys
// ([rows×3×n]) and hs ([rows×n]), then sweeps the recorded steps backward
// from λ = ∂L/∂y(t1) = 2·y(t1) and writes dL/dρ_i of L = Σ_i |y_i(t1)|² to
// drho[i] (NaN if the trajectory failed), with the outputs of the forward
// kernel.
GS_KERNEL void lorenz_tsit5_record_adjoint(gs_lorenz_params p, const double *__restrict__ rho,
                                           double *__restrict__ y, double *__restrict__ drho,
                                           double *__restrict__ ys, double *__restrict__ hs,
                                           int *__restrict__ accepted, int *__restrict__ rejected,
                                           int *__restrict__ status)
{
	const long long i = GS_TID;
	if (i >= p.n)
		return;
	const long long n = p.n;
	const double r_i = rho[i];
	gs_traj r = solve<true>(p, i, r_i, ys, hs);
	y[i] = r.y.x;
	y[n + i] = r.y.y;
	y[2 * n + i] = r.y.z;
	accepted[i] = r.accepted;
	rejected[i] = r.rejected;
	status[i] = r.status;
	double rho_bar = 0;
	if (r.status == GS_OK) {
		v3 lam = {2 * r.y.x, 2 * r.y.y, 2 * r.y.z};
		for (long long s = r.accepted - 1; s >= 0; s--) {
			v3 ys_s = {ys[(s * 3 + 0) * n + i], ys[(s * 3 + 1) * n + i], ys[(s * 3 + 2) * n + i]};
			lam = step_vjp(ys_s, hs[s * n + i], lam, p.sigma, r_i, p.beta, &rho_bar);
		}
	} else {
		rho_bar = GS_NAN;
	}
	drho[i] = rho_bar;
}
