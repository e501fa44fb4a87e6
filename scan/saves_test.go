package scan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

// extMidpointStep is midpointStep with a continuous extension of two
// terms: w_1 = h·k1, w_2 = y⁺ − y − w_1 (y(t + θh) = y + θ·w_1 + θ²·w_2).
func extMidpointStep(t *testing.T) *Step {
	t.Helper()
	st := midpointStep(t)
	f := func(tt tape.V, y []tape.V, p, s tape.V) []tape.V {
		return []tape.V{p.Mul(y[1]).Add(s.Mul(tt.Sin())), y[0].Mul(y[1]).Neg()}
	}
	ext, err := tape.Trace("midpoint-ext", []tape.Input{{Name: "t"}, {Name: "h"}, {Name: "y0"}, {Name: "y1"}, {Name: "p"}, {Name: "s", Shared: true}},
		func(in []tape.V) []tape.V {
			tt, h, y, p, s := in[0], in[1], in[2:4], in[4], in[5]
			k1 := f(tt, y, p, s)
			half := h.MulC(0.5)
			ym := []tape.V{y[0].Add(half.Mul(k1[0])), y[1].Add(half.Mul(k1[1]))}
			k2 := f(tt.Add(half), ym, p, s)
			y1 := []tape.V{y[0].Add(h.Mul(k2[0])), y[1].Add(h.Mul(k2[1]))}
			w1 := []tape.V{h.Mul(k1[0]), h.Mul(k1[1])}
			return []tape.V{y1[0], y1[1], w1[0], w1[1], y1[0].Sub(y[0]).Sub(w1[0]), y1[1].Sub(y[1]).Sub(w1[1])}
		})
	if err != nil {
		t.Fatal(err)
	}
	st.Ext, st.Terms = ext, 2
	return st
}

// extMidpointStep4 is extMidpointStep on two copies of its system side by
// side (D 4: a lane's save is one vector of four components for the
// lane-by-lane kernels, coefBarLanes).
func extMidpointStep4(t *testing.T) *Step {
	t.Helper()
	f := func(tt tape.V, y []tape.V, p, s tape.V) []tape.V {
		return []tape.V{p.Mul(y[1]).Add(s.Mul(tt.Sin())), y[0].Mul(y[1]).Neg(), p.Mul(y[3]).Sub(y[0]), y[2].Mul(y[3]).Neg()}
	}
	in := []tape.Input{{Name: "t"}, {Name: "h"}, {Name: "y0"}, {Name: "y1"}, {Name: "y2"}, {Name: "y3"}, {Name: "p"}, {Name: "s", Shared: true}}
	step := func(ext bool) func(in []tape.V) []tape.V {
		return func(in []tape.V) []tape.V {
			tt, h, y, p, s := in[0], in[1], in[2:6], in[6], in[7]
			k1 := f(tt, y, p, s)
			half := h.MulC(0.5)
			ym := make([]tape.V, 4)
			for c := range ym {
				ym[c] = y[c].Add(half.Mul(k1[c]))
			}
			k2 := f(tt.Add(half), ym, p, s)
			out := make([]tape.V, 12)
			for c := range 4 {
				out[c] = y[c].Add(h.Mul(k2[c]))
				out[4+c] = h.Mul(k1[c])
				out[8+c] = out[c].Sub(y[c]).Sub(out[4+c])
			}
			if !ext {
				return out[:4]
			}
			return out
		}
	}
	prog, err := tape.Trace("midpoint4", in, step(false))
	if err != nil {
		t.Fatal(err)
	}
	ext, err := tape.Trace("midpoint4-ext", in, step(true))
	if err != nil {
		t.Fatal(err)
	}
	return &Step{Prog: prog, D: 4, P: 1, S: 1, Ext: ext, Terms: 2}
}

