package scan

import (
	"math"
	"math/rand/v2"
	"testing"
)

// storedStates steps every trajectory of p with the step program, one at
// a time through Replay on one-trajectory meshes, and returns the states
// before each step, as a recorder would have kept them.
func storedStates(t *testing.T, p *Problem) *Stored {
	t.Helper()
	n, d := p.Mesh.N, p.Step.D
	st := &Stored{States: make([]float64, p.Mesh.Rows*(1+d)*n), EndT: make([]float64, n), EndY: make([]float64, d*n)}
	for j := 0; j < n; j++ {
		tt := p.T0[j]
		y := make([]float64, d)
		for c := range y {
			y[c] = p.Y0[c*n+j]
		}
		for s := 0; s < p.Mesh.Len[j]; s++ {
			row := st.States[s*(1+d)*n:]
			row[j] = tt
			for c := range y {
				row[(1+c)*n+j] = y[c]
			}
			h := p.Mesh.H[s*n+j]
			one := &Problem{Step: p.Step, Mesh: Mesh{N: 1, Rows: 1, H: []float64{h}, Len: []int{1}},
				T0: []float64{tt}, Y0: append([]float64(nil), y...), P: []float64{p.P[j]}, Shared: p.Shared}
			r, err := Replay(nil, one, nil)
			if err != nil {
				t.Fatal(err)
			}
			copy(y, r.Y)
			tt += h
		}
		st.EndT[j] = tt
		for c := range y {
			st.EndY[c*n+j] = y[c]
		}
	}
	return st
}

func sameBits(t *testing.T, what string, want, got []float64) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: length %d, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float64bits(want[i]) != math.Float64bits(got[i]) {
			t.Fatalf("%s[%d] = %v, want %v bit for bit", what, i, got[i], want[i])
		}
	}
}

// TestStoredAndMemoryModes checks that the backward sweep gives the same
// gradient bit for bit whether every state is stored, the states come
// from a recorder (Problem.Stored), or they are recomputed from
// checkpoints with a segment buffer or step by step under a memory limit,
// and that the stored bytes respect the limit.
func TestStoredAndMemoryModes(t *testing.T) {
	t.Parallel()
	for _, taps := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(5, 5))
		n := 11
		p := raggedProblem(midpointStep(t), n, rng, taps)
		nt := p.Taps.Len()
		ybar, tapbar := make([]float64, 2*n), make([]float64, 2*nt)
		for i := range ybar {
			ybar[i] = rng.NormFloat64()
		}
		for i := range tapbar {
			tapbar[i] = rng.NormFloat64()
		}
		run := func(p *Problem, s *Settings) (*Sweep, *Gradient) {
			sw, err := Forward(p, s)
			if err != nil {
				t.Fatal(err)
			}
			g, err := sw.Backward(nil, ybar, tapbar)
			if err != nil {
				t.Fatal(err)
			}
			return sw, g
		}
		swAll, want := run(p, &Settings{Checkpoint: 1})
		all := swAll.StoredBytes()
		q := *p
		q.Stored = storedStates(t, p)
		swSt, got := run(&q, nil)
		sameBits(t, "stored: final states", swAll.Result().Y, swSt.Result().Y)
		sameBits(t, "stored: taps", swAll.Result().Taps, swSt.Result().Taps)
		for _, c := range []struct {
			name string
			g    *Gradient
		}{{"stored", got}} {
			sameBits(t, c.name+": Y0", want.Y0, c.g.Y0)
			sameBits(t, c.name+": P", want.P, c.g.P)
			sameBits(t, c.name+": Shared", want.Shared, c.g.Shared)
		}
		for _, limit := range []int64{all / 2, all / 4, 200, 1} {
			sw, g := run(p, &Settings{MemoryLimit: limit})
			// Below one state of every trajectory the initial states are the
			// only checkpoint (the working set).
			if b := sw.StoredBytes(); b > max(limit, int64(n*3*8)) {
				t.Errorf("taps %v, limit %d: stored %d bytes (interval %d, segment %v)", taps, limit, b, sw.k, sw.seg)
			}
			sameBits(t, "limited: Y0", want.Y0, g.Y0)
			sameBits(t, "limited: P", want.P, g.P)
			sameBits(t, "limited: Shared", want.Shared, g.Shared)
		}
	}
}

