package tape

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"math"
	"slices"
)

// Hash returns a fingerprint of the program: the hex SHA-256 of its inputs
// (names and sharing), values (ops, auxiliary numbers and arguments) and
// outputs, and those of its callees (Funcs). Programs with equal hashes
// compute the same function the same way; the names of the programs do
// not enter. It costs one pass over the program and its callees.
func (p *Program) Hash() string {
	h := sha256.New()
	p.hashInto(h)
	return hex.EncodeToString(h.Sum(nil))
}

func (p *Program) hashInto(h hash.Hash) {
	var b [8]byte
	u64 := func(x uint64) {
		binary.LittleEndian.PutUint64(b[:], x)
		h.Write(b[:])
	}
	flag := func(x bool) {
		if x {
			u64(1)
		} else {
			u64(0)
		}
	}
	u64(uint64(len(p.Inputs)))
	for _, in := range p.Inputs {
		u64(uint64(len(in.Name)))
		h.Write([]byte(in.Name))
		flag(in.Shared)
	}
	u64(uint64(len(p.Values)))
	for _, v := range p.Values {
		u64(uint64(v.Op))
		u64(math.Float64bits(v.Aux))
		u64(uint64(len(v.Args)))
		for _, a := range v.Args {
			u64(uint64(a))
		}
	}
	u64(uint64(len(p.Outputs)))
	for _, o := range p.Outputs {
		u64(uint64(o.ID))
		flag(o.Sum)
	}
	u64(uint64(len(p.Funcs)))
	for _, f := range p.Funcs {
		f.hashInto(h)
	}
}

// SameAs reports whether p and q have equal hashes because they are
// built alike: the same inputs (names and sharing), values, outputs and
// callees, compared field by field as Hash reads them (the programs'
// names do not enter). It costs one pass over the smaller program, with
// no hashing: for a caller that holds an earlier program of known hash
// and asks whether a fresh trace is the same (ode's loss cache).
func (p *Program) SameAs(q *Program) bool {
	if p == q {
		return true
	}
	if p == nil || q == nil || len(p.Inputs) != len(q.Inputs) || len(p.Values) != len(q.Values) ||
		len(p.Outputs) != len(q.Outputs) || len(p.Funcs) != len(q.Funcs) {
		return false
	}
	// (Inputs or Values in the same memory, as a Tracer's trace that
	// matched the program given holds them, are equal.)
	for i, in := range p.Inputs {
		if i == 0 && &p.Inputs[0] == &q.Inputs[0] {
			break
		}
		if in.Name != q.Inputs[i].Name || in.Shared != q.Inputs[i].Shared {
			return false
		}
	}
	for i := range p.Values {
		if i == 0 && &p.Values[0] == &q.Values[0] {
			break
		}
		a, b := &p.Values[i], &q.Values[i]
		if a.Op != b.Op || math.Float64bits(a.Aux) != math.Float64bits(b.Aux) || !slices.Equal(a.Args, b.Args) {
			return false
		}
	}
	for i, o := range p.Outputs {
		if o.ID != q.Outputs[i].ID || o.Sum != q.Outputs[i].Sum {
			return false
		}
	}
	for i, f := range p.Funcs {
		if !f.SameAs(q.Funcs[i]) {
			return false
		}
	}
	return true
}
