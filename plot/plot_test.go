package plot

import (
	"bytes"
	"errors"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// circle is a solution of 2 trajectories on circles of radius 1 and 2,
// saved at 50 times.
func circle() *ode.Solution {
	K := 50
	sol := &ode.Solution{N: 2, Dim: 2, SaveAt: make([]float64, K), Ys: make([]float64, 2*K*2)}
	for k := range K {
		t := 2 * math.Pi * float64(k) / float64(K-1)
		sol.SaveAt[k] = t
		for i := range 2 {
			r := float64(i + 1)
			sol.Ys[(i*K+k)*2], sol.Ys[(i*K+k)*2+1] = r*math.Cos(t), r*math.Sin(t)
		}
	}
	return sol
}

func TestFigures(t *testing.T) {
	t.Parallel()
	sol := circle()
	obs := append([]float64(nil), sol.Ys...)
	obs[3] = math.NaN()
	mk := map[string]func() (*Figure, error){
		"trajectories": func() (*Figure, error) { return Trajectories(sol, nil, nil, []string{"x", "y"}) },
		"phase":        func() (*Figure, error) { return Phase(sol, []int{1}, 0, 1, nil) },
		"loss":         func() (*Figure, error) { return Loss([]float64{1, 0.1, 1e-3, 1e-5}) },
		"loss linear":  func() (*Figure, error) { return Loss([]float64{1, 0, -1}) },
		// A constant loss on the logarithmic axis, one step, failed steps.
		"loss constant": func() (*Figure, error) { return Loss([]float64{1, 1}) },
		"loss one step": func() (*Figure, error) { return Loss([]float64{3e-300}) },
		"loss gaps": func() (*Figure, error) {
			return Losses([]string{"a", "b"}, [][]float64{{1, math.NaN(), 0.1, math.Inf(1), 0.01}, {math.NaN(), 2, 2}})
		},
		"fit": func() (*Figure, error) { return FitVsObserved(sol, obs, nil, []int{0}, nil) },
	}
	for name, f := range mk {
		fig, err := f()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b := fig.PNG()
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: PNG does not decode: %v", name, err)
		}
		if w := img.Bounds().Dx(); w < 300 {
			t.Errorf("%s: PNG is %d pixels wide", name, w)
		}
		if svg := fig.SVG(); !strings.Contains(svg, "<svg") {
			t.Errorf("%s: SVG lacks <svg", name)
		}
		if h := fig.HTML(); !strings.HasPrefix(h, `<img src="data:image/png;base64,`) {
			t.Errorf("%s: HTML = %.40q", name, h)
		}
	}
}

func TestSave(t *testing.T) {
	t.Parallel()
	fig, err := Loss([]float64{3, 2, 1})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"a.png", "a.svg", "a.pdf"} {
		p := filepath.Join(dir, name)
		if err := fig.Save(p); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(p); err != nil || st.Size() < 100 {
			t.Errorf("%s: %v (%v)", name, err, st)
		}
	}
	if err := fig.Save(filepath.Join(dir, "noext")); err == nil {
		t.Error("a file name without an extension was accepted")
	}
}

