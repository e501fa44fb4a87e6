// GPU driver of lorenz_tsit5.cu, built with nvcc by hand until package cuda
// can load the kernels from Go:
//
//   nvcc -O3 -std=c++17 -arch=native -I bench -o lorenz_gpu bench/testdata/lorenz_tsit5_gpu.cu
//
// (add --fmad=false for "check", so that the device rounds as the host
// harness does and the outputs agree to the last bits)
//
//   lorenz_gpu check < input   same input and output as lorenz_tsit5_host.cpp,
//                              so the two outputs can be compared line by line
//   lorenz_gpu time N RTOL     the protocol ensemble (ρ = linspace(0, 21, N),
//                              atol = RTOL·1e-3): best and median of 5 launches
//                              of each kernel, timed with CUDA events
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "lorenz_tsit5.cu"

#define CK(call)                                                                                  \
	do {                                                                                          \
		cudaError_t e_ = (call);                                                                  \
		if (e_ != cudaSuccess) {                                                                  \
			std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
			std::exit(1);                                                                         \
		}                                                                                         \
	} while (0)

struct dev_bufs {
	double *rho, *y, *drho, *ys, *hs;
	int *acc, *rej, *st;
};

static dev_bufs alloc(long long n, int rows)
{
	dev_bufs b;
	CK(cudaMalloc(&b.rho, n * sizeof(double)));
	CK(cudaMalloc(&b.y, 3 * n * sizeof(double)));
	CK(cudaMalloc(&b.drho, n * sizeof(double)));
	CK(cudaMalloc(&b.ys, std::max(1LL, 3 * n * (long long)rows) * sizeof(double)));
	CK(cudaMalloc(&b.hs, std::max(1LL, n * (long long)rows) * sizeof(double)));
	CK(cudaMalloc(&b.acc, n * sizeof(int)));
	CK(cudaMalloc(&b.rej, n * sizeof(int)));
	CK(cudaMalloc(&b.st, n * sizeof(int)));
	return b;
}

static void release(dev_bufs &b)
{
	void *ptrs[] = {b.rho, b.y, b.drho, b.ys, b.hs, b.acc, b.rej, b.st};
	for (void *q : ptrs)
		CK(cudaFree(q));
}

static const int threads = 128;

static void launch(bool adjoint, const gs_lorenz_params &p, const dev_bufs &b)
{
	unsigned blocks = (unsigned)((p.n + threads - 1) / threads);
	if (adjoint)
		lorenz_tsit5_record_adjoint<<<blocks, threads>>>(p, b.rho, b.y, b.drho, b.ys, b.hs, b.acc, b.rej, b.st);
	else
		lorenz_tsit5_forward<<<blocks, threads>>>(p, b.rho, b.y, b.acc, b.rej, b.st);
	CK(cudaGetLastError());
}

