package tape

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
)

// Hash returns a fingerprint of the program: the hex SHA-256 of its inputs
// (names and sharing), values (ops, auxiliary numbers and arguments) and
// outputs. Programs with equal hashes compute the same function the same
// way; the name of the program does not enter. It costs one pass over the
// program.
func (p *Program) Hash() string {
	h := sha256.New()
	var b [8]byte
	u64 := func(x uint64) {
		binary.LittleEndian.PutUint64(b[:], x)
		h.Write(b[:])
	}
	str := func(s string) {
		u64(uint64(len(s)))
		h.Write([]byte(s))
	}
	u64(uint64(len(p.Inputs)))
	for _, in := range p.Inputs {
		str(in.Name)
		if in.Shared {
			u64(1)
		} else {
			u64(0)
		}
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
		if o.Sum {
			u64(1)
		} else {
			u64(0)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
