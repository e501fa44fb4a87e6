package optim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"

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

// check reports whether s is a state of the given kind with a valid step
// count and length.
func (s *State) check(kind string) error {
	if s == nil {
		return fmt.Errorf("optim: nil state")
	}
	if s.Kind != kind {
		return fmt.Errorf("optim: the state is of a %q optimiser, not %q: load it into a %s optimiser, or start this one afresh (Reset)", s.Kind, kind, s.Kind)
	}
	if s.Step < 0 {
		return fmt.Errorf("optim: %s state: step count %d is negative; the file is damaged: save the state again", kind, s.Step)
	}
	if s.N < 0 {
		return fmt.Errorf("optim: %s state: n = %d is negative; the file is damaged: save the state again", kind, s.N)
	}
	return nil
}

// checkMoment reports the first entry of moment name that is not finite
// (or, with nonNeg, negative).
func checkMoment(kind, name string, x []float64, nonNeg bool) error {
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) || (nonNeg && v < 0) {
			want := "finite"
			if nonNeg {
				want = "finite and ≥ 0 (a second moment is a mean of squares)"
			}
			return fmt.Errorf("optim: %s state: moment %s[%d] = %v, want %s; the state is damaged or came from a diverged run: save a good state again, or Reset", kind, name, i, v, want)
		}
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
	if !okm && (st.Step > 0 || st.N > 0) {
		return fmt.Errorf("optim: %s state: step %d and n = %d but no moments m and v; the file is damaged: save the state again", kind, st.Step, st.N)
	}
	if okm && st.Step == 0 && st.N > 0 {
		return fmt.Errorf("optim: %s state: moments of length %d but step count 0; the file is damaged: save the state again", kind, st.N)
	}
	for name := range st.Moments {
		if name != "m" && name != "v" {
			return fmt.Errorf("optim: %s state: unknown moment %q (want m and v)", kind, name)
		}
	}
	if err := checkMoment(kind, "m", m, false); err != nil {
		return err
	}
	if err := checkMoment(kind, "v", v, true); err != nil {
		return err
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
//
// The file must hold exactly one JSON object with only State's fields:
// trailing data (two saves concatenated, a truncated rewrite) or an
// unknown field is refused, as are moments that are not finite, a
// negative second moment and a negative step count. LoadState cannot
// know the length of the parameter vector the state is for; check it
// with CheckLen before stepping. On error o is unchanged.
func LoadState(r io.Reader, o Optimizer) error {
	var s State
	if err := exactjson.DecodeOne(r, &s, "state", "SaveState"); err != nil {
		return fmt.Errorf("optim: reading state: %w", err)
	}
	if s.Format != StateFormat || s.Version != StateVersion {
		return fmt.Errorf("optim: state has format %q version %d; want %q version %d", s.Format, s.Version, StateFormat, StateVersion)
	}
	return o.SetState(&s)
}

// CheckLen returns an error if o holds moments for a parameter vector of
// another length than n (a state saved for another model or fit): Step
// would panic on it. A fresh optimiser, or one without moments (SGD
// without momentum), fits any n.
func CheckLen(o Optimizer, n int) error {
	if s := o.State(); s.N != 0 && s.N != n {
		return fmt.Errorf("optim: the %s optimiser's state is for %d parameters, not %d: load the state saved with these parameters, or Reset the optimiser", s.Kind, s.N, n)
	}
	return nil
}

// Floats is a []float64 that encodes to JSON exactly: finite values as
// numbers in their shortest round-trip form, NaN and ±Inf as the strings
// "NaN", "+Inf" and "-Inf".
type Floats = exactjson.Floats
