package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestEventsSuite runs the events suite on the CPU engine on a small
// ensemble: a row per problem, the closed forms met, JSON rows that hold
// the samples' values and gradients, and whole calls with Gradient.Omit
// and with KeepGrads timed, in a row (untraced, and traced apart) and
// after the other calls (the suite checks their results against the full
// call's).
func TestEventsSuite(t *testing.T) {
	t.Parallel()
	for _, asJSON := range []bool{false, true} {
		var buf bytes.Buffer
		rows, err := RunEvents(&buf, GPUConfig{N: []int{64}, RelTol: []float64{1e-8}, Reps: 1, Engine: "cpu", JSON: asJSON})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 || rows[0].Problem != "ball" || rows[1].Problem != "pk" {
			t.Fatalf("rows %+v, want ball and pk", rows)
		}
		for _, r := range rows {
			if r.ValueErr > 1e-6 || r.GradErr > 1e-5 || len(r.Values) != eventsSamples || len(r.Grads) != eventsSamples {
				t.Errorf("%s: value error %.2g, gradient error %.2g, %d values, %d gradients", r.Problem, r.ValueErr, r.GradErr, len(r.Values), len(r.Grads))
			}
			if !(r.GradKeepCall > 0) || !(r.GradOmitCall > 0) || !(r.GradKeepMixedCall > 0) || !(r.GradKeepTracedCall > 0) {
				t.Errorf("%s: whole calls with Gradient.Omit %.3g ms, with KeepGrads %.3g ms (after the others %.3g, traced %.3g)", r.Problem, r.GradOmitCall, r.GradKeepCall, r.GradKeepMixedCall, r.GradKeepTracedCall)
			}
			if r.Problem == "ball" && !(r.Events >= 2 && r.Events <= 4) || r.Problem == "pk" && r.Events != 1 {
				t.Errorf("%s: %.2f events per trajectory", r.Problem, r.Events)
			}
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if asJSON {
			for _, l := range lines {
				var r EventsRow
				if err := json.Unmarshal([]byte(l), &r); err != nil || r.N != 64 {
					t.Errorf("JSON row %q: %v", l, err)
				}
			}
		} else if len(lines) != 4 {
			t.Errorf("table of %d lines, want a title, a header and 2 rows:\n%s", len(lines), buf.String())
		}
	}
}