static int check()
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
	dev_bufs b = alloc(n, p.rows);
	CK(cudaMemcpy(b.rho, rho.data(), n * sizeof(double), cudaMemcpyHostToDevice));
	std::vector<double> y(3 * n), y2(3 * n), drho(n), hs(n * (size_t)p.rows);
	std::vector<int> acc(n), rej(n), st(n), acc2(n), rej2(n), st2(n);
	launch(false, p, b);
	CK(cudaMemcpy(y.data(), b.y, 3 * n * sizeof(double), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(acc.data(), b.acc, n * sizeof(int), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(rej.data(), b.rej, n * sizeof(int), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(st.data(), b.st, n * sizeof(int), cudaMemcpyDeviceToHost));
	launch(true, p, b);
	CK(cudaMemcpy(y2.data(), b.y, 3 * n * sizeof(double), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(drho.data(), b.drho, n * sizeof(double), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(hs.data(), b.hs, n * (size_t)p.rows * sizeof(double), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(acc2.data(), b.acc, n * sizeof(int), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(rej2.data(), b.rej, n * sizeof(int), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(st2.data(), b.st, n * sizeof(int), cudaMemcpyDeviceToHost));
	for (long long i = 0; i < n; i++) {
		std::printf("%lld  %d %d %d %.17g %.17g %.17g  %d %d %d %.17g %.17g %.17g %.17g ", i, st[i], acc[i], rej[i],
		            y[i], y[n + i], y[2 * n + i], st2[i], acc2[i], rej2[i], y2[i], y2[n + i], y2[2 * n + i], drho[i]);
		for (int s = 0; s < acc2[i] && s < p.rows; s++)
			std::printf(" %.17g", hs[s * n + i]);
		std::printf("\n");
	}
	release(b);
	return 0;
}

static void best_median(std::vector<float> t, float *best, float *med)
{
	std::sort(t.begin(), t.end());
	*best = t[0];
	*med = t[t.size() / 2];
}

static int time_protocol(long long n, double rtol)
{
	gs_lorenz_params p;
	p.sigma = 10;
	p.beta = 8.0 / 3;
	p.y0[0] = 1, p.y0[1] = 0, p.y0[2] = 0;
	p.t0 = 0, p.t1 = 1;
	p.rtol = rtol, p.atol = rtol * 1e-3;
	p.max_steps = 100000;
	p.n = n;
	std::vector<double> rho(n);
	for (long long i = 0; i < n; i++)
		rho[i] = n == 1 ? 0 : 21.0 * (double)i / (double)(n - 1);
	rho[n - 1] = 21;
	// A forward run sizes the record buffer: rows = the most accepted steps.
	p.rows = 0;
	dev_bufs b0 = alloc(n, 0);
	CK(cudaMemcpy(b0.rho, rho.data(), n * sizeof(double), cudaMemcpyHostToDevice));
	launch(false, p, b0);
	std::vector<int> acc(n), st(n);
	CK(cudaMemcpy(acc.data(), b0.acc, n * sizeof(int), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(st.data(), b0.st, n * sizeof(int), cudaMemcpyDeviceToHost));
	release(b0);
	int most = 0, failed = 0;
	double mean = 0;
	for (long long i = 0; i < n; i++) {
		most = std::max(most, acc[i]);
		mean += acc[i];
		failed += st[i] != GS_OK;
	}
	mean /= n;
	p.rows = most;
	dev_bufs b = alloc(n, p.rows);
	CK(cudaMemcpy(b.rho, rho.data(), n * sizeof(double), cudaMemcpyHostToDevice));
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	float best[2], med[2];
	for (int k = 0; k < 2; k++) {
		launch(k == 1, p, b); // warm-up
		CK(cudaDeviceSynchronize());
		std::vector<float> ts;
		for (int r = 0; r < 5; r++) {
			CK(cudaEventRecord(e0));
			launch(k == 1, p, b);
			CK(cudaEventRecord(e1));
			CK(cudaEventSynchronize(e1));
			float ms;
			CK(cudaEventElapsedTime(&ms, e0, e1));
			ts.push_back(ms);
		}
		best_median(ts, &best[k], &med[k]);
	}
	std::vector<int> st2(n);
	CK(cudaMemcpy(st2.data(), b.st, n * sizeof(int), cudaMemcpyDeviceToHost));
	int failed2 = 0;
	for (long long i = 0; i < n; i++)
		failed2 += st2[i] != GS_OK;
	std::printf("{\"kernel\": \"lorenz_tsit5\", \"n\": %lld, \"rtol\": %g, \"steps_mean\": %.2f, \"rows\": %d, "
	            "\"forward_ms\": %.4f, \"forward_ms_median\": %.4f, \"grad_record_ms\": %.4f, "
	            "\"grad_record_ms_median\": %.4f, \"failed\": %d, \"failed_adjoint\": %d}\n",
	            n, rtol, mean, p.rows, best[0], med[0], best[1], med[1], failed, failed2);
	release(b);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && std::strcmp(argv[1], "check") == 0)
		return check();
	if (argc >= 4 && std::strcmp(argv[1], "time") == 0)
		return time_protocol(std::atoll(argv[2]), std::atof(argv[3]));
	std::fprintf(stderr, "usage: lorenz_gpu check < input | lorenz_gpu time N RTOL\n");
	return 2;
}