// TestSaveRowsSameGradient checks that the backward sweep's sums over a
// row's saves' cotangents are the same bit for bit four lanes at a time
// (coefBarRows, addRowRows: a save's cotangents of four lanes side by
// side, with AVX) and lane by lane (gatherRow, then coefBar's and
// addRow's loops), the cotangents save-major (Saves.BarMajor) or the
// same values in the saves' own layout: ragged trajectories
// (one with no steps, start times T0 apart), save times before, at and
// after their spans and several in most steps, rows padded past N
// (BarStride), cotangents scaled as read (BarScale), recorded states and
// checkpoints; groups of lanes far apart in time run lane by lane (split);
// the cotangents kept for addRowRows for every group, for some (a budget,
// rowBarMax, of 100 values) and for none.
func TestSaveRowsSameGradient(t *testing.T) {
	if !haveAVX {
		t.Skip("no AVX: the lane-by-lane loops run")
	}
	defer func(u bool) { useRows = u }(useRows)
	defer func(m int) { rowBarMax = m }(rowBarMax)
	defer func(u bool) { useLanes = u }(useLanes)
	for _, keep := range []int{rowBarMax, 100, 0} {
		rowBarMax = keep
		for _, lanes := range []bool{true, false} {
			useLanes = lanes
			saveRowsSameGradient(t, extMidpointStep(t))
			saveRowsSameGradient(t, extMidpointStep4(t))
		}
	}
}

