package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestTrainDumpRoundTrip runs a small CPU training suite with a dump and
// checks that the Go side, reading its own dump, reproduces every step-1
// loss exactly (the anchors must reproduce them to 1e-8), and that the
// rows are complete.
func TestTrainDumpRoundTrip(t *testing.T) {
	var out, dumpBuf bytes.Buffer
	cfg := TrainConfig{NeuralB: []int{8, 16}, FitN: []int{4, 8}, CallN: []int{8}, Reps: 2, JSON: true, Dump: &dumpBuf}
	rows, err := RunTrain(&out, cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantCases := []string{"neural-fit", "neural-fit", "lorenz-fit", "lorenz-fit", "pk-fit", "pk-fit", "grad-record", "grad-mesh", "grad-record-omit", "grad-mesh-omit"}
	if len(rows) != len(wantCases) {
		t.Fatalf("%d rows, want %d", len(rows), len(wantCases))
	}
	// The calls with the loss and the gradients only give the same loss.
	if rows[8].LossFirst != rows[6].LossFirst || rows[9].LossFirst != rows[7].LossFirst {
		t.Errorf("Grad calls with Omit: losses %v, %v; without %v, %v", rows[8].LossFirst, rows[9].LossFirst, rows[6].LossFirst, rows[7].LossFirst)
	}
	sc := bufio.NewScanner(&out)
	k := 0
	for sc.Scan() {
		var r TrainRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %d: %v", k, err)
		}
		if r.Case != wantCases[k] || r.Suite != "train" || r.Engine != "cpu" || r.Reps != 2 {
			t.Errorf("line %d: case %q suite %q engine %q reps %d", k, r.Case, r.Suite, r.Engine, r.Reps)
		}
		if !(r.Ms > 0 && r.MinMs > 0 && r.MinMs <= r.Ms && r.FirstMs > 0 && r.StepsPerTraj > 0 && r.LossFirst > 0) {
			t.Errorf("%s n=%d: incomplete row %+v", r.Case, r.N, r)
		}
		if strings.HasSuffix(r.Case, "-fit") {
			if r.Steps != 3 || !(r.NewMs > 0 && r.GradCallMs > 0 && r.LossLast > 0 && r.LossFinal > 0) {
				t.Errorf("%s n=%d: incomplete fit row %+v", r.Case, r.N, r)
			}
			if d := math.Abs(r.LossFirstTight-r.LossFirst) / r.LossFirst; !(d < 1e-5) {
				t.Errorf("%s n=%d: loss %v at rtol 1e-6, %v at 1e-12 (%.1e apart)", r.Case, r.N, r.LossFirst, r.LossFirstTight, d)
			}
			if !(r.LossFinal < r.LossFirst) {
				t.Errorf("%s n=%d: loss %g after %d steps, %g at the start", r.Case, r.N, r.LossFinal, r.Steps, r.LossFirst)
			}
		}
		k++
	}
	if k != len(wantCases) {
		t.Fatalf("%d JSON lines, want %d", k, len(wantCases))
	}
	if rows[6].LossFirst != rows[7].LossFirst {
		t.Errorf("Grad calls: loss %v with the record, %v on its mesh", rows[6].LossFirst, rows[7].LossFirst)
	}

	d, err := ReadTrainDump(&dumpBuf)
	if err != nil {
		t.Fatal(err)
	}
	if d.Steps != 3 || d.Engine != "cpu" || d.Neural == nil || d.LorenzFit == nil {
		t.Fatalf("dump: steps %d engine %q neural %v lorenz %v", d.Steps, d.Engine, d.Neural != nil, d.LorenzFit != nil)
	}
	if len(d.Neural.Y0) != 2*16 || len(d.Neural.Weights) != NeuralMLP().NumParams() || len(d.LorenzFit.Cases) != 2 {
		t.Fatalf("dump: %d neural states, %d weights, %d Lorenz cases", len(d.Neural.Y0)/2, len(d.Neural.Weights), len(d.LorenzFit.Cases))
	}
	neural, lorenz, err := trainDumpLosses(d, ode.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range d.Neural.Results {
		if neural[i] != r.LossFirst || r.LossFirst != rows[i].LossFirst {
			t.Errorf("neural B=%d: loss from the dump %v, dumped %v, row %v", r.N, neural[i], r.LossFirst, rows[i].LossFirst)
		}
	}
	for i, c := range d.LorenzFit.Cases {
		if lorenz[i] != c.LossFirst || c.LossFirst != rows[2+i].LossFirst {
			t.Errorf("Lorenz n=%d: loss from the dump %v, dumped %v, row %v", c.N, lorenz[i], c.LossFirst, rows[2+i].LossFirst)
		}
	}
	// The PK calibration's targets are the closed-form crossing times:
	// its step-1 loss at rtol 1e-12 is the closed form's, Σ (t*(k0) − t*)².
	if d.PKFit == nil || len(d.PKFit.Cases) != 2 {
		t.Fatalf("dump: PK calibration %v", d.PKFit)
	}
	for i, c := range d.PKFit.Cases {
		want := 0.0
		for j := range c.N {
			c0 := d.PKFit.C0Lo + float64(j)*(d.PKFit.C0Hi-d.PKFit.C0Lo)/float64(c.N-1)
			kstar := d.PKFit.KStarLo + float64(j)*(d.PKFit.KStarHi-d.PKFit.KStarLo)/float64(c.N-1)
			ts := math.Log(c0/d.PKFit.Threshold) / kstar
			if math.Abs(c.Targets[j]-ts) > 1e-14*ts {
				t.Errorf("PK n=%d: target %d = %v, closed form %v", c.N, j, c.Targets[j], ts)
			}
			dt := math.Log(c0/d.PKFit.Threshold)/d.PKFit.K0 - ts
			want += dt * dt
		}
		if r := rows[4+i]; math.Abs(r.LossFirstTight-want) > 1e-9*want || c.LossFirst != r.LossFirst {
			t.Errorf("PK n=%d: step-1 loss at rtol 1e-12 %v, closed form %v; dumped %v, row %v", c.N, r.LossFirstTight, want, c.LossFirst, r.LossFirst)
		}
	}
}

// TestTrainLorenzTargets checks the calibration's targets: at ρ = ρ* the
// loss is zero, and its gradient too.
func TestTrainLorenzTargets(t *testing.T) {
	n := 5
	set := &ode.Settings{Method: ode.Tsit5, RelTol: TrainLorenzRelTol, AbsTol: TrainLorenzRelTol * lorenzAbsTolOverRelTol}
	targets, err := trainLorenzTargets(n, set)
	if err != nil {
		t.Fatal(err)
	}
	prob := trainLorenzProblem(n, targets)
	for i := range n {
		if prob.ODE.P[3*i+1] != TrainLorenzRho0 {
			t.Fatalf("fit %d starts at ρ = %v", i, prob.ODE.P[3*i+1])
		}
		prob.ODE.P[3*i+1] = TrainLorenzRhoStarLo + float64(i)*(TrainLorenzRhoStarHi-TrainLorenzRhoStarLo)/float64(n-1)
	}
	g, err := ode.Grad(nil, prob.ODE, prob.Loss, nil, set)
	if err != nil {
		t.Fatal(err)
	}
	if g.Loss > 1e-24 {
		t.Errorf("loss %g at ρ*, want 0", g.Loss)
	}
	for i := range n {
		if math.Abs(g.P[3*i+1]) > 1e-10 {
			t.Errorf("dL/dρ_%d = %g at ρ*, want 0", i, g.P[3*i+1])
		}
	}
}

// TestTrainGPUWithoutGPU checks that the GPU suite fails cleanly, before
// any work, where there is no GPU (and runs it small where there is one).
func TestTrainGPUWithoutGPU(t *testing.T) {
	var out bytes.Buffer
	rows, err := RunTrain(&out, TrainConfig{GPU: true, NeuralB: []int{8}, FitN: []int{4}, CallN: []int{8}, Reps: 1, JSON: true})
	if err == nil {
		if len(rows) != 7 || rows[0].Suite != "gpu-train" || rows[0].Engine != "cuda" {
			t.Fatalf("with a GPU: rows %+v", rows)
		}
		t.Skip("a GPU is here: the suite ran")
	}
	if !strings.Contains(err.Error(), "no GPU") || out.Len() != 0 || rows != nil {
		t.Fatalf("error %q, output %q, %d rows; want a \"no GPU\" error and nothing written", err, out.String(), len(rows))
	}
	if _, err := RunTrain(&out, TrainConfig{GPU: true, Engine: "cpu"}); err == nil || !strings.Contains(err.Error(), "not a GPU engine") {
		t.Errorf("engine cpu on the GPU suite: %v", err)
	}
	if _, err := RunTrain(&out, TrainConfig{Cases: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), "unknown case") {
		t.Errorf("unknown case: %v", err)
	}
}
