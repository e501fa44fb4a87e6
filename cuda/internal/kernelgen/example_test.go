package kernelgen_test

import (
	"errors"
	"fmt"
	"github.com/gradsolve-go/gradsolve/cuda/driver"
	"strings"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/tape"
)

// A program becomes a device function whose values are locals, and a
// kernel that maps it over an ensemble.
func ExampleSource() {
	p, err := tape.Trace("decay", []tape.Input{{Name: "y"}, {Name: "k", Shared: true}},
		func(in []tape.V) []tape.V { return []tape.V{in[1].Neg().Mul(in[0])} })
	if err != nil {
		panic(err)
	}
	src := kernelgen.NewSource(nil)
	kernel, err := src.MapKernel(p)
	if err != nil {
		panic(err)
	}
	code := src.String()
	start := strings.Index(code, "// program decay")
	fmt.Print(code[start : start+strings.Index(code[start:], "}\n")+2])
	fmt.Println(kernel)
	// Output:
	// // program decay: 2 inputs (1 shared), 4 values, 1 outputs
	// struct gs_decay_0_out { gs_real v[1]; };
	// GS_FUNC gs_decay_0_out gs_decay_0(const gs_real* GS_RESTRICT gs_sh, gs_real a0) {
	//   const gs_real v0 = a0;  // v0 = Input [0] y
	//   const gs_real v2 = (-gs_sh[0]);  // v2 = Neg v1
	//   const gs_real v3 = (v2 * v0);  // v3 = Mul v2 v0
	//   gs_decay_0_out gs_r;
	//   gs_r.v[0] = v3;
	//   return gs_r;
	// }
	// gs_map_decay_0
}

// Evaluating a program over an ensemble on the GPU: open the device,
// compile the generated source for it, copy the inputs (step-major) and
// launch one thread per trajectory. On a machine without a GPU, Open's
// error wraps ErrNoGPU.
func Example_device() {
	d, err := driver.Open(0)
	if errors.Is(err, driver.ErrNoGPU) {
		fmt.Println("no GPU; use the CPU engine:", err)
		return
	}
	if err != nil {
		panic(err)
	}
	defer d.Close()

	p, _ := tape.Trace("decay", []tape.Input{{Name: "y"}, {Name: "k", Shared: true}},
		func(in []tape.V) []tape.V { return []tape.V{in[1].Neg().Mul(in[0])} })
	src := kernelgen.NewSource(nil)
	name, _ := src.MapKernel(p)
	mod, _, err := d.Build(src.String(), nil) // NVRTC, cached on disk
	if err != nil {
		panic(err)
	}
	defer mod.Unload()
	kernel, _ := mod.Kernel(name)

	const n = 1 << 20
	y := make([]float64, n)
	for i := range y {
		y[i] = float64(i)
	}
	in, _ := driver.Alloc[float64](d, n)
	k, _ := driver.Alloc[float64](d, 1)
	out, _ := driver.Alloc[float64](d, n)
	defer in.Free()
	defer k.Free()
	defer out.Free()
	in.Write(y)
	k.Write([]float64{0.5})
	if err := kernel.Launch(driver.Linear(n, 256), int64(n), in, k, out); err != nil {
		panic(err)
	}
	out.Read(y) // waits for the kernel
	fmt.Println(y[2])
}

// In lanes mode a warp runs each trajectory: the rows of a dense layer
// form one vector, computed row e by lane e, and its elements reach the
// code that needs all of them by shuffles (GS_BCAST).
func ExampleSourceSettings_lanes() {
	p, err := tape.Trace("layer", []tape.Input{{Name: "x0"}, {Name: "x1"},
		{Name: "w0", Shared: true}, {Name: "w1", Shared: true}, {Name: "w2", Shared: true}, {Name: "w3", Shared: true},
		{Name: "w4", Shared: true}, {Name: "w5", Shared: true}, {Name: "b0", Shared: true}, {Name: "b1", Shared: true}, {Name: "b2", Shared: true}},
		func(in []tape.V) []tape.V {
			h := tape.Dense(in[2:8], in[0:2], in[8:11]) // 3 rows of 2
			return []tape.V{tape.Sum([]tape.V{h[0].Tanh(), h[1].Tanh(), h[2].Tanh()})}
		})
	if err != nil {
		panic(err)
	}
	src := kernelgen.NewSource(&kernelgen.SourceSettings{Lanes: true})
	if _, err := src.Func(p); err != nil {
		panic(err)
	}
	for _, line := range strings.Split(src.String(), "\n") {
		if strings.HasPrefix(line, "  GS_VEC(u") || strings.Contains(line, "= GS_BCAST(") {
			fmt.Println(strings.TrimSpace(line))
		}
	}
	// The shared inputs as lanes-mode code reads them: padded, entry j at j + j/32.
	fmt.Println(len(kernelgen.SharedPad(make([]float64, 40))))
	// Output:
	// GS_VEC(u0); GS_LANES(3) GS_EL(u0) = fma(gs_sh[1 + 2 * gs_l], v1, fma(gs_sh[0 + 2 * gs_l], v0, gs_sh[6 + 1 * gs_l])); GS_END  // 3 lanes, e.g. v11 = Dot v2 v3 v0 v1 v8
	// GS_VEC(u1); GS_LANES(3) GS_EL(u1) = tanh(GS_EL(u0)); GS_END  // 3 lanes, e.g. v14 = Tanh v11
	// const gs_real v14 = GS_BCAST(u1, 0);
	// const gs_real v15 = GS_BCAST(u1, 1);
	// const gs_real v16 = GS_BCAST(u1, 2);
	// 41
}
