// Hand-written fused CUDA kernels for the neural protocol: y' = MLP(y) with
// the 2 → 32 tanh → 32 tanh → 2 network of bench.NeuralMLP, Tsit5, the loss
// L = (1/B)·Σ_i |y_i(t1) − target_i|² and its gradient with respect to the
// network's 1,218 shared weights. The baseline the CUDA engine's neural
// kernels are measured against, and a test of a layout the engine does not
// have: the network's layers as float64 tensor-core matrix products over
// the trajectories of a warp.
//
//   neural_tsit5_forward         adaptive forward solve, final states only
//   neural_tsit5_record_adjoint  adaptive solve that records its accepted
//                                states, then the discrete adjoint of L on
//                                that mesh, in the same launch
//
// On the GPU a warp runs a tile of eight trajectories in lockstep: lane l
// works on trajectory tile·8 + l/4 (the four lanes of a trajectory compute
// its solver arithmetic alike), and every evaluation of the network is one
// for the whole tile, its layers m8n8k4 float64 matrix products (mma.sync,
// sm_80 and later) with the tile's eight trajectories as the columns:
// W·X + b for a layer, Wᵀ·Ȳ for its input's cotangent, and Ȳ·Xᵀ (a sum
// over the tile's trajectories) for its weights' cotangent, which goes to
// the warp's accumulator in shared memory. The weights are read once per
// block into shared memory in the fragments' order. A tile runs until its
// last trajectory is done (the others compute on frozen states and keep
// them); the reverse sweep takes the tile's steps from each trajectory's
// last recorded one back, a trajectory with none left contributing zero.
// At the end the block's warps add their accumulators together and then
// to the gradient (atomics; zero it before the launch).
//
// The integrator is that of bench.LorenzTsit5 and the library's recorder
// (Hairer's initial step, the error norm, the integral controller in
// exp/log form, FSAL, a last step ending on t1), as in lorenz_tsit5.cu; the
// adjoint holds the accepted step sizes fixed and recomputes the stages of
// each step from its recorded start state.
//
// The file is also valid host C++: without a CUDA compiler each "thread"
// is one trajectory (its tile has one column) and the network is evaluated
// with plain loops (every row a fused multiply-add chain from the bias, as
// the library's Dot), its weight cotangents added straight to the
// gradient, so a host harness can run every thread in a loop (bench's
// tests do that with g++ and compare with the library's gradient).

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define GS_GPU 1
#define GS_KERNEL extern "C" __global__
#define GS_DEVICE static __device__ __forceinline__
#define GS_NET static __device__ __noinline__
#define GS_NAN __longlong_as_double(0x7ff8000000000000LL)
#define GS_SMEM extern __shared__ double gs_sm[]
#define GS_UNROLL _Pragma("unroll")
#else
// On the host: without GS_WARP_SIM one trajectory per thread; with it
// (a harness that simulates a warp with 32 threads and defines the CUDA
// built-ins the GPU form uses, the tensor-core product as gs_sim_mma and
// the block's shared memory as gs_sim_smem) the GPU form.
#ifdef GS_WARP_SIM
#define GS_GPU 1
#define GS_SMEM double *gs_sm = gs_sim_smem
#else
#define GS_GPU 0
#endif
#include <cmath>
#define GS_KERNEL extern "C"
#define GS_DEVICE static inline
#define GS_NET static inline
#define GS_UNROLL
#define GS_NAN std::nan("")
#ifndef GS_WARP_SIM
// gs_host_tid is the "thread" (trajectory) a host harness runs.
static long long gs_host_tid;
#endif
using std::exp;
using std::fabs;
using std::fma;
using std::log;
using std::pow;
using std::sqrt;
using std::tanh;
#endif

// Warps per block on the GPU.
#ifndef GS_WARPS
#define GS_WARPS 4
#endif

// GS_ACC_GLOBAL 1 keeps the warps' accumulators of the record + adjoint
// kernel in global memory (the kernel's work array, ALEN reals per warp of
// the grid, L2-resident) instead of shared memory, which then holds only
// the weights and scratch tiles; GS_MINB, if defined, is the kernels'
// lower bound of blocks per multiprocessor (__launch_bounds__).
#ifndef GS_ACC_GLOBAL
#define GS_ACC_GLOBAL 0
#endif
#if GS_GPU && !defined(GS_WARP_SIM) && defined(GS_MINB)
#define GS_BOUNDS __launch_bounds__(32 * GS_WARPS, GS_MINB)
#else
#define GS_BOUNDS
#endif

#include "tsit5.cuh"

// gs_neural_params holds what every trajectory shares; its layout (56
// bytes, no padding) is mirrored by bench's neuralKernelParams.
struct gs_neural_params {
	double t0, t1;
	double rtol, atol;
	double scale;  // ∂L/∂y_i = scale·(y_i − target_i): 2/B for the mean
	int max_steps; // attempted (accepted + rejected) steps per trajectory
	int rows;      // rows of the record buffer (record kernel only)
	long long n;   // trajectories
};

// The network: W1 [32×2] row-major, b1 [32], W2 [32×32], b2 [32], W3
// [2×32], b3 [2] (nn.MLP's layout), 1,218 weights.
enum {
	NH = 32,
	OFF_W1 = 0,
	OFF_B1 = OFF_W1 + NH * 2,
	OFF_W2 = OFF_B1 + NH,
	OFF_B2 = OFF_W2 + NH * NH,
	OFF_W3 = OFF_B2 + NH,
	OFF_B3 = OFF_W3 + 2 * NH,
	NWEIGHTS = OFF_B3 + 2,
};

