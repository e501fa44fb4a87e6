package ode

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// BenchmarkAutoHostParts times the host functions of Method Auto's
// continuation (auto_split.go, auto_continue.go) on synthetic results of
// a GPU engine's sizes, at n = 16384: "vdp" is the stiff van der Pol
// ensemble's form (d = 2, one parameter, 14427 of 16384 stopped, the
// others' rows kept from the first pass: two parts, their meshes
// resident), "robertson" Robertson's (d = 3, three parameters, every
// trajectory stopped: one part). The engine's side (the jobs, the mesh
// columns' gather) is a fake that does nothing. Each sub-benchmark is
// one function: sort (passRows.sort of the first pass), stopSegs, subOf
// (the continued rows' sub-problem), merge (mergeAuto):
//
//	go test ./ode -run '^$' -bench AutoHostParts -count 5 -cpu 1,2
func BenchmarkAutoHostParts(b *testing.B) {
	for _, c := range []struct {
		name     string
		d, np, k int
		rows     int
	}{{"vdp", 2, 1, 14427, 960}, {"robertson", 3, 3, 16384, 100}} {
		f := newFakeAuto(16384, c.d, c.np, c.k, c.rows, 1)
		b.Run(c.name+"/sort", func(b *testing.B) {
			var stiff []int
			var stops []autoStop
			for range b.N {
				var pr passRows
				stiff, stops = pr.sort(f.res, nil, stiff[:0], stops[:0])
			}
		})
		b.Run(c.name+"/stopSegs", func(b *testing.B) {
			for range b.N {
				sg, err := stopSegs(f.q, f.stops(), true, true, nil)
				if err != nil {
					b.Fatal(err)
				}
				if sg.r1 != f.res.Mesh.Resident {
					sg.release() // (else the first pass's, kept)
				}
			}
		})
		b.Run(c.name+"/subOf", func(b *testing.B) {
			var sv Solver
			for range b.N {
				if _, _, err := sv.subOf(f.q, nil, f.stiff); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/merge", func(b *testing.B) {
			for range b.N {
				mergeAuto(f.q, OpGrad, f.parts(), true, true)
			}
		})
	}
}

// fakeAuto is a synthetic Method Auto call of n trajectories: the first
// pass's result res, k of its trajectories stopped (stiff), the others
// OK, and the continuation's result cont of the k.
type fakeAuto struct {
	q         *problem
	res, cont *Result
	stiff     []int // the stopped trajectories
	done      []int // the others
}

// newFakeAuto returns a fakeAuto of n trajectories of dimension d with
// np parameters, k of them stopped (every one where k = n, else spread
// at random, seeded by seed), their meshes resident (nullColumns) of rows
// steps.
func newFakeAuto(n, d, np, k, rows int, seed uint64) *fakeAuto {
	rng := rand.New(rand.NewPCG(seed, 1))
	floats := func(m int) []float64 {
		x := make([]float64, m)
		for i := range x {
			x[i] = rng.Float64()
		}
		return x
	}
	ints := func(m int) []int {
		x := make([]int, m)
		for i := range x {
			x[i] = 1 + rng.IntN(rows)
		}
		return x
	}
	pr := &Problem{Field: Field{Name: "fake", Dim: d, Params: np}, N: n, Y0: floats(n * d), P: floats(n * np), T1: 1}
	f := &fakeAuto{q: &problem{Problem: pr, n: n, y0: pr.Y0, p: pr.P, t1: floats(n)}}
	stiff := make([]bool, n)
	for _, i := range rng.Perm(n)[:k] {
		stiff[i] = true
	}
	status := make([]Status, n)
	for i := range n {
		if stiff[i] {
			status[i] = Stiff
			f.stiff = append(f.stiff, i)
		} else {
			f.done = append(f.done, i)
		}
	}
	result := func(m int, st []Status) *Result {
		return &Result{Status: st, Y: floats(m * d), T: floats(m), LastH: floats(m),
			Stats:  Stats{Accepted: ints(m), Rejected: ints(m), FieldEvals: ints(m)},
			GradY0: floats(m * d), GradP: floats(m * np), GradS: []float64{}, GradFinite: true,
			Mesh: &Mesh{N: m, Rows: rows, Len: ints(m), Resident: &nullColumns{}}}
	}
	f.res = result(n, status)
	f.res.Stiff = stiff
	f.cont = result(k, make([]Status, k))
	return f
}

// stops returns the first pass's stopped trajectories (runAutoSplit's
// stops).
func (f *fakeAuto) stops() []autoStop {
	s := make([]autoStop, len(f.stiff))
	for x, i := range f.stiff {
		s[x] = autoStop{i: i, j: i, res: f.res}
	}
	return s
}

// parts returns the parts mergeAuto merges: the others' rows of the first
// pass (keptPart), if any, and the continuation's.
func (f *fakeAuto) parts() []autoPart {
	var p []autoPart
	if len(f.done) > 0 {
		r := *f.res
		p = append(p, autoPart{idx: f.done, rows: f.done, res: &r})
	}
	return append(p, autoPart{idx: f.stiff, res: f.cont, stiff: true, switchAt: f.cont.Stats.Accepted})
}

// nullColumns are resident steps of no engine (BenchmarkAutoHostParts):
// their columns' gather does nothing.
type nullColumns struct{ released bool }

func (*nullColumns) Engine() string             { return "null" }
func (r *nullColumns) Owner() any               { return r }
func (*nullColumns) CopyTo(dst []float64) error { clear(dst); return nil }
func (r *nullColumns) Release()                 { r.released = true }
func (r *nullColumns) Released() bool           { return r.released }

func (*nullColumns) Columns(cols, lens []int, rows int, reuse ResidentSteps) (ResidentSteps, error) {
	return &nullColumns{}, nil
}

// TestAutoHostPartsRows checks stopSegs's and mergeAuto's rows on a
// fakeAuto of more trajectories than one task of rowTask (their copies run
// in tasks on all cores): each stopped trajectory's row of the first
// pass in stopSegs's segments, and each trajectory's row of its part in
// the merged result, value for value.
func TestAutoHostPartsRows(t *testing.T) {
	for _, c := range []struct {
		n, d, np, k int
		seed        uint64
	}{{5000, 2, 1, 4400, 1}, {3*rowTask + 7, 3, 3, 2 * rowTask, 2}, {rowTask + 1, 1, 2, rowTask + 1, 3}} {
		f := newFakeAuto(c.n, c.d, c.np, c.k, 40, c.seed)
		sg, err := stopSegs(f.q, f.stops(), true, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := f.res
		for x, i := range f.stiff {
			if sg.idx[x] != i || sg.ts[x] != r.T[i] || sg.acc1[x] != r.Stats.Accepted[i] || sg.rej1[x] != r.Stats.Rejected[i] ||
				sg.fe1[x] != r.Stats.FieldEvals[i] || sg.m1.Len[x] != r.Mesh.Len[i] {
				t.Fatalf("n %d: stopSegs's stop %d (trajectory %d): idx %d, t %v, counts %d %d %d, len %d; want the first pass's row",
					c.n, x, i, sg.idx[x], sg.ts[x], sg.acc1[x], sg.rej1[x], sg.fe1[x], sg.m1.Len[x])
			}
			for e := range c.d {
				if sg.y1[x*c.d+e] != r.Y[i*c.d+e] {
					t.Fatalf("n %d: stopSegs's stop %d: y1[%d] %v, want %v", c.n, x, e, sg.y1[x*c.d+e], r.Y[i*c.d+e])
				}
			}
		}
		out := mergeAuto(f.q, OpGrad, f.parts(), true, true)
		check := func(i int, src *Result, j int, sw int) {
			t.Helper()
			if out.Status[i] != src.Status[j] || out.T[i] != src.T[j] || out.LastH[i] != src.LastH[j] || out.Stats.Accepted[i] != src.Stats.Accepted[j] ||
				out.Stats.Rejected[i] != src.Stats.Rejected[j] || out.Stats.FieldEvals[i] != src.Stats.FieldEvals[j] || out.Switch[i] != sw || out.Mesh.Len[i] != src.Mesh.Len[j] {
				t.Fatalf("n %d: merged trajectory %d: status %v, t %v, counts %d, switch %d, len %d; want its part's row %d", c.n, i, out.Status[i], out.T[i], out.Stats.Accepted[i], out.Switch[i], out.Mesh.Len[i], j)
			}
			for e := range c.d {
				if out.Y[i*c.d+e] != src.Y[j*c.d+e] || out.GradY0[i*c.d+e] != src.GradY0[j*c.d+e] {
					t.Fatalf("n %d: merged trajectory %d: state or ∂L/∂y0 %d differs from its part's row %d", c.n, i, e, j)
				}
			}
			for e := range c.np {
				if out.GradP[i*c.np+e] != src.GradP[j*c.np+e] {
					t.Fatalf("n %d: merged trajectory %d: ∂L/∂p %d differs from its part's row %d", c.n, i, e, j)
				}
			}
		}
		for _, i := range f.done {
			check(i, r, i, r.Stats.Accepted[i])
		}
		for x, i := range f.stiff {
			check(i, f.cont, x, f.cont.Stats.Accepted[x])
		}
	}
}

// rowsOfAppend is rowsOf as it was before session 45 (a row's append at a
// time), the reference of TestRowsOf and BenchmarkRowsOf.
func rowsOfAppend(x []float64, w int, idx []int) []float64 {
	out := make([]float64, 0, len(idx)*w)
	for _, i := range idx {
		out = append(out, x[i*w:(i+1)*w]...)
	}
	return out
}

// TestRowsOf checks rowsOf (element by element at widths 1 and 2, row
// by row above) against rowsOfAppend bit for bit (−0 and NaN payloads
// included), on rows in increasing order and repeated, and longest
// against a plain loop.
func TestRowsOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 4))
	for _, w := range []int{0, 1, 2, 3, 4, 7} {
		for _, c := range []struct{ n, k int }{{0, 0}, {1, 1}, {17, 5}, {2500, 2200}} {
			x := make([]float64, c.n*w)
			for e := range x {
				switch rng.IntN(8) {
				case 0:
					x[e] = math.Copysign(0, -1)
				case 1:
					x[e] = math.Float64frombits(0x7ff8000000000000 | rng.Uint64N(1<<51))
				default:
					x[e] = rng.NormFloat64()
				}
			}
			idx := make([]int, c.k)
			if c.n > 0 {
				for r := range idx {
					idx[r] = rng.IntN(c.n)
				}
			}
			slices.Sort(idx)
			got, want := rowsOf(x, w, idx), rowsOfAppend(x, w, idx)
			if len(got) != len(want) || got == nil {
				t.Fatalf("w %d, %d of %d rows: len %d (nil %v), want %d", w, c.k, c.n, len(got), got == nil, len(want))
			}
			for e := range got {
				if math.Float64bits(got[e]) != math.Float64bits(want[e]) {
					t.Fatalf("w %d, %d of %d rows: element %d is %v, want %v", w, c.k, c.n, e, got[e], want[e])
				}
			}
		}
	}
	for _, lens := range [][]int{nil, {0}, {3, 9, 2}, {5, 5}, {0, 0, 1}} {
		want := 0
		for _, l := range lens {
			if l > want {
				want = l
			}
		}
		if got := longest(lens); got != want {
			t.Errorf("longest(%v) = %d, want %d", lens, got, want)
		}
	}
}

// BenchmarkRowsOf times rowsOf against rowsOfAppend (before session 45)
// side by side, on the rows of Method Auto's sub-problems at n = 16384:
// "vdp" the stiff van der Pol ensemble's 14427 continued rows of y0
// (width 2), t1 and p (width 1), "robertson3" a width of 3.
//
//	go test ./ode -run '^$' -bench RowsOf -count 5 -cpu 1
func BenchmarkRowsOf(b *testing.B) {
	rng := rand.New(rand.NewPCG(45, 5))
	n := 16384
	idx := rng.Perm(n)[:14427]
	slices.Sort(idx)
	for _, w := range []int{1, 2, 3} {
		x := make([]float64, n*w)
		for e := range x {
			x[e] = rng.Float64()
		}
		for _, v := range []struct {
			name string
			f    func([]float64, int, []int) []float64
		}{{"old", rowsOfAppend}, {"new", rowsOf}} {
			b.Run(fmt.Sprintf("w=%d/%s", w, v.name), func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					v.f(x, w, idx)
				}
			})
		}
	}
}
