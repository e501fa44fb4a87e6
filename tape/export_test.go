package tape

// VJPUnsimplified is VJP without the builder's simplification (constant
// folding, absorption, CSE); dead values are still removed.
func VJPUnsimplified(p *Program, wrt []int) (*Program, error) { return vjp(p, wrt, false) }
