package tape

import "math"

// The fused kernels of the executor (see plan). They compute every value
// term by term in the order of its ops, so their results are bit for bit
// those of the ops' Block kernels. Every product is converted to float64
// explicitly: the Go specification then forbids fusing it with a later
// addition into one multiply-add (which some architectures would do,
// even across statements), so it is rounded as Mul rounds it.

// matKernel computes rows values over a block, s_r = init_r ⊕ C[r][0]·v_0
// ⊕ C[r][1]·v_1 ⊕ … for t < terms, where the C[r][t] are uniform
// coefficients and the v_t per-trajectory vectors shared by all rows: the
// rows of W·x + b (a run of Dots) or of Wᵀ·ȳ (reverse-mode sums). With fma,
// each term is s = fma(C[r][t], v_t, s) (a Dot's chain); without, s = s +
// C[r][t]·v_t, the product rounded first. Without init the sum starts
// from the first product.
//
// Its slices are the rows destinations, then (with init, unless bias ≥ 0)
// the rows initial values (one value if uniform), then the terms vectors.
// The coefficients are packed in Exec.uni at coef, in the order of
// layout: rows in tiles of four, each tile term-major (the four rows'
// coefficients of a term side by side), then the rows left over, each
// row-major. If the initial values are all uniform (a layer's biases),
// they are packed at bias instead, one a row in order.
//
// Cost: rows·terms multiply-adds a trajectory. The AVX2 kernel keeps the
// sums of a tile of four rows and eight trajectories in registers over
// the terms, loading each vector element once for four rows and each
// coefficient once for eight trajectories; the Go kernels (other
// processors) tile four rows and two trajectories.
type matKernel struct {
	fma         bool
	init        bool
	rows, terms int
	coef        int
	bias        int // -1 if the initial values are slices
}

// layout calls f(r, t) for every coefficient in packed order.
func (k *matKernel) layout(f func(r, t int)) {
	r := 0
	for ; r+4 <= k.rows; r += 4 {
		for t := 0; t < k.terms; t++ {
			for i := 0; i < 4; i++ {
				f(r+i, t)
			}
		}
	}
	for ; r < k.rows; r++ {
		for t := 0; t < k.terms; t++ {
			f(r, t)
		}
	}
}

// at returns the packed coefficient C[r][t] from c.
func (k *matKernel) at(c []float64, r, t int) float64 {
	if r < k.rows&^3 {
		return c[(r&^3)*k.terms+4*t+r&3]
	}
	return c[r*k.terms+t]
}

func (k *matKernel) run(s [][]float64, uni []float64, m int) {
	R, T := k.rows, k.terms
	dst, rest := s[:R], s[R:]
	c := uni[k.coef : k.coef+R*T]
	var bias []float64
	if k.init && k.bias >= 0 {
		bias = uni[k.bias : k.bias+R]
	}
	if k.init && (bias == nil || !useAVX2) {
		for r, d := range dst {
			if bias != nil {
				d, x := d[:m], bias[r]
				for l := range d {
					d[l] = x
				}
				continue
			}
			d = d[:m]
			if x := rest[r]; len(x) == 1 {
				for l := range d {
					d[l] = x[0]
				}
			} else {
				copy(d, x[:m])
			}
		}
	}
	if k.init && bias == nil {
		rest = rest[R:]
	}
	vec := rest[:T]
	if useAVX2 {
		for _, v := range vec {
			_ = v[m-1] // the assembly reads m values of every vector
		}
		var start int8 // the sums start from dst
		switch {
		case !k.init:
			start = 1 // from the first products
		case bias != nil:
			start = 2 // from bias
		}
		b := &c[0] // not read unless start is 2
		r := 0
		for ; r+4 <= R; r += 4 {
			cq := c[r*T : (r+4)*T]
			d := dst[r : r+4 : r+4]
			d0, d1, d2, d3 := &d[0][:m][0], &d[1][:m][0], &d[2][:m][0], &d[3][:m][0]
			if bias != nil {
				b = &bias[r : r+4][0]
			}
			if k.fma {
				fma4AVX(d0, d1, d2, d3, &cq[0], &vec[0], T, m, b, start)
			} else {
				mad4AVX(d0, d1, d2, d3, &cq[0], &vec[0], T, m, b, start)
			}
		}
		for ; r < R; r++ {
			cr := c[r*T : (r+1)*T]
			d := &dst[r][:m][0]
			if bias != nil {
				b = &bias[r]
			}
			if k.fma {
				fma1AVX(d, &cr[0], &vec[0], T, m, b, start)
			} else {
				mad1AVX(d, &cr[0], &vec[0], T, m, b, start)
			}
		}
		return
	}
	t0 := 0
	if !k.init {
		v := vec[0][:m]
		for r, d := range dst {
			cr := k.at(c, r, 0)
			d = d[:m]
			for l := range d {
				d[l] = float64(cr * v[l])
			}
		}
		t0 = 1
	}
	r := 0
	for ; r+4 <= R; r += 4 {
		cq := c[r*T : (r+4)*T]
		d := dst[r : r+4 : r+4]
		if k.fma {
			fma4(d, cq, vec, t0, m)
		} else {
			mad4(d, cq, vec, t0, m)
		}
	}
	for ; r < R; r++ {
		cr := c[r*T : (r+1)*T]
		if k.fma {
			fma1(dst[r][:m], cr, vec, t0)
		} else {
			mad1(dst[r][:m], cr, vec, t0)
		}
	}
}

