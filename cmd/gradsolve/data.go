package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// This file reads the observations of fit -data (the format is in
// fitHelp) and builds the loss against them.

// observations are data at save times: per trajectory, K·Dim values and
// as many weights (the number of observations of that value: 0 missing,
// more than 1 repeated), and the part of the loss that no state can
// change (the spread of repeated observations about their mean).
type observations struct {
	n, dim int
	times  []float64
	value  []float64 // [n×K×dim]: the observed value, the mean of repeated ones
	weight []float64 // [n×K×dim]
	spread []float64 // [n]: Σ (observed − mean)² over repeated observations
	count  int       // the number of observed values, repeated ones included
}

// maxDataTrajectories bounds the trajectory index of a data file before
// anything of its size is allocated; the memory check of the run bounds
// it further.
const maxDataTrajectories = 1 << 40

// readObservations reads observations of a problem with dim state
// components in the format of fitHelp from r. n, if positive, is the
// number of trajectories (-n); otherwise it is the largest index + 1.
// Errors name the line. notes are remarks for stderr: the repeated
// observations. The dense tables are allocated only after their size is
// checked against lim.
func readObservations(r io.Reader, dim, n int, lim limits) (ob *observations, notes []string, err error) {
	br := bufio.NewReader(r)
	if head, _ := br.Peek(64); looksLikeJSON(head) {
		return nil, nil, errors.New("line 1: the file is JSON; -data takes a CSV file: an optional header row, then one row per observation, traj,t,y0,... (gradsolve help fit, under Data)")
	}
	cr := csv.NewReader(br)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1 // checked here, with a clearer message
	cr.TrimLeadingSpace = true
	type row struct {
		line int
		i    int
		t    float64
		y    []float64 // NaN: missing
	}
	var rows []row
	type key struct {
		i int
		t float64
	}
	first := map[key]int{} // the line of the first row of a trajectory and time
	var repeats []string
	width := 2 + dim
	records := 0 // read so far, the header included
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, nil, fmt.Errorf("line %d: %v", pe.Line, pe.Err)
			}
			return nil, nil, err
		}
		line, _ := cr.FieldPos(0)
		records++
		if records == 1 {
			rec[0] = strings.TrimPrefix(rec[0], "\ufeff") // a byte-order mark, as spreadsheets write
		}
		if records == 1 && isHeader(rec) {
			if len(rec) != width {
				return nil, nil, fmt.Errorf("line %d: the header has %s; want %d: traj, t and the %s%s", line, count(len(rec), "column"), width, count(dim, "state component"), separatorHint(rec))
			}
			continue
		}
		if len(rec) != width {
			return nil, nil, fmt.Errorf("line %d: %s; want %d: traj, t and the %s%s", line, count(len(rec), "field"), width, count(dim, "state component"), separatorHint(rec))
		}
		i, err := parseIndex(rec[0])
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: trajectory index %v", line, err)
		}
		if n > 0 && i >= n {
			return nil, nil, fmt.Errorf("line %d: trajectory %d, but -n %d numbers the trajectories 0 to %d", line, i, n, n-1)
		}
		t, err := parseNumber(rec[1])
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: time %v", line, err)
		}
		y := make([]float64, dim)
		for c := range y {
			if strings.TrimSpace(rec[2+c]) == "" {
				y[c] = math.NaN()
				continue
			}
			if y[c], err = parseNumber(rec[2+c]); err != nil {
				return nil, nil, fmt.Errorf("line %d: component %d %v", line, c, err)
			}
		}
		k := key{i, t}
		if l, ok := first[k]; ok {
			repeats = append(repeats, fmt.Sprintf("line %d repeats trajectory %d at t = %v of line %d", line, i, t, l))
		} else {
			first[k] = line
		}
		rows = append(rows, row{line, i, t, y})
	}
	if len(rows) == 0 {
		return nil, nil, errors.New("no observations (an optional header row, then one row per observation: traj,t,y0,...)")
	}

	// The trajectories: 0 to n−1, each with a row.
	seen := map[int]int{} // trajectory → its first line
	maxI, maxLine := -1, 0
	for _, r := range rows {
		if _, ok := seen[r.i]; !ok {
			seen[r.i] = r.line
		}
		if r.i > maxI {
			maxI, maxLine = r.i, r.line
		}
	}
	if n <= 0 {
		n = maxI + 1
	}
	if len(seen) < n {
		missing := 0
		for missing < n {
			if _, ok := seen[missing]; !ok {
				break
			}
			missing++
		}
		if n == maxI+1 {
			return nil, nil, fmt.Errorf("line %d: trajectory %d, but trajectory %d has no row (the trajectories are numbered 0 to n − 1, each with a row; the largest index makes n = %d, and the file has rows of %s)", maxLine, maxI, missing, n, count(len(seen), "trajectory"))
		}
		return nil, nil, fmt.Errorf("trajectory %d has no row (-n %d: the trajectories are numbered 0 to %d, and each has a row)", missing, n, n-1)
	}

	tset := map[float64]bool{}
	for _, r := range rows {
		tset[r.t] = true
	}
	times := make([]float64, 0, len(tset))
	for t := range tset {
		times = append(times, t)
	}
	slices.Sort(times)
	K := len(times)
	cells := float64(n) * float64(K) * float64(dim)
	if need := 16 * cells; need > float64(lim.memory) {
		return nil, nil, fmt.Errorf("%d trajectories × %d times × %d components need %s for the observations, more than the %s of %s", n, K, dim, formatBytes(need), formatBytes(float64(lim.memory)), lim.source)
	}
	ob = &observations{n: n, dim: dim, times: times, value: make([]float64, n*K*dim), weight: make([]float64, n*K*dim), spread: make([]float64, n)}
	at := func(r row, c int) int {
		k, _ := slices.BinarySearch(times, r.t)
		return (r.i*K+k)*dim + c
	}
	for _, r := range rows {
		for c, v := range r.y {
			if !math.IsNaN(v) {
				ob.value[at(r, c)] += v
				ob.weight[at(r, c)]++
				ob.count++
			}
		}
	}
	if ob.count == 0 {
		return nil, nil, errors.New("no observed value: every state cell of the file is empty")
	}
	w := K * dim
	for i := range n {
		if !slices.ContainsFunc(ob.weight[i*w:(i+1)*w], func(x float64) bool { return x > 0 }) {
			return nil, nil, fmt.Errorf("line %d: trajectory %d has no observed value (its state cells are empty), so nothing fits it", seen[i], i)
		}
	}
	for j, w := range ob.weight {
		if w > 1 {
			ob.value[j] /= w
		}
	}
	if len(repeats) > 0 {
		for _, r := range rows {
			for c, v := range r.y {
				if j := at(r, c); !math.IsNaN(v) && ob.weight[j] > 1 {
					d := v - ob.value[j]
					ob.spread[r.i] += d * d
				}
			}
		}
		const shown = 3
		verb := "repeat"
		if len(repeats) == 1 {
			verb = "repeats"
		}
		note := fmt.Sprintf("note: %s %s a trajectory and time (%s", count(len(repeats), "row"), verb, strings.Join(repeats[:min(shown, len(repeats))], "; "))
		if len(repeats) > shown {
			note += fmt.Sprintf("; %d more", len(repeats)-shown)
		}
		notes = append(notes, note+"); each counts in the loss as a repeated measurement")
	}
	return ob, notes, nil
}

