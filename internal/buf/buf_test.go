package buf

import (
	"fmt"
	"testing"
)

func TestMake(t *testing.T) {
	s := []float64{1, 2, 3, 4}
	got := Make(s[:1], 3)
	if !Same(got, s) || len(got) != 3 {
		t.Fatalf("Make did not reuse the storage: len %d", len(got))
	}
	for i, x := range got {
		if x != 0 {
			t.Errorf("Make(...)[%d] = %v, want 0", i, x)
		}
	}
	if s[3] != 4 {
		t.Errorf("Make cleared past n: s[3] = %v", s[3])
	}
	big := Make(s, 8)
	if Same(big, s) || len(big) != 8 {
		t.Errorf("Make(s, 8) reused a slice of capacity %d", cap(s))
	}
	if x := Make[int](nil, 0); len(x) != 0 {
		t.Errorf("Make(nil, 0) has length %d", len(x))
	}
}

func TestExtend(t *testing.T) {
	s := make([]int, 2, 5)
	s[0], s[1] = 7, 8
	s[:5][3] = 9 // stale storage past len(s)
	e, fresh := Extend(s, 4)
	if !Same(e, s) || fresh || len(e) != 4 || e[0] != 7 || e[1] != 8 || e[3] != 9 {
		t.Errorf("Extend(s, 4) = %v, fresh %t (same %t): want s's storage, stale elements kept", e, fresh, Same(e, s))
	}
	f, fresh := Extend(s, 9)
	if Same(f, s) || !fresh || len(f) != 9 || f[0] != 7 || f[1] != 8 || f[2] != 0 || f[8] != 0 {
		t.Errorf("Extend(s, 9) = %v, fresh %t: want a new slice, zero past 2", f, fresh)
	}
}

func TestSame(t *testing.T) {
	a := []int{1, 2, 3}
	if !Same(a, a[:1]) || Same(a, a[1:]) || Same(a[:0], a) || Same[int](nil, nil) {
		t.Error("Same is wrong")
	}
}

func TestOverlap(t *testing.T) {
	a := make([]float64, 8)
	b := make([]float64, 8)
	for _, c := range []struct {
		name string
		x, y []float64
		want bool
	}{
		{"same", a, a, true},
		{"prefix", a[:2], a, true},
		{"capacity", a[6:], a[:1], true}, // a[:1]'s capacity reaches a[6:]
		{"disjoint halves", a[:4:4], a[4:], false},
		{"other array", a, b, false},
		{"empty with capacity", a[:0], a[3:4], true},
		{"nil", nil, a, false},
	} {
		want := c.want
		if got := Overlap(c.x, c.y); got != want || Overlap(c.y, c.x) != want {
			t.Errorf("%s: Overlap = %v, want %v", c.name, got, want)
		}
	}
}

// TestFill checks Fill against a loop at lengths around its doubling
// runs and fillRun, for float64, bool and a struct, the elements past s
// untouched.
func TestFill(t *testing.T) {
	type pair struct {
		a int32
		b float64
	}
	for _, n := range []int{0, 1, 2, 3, 7, 8, 9, fillRun - 1, fillRun, fillRun + 1, 2*fillRun + 3, 5000} {
		f := make([]float64, n+1)
		f[n] = -1
		Fill(f[:n], 2.5)
		for i, x := range f[:n] {
			if x != 2.5 {
				t.Fatalf("n %d: f[%d] = %v, want 2.5", n, i, x)
			}
		}
		if f[n] != -1 {
			t.Errorf("n %d: Fill wrote past its slice", n)
		}
		b := make([]bool, n)
		Fill(b, true)
		for i, x := range b {
			if !x {
				t.Fatalf("n %d: b[%d] false", n, i)
			}
		}
		p := make([]pair, n)
		Fill(p, pair{3, -4})
		for i, x := range p {
			if x != (pair{3, -4}) {
				t.Fatalf("n %d: p[%d] = %v", n, i, x)
			}
		}
	}
}

// BenchmarkFill times Fill against a loop's store an element over 32,768
// and 2^20 float64 (a result array's end times at a mid-size and a large
// launch).
//
//	go test ./internal/buf -run '^$' -bench Fill -count 6
func BenchmarkFill(b *testing.B) {
	for _, n := range []int{1 << 15, 1 << 20} {
		s := make([]float64, n)
		b.Run(fmt.Sprintf("n=%d/loop", n), func(b *testing.B) {
			for b.Loop() {
				for i := range s {
					s[i] = 1.5
				}
			}
		})
		b.Run(fmt.Sprintf("n=%d/fill", n), func(b *testing.B) {
			for b.Loop() {
				Fill(s, 1.5)
			}
		})
	}
}