// useAVX2 selects the assembly kernels where the processor has them;
// tests turn it off to compare them with the Go ones.
var useAVX2 = haveAVX2

// AVX2 reports whether the executors' kernels use AVX2 and FMA3 (the
// processor and the operating system support them, and the build is not
// purego), for other packages' assembly kernels to follow.
func AVX2() bool { return useAVX2 }

// fma4 runs terms t0… of four rows: d_i = fma(c[4t+i], v_t, d_i).
func fma4(d [][]float64, c []float64, vec [][]float64, t0, m int) {
	d0, d1, d2, d3 := d[0][:m], d[1][:m], d[2][:m], d[3][:m]
	l := 0
	for ; l+2 <= m; l += 2 {
		a0, b0 := d0[l], d0[l+1]
		a1, b1 := d1[l], d1[l+1]
		a2, b2 := d2[l], d2[l+1]
		a3, b3 := d3[l], d3[l+1]
		for t := t0; t < len(vec); t++ {
			v := vec[t][l : l+2 : l+2]
			w := c[4*t : 4*t+4 : 4*t+4]
			x, y := v[0], v[1]
			a0, b0 = math.FMA(w[0], x, a0), math.FMA(w[0], y, b0)
			a1, b1 = math.FMA(w[1], x, a1), math.FMA(w[1], y, b1)
			a2, b2 = math.FMA(w[2], x, a2), math.FMA(w[2], y, b2)
			a3, b3 = math.FMA(w[3], x, a3), math.FMA(w[3], y, b3)
		}
		d0[l], d0[l+1] = a0, b0
		d1[l], d1[l+1] = a1, b1
		d2[l], d2[l+1] = a2, b2
		d3[l], d3[l+1] = a3, b3
	}
	for ; l < m; l++ {
		a0, a1, a2, a3 := d0[l], d1[l], d2[l], d3[l]
		for t := t0; t < len(vec); t++ {
			x := vec[t][l]
			w := c[4*t : 4*t+4 : 4*t+4]
			a0, a1 = math.FMA(w[0], x, a0), math.FMA(w[1], x, a1)
			a2, a3 = math.FMA(w[2], x, a2), math.FMA(w[3], x, a3)
		}
		d0[l], d1[l], d2[l], d3[l] = a0, a1, a2, a3
	}
}

// mad4 is fma4 with the products rounded: d_i = d_i + c[4t+i]·v_t.
func mad4(d [][]float64, c []float64, vec [][]float64, t0, m int) {
	d0, d1, d2, d3 := d[0][:m], d[1][:m], d[2][:m], d[3][:m]
	l := 0
	for ; l+2 <= m; l += 2 {
		a0, b0 := d0[l], d0[l+1]
		a1, b1 := d1[l], d1[l+1]
		a2, b2 := d2[l], d2[l+1]
		a3, b3 := d3[l], d3[l+1]
		for t := t0; t < len(vec); t++ {
			v := vec[t][l : l+2 : l+2]
			w := c[4*t : 4*t+4 : 4*t+4]
			x, y := v[0], v[1]
			a0, b0 = a0+float64(w[0]*x), b0+float64(w[0]*y)
			a1, b1 = a1+float64(w[1]*x), b1+float64(w[1]*y)
			a2, b2 = a2+float64(w[2]*x), b2+float64(w[2]*y)
			a3, b3 = a3+float64(w[3]*x), b3+float64(w[3]*y)
		}
		d0[l], d0[l+1] = a0, b0
		d1[l], d1[l+1] = a1, b1
		d2[l], d2[l+1] = a2, b2
		d3[l], d3[l+1] = a3, b3
	}
	for ; l < m; l++ {
		a0, a1, a2, a3 := d0[l], d1[l], d2[l], d3[l]
		for t := t0; t < len(vec); t++ {
			x := vec[t][l]
			w := c[4*t : 4*t+4 : 4*t+4]
			a0, a1 = a0+float64(w[0]*x), a1+float64(w[1]*x)
			a2, a3 = a2+float64(w[2]*x), a3+float64(w[3]*x)
		}
		d0[l], d1[l], d2[l], d3[l] = a0, a1, a2, a3
	}
}

