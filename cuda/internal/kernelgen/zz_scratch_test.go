package kernelgen

import (
	"fmt"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

func TestZZDump(t *testing.T) {
	for _, pr := range []problems.Problem{problems.Pollution(), problems.Brusselator(32), problems.HIRES()} {
		sv, err := ode.NewSolver(pr.Field, &ode.Settings{Method: ode.Rodas5P})
		if err != nil {
			t.Fatal(err)
		}
		pl := sv.Plan()
		rev, _ := pl.Reverse()
		for _, p := range []*tape.Program{pl.Trial, rev} {
			in, err := tape.Inline(p)
			if err != nil {
				t.Fatal(err)
			}
			cnt := map[ops.Op]int{}
			for id, v := range in.Values {
				cnt[v.Op]++
				if ops.IsFactor(v.Op) {
					argOps := map[ops.Op]int{}
					for _, a := range v.Args {
						argOps[in.Values[a].Op]++
					}
					fmt.Printf("%s: v%d %v nargs %d argops %v\n", pr.Name, id, v.Op, len(v.Args), argOps)
				}
			}
			fmt.Printf("%s %s: %d values: LUSolve %d LUSolveT %d Extract %d Attach %d Call %d\n", pr.Name, p.Name, len(in.Values), cnt[ops.OpLUSolve], cnt[ops.OpLUSolveT], cnt[ops.OpExtract], cnt[ops.OpAttach], cnt[ops.OpCall])
		}
	}
}