struct v2 {
	double x, y;
};

// The shared memory of a block: the weights in fragment order, then each
// warp's accumulator and scratch tiles. Tiles hold a matrix [row][column]
// with a row stride of GS_TS reals (12: the fragment loads of a half-warp
// hit distinct banks); columns are the tile's trajectories.
#define GS_TS 12
enum {
	// Fragments: A operands of m8n8k4, 32 reals (one per lane) each.
	SW2 = 0,            // W2 [m 0..3][kk 0..7]: W2[8m+g][4kk+q]
	SW1 = SW2 + 32 * 32, // W1 [m]: q < 2 ? W1[8m+g][q] : 0
	SW1T = SW1 + 4 * 32, // W1ᵀ [kk]: g < 2 ? W1[4kk+q][g] : 0
	SW3 = SW1T + 8 * 32, // W3 [kk]: g < 2 ? W3[g][4kk+q] : 0
	SW3T = SW3 + 8 * 32, // W3ᵀ [m]: q < 2 ? W3[q][8m+g] : 0
	SB2 = SW3T + 4 * 32, // b2
	SB1 = SB2 + NH,      // b1
	SB3 = SB1 + NH,      // b3 (2, padded to 8)
	SWLEN = SB3 + 8,
	// A warp's accumulator of the weights' cotangents, summed over its
	// tiles: the C fragments (two reals per lane) of W̄2, the elements of
	// W̄1's and W̄3's fragments that are not padding, and the biases'.
	ADW2 = 0,              // [m][nt] 16 tiles: W2[8m+g][8nt+2q+e]
	ADW1 = ADW2 + 16 * 64, // [m][g][e]: W1[8m+g][e] (lanes q = 0)
	ADW3 = ADW1 + 4 * 16,  // [nt][g][q][e]: W3[g][8nt+2q+e] (lanes g < 2)
	ADB1 = ADW3 + 4 * 16,  // b1
	ADB2 = ADB1 + NH,      // b2
	ADB3 = ADB2 + NH,      // b3
	ALEN = ADB3 + 2,
	// A warp's scratch: two 32-row tiles and one of 8 rows (the
	// network's input, rows 0–3, and its output or output cotangent,
	// rows 4–7; rows 2, 3, 6, 7 stay zero).
	XS1 = 0,
	XS2 = XS1 + NH * GS_TS,
	XSX = XS2 + NH * GS_TS,
	XLEN = XSX + 8 * GS_TS,
	WARPLEN = ALEN + XLEN,
};

#if GS_GPU
// GS_NET marks the network's functions: on the GPU each is one function
// the solver calls, not a copy inlined at every stage (a copy is some
// 2,000 instructions; inlined, the kernels' code would not fit the
// instruction caches).

// gs_ctx is a lane's view of its warp: the block's weights, the warp's
// accumulator and scratch tiles, its lane, its trajectory in the tile (g)
// and its place among that trajectory's four lanes (q).
struct gs_ctx {
	const double *w;
	double *acc, *s1, *s2, *sx;
	int lane, g, q;
};

// gs_mma is D = A·B + C of one m8n8k4 float64 matrix product: a is the
// lane's element A[g][q] of the 8×4 A, b its element B[q][g] of the 4×8 B,
// c0, c1 and d0, d1 its elements [g][2q], [g][2q+1] of the 8×8 C and D.
GS_DEVICE void gs_mma(double &d0, double &d1, double a, double b, double c0, double c1)
{
#ifdef GS_WARP_SIM
	gs_sim_mma(d0, d1, a, b, c0, c1);
#else
	asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%4, %5};"
	    : "=d"(d0), "=d"(d1)
	    : "d"(a), "d"(b), "d"(c0), "d"(c1));
#endif
}

// gs_put stores a lane's C fragment elements of rows 8m+g, columns 2q and
// 2q+1, of a 32×8 tile.
GS_DEVICE void gs_put(double *s, const gs_ctx &c, int m, double v0, double v1)
{
	double2 v = {v0, v1};
	*(double2 *)&s[(8 * m + c.g) * GS_TS + 2 * c.q] = v;
}

// gs_rowsum adds v, summed over the four lanes of each trajectory row
// (q), to *p in the lanes with q = 0.
GS_DEVICE void gs_rowsum(double *p, const gs_ctx &c, double v)
{
	v += __shfl_xor_sync(0xffffffffu, v, 1);
	v += __shfl_xor_sync(0xffffffffu, v, 2);
	if (c.q == 0)
		*p += v;
}

// gs_tanh is tanh, one function on the GPU: inlined, each of the layers'
// 32 activations per call is some 50 instructions of code.
GS_NET double gs_tanh(double x) { return tanh(x); }

