// Host harness of neural_tsit5.cu: runs both kernels and prints the
// results, for bench's TestNeuralCUDAOnHost. Without GS_WARP_SIM it runs
// every "thread" (one trajectory each) in a loop; with -DGS_WARP_SIM it
// runs the GPU form on one simulated warp of 32 threads (a block of one
// warp, which takes every tile in turn): shuffles, votes and the
// tensor-core product go through a shared slot array and a barrier, the
// product as chains of fused multiply-adds in k order.
//
// stdin:  n rows max_steps
//         t0 t1 rtol atol scale
//         the 1,218 weights
//         y0[0] ... y0[2n-1]
//         targets[0] ... targets[2n-1]
// stdout: the layout's sizes: SWLEN XLEN WARPLEN
//         the gradient: 1,218 numbers
//         one line per trajectory i:
//         i  forward: status accepted rejected y[0] y[1]
//            record+adjoint: status accepted rejected y[0] y[1]
//            h[0] ... h[accepted-1]
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <vector>

#ifdef GS_WARP_SIM
#include <barrier>
#include <mutex>
#include <thread>
#define GS_WARPS 1
#ifndef GS_ACC_GLOBAL
#define GS_ACC_GLOBAL 0
#endif
struct gs_sim_dim {
	unsigned x;
};
struct double2 {
	double x, y;
};
static thread_local gs_sim_dim threadIdx;
static const gs_sim_dim blockIdx = {0}, blockDim = {32}, gridDim = {1};
static std::barrier<> *gs_sim_bar;
static double gs_sim_slot[32][2];
static std::mutex gs_sim_mu;
static double gs_sim_smem[4096];
static void __syncwarp() { gs_sim_bar->arrive_and_wait(); }
static void __syncthreads() { gs_sim_bar->arrive_and_wait(); }
static double __shfl_xor_sync(unsigned, double v, int o)
{
	const int lane = threadIdx.x & 31;
	gs_sim_slot[lane][0] = v;
	gs_sim_bar->arrive_and_wait();
	double r = gs_sim_slot[lane ^ o][0];
	gs_sim_bar->arrive_and_wait();
	return r;
}
static bool __any_sync(unsigned, bool p)
{
	const int lane = threadIdx.x & 31;
	gs_sim_slot[lane][0] = p ? 1 : 0;
	gs_sim_bar->arrive_and_wait();
	bool any = false;
	for (int l = 0; l < 32; l++)
		any = any || gs_sim_slot[l][0] != 0;
	gs_sim_bar->arrive_and_wait();
	return any;
}
static int __reduce_max_sync(unsigned, int x)
{
	const int lane = threadIdx.x & 31;
	gs_sim_slot[lane][0] = x;
	gs_sim_bar->arrive_and_wait();
	int m = x;
	for (int l = 0; l < 32; l++)
		m = gs_sim_slot[l][0] > m ? (int)gs_sim_slot[l][0] : m;
	gs_sim_bar->arrive_and_wait();
	return m;
}
static double atomicAdd(double *a, double v)
{
	std::lock_guard<std::mutex> g(gs_sim_mu);
	double old = *a;
	*a += v;
	return old;
}
// gs_sim_mma is D = A·B + C of the m8n8k4 product, lane g*4+q holding
// A[g][q], B[q][g], C and D [g][2q], [g][2q+1].
static void gs_sim_mma(double &d0, double &d1, double a, double b, double c0, double c1)
{
	const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
	gs_sim_slot[lane][0] = a;
	gs_sim_slot[lane][1] = b;
	gs_sim_bar->arrive_and_wait();
	double r0 = c0, r1 = c1;
	for (int k = 0; k < 4; k++) {
		const double aik = gs_sim_slot[g * 4 + k][0];
		r0 = std::fma(aik, gs_sim_slot[(2 * q) * 4 + k][1], r0);
		r1 = std::fma(aik, gs_sim_slot[(2 * q + 1) * 4 + k][1], r1);
	}
	gs_sim_bar->arrive_and_wait();
	d0 = r0;
	d1 = r1;
}
#endif

#include "neural_tsit5.cu"

static_assert(sizeof(gs_neural_params) == 56, "gs_neural_params must be 56 bytes (bench.neuralKernelParams)");
static_assert(offsetof(gs_neural_params, max_steps) == 40 && offsetof(gs_neural_params, n) == 48,
              "gs_neural_params layout differs from bench.neuralKernelParams");

// run runs a kernel call f on every thread of the launch.
template <class F>
static void run(long long n, F f)
{
#ifdef GS_WARP_SIM
	(void)n;
	static_assert(SWLEN + WARPLEN <= sizeof(gs_sim_smem) / sizeof(double), "gs_sim_smem is too small");
	std::barrier<> bar(32);
	gs_sim_bar = &bar;
	std::vector<std::thread> th;
	for (int lane = 0; lane < 32; lane++)
		th.emplace_back([&f, lane] {
			threadIdx.x = lane;
			f();
		});
	for (auto &t : th)
		t.join();
#else
	for (gs_host_tid = 0; gs_host_tid < n; gs_host_tid++)
		f();
#endif
}

int main()
{
	gs_neural_params p;
	if (std::scanf("%lld %d %d", &p.n, &p.rows, &p.max_steps) != 3)
		return 2;
	if (std::scanf("%lf %lf %lf %lf %lf", &p.t0, &p.t1, &p.rtol, &p.atol, &p.scale) != 5)
		return 2;
	const long long n = p.n;
	std::vector<double> w(NWEIGHTS), y0(2 * n), tg(2 * n);
	for (auto *v : {&w, &y0, &tg})
		for (double &x : *v)
			if (std::scanf("%lf", &x) != 1)
				return 2;
	std::vector<double> y(2 * n), y2(2 * n), grad(NWEIGHTS), work(GS_WARPS * ALEN), ys(2 * n * (size_t)p.rows), hs(n * (size_t)p.rows);
	std::vector<int> acc(n), rej(n), st(n), acc2(n), rej2(n), st2(n);
	run(n, [&] { neural_tsit5_forward(p, w.data(), y0.data(), y.data(), acc.data(), rej.data(), st.data()); });
	run(n, [&] {
		neural_tsit5_record_adjoint(p, w.data(), y0.data(), tg.data(), y2.data(), grad.data(), work.data(), ys.data(), hs.data(),
		                            acc2.data(), rej2.data(), st2.data());
	});
	std::printf("%d %d %d\n", (int)SWLEN, (int)XLEN, (int)WARPLEN);
	for (int k = 0; k < NWEIGHTS; k++)
		std::printf("%.17g%c", grad[k], k + 1 < NWEIGHTS ? ' ' : '\n');
	for (long long i = 0; i < n; i++) {
		std::printf("%lld  %d %d %d %.17g %.17g  %d %d %d %.17g %.17g ", i, st[i], acc[i], rej[i], y[2 * i],
		            y[2 * i + 1], st2[i], acc2[i], rej2[i], y2[2 * i], y2[2 * i + 1]);
		for (int s = 0; s < acc2[i] && s < p.rows; s++)
			std::printf(" %.17g", hs[s * n + i]);
		std::printf("\n");
	}
	return 0;
}
