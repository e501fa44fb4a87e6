package ode

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckEventJob checks the error an engine without save times under
// events returns: it wraps ErrNoEvents (an engine's limit: callers fall
// back to the CPU engine on it), not ErrInput, and says what to do; a job
// without events, or without save times, passes.
func TestCheckEventJob(t *testing.T) {
	withEvents := &Plan{Events: &EventPlan{}}
	for _, c := range []struct {
		name string
		j    Job
		fail bool
	}{
		{"events and saves", Job{Plan: withEvents, SaveAt: []float64{0.5}}, true},
		{"events alone", Job{Plan: withEvents}, false},
		{"saves alone", Job{Plan: &Plan{}, SaveAt: []float64{0.5}}, false},
	} {
		err := CheckEventJob(&c.j)
		if (err != nil) != c.fail {
			t.Errorf("%s: %v, want an error %t", c.name, err, c.fail)
			continue
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrNoEvents) || errors.Is(err, ErrInput) {
			t.Errorf("%s: %v wraps ErrNoEvents %t, ErrInput %t; want ErrNoEvents alone", c.name, err, errors.Is(err, ErrNoEvents), errors.Is(err, ErrInput))
		}
		if !strings.Contains(err.Error(), `use the "cpu" engine`) {
			t.Errorf("%s: %q does not say which engine runs it", c.name, err)
		}
	}
}
