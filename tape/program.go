package tape

import (
	"fmt"
	"strings"

	"github.com/gradsolve-go/gradsolve/ops"
)

// ID names a value of a program: its index in Program.Values.
type ID = ops.Ref

// Value is one node of a program: op applied to the values Args, with the
// auxiliary number Aux (the constant of a Const, the input number of an
// Input, the exponent of a Powi, the component of an Extract, the
// dimension of an LUFactor, the callee's index in Program.Funcs of a
// Call).
type Value struct {
	Op   ops.Op
	Aux  float64
	Args []ID
}

// Input describes a program input. A shared input holds one value for the
// whole ensemble (a shared parameter, a step size common to all); any other
// input holds one value per trajectory.
type Input struct {
	Name   string
	Shared bool
}

// Output is a program output. If Sum is set, the executor returns the sum
// of the output over all trajectories (one number) instead of one number
// per trajectory; reverse mode marks the gradients of shared inputs so.
type Output struct {
	Name string
	ID   ID
	Sum  bool
}

// Program is a straight-line SSA program of per-trajectory scalar (and
// small tuple) values. Values are in topological order: every argument of
// Values[i] has an ID below i. Input k is the value {Op: OpInput, Aux: k}.
// Programs are immutable once built: transforms return new programs.
//
// Funcs are the sub-programs the program calls: a value {Op: OpCall,
// Aux: k, Args: a} calls Funcs[k] with one argument per input of Funcs[k]
// (shared inputs included), in order; its value is the tuple of the
// callee's outputs, whose components are taken with OpExtract. A callee's
// outputs are scalars and not Sum; a callee may have Funcs of its own,
// but no program may call itself, directly or not. A callee's Shared
// flags only document its inputs: a call passes one scalar per input.
type Program struct {
	Name    string
	Inputs  []Input
	Values  []Value
	Outputs []Output
	Funcs   []*Program
}

// String returns v12 for ID 12.
func vname(id ID) string { return fmt.Sprintf("v%d", id) }

// Width returns the number of scalars held by value id (1 except for the
// tuple values of the linear-solve ops and of calls: the callee's number
// of outputs).
func (p *Program) Width(id ID) int {
	v := &p.Values[id]
	if v.Op == ops.OpCall {
		return len(p.Funcs[int(v.Aux)].Outputs)
	}
	aux0 := 0.0
	if len(v.Args) > 0 {
		aux0 = p.Values[v.Args[0]].Aux
	}
	return ops.Width(v.Op, v.Aux, aux0)
}

// Len returns the number of values of the program.
func (p *Program) Len() int { return len(p.Values) }

