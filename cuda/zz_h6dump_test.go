package cuda

import (
	"os"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

func TestZZH6Dump(t *testing.T) {
	for _, d := range []int{64, 256} {
		c := wideBenchGradCase(4096, d)
		j := jobOf(t, c, ode.OpGrad)
		sp, err := kernelgen.NewStepPrograms(j.Plan)
		if err != nil {
			t.Fatal(err)
		}
		v := chooseLayout(kernelgen.ConfigOf(j), j.Plan, sp, layoutJob{n: c.prob.N}, Float64, false, device{sms: 132, sharedLimit: 227 << 10}, Tuning{})
		src, info, err := kernelgen.KernelSource(sp, v, j.Loss, Float64)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("d=%d key=%s info=%+v", d, v.Key(), info)
		os.WriteFile("/tmp/h6_l96_"+map[int]string{64: "64", 256: "256"}[d]+".cu", []byte(src), 0o644)
	}
}
