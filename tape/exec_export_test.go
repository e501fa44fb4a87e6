package tape

import "fmt"

// NewExecUnfused is NewExec without the fusion of dense layers and sum
// chains: every value is a step of its own, computed by its op's Block.
func NewExecUnfused(p *Program, s *ExecSettings) (*Exec, error) { return newExec(p, s, false) }

// SetAVX2 turns the assembly kernels on (where the processor has them) or
// off, and returns the previous setting. Tests that call it must not run
// in parallel with others.
func SetAVX2(on bool) bool {
	old := useAVX2
	useAVX2 = on && haveAVX2
	return old
}

// HaveAVX2 reports whether the assembly kernels can run here.
func HaveAVX2() bool { return haveAVX2 }

// ExecSteps describes the steps of e's plan: how many, and how many of
// them are fused matrix and chain steps with how many values.
func ExecSteps(e *Exec) string {
	var mat, chain, matv, chainv, single int
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
		}
	}
	return fmt.Sprintf("%d steps: %d single, %d matrix (%d values), %d chain (%d values); %d units, %d packed",
		len(e.steps), single, mat, matv, chain, chainv, e.units, len(e.pack))
}

// ExecDirect reports whether e's last Run wrote its outputs in place.
func ExecDirect(e *Exec) bool { return e.direct }