// fma1 runs terms t0… of one row: d = fma(c[t], v_t, d), four
// trajectories at a time.
func fma1(d, c []float64, vec [][]float64, t0 int) {
	m := len(d)
	l := 0
	for ; l+4 <= m; l += 4 {
		a0, a1, a2, a3 := d[l], d[l+1], d[l+2], d[l+3]
		for t := t0; t < len(vec); t++ {
			v := vec[t][l : l+4 : l+4]
			w := c[t]
			a0, a1 = math.FMA(w, v[0], a0), math.FMA(w, v[1], a1)
			a2, a3 = math.FMA(w, v[2], a2), math.FMA(w, v[3], a3)
		}
		d[l], d[l+1], d[l+2], d[l+3] = a0, a1, a2, a3
	}
	for ; l < m; l++ {
		a := d[l]
		for t := t0; t < len(vec); t++ {
			a = math.FMA(c[t], vec[t][l], a)
		}
		d[l] = a
	}
}

// mad1 is fma1 with the products rounded.
func mad1(d, c []float64, vec [][]float64, t0 int) {
	m := len(d)
	l := 0
	for ; l+4 <= m; l += 4 {
		a0, a1, a2, a3 := d[l], d[l+1], d[l+2], d[l+3]
		for t := t0; t < len(vec); t++ {
			v := vec[t][l : l+4 : l+4]
			w := c[t]
			a0, a1 = a0+float64(w*v[0]), a1+float64(w*v[1])
			a2, a3 = a2+float64(w*v[2]), a3+float64(w*v[3])
		}
		d[l], d[l+1], d[l+2], d[l+3] = a0, a1, a2, a3
	}
	for ; l < m; l++ {
		a := d[l]
		for t := t0; t < len(vec); t++ {
			a += float64(c[t] * vec[t][l])
		}
		d[l] = a
	}
}

// Flags of a chainKernel term.
const (
	termProd  = 1 << iota // the term is the product of two arguments
	termNeg               // the term is subtracted
	termScale             // the sum is multiplied by the term
	termUniA              // its (first) argument is uniform: a one-value slice
	termUniB              // a product's second argument is uniform: a one-value slice
)

// chainKernel computes sum chains over a block: for each entry, s = its
// first term, then s = s ± term for the others, where a term is a value
// or the product of two, rounded, or s = s·a for a scale term. nterms
// holds the number of terms of each entry and flags every term's flags;
// the slices are the destinations, one an entry, then the terms'
// arguments in order, each a full block, except a uniform scalar
// (termUniA, termUniB: one value, which the kernel broadcasts; other
// uniform values are broadcast blocks): the plan guarantees that every
// other slice holds at least m values, which the assembly does not
// check. The first term of an entry is never subtracted.
//
// Cost: a load of every argument and a multiply-add a term and
// trajectory (a uniform scalar: one load for all); the AVX2 kernel keeps
// sixteen trajectories' sums in registers over an entry's terms.
type chainKernel struct {
	nterms []int32
	flags  []uint8
}

// entryOf returns the function from the index of an argument of the
// kernel to the index of the entry that reads it.
func (k *chainKernel) entryOf() func(int) int {
	var of []int
	f := k.flags
	for e, n := range k.nterms {
		for _, fl := range f[:n] {
			of = append(of, e)
			if fl&termProd != 0 {
				of = append(of, e)
			}
		}
		f = f[n:]
	}
	return func(j int) int { return of[j] }
}

func (k *chainKernel) run(s [][]float64, _ []float64, m int) {
	if useAVX2 {
		if m > 16 && k.long() {
			k.runBlocked(s, m)
			return
		}
		chainAVX(&s[0], &k.flags[0], &k.nterms[0], len(k.nterms), m)
		return
	}
	// As the assembly, a chunk of trajectories at a time: its terms are
	// all read before its sum is written, so a destination may be the
	// slice of one of its entry's terms (an output written in place).
	const chunk = 64
	var acc, ua, ub [chunk]float64
	// vals returns a block's values of an argument: a uniform scalar's
	// (flag uni) broadcast to buf.
	vals := func(a []float64, fl, uni uint8, buf *[chunk]float64, lo, hi int) []float64 {
		if fl&uni == 0 {
			return a[lo:hi]
		}
		b := buf[:hi-lo]
		for l := range b {
			b[l] = a[0]
		}
		return b
	}
	ne := len(k.nterms)
	for lo := 0; lo < m; lo += chunk {
		hi := min(lo+chunk, m)
		args, f := s[ne:], k.flags
		for e, n := range k.nterms {
			d := acc[:hi-lo]
			copy(d, vals(args[0], f[0], termUniA, &ua, lo, hi))
			args = args[1:]
			if f[0]&termProd != 0 {
				mulTo(d, vals(args[0], f[0], termUniB, &ub, lo, hi))
				args = args[1:]
			}
			for _, fl := range f[1:n] {
				a := vals(args[0], fl, termUniA, &ua, lo, hi)
				args = args[1:]
				if fl&termProd != 0 {
					b := vals(args[0], fl, termUniB, &ub, lo, hi)
					args = args[1:]
					if fl&termNeg != 0 {
						for l := range d {
							d[l] -= float64(a[l] * b[l])
						}
					} else {
						for l := range d {
							d[l] += float64(a[l] * b[l])
						}
					}
					continue
				}
				switch {
				case fl&termScale != 0:
					mulTo(d, a)
				case fl&termNeg != 0:
					for l := range d {
						d[l] -= a[l]
					}
				default:
					for l := range d {
						d[l] += a[l]
					}
				}
			}
			copy(s[e][lo:hi], d)
			f = f[n:]
		}
	}
}