// mlp_layers computes the hidden layers of the tile's network for the
// lane's input x and stores them in s1 and s2 (32×8 tiles); x is stored
// in sx rows 0, 1.
GS_NET void mlp_layers(gs_ctx c, v2 x)
{
	const double *w = c.w;
	if (c.q == 0) {
		c.sx[0 * GS_TS + c.g] = x.x;
		c.sx[1 * GS_TS + c.g] = x.y;
	}
	__syncwarp();
	double bx = c.sx[c.q * GS_TS + c.g];
GS_UNROLL
	for (int m = 0; m < 4; m++) {
		double b = w[SB1 + 8 * m + c.g], d0, d1;
		gs_mma(d0, d1, w[SW1 + m * 32 + c.lane], bx, b, b);
		gs_put(c.s1, c, m, gs_tanh(d0), gs_tanh(d1));
	}
	__syncwarp();
	double z[4][2];
GS_UNROLL
	for (int m = 0; m < 4; m++)
		z[m][0] = z[m][1] = w[SB2 + 8 * m + c.g];
GS_UNROLL
	for (int kk = 0; kk < 8; kk++) {
		double b = c.s1[(4 * kk + c.q) * GS_TS + c.g];
GS_UNROLL
		for (int m = 0; m < 4; m++)
			gs_mma(z[m][0], z[m][1], w[SW2 + (m * 8 + kk) * 32 + c.lane], b, z[m][0], z[m][1]);
	}
GS_UNROLL
	for (int m = 0; m < 4; m++)
		gs_put(c.s2, c, m, gs_tanh(z[m][0]), gs_tanh(z[m][1]));
	__syncwarp();
}

// gs_get returns a lane's C fragment elements of rows 8m+g, columns 2q
// and 2q+1, of a 32×8 tile.
GS_DEVICE double2 gs_get(const double *s, const gs_ctx &c, int m)
{
	return *(const double2 *)&s[(8 * m + c.g) * GS_TS + 2 * c.q];
}

// mlp returns the network's output for the lane's input x.
GS_NET v2 mlp(gs_ctx c, v2 x)
{
	mlp_layers(c, x);
	const double *w = c.w;
	double b3 = c.g < 2 ? w[SB3 + c.g] : 0;
	double o0 = b3, o1 = b3;
GS_UNROLL
	for (int kk = 0; kk < 8; kk++)
		gs_mma(o0, o1, w[SW3 + kk * 32 + c.lane], c.s2[(4 * kk + c.q) * GS_TS + c.g], o0, o1);
	if (c.g < 2)
		*(double2 *)&c.sx[(4 + c.g) * GS_TS + 2 * c.q] = double2{o0, o1};
	__syncwarp();
	v2 f = {c.sx[4 * GS_TS + c.g], c.sx[5 * GS_TS + c.g]};
	__syncwarp();
	return f;
}

// gs_acc adds A·B, the k-steps kk = 0, 1 whose A and B elements are a[kk]
// and b[kk], to the C fragment elements at p (two reals; nullptr: a lane
// whose elements are padding).
GS_DEVICE void gs_acc(double *p, const double a[2], const double b[2])
{
	double2 v = p ? *(double2 *)p : double2{0, 0};
	gs_mma(v.x, v.y, a[0], b[0], v.x, v.y);
	gs_mma(v.x, v.y, a[1], b[1], v.x, v.y);
	if (p)
		*(double2 *)p = v;
}

