package buf

import "testing"

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
