package optim

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/gradsolve-go/gradsolve/internal/exactjson"
)

// Identification of state files.
const (
	StateFormat  = "gradsolve/optim"
	StateVersion = 1
)

// State is an optimiser's state, as saved by SaveState: what Step has
// accumulated, without the hyperparameters. In JSON:
//
//	format   "gradsolve/optim"
//	version  1
//	kind     the optimiser: "adam", "adamw" or "sgd"
//	step     the number of steps taken
//	n        the length of the parameter vector (0 before the first step)
//	moments  the moment vectors by name, each of length n: "m" and "v"
//	         for Adam and AdamW, "b" for SGD with momentum
type State struct {
	Format  string            `json:"format"`
	Version int               `json:"version"`
	Kind    string            `json:"kind"`
	Step    int               `json:"step"`
	N       int               `json:"n"`
	Moments map[string]Floats `json:"moments"`
}

// check reports whether s is a state of the given kind.
func (s *State) check(kind string) error {
	if s == nil {
		return fmt.Errorf("optim: nil state")
	}
	if s.Kind != kind {
		return fmt.Errorf("optim: the state is of a %q optimiser, not %q", s.Kind, kind)
	}
	if s.Step < 0 || s.N < 0 {
		return fmt.Errorf("optim: %s state: step %d and n %d must be non-negative", kind, s.Step, s.N)
	}
	return nil
}

func (s *moments) state(kind string) *State {
	st := &State{Kind: kind, Step: s.t, N: len(s.m), Moments: map[string]Floats{}}
	if s.m != nil {
		st.Moments["m"] = append(Floats(nil), s.m...)
		st.Moments["v"] = append(Floats(nil), s.v...)
	}
	return st
}

func (s *moments) set(kind string, st *State) error {
	if err := st.check(kind); err != nil {
		return err
	}
	m, okm := st.Moments["m"]
	v, okv := st.Moments["v"]
	if okm != okv || (okm && (len(m) != st.N || len(v) != st.N)) {
		return fmt.Errorf("optim: %s state: moments m and v must both be present with length n = %d", kind, st.N)
	}
	*s = moments{t: st.Step}
	if okm {
		s.m = append([]float64(nil), m...)
		s.v = append([]float64(nil), v...)
	}
	return nil
}

// SaveState writes o's state to w as one JSON object (see State).
func SaveState(w io.Writer, o Optimizer) error {
	s := o.State()
	s.Format, s.Version = StateFormat, StateVersion
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(s)
}

// LoadState reads a state written by SaveState from r and sets it on o.
// It returns an error if r does not hold a state of version 1 of o's
// kind.
func LoadState(r io.Reader, o Optimizer) error {
	var s State
	if err := json.NewDecoder(r).Decode(&s); err != nil {
		return fmt.Errorf("optim: reading state: %w", err)
	}
	if s.Format != StateFormat || s.Version != StateVersion {
		return fmt.Errorf("optim: state has format %q version %d; want %q version %d", s.Format, s.Version, StateFormat, StateVersion)
	}
	return o.SetState(&s)
}

// Floats is a []float64 that encodes to JSON exactly: finite values as
// numbers in their shortest round-trip form, NaN and ±Inf as the strings
// "NaN", "+Inf" and "-Inf".
type Floats = exactjson.Floats