// isHeader reports whether rec is a header row: its first field is not a
// number.
// looksLikeJSON reports whether a file that begins with head is a JSON
// object or array rather than CSV (whose first field is a number or a
// column name).
func looksLikeJSON(head []byte) bool {
	head = bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\ufeff")), " \t\r\n")
	return len(head) > 0 && (head[0] == '{' || head[0] == '[')
}

// separatorHint explains a row of the wrong width whose fields other
// programs would split at semicolons or tabs (a spreadsheet's CSV in a
// locale with decimal commas, a TSV file), or returns "".
func separatorHint(rec []string) string {
	line := strings.Join(rec, ",")
	switch {
	case strings.Contains(line, ";"):
		return "; fields are separated by commas, and this line has semicolons"
	case strings.Contains(line, "\t"):
		return "; fields are separated by commas, and this line has tabs"
	}
	return ""
}

func isHeader(rec []string) bool {
	_, err := strconv.ParseFloat(strings.TrimSpace(rec[0]), 64)
	return err != nil && !strings.Contains(err.Error(), "range")
}

// parseIndex parses a trajectory index: a non-negative integer below
// maxDataTrajectories, in integer or number notation ("3", "3.0", "3e0",
// as programs that write integer columns as floats do). Its error reads
// as the end of a sentence that begins with what the index is.
func parseIndex(s string) (int, error) {
	t := strings.TrimSpace(s)
	i, err := strconv.ParseInt(t, 10, 64)
	if t != "" && err != nil {
		x, ferr := strconv.ParseFloat(t, 64)
		switch {
		case ferr != nil || math.IsNaN(x) || math.IsInf(x, 0):
			return 0, fmt.Errorf("%q is not an integer from 0", t)
		case x != math.Trunc(x):
			return 0, fmt.Errorf("%q is not an integer; want an integer from 0", t)
		case math.Abs(x) >= maxDataTrajectories:
			return 0, fmt.Errorf("%q is too large (at most %d)", t, int64(maxDataTrajectories-1))
		}
		i, err = int64(x), nil
	}
	switch {
	case t == "":
		return 0, errors.New("is empty; want an integer from 0")
	case i < 0:
		return 0, fmt.Errorf("%q is negative; want an integer from 0", t)
	case i >= maxDataTrajectories:
		return 0, fmt.Errorf("%q is too large (at most %d)", t, int64(maxDataTrajectories-1))
	}
	return int(i), nil
}

