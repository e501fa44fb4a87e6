package progress

import (
	"bytes"
	"math"
	"strings"
	"sync"
	"testing"
)

func TestNewChoosesQuiet(t *testing.T) {
	var buf bytes.Buffer
	for _, tc := range []struct {
		name string
		s    *Settings
		nop  bool
	}{
		{"quiet", &Settings{Quiet: true, Writer: &buf, Force: true}, true},
		{"not a terminal", &Settings{Writer: &buf}, true},
		{"forced", &Settings{Writer: &buf, Force: true}, false},
	} {
		_, isNop := New(10, tc.s).(Nop)
		if isNop != tc.nop {
			t.Errorf("Case %s: Nop = %v, want %v", tc.name, isNop, tc.nop)
		}
	}
}

func TestTextBar(t *testing.T) {
	var buf bytes.Buffer
	r := New(20, &Settings{Writer: &buf, Force: true, Description: "fit"})
	for k := 1; k <= 20; k++ {
		r.Report(k, 1/float64(k))
	}
	r.Finish()
	r.Report(3, 1) // ignored after Finish
	out := buf.String()
	for _, want := range []string{"fit", "loss 0.05", "20/20", "steps/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("bar output lacks %q:\n%q", want, out)
		}
	}
}

func TestSolveFuncConcurrent(t *testing.T) {
	var buf bytes.Buffer
	r := New(1000, &Settings{Writer: &buf, Force: true, Unit: "traj"})
	f := SolveFunc(r)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := w; k <= 1000; k += 4 {
				f(k, 1000)
			}
		}()
	}
	wg.Wait()
	r.Finish()
	if !strings.Contains(buf.String(), "1000/1000") {
		t.Errorf("bar did not reach the total:\n%q", buf.String())
	}
	if got := Describe("", math.Pi); got != "loss 3.142" {
		t.Errorf("Describe = %q", got)
	}
}