// TestSharedTiles checks that the shared gradient is the ordered sum of
// its tiles and that each tile holds the sum over its own trajectories:
// the gradient of a problem restricted to one tile's trajectories equals
// that tile's entry.
func TestSharedTiles(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 9))
	n := 19
	p := raggedProblem(midpointStep(t), n, rng, false)
	ybar := make([]float64, 2*n)
	for i := range ybar {
		ybar[i] = rng.NormFloat64()
	}
	sw, err := Forward(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := sw.Backward(nil, ybar, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := SumTiles(nil, g.SharedTiles, 1); want[0] != g.Shared[0] {
		t.Errorf("Shared = %v, want the ordered sum of the tiles %v", g.Shared[0], want[0])
	}
	for k := 0; k*TileSize < n; k++ {
		lo, hi := k*TileSize, min(n, k*TileSize+TileSize)
		q := *p
		q.Mesh = Mesh{N: hi - lo, Rows: p.Mesh.Rows, Len: p.Mesh.Len[lo:hi], H: make([]float64, p.Mesh.Rows*(hi-lo))}
		for s := 0; s < p.Mesh.Rows; s++ {
			copy(q.Mesh.H[s*(hi-lo):], p.Mesh.H[s*n+lo:s*n+hi])
		}
		q.T0, q.P = p.T0[lo:hi], p.P[lo:hi]
		q.Y0 = append(append([]float64(nil), p.Y0[lo:hi]...), p.Y0[n+lo:n+hi]...)
		sq, err := Forward(&q, nil)
		if err != nil {
			t.Fatal(err)
		}
		gq, err := sq.Backward(nil, append(append([]float64(nil), ybar[lo:hi]...), ybar[n+lo:n+hi]...), nil)
		if err != nil {
			t.Fatal(err)
		}
		if math.Float64bits(gq.Shared[0]) != math.Float64bits(g.SharedTiles[k]) {
			t.Errorf("tile %d: %v alone, %v in the ensemble; want them equal bit for bit", k, gq.Shared[0], g.SharedTiles[k])
		}
	}
}

// TestForwardToReuses checks that ForwardTo reuses the final states'
// storage of the Sweep it is given (so that a loss program reading them
// chunk after chunk sees one address) and that the sweep's final states
// and gradient are Forward's bit for bit, with stored states and with
// checkpoints, chunks of different sizes in turn.
func TestForwardToReuses(t *testing.T) {
	for _, stored := range []bool{true, false} {
		var last *Sweep
		for c, n := range []int{13, 9, 13} {
			rng := rand.New(rand.NewPCG(47, uint64(c)))
			p := raggedProblem(midpointStep(t), n, rng, false)
			if stored {
				p.Stored = storedStates(t, p)
			}
			ybar := make([]float64, 2*n)
			for i := range ybar {
				ybar[i] = rng.NormFloat64()
			}
			fresh, err := Forward(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			var y0 *float64
			if last != nil {
				y0 = &last.Result().Y[:1][0]
			}
			sw, err := ForwardTo(last, p, nil)
			if err != nil {
				t.Fatal(err)
			}
			if y0 != nil && &sw.Result().Y[0] != y0 {
				t.Fatalf("stored %v, chunk %d: the final states were not written where the last sweep's were", stored, c)
			}
			sameBits(t, "final states", fresh.Result().Y, sw.Result().Y)
			g0, err := fresh.Backward(nil, ybar, nil)
			if err != nil {
				t.Fatal(err)
			}
			g1, err := sw.Backward(nil, ybar, nil)
			if err != nil {
				t.Fatal(err)
			}
			sameBits(t, "∂/∂y0", g0.Y0, g1.Y0)
			sameBits(t, "∂/∂p", g0.P, g1.P)
			last = sw
		}
	}
}
