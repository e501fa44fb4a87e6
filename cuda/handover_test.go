package cuda

import (
	"context"
	"sync"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// callCounter is the null backend counting its calls that go to the
// device: on a GPU each is one hand-over to the device's goroutine, tens
// of microseconds on an idle host, as much as a small call's kernel.
type callCounter struct {
	nullBackend
	mu    sync.Mutex
	calls map[string]int
}

func (b *callCounter) count(name string) {
	b.mu.Lock()
	b.calls[name]++
	b.mu.Unlock()
}

func (b *callCounter) take() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.calls
	b.calls = map[string]int{}
	return c
}

func (b *callCounter) alloc(n int64) (uint64, error) { b.count("alloc"); return b.nullBackend.alloc(n) }
func (b *callCounter) free(a uint64) error           { b.count("free"); return b.nullBackend.free(a) }
func (b *callCounter) write(a uint64, s []byte) error {
	b.count("write")
	return b.nullBackend.write(a, s)
}
func (b *callCounter) read(d []byte, a uint64) error {
	b.count("read")
	return b.nullBackend.read(d, a)
}
func (b *callCounter) zero(a uint64, n int64) error { b.count("zero"); return b.nullBackend.zero(a, n) }
func (b *callCounter) hostAlloc(n int64) []byte {
	b.count("hostAlloc")
	return b.nullBackend.hostAlloc(n)
}
func (b *callCounter) hostFree(x []byte)        { b.count("hostFree"); b.nullBackend.hostFree(x) }
func (b *callCounter) memFree() (int64, error)  { b.count("memFree"); return b.nullBackend.memFree() }
func (b *callCounter) newClock() (clock, error) { b.count("newClock"); return b.nullBackend.newClock() }
func (b *callCounter) batch(f func(q queue) error) error {
	b.count("batch")
	return b.nullBackend.batch(f)
}

var counted = &callCounter{nullBackend: nullBackend{newHostBackend(16 << 30)}, calls: map[string]int{}}

func init() { ode.Register(&Engine{name: "cuda-null-counted", prec: Float64, be: counted}) }

// TestCallHandOvers checks that a repeated Solver.Grad call, with the
// record or on a given mesh, a Gradient passed back, goes to the device
// once: one batch, no allocation, no memory query, no staging buffer
// made or freed. The calls alternate, as a training loop's record and
// replays do, so that buffers sized for one must serve the other.
func TestCallHandOvers(t *testing.T) {
	for _, n := range []int{128, 1 << 15} {
		pr := problems.Lorenz()
		prob := ode.Problem{Field: pr.Field, N: n, Y0: []float64{1, 0, 0}, P: []float64{10, 28, 8.0 / 3}, T0: 0, T1: 1}
		sv, err := ode.NewSolver(prob.Field, &ode.Settings{Method: ode.Tsit5, RelTol: 1e-6, AbsTol: 1e-9, Engine: "cuda-null-counted"})
		if err != nil {
			t.Fatal(err)
		}
		loss := ode.SumSquares()
		ctx := context.Background()
		mesh, _, err := sv.RecordContext(ctx, &prob)
		if err != nil {
			t.Fatal(err)
		}
		var gr, gm ode.Gradient
		for round := range 4 {
			for _, c := range []struct {
				name string
				g    *ode.Gradient
				m    *ode.Mesh
			}{{"record", &gr, nil}, {"mesh", &gm, mesh}} {
				counted.take()
				if _, err := sv.GradContext(ctx, c.g, &prob, loss, c.m); err != nil {
					t.Fatal(err)
				}
				calls := counted.take()
				if round < 2 {
					continue // warming up: buffers found their sizes
				}
				if calls["batch"] != 1 || len(calls) != 1 {
					t.Errorf("n=%d, %s, round %d: device calls %v, want one batch", n, c.name, round, calls)
				}
			}
		}
	}
}
