package exactjson

import (
	"math"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	in := Floats{0, math.Copysign(0, -1), 1, 0.1, math.SmallestNonzeroFloat64, math.MaxFloat64, math.NaN(), math.Inf(1), math.Inf(-1), -1.0 / 3}
	b, err := in.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var out Floats
	if err := out.UnmarshalJSON(b); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if len(out) != len(in) {
		t.Fatalf("%s decoded to %d values, want %d", b, len(out), len(in))
	}
	for i := range in {
		if math.Float64bits(in[i]) != math.Float64bits(out[i]) {
			t.Errorf("element %d: %v → %s → %v", i, in[i], b, out[i])
		}
	}
	for _, bad := range []string{`["nan"]`, `[1,`, `{}`, `["1"]`} {
		if err := out.UnmarshalJSON([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