func saveRowsSameGradient(t *testing.T, st *Step) {
	for _, c := range []struct {
		n      int
		scale  float64
		stored bool
	}{{13, 1, true}, {13, 0.25, true}, {29, 0.3, false}, {4, 0, true}} {
		rng := rand.New(rand.NewPCG(35, uint64(c.n)))
		p := raggedProblem(st, c.n, rng, false)
		n, d := c.n, st.D
		for range (d - 2) * n { // (raggedProblem's states are of D 2)
			p.Y0 = append(p.Y0, 0.2+0.1*rng.Float64())
		}
		times := []float64{-0.1, 0, 0}
		for k := 1; k < 120; k++ {
			times = append(times, 0.012*float64(k))
		}
		times = append(times, times[len(times)-1], 5)
		K := len(times)
		p.Saves = &Saves{Times: times, Out: make([]float64, n*K*d)}
		if c.stored {
			p.Stored = storedStates(t, p)
		}
		bs := n + 3
		ybar, bar := make([]float64, d*n), make([]float64, K*d*bs)
		for i := range ybar {
			ybar[i] = rng.NormFloat64()
		}
		for i := range bar {
			bar[i] = rng.NormFloat64()
			if i%bs >= n {
				bar[i] = math.NaN() // padding: never read
			}
		}
		// The same cotangents in the saves' own layout, [N][K][D].
		own := make([]float64, n*K*d)
		for j := 0; j < n; j++ {
			for x := 0; x < K*d; x++ {
				own[j*K*d+x] = bar[x*bs+j]
			}
		}
		var gs [4]*Gradient
		for x := range gs {
			major := x < 2
			useRows = x%2 == 0
			p.Saves.BarMajor, p.Saves.BarStride, p.Saves.BarScale = false, 0, 0
			sw, err := Forward(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			b := own
			p.Saves.BarMajor, p.Saves.BarScale = major, c.scale
			if major {
				b, p.Saves.BarStride = bar, bs
			}
			if gs[x], err = sw.Backward(nil, ybar, b); err != nil {
				t.Fatal(err)
			}
		}
		for x, how := range []string{"save-major, by lanes", "own layout, by rows", "own layout, by lanes"} {
			what := fmt.Sprintf("D %d, n %d, scale %v, stored %v, kept %d, lanes %v, %s", d, c.n, c.scale, c.stored, rowBarMax, useLanes, how)
			sameBits(t, what+": ∂/∂y0", gs[x+1].Y0, gs[0].Y0)
			sameBits(t, what+": ∂/∂p", gs[x+1].P, gs[0].P)
			sameBits(t, what+": ∂/∂s", gs[x+1].Shared, gs[0].Shared)
		}
		for _, v := range gs[0].Y0 {
			if math.IsNaN(v) {
				t.Fatalf("n %d: a padding value reached the gradient", c.n)
			}
		}
	}
}

// TestGatherRows checks GatherRows, with AVX and in Go, against the
// transpose written out: 0…40 lanes, 0…40 columns, strides from the
// columns' count to 8 more, columns longer than the lanes, the rest of dst
// untouched (NaN payloads and −0 among the values, compared bit for bit).
func TestGatherRows(t *testing.T) {
	defer func(u bool) { useAVX = u }(useAVX)
	rng := rand.New(rand.NewPCG(45, 6))
	for _, avx := range []bool{true, false} {
		useAVX = avx
		for c := 0; c < 300; c++ {
			n, nc := rng.IntN(41), rng.IntN(41)
			stride := nc + rng.IntN(9)
			cols := make([][]float64, nc)
			for x := range cols {
				cols[x] = make([]float64, n+rng.IntN(3))
				for i := range cols[x] {
					switch rng.IntN(8) {
					case 0:
						cols[x][i] = math.Float64frombits(0x7ff8000000000000 | rng.Uint64()>>20)
					case 1:
						cols[x][i] = math.Copysign(0, -1)
					default:
						cols[x][i] = rng.NormFloat64()
					}
				}
			}
			dst := make([]float64, n*stride+3)
			want := make([]float64, len(dst))
			for i := range dst {
				dst[i] = float64(i)
				want[i] = float64(i)
			}
			for x, col := range cols {
				for i, v := range col[:n] {
					want[1+i*stride+x] = v
				}
			}
			GatherRows(dst[1:], stride, n, cols)
			sameBits(t, fmt.Sprintf("avx %v, n %d, columns %d, stride %d", avx, n, nc, stride), want, dst)
		}
	}
}

// TestScatterCol checks ScatterCol, with AVX and in Go, against the
// strided copy: columns of 0…40 values, strides 1…40, the rest of dst
// untouched.
func TestScatterCol(t *testing.T) {
	defer func(u bool) { useAVX = u }(useAVX)
	rng := rand.New(rand.NewPCG(35, 7))
	for _, avx := range []bool{true, false} {
		useAVX = avx
		for c := 0; c < 200; c++ {
			n, stride := rng.IntN(41), 1+rng.IntN(40)
			src := make([]float64, n)
			for i := range src {
				src[i] = rng.NormFloat64()
			}
			dst := make([]float64, n*stride+3)
			want := make([]float64, len(dst))
			for i := range dst {
				dst[i] = float64(i)
				want[i] = float64(i)
			}
			for x, v := range src {
				want[1+x*stride] = v
			}
			ScatterCol(dst[1:], stride, src)
			sameBits(t, fmt.Sprintf("avx %v, n %d, stride %d", avx, n, stride), want, dst)
		}
	}
}

// TestCoefRowsAVX checks coefRowsAVX against addPowers' sums written out
// lane by lane, bit for bit: 1…12 terms (the kernel sums four or eight
// terms at a time), 1…6 components, up to 30 saves (sixteen at a time),
// four lanes with their own columns, save ranges (some empty, some past
// the kernel's k0…k1), start times (saves at a lane's start, in its range, have no
// coefficient cotangent) and step sizes, cotangents scaled as read, the
// sums added to what acc held; every cotangent that has no term is NaN or
// ±Inf, and a lane without saves may have a step of size 0 (a term's
// product masked too late, or a lane's θ or cotangent not masked,
// shows). The cotangents it keeps (gb) are the scaled ones of
// the lanes' saves, −0 for the others.
func TestCoefRowsAVX(t *testing.T) {
	if !haveAVX {
		t.Skip("no AVX")
	}
	rng := rand.New(rand.NewPCG(49, 7))
	bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	for c := 0; c < 600; c++ {
		terms, d, K, n := 1+rng.IntN(12), 1+rng.IntN(6), 1+rng.IntN(30), 4+rng.IntN(20)
		bs := n + rng.IntN(5)
		ts := make([]float64, K)
		for k := range ts {
			ts[k] = float64(k) * 0.1
			if k > 0 && rng.IntN(6) == 0 {
				ts[k] = ts[k-1] // repeated save times
			}
		}
		bar := make([]float64, K*d*bs)
		for i := range bar {
			bar[i] = bad[rng.IntN(len(bad))]
		}
		var g rowGroup
		cols := rng.Perm(n)
		for q := range 4 {
			g.col[q] = cols[q]
			lo := rng.IntN(K + 1)
			g.lo[q], g.hi[q] = lo, lo+rng.IntN(K+1-lo)
			g.t[q] = float64(g.lo[q])*0.1 - 0.1*float64(rng.IntN(2)) // at or before its first save
			if g.lo[q] < K && rng.IntN(2) == 0 {
				g.t[q] = ts[g.lo[q]] // its first save at its start
			}
			g.h[q] = 0.1 * float64(1+g.hi[q]-g.lo[q]) * (0.5 + rng.Float64())
			if g.lo[q] == g.hi[q] && rng.IntN(2) == 0 {
				g.h[q] = 0 // a padded step: θ not a number
			}
			for k := g.lo[q]; k < g.hi[q]; k++ {
				if ts[k] > g.t[q] || rng.IntN(4) == 0 {
					for x := 0; x < d; x++ {
						bar[(k*d+x)*bs+g.col[q]] = rng.NormFloat64()
					}
				}
			}
		}
		k0 := rng.IntN(K)
		k1 := k0 + rng.IntN(K-k0+1)
		if k0 == k1 {
			continue
		}
		scale := []float64{1, 0.5, -3.25}[rng.IntN(3)]
		acc := make([]float64, coefRowsTerms(terms)*d*4)
		for i := range acc {
			acc[i] = rng.NormFloat64()
		}
		want := append([]float64(nil), acc...)
		wantGB := make([]float64, (k1-k0)*d*4)
		for i := range wantGB {
			wantGB[i] = math.Copysign(0, -1)
		}
		for q := range 4 {
			for k := max(k0, g.lo[q]); k < min(k1, g.hi[q]); k++ {
				for x := 0; x < d; x++ {
					wantGB[((k-k0)*d+x)*4+q] = bar[(k*d+x)*bs+g.col[q]] * scale
				}
				if !(ts[k] > g.t[q]) {
					continue
				}
				th := (ts[k] - g.t[q]) / g.h[q]
				for x := 0; x < d; x++ {
					v, pw := bar[(k*d+x)*bs+g.col[q]]*scale, th
					for j := 0; j < terms; j++ {
						want[(j*d+x)*4+q] += float64(pw * v)
						pw *= th
					}
				}
			}
		}
		gb := make([]float64, len(wantGB))
		scr := make([]float64, coefRowsScratch(d, terms))
		coefRowsAVX(&acc[0], &gb[0], &scr[0], &bar[0], &ts[0], &g.col[0], &g.lo[0], &g.hi[0], &g.t[0], &g.h[0], k0, k1, bs, d, terms, scale)
		what := fmt.Sprintf("case %d: terms %d, d %d, saves %d…%d of %d, scale %v", c, terms, d, k0, k1, K, scale)
		sameBits(t, what, want[:terms*d*4], acc[:terms*d*4])
		sameBits(t, what+": gb", wantGB, gb)
	}
}

// TestCoefLaneAVX checks coefLaneAVX and addLaneAVX against addPowers'
// and addRow's sums written out, bit for bit (and the cotangents
// coefLaneAVX keeps, and λ from them): D 4, 8 and 12, 1…8 terms,
// 1…30 saves (the four-save blocks of powers and the rest), cotangents
// scaled, with NaN, ±Inf and −0 among them, steps of size 0 (θ = +Inf), a
// lane among others whose columns it must leave as they are.
func TestCoefLaneAVX(t *testing.T) {
	if !haveAVX {
		t.Skip("no AVX")
	}
	rng := rand.New(rand.NewPCG(51, 2))
	special := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)}
	for c := 0; c < 500; c++ {
		d, terms, n, lanes := 4*(1+rng.IntN(3)), 1+rng.IntN(8), 1+rng.IntN(30), 1+rng.IntN(6)
		i := rng.IntN(lanes)
		t0, h := rng.Float64(), 0.01+rng.Float64()
		if c%25 == 0 {
			h = 0
		}
		scale := []float64{1, 2, 0.3, -1.5}[c%4]
		ts := make([]float64, n)
		for k := range ts {
			ts[k] = t0 + h*(float64(k)+rng.Float64())/float64(n)
			if h == 0 {
				ts[k] = t0 + float64(k+1)*0.01
			}
		}
		ys := make([]float64, n*d)
		for x := range ys {
			ys[x] = rng.NormFloat64()
			if rng.IntN(40) == 0 {
				ys[x] = special[rng.IntN(len(special))]
			}
		}
		// The lane-by-lane loops' sums: the scaled cotangents, then
		// addPowers save by save from zero; λ plus each save's in order.
		want := make([]float64, terms*d)
		g := make([]float64, d)
		for k := range n {
			for x := range g {
				g[x] = ys[k*d+x] * scale
			}
			addPowers(want, g, (ts[k]-t0)/h, terms)
		}
		lam0 := make([]float64, d)
		for x := range lam0 {
			lam0[x] = rng.NormFloat64()
		}
		wantLam := append([]float64(nil), lam0...)
		for k := range n {
			for x := range wantLam {
				wantLam[x] += ys[k*d+x] * scale
			}
		}
		fill := math.Float64frombits(0x7ff8dead00000000)
		cols := func(w int) [][]float64 {
			x := make([][]float64, w)
			for j := range x {
				x[j] = make([]float64, lanes)
				for q := range x[j] {
					x[j][q] = fill
				}
			}
			return x
		}
		wb, lam := cols(terms*d), cols(d)
		for x := range lam {
			lam[x][i] = lam0[x]
		}
		scr, gb := make([]float64, (n+3)/4*4*8), make([]float64, n*d)
		coefLaneAVX(&wb[0], i, &gb[0], &ys[0], &ts[0], &scr[0], n, t0, h, d, terms, scale)
		addLaneAVX(&lam[0], i, &ys[0], n, d, scale)
		what := fmt.Sprintf("case %d (d %d, terms %d, saves %d, h %v, scale %v)", c, d, terms, n, h, scale)
		for x, v := range ys {
			if w := v * scale; math.Float64bits(gb[x]) != math.Float64bits(w) {
				t.Fatalf("%s: kept cotangent %d = %v, want %v bit for bit", what, x, gb[x], w)
			}
		}
		// The kept cotangents, added with scale 1, give the same λ.
		lamKept := cols(d)
		for x := range lamKept {
			lamKept[x][i] = lam0[x]
		}
		addLaneAVX(&lamKept[0], i, &gb[0], n, d, 1)
		for x := range lamKept {
			if math.Float64bits(lamKept[x][i]) != math.Float64bits(wantLam[x]) {
				t.Fatalf("%s: λ[%d] from the kept cotangents = %v, want %v bit for bit", what, x, lamKept[x][i], wantLam[x])
			}
		}
		for x := range wb {
			for q := range lanes {
				w := fill
				if q == i {
					w = want[x]
				}
				if math.Float64bits(wb[x][q]) != math.Float64bits(w) {
					t.Fatalf("%s: w̄[%d] of lane %d = %v, want %v bit for bit", what, x, q, wb[x][q], w)
				}
			}
		}
		for x := range lam {
			for q := range lanes {
				w := fill
				if q == i {
					w = wantLam[x]
				}
				if math.Float64bits(lam[x][q]) != math.Float64bits(w) {
					t.Fatalf("%s: λ[%d] of lane %d = %v, want %v bit for bit", what, x, q, lam[x][q], w)
				}
			}
		}
	}
}
