package ode

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// randMesh returns a step-major mesh of n trajectories of random lengths
// in [lo, hi] steps, random steps, zeros past each length.
func randMesh(rng *rand.Rand, n, lo, hi int) *Mesh {
	m := &Mesh{N: n, Len: make([]int, n), Status: make([]Status, n)}
	for i := range m.Len {
		m.Len[i] = lo + rng.IntN(hi-lo+1)
		m.Rows = max(m.Rows, m.Len[i])
	}
	m.H = make([]float64, m.Rows*n)
	for i, l := range m.Len {
		for s := 0; s < l; s++ {
			m.H[s*n+i] = rng.Float64() * 1e-3
		}
	}
	return m
}

// TestStepCopy checks stepCopy and switchTimes, which walk meshes row by
// row in tiles of columns on all cores, against a column-by-column walk
// of each trajectory's steps: the same values bit for bit (the switch
// times summed in each trajectory's step order).
func TestStepCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 4))
	for _, c := range []struct {
		name       string
		sn, k      int
		maps, offs bool
		gather     bool // source columns only (Mesh.subset)
		full       bool // every column's whole rows
	}{
		{"identity", 700, 700, false, false, false, false},
		{"identity, whole rows", 700, 700, false, false, false, true},
		{"columns", 1000, 333, true, false, false, false},
		{"gather", 1500, 999, false, false, true, false},
		{"gather, whole rows", 1500, 999, false, false, true, true},
		{"offsets", 600, 600, false, true, false, false},
		{"columns and offsets", 2049, 1030, true, true, false, false},
		{"one", 5, 1, true, true, false, false},
	} {
		src := randMesh(rng, c.sn, 0, 40)
		var scol, dcol, from, at []int
		dn := c.k
		if c.maps {
			scol = rng.Perm(c.sn)[:c.k]
			dn = c.k + 17
			dcol = rng.Perm(dn)[:c.k]
		}
		if c.gather {
			scol = rng.Perm(c.sn)[:c.k]
			slices.Sort(scol)
		}
		lens := make([]int, c.k)
		for x := range lens {
			sc := x
			if scol != nil {
				sc = scol[x]
			}
			lens[x] = rng.IntN(src.Len[sc] + 1)
			if c.full {
				lens[x] = src.Rows
			}
		}
		if c.offs {
			from, at = make([]int, c.k), make([]int, c.k)
			for x := range from {
				sc := x
				if scol != nil {
					sc = scol[x]
				}
				from[x] = src.Len[sc] - lens[x]
				at[x] = rng.IntN(9)
			}
		}
		rows := 0
		for x, l := range lens {
			a := 0
			if at != nil {
				a = at[x]
			}
			rows = max(rows, a+l)
		}
		got, want := make([]float64, rows*dn), make([]float64, rows*dn)
		(&stepCopy{dst: got, dn: dn, dcol: dcol, at: at, src: src.H, sn: c.sn, scol: scol, from: from, lens: lens}).run()
		of := func(m []int, x int) int {
			if m == nil {
				return x
			}
			return m[x]
		}
		for x, l := range lens {
			for r := 0; r < l; r++ {
				a, f := 0, 0
				if at != nil {
					a, f = at[x], from[x]
				}
				want[(a+r)*dn+of(dcol, x)] = src.H[(f+r)*c.sn+of(scol, x)]
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: stepCopy differs from the column-by-column copy", c.name)
		}

		sw := make([]int, c.sn)
		for i := range sw {
			sw[i] = rng.IntN(src.Len[i] + 3) // (past Len: the whole trajectory)
		}
		ts := switchTimes(nil, src, 0.25, sw)
		for i := range ts {
			v := 0.25
			for s := 0; s < min(sw[i], src.Len[i]); s++ {
				v += src.H[s*c.sn+i]
			}
			if ts[i] != v {
				t.Errorf("%s: switchTimes[%d] = %v, the sum of its steps in order %v", c.name, i, ts[i], v)
				break
			}
		}
	}
}