// String prints the program one value a line, as in
//
//	v12 = Mul v3 v7
//
// constants and inputs with their aux in brackets, a call with its
// callee's index and name, then the outputs, then each callee, indented
// by a tab.
func (p *Program) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "program %s: %d inputs, %d values, %d outputs", p.Name, len(p.Inputs), len(p.Values), len(p.Outputs))
	if len(p.Funcs) > 0 {
		fmt.Fprintf(&sb, ", %d funcs", len(p.Funcs))
	}
	sb.WriteByte('\n')
	for i := range p.Values {
		sb.WriteString(p.line(ID(i)))
		sb.WriteByte('\n')
	}
	for i, o := range p.Outputs {
		fmt.Fprintf(&sb, "out %d %s = %s", i, o.Name, vname(o.ID))
		if o.Sum {
			sb.WriteString(" (summed)")
		}
		sb.WriteByte('\n')
	}
	for k, f := range p.Funcs {
		fmt.Fprintf(&sb, "func %d:\n", k)
		for _, l := range strings.SplitAfter(strings.TrimSuffix(f.String(), "\n"), "\n") {
			sb.WriteString("\t" + l)
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

// line prints value id as in String: "v12 = Mul v3 v7".
func (p *Program) line(id ID) string {
	v := p.Values[id]
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s = %v", vname(id), v.Op)
	switch v.Op {
	case ops.OpConst, ops.OpPowi, ops.OpExtract, ops.OpLUFactor:
		fmt.Fprintf(&sb, " [%v]", v.Aux)
	case ops.OpCall:
		fmt.Fprintf(&sb, " [%v]", v.Aux)
		if k := int(v.Aux); k >= 0 && k < len(p.Funcs) && p.Funcs[k] != nil {
			sb.WriteString(" " + p.Funcs[k].Name)
		}
	case ops.OpInput:
		fmt.Fprintf(&sb, " [%d]", int(v.Aux))
		if k := int(v.Aux); k >= 0 && k < len(p.Inputs) {
			sb.WriteString(" " + p.Inputs[k].Name)
			if p.Inputs[k].Shared {
				sb.WriteString(" shared")
			}
		}
	}
	for _, a := range v.Args {
		sb.WriteString(" " + vname(a))
	}
	return sb.String()
}

// Validate checks the program's structure: topological order, argument
// counts and kinds, inputs and outputs in range, and for every call a
// callee index in range, one argument per callee input, and a valid
// callee (recursively) whose outputs are not Sum and which does not call
// itself. Transforms and the executor call it; programs built by Builder
// are valid by construction.
func (p *Program) Validate() error {
	return p.validate(make(map[*Program]bool))
}

// validate is Validate; state maps the programs being validated (on the
// current path of calls) to false and those found valid to true.
func (p *Program) validate(state map[*Program]bool) error {
	state[p] = false
	for k, f := range p.Funcs {
		if f == nil {
			return fmt.Errorf("tape: program %s: func %d is nil", p.Name, k)
		}
		ok, seen := state[f]
		if seen && !ok {
			return fmt.Errorf("tape: program %s: func %d (%s) calls itself", p.Name, k, f.Name)
		}
		if !seen {
			if err := f.validate(state); err != nil {
				return fmt.Errorf("tape: program %s: func %d: %w", p.Name, k, err)
			}
		}
		for j, o := range f.Outputs {
			if o.Sum {
				return fmt.Errorf("tape: program %s: func %d (%s): output %d (%s) is summed; a callee's outputs must not be", p.Name, k, f.Name, j, o.Name)
			}
		}
	}
	seen := make([]bool, len(p.Inputs))
	argOps := make([]ops.Op, 0, 8)
	argAux := make([]float64, 0, 8)
	for i, v := range p.Values {
		if v.Op == ops.OpInvalid || int(v.Op) >= ops.NumOps {
			return fmt.Errorf("tape: program %s: %s has invalid op %v", p.Name, vname(ID(i)), v.Op)
		}
		argOps, argAux = argOps[:0], argAux[:0]
		for _, a := range v.Args {
			if a < 0 || int(a) >= i {
				return fmt.Errorf("tape: program %s: %s = %v uses %s, which is not defined before it", p.Name, vname(ID(i)), v.Op, vname(a))
			}
			argOps = append(argOps, p.Values[a].Op)
			argAux = append(argAux, p.Values[a].Aux)
		}
		if v.Op == ops.OpInput {
			k := int(v.Aux)
			if k < 0 || k >= len(p.Inputs) || seen[k] {
				return fmt.Errorf("tape: program %s: %s is input %v, out of range or repeated", p.Name, vname(ID(i)), v.Aux)
			}
			seen[k] = true
			continue
		}
		if err := ops.CheckArgs(v.Op, v.Aux, argOps, argAux); err != nil {
			return fmt.Errorf("tape: program %s: %s: %w", p.Name, vname(ID(i)), err)
		}
		switch v.Op {
		case ops.OpExtract:
			if w := p.Width(v.Args[0]); int(v.Aux) >= w {
				return fmt.Errorf("tape: program %s: %s extracts component %v of a tuple of width %d", p.Name, vname(ID(i)), v.Aux, w)
			}
		case ops.OpCall:
			if err := p.checkCall(int(v.Aux), len(v.Args)); err != nil {
				return fmt.Errorf("tape: program %s: %s: %w", p.Name, vname(ID(i)), err)
			}
		}
	}
	for k, s := range seen {
		if !s {
			return fmt.Errorf("tape: program %s: input %d (%s) has no Input value", p.Name, k, p.Inputs[k].Name)
		}
	}
	for k, o := range p.Outputs {
		if o.ID < 0 || int(o.ID) >= len(p.Values) {
			return fmt.Errorf("tape: program %s: output %d refers to %s, out of range", p.Name, k, vname(o.ID))
		}
		if p.Width(o.ID) != 1 || p.Values[o.ID].Op == ops.OpCall {
			return fmt.Errorf("tape: program %s: output %d is a tuple; extract its components", p.Name, k)
		}
	}
	state[p] = true
	return nil
}

// checkCall reports whether a call of Funcs[k] with nargs arguments fits
// the callee (k is known to be non-negative).
func (p *Program) checkCall(k, nargs int) error {
	if k >= len(p.Funcs) {
		return fmt.Errorf("call of func %d; the program has %d funcs", k, len(p.Funcs))
	}
	if f := p.Funcs[k]; nargs != len(f.Inputs) {
		return fmt.Errorf("call of %s, which has %d inputs, with %d arguments", f.Name, len(f.Inputs), nargs)
	}
	return nil
}
