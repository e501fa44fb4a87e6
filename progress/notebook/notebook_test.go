package notebook

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestHTML(t *testing.T) {
	p := NewProgress(10, nil).(*Progress)
	p.desc = "fit <1>"
	got := p.html(5, 0.25, p.start.Add(time.Second))
	for _, want := range []string{`<progress value="5" max="10">`, "loss 0.25", "5 steps/s", "ETA 1s", "fit &lt;1&gt;"} {
		if !strings.Contains(got, want) {
			t.Errorf("block lacks %q: %s", want, got)
		}
	}
	if got := p.html(10, math.NaN(), p.start.Add(time.Second)); strings.Contains(got, "loss") || strings.Contains(got, "ETA") {
		t.Errorf("final block shows a NaN loss or an ETA: %s", got)
	}
	// Outside a notebook these do nothing and must not fail.
	p.Report(3, 1)
	p.Finish()
	if err := Display(struct{}{}); err == nil {
		t.Error("Display of a value without PNG/SVG/HTML did not fail")
	}
}