// mlp_vjp returns the cotangent of the lane's input x given the cotangent
// ob of the network's output there, and adds the tile's weight cotangents
// to the warp's accumulator.
GS_NET v2 mlp_vjp(gs_ctx c, v2 x, v2 ob)
{
	mlp_layers(c, x);
	const double *w = c.w;
	double *acc = c.acc;
	const int g = c.g, q = c.q, lane = c.lane;
	if (q == 0) {
		c.sx[4 * GS_TS + g] = ob.x;
		c.sx[5 * GS_TS + g] = ob.y;
	}
	{
		// b̄3 += Σ over the tile's trajectories of ō.
		double s0 = q == 0 ? ob.x : 0, s1 = q == 0 ? ob.y : 0;
		for (int o = 4; o < 32; o <<= 1) {
			s0 += __shfl_xor_sync(0xffffffffu, s0, o);
			s1 += __shfl_xor_sync(0xffffffffu, s1, o);
		}
		if (lane == 0) {
			acc[ADB3] += s0;
			acc[ADB3 + 1] += s1;
		}
	}
	__syncwarp();
	// z̄2 = (W3ᵀ·ō) ⊙ (1 − h2²).
	double bo = c.sx[(4 + q) * GS_TS + g];
	double zb2[4][2];
GS_UNROLL
	for (int m = 0; m < 4; m++) {
		double d0, d1;
		gs_mma(d0, d1, w[SW3T + m * 32 + lane], bo, 0, 0);
		const double2 h2 = gs_get(c.s2, c, m);
		zb2[m][0] = d0 * (1 - h2.x * h2.x);
		zb2[m][1] = d1 * (1 - h2.y * h2.y);
		gs_rowsum(&acc[ADB2 + 8 * m + g], c, zb2[m][0] + zb2[m][1]);
	}
	// W̄3 += ō·h2ᵀ over the tile (A = ō, rows g < 2; B = h2ᵀ).
	{
		double a[2];
		for (int kk = 0; kk < 2; kk++)
			a[kk] = g < 2 ? c.sx[(4 + g) * GS_TS + 4 * kk + q] : 0;
GS_UNROLL
		for (int nt = 0; nt < 4; nt++) {
			double b[2];
			for (int kk = 0; kk < 2; kk++)
				b[kk] = c.s2[(8 * nt + g) * GS_TS + 4 * kk + q];
			gs_acc(g < 2 ? acc + ADW3 + nt * 16 + g * 8 + 2 * q : nullptr, a, b);
		}
	}
	__syncwarp();
GS_UNROLL
	for (int m = 0; m < 4; m++)
		gs_put(c.s2, c, m, zb2[m][0], zb2[m][1]);
	__syncwarp();
	// z̄1 = (W2ᵀ·z̄2) ⊙ (1 − h1²); W2ᵀ's fragments come from W2's.
	double zb1[4][2];
GS_UNROLL
	for (int m = 0; m < 4; m++)
		zb1[m][0] = zb1[m][1] = 0;
GS_UNROLL
	for (int kk = 0; kk < 8; kk++) {
		double b = c.s2[(4 * kk + q) * GS_TS + g];
		const int r = 4 * kk + q; // row of W2
GS_UNROLL
		for (int m = 0; m < 4; m++) {
			const int col = 8 * m + g; // column of W2
			double a = w[SW2 + ((r >> 3) * 8 + (col >> 2)) * 32 + (r & 7) * 4 + (col & 3)];
			gs_mma(zb1[m][0], zb1[m][1], a, b, zb1[m][0], zb1[m][1]);
		}
	}
GS_UNROLL
	for (int m = 0; m < 4; m++) {
		const double2 h1 = gs_get(c.s1, c, m);
		zb1[m][0] *= 1 - h1.x * h1.x;
		zb1[m][1] *= 1 - h1.y * h1.y;
		gs_rowsum(&acc[ADB1 + 8 * m + g], c, zb1[m][0] + zb1[m][1]);
	}
	// W̄2 += z̄2·h1ᵀ over the tile.
	{
		double a[4][2], b[4][2];
GS_UNROLL
		for (int m = 0; m < 4; m++)
			for (int kk = 0; kk < 2; kk++) {
				a[m][kk] = c.s2[(8 * m + g) * GS_TS + 4 * kk + q];
				b[m][kk] = c.s1[(8 * m + g) * GS_TS + 4 * kk + q];
			}
GS_UNROLL
		for (int m = 0; m < 4; m++)
GS_UNROLL
			for (int nt = 0; nt < 4; nt++)
				gs_acc(acc + ADW2 + (m * 4 + nt) * 64 + 2 * lane, a[m], b[nt]);
	}
	__syncwarp();
GS_UNROLL
	for (int m = 0; m < 4; m++)
		gs_put(c.s1, c, m, zb1[m][0], zb1[m][1]);
	__syncwarp();
	// W̄1 += z̄1·xᵀ over the tile (B = xᵀ, columns g < 2).
	{
		double b[2];
		for (int kk = 0; kk < 2; kk++)
			b[kk] = g < 2 ? c.sx[g * GS_TS + 4 * kk + q] : 0;
GS_UNROLL
		for (int m = 0; m < 4; m++) {
			double a[2];
			for (int kk = 0; kk < 2; kk++)
				a[kk] = c.s1[(8 * m + g) * GS_TS + 4 * kk + q];
			gs_acc(q == 0 ? acc + ADW1 + m * 16 + 2 * g : nullptr, a, b);
		}
	}
	// x̄ = W1ᵀ·z̄1 (rows g < 2).
	double x0 = 0, x1 = 0;
GS_UNROLL
	for (int kk = 0; kk < 8; kk++)
		gs_mma(x0, x1, w[SW1T + kk * 32 + lane], c.s1[(4 * kk + q) * GS_TS + g], x0, x1);
	__syncwarp();
	if (g < 2)
		*(double2 *)&c.sx[(4 + g) * GS_TS + 2 * q] = double2{x0, x1};
	__syncwarp();
	v2 xb = {c.sx[4 * GS_TS + g], c.sx[5 * GS_TS + g]};
	__syncwarp();
	return xb;
}

// gs_any reports whether b holds in any lane of the warp.
GS_DEVICE bool gs_any(bool b) { return __any_sync(0xffffffffu, b); }
GS_DEVICE int gs_max_lanes(int x) { return __reduce_max_sync(0xffffffffu, x); }
#else
// On the host a "warp" is one trajectory.
struct gs_ctx {
	const double *w;
	double *grad;
};

GS_DEVICE void dense(double *out, const double *w, const double *b, const double *x, int rows, int cols)
{
	for (int i = 0; i < rows; i++) {
		double s = b[i];
		for (int j = 0; j < cols; j++)
			s = fma(w[i * cols + j], x[j], s);
		out[i] = s;
	}
}

GS_DEVICE void mlp_layers(const double *w, v2 x, double *h1, double *h2)
{
	double xi[2] = {x.x, x.y};
	dense(h1, w + OFF_W1, w + OFF_B1, xi, NH, 2);
	for (int i = 0; i < NH; i++)
		h1[i] = tanh(h1[i]);
	dense(h2, w + OFF_W2, w + OFF_B2, h1, NH, NH);
	for (int i = 0; i < NH; i++)
		h2[i] = tanh(h2[i]);
}

GS_DEVICE v2 mlp(gs_ctx c, v2 x)
{
	double h1[NH], h2[NH], o[2];
	mlp_layers(c.w, x, h1, h2);
	dense(o, c.w + OFF_W3, c.w + OFF_B3, h2, 2, NH);
	v2 f = {o[0], o[1]};
	return f;
}

