package nn

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/gradsolve-go/gradsolve/internal/exactjson"
)

// Param is one named block of a flat parameter vector: Size() values
// starting at Off, read as an array of the given Shape in row-major order.
type Param struct {
	Name  string
	Shape []int // as [Out, In] for a weight matrix, [Out] for a bias
	Off   int   // offset of the first value in the flat vector
}

// Size returns the number of values of the block, the product of its
// shape (1 for an empty shape, a scalar).
func (p Param) Size() int {
	n := 1
	for _, s := range p.Shape {
		n *= s
	}
	return n
}

// View returns the block's values in flat, flat[Off:Off+Size()] (a
// sub-slice, not a copy: writes go to flat).
func (p Param) View(flat []float64) []float64 { return flat[p.Off : p.Off+p.Size() : p.Off+p.Size()] }

// Set is an ordered set of named parameter blocks that tile a flat vector
// of length Len() exactly once, in order: block k starts where block k−1
// ends. Optimisers (package optim) update the flat vector; the names and
// views are for people, files and regularisers.
type Set struct {
	params []Param
	n      int
}

// Add appends a block with the given name and shape at the end of the set
// and returns it. It panics if the name is empty or already used, or a
// dimension is less than 1.
func (s *Set) Add(name string, shape ...int) Param {
	if name == "" {
		panic("nn: Set.Add: empty name")
	}
	if _, ok := s.Lookup(name); ok {
		panic(fmt.Sprintf("nn: Set.Add: duplicate name %q", name))
	}
	for _, d := range shape {
		if d < 1 {
			panic(fmt.Sprintf("nn: Set.Add(%q, %v): dimensions must be at least 1", name, shape))
		}
	}
	p := Param{Name: name, Shape: slices.Clone(shape), Off: s.n}
	s.params = append(s.params, p)
	s.n += p.Size()
	return p
}

// Len returns the length of the flat vector the set describes.
func (s *Set) Len() int { return s.n }

// Params returns the blocks in order (a copy).
func (s *Set) Params() []Param {
	out := make([]Param, len(s.params))
	for i, p := range s.params {
		out[i] = Param{Name: p.Name, Shape: slices.Clone(p.Shape), Off: p.Off}
	}
	return out
}

// Lookup returns the block with the given name.
func (s *Set) Lookup(name string) (Param, bool) {
	for _, p := range s.params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// View returns the values of the named block in flat (a sub-slice). It
// panics if there is no such block or len(flat) != Len().
func (s *Set) View(flat []float64, name string) []float64 {
	s.checkLen("View", flat)
	p, ok := s.Lookup(name)
	if !ok {
		panic(fmt.Sprintf("nn: Set.View: no parameter %q", name))
	}
	return p.View(flat)
}

func (s *Set) checkLen(fn string, flat []float64) {
	if len(flat) != s.n {
		panic(fmt.Sprintf("nn: Set.%s: len(flat) = %d, want Len() = %d", fn, len(flat), s.n))
	}
}

// Params returns the layer's parameter set: "W" of shape [Out, In] and
// "b" of shape [Out], in the layout documented on Dense.
func (l Dense) Params() *Set {
	var s Set
	l.addParams(&s, "")
	return &s
}

func (l Dense) addParams(s *Set, prefix string) {
	s.Add(prefix+"W", l.Out, l.In)
	s.Add(prefix+"b", l.Out)
}

// Params returns the MLP's parameter set, in the layout documented on
// MLP: "layer0.W" [Out, In], "layer0.b" [Out], "layer1.W", … It panics if
// the layers do not chain.
func (m MLP) Params() *Set {
	m.check("Params")
	var s Set
	for k, l := range m {
		l.addParams(&s, fmt.Sprintf("layer%d.", k))
	}
	return &s
}

// Weights file identification.
const (
	WeightsFormat  = "gradsolve/nn"
	WeightsVersion = 1
)

// weightsFile is the JSON form written by Save.
type weightsFile struct {
	Format  string          `json:"format"`
	Version int             `json:"version"`
	Params  []weightsRecord `json:"params"`
}

type weightsRecord struct {
	Name  string           `json:"name"`
	Shape []int            `json:"shape"`
	Data  exactjson.Floats `json:"data"`
}

// Save writes the parameters flat (len s.Len()) of set s to w as one JSON
// object:
//
//	{"format": "gradsolve/nn", "version": 1, "params": [
//	  {"name": "layer0.W", "shape": [16, 2], "data": [...]},
//	  {"name": "layer0.b", "shape": [16], "data": [...]}, ...]}
//
// one record per block in the set's order, data row-major. Numbers are
// written exactly (shortest round-trip form; NaN and ±Inf as the strings
// "NaN", "+Inf", "-Inf"), so Load reads back the same bits. It panics if
// len(flat) != s.Len().
func Save(w io.Writer, s *Set, flat []float64) error {
	s.checkLen("Save", flat)
	f := weightsFile{Format: WeightsFormat, Version: WeightsVersion}
	for _, p := range s.params {
		f.Params = append(f.Params, weightsRecord{Name: p.Name, Shape: p.Shape, Data: exactjson.Floats(p.View(flat))})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(f)
}

// Load reads parameters written by Save from r into dst (len s.Len(); nil
// allocates) and returns dst. The file must hold exactly the blocks of s,
// by name and shape (in any order), and nothing else: an unknown field,
// trailing data (two saves concatenated), an empty or truncated file are
// refused too. On error Load names the first difference or the damage and
// leaves dst unchanged.
func Load(dst []float64, r io.Reader, s *Set) ([]float64, error) {
	var f weightsFile
	if err := exactjson.DecodeOne(r, &f, "weights", "Save"); err != nil {
		return dst, fmt.Errorf("nn: reading weights: %w", err)
	}
	if f.Format != WeightsFormat || f.Version != WeightsVersion {
		return dst, fmt.Errorf("nn: weights file has format %q version %d; want %q version %d", f.Format, f.Version, WeightsFormat, WeightsVersion)
	}
	if len(f.Params) != len(s.params) {
		return dst, fmt.Errorf("nn: weights file has %d parameter blocks, want %d", len(f.Params), len(s.params))
	}
	out := make([]float64, s.n)
	seen := make(map[string]bool, len(f.Params))
	for _, rec := range f.Params {
		p, ok := s.Lookup(rec.Name)
		switch {
		case !ok:
			return dst, fmt.Errorf("nn: weights file has parameter %q, which the set lacks", rec.Name)
		case seen[rec.Name]:
			return dst, fmt.Errorf("nn: weights file has parameter %q twice", rec.Name)
		case !slices.Equal(p.Shape, rec.Shape):
			return dst, fmt.Errorf("nn: parameter %q has shape %v in the file, want %v", rec.Name, rec.Shape, p.Shape)
		case len(rec.Data) != p.Size():
			return dst, fmt.Errorf("nn: parameter %q has %d values in the file, want %d", rec.Name, len(rec.Data), p.Size())
		}
		seen[rec.Name] = true
		copy(p.View(out), rec.Data)
	}
	if dst == nil {
		return out, nil
	}
	s.checkLen("Load", dst)
	copy(dst, out)
	return dst, nil
}
