package kernelgen

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen/kerneltest"
	"github.com/gradsolve-go/gradsolve/tape"
)

// deepNet traces the network 2 → h → h → 2 with tanh hidden layers:
// inputs x0, x1, then its weights and biases (shared), layer by layer.
func deepNet(t testing.TB, name string, h int) *tape.Program {
	in := []tape.Input{{Name: "x0"}, {Name: "x1"}}
	nw := 2*h + h + h*h + h + 2*h + 2
	for k := range nw {
		in = append(in, tape.Input{Name: fmt.Sprintf("w%d", k), Shared: true})
	}
	return kerneltest.Trace(t, name, in, func(in []tape.V) []tape.V {
		x, w := in[:2], in[2:]
		take := func(n int) []tape.V { r := w[:n]; w = w[n:]; return r }
		for _, k := range []int{2, h} {
			ws, b := take(h*k), take(h)
			x = tape.Dense(ws, x, b)
			for i := range x {
				x[i] = x[i].Tanh()
			}
		}
		ws, b := take(2*h), take(2)
		return tape.Dense(ws, x, b)
	})
}

// tilePrograms are networks whose layers tile mode computes as
// tensor-core products, with their VJPs: hidden widths that fill whole
// 8×4 blocks and ones that leave partial blocks.
func tilePrograms(t testing.TB, n int) []kerneltest.Program {
	r := rand.New(rand.NewPCG(3, 4))
	var tps []kerneltest.Program
	for _, h := range []int{32, 13} {
		p := deepNet(t, fmt.Sprintf("deep%d", h), h)
		vjp, err := tape.VJP(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []*tape.Program{p, vjp} {
			in, sh := kerneltest.RandInputs(q, n, func() float64 { return 2*r.Float64() - 1 })
			tps = append(tps, kerneltest.Program{P: q, In: in, Sh: sh, Tol: kerneltest.Tolerance{Rel: 1e-13}, Float: true})
		}
	}
	return tps
}

// TestTilesWarpSim runs the device form of tile-mode code (eight
// trajectories per warp, dense layers as m8n8k4 products) on a warp
// simulated with threads, over an ensemble that ends in a partial tile:
// every trajectory's outputs are Eval's, the same in each of its four
// lanes.
func TestTilesWarpSim(t *testing.T) {
	t.Parallel()
	kerneltest.GXX(t)
	// Without longTests, the tile programs only (the others run in tile
	// mode's host form, TestTilesHost).
	tps := tilePrograms(t, 11)
	if longTests() {
		tps = append(kerneltest.AllPrograms(t, 11), tps...)
	}
	got := runHostSim(t, tps, &SourceSettings{TileMode: true}, true)
	for j, tp := range tps {
		tp.Compare(t, "tile sim", got[j], tp.Tol)
	}
}

// TestTilesHost runs tile-mode code on the host, where a tile is one
// trajectory and the products are loops.
func TestTilesHost(t *testing.T) {
	t.Parallel()
	kerneltest.GXX(t)
	tps := append(kerneltest.AllPrograms(t, 5), tilePrograms(t, 5)...)
	got := runHostWith(t, tps, &SourceSettings{TileMode: true})
	for j, tp := range tps {
		tp.Compare(t, "tile host", got[j], tp.Tol)
	}
}

// TestTilesDense checks that tile mode finds the networks' dense layers:
// every layer of the forward networks is one gs_tdot, those from the
// inputs on replicated values, the others on the previous layer's vector.
func TestTilesDense(t *testing.T) {
	t.Parallel()
	for _, tp := range tilePrograms(t, 1) {
		if strings.Contains(tp.P.Name, "vjp") || strings.Contains(tp.P.Name, "VJP") {
			continue
		}
		src := NewSource(&SourceSettings{TileMode: true})
		if _, err := src.Func(tp.P); err != nil {
			t.Fatal(err)
		}
		s := src.String()
		if !strings.Contains(s, "#define GS_TILEMODE 1") {
			t.Errorf("%s: no GS_TILEMODE", tp.P.Name)
		}
		if got := strings.Count(s, "gs_tdot<"); got != 3 {
			t.Errorf("%s: %d gs_tdot calls, want 3", tp.P.Name, got)
		}
		if got := strings.Count(s, ", true>(u"); got != 1 {
			t.Errorf("%s: %d layers on replicated inputs, want 1", tp.P.Name, got)
		}
	}
	if src := NewSource(&SourceSettings{TileMode: true, Precision: Float32}); src.Tile || src.Lanes {
		t.Errorf("Float32: tile mode on")
	}
}

// TestTileSharedFits: on an H200 (227 KiB a block) tile mode's warp
// accumulators go in shared memory for the neural suite's 1,218 weights,
// not for 4,482 (or where a block may have 48 KiB), and the shared block
// beside them for 1,218, not for 1,500; the shared block alone for 1,500.
func TestTileSharedFits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ns      int
		acc, sh bool
		limit   int
		want    bool
	}{
		{1218, true, false, 232448, true},
		{1700, true, false, 232448, true},
		{4482, true, false, 232448, false},
		{1218, true, false, 49152, false},
		{1218, true, true, 232448, true},
		{1500, true, true, 232448, false},
		{1500, false, true, 232448, true},
		{30000, false, true, 232448, false},
	} {
		if got := TileSharedFits(2, c.ns, c.acc, c.sh, c.limit); got != c.want {
			t.Errorf("%d weights, accumulators %v, shared block %v, %d bytes: %v, want %v", c.ns, c.acc, c.sh, c.limit, got, c.want)
		}
	}
}
