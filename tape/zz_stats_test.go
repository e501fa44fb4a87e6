package tape_test

import (
	"fmt"
	"sort"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

func TestZZStats(t *testing.T) {
	np := newNeuralProblem(t)
	for _, p := range []*tape.Program{np.field, np.trial, np.replay, np.rev} {
		e, _ := tape.NewExec(p, nil)
		q := e.Program()
		h := map[string]int{}
		for _, v := range q.Values {
			h[v.Op.String()]++
		}
		var ks []string
		for k := range h {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		s := ""
		for _, k := range ks {
			s += fmt.Sprintf(" %s:%d", k, h[k])
		}
		fmt.Printf("%s: %d values, bs=%d;%s\n   %s\n", q.Name, len(q.Values), e.BlockSize(), s, tape.ExecSteps(e))
	}
}