// writeCSV writes ob in the format readObservations reads, with a
// header: one row per trajectory and time with an observed value
// (repeated observations are written once, as their mean), and a row of
// empty cells for a time without any.
func (ob *observations) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	hdr := []string{"traj", "t"}
	for c := 0; c < ob.dim; c++ {
		hdr = append(hdr, fmt.Sprintf("y%d", c))
	}
	cw.Write(hdr)
	K := len(ob.times)
	for k, t := range ob.times {
		empty := true
		for i := 0; i < ob.n && empty; i++ {
			for c := 0; c < ob.dim; c++ {
				empty = empty && ob.weight[(i*K+k)*ob.dim+c] == 0
			}
		}
		if empty {
			cw.Write(append([]string{"0", formatFloat(t)}, make([]string, ob.dim)...))
		}
	}
	for i := 0; i < ob.n; i++ {
		for k, t := range ob.times {
			row := []string{strconv.Itoa(i), formatFloat(t)}
			observed := false
			for c := 0; c < ob.dim; c++ {
				j := (i*K+k)*ob.dim + c
				if ob.weight[j] == 0 {
					row = append(row, "")
					continue
				}
				observed = true
				row = append(row, formatFloat(ob.value[j]))
			}
			if observed {
				cw.Write(row)
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// loss returns the weighted squared error against ob, averaged over
// trajectories: exactly the sum over observations of (y − observed)²,
// repeated observations included. The data row of a trajectory is its
// K·dim values, its K·dim weights and its spread.
func (ob *observations) loss() ode.Loss {
	K, d := len(ob.times), ob.dim
	w := K * d
	data := make([]float64, 0, ob.n*(2*w+1))
	for i := range ob.n {
		data = append(data, ob.value[i*w:(i+1)*w]...)
		data = append(data, ob.weight[i*w:(i+1)*w]...)
		spread := 0.0
		if ob.spread != nil {
			spread = ob.spread[i]
		}
		data = append(data, spread)
	}
	return ode.Loss{Name: "sse", Data: data, DataDim: 2*w + 1, Mean: true, F: func(_, ys, row []tape.V) tape.V {
		s := row[2*w]
		for j := 0; j < w; j++ {
			s = s.Add(ys[j].Sub(row[j]).Square().Mul(row[w+j]))
		}
		return s
	}}
}
