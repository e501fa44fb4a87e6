package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestProtocolNeural checks the protocol's batch: 1,218 weights, y0 in
// [−1, 1]², targets y0 rotated by 90°, smaller batches prefixes of larger
// ones, and the same batch from the same seed.
func TestProtocolNeural(t *testing.T) {
	e := ProtocolNeural(100, NeuralSeed)
	if len(e.Weights) != 1218 || e.B() != 100 || len(e.Targets) != 200 {
		t.Fatalf("%d weights, B = %d, %d targets; want 1218, 100, 200", len(e.Weights), e.B(), len(e.Targets))
	}
	for i := range e.B() {
		x, y := e.Y0[2*i], e.Y0[2*i+1]
		if math.Abs(x) > 1 || math.Abs(y) > 1 {
			t.Errorf("y0[%d] = (%v, %v) outside [-1, 1]²", i, x, y)
		}
		if e.Targets[2*i] != -y || e.Targets[2*i+1] != x {
			t.Errorf("target %d = %v, want (%v, %v)", i, e.Targets[2*i:2*i+2], -y, x)
		}
	}
	small := ProtocolNeural(7, NeuralSeed)
	for i, v := range small.Y0 {
		if v != e.Y0[i] {
			t.Fatalf("y0 of B = 7 is not a prefix of B = 100's at %d", i)
		}
	}
	for i, v := range small.Weights {
		if v != e.Weights[i] {
			t.Fatalf("weights depend on B at %d", i)
		}
	}
}

// neuralLoss returns the protocol's loss of final states y ([B×2]).
func neuralLoss(e *NeuralEnsemble, y []float64) float64 {
	var s float64
	for i := range e.B() {
		s += sq(y[2*i]-e.Targets[2*i]) + sq(y[2*i+1]-e.Targets[2*i+1])
	}
	return s / float64(e.B())
}

// TestNeuralGradient checks the suite's gradient with respect to the
// shared weights against central differences of ode.Replay on the same
// mesh, and the loss against one computed from the replayed states.
func TestNeuralGradient(t *testing.T) {
	e := ProtocolNeural(6, NeuralSeed)
	p := e.Problem()
	set := &ode.Settings{Method: ode.Tsit5, RelTol: NeuralRelTol, AbsTol: NeuralAbsTol}
	g, err := ode.Grad(nil, p, e.Loss(), nil, set)
	if err != nil {
		t.Fatal(err)
	}
	sol, err := ode.Replay(p, g.Mesh, set)
	if err != nil {
		t.Fatal(err)
	}
	if want := neuralLoss(e, sol.Y); math.Abs(g.Loss-want) > 1e-14*math.Abs(want) {
		t.Errorf("loss %v, want %v", g.Loss, want)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	idx := []int{0, 1, 64, 65, 95, 100, 1151, 1216, 1217}
	for range 6 {
		idx = append(idx, rng.IntN(len(e.Weights)))
	}
	const eps = 1e-6
	for _, k := range idx {
		w0 := e.Weights[k]
		lossAt := func(w float64) float64 {
			ws := append([]float64(nil), e.Weights...)
			ws[k] = w
			q := p
			q.Shared = ws
			s, err := ode.Replay(q, g.Mesh, set)
			if err != nil {
				t.Fatal(err)
			}
			return neuralLoss(e, s.Y)
		}
		fd := (lossAt(w0+eps) - lossAt(w0-eps)) / (2 * eps)
		if got := g.Shared[k]; math.Abs(got-fd) > 1e-7*math.Max(1, math.Abs(fd)) {
			t.Errorf("dL/dw[%d] = %.12g, central difference %.12g", k, got, fd)
		}
	}
}

// TestRunNeural runs the suite on tiny batches and checks the rows, the
// achieved error (which also checks the plain-Go network of the reference
// against package nn's) and the dump.
func TestRunNeural(t *testing.T) {
	var buf, dumpBuf bytes.Buffer
	cfg := NeuralConfig{B: []int{3, 10}, Reps: 1, RefSample: 4, Workers: 2, Dump: &dumpBuf}
	rows, err := RunNeural(&buf, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("got %d rows, want 2", len(rows))
	}
	for _, r := range rows {
		pos := map[string]float64{
			"Steps": r.Steps, "Forward": r.Forward, "GradRecord": r.GradRecord, "Forward1": r.Forward1,
			"GradRecord1": r.GradRecord1, "GradRecordRatio": r.GradRecordRatio, "Speedup": r.Speedup,
			"Loss": r.Loss, "GradNorm": r.GradNorm,
		}
		for name, v := range pos {
			if !(v > 0) || math.IsInf(v, 0) {
				t.Errorf("B=%d: %s = %v, want positive and finite", r.B, name, v)
			}
		}
		if !(r.Err < 100*NeuralRelTol) || r.RefSample != min(r.B, 4) || r.Workers != 2 {
			t.Errorf("B=%d: Err %v, RefSample %d, Workers %d", r.B, r.Err, r.RefSample, r.Workers)
		}
	}
	if got := strings.Count(buf.String(), "\n"); got != 2+len(rows) {
		t.Errorf("table has %d lines, want %d:\n%s", got, 2+len(rows), buf.String())
	}

	var d NeuralDump
	if err := json.Unmarshal(dumpBuf.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	e := ProtocolNeural(10, NeuralSeed)
	if len(d.Weights) != 1218 || len(d.Y0) != 20 || len(d.Targets) != 20 || len(d.Results) != 2 {
		t.Fatalf("dump: %d weights, %d y0, %d targets, %d results", len(d.Weights), len(d.Y0), len(d.Targets), len(d.Results))
	}
	for i, v := range e.Weights {
		if d.Weights[i] != v {
			t.Fatalf("dump weight %d = %v, want %v (bitwise)", i, d.Weights[i], v)
		}
	}
	for i, v := range e.Y0 {
		if d.Y0[i] != v || d.Targets[i] != e.Targets[i] {
			t.Fatalf("dump y0/target %d differ", i)
		}
	}
	for k, res := range d.Results {
		if res.B != rows[k].B || res.Loss != rows[k].Loss || len(res.Grad) != 1218 {
			t.Errorf("dump result %d: B %d, loss %v, %d gradient entries", k, res.B, res.Loss, len(res.Grad))
		}
	}
	if d.Sizes[1] != 32 || d.Hidden != "tanh" || d.Output != "identity" || d.RelTol != 1e-6 || d.AbsTol != 1e-8 {
		t.Errorf("dump header %+v", d)
	}
}