GS_DEVICE v2 mlp_vjp(gs_ctx c, v2 x, v2 ob)
{
	const double *w = c.w;
	double *gr = c.grad;
	double h1[NH], h2[NH], zb2[NH], zb1[NH];
	mlp_layers(w, x, h1, h2);
	double o[2] = {ob.x, ob.y};
	for (int i = 0; i < 2; i++) {
		gr[OFF_B3 + i] += o[i];
		for (int j = 0; j < NH; j++)
			gr[OFF_W3 + i * NH + j] += o[i] * h2[j];
	}
	for (int j = 0; j < NH; j++) {
		double s = 0;
		for (int i = 0; i < 2; i++)
			s += w[OFF_W3 + i * NH + j] * o[i];
		zb2[j] = s * (1 - h2[j] * h2[j]);
	}
	for (int i = 0; i < NH; i++) {
		gr[OFF_B2 + i] += zb2[i];
		for (int j = 0; j < NH; j++)
			gr[OFF_W2 + i * NH + j] += zb2[i] * h1[j];
	}
	for (int j = 0; j < NH; j++) {
		double s = 0;
		for (int i = 0; i < NH; i++)
			s += w[OFF_W2 + i * NH + j] * zb2[i];
		zb1[j] = s * (1 - h1[j] * h1[j]);
	}
	double xi[2] = {x.x, x.y}, xb[2] = {0, 0};
	for (int i = 0; i < NH; i++) {
		gr[OFF_B1 + i] += zb1[i];
		for (int j = 0; j < 2; j++) {
			gr[OFF_W1 + i * 2 + j] += zb1[i] * xi[j];
			xb[j] += w[OFF_W1 + i * 2 + j] * zb1[i];
		}
	}
	v2 r = {xb[0], xb[1]};
	return r;
}

GS_DEVICE bool gs_any(bool b) { return b; }
GS_DEVICE int gs_max_lanes(int x) { return x; }
#endif

// Stage inputs Y_j = y + h·Σ_l a_jl·k_l, in the order of lorenz_tsit5.cu.
GS_DEVICE v2 stage2(v2 y, double h, v2 k1)
{
	v2 r = {y.x + h * (A21 * k1.x), y.y + h * (A21 * k1.y)};
	return r;
}
GS_DEVICE v2 stage3(v2 y, double h, v2 k1, v2 k2)
{
	v2 r = {y.x + h * (A31 * k1.x + A32 * k2.x), y.y + h * (A31 * k1.y + A32 * k2.y)};
	return r;
}
GS_DEVICE v2 stage4(v2 y, double h, v2 k1, v2 k2, v2 k3)
{
	v2 r = {y.x + h * (A41 * k1.x + A42 * k2.x + A43 * k3.x), y.y + h * (A41 * k1.y + A42 * k2.y + A43 * k3.y)};
	return r;
}
GS_DEVICE v2 stage5(v2 y, double h, v2 k1, v2 k2, v2 k3, v2 k4)
{
	v2 r = {y.x + h * (A51 * k1.x + A52 * k2.x + A53 * k3.x + A54 * k4.x),
	        y.y + h * (A51 * k1.y + A52 * k2.y + A53 * k3.y + A54 * k4.y)};
	return r;
}
GS_DEVICE v2 stage6(v2 y, double h, v2 k1, v2 k2, v2 k3, v2 k4, v2 k5)
{
	v2 r = {y.x + h * (A61 * k1.x + A62 * k2.x + A63 * k3.x + A64 * k4.x + A65 * k5.x),
	        y.y + h * (A61 * k1.y + A62 * k2.y + A63 * k3.y + A64 * k4.y + A65 * k5.y)};
	return r;
}

// gs_traj is the outcome of one trajectory's solve.
struct gs_traj {
	v2 y;
	int accepted, rejected, status;
};

// initial_step is Hairer's initial step size with the library's clamps;
// k1 = f(y0). Every lane evaluates the network once.
GS_DEVICE double initial_step(gs_ctx c, const gs_neural_params &p, v2 y, v2 k1)
{
	const double rtol = p.rtol, atol = p.atol;
	v2 sc = {atol + rtol * fabs(y.x), atol + rtol * fabs(y.y)};
	double d0 = sqrt((gs_sq(y.x / sc.x) + gs_sq(y.y / sc.y)) / 2);
	double d1 = sqrt((gs_sq(k1.x / sc.x) + gs_sq(k1.y / sc.y)) / 2);
	double h0 = 1e-6;
	if (d0 >= 1e-5 && d1 >= 1e-5)
		h0 = 0.01 * d0 / d1;
	if (!(h0 > 0) || !gs_finite(h0))
		h0 = 1e-6;
	h0 = gs_min(h0, p.t1 - p.t0);
	v2 y1 = {y.x + h0 * k1.x, y.y + h0 * k1.y};
	v2 f1 = mlp(c, y1);
	double d2 = sqrt((gs_sq((f1.x - k1.x) / sc.x) + gs_sq((f1.y - k1.y) / sc.y)) / 2) / h0;
	double dm = gs_max(d1, d2);
	double hh;
	if (dm <= 1e-15 || dm != dm)
		hh = gs_max(1e-6, h0 * 1e-3);
	else
		hh = pow(0.01 / dm, 1.0 / 6);
	return gs_min(100 * h0, hh);
}

