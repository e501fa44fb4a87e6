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
// dimension of an LUFactor).
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
type Program struct {
	Name    string
	Inputs  []Input
	Values  []Value
	Outputs []Output
}

// String returns v12 for ID 12.
func vname(id ID) string { return fmt.Sprintf("v%d", id) }

// Width returns the number of scalars held by value id (1 except for the
// tuple values of the linear-solve ops).
func (p *Program) Width(id ID) int {
	v := &p.Values[id]
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
// constants and inputs with their aux in brackets, then the outputs.
func (p *Program) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "program %s: %d inputs, %d values, %d outputs\n", p.Name, len(p.Inputs), len(p.Values), len(p.Outputs))
	for i, v := range p.Values {
		fmt.Fprintf(&sb, "%s = %v", vname(ID(i)), v.Op)
		switch v.Op {
		case ops.OpConst, ops.OpPowi, ops.OpExtract, ops.OpLUFactor:
			fmt.Fprintf(&sb, " [%v]", v.Aux)
		case ops.OpInput:
			in := p.Inputs[int(v.Aux)]
			fmt.Fprintf(&sb, " [%d] %s", int(v.Aux), in.Name)
			if in.Shared {
				sb.WriteString(" shared")
			}
		}
		for _, a := range v.Args {
			sb.WriteString(" " + vname(a))
		}
		sb.WriteByte('\n')
	}
	for i, o := range p.Outputs {
		fmt.Fprintf(&sb, "out %d %s = %s", i, o.Name, vname(o.ID))
		if o.Sum {
			sb.WriteString(" (summed)")
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

// Validate checks the program's structure: topological order, argument
// counts and kinds, inputs and outputs in range. Transforms and the
// executor call it; programs built by Builder are valid by construction.
func (p *Program) Validate() error {
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
		if v.Op == ops.OpExtract {
			if w := p.Width(v.Args[0]); int(v.Aux) >= w {
				return fmt.Errorf("tape: program %s: %s extracts component %v of a tuple of width %d", p.Name, vname(ID(i)), v.Aux, w)
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
		if p.Width(o.ID) != 1 {
			return fmt.Errorf("tape: program %s: output %d is a tuple; extract its components", p.Name, k)
		}
	}
	return nil
}
