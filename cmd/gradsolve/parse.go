package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gradsolve-go/gradsolve/ode"
)

// This file holds the parsers of flag values. They know nothing about
// problems: length and index checks against a problem are done by the
// caller (see options.build). Their errors quote the whole value and name
// the bad token; the caller prefixes the flag, as
//
//	-p: "1,x,3": element 2 "x" is not a number

// parseFloats parses a comma-separated list of finite numbers, as
// "1,0,0" or "1e-3, -2.5". Spaces around elements are ignored. Elements
// are numbered from 1 in errors.
func parseFloats(s string) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%q: empty list; want comma-separated numbers, as 1,0,0", s)
	}
	toks := strings.Split(s, ",")
	xs := make([]float64, len(toks))
	for i, tok := range toks {
		x, err := parseNumber(tok)
		if err != nil {
			return nil, fmt.Errorf("%q: element %d %w", s, i+1, err)
		}
		xs[i] = x
	}
	return xs, nil
}

// parseNumber parses one finite number; its error reads as the end of a
// sentence that begins with what the number is ("element 2 ...").
func parseNumber(tok string) (float64, error) {
	t := strings.TrimSpace(tok)
	if t == "" {
		return 0, fmt.Errorf("is empty")
	}
	x, err := strconv.ParseFloat(t, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return 0, fmt.Errorf("%q is out of the range of float64", t)
		}
		return 0, fmt.Errorf("%q is not a number", t)
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, fmt.Errorf("%q is not finite", t)
	}
	return x, nil
}

// formatFloats formats xs as a comma-separated list that parseFloats reads
// back exactly (shortest representation that round-trips).
func formatFloats(xs []float64) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(formatFloat(x))
	}
	return b.String()
}

// formatFloat formats x in the shortest form that parses back to x.
func formatFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// Targets of a -vary sweep.
const (
	varyP  = "p"  // a per-trajectory parameter
	varyY0 = "y0" // a component of the initial state
)

// vary is one -vary sweep: Target[Index] takes n evenly spaced values
// from Lo to Hi (both included) over the n trajectories of the ensemble.
type vary struct {
	Target string // varyP or varyY0
	Index  int    // 0-based
	Lo, Hi float64
}

// String returns the sweep in the form parseVary reads, as "p1=0:21".
func (v vary) String() string {
	return fmt.Sprintf("%s%d=%s:%s", v.Target, v.Index, formatFloat(v.Lo), formatFloat(v.Hi))
}

// parseVary parses a sweep "pK=LO:HI" or "y0K=LO:HI", K a 0-based index
// (p1 is the second parameter, y02 the third state component). The
// bracketed forms "p[K]" and "y0[K]" are also accepted. LO and HI are
// finite numbers; HI < LO sweeps downwards.
func parseVary(s string) (vary, error) {
	const want = "want pK=LO:HI or y0K=LO:HI (K a 0-based index), as p1=0:21"
	lhs, rhs, ok := strings.Cut(s, "=")
	if !ok {
		return vary{}, fmt.Errorf("%q: no '='; %s", s, want)
	}
	lhs = strings.TrimSpace(lhs)
	var v vary
	var idx string
	switch {
	case strings.HasPrefix(lhs, varyY0):
		v.Target, idx = varyY0, lhs[len(varyY0):]
	case strings.HasPrefix(lhs, varyP):
		v.Target, idx = varyP, lhs[len(varyP):]
	default:
		return vary{}, fmt.Errorf("%q: target %q is neither pK nor y0K; %s", s, lhs, want)
	}
	if strings.HasPrefix(idx, "[") && strings.HasSuffix(idx, "]") {
		idx = idx[1 : len(idx)-1]
	}
	if idx == "" || strings.TrimLeft(idx, "0123456789") != "" {
		return vary{}, fmt.Errorf("%q: target %q has no index K; %s", s, lhs, want)
	}
	k, err := strconv.Atoi(idx)
	if err != nil || k > 1<<20 {
		return vary{}, fmt.Errorf("%q: index %q is too large", s, idx)
	}
	v.Index = k
	lo, hi, ok := strings.Cut(rhs, ":")
	if !ok {
		return vary{}, fmt.Errorf("%q: range %q has no ':'; %s", s, rhs, want)
	}
	if v.Lo, err = parseNumber(lo); err != nil {
		return vary{}, fmt.Errorf("%q: LO %w", s, err)
	}
	if v.Hi, err = parseNumber(hi); err != nil {
		return vary{}, fmt.Errorf("%q: HI %w", s, err)
	}
	return v, nil
}

