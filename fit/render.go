package fit

import (
	"fmt"
	"html"
	"strings"

	"github.com/gradsolve-go/gradsolve/plot"
)

// Figure returns the loss curve of the fit: History against the step.
func (r *Result) Figure() (*plot.Figure, error) {
	fig, err := plot.Loss(r.History)
	if err != nil {
		return nil, err
	}
	fig.Plot.Title.Text = fmt.Sprintf("fit: %d steps, %v", r.Steps, r.Status)
	return fig, nil
}

// PNG returns the loss curve as PNG bytes, nil if there is no history
// (notebook kernels show values with this method).
func (r *Result) PNG() []byte {
	fig, err := r.Figure()
	if err != nil {
		return nil
	}
	return fig.PNG()
}

// HTML returns a summary table (status, steps, losses, time, and each
// fit's P values for up to 16 fits) followed by the loss curve.
func (r *Result) HTML() string {
	var b strings.Builder
	b.WriteString(`<table><tr><th align="left">status</th><td>` + html.EscapeString(r.Status.String()) + "</td></tr>")
	row := func(k, v string) { fmt.Fprintf(&b, `<tr><th align="left">%s</th><td>%s</td></tr>`, k, v) }
	row("steps", fmt.Sprint(r.Steps))
	if len(r.History) > 0 {
		row("first loss", fmt.Sprintf("%.6g", r.History[0]))
	}
	row("final loss", fmt.Sprintf("%.6g", r.FinalLoss))
	row("best loss", fmt.Sprintf("%.6g (step %d)", r.BestLoss, r.BestStep))
	row("meshes recorded", fmt.Sprint(r.Records))
	row("time", r.Time.String())
	if r.lay.np > 0 && r.X != nil {
		for k := 0; k < r.lay.fits && k < 16; k++ {
			v := fmt.Sprintf("%.6g", r.FitP(k))
			if k < len(r.FitStatus) && r.FitStatus[k] == Failed {
				v += " (" + html.EscapeString(r.FitErr[k].Error()) + ")"
			}
			row(fmt.Sprintf("fit %d: P", k), v)
		}
	}
	b.WriteString("</table>")
	if fig, err := r.Figure(); err == nil {
		b.WriteString(fig.HTML())
	}
	return b.String()
}
