package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

var progRe = regexp.MustCompile(`\n// program ([^\n:]+): \d+ inputs`)

var opRe = regexp.MustCompile(`// v\d+ = (\w+)`)

func TestSizeDiag(t *testing.T) {
	dir := os.Getenv("GS_SIZE_DIAG")
	if dir == "" {
		t.Skip()
	}
	type pc struct {
		pr problems.Problem
		m  ode.Method
	}
	var cases []pc
	for _, pr := range []problems.Problem{problems.HIRES(), problems.Pollution(), problems.Lorenz96(64), problems.Brusselator(32), problems.Lorenz(), problems.Robertson()} {
		for _, m := range []ode.Method{ode.Rodas5P, ode.Rosenbrock23, ode.Tsit5} {
			if f := os.Getenv("GS_SIZE_ONLY"); f != "" && !strings.Contains(pr.Name+"-"+m.Name(), f) {
				continue
			}
			cases = append(cases, pc{pr, m})
		}
	}
	for _, c := range cases {
		pr := c.pr
		n := 4
		d := pr.Field.Dim
		y0, p := pr.Ensemble(n)
		ec := engineCase{name: pr.Name + "-" + c.m.Name(),
			prob: ode.Problem{Field: pr.Field, N: n, Y0: y0, P: p, Shared: pr.Shared, T0: pr.T0, T1: pr.T1, SaveAt: []float64{(pr.T0 + pr.T1) / 3}},
			set:  ode.Settings{Method: c.m, RelTol: 1e-6, AbsTol: 1e-9},
			loss: ode.Loss{Name: "l", F: func(y, ys, _ []tape.V) tape.V { return y[0].Square().Add(y[d-1]).Add(ys[1].Mul(ys[2])) }},
		}
		for _, op := range []ode.Op{ode.OpRecord, ode.OpGrad} {
			j := jobOf(t, ec, op)
			sp, err := kernelgen.NewStepPrograms(j.Plan)
			if err != nil {
				t.Fatal(err)
			}
			v := kernelgen.ConfigOf(j)
			v.SplitFrom = Tuning{SplitFrom: proposedSplitFrom}.splitFrom() // split as proposed (ptxas_profile.py's variant inlined unsplits)
			src, _, err := kernelgen.KernelSource(sp, v, j.Loss, Float64)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s-%v", ec.name, op)
			if w := v; kernelgen.WideAllowed(w, j.Plan, Float64) {
				w.Wide, w.RowMajor = true, true
				wsrc, info, err := kernelgen.KernelSource(sp, w, j.Loss, Float64)
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(dir, name+"-wide.cu"), []byte(wsrc), 0o644)
				fmt.Printf("== %s wide: %d bytes (thread layout: %d); %d bytes of shared memory per warp\n", name, len(wsrc), len(src), info.WideShared)
			}
			os.WriteFile(filepath.Join(dir, name+".cu"), []byte(src), 0o644)
			// by program
			parts := progRe.Split(src, -1)
			names := progRe.FindAllStringSubmatch(src, -1)
			type row struct {
				name  string
				bytes int
				ops   map[string]int
			}
			var rows []row
			other := len(parts[0])
			for k, pt := range parts[1:] {
				nm := names[k][1]
				if e := strings.LastIndex(pt, "return gs_r;\n}\n"); e >= 0 {
					other += len(pt) - e - 15
					pt = pt[:e+15]
				}
				r := row{name: nm, bytes: len(pt), ops: map[string]int{}}
				for _, ln := range strings.Split(pt, "\n") {
					if m := opRe.FindStringSubmatch(ln); m != nil {
						r.ops[m[1]] += len(ln) + 1
					}
				}
				rows = append(rows, r)
			}
			fmt.Printf("== %s: %d bytes (%.2f MB); prelude+templates %d\n", name, len(src), float64(len(src))/(1<<20), other)
			for _, r := range rows {
				type kv struct {
					k string
					v int
				}
				var kvs []kv
				for k, v := range r.ops {
					kvs = append(kvs, kv{k, v})
				}
				sort.Slice(kvs, func(a, b int) bool { return kvs[a].v > kvs[b].v })
				var sb strings.Builder
				for i, x := range kvs {
					if i > 7 {
						break
					}
					fmt.Fprintf(&sb, " %s:%d", x.k, x.v)
				}
				fmt.Printf("   %-50s %9d |%s\n", r.name, r.bytes, sb.String())
			}
		}
	}
}
