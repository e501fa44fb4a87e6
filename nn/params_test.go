package nn

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestMLPParams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		m     MLP
		names []string
	}{
		{"dense", MLP{{In: 3, Out: 4}}, []string{"layer0.W", "layer0.b"}},
		{"2-16-16-1", NewMLP([]int{2, 16, 16, 1}, Tanh, Softplus),
			[]string{"layer0.W", "layer0.b", "layer1.W", "layer1.b", "layer2.W", "layer2.b"}},
	} {
		s := tc.m.Params()
		if s.Len() != tc.m.NumParams() {
			t.Errorf("Case %s: Len() = %d, want NumParams() = %d", tc.name, s.Len(), tc.m.NumParams())
		}
		var got []string
		for _, p := range s.Params() {
			got = append(got, p.Name)
		}
		if !slices.Equal(got, tc.names) {
			t.Errorf("Case %s: names: Want: %v, Got: %v.", tc.name, tc.names, got)
		}
		// The views cover the flat vector exactly once: mark every index
		// each view touches, through the view itself.
		flat := make([]float64, s.Len())
		for _, p := range s.Params() {
			for i := range p.View(flat) {
				p.View(flat)[i]++
			}
		}
		for i, c := range flat {
			if c != 1 {
				t.Fatalf("Case %s: flat[%d] is covered %v times, want once", tc.name, i, c)
			}
		}
		// The shapes match the documented layout: layer k's W is [Out, In]
		// and starts where layer k−1's b ends.
		off := 0
		for k, l := range tc.m {
			w, _ := s.Lookup("layer" + string(rune('0'+k)) + ".W")
			b, _ := s.Lookup("layer" + string(rune('0'+k)) + ".b")
			if !slices.Equal(w.Shape, []int{l.Out, l.In}) || w.Off != off || !slices.Equal(b.Shape, []int{l.Out}) || b.Off != off+l.Out*l.In {
				t.Errorf("Case %s: layer %d: W %+v b %+v; want W [%d %d] at %d, b [%d] at %d", tc.name, k, w, b, l.Out, l.In, off, l.Out, off+l.Out*l.In)
			}
			off += l.NumParams()
		}
	}
}

func TestSetAddPanics(t *testing.T) {
	t.Parallel()
	var s Set
	s.Add("a", 2, 3)
	for _, f := range []func(){
		func() { s.Add("a", 1) },
		func() { s.Add("", 1) },
		func() { s.Add("c", 0) },
		func() { s.View(make([]float64, 5), "a") },
		func() { s.View(make([]float64, 6), "zz") },
	} {
		if !panics(f) {
			t.Error("did not panic")
		}
	}
	if v := s.View([]float64{0, 1, 2, 3, 4, 5}, "a"); len(v) != 6 || cap(v) != 6 {
		t.Errorf("View = %v (cap %d)", v, cap(v))
	}
}

func TestSaveLoad(t *testing.T) {
	t.Parallel()
	m := NewMLP([]int{2, 16, 16, 1}, Tanh, Softplus)
	s := m.Params()
	w := m.Init(nil, rand.New(rand.NewPCG(1, 2)))
	// Values that a decimal format with fixed digits would not keep.
	w[0], w[1], w[2] = math.Nextafter(0.1, 1), -math.SmallestNonzeroFloat64, math.Copysign(0, -1)
	w[len(w)-1] = math.Inf(-1)
	var buf bytes.Buffer
	if err := Save(&buf, s, w); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	got, err := Load(nil, strings.NewReader(text), s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range w {
		if math.Float64bits(got[i]) != math.Float64bits(w[i]) {
			t.Fatalf("w[%d]: saved %v, loaded %v", i, w[i], got[i])
		}
	}
	if !strings.Contains(text, `"name": "layer1.W"`) || !strings.Contains(text, `"shape": [`) {
		t.Errorf("the file lacks names or shapes:\n%.300s", text)
	}

	// A file for another network is refused, with dst untouched.
	other := NewMLP([]int{2, 8, 1}, Tanh, Softplus).Params()
	dst := make([]float64, other.Len())
	if _, err := Load(dst, strings.NewReader(text), other); err == nil {
		t.Error("weights of a 2-16-16-1 MLP loaded into a 2-8-1 set")
	}
	for _, v := range dst {
		if v != 0 {
			t.Fatal("a failed Load wrote to dst")
		}
	}
	if _, err := Load(nil, strings.NewReader(`{"format": "x", "version": 1}`), s); err == nil {
		t.Error("a file of another format was accepted")
	}
	// Damaged files are refused with an error saying how.
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "", "the input is empty"},
		{"truncated", text[:len(text)/2], "cut short"},
		{"two saves", text + text, "more after the first weights"},
		{"not JSON", "W = 1", "not a weights file"},
		{"unknown field", strings.Replace(text, `"format"`, `"formats": 1, "format"`, 1), "formats"},
	} {
		if _, err := Load(nil, strings.NewReader(tc.text), s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
