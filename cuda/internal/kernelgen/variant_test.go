package kernelgen

import (
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// TestKernelSourceVariant checks that a kernel of Method Auto's plan
// (ode.Plan.Variant "auto": Tsit5 with Auto's own trial program) names
// the variant in its header and differs from Tsit5's kernel, whose
// header names none, while both name Tsit5 and its fingerprint
// (Lorenz, an adaptive solve without save times and with).
func TestKernelSourceVariant(t *testing.T) {
	t.Parallel()
	f := problems.Lorenz().Field
	tsit := planCase{field: f, m: ode.Tsit5}.plan(t)
	auto := planCase{field: f, m: ode.Auto}.plan(t)
	if auto.Variant != "auto" || tsit.Variant != "" || auto.Fingerprint != tsit.Fingerprint {
		t.Fatalf("plan variants %q (Auto), %q (Tsit5), fingerprints %s, %s; want \"auto\", \"\", the same", auto.Variant, tsit.Variant, auto.Fingerprint, tsit.Fingerprint)
	}
	for _, v := range []Config{{Adaptive: true}, {Adaptive: true, Saves: 2}} {
		src := func(pl *ode.Plan) string {
			sp, err := NewStepPrograms(pl)
			if err != nil {
				t.Fatal(err)
			}
			s, _, err := KernelSource(sp, v, nil, Float64)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		a, p := src(auto), src(tsit)
		head := "of method Tsit5 (plan variant auto) (fingerprint " + tsit.Fingerprint + ")"
		if !strings.Contains(a, head) || strings.Contains(p, "plan variant") || !strings.Contains(p, "of method Tsit5 (fingerprint "+tsit.Fingerprint+")") {
			t.Errorf("%s: the headers do not name Auto's variant (%q), or Tsit5's names one", v.Key(), head)
		}
		if a == strings.Replace(p, "of method Tsit5 (", "of method Tsit5 (plan variant auto) (", 1) {
			t.Errorf("%s: Auto's kernel is Tsit5's but for its header", v.Key())
		}
	}
}
