package kernelgen

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen/kerneltest"
)

// quotMain is a host main that reads pairs (x, h) of gs_real from argv[1]
// and writes, for each, gs_quot(x, h, gs_rcp(h)) and whether it applied
// (1 or 0, a gs_real) to argv[2].
const quotMain = `
#include <stdio.h>
int main(int argc, char** argv) {
  FILE* f = fopen(argv[1], "rb");
  FILE* o = fopen(argv[2], "wb");
  if (!f || !o) return 2;
  gs_real in[2];
  while (fread(in, sizeof in, 1, f) == 1) {
    gs_real out[2] = {0, 0};
    out[1] = gs_quot(in[0], in[1], gs_rcp(in[1]), &out[0]) ? 1 : 0;
    fwrite(out, sizeof out, 1, o);
  }
  fclose(o);
  return 0;
}
`

// quotPairs returns the dividends and divisors TestQuotFromReciprocal
// divides in precision p (53 or 24 bits): save-time quotients (tau - t
// over h of steps from 1e-9 to 10), pairs across the whole range of
// exponents gs_quot takes, pairs whose quotient lies within a
// hundred-millionth of an ulp of a midpoint between two reals (the cases
// where one correction less, or a reciprocal off by an ulp, rounds the
// wrong way), exact ones, and the dividends and divisors gs_quot must
// refuse (0, too small or large, infinite, NaN).
func quotPairs(r *rand.Rand, p uint, n int) [][2]float64 {
	round := func(x float64) float64 {
		if p == 24 {
			return float64(float32(x))
		}
		return x
	}
	lo, hi := 450, 450
	if p == 24 {
		lo, hi = 50, 50
	}
	var pairs [][2]float64
	for range n {
		// A step and a save time on it.
		h := round(math.Pow(10, -9+10*r.Float64()))
		t := round(r.Float64() * 100)
		tau := round(t + h*r.Float64())
		pairs = append(pairs, [2]float64{round(tau - t), h}, [2]float64{round(-(tau - t)), h})
		// Any exponents in range, either sign.
		x := round(math.Ldexp(1+r.Float64(), r.IntN(lo+hi-1)-lo+1))
		y := round(math.Ldexp(1+r.Float64(), r.IntN(lo+hi-1)-lo+1))
		if r.IntN(2) == 0 {
			x = -x
		}
		if r.IntN(2) == 0 {
			y = -y
		}
		pairs = append(pairs, [2]float64{x, y})
		// x = h·m rounded, m a midpoint between two reals of precision
		// p: x/h within a relative 2^-p of m, most near it.
		q := round(math.Ldexp(1+r.Float64(), r.IntN(60)-30))
		ulp := math.Ldexp(1, math.Ilogb(q)-int(p)+1)
		m := new(big.Float).SetPrec(200).SetFloat64(q)
		m.Add(m, new(big.Float).SetPrec(200).SetFloat64(ulp/2))
		hb := new(big.Float).SetPrec(200).SetFloat64(y)
		xm, _ := new(big.Float).SetPrec(p).SetMode(big.ToNearestEven).Mul(m, hb).Float64()
		pairs = append(pairs, [2]float64{round(xm), y})
		// Exact quotients.
		pairs = append(pairs, [2]float64{round(q * math.Ldexp(1, r.IntN(20)-10)), math.Ldexp(1, r.IntN(20)-10)})
	}
	large := math.Ldexp(1, hi+1)
	small := math.Ldexp(1, -lo-1)
	for _, v := range []float64{0, math.Copysign(0, -1), small, -small, large, math.Inf(1), math.Inf(-1), math.NaN()} {
		pairs = append(pairs, [2]float64{v, 3}, [2]float64{3, v})
	}
	return pairs
}

// TestQuotFromReciprocal checks the prelude's gs_quot, compiled as host
// C++ (gs_rcp is then 1/h rounded to nearest, as the device's __drcp_rn
// and __frcp_rn), in float64 and float32: where it applies, its quotient
// is the division's bit for bit (Go's, IEEE's), on save-time quotients,
// on pairs across the exponent range, on quotients within a
// hundred-millionth of an ulp of a midpoint, and on exact ones (the
// quotient x·r without its corrections fails it); it applies to every pair in
// range and to none out of it (0, below GS_QUOT_LO, above GS_QUOT_HI,
// infinite, NaN).
func TestQuotFromReciprocal(t *testing.T) {
	t.Parallel()
	kerneltest.GXX(t)
	r := rand.New(rand.NewPCG(49, 3))
	for _, tc := range []struct {
		prec   Precision
		p      uint
		lo, hi float64
	}{{Float64, 53, 0x1p-450, 0x1p450}, {Float32, 24, 0x1p-50, 0x1p50}} {
		pairs := quotPairs(r, tc.p, 100_000)
		var in bytes.Buffer
		for _, pr := range pairs {
			if tc.prec == Float32 {
				binary.Write(&in, binary.LittleEndian, [2]float32{float32(pr[0]), float32(pr[1])})
			} else {
				binary.Write(&in, binary.LittleEndian, pr)
			}
		}
		dir := t.TempDir()
		exe := kerneltest.CompileHost(t, dir, NewSource(&SourceSettings{Precision: tc.prec}).String()+quotMain)
		inFile, outFile := filepath.Join(dir, "in"), filepath.Join(dir, "out")
		if err := os.WriteFile(inFile, in.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(exe, inFile, outFile).CombinedOutput(); err != nil {
			t.Fatalf("precision %d: %v %s", tc.prec, err, out)
		}
		raw, err := os.ReadFile(outFile)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float64, 2*len(pairs))
		if tc.prec == Float32 {
			g32 := make([]float32, len(got))
			if err := binary.Read(bytes.NewReader(raw), binary.LittleEndian, g32); err != nil {
				t.Fatal(err)
			}
			for j, v := range g32 {
				got[j] = float64(v)
			}
		} else if err := binary.Read(bytes.NewReader(raw), binary.LittleEndian, got); err != nil {
			t.Fatal(err)
		}
		inRange := func(v float64) bool { a := math.Abs(v); return a >= tc.lo && a <= tc.hi }
		bad, applied := 0, 0
		for j, pr := range pairs {
			x, h := pr[0], pr[1]
			want := x / h
			if tc.prec == Float32 {
				x, h = float64(float32(x)), float64(float32(h))
				want = float64(float32(x) / float32(h))
			}
			ok := got[2*j+1] == 1
			if ok != (inRange(x) && inRange(h)) {
				t.Errorf("precision %d: gs_quot(%g, %g) applies %t, want %t", tc.prec, x, h, ok, !ok)
				bad++
			}
			if !ok {
				continue
			}
			applied++
			if math.Float64bits(got[2*j]) != math.Float64bits(want) {
				t.Errorf("precision %d: gs_quot(%x, %x) = %x, want %x", tc.prec, x, h, got[2*j], want)
				bad++
			}
			if bad > 10 {
				t.FailNow()
			}
		}
		if applied < len(pairs)/2 {
			t.Errorf("precision %d: gs_quot applied to %d of %d pairs", tc.prec, applied, len(pairs))
		}
	}
}
