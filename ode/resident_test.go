package ode_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// fakeSteps holds a mesh's steps "on" an engine named engine, as a GPU
// engine holds them in device memory.
type fakeSteps struct {
	engine   string
	h        []float64
	released bool
	copies   int
	fail     error
}

func (f *fakeSteps) Engine() string { return f.engine }
func (f *fakeSteps) Owner() any     { return f }
func (f *fakeSteps) Released() bool { return f.released }
func (f *fakeSteps) Release()       { f.released = true }
func (f *fakeSteps) CopyTo(dst []float64) error {
	if f.fail != nil {
		return f.fail
	}
	if f.released {
		return errors.New("released")
	}
	f.copies++
	copy(dst, f.h)
	return nil
}

// resident returns a copy of m whose steps are held by a fakeSteps of
// engine.
func resident(m *ode.Mesh, engine string) (*ode.Mesh, *fakeSteps) {
	c := *m
	fs := &fakeSteps{engine: engine, h: slices.Clone(m.H[:m.Rows*m.N])}
	c.H, c.Resident = nil, fs
	return &c, fs
}

// TestResidentMesh checks what package ode does with a mesh whose steps
// are resident on an engine: replayed on another engine (the CPU) it is
// copied to the host first and gives the host mesh's gradient bit for bit;
// a released one, or one that cannot be read, is refused with an error
// that says so; Host and Release behave as documented.
func TestResidentMesh(t *testing.T) {
	t.Parallel()
	f := lorenzField()
	p := lorenzEnsemble(f, []float64{21, 25, 28, 30})
	sv, err := ode.NewSolver(f, &ode.Settings{Method: ode.Tsit5, RelTol: 1e-6, AbsTol: 1e-9})
	if err != nil {
		t.Fatal(err)
	}
	loss := ode.SumSquares()
	want, err := sv.Grad(nil, &p, loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	host := want.Mesh
	for _, engine := range []string{"elsewhere", "cpu"} {
		m, fs := resident(host, engine)
		got, err := sv.Grad(nil, &p, loss, m)
		if err != nil {
			t.Fatalf("resident on %s: %v", engine, err)
		}
		if !slices.Equal(got.P, want.P) || !slices.Equal(got.Y0, want.Y0) || got.Loss != want.Loss {
			t.Errorf("resident on %s: gradient differs from the host mesh's", engine)
		}
		if m.Resident != nil || !slices.Equal(m.H, host.H[:host.Rows*host.N]) || !fs.released || fs.copies != 1 {
			t.Errorf("resident on %s: after the call Resident %v, steps equal %v, released %v, copies %d; want the steps on the host, the engine's copy released after one copy",
				engine, m.Resident, slices.Equal(m.H, host.H[:host.Rows*host.N]), fs.released, fs.copies)
		}
		if err := m.Host(); err != nil { // a host mesh: nothing to do
			t.Errorf("Host of a host mesh: %v", err)
		}
	}

	m, fs := resident(host, "elsewhere")
	m.Release()
	if !fs.released {
		t.Error("Release did not release the resident steps")
	}
	if _, err := sv.Grad(nil, &p, loss, m); err == nil || !strings.Contains(err.Error(), "released") {
		t.Errorf("a released mesh: got %v, want an error saying it was released", err)
	}
	m, fs = resident(host, "cpu")
	fs.Release()
	if _, err := sv.Grad(nil, &p, loss, m); err == nil || !strings.Contains(err.Error(), "released") {
		t.Errorf("a released mesh on this engine: got %v, want an error saying it was released", err)
	}
	m, fs = resident(host, "elsewhere")
	fs.fail = errors.New("device lost")
	if err := m.Host(); err == nil || !strings.Contains(err.Error(), "device lost") || m.H != nil {
		t.Errorf("a failing copy: got %v (H %v), want the copy's error and no steps", err, m.H != nil)
	}
}