// solve integrates trajectory i (live false: a lane past the ensemble's
// end, which computes on y0 = 0 and records nothing) in lockstep with the
// other trajectories of its tile. With Record it stores the start state
// and size of every accepted step s in ys[(s*2 + c)*n + i] and hs[s*n + i].
template <bool Record>
GS_DEVICE gs_traj solve(gs_ctx c, const gs_neural_params &p, long long i, bool live, v2 y, double *ys, double *hs,
                        bool writer)
{
	const double rtol = p.rtol, atol = p.atol, t1 = p.t1;
	const long long n = p.n;
	double t = p.t0;
	v2 k1 = mlp(c, y);
	const double hmin = 4 * 2.220446049250313080847263336181640625e-16 * gs_max(fabs(p.t0), fabs(t1 - p.t0));
	double h = initial_step(c, p, y, k1);
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
	bool running = live;
	while (gs_any(running)) {
		v2 k2 = mlp(c, stage2(y, h, k1));
		v2 k3 = mlp(c, stage3(y, h, k1, k2));
		v2 k4 = mlp(c, stage4(y, h, k1, k2, k3));
		v2 k5 = mlp(c, stage5(y, h, k1, k2, k3, k4));
		v2 k6 = mlp(c, stage6(y, h, k1, k2, k3, k4, k5));
		v2 yn = {y.x + h * (B1 * k1.x + B2 * k2.x + B3 * k3.x + B4 * k4.x + B5 * k5.x + B6 * k6.x),
		         y.y + h * (B1 * k1.y + B2 * k2.y + B3 * k3.y + B4 * k4.y + B5 * k5.y + B6 * k6.y)};
		v2 k7 = mlp(c, yn);
		if (!running)
			continue;
		v2 e = {h * (E1 * k1.x + E2 * k2.x + E3 * k3.x + E4 * k4.x + E5 * k5.x + E6 * k6.x + E7 * k7.x),
		        h * (E1 * k1.y + E2 * k2.y + E3 * k3.y + E4 * k4.y + E5 * k5.y + E6 * k6.y + E7 * k7.y)};
		bool bad = !gs_finite(yn.x) || !gs_finite(yn.y);
		double err = sqrt((gs_sq(e.x / (atol + rtol * gs_max(fabs(y.x), fabs(yn.x)))) +
		                   gs_sq(e.y / (atol + rtol * gs_max(fabs(y.y), fabs(yn.y))))) / 2);
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
					running = false;
					continue;
				}
				if (writer) {
					long long s = r.accepted;
					ys[(s * 2 + 0) * n + i] = y.x;
					ys[(s * 2 + 1) * n + i] = y.y;
					hs[s * n + i] = h;
				}
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
		if (accepted && last) {
			running = false;
			continue;
		}
		if (r.accepted + r.rejected >= p.max_steps) {
			r.status = GS_MAX_STEPS;
			running = false;
			continue;
		}
		h *= gs_min(CTL_FAC_MAX, gs_max(CTL_FAC_MIN, factor));
		if (h < hmin || t + h == t) {
			r.status = nonfinite > 0 ? GS_NON_FINITE : GS_STEP_UNDERFLOW;
			running = false;
			continue;
		}
		double span = t1 - t;
		last = h >= span;
		if (last)
			h = span;
	}
	r.y = y;
	if (r.status != GS_OK)
		r.y.x = r.y.y = GS_NAN;
	return r;
}

// step_vjp returns the adjoint of the start state y of one Tsit5 step of
// size h (held fixed) given the adjoint lam of its end state, adding the
// step's weight cotangents. It recomputes the stages from y. With h = 0
// (a trajectory with no step left) it returns lam and adds zero.
GS_DEVICE v2 step_vjp(gs_ctx c, v2 y, double h, v2 lam)
{
	v2 k1 = mlp(c, y);
	v2 Y2 = stage2(y, h, k1);
	v2 k2 = mlp(c, Y2);
	v2 Y3 = stage3(y, h, k1, k2);
	v2 k3 = mlp(c, Y3);
	v2 Y4 = stage4(y, h, k1, k2, k3);
	v2 k4 = mlp(c, Y4);
	v2 Y5 = stage5(y, h, k1, k2, k3, k4);
	v2 k5 = mlp(c, Y5);
	v2 Y6 = stage6(y, h, k1, k2, k3, k4, k5);

	v2 yb = lam;
	v2 kb1 = {h * B1 * lam.x, h * B1 * lam.y};
	v2 kb2 = {h * B2 * lam.x, h * B2 * lam.y};
	v2 kb3 = {h * B3 * lam.x, h * B3 * lam.y};
	v2 kb4 = {h * B4 * lam.x, h * B4 * lam.y};
	v2 kb5 = {h * B5 * lam.x, h * B5 * lam.y};
	v2 kb6 = {h * B6 * lam.x, h * B6 * lam.y};
	v2 g;

#define GS_ACC(dst, cf, src) \
	(dst).x += (cf) * (src).x; \
	(dst).y += (cf) * (src).y

	g = mlp_vjp(c, Y6, kb6);
	GS_ACC(yb, 1.0, g);
	GS_ACC(kb1, h * A61, g);
	GS_ACC(kb2, h * A62, g);
	GS_ACC(kb3, h * A63, g);
	GS_ACC(kb4, h * A64, g);
	GS_ACC(kb5, h * A65, g);

	g = mlp_vjp(c, Y5, kb5);
	GS_ACC(yb, 1.0, g);
	GS_ACC(kb1, h * A51, g);
	GS_ACC(kb2, h * A52, g);
	GS_ACC(kb3, h * A53, g);
	GS_ACC(kb4, h * A54, g);

	g = mlp_vjp(c, Y4, kb4);
	GS_ACC(yb, 1.0, g);
	GS_ACC(kb1, h * A41, g);
	GS_ACC(kb2, h * A42, g);
	GS_ACC(kb3, h * A43, g);

	g = mlp_vjp(c, Y3, kb3);
	GS_ACC(yb, 1.0, g);
	GS_ACC(kb1, h * A31, g);
	GS_ACC(kb2, h * A32, g);

	g = mlp_vjp(c, Y2, kb2);
	GS_ACC(yb, 1.0, g);
	GS_ACC(kb1, h * A21, g);

	g = mlp_vjp(c, y, kb1);
	GS_ACC(yb, 1.0, g);
#undef GS_ACC
	return yb;
}

