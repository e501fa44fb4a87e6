package kernelgen

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen/kerneltest"
	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// wideMLP returns an MLP sizes[0] → ... → sizes[len-1] with tanh hidden
// layers and shared weights (layer by layer: W row-major, then b), and
// its VJP.
func wideMLP(t testing.TB, sizes []int) (*tape.Program, *tape.Program) {
	var in []tape.Input
	for k := range sizes[0] {
		in = append(in, tape.Input{Name: fmt.Sprintf("x%d", k)})
	}
	nw := 0
	for l := 1; l < len(sizes); l++ {
		nw += sizes[l]*sizes[l-1] + sizes[l]
	}
	for k := range nw {
		in = append(in, tape.Input{Name: fmt.Sprintf("w%d", k), Shared: true})
	}
	f := kerneltest.Trace(t, fmt.Sprintf("mlp%v", sizes), in, func(v []tape.V) []tape.V {
		x, w := v[:sizes[0]], v[sizes[0]:]
		for l := 1; l < len(sizes); l++ {
			m, k := sizes[l], sizes[l-1]
			x = tape.Dense(w[:m*k], x, w[m*k:m*k+m])
			w = w[m*k+m:]
			if l < len(sizes)-1 {
				for i := range x {
					x[i] = x[i].Tanh()
				}
			}
		}
		return x
	})
	vjp, err := tape.VJP(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f, vjp
}

// lanePrograms are MLPs wider than a warp (layers split across vectors,
// shared indices past 32 padded) and their VJPs.
func lanePrograms(t testing.TB, n int) []kerneltest.Program {
	r := rand.New(rand.NewPCG(7, 7))
	var tps []kerneltest.Program
	for _, sizes := range [][]int{{3, 40, 33, 2}, {2, 32, 32, 2}} {
		f, vjp := wideMLP(t, sizes)
		for _, p := range []*tape.Program{f, vjp} {
			in, sh := kerneltest.RandInputs(p, n, func() float64 { return 2*r.Float64() - 1 })
			tps = append(tps, kerneltest.Program{P: p, In: in, Sh: sh, Tol: kerneltest.Tolerance{Rel: 1e-13}})
		}
	}
	return tps
}

// TestPlanLanes: the values of an MLP and of its VJP fall almost all in
// vectors (the layers' rows, activations, Wᵀ·ȳ and the weights'
// cotangents), every vector's elements are values of its op whose
// arguments are where its laneArgs say, and the emission order puts
// every value after its arguments.
func TestPlanLanes(t *testing.T) {
	t.Parallel()
	for _, sizes := range [][]int{{2, 32, 32, 2}, {3, 40, 33, 2}, {4, 16, 4}} {
		f, vjp := wideMLP(t, sizes)
		for _, p := range []*tape.Program{f, vjp} {
			sh := sharedIndex(p)
			lp := planLanes(p, sh)
			computed := 0
			for _, v := range p.Values {
				if v.Op != ops.OpInput && v.Op != ops.OpConst {
					computed++
				}
			}
			if got := lp.Elements(); 10*got < 9*computed {
				t.Errorf("%s: %d of %d computed values in vectors, want 90%%", p.Name, got, computed)
			}
			for q, v := range lp.Vecs {
				if len(v.Ids) > LaneWidth {
					t.Fatalf("%s: vector %d has %d elements", p.Name, q, len(v.Ids))
				}
				for e, id := range v.Ids {
					if id < 0 {
						continue
					}
					pv := &p.Values[id]
					if pv.Op != v.Op || pv.Aux != v.Aux || len(pv.Args) != len(v.Args) {
						t.Fatalf("%s: vector %d element %d is %v, not the vector's op %v", p.Name, q, e, pv.Op, v.Op)
					}
					for k, a := range v.Args {
						arg := pv.Args[k]
						switch a.Kind {
						case laneCommon:
							if arg != a.Id {
								t.Fatalf("%s: vector %d element %d argument %d is v%d, want common v%d", p.Name, q, e, k, arg, a.Id)
							}
						case laneShared:
							if av := p.Values[arg]; av.Op != ops.OpInput || sh[int(av.Aux)] != a.Base+a.Stride*e {
								t.Fatalf("%s: vector %d element %d argument %d is not shared input %d", p.Name, q, e, k, a.Base+a.Stride*e)
							}
						case laneAligned:
							if qa, ea, ok := lp.In(arg); !ok || qa != a.Vec || ea != e {
								t.Fatalf("%s: vector %d element %d argument %d is not element %d of vector %d", p.Name, q, e, k, e, a.Vec)
							}
						}
					}
				}
			}
			live := make([]bool, len(p.Values))
			for _, o := range p.Outputs {
				live[o.ID] = true
			}
			for i := len(p.Values) - 1; i >= 0; i-- {
				if live[i] {
					for _, a := range p.Values[i].Args {
						live[a] = true
					}
				}
			}
			order, ok := laneOrder(p, lp, live)
			if !ok {
				t.Fatalf("%s: vectors form a cycle", p.Name)
			}
			done := make([]bool, len(p.Values))
			mark := func(nd laneNode) []tape.ID {
				if nd.Vec < 0 {
					return []tape.ID{nd.Id}
				}
				var ids []tape.ID
				for _, id := range lp.Vecs[nd.Vec].Ids {
					if id >= 0 {
						ids = append(ids, id)
					}
				}
				return ids
			}
			for _, nd := range order {
				ids := mark(nd)
				for _, id := range ids {
					for _, a := range p.Values[id].Args {
						if q, _, inv := lp.In(a); !done[a] && !(inv && nd.Vec == q) {
							t.Fatalf("%s: v%d is emitted before its argument v%d", p.Name, id, a)
						}
					}
				}
				for _, id := range ids {
					done[id] = true
				}
			}
			for _, o := range p.Outputs {
				if !done[o.ID] {
					t.Fatalf("%s: output v%d is never emitted", p.Name, o.ID)
				}
			}
		}
	}
}

// TestHostLanesWide runs lanePrograms in lanes mode on the host and on a
// simulated warp.
func TestHostLanesWide(t *testing.T) {
	t.Parallel()
	kerneltest.GXX(t)
	tps := lanePrograms(t, 3)
	sims := []bool{false}
	if longTests() {
		sims = append(sims, true) // the warp simulation of these programs
	}
	for _, sim := range sims {
		got := runHostSim(t, tps, &SourceSettings{Lanes: true}, sim)
		for j, tp := range tps {
			tp.Compare(t, fmt.Sprintf("lanes (warp sim %v)", sim), got[j], tp.Tol)
		}
	}
}

// TestLanesShape: a lanes-mode block has as many warps (at most 4) as fit
// in the shared memory limit (227 KiB, an H200's; 48 KiB without opting
// in), and the blocks its registers leave room for
// fit in a multiprocessor.
func TestLanesShape(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ ns, limit int }{{1218, 232448}, {4482, 232448}, {1218, 48 << 10}, {13000, 232448}, {0, 48 << 10}} {
		w := LanesWarps(2, c.ns, true, Float64, LanesBlock, c.limit)
		sh := LanesShared(2, c.ns, true, Float64, w)
		if w < 1 || w > LanesBlock/32 || (sh > c.limit && w > 1) || (w < LanesBlock/32 && LanesShared(2, c.ns, true, Float64, w+1) <= c.limit) {
			t.Errorf("ns %d, limit %d: %d warps (%d bytes)", c.ns, c.limit, w, sh)
		}
		b := LanesMinBlocks(2, c.ns, true, Float64, c.limit)
		if b < 1 || b > 4 || (b > 1 && b*(sh+1024) > c.limit+1024) {
			t.Errorf("ns %d, limit %d: %d blocks of %d bytes", c.ns, c.limit, b, sh)
		}
	}
	if w, b := LanesWarps(2, 1218, true, Float64, LanesBlock, 232448), LanesMinBlocks(2, 1218, true, Float64, 232448); w != 4 || b != 4 {
		t.Errorf("the neural suite's network (1,218 weights) on an H200: %d warps, %d blocks; want 4 and 4", w, b)
	}
}
