// Host harness of lorenz_tsit5.cu: runs every "thread" of both kernels in a
// loop and prints the results, for bench's TestLorenzCUDAOnHost.
//
// stdin:  n rows max_steps
//         sigma beta y0[0] y0[1] y0[2] t0 t1 rtol atol
//         rho[0] ... rho[n-1]
// stdout: one line per trajectory i:
//         i  forward: status accepted rejected y[0] y[1] y[2]
//            record+adjoint: status accepted rejected y[0] y[1] y[2] dL/drho
//            h[0] ... h[accepted-1]
#include <cstddef>
#include <cstdio>
#include <vector>

#include "lorenz_tsit5.cu"

static_assert(sizeof(gs_lorenz_params) == 88, "gs_lorenz_params must be 88 bytes (bench.lorenzKernelParams)");
static_assert(offsetof(gs_lorenz_params, max_steps) == 72 && offsetof(gs_lorenz_params, n) == 80,
              "gs_lorenz_params layout differs from bench.lorenzKernelParams");

int main()
{
	gs_lorenz_params p;
	if (std::scanf("%lld %d %d", &p.n, &p.rows, &p.max_steps) != 3)
		return 2;
	if (std::scanf("%lf %lf %lf %lf %lf %lf %lf %lf %lf", &p.sigma, &p.beta, &p.y0[0], &p.y0[1], &p.y0[2], &p.t0,
	               &p.t1, &p.rtol, &p.atol) != 9)
		return 2;
	const long long n = p.n;
	std::vector<double> rho(n);
	for (long long i = 0; i < n; i++)
		if (std::scanf("%lf", &rho[i]) != 1)
			return 2;
	std::vector<double> y(3 * n), y2(3 * n), drho(n), ys(3 * n * (size_t)p.rows), hs(n * (size_t)p.rows);
	std::vector<int> acc(n), rej(n), st(n), acc2(n), rej2(n), st2(n);
	for (gs_host_tid = 0; gs_host_tid < n; gs_host_tid++)
		lorenz_tsit5_forward(p, rho.data(), y.data(), acc.data(), rej.data(), st.data());
	for (gs_host_tid = 0; gs_host_tid < n; gs_host_tid++)
		lorenz_tsit5_record_adjoint(p, rho.data(), y2.data(), drho.data(), ys.data(), hs.data(), acc2.data(),
		                            rej2.data(), st2.data());
	for (long long i = 0; i < n; i++) {
		std::printf("%lld  %d %d %d %.17g %.17g %.17g  %d %d %d %.17g %.17g %.17g %.17g ", i, st[i], acc[i], rej[i],
		            y[i], y[n + i], y[2 * n + i], st2[i], acc2[i], rej2[i], y2[i], y2[n + i], y2[2 * n + i], drho[i]);
		for (int s = 0; s < acc2[i] && s < p.rows; s++)
			std::printf(" %.17g", hs[s * n + i]);
		std::printf("\n");
	}
	return 0;
}