// Kinds of loss.
const (
	lossSumSquares = "sumsq" // Σ_i Σ_c y_i,c(t1)²: ode.SumSquares
	lossComponent  = "y"     // Σ_i y_i,K(t1): ode.Component(K)
)

// lossSpec is a parsed -loss value.
type lossSpec struct {
	Kind string // lossSumSquares or lossComponent
	K    int    // the component of lossComponent
}

// String returns the loss in the form parseLoss reads.
func (l lossSpec) String() string {
	if l.Kind == lossComponent {
		return fmt.Sprintf("y:%d", l.K)
	}
	return l.Kind
}

// parseLoss parses a loss: "sumsq" (the sum of squares of the final
// states) or "y:K" (the sum over trajectories of component K of the final
// state, K 0-based).
func parseLoss(s string) (lossSpec, error) {
	const want = "want sumsq or y:K (K a 0-based state component)"
	t := strings.TrimSpace(s)
	if t == lossSumSquares {
		return lossSpec{Kind: lossSumSquares}, nil
	}
	kind, idx, ok := strings.Cut(t, ":")
	if !ok || strings.TrimSpace(kind) != lossComponent {
		return lossSpec{}, fmt.Errorf("%q: unknown loss; %s", s, want)
	}
	idx = strings.TrimSpace(idx)
	if idx == "" || strings.TrimLeft(idx, "0123456789") != "" {
		return lossSpec{}, fmt.Errorf("%q: component %q is not a non-negative integer; %s", s, idx, want)
	}
	k, err := strconv.Atoi(idx)
	if err != nil || k > 1<<20 {
		return lossSpec{}, fmt.Errorf("%q: component %q is too large", s, idx)
	}
	return lossSpec{Kind: lossComponent, K: k}, nil
}

// methods are the -method values, in the order help lists them.
var methods = []struct {
	name string
	m    ode.Method
}{
	{"tsit5", ode.Tsit5},
	{"vern7", ode.Vern7},
	{"rodas5p", ode.Rodas5P},
	{"rosenbrock23", ode.Rosenbrock23},
	{"auto", ode.Auto},
}

// methodNames returns the -method values joined by sep.
func methodNames(sep string) string {
	names := make([]string, len(methods))
	for i, m := range methods {
		names[i] = m.name
	}
	return strings.Join(names, sep)
}

// parseMethod returns the method named s (case-insensitive), or nil for
// "" (the router's choice).
func parseMethod(s string) (ode.Method, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return nil, nil
	}
	for _, m := range methods {
		if m.name == t {
			return m.m, nil
		}
	}
	return nil, fmt.Errorf("%q: unknown method; want one of %s", s, methodNames(", "))
}

// parseEngine returns the engine named s (case-insensitive, spaces
// trimmed) for ode.Settings.Engine: "cpu" for "" and "cpu", "auto", or
// the name of an engine registered with package ode in this build. The
// error for any other name lists the valid ones; for "cuda" it says that
// the engine comes with package cuda, which this build does not include.
func parseEngine(s string) (string, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch {
	case t == "" || t == "cpu":
		return "cpu", nil
	case t == "auto" || slices.Contains(ode.Engines(), t):
		return t, nil
	}
	valid := strings.Join(append(ode.Engines(), "auto"), ", ")
	if t == "cuda" {
		return "", fmt.Errorf("%q: this build of gradsolve has no cuda engine (package cuda registers it when it is imported); the engines here are %s", s, valid)
	}
	return "", fmt.Errorf("%q: unknown engine; want one of %s", s, valid)
}

// parseFlags parses args with fs, as fs.Parse does, and rewrites package
// flag's errors in the command's style, naming the flag first and saying
// what its value should be:
//
//	flag provided but not defined: -nn (did you mean -n?)
//	-n: "1.5" is not an integer
//	-vary: "p1=0:nan": HI "nan" is not finite
//
// Every command parses its flags through it. Errors other than
// flag.ErrHelp are *usageError values.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := flagAsValue(fs, args); err != nil {
		return err
	}
	err := fs.Parse(args)
	if err == nil || err == flag.ErrHelp {
		return err
	}
	msg := err.Error()
	const undefined = "flag provided but not defined: -"
	if name, ok := strings.CutPrefix(msg, undefined); ok {
		var near []string
		fs.VisitAll(func(f *flag.Flag) {
			if flagNear(name, f.Name) {
				near = append(near, "-"+f.Name)
			}
		})
		switch len(near) {
		case 0:
		case 1:
			msg += fmt.Sprintf(" (did you mean %s?)", near[0])
		default:
			msg += fmt.Sprintf(" (did you mean %s or %s?)", strings.Join(near[:len(near)-1], ", "), near[len(near)-1])
		}
		return &usageError{msg: msg}
	}
	if m := badFlagValue.FindStringSubmatch(msg); m != nil {
		if f := fs.Lookup(m[2]); f != nil {
			return &usageError{msg: fmt.Sprintf("-%s: %s", f.Name, valueProblem(f, m[1], m[3]))}
		}
	}
	return &usageError{msg: msg}
}

