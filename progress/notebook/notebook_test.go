package notebook

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestHTML(t *testing.T) {
	p := NewProgress(10, nil).(*Progress)
	p.desc = "fit <1>"
	p.count.Set(5)
	got := p.html(0.25, p.start.Add(time.Second))
	for _, want := range []string{`<progress value="5" max="10">`, "loss 0.25", "5 steps/s", "ETA 1s", "fit &lt;1&gt;"} {
		if !strings.Contains(got, want) {
			t.Errorf("block lacks %q: %s", want, got)
		}
	}
	p.count.Set(10)
	if got := p.html(math.NaN(), p.start.Add(time.Second)); strings.Contains(got, "loss") || strings.Contains(got, "ETA") {
		t.Errorf("final block shows a NaN loss or an ETA: %s", got)
	}
	// Outside a notebook these do nothing and must not fail.
	p.Report(3, 1)
	p.Finish()
	if err := Display(struct{}{}); err == nil {
		t.Error("Display of a value without PNG/SVG/HTML did not fail")
	}
}

// TestHTMLBounds checks the block for reports past its total, going back
// and of an unknown total: never a value above max nor a count past the
// total, never a count below one shown before.
func TestHTMLBounds(t *testing.T) {
	value := regexp.MustCompile(`<progress value="(\d+)" max="(\d+)">`)
	for _, tc := range []struct {
		name    string
		total   int
		reports []int
		want    string
	}{
		{"past the total", 10, []int{5, 50}, "<progress></progress> 50 steps"},
		{"backwards", 10, []int{8, 3}, `<progress value="8" max="10"></progress> 8/10`},
		{"negative", 10, []int{-2}, `<progress value="0" max="10"></progress> 0/10`},
		{"unknown total", 0, []int{3, 5}, "<progress></progress> 5 steps"},
	} {
		p := NewProgress(tc.total, nil).(*Progress)
		for _, d := range tc.reports {
			p.Report(d, math.NaN())
		}
		got := p.html(math.NaN(), p.start.Add(time.Second))
		if !strings.Contains(got, tc.want) {
			t.Errorf("Case %s: block %s, want %s", tc.name, got, tc.want)
		}
		if m := value.FindStringSubmatch(got); m != nil {
			v, _ := strconv.Atoi(m[1])
			mx, _ := strconv.Atoi(m[2])
			if v > mx {
				t.Errorf("Case %s: value %d above max %d: %s", tc.name, v, mx, got)
			}
		}
	}
}
