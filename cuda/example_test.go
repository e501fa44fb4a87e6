package cuda_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gradsolve-go/gradsolve/cuda"
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
	src := cuda.NewSource(nil)
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
func ExampleDevice() {
	d, err := cuda.Open(0)
	if errors.Is(err, cuda.ErrNoGPU) {
		fmt.Println("no GPU; use the CPU engine:", err)
		return
	}
	if err != nil {
		panic(err)
	}
	defer d.Close()

	p, _ := tape.Trace("decay", []tape.Input{{Name: "y"}, {Name: "k", Shared: true}},
		func(in []tape.V) []tape.V { return []tape.V{in[1].Neg().Mul(in[0])} })
	src := cuda.NewSource(nil)
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
	in, _ := cuda.Alloc[float64](d, n)
	k, _ := cuda.Alloc[float64](d, 1)
	out, _ := cuda.Alloc[float64](d, n)
	defer in.Free()
	defer k.Free()
	defer out.Free()
	in.Write(y)
	k.Write([]float64{0.5})
	if err := kernel.Launch(cuda.Linear(n, 256), int64(n), in, k, out); err != nil {
		panic(err)
	}
	out.Read(y) // waits for the kernel
	fmt.Println(y[2])
}
