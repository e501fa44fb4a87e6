// Package notebook shows gradsolve's progress and plots in a GoNB
// notebook (github.com/janpfeifer/gonb): importing it, even blank,
// registers an HTML progress block with package progress, and Display
// shows anything with a PNG, SVG or HTML method (plots and fit results).
// Outside a notebook every call does nothing.
package notebook

import (
	"fmt"
	"html"
	"math"
	"sync"
	"time"

	"github.com/janpfeifer/gonb/gonbui"

	"github.com/gradsolve-go/gradsolve/progress"
)

func init() { progress.RegisterNotebook(NewProgress) }

// Progress is a progress block: one <progress> element with the
// description, count, loss, rate and time left, updated in place at most
// ten times a second, and replaced by a final line on Finish.
type Progress struct {
	mu         sync.Mutex
	id         string
	count      progress.Count
	desc, unit string
	start      time.Time
	last       time.Time
	done       bool
}

// NewProgress returns a progress block for total units of work. s may be
// nil; its Description and Unit are used.
func NewProgress(total int, s *progress.Settings) progress.Reporter {
	p := &Progress{id: gonbui.UniqueID(), count: progress.Count{Total: total}, unit: "steps", start: time.Now()}
	if s != nil {
		p.desc = s.Description
		if s.Unit != "" {
			p.unit = s.Unit
		}
	}
	return p
}

// Report updates the block (at most every 100 ms, and always at the
// end). As the text bar, it never goes back and never shows more than
// 100%: past its total it shows the count alone (progress.Count).
func (p *Progress) Report(done int, loss float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	changed := p.count.Set(done)
	now := time.Now()
	if !changed && p.count.Done < p.count.Total && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	gonbui.UpdateHTML(p.id, p.html(loss, now))
}

// html returns the block's markup for the work done so far with the given
// loss at time now: a bar of the total, or, where the total is unknown
// (or the work passed it), an indeterminate bar and the count alone.
func (p *Progress) html(loss float64, now time.Time) string {
	done, total := p.count.Done, p.count.Total
	el := now.Sub(p.start).Seconds()
	rate := float64(done) / math.Max(el, 1e-9)
	var s string
	if total > 0 {
		s = fmt.Sprintf(`<div style="font-family:monospace">%s <progress value="%d" max="%d"></progress> %d/%d`,
			html.EscapeString(p.desc), done, total, done, total)
	} else {
		s = fmt.Sprintf(`<div style="font-family:monospace">%s <progress></progress> %d %s`,
			html.EscapeString(p.desc), done, html.EscapeString(p.unit))
	}
	if !math.IsNaN(loss) {
		s += fmt.Sprintf(" &middot; loss %.4g", loss)
	}
	s += fmt.Sprintf(" &middot; %.3g %s/s", rate, html.EscapeString(p.unit))
	if done > 0 && done < total {
		left := time.Duration(float64(total-done) / rate * float64(time.Second))
		s += " &middot; ETA " + left.Round(time.Second/10).String()
	}
	return s + "</div>"
}

// Finish replaces the block with its final state.
func (p *Progress) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.done = true
	gonbui.UpdateHTML(p.id, fmt.Sprintf(`<div style="font-family:monospace">%s done in %v</div>`,
		html.EscapeString(p.desc), time.Since(p.start).Round(time.Millisecond)))
}

// Display shows v in the notebook: its PNG() []byte if it has one, else
// its SVG() string, else its HTML() string. It returns an error if v has
// none of them.
func Display(v any) error {
	switch x := v.(type) {
	case interface{ PNG() []byte }:
		gonbui.DisplayPNG(x.PNG())
	case interface{ SVG() string }:
		gonbui.DisplaySVG(x.SVG())
	case interface{ HTML() string }:
		gonbui.DisplayHTML(x.HTML())
	default:
		return fmt.Errorf("notebook: %T has no PNG, SVG or HTML method", v)
	}
	return nil
}
