// Host harness of neural_tsit5.cu: runs every "thread" of both kernels in a
// loop and prints the results, for bench's TestNeuralCUDAOnHost.
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
#include <cstddef>
#include <cstdio>
#include <vector>

#include "neural_tsit5.cu"

static_assert(sizeof(gs_neural_params) == 56, "gs_neural_params must be 56 bytes (bench.neuralKernelParams)");
static_assert(offsetof(gs_neural_params, max_steps) == 40 && offsetof(gs_neural_params, n) == 48,
              "gs_neural_params layout differs from bench.neuralKernelParams");

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
	std::vector<double> y(2 * n), y2(2 * n), grad(NWEIGHTS), ys(2 * n * (size_t)p.rows), hs(n * (size_t)p.rows);
	std::vector<int> acc(n), rej(n), st(n), acc2(n), rej2(n), st2(n);
	for (gs_host_tid = 0; gs_host_tid < n; gs_host_tid++)
		neural_tsit5_forward(p, w.data(), y0.data(), y.data(), acc.data(), rej.data(), st.data());
	for (gs_host_tid = 0; gs_host_tid < n; gs_host_tid++)
		neural_tsit5_record_adjoint(p, w.data(), y0.data(), tg.data(), y2.data(), grad.data(), ys.data(), hs.data(),
		                            acc2.data(), rej2.data(), st2.data());
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
