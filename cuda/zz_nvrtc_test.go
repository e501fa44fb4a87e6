package cuda

import (
	"strings"
	"testing"
	"time"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

func TestZZEngineNVRTC(t *testing.T) {
	needNVRTC(t)
	t.Setenv(cacheEnv, "off")
	nr := problems.NeuralRobertson(1)
	y0, p := nr.Ensemble(4)
	cs := []engineCase{mlpCase(4, []int{2, 32, 32, 2}), {name: "nr", prob: ode.Problem{Field: nr.Field, N: 4, Y0: y0, P: p, Shared: nr.Shared, T1: 100}, set: ode.Settings{Method: ode.Rodas5P}, loss: ode.SumSquares()}}
	for _, c := range cs {
	sv := c.solver(t, "cpu")
	sp, _ := newStepPrograms(sv.Plan())
	lp := jobOf(t, c, ode.OpGrad).Loss
	for _, v := range []variant{{adaptive: true}, {adaptive: true, meshOut: true, store: true, grad: true, k: len(c.prob.SaveAt), dataDim: lp.DataDim}} {
		src, _ := kernelSource(sp, v, lp, Float64)
		t.Logf("acc %v %v", strings.Contains(src, "#define GS_REV_ACC 1"), strings.Contains(src, "#define GS_LOSS_ACC 1"))
		start := time.Now()
		img, err := Compile(src, Arch{8, 0}, &CompileSettings{Options: []string{"--ptxas-options=-v"}})
		t.Logf("%s %v %v (%d bytes source)", c.name, time.Since(start), err, len(src))
		if err == nil { t.Log(img.Log) }
	}
	}
}