#if GS_GPU
// gs_block_setup lays the weights out in fragment order in the block's
// shared memory, zeroes the warps' accumulators and scratch, and returns
// the lane's context.
GS_DEVICE gs_ctx gs_block_setup(double *sm, const double *__restrict__ wg, bool grad, double *__restrict__ work)
{
	const int tid = threadIdx.x, nt = blockDim.x;
	for (int k = tid; k < SWLEN; k += nt) {
		double v = 0;
		const int lane = k & 31, g = lane >> 2, q = lane & 3, f = k >> 5;
		if (k < SW1) { // f = m*8 + kk
			v = wg[OFF_W2 + (8 * (f >> 3) + g) * NH + 4 * (f & 7) + q];
		} else if (k < SW1T) { // f - 32 = m
			v = q < 2 ? wg[OFF_W1 + (8 * (f - 32) + g) * 2 + q] : 0;
		} else if (k < SW3) { // f - 36 = kk
			v = g < 2 ? wg[OFF_W1 + (4 * (f - 36) + q) * 2 + g] : 0;
		} else if (k < SW3T) { // f - 44 = kk
			v = g < 2 ? wg[OFF_W3 + g * NH + 4 * (f - 44) + q] : 0;
		} else if (k < SB2) { // f - 52 = m
			v = q < 2 ? wg[OFF_W3 + q * NH + 8 * (f - 52) + g] : 0;
		} else if (k < SB1) {
			v = wg[OFF_B2 + k - SB2];
		} else if (k < SB3) {
			v = wg[OFF_B1 + k - SB1];
		} else if (k < SB3 + 2) {
			v = wg[OFF_B3 + k - SB3];
		}
		sm[k] = v;
	}
	double *warps = sm + SWLEN;
	const bool sacc = grad && !GS_ACC_GLOBAL;
	const int per = sacc ? WARPLEN : XLEN;
	for (int k = tid; k < GS_WARPS * per; k += nt)
		warps[k] = 0;
	double *mine = warps + (tid >> 5) * per;
	gs_ctx c;
	c.acc = sacc ? mine : nullptr;
	if (grad && GS_ACC_GLOBAL) {
		c.acc = work + ((long long)blockIdx.x * GS_WARPS + (tid >> 5)) * ALEN;
		for (int k = tid & 31; k < ALEN; k += 32)
			c.acc[k] = 0;
	}
	__syncthreads();
	c.w = sm;
	c.s1 = mine + (sacc ? ALEN : 0) + XS1;
	c.s2 = mine + (sacc ? ALEN : 0) + XS2;
	c.sx = mine + (sacc ? ALEN : 0) + XSX;
	c.lane = tid & 31;
	c.g = c.lane >> 2;
	c.q = c.lane & 3;
	return c;
}

// gs_block_flush adds the sum of the block's accumulators to grad.
GS_DEVICE void gs_block_flush(const double *sm, const double *__restrict__ work, double *__restrict__ grad)
{
	__syncthreads();
#if GS_ACC_GLOBAL
	const double *warps = work + (long long)blockIdx.x * GS_WARPS * ALEN;
	const int stride = ALEN;
	(void)sm;
#else
	const double *warps = sm + SWLEN;
	const int stride = WARPLEN;
	(void)work;
#endif
	for (int k = threadIdx.x; k < ALEN; k += blockDim.x) {
		double s = 0;
		for (int wp = 0; wp < GS_WARPS; wp++)
			s += warps[wp * stride + k];
		int dst;
		if (k < ADW1) { // [m*4 + nt][lane][e]
			const int f = k >> 6, lane = (k >> 1) & 31, g = lane >> 2, q = lane & 3;
			dst = OFF_W2 + (8 * (f >> 2) + g) * NH + 8 * (f & 3) + 2 * q + (k & 1);
		} else if (k < ADW3) { // [m][g][e]
			const int r = k - ADW1;
			dst = OFF_W1 + (8 * (r >> 4) + ((r >> 1) & 7)) * 2 + (r & 1);
		} else if (k < ADB1) { // [nt][g][q][e]
			const int r = k - ADW3;
			dst = OFF_W3 + ((r >> 3) & 1) * NH + 8 * (r >> 4) + 2 * ((r >> 1) & 3) + (r & 1);
		} else if (k < ADB2) {
			dst = OFF_B1 + k - ADB1;
		} else if (k < ADB3) {
			dst = OFF_B2 + k - ADB2;
		} else {
			dst = OFF_B3 + k - ADB3;
		}
		atomicAdd(&grad[dst], s);
	}
}
#endif