// BenchmarkAutoSegs times the host work of Method Auto's continuation
// on meshes of 16384 trajectories (a stiff van der Pol ensemble on a GPU
// engine: about 300 Tsit5 steps, then about 550 Rodas5P ones), every
// trajectory stopped (all) or one in eight (mixed): the Tsit5 segments
// taken from the first pass's mesh with their switch times (stopSegs),
// the first pass's rows that finished, to be replayed (subset, mixed),
// the segments of a switched mesh (meshSegs), the parts' meshes merged
// (mergeAuto):
//
//	go test ./ode -run '^$' -bench 'AutoSegs' -count 5
func BenchmarkAutoSegs(b *testing.B) {
	const n = 1 << 14
	rng := rand.New(rand.NewPCG(1, 2))
	q := &problem{Problem: &Problem{Field: Field{Dim: 2, Params: 1}, T1: 2}, n: n, t1: make([]float64, n)}
	first := randMesh(rng, n, 250, 330)
	whole := randMesh(rng, n, 700, 880)
	whole.Switch = make([]int, n)
	for i := range whole.Switch {
		whole.Switch[i] = 250 + rng.IntN(80)
	}
	res := &Result{Mesh: first, Status: make([]Status, n), Stats: Stats{Accepted: first.Len}}
	for _, c := range []struct {
		name  string
		every int
	}{{"all", 1}, {"mixed", 8}} {
		var stops []autoStop
		var idx, rest []int
		for i := range n {
			if i%c.every == 0 {
				stops = append(stops, autoStop{i: i, j: i, res: res})
				idx = append(idx, i)
			} else {
				rest = append(rest, i)
			}
		}
		b.Run(c.name+"/stopSegs", func(b *testing.B) {
			for range b.N {
				if _, err := stopSegs(q, slices.Clone(stops), false, true, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/meshSegs", func(b *testing.B) {
			for range b.N {
				if _, err := meshSegs(q, whole, idx); err != nil {
					b.Fatal(err)
				}
			}
		})
		if len(rest) > 0 {
			b.Run(c.name+"/subset", func(b *testing.B) {
				// The first pass's rows that finished, to be replayed
				// (replayPart).
				for range b.N {
					if _, err := first.subset(rest, false, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(c.name+"/mergeAuto", func(b *testing.B) {
			parts := []autoPart{{idx: idx, res: &Result{Mesh: meshRowsOf(whole, idx)}, stiff: true}}
			if len(rest) > 0 {
				parts = append([]autoPart{{idx: rest, res: &Result{Mesh: meshRowsOf(whole, rest)}}}, parts...)
			}
			for range b.N {
				mergeAuto(q, OpRecord, parts, false, true)
			}
		})
	}
}

// meshRowsOf returns the sub-mesh of trajectories idx of m.
func meshRowsOf(m *Mesh, idx []int) *Mesh {
	s, err := m.subset(idx, false, nil)
	if err != nil {
		panic(err)
	}
	return s
}

// fakeResident holds a mesh's steps "on an engine" for tests of meshes
// with resident steps: CopyTo copies them, Release forgets them.
type fakeResident struct {
	h        []float64
	released bool
}

func (f *fakeResident) Engine() string { return "fake" }
func (f *fakeResident) Owner() any     { return f }
func (f *fakeResident) Release()       { f.released = true }
func (f *fakeResident) Released() bool { return f.released }
func (f *fakeResident) CopyTo(dst []float64) error {
	if f.released {
		return fmt.Errorf("fake: released")
	}
	copy(dst, f.h)
	return nil
}

// TestJoinSegsResident checks the mesh of Method Auto's continued
// trajectories whose Rodas5P steps are resident (autoSteps): Host gives
// the steps of the join on the host (bit for bit the join of the same
// steps on the host, computed column by column here) and releases the
// Rodas5P steps; a mesh released first cannot be brought over.
func TestJoinSegsResident(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 37))
	for _, k := range []int{1, 7, 300, 1100} {
		m1, m2 := randMesh(rng, k, 0, 30), randMesh(rng, k, 1, 50)
		want := make([]int, k)
		rows := 0
		for x := range want {
			want[x] = m1.Len[x] + m2.Len[x]
			rows = max(rows, want[x])
		}
		wantH := make([]float64, rows*k)
		for x := 0; x < k; x++ {
			for r := 0; r < m1.Len[x]; r++ {
				wantH[r*k+x] = m1.H[r*k+x]
			}
			for r := 0; r < m2.Len[x]; r++ {
				wantH[(m1.Len[x]+r)*k+x] = m2.H[r*k+x]
			}
		}
		host, err := joinSegs(m1, m2)
		if err != nil {
			t.Fatal(err)
		}
		fr := &fakeResident{h: m2.H}
		rm2 := *m2
		rm2.H, rm2.Resident = nil, fr
		m, err := joinSegs(m1, &rm2)
		if err != nil {
			t.Fatal(err)
		}
		if m.Resident == nil || m.H != nil || m.Rows != rows || !slices.Equal(m.Len, want) {
			t.Fatalf("k = %d: resident %v, H %d, Rows %d; want resident steps, no H, Rows %d", k, m.Resident != nil, len(m.H), m.Rows, rows)
		}
		if err := m.Host(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(m.H, wantH) || !slices.Equal(host.H, wantH) || host.Rows != rows {
			t.Errorf("k = %d: the join's steps differ from the column-by-column join", k)
		}
		if !fr.released || m.Resident != nil {
			t.Errorf("k = %d: Host left the Rodas5P steps on the engine (released %v)", k, fr.released)
		}
		fr2 := &fakeResident{h: m2.H}
		rm2.Resident = fr2
		m, err = joinSegs(m1, &rm2)
		if err != nil {
			t.Fatal(err)
		}
		m.Release()
		if !fr2.released || m.Host() == nil {
			t.Errorf("k = %d: after Release, the Rodas5P steps released %v and Host did not fail", k, fr2.released)
		}
	}
}

// TestMergeAutoResident checks mergeAuto's mesh of parts one of which
// holds continued trajectories whose Rodas5P steps are resident
// (autoSteps): it stays resident (mergedSteps) until Host, which gives
// the merge of the same parts on the host bit for bit and releases the
// resident steps.
func TestMergeAutoResident(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 1))
	const n = 700
	q := &problem{Problem: &Problem{Field: Field{Dim: 2, Params: 1}, T1: 2}, n: n, t1: make([]float64, n)}
	var tsit, cont []int
	for i := range n {
		if rng.IntN(3) == 0 {
			cont = append(cont, i)
		} else {
			tsit = append(tsit, i)
		}
	}
	k := len(cont)
	mt := randMesh(rng, len(tsit)+5, 3, 60)
	rowsT := rng.Perm(mt.N)[:len(tsit)]
	m1, m2 := randMesh(rng, k, 1, 20), randMesh(rng, k, 1, 40)
	parts := func(resident bool) ([]autoPart, *fakeResident) {
		r2 := *m2
		var fr *fakeResident
		if resident {
			fr = &fakeResident{h: m2.H}
			r2.H, r2.Resident = nil, fr
		}
		mc, err := joinSegs(m1, &r2)
		if err != nil {
			t.Fatal(err)
		}
		return []autoPart{
			{idx: tsit, rows: rowsT, res: &Result{Mesh: mt, Stats: Stats{Accepted: mt.Len}}},
			{idx: cont, res: &Result{Mesh: mc, Stats: Stats{Accepted: mc.Len}}, stiff: true},
		}, fr
	}
	ph, _ := parts(false)
	want := mergeAuto(q, OpRecord, ph, false, true)
	pr, fr := parts(true)
	got := mergeAuto(q, OpRecord, pr, false, true)
	if want.Mesh.Resident != nil || got.Mesh.Resident == nil || got.Mesh.H != nil {
		t.Fatalf("host parts: resident %v; a resident part: resident %v; want a host mesh, then a resident one", want.Mesh.Resident != nil, got.Mesh.Resident != nil)
	}
	if err := got.Mesh.Host(); err != nil {
		t.Fatal(err)
	}
	if got.Mesh.Rows != want.Mesh.Rows || !slices.Equal(got.Mesh.Len, want.Mesh.Len) || !slices.Equal(got.Mesh.H, want.Mesh.H) {
		t.Errorf("the resident merge's steps differ from the host merge's")
	}
	if !fr.released {
		t.Errorf("Host left the Rodas5P steps on the engine")
	}
	// The host merge against the parts' steps, trajectory by trajectory.
	for kk, i := range tsit {
		j := rowsT[kk]
		for s := 0; s < mt.Len[j]; s++ {
			if want.Mesh.H[s*n+i] != mt.H[s*mt.N+j] {
				t.Fatalf("trajectory %d, step %d: %v, want the Tsit5 part's %v", i, s, want.Mesh.H[s*n+i], mt.H[s*mt.N+j])
			}
		}
	}
	for x, i := range cont {
		for s := 0; s < m1.Len[x]+m2.Len[x]; s++ {
			w := 0.0
			if s < m1.Len[x] {
				w = m1.H[s*k+x]
			} else {
				w = m2.H[(s-m1.Len[x])*k+x]
			}
			if want.Mesh.H[s*n+i] != w {
				t.Fatalf("continued trajectory %d, step %d: %v, want %v", i, s, want.Mesh.H[s*n+i], w)
			}
		}
	}
}

// fakeColumns is fakeResident whose engine gathers columns
// (ColumnSteps), with n columns a row: column by column here.
type fakeColumns struct {
	fakeResident
	n int
}

func (f *fakeColumns) Columns(cols, lens []int, rows int, _ ResidentSteps) (ResidentSteps, error) {
	if f.released {
		return nil, fmt.Errorf("fake: released")
	}
	k := len(cols)
	h := make([]float64, rows*k)
	for x, c := range cols {
		for r := 0; r < lens[x]; r++ {
			h[r*k+x] = f.h[r*f.n+c]
		}
	}
	return &fakeColumns{fakeResident{h: h}, k}, nil
}

// TestStopSegsColumns checks Method Auto's segments taken from a first
// pass whose mesh stays on an engine that gathers columns (ColumnSteps):
// the stopped trajectories' Tsit5 steps (stopSegs, with the pass's times
// and without them: switchTimes) and the finished ones' (Mesh.subset,
// kept) are gathered there, the pass's mesh stays there, and their steps,
// their switch times and the merged mesh (joinSegs, Host) are those of
// the same pass on the host bit for bit; the merged mesh releases the
// gathered steps.
func TestStopSegsColumns(t *testing.T) {
	rng := rand.New(rand.NewPCG(38, 25))
	const n = 900
	q := &problem{Problem: &Problem{Field: Field{Dim: 2, Params: 1}, T1: 2}, n: n, t1: make([]float64, n)}
	pm := randMesh(rng, n, 1, 70)
	times := make([]float64, n)
	for i := range times {
		times[i] = rng.Float64()
	}
	for _, timed := range []bool{true, false} {
		var stops, stopsR []autoStop
		var rest []int
		host := &Result{Mesh: pm, Stats: Stats{Accepted: pm.Len}}
		rm := *pm
		fc := &fakeColumns{fakeResident{h: pm.H}, n}
		rm.H, rm.Resident = nil, fc
		res := &Result{Mesh: &rm, Stats: Stats{Accepted: pm.Len}}
		if timed {
			host.T, res.T = times, times
		}
		for i := range n {
			if rng.IntN(4) == 0 {
				rest = append(rest, i)
				continue
			}
			stops = append(stops, autoStop{i: i, j: i, res: host})
			stopsR = append(stopsR, autoStop{i: i, j: i, res: res})
		}
		want, err := stopSegs(q, stops, false, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := stopSegs(q, stopsR, false, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.r1 == nil || got.m1.H != nil || got.m1.Resident != got.r1 || rm.H != nil || fc.released {
			t.Fatalf("timed %v: gathered steps %v, m1 on the host %v, the pass's mesh on the host %v released %v; want the steps gathered on the engine, the pass's there",
				timed, got.r1 != nil, got.m1.H != nil, rm.H != nil, fc.released)
		}
		h, err := hostSteps(got.m1)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(h, want.m1.H) || !slices.Equal(got.ts, want.ts) || !slices.Equal(got.m1.Len, want.m1.Len) || got.m1.Rows != want.m1.Rows {
			t.Errorf("timed %v: the gathered Tsit5 segments differ from the host's", timed)
		}
		ws, err := pm.subset(rest, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		gs, err := rm.subset(rest, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if gs.H != nil || gs.Resident == nil || rm.H != nil {
			t.Fatalf("timed %v: subset kept: H %v, resident %v, the pass's mesh on the host %v; want the subset gathered on the engine", timed, gs.H != nil, gs.Resident != nil, rm.H != nil)
		}
		if h, err := hostSteps(gs); err != nil || !slices.Equal(h, ws.H) || !slices.Equal(gs.Len, ws.Len) {
			t.Errorf("timed %v: the gathered subset differs from the host's (%v)", timed, err)
		}
		// The merged mesh with resident Rodas5P steps: Host gives the
		// host's join and releases both segments' steps.
		m2 := randMesh(rng, len(stops), 1, 40)
		wj, err := joinSegs(want.m1, m2)
		if err != nil {
			t.Fatal(err)
		}
		r2 := *m2
		f2 := &fakeResident{h: m2.H}
		r2.H, r2.Resident = nil, f2
		gj, err := joinSegs(got.m1, &r2)
		if err != nil {
			t.Fatal(err)
		}
		if err := gj.Host(); err != nil {
			t.Fatal(err)
		}
		r1 := got.r1.(*fakeColumns)
		if !slices.Equal(gj.H, wj.H) || !r1.released || !f2.released {
			t.Errorf("timed %v: the merged mesh's steps differ from the host's join, or its segments' steps were kept (released %v, %v)", timed, r1.released, f2.released)
		}
	}
}
