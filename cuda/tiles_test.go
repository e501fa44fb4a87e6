package cuda

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

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
	return trace(t, name, in, func(in []tape.V) []tape.V {
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
func tilePrograms(t testing.TB, n int) []testProgram {
	r := rand.New(rand.NewPCG(3, 4))
	var tps []testProgram
	for _, h := range []int{32, 13} {
		p := deepNet(t, fmt.Sprintf("deep%d", h), h)
		vjp, err := tape.VJP(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []*tape.Program{p, vjp} {
			in, sh := randInputs(q, n, func() float64 { return 2*r.Float64() - 1 })
			tps = append(tps, testProgram{p: q, in: in, sh: sh, tol: tolerance{rel: 1e-13}, float: true})
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
	gxx(t)
	tps := append(allPrograms(t, 11), tilePrograms(t, 11)...)
	got := runHostSim(t, tps, &SourceSettings{Tiles: true}, true)
	for j, tp := range tps {
		tp.compare(t, "tile sim", got[j], tp.tol)
	}
}

// TestTilesHost runs tile-mode code on the host, where a tile is one
// trajectory and the products are loops.
func TestTilesHost(t *testing.T) {
	t.Parallel()
	gxx(t)
	tps := append(allPrograms(t, 5), tilePrograms(t, 5)...)
	got := runHostWith(t, tps, &SourceSettings{Tiles: true})
	for j, tp := range tps {
		tp.compare(t, "tile host", got[j], tp.tol)
	}
}

// TestTilesDense checks that tile mode finds the networks' dense layers:
// every layer of the forward networks is one gs_tdot, those from the
// inputs on replicated values, the others on the previous layer's vector.
func TestTilesDense(t *testing.T) {
	for _, tp := range tilePrograms(t, 1) {
		if strings.Contains(tp.p.Name, "vjp") || strings.Contains(tp.p.Name, "VJP") {
			continue
		}
		src := NewSource(&SourceSettings{Tiles: true})
		if _, err := src.Func(tp.p); err != nil {
			t.Fatal(err)
		}
		s := src.String()
		if !strings.Contains(s, "#define GS_TILEMODE 1") {
			t.Errorf("%s: no GS_TILEMODE", tp.p.Name)
		}
		if got := strings.Count(s, "gs_tdot<"); got != 3 {
			t.Errorf("%s: %d gs_tdot calls, want 3", tp.p.Name, got)
		}
		if got := strings.Count(s, ", true>(u"); got != 1 {
			t.Errorf("%s: %d layers on replicated inputs, want 1", tp.p.Name, got)
		}
	}
	if src := NewSource(&SourceSettings{Tiles: true, Precision: Float32}); src.tile || src.lanes {
		t.Errorf("Float32: tile mode on")
	}
}