// chainBlock is the most terms of a long chain (more than 2·chainBlock)
// that runBlocked sums over all of a block's trajectories at a time.
const chainBlock = 64

// long reports whether an entry of k has more than 2·chainBlock terms.
func (k *chainKernel) long() bool {
	for _, n := range k.nterms {
		if n > 2*chainBlock {
			return true
		}
	}
	return false
}

// runBlocked is the AVX2 kernel's sums entry by entry, a long entry
// chainBlock terms at a time over all m trajectories: the kernel takes
// sixteen trajectories through all of an entry's terms, one or two cache
// lines of each term's slice, so that an entry of thousands of terms (a
// loss over many saved states) reads thousands of slices a line at a time
// and the prefetchers follow none of them; a block of terms is read slice
// by slice. Each block's sums go to a buffer that the next block starts
// from (its first term, as the sum itself: the same additions in the
// same order), the last block's to the destination, so that a
// destination may still be one of its entry's terms' slices.
func (k *chainKernel) runBlocked(s [][]float64, m int) {
	ne := len(k.nterms)
	args, f := s[ne:], k.flags
	var acc []float64
	sub := make([][]float64, 0, 2+2*chainBlock)
	flags := make([]uint8, 0, 1+chainBlock)
	for e, n := range k.nterms {
		// The entry's argument slices.
		na := 0
		for _, fl := range f[:n] {
			na++
			if fl&termProd != 0 {
				na++
			}
		}
		ea, ef := args[:na], f[:n]
		args, f = args[na:], f[n:]
		if n <= 2*chainBlock {
			sub = append(append(sub[:0], s[e]), ea...)
			chainAVX(&sub[0], &ef[0], &n, 1, m)
			continue
		}
		if acc == nil {
			acc = make([]float64, m)
		}
		for t0 := 0; t0 < int(n); {
			t1 := min(t0+chainBlock, int(n))
			dst := acc
			if t1 == int(n) {
				dst = s[e]
			}
			sub, flags = append(sub[:0], dst), flags[:0]
			if t0 > 0 {
				sub, flags = append(sub, acc), append(flags, 0)
			}
			for _, fl := range ef[t0:t1] {
				flags = append(flags, fl)
				sub = append(sub, ea[0])
				ea = ea[1:]
				if fl&termProd != 0 {
					sub = append(sub, ea[0])
					ea = ea[1:]
				}
			}
			cnt := int32(len(flags))
			chainAVX(&sub[0], &flags[0], &cnt, 1, m)
			t0 = t1
		}
	}
}

// mulTo sets d[l] = d[l]·b[l].
func mulTo(d, b []float64) {
	b = b[:len(d)]
	for l := range d {
		d[l] = float64(d[l] * b[l])
	}
}

// mapKernel applies an elementwise op of one argument to a batch of
// values: its slices are the destinations, then their arguments. It calls
// the op's Block for each, with the value's aux, except for Tanh with
// AVX2, whose kernel computes math.Tanh bit for bit four trajectories at
// a time (see tanhAVX).
type mapKernel struct {
	block func(dst []float64, args [][]float64, aux float64)
	aux   []float64
	tanh  bool
}

func (k *mapKernel) run(s [][]float64, _ []float64, m int) {
	n := len(k.aux)
	dst, args := s[:n], s[n:2*n]
	if k.tanh && useAVX2 {
		m4 := m &^ 3
		for e, d := range dst {
			d, x := d[:m], args[e][:m]
			if m4 > 0 {
				tanhAVX(&d[0], &x[0], m4)
			}
			for l := m4; l < m; l++ {
				d[l] = math.Tanh(x[l])
			}
		}
		return
	}
	for e, d := range dst {
		k.block(d[:m], args[e:e+1], k.aux[e])
	}
}