// TestSaveKeepsFile checks that Save leaves an existing file as it was
// (and no temporary file) when the format is unsupported or the file
// cannot be written, and replaces it whole otherwise.
func TestSaveKeepsFile(t *testing.T) {
	t.Parallel()
	fig, err := Loss([]float64{3, 2, 1})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"old.txt", "old.csv", "old"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := fig.Save(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("Save(%s): error %v, want one naming the file", name, err)
		}
		if b, _ := os.ReadFile(p); string(b) != "old\n" {
			t.Errorf("Save(%s) with an unsupported format changed the file to %.20q", name, b)
		}
	}
	p := filepath.Join(dir, "old.png")
	os.WriteFile(p, []byte("old\n"), 0o644)
	if err := fig.Save(p); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("Save(%s): %.20q, want a PNG", p, b)
	}
	if err := fig.Save(filepath.Join(dir, "missing", "x.png")); err == nil {
		t.Error("Save into a missing directory: no error")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left", e.Name())
		}
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	sol := circle()
	noSave := &ode.Solution{N: 1, Dim: 2, Y: []float64{1, 2}}
	for name, f := range map[string]func() (*Figure, error){
		"no saved states": func() (*Figure, error) { return Trajectories(noSave, nil, nil, nil) },
		"trajectory":      func() (*Figure, error) { return Trajectories(sol, []int{2}, nil, nil) },
		"component":       func() (*Figure, error) { return Phase(sol, nil, 0, 2, nil) },
		"observed":        func() (*Figure, error) { return FitVsObserved(sol, []float64{1}, nil, nil, nil) },
		"labels":          func() (*Figure, error) { return Losses([]string{"a"}, nil) },
		"empty":           func() (*Figure, error) { return Loss(nil) },
		"no finite loss":  func() (*Figure, error) { return Loss([]float64{math.NaN(), math.Inf(1)}) },
	} {
		if _, err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// heldSaves holds saved states apart, as a GPU engine keeps them in
// device memory (ode.Settings.KeepSaves).
type heldSaves struct {
	ys       []float64
	released bool
}

func (h *heldSaves) Engine() string { return "held" }
func (h *heldSaves) Owner() any     { return h }
func (h *heldSaves) Released() bool { return h.released }
func (h *heldSaves) Release()       { h.released = true }
func (h *heldSaves) CopyTo(dst []float64) error {
	if h.released {
		return errors.New("released")
	}
	copy(dst, h.ys)
	return nil
}

// TestResidentSaves checks that a plot of a solution whose saves an
// engine holds copies them to the host first (Solution.HostSaves) and
// draws what the host solution draws, and that released saves give an
// error naming the fix.
func TestResidentSaves(t *testing.T) {
	t.Parallel()
	want := circle()
	sol := *want
	h := &heldSaves{ys: want.Ys}
	sol.Ys, sol.Resident = nil, h
	if _, err := Trajectories(&sol, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if sol.Resident != nil || !h.released || !slices.Equal(sol.Ys, want.Ys) {
		t.Errorf("the plot did not bring the saves to the host: Resident %v, released %v", sol.Resident, h.released)
	}
	gone := *want
	gone.Ys, gone.Resident = nil, &heldSaves{released: true}
	if _, err := Phase(&gone, nil, 0, 1, nil); err == nil || !strings.Contains(err.Error(), "released") {
		t.Errorf("released saves: %v, want an error", err)
	}
}

// TestLegendFits checks that a figure of many components lists at most
// MaxLegend legend entries, the last saying how many more there are, so
// that the legend stays inside the figure (a Lorenz-96 state of 64
// components once ran it off the bottom, over the data).
func TestLegendFits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dim        int
		listed     int    // components named in the legend
		more       string // the "and N more" line, or "" for none
		unexpected string // a component that must not be named
	}{
		{dim: 3, listed: 3},
		{dim: MaxLegend, listed: MaxLegend},
		{dim: MaxLegend + 1, listed: MaxLegend - 1, more: "and 2 more", unexpected: "comp7"},
		{dim: 64, listed: MaxLegend - 1, more: "and 58 more", unexpected: "comp63"},
	} {
		K := 5
		sol := &ode.Solution{N: 1, Dim: tc.dim, SaveAt: []float64{0, 1, 2, 3, 4}, Ys: make([]float64, K*tc.dim)}
		names := make([]string, tc.dim)
		for c := range names {
			names[c] = fmt.Sprintf("comp%d", c)
			for k := range K {
				sol.Ys[k*tc.dim+c] = float64(c * k)
			}
		}
		fig, err := Trajectories(sol, nil, nil, names)
		if err != nil {
			t.Fatal(err)
		}
		svg := fig.SVG()
		for c := range tc.listed {
			if !strings.Contains(svg, ">"+names[c]+"<") {
				t.Errorf("dim %d: the legend lacks %s", tc.dim, names[c])
			}
		}
		if tc.unexpected != "" && strings.Contains(svg, ">"+tc.unexpected+"<") {
			t.Errorf("dim %d: the legend lists %s, beyond MaxLegend = %d entries", tc.dim, tc.unexpected, MaxLegend)
		}
		if tc.more != "" && !strings.Contains(svg, ">"+tc.more+"<") {
			t.Errorf("dim %d: the legend lacks %q", tc.dim, tc.more)
		}
		if tc.more == "" && strings.Contains(svg, " more<") {
			t.Errorf("dim %d: the legend says there are more entries", tc.dim)
		}
	}
}

