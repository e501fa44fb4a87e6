// Package progress shows the progress of long work (fits, large ensembles,
// benchmarks): a bar with the loss, steps per second and the time left on
// a terminal, an updating HTML block in a notebook, and nothing otherwise.
//
// New picks the display: nothing with Settings.Quiet or when the output is
// not a terminal (a file, a pipe, CI logs); in a GoNB notebook (the
// environment variable GONB_PIPE is set) the HTML block of package
// progress/notebook, if the program imports it (a blank import
// registers it, as database/sql drivers do); otherwise, on a terminal, a
// text bar drawn by github.com/schollz/progressbar. The core of gradsolve
// never imports the notebook package, so programs that do not ask for it
// do not depend on GoNB.
//
// Reporters are safe for concurrent use: ode.Settings.Progress may be
// called from several goroutines (see SolveFunc).
package progress

import (
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Reporter shows the progress of work of a known total size.
type Reporter interface {
	// Report sets the amount of work done and the current loss; a NaN
	// loss is not shown. The display never goes back and never shows
	// more than 100% (see Count): a done below one reported before shows
	// the earlier, and from a done past the total (work that outran its
	// estimate) on, the count alone is shown.
	Report(done int, loss float64)
	// Finish ends the display; later Reports are ignored.
	Finish()
}

// Settings configure New. The zero value means the defaults.
type Settings struct {
	// Quiet shows nothing.
	Quiet bool
	// Writer receives the terminal bar; nil means os.Stderr. A writer
	// that is not a terminal shows nothing (unless Force is set).
	Writer io.Writer
	// Force draws the text bar even if Writer is not a terminal (for
	// tests and logs that want it).
	Force bool
	// Description names the work, as "fit"; Unit names its steps, as
	// "steps" (the default) or "traj".
	Description, Unit string
}

// NotebookFunc makes a notebook reporter; see RegisterNotebook.
type NotebookFunc func(total int, s *Settings) Reporter

var (
	notebookMu sync.Mutex
	notebook   NotebookFunc
)

// RegisterNotebook makes New use f inside a notebook (GONB_PIPE set).
// Package progress/notebook calls it from its init function. A second
// registration replaces the first.
func RegisterNotebook(f NotebookFunc) {
	notebookMu.Lock()
	defer notebookMu.Unlock()
	notebook = f
}

// InNotebook reports whether the program runs inside a GoNB notebook.
func InNotebook() bool { return os.Getenv("GONB_PIPE") != "" }

// Count is the work a display shows: Done, the largest amount reported
// (at least 0), of Total; a Total ≤ 0 is unknown (a count without a
// percentage). The zero value is unknown work, none done.
type Count struct {
	Done, Total int
}

// Set reports done units of work: Done becomes the larger of Done and
// done, and a known Total that Done passes becomes unknown (0): the work
// outran its estimate (more steps than planned, a resumed fit's count of
// all its steps), so a display shows the count alone, never more than
// 100%. It reports whether Total changed.
func (c *Count) Set(done int) (changed bool) {
	c.Done = max(c.Done, done)
	if c.Total > 0 && c.Done > c.Total {
		c.Total = 0
		return true
	}
	return false
}

// New returns a reporter for total units of work, chosen as the package
// doc says; a total ≤ 0 is unknown (a count with a spinner).
func New(total int, s *Settings) Reporter {
	var set Settings
	if s != nil {
		set = *s
	}
	if set.Quiet {
		return Nop{}
	}
	if set.Unit == "" {
		set.Unit = "steps"
	}
	if InNotebook() {
		notebookMu.Lock()
		nb := notebook
		notebookMu.Unlock()
		if nb != nil {
			return nb(total, &set)
		}
	}
	w := set.Writer
	if w == nil {
		w = os.Stderr
	}
	if !set.Force && !IsTerminal(w) {
		return Nop{}
	}
	return newText(total, w, &set, 100*time.Millisecond)
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// Nop is a Reporter that shows nothing.
type Nop struct{}

// Report does nothing.
func (Nop) Report(int, float64) {}

// Finish does nothing.
func (Nop) Finish() {}

// text is the terminal bar.
type text struct {
	mu    sync.Mutex
	bar   *progressbar.ProgressBar
	opts  []progressbar.Option // bar's, for a new bar past the total
	desc  string
	count Count
	done  bool
}

// newText returns a text bar drawing at most once every throttle.
func newText(total int, w io.Writer, s *Settings, throttle time.Duration) *text {
	if total <= 0 {
		total = -1 // (progressbar's unknown total: a spinner)
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(s.Description),
		progressbar.OptionSetWidth(24),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString(s.Unit),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(throttle),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	}
	return &text{bar: progressbar.NewOptions(total, opts...), opts: opts, desc: s.Description, count: Count{Total: total}}
}

func (t *text) Report(done int, loss float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	if t.count.Set(done) {
		// The work passed its total: the count alone, with a spinner;
		// on a line of its own where the bar drew its full line already
		// (progressbar ends a bar that reaches its total).
		if t.bar.IsFinished() {
			// (Its first frame with the count: none at 0.)
			t.bar = progressbar.NewOptions(-1, append(t.opts, progressbar.OptionSetRenderBlankState(false))...)
			_ = t.bar.Set(t.count.Done)
		} else {
			t.bar.ChangeMax(-1)
		}
	}
	if !math.IsNaN(loss) {
		t.bar.Describe(Describe(t.desc, loss))
	}
	_ = t.bar.Set(t.count.Done)
}

func (t *text) Finish() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	t.done = true
	_ = t.bar.Finish()
}

// Describe returns the description of a step with the given loss, as
// "fit  loss 1.234e-05".
func Describe(desc string, loss float64) string {
	if desc == "" {
		return fmt.Sprintf("loss %.4g", loss)
	}
	return fmt.Sprintf("%s  loss %.4g", desc, loss)
}

// SolveFunc returns a function for ode.Settings.Progress that reports
// to r: it may be called from several goroutines and keeps the largest
// done seen, so the display never goes backwards.
func SolveFunc(r Reporter) func(done, total int) {
	var mu sync.Mutex
	last := 0
	return func(done, _ int) {
		mu.Lock()
		if done > last {
			last = done
		}
		d := last
		mu.Unlock()
		r.Report(d, math.NaN())
	}
}
