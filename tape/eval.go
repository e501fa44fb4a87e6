package tape

import (
	"fmt"
	"math"

	"github.com/gradsolve-go/gradsolve/ops"
)

// Eval evaluates p for one trajectory: in holds one number per input,
// and the outputs are written to dst (allocated if nil, else of length
// len(p.Outputs)). It is the reference interpreter the executor is tested
// against; it allocates and is slow. A call evaluates its callee with
// Eval. It panics if len(in) or len(dst) is
// wrong.
func (p *Program) Eval(dst, in []float64) []float64 {
	vals, off := p.evalAll(in)
	if dst == nil {
		dst = make([]float64, len(p.Outputs))
	}
	if len(dst) != len(p.Outputs) {
		panic("tape: Eval: len(dst) != number of outputs")
	}
	for i, o := range p.Outputs {
		dst[i] = vals[off[o.ID]]
	}
	return dst
}

// evalAll evaluates every value; value i occupies vals[off[i]:off[i]+width].
func (p *Program) evalAll(in []float64) (vals []float64, off []int) {
	if len(in) != len(p.Inputs) {
		panic(fmt.Sprintf("tape: Eval: program %s has %d inputs, got %d", p.Name, len(p.Inputs), len(in)))
	}
	off = make([]int, len(p.Values)+1)
	for i := range p.Values {
		off[i+1] = off[i] + p.Width(ID(i))
	}
	vals = make([]float64, off[len(p.Values)])
	var scal []float64
	var tup [][]float64
	for i, v := range p.Values {
		dst := vals[off[i]:off[i+1]]
		switch v.Op {
		case ops.OpInput:
			dst[0] = in[int(v.Aux)]
			continue
		case ops.OpConst:
			dst[0] = v.Aux
			continue
		case ops.OpExtract:
			dst[0] = vals[off[v.Args[0]]+int(v.Aux)]
			continue
		case ops.OpCall:
			scal = scal[:0]
			for _, a := range v.Args {
				scal = append(scal, vals[off[a]])
			}
			p.Funcs[int(v.Aux)].Eval(dst, scal)
			continue
		}
		def := ops.Lookup(v.Op)
		if def.EvalTuple != nil {
			tup = tup[:0]
			for _, a := range v.Args {
				tup = append(tup, vals[off[a]:off[a+1]])
			}
			def.EvalTuple(dst, tup, v.Aux)
			continue
		}
		scal = scal[:0]
		for _, a := range v.Args {
			scal = append(scal, vals[off[a]])
		}
		dst[0] = def.Eval(scal, v.Aux)
	}
	return vals, off
}

// NonFiniteError reports a non-finite result: the trajectory, the output,
// and the first value of the program that turned finite arguments into a
// non-finite result (the op to look at).
type NonFiniteError struct {
	Program    string
	Trajectory int
	Output     string
	Value      ID      // first value with finite arguments and a non-finite result; -1 if an input
	Line       string  // that value printed, as "v12 = Log v3"
	Result     float64 // its result (the first non-finite component)
	Singular   bool    // the value is an LU factorisation of a singular matrix
}

func (e *NonFiniteError) Error() string {
	what := fmt.Sprintf("gave %v", e.Result)
	if e.Singular {
		what = "the matrix is singular to working precision"
	}
	if e.Value < 0 {
		return fmt.Sprintf("tape: program %s: trajectory %d: output %s is %v: an input is not finite",
			e.Program, e.Trajectory, e.Output, e.Result)
	}
	return fmt.Sprintf("tape: program %s: trajectory %d: output %s is not finite; first at %s: %s",
		e.Program, e.Trajectory, e.Output, e.Line, what)
}

// locateNonFinite re-evaluates one trajectory and names the first value
// that produced a non-finite number from finite arguments.
func (p *Program) locateNonFinite(in []float64, traj int, output string) *NonFiniteError {
	vals, off := p.evalAll(in)
	e := &NonFiniteError{Program: p.Name, Trajectory: traj, Output: output, Value: -1, Result: math.NaN()}
	finite := func(id ID) bool {
		for _, x := range vals[off[id]:off[id+1]] {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return false
			}
		}
		return true
	}
	for i, v := range p.Values {
		if finite(ID(i)) || v.Op == ops.OpInput {
			continue
		}
		ok := true
		for _, a := range v.Args {
			ok = ok && finite(a)
		}
		if !ok {
			continue
		}
		e.Value = ID(i)
		e.Line = p.line(ID(i))
		e.Singular = v.Op == ops.OpLUFactor
		for _, x := range vals[off[i]:off[i+1]] {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				e.Result = x
				break
			}
		}
		return e
	}
	return e
}