// TestNonFiniteStates checks figures of solutions with NaN saved states,
// as ode returns them for a failed trajectory (AllowFailures) and for
// save times after a terminal event, and with infinite observations: the
// finite states are drawn (the others are gaps) and the axes span them
// only; a figure with nothing finite to draw, or of no loss history, is
// an error naming why. Before, every such figure failed with gonum's
// "plotter: NaN data point", and Losses(nil, nil) panicked.
func TestNonFiniteStates(t *testing.T) {
	t.Parallel()
	nan, inf := math.NaN(), math.Inf(1)
	sol := circle()
	K := len(sol.SaveAt)
	for k := range K {
		if k >= 30 { // trajectory 0 stopped by a terminal event at SaveAt[29]
			sol.Ys[k*2], sol.Ys[k*2+1] = nan, nan
		}
		sol.Ys[(K+k)*2], sol.Ys[(K+k)*2+1] = nan, nan // trajectory 1 failed
	}
	obs := slices.Clone(sol.Ys)
	obs[4], obs[6] = inf, -inf
	allNaN := circle()
	for i := range allNaN.Ys {
		allNaN.Ys[i] = nan
	}
	for _, c := range []struct {
		name string
		fig  func() (*Figure, error)
		xMax float64 // the largest x drawn, 0 for an error
		want string  // the error
	}{
		{"trajectories", func() (*Figure, error) { return Trajectories(sol, nil, nil, nil) }, sol.SaveAt[29], ""},
		{"trajectory 1 alone", func() (*Figure, error) { return Trajectories(sol, []int{1}, nil, nil) }, 0, "trajectories [1] have no finite saved state"},
		{"phase", func() (*Figure, error) { return Phase(sol, nil, 0, 1, nil) }, 1, ""},
		{"fit vs observed", func() (*Figure, error) { return FitVsObserved(sol, obs, nil, nil, nil) }, sol.SaveAt[29], ""},
		{"all NaN", func() (*Figure, error) { return Trajectories(allNaN, nil, nil, nil) }, 0, "trajectories [0 1] have no finite saved state"},
		{"phase all NaN", func() (*Figure, error) { return Phase(allNaN, nil, 0, 1, nil) }, 0, "no finite saved state"},
		{"no loss history", func() (*Figure, error) { return Losses(nil, nil) }, 0, "no loss history to draw"},
		{"Ys short", func() (*Figure, error) { s := *sol; s.Ys = s.Ys[:7]; return Trajectories(&s, nil, nil, nil) }, 0, "the solution has 7 saved values, want N·len(SaveAt)·Dim = 2·50·2 = 200"},
	} {
		var fig *Figure
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			fig, err = c.fig()
		}()
		if c.want != "" {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if x := fig.Plot.X.Max; math.Abs(x-c.xMax) > 1e-12 {
			t.Errorf("%s: the x axis ends at %v, want %v (the last finite point)", c.name, x, c.xMax)
		}
		if fig.PNG() == nil {
			t.Errorf("%s: the figure does not draw", c.name)
		}
	}
}
