package progress

import (
	"bytes"
	"math"
	"regexp"
	"strconv"
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

// TestTextBarBounds checks the text bar's frames for reports past the
// total (more steps than planned, a resumed fit's absolute step count),
// reports that go back, negative ones and an unknown total (≤ 0): no
// frame shows more than 100% or a count past its total, the count never
// goes back, and the last frame before Finish shows the largest count
// reported (without a total once the work passed it). Before the fix, 50 steps of a bar of 10 drew "500%", a
// report of 3 after 8 drew the bar back to 30%, and a total of 0 stayed
// at "0/0" whatever was reported.
func TestTextBarBounds(t *testing.T) {
	pct := regexp.MustCompile(`(\d+)%`)
	count := regexp.MustCompile(`\((-?\d+)/(\d+|-)`)
	for _, tc := range []struct {
		name    string
		total   int
		reports []int
		last    string // the count the last frame before Finish shows
	}{
		{"past the total", 10, []int{5, 50, 51}, "51/-"},
		{"reached, then past the total", 10, []int{5, 10, 50, 51}, "51/-"},
		{"resumed at 40 of 10", 10, []int{41, 42}, "42/-"},
		{"backwards", 10, []int{8, 3, 9}, "9/10"},
		{"negative", 10, []int{-2, 4}, "4/10"},
		{"unknown total 0", 0, []int{3, 5}, "5/-"},
		{"unknown total -1", -1, []int{3, 5}, "5/-"},
	} {
		var buf bytes.Buffer
		r := newText(tc.total, &buf, &Settings{Description: "fit", Unit: "steps"}, 0)
		for _, d := range tc.reports {
			r.Report(d, 1)
		}
		before := buf.String()
		r.Finish()
		frames := strings.Split(buf.String(), "\r")
		prev := -1
		for _, f := range frames {
			for _, m := range pct.FindAllStringSubmatch(f, -1) {
				if p, _ := strconv.Atoi(m[1]); p > 100 {
					t.Errorf("Case %s: a frame shows %d%%: %q", tc.name, p, f)
				}
			}
			m := count.FindStringSubmatch(f)
			if m == nil {
				continue
			}
			d, _ := strconv.Atoi(m[1])
			if total, err := strconv.Atoi(m[2]); err == nil && d > total {
				t.Errorf("Case %s: a frame shows %d of %d: %q", tc.name, d, total, f)
			}
			if d < prev {
				t.Errorf("Case %s: the count went back from %d to %d: %q", tc.name, prev, d, f)
			}
			prev = d
		}
		if fr := strings.Split(before, "\r"); !strings.Contains(before, "("+tc.last) {
			t.Errorf("Case %s: the frames before Finish do not show %s; the last: %q", tc.name, tc.last, fr[len(fr)-1])
		}
	}
}