// flagAsValue reports a flag given without its value: package flag takes
// the argument after a non-boolean flag as its value even where that is
// another flag, so "-problem -n 3" would set -problem to "-n" and leave
// "3" as an unexpected argument, and "-out -json" would write a file
// named -json. It walks args as fs.Parse does (up to the first
// non-flag argument or "--") and returns a *usageError naming both flags
// where a non-boolean flag's value is -name, --name or -name=value for a
// flag of fs (or -h, -help). Other values that begin with "-", as the
// negative numbers of -p or -t0, are values.
func flagAsValue(fs *flag.FlagSet, args []string) error {
	for i := 0; i < len(args); i++ {
		name, ok := flagName(args[i])
		if !ok {
			return nil // the first non-flag argument, or "--": parsing stops
		}
		if strings.Contains(name, "=") {
			continue // -name=value carries its value
		}
		f := fs.Lookup(name)
		if f == nil || i+1 == len(args) {
			return nil // fs.Parse reports an unknown flag or a missing last value
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		v := args[i+1]
		if other, ok := flagName(v); ok {
			other, _, _ = strings.Cut(other, "=")
			if fs.Lookup(other) != nil || other == "h" || other == "help" {
				return &usageError{msg: fmt.Sprintf("-%s: no value: it would take %q, a flag, as its value; give -%s a value before the next flag",
					f.Name, v, f.Name)}
			}
		}
		i++ // the value
	}
	return nil
}

// flagName returns the name of a flag argument "-name" or "--name" (with
// any "=value"), and false for a non-flag argument, "-" or "--".
func flagName(arg string) (string, bool) {
	if len(arg) < 2 || arg[0] != '-' || arg == "--" {
		return "", false
	}
	name := arg[1:]
	if name[0] == '-' {
		name = name[1:]
	}
	if name == "" || name[0] == '-' || name[0] == '=' {
		return "", false
	}
	return name, true
}

// badFlagValue matches package flag's errors for a value its flag does not
// accept: the value, the flag's name and the reason.
var badFlagValue = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-(\S+): (.*)$`)

// valueProblem says why value is not one of flag f's values: its type's
// reason for the flags of package flag's types, whose own reason is only
// "parse error" or "value out of range"; the reason as given otherwise
// (the flag's Set wrote it).
func valueProblem(f *flag.Flag, value, reason string) string {
	g, ok := f.Value.(flag.Getter)
	if !ok || (reason != "parse error" && reason != "value out of range") {
		return reason
	}
	var what string
	switch g.Get().(type) {
	case int, int64:
		what = "an integer"
	case uint, uint64:
		what = "a non-negative integer"
	case float64:
		what = "a number"
	case bool:
		return fmt.Sprintf("%q is not a boolean; give the flag alone (-%s) or as -%s=false", value, f.Name, f.Name)
	default:
		return fmt.Sprintf("%q: %s", value, reason)
	}
	if reason == "value out of range" {
		return fmt.Sprintf("%q is out of the range of %s", value, what)
	}
	return fmt.Sprintf("%q is not %s", value, what)
}

// flagNear reports whether the typed flag name is a likely misspelling of
// the defined name: a case difference, a prefix of at least two letters, or
// at most one edit (two for names of six letters or more), counting a swap of
// adjacent letters as one edit.
func flagNear(typed, name string) bool {
	t, n := strings.ToLower(typed), strings.ToLower(name)
	if t == n || (len(t) >= 2 && strings.HasPrefix(n, t)) {
		return true
	}
	limit := 1
	if len(n) >= 6 {
		limit = 2
	}
	return editDistance(t, n) <= limit
}

// editDistance is the optimal string alignment distance of a and b (bytes):
// insertions, deletions, substitutions and swaps of adjacent bytes.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
