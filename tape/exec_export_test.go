package tape

import "fmt"

// ExecSteps describes the steps of e's plan: how many, and how many of
// them are fused matrix and chain steps with how many values.
func ExecSteps(e *Exec) string {
	var mat, chain, matv, chainv, single int
	ops := map[string]int{}
	for _, st := range e.steps {
		switch st.kern.(type) {
		case *matKernel:
			mat++
			matv += len(st.dst)
		case *chainKernel:
			chain++
			chainv += len(st.dst)
		default:
			single++
			ops[fmt.Sprintf("%p", st.block)]++
		}
	}
	_ = ops
	return fmt.Sprintf("%d steps: %d single, %d matrix (%d values), %d chain (%d values); %d units, %d packed",
		len(e.steps), single, mat, matv, chain, chainv, e.units, len(e.pack))
}
