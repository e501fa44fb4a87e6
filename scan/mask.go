package scan

import "github.com/gradsolve-go/gradsolve/tape"

// Steps of size 0 are identities in value and derivative. They are not
// run: a Rosenbrock step masks its Jacobian terms at h == 0, but the
// reverse sweep through a mask still multiplies a zero cotangent by the
// derivatives of the masked terms, which may be infinite (∂f/∂t at a
// singular end time), and 0·∞ is NaN. runLive runs e only over the
// trajectories whose step size is not zero and leaves the others as they
// are, so a padded step passes values and cotangents through untouched
// and adds nothing to the parameter gradients.

// masker holds the scratch buffers of runLive.
type masker struct {
	live       []int
	in, out    [][]float64
	bufIn, buf []float64
}

// runLive is e.Run(out, in, m) restricted to the trajectories i < m with
// h[i] != 0. Per-trajectory outputs of the others keep their values;
// summed outputs sum over the live ones only.
func (k *masker) runLive(e *tape.Exec, out, in [][]float64, h []float64, m int) error {
	k.live = k.live[:0]
	for i, x := range h[:m] {
		if x != 0 {
			k.live = append(k.live, i)
		}
	}
	if len(k.live) == m {
		return e.Run(out, in, m)
	}
	n := len(k.live)
	if n == 0 {
		for j, o := range e.Program().Outputs {
			if o.Sum {
				out[j][0] = 0
			}
		}
		return nil
	}
	p := e.Program()
	need := 0
	for _, s := range p.Inputs {
		if !s.Shared {
			need += n
		}
	}
	if cap(k.bufIn) < need {
		k.bufIn = make([]float64, need)
	}
	k.in = k.in[:0]
	off := 0
	for j, s := range p.Inputs {
		if s.Shared {
			k.in = append(k.in, in[j])
			continue
		}
		g := k.bufIn[off : off+n]
		off += n
		for i, l := range k.live {
			g[i] = in[j][l]
		}
		k.in = append(k.in, g)
	}
	need = 0
	for _, o := range p.Outputs {
		if !o.Sum {
			need += n
		}
	}
	if cap(k.buf) < need {
		k.buf = make([]float64, need)
	}
	k.out = k.out[:0]
	off = 0
	for j, o := range p.Outputs {
		if o.Sum {
			k.out = append(k.out, out[j])
			continue
		}
		k.out = append(k.out, k.buf[off:off+n])
		off += n
	}
	if err := e.Run(k.out, k.in, n); err != nil {
		return err
	}
	for j, o := range p.Outputs {
		if o.Sum {
			continue
		}
		for i, l := range k.live {
			out[j][l] = k.out[j][i]
		}
	}
	return nil
}