// neural_tsit5_forward integrates every trajectory i (y0 = y0[2i], y0[2i+1])
// and writes its final state to y[2i], y[2i+1] (NaN on failure), its
// accepted and rejected step counts and its status (GS_*). On the GPU it
// takes blocks of GS_WARPS warps and GS_WARPS·NEURAL_XLEN reals of
// dynamic shared memory beside the weights (neural_smem_bytes).
GS_KERNEL void GS_BOUNDS neural_tsit5_forward(gs_neural_params p, const double *__restrict__ wg, const double *__restrict__ y0,
                                    double *__restrict__ y, int *__restrict__ accepted, int *__restrict__ rejected,
                                    int *__restrict__ status)
{
#if GS_GPU
	GS_SMEM;
	gs_ctx c = gs_block_setup(gs_sm, wg, false, nullptr);
	const long long tiles = (p.n + 7) / 8;
	const long long warps = (long long)gridDim.x * GS_WARPS;
	for (long long tile = (long long)blockIdx.x * GS_WARPS + (threadIdx.x >> 5); tile < tiles; tile += warps) {
		const long long i = tile * 8 + c.g;
		const bool live = i < p.n, writer = live && c.q == 0;
#else
	gs_ctx c = {wg, nullptr};
	{
		const long long i = gs_host_tid;
		const bool live = true, writer = true;
#endif
		v2 yi = {0, 0};
		if (live) {
			yi.x = y0[2 * i];
			yi.y = y0[2 * i + 1];
		}
		gs_traj r = solve<false>(c, p, i, live, yi, nullptr, nullptr, writer);
		if (writer) {
			y[2 * i] = r.y.x;
			y[2 * i + 1] = r.y.y;
			accepted[i] = r.accepted;
			rejected[i] = r.rejected;
			status[i] = r.status;
		}
	}
}

// neural_tsit5_record_adjoint integrates every trajectory as
// neural_tsit5_forward does, recording the start state and size of each
// accepted step in ys ([rows×2×n]) and hs ([rows×n]), then sweeps the
// recorded steps backward from λ = scale·(y(t1) − target) and adds dL/dw
// to grad (zero it first; with GS_ACC_GLOBAL work holds ALEN reals per
// warp of the grid, else it is not used); a failed trajectory contributes nothing and
// has its status.
GS_KERNEL void GS_BOUNDS neural_tsit5_record_adjoint(gs_neural_params p, const double *__restrict__ wg,
                                           const double *__restrict__ y0, const double *__restrict__ targets,
                                           double *__restrict__ y, double *__restrict__ grad, double *__restrict__ work,
                                           double *__restrict__ ys,
                                           double *__restrict__ hs, int *__restrict__ accepted,
                                           int *__restrict__ rejected, int *__restrict__ status)
{
	const long long n = p.n;
#if GS_GPU
	GS_SMEM;
	gs_ctx c = gs_block_setup(gs_sm, wg, true, work);
	const long long tiles = (p.n + 7) / 8;
	const long long warps = (long long)gridDim.x * GS_WARPS;
	for (long long tile = (long long)blockIdx.x * GS_WARPS + (threadIdx.x >> 5); tile < tiles; tile += warps) {
		const long long i = tile * 8 + c.g;
		const bool live = i < n, writer = live && c.q == 0;
#else
	gs_ctx c = {wg, grad};
	(void)work;
	{
		const long long i = gs_host_tid;
		const bool live = true, writer = true;
#endif
		v2 yi = {0, 0};
		if (live) {
			yi.x = y0[2 * i];
			yi.y = y0[2 * i + 1];
		}
		gs_traj r = solve<true>(c, p, i, live, yi, ys, hs, writer);
		if (writer) {
			y[2 * i] = r.y.x;
			y[2 * i + 1] = r.y.y;
			accepted[i] = r.accepted;
			rejected[i] = r.rejected;
			status[i] = r.status;
		}
		const bool ok = live && r.status == GS_OK;
		v2 lam = {0, 0};
		int steps = 0;
		if (ok) {
			lam.x = p.scale * (r.y.x - targets[2 * i]);
			lam.y = p.scale * (r.y.y - targets[2 * i + 1]);
			steps = r.accepted;
		}
		const int most = gs_max_lanes(steps);
		for (int k = 0; k < most; k++) {
			const long long s = steps - 1 - k;
			v2 ys_s = {0, 0};
			double h = 0;
			if (s >= 0) {
				ys_s.x = ys[(s * 2 + 0) * n + i];
				ys_s.y = ys[(s * 2 + 1) * n + i];
				h = hs[s * n + i];
			}
			lam = step_vjp(c, ys_s, h, lam);
		}
	}
#if GS_GPU
	gs_block_flush(gs_sm, work, grad);
#endif
}

#if GS_GPU
// neural_mma_probe computes, for each warp w, D = A·B + C of one m8n8k4
// float64 product with the layers' fragment mapping: a [w][8][4], b
// [w][4][8], c and d [w][8][8], row-major. Tests compare it with chains of
// fused multiply-adds to learn the tensor cores' rounding.
GS_KERNEL void neural_mma_probe(const double *__restrict__ a, const double *__restrict__ b,
                                const double *__restrict__ c, double *__restrict__ d, int warps)
{
	const int w = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
	if (w >= warps)
		return;
	const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
	double d0, d1;
	gs_mma(d0, d1, a[w * 32 + g * 4 + q], b[w * 32 + q * 8 + g], c[w * 64 + g * 8 + 2 * q], c[w * 64 + g * 8 + 2 * q + 1]);
	d[w * 64 + g * 8 + 2 * q] = d0;
	d[w * 64 + g * 8 + 2 * q + 1] = d1;
}
#endif
