package main

import (
	"math"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

func TestParseFloats(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
		want []float64
		err  string // substring of the error; "" means no error
	}{
		{name: "one", in: "1", want: []float64{1}},
		{name: "state", in: "1,0,0", want: []float64{1, 0, 0}},
		{name: "spaces", in: " 1 , -2.5,3e-3 ", want: []float64{1, -2.5, 3e-3}},
		{name: "exact", in: "10,28,2.6666666666666665", want: []float64{10, 28, 8.0 / 3}},
		{name: "signed zero", in: "-0,+0", want: []float64{math.Copysign(0, -1), 0}},
		{name: "hex", in: "0x1p-2", want: []float64{0.25}},
		{name: "not a number", in: "1,x,3", err: `"1,x,3": element 2 "x" is not a number`},
		{name: "empty", in: "", err: "empty list"},
		{name: "blank", in: "  ", err: "empty list"},
		{name: "empty element", in: "1,,3", err: "element 2 is empty"},
		{name: "trailing comma", in: "1,2,", err: "element 3 is empty"},
		{name: "nan", in: "1,NaN", err: `element 2 "NaN" is not finite`},
		{name: "inf", in: "inf", err: `element 1 "inf" is not finite`},
		{name: "overflow", in: "1e999", err: "out of the range"},
		{name: "semicolon", in: "1;2", err: `element 1 "1;2" is not a number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseFloats(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseFloats(%q) error = %v, want it to contain %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseFloats(%q): %v", tc.in, err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("parseFloats(%q) = %v, want %v", tc.in, got, tc.want)
			}
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(tc.want[i]) {
					t.Errorf("parseFloats(%q)[%d] = %v, want %v", tc.in, i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestParseVary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
		want vary
		err  string
	}{
		{name: "param", in: "p1=0:21", want: vary{Target: varyP, Index: 1, Lo: 0, Hi: 21}},
		{name: "state", in: "y02=-1:1", want: vary{Target: varyY0, Index: 2, Lo: -1, Hi: 1}},
		{name: "brackets", in: "p[0]=1e-3:2.5", want: vary{Target: varyP, Index: 0, Lo: 1e-3, Hi: 2.5}},
		{name: "state brackets", in: "y0[10]=0:1", want: vary{Target: varyY0, Index: 10, Lo: 0, Hi: 1}},
		{name: "downwards", in: "p0=5:1", want: vary{Target: varyP, Index: 0, Lo: 5, Hi: 1}},
		{name: "spaces", in: "p1 = 0 : 21", want: vary{Target: varyP, Index: 1, Lo: 0, Hi: 21}},
		{name: "no equals", in: "p1", err: "no '='"},
		{name: "no index", in: "p=0:1", err: `target "p" has no index`},
		{name: "no state index", in: "y0=0:1", err: `target "y0" has no index`},
		{name: "bad target", in: "q1=0:1", err: `target "q1" is neither pK nor y0K`},
		{name: "negative index", in: "p-1=0:1", err: "has no index"},
		{name: "no colon", in: "p1=5", err: "has no ':'"},
		{name: "bad lo", in: "p1=a:1", err: `LO "a" is not a number`},
		{name: "bad hi", in: "p1=0:", err: "HI is empty"},
		{name: "infinite", in: "p1=0:inf", err: `HI "inf" is not finite`},
		{name: "huge index", in: "p99999999999999999999=0:1", err: "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseVary(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseVary(%q) error = %v, want it to contain %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseVary(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("parseVary(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseLoss(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want lossSpec
		err  string
	}{
		{in: "sumsq", want: lossSpec{Kind: lossSumSquares}},
		{in: "y:0", want: lossSpec{Kind: lossComponent, K: 0}},
		{in: "y:12", want: lossSpec{Kind: lossComponent, K: 12}},
		{in: " y : 2 ", want: lossSpec{Kind: lossComponent, K: 2}},
		{in: "y:", err: `component "" is not a non-negative integer`},
		{in: "y:-1", err: `component "-1" is not a non-negative integer`},
		{in: "y:x", err: `component "x"`},
		{in: "z:1", err: "unknown loss"},
		{in: "mse", err: "unknown loss; want sumsq or y:K"},
		{in: "", err: "unknown loss"},
	} {
		got, err := parseLoss(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseLoss(%q) error = %v, want it to contain %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseLoss(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if back, err := parseLoss(got.String()); err != nil || back != got {
			t.Errorf("parseLoss(%q).String() = %q does not parse back: %+v, %v", tc.in, got.String(), back, err)
		}
	}
}

func TestParseMethod(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want ode.Method
	}{
		{"", nil}, {"tsit5", ode.Tsit5}, {"Vern7", ode.Vern7}, {"RODAS5P", ode.Rodas5P}, {"rosenbrock23", ode.Rosenbrock23},
	} {
		got, err := parseMethod(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseMethod(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if _, err := parseMethod("rk4"); err == nil || !strings.Contains(err.Error(), "tsit5, vern7, rodas5p, rosenbrock23") {
		t.Errorf("parseMethod(rk4) error = %v, want the list of methods", err)
	}
}

// FuzzParseFloats checks that parseFloats never panics, returns only
// finite numbers, and that what it accepts round-trips exactly through
// formatFloats.
func FuzzParseFloats(f *testing.F) {
	for _, s := range []string{"1,0,0", "10,28,2.6666666666666665", " -1e-300 , 5", "1,x,3", "", ",", "NaN", "0x1p-3", "1e999", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		xs, err := parseFloats(s)
		if err != nil {
			if xs != nil {
				t.Fatalf("parseFloats(%q) returned %v with error %v", s, xs, err)
			}
			if !strings.Contains(err.Error(), "element") && !strings.Contains(err.Error(), "empty list") {
				t.Fatalf("parseFloats(%q) error %q names no element", s, err)
			}
			return
		}
		if len(xs) != strings.Count(s, ",")+1 {
			t.Fatalf("parseFloats(%q) = %v: %d elements for %d commas", s, xs, len(xs), strings.Count(s, ","))
		}
		for _, x := range xs {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("parseFloats(%q) = %v: not finite", s, xs)
			}
		}
		back, err := parseFloats(formatFloats(xs))
		if err != nil {
			t.Fatalf("parseFloats(formatFloats(%v)) = %v", xs, err)
		}
		for i := range xs {
			if math.Float64bits(back[i]) != math.Float64bits(xs[i]) {
				t.Fatalf("round trip of %q: %v became %v", s, xs, back)
			}
		}
	})
}

// FuzzParseVary checks that parseVary never panics and that what it
// accepts round-trips exactly through vary.String.
func FuzzParseVary(f *testing.F) {
	for _, s := range []string{"p1=0:21", "y02=-1:1", "p[0]=1e-3:2.5", "y0=0:1", "p1=5", "q=1:2", "p1=:", "p0=1e999:1", "=", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseVary(s)
		if err != nil {
			return
		}
		if v.Target != varyP && v.Target != varyY0 || v.Index < 0 {
			t.Fatalf("parseVary(%q) = %+v: bad target or index", s, v)
		}
		if math.IsNaN(v.Lo) || math.IsInf(v.Lo, 0) || math.IsNaN(v.Hi) || math.IsInf(v.Hi, 0) {
			t.Fatalf("parseVary(%q) = %+v: bounds not finite", s, v)
		}
		back, err := parseVary(v.String())
		if err != nil {
			t.Fatalf("parseVary(%q).String() = %q does not parse: %v", s, v.String(), err)
		}
		if back.Target != v.Target || back.Index != v.Index ||
			math.Float64bits(back.Lo) != math.Float64bits(v.Lo) || math.Float64bits(back.Hi) != math.Float64bits(v.Hi) {
			t.Fatalf("round trip of %q: %+v became %+v", s, v, back)
		}
	})
}
