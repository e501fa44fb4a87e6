package scaleout

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Outcome is the result of Simulate.
type Outcome struct {
	Cost
	Messages int         // messages sent
	Sum      [][]float64 // [P][S]: the shared gradient each GPU holds at the end
}

// Simulate runs one gradient through a discrete-event simulation of c: every
// GPU computes its share of w.Trajectories, sums its leaves, and takes part
// in algorithm a; every message occupies the sending and receiving ports
// (the GPU's NVLink port within a host, its NIC between hosts) and arrives
// a link latency after its send started. Events at the same time run in the
// order they were scheduled, so a simulation is deterministic.
//
// leaves ([K][S], K a multiple of the number of GPUs P) are the partial
// sums of the shared gradient, GPU i holding the K/P consecutive leaves
// from i·K/P; if leaves is nil, K is w.Leaves (0: P) and the leaves are
// seeded random numbers. The simulation carries the values, so Sum holds
// what every GPU ends up with. leaves is not modified.
//
// The cost is that of up to a few million events for a ring over 1,024
// GPUs: about a second.
func Simulate(c *Cluster, w Workload, a Algorithm, leaves [][]float64) (*Outcome, error) {
	if leaves != nil {
		w.Leaves = len(leaves)
	}
	cl, nl, err := check(c, w, a)
	if err != nil {
		return nil, err
	}
	if leaves == nil {
		leaves = randomLeaves(nl*cl.p, w.Shared)
	} else {
		for i, v := range leaves {
			if len(v) != w.Shared {
				return nil, fmt.Errorf("%w: leaf %d has %d values, want %d", ErrInvalid, i, len(v), w.Shared)
			}
		}
	}
	if a == FixedPoint && len(leaves) > maxLimbs {
		return nil, fmt.Errorf("%w: fixed-point: %d leaves, at most 2^20 in float64 limbs", ErrInvalid, len(leaves))
	}
	s := newSim(cl)
	out := &Outcome{Cost: Cost{GPUs: cl.p, Serial: float64(w.Trajectories) * w.PerTrajectory}, Sum: make([][]float64, cl.p)}
	finish := func(r int, v []float64) {
		out.Sum[r] = v
		out.Compute = math.Max(out.Compute, s.computeEnd[r])
		out.Reduce = math.Max(out.Reduce, s.now) // made relative below
	}
	n := w.Shared
	for r := 0; r < cl.p; r++ {
		lo := w.Trajectories * r / cl.p
		hi := w.Trajectories * (r + 1) / cl.p
		s.computeEnd[r] = float64(hi-lo) * w.PerTrajectory
	}
	mine := func(r int) [][]float64 { return leaves[r*nl : (r+1)*nl] }
	// partial is GPU r's pairwise sum of its leaves (a local kernel when it
	// has more than one).
	partial := func(r int, then func(v []float64)) {
		v := make([]float64, n)
		if nl == 1 {
			copy(v, leaves[r])
			then(v)
			return
		}
		pairwise(v, mine(r))
		s.compute(r, cl.kern+float64((nl-1)*n)*cl.add, func() { then(v) })
	}

	switch a {
	case Ring, Tree:
		var coll collective
		if a == Ring {
			coll = s.newRing(allGPUs(cl.p), n, opSum, finish)
		} else {
			coll = s.newTree(n, opSum, finish)
		}
		for r := 0; r < cl.p; r++ {
			s.at(s.computeEnd[r], func() {
				partial(r, func(v []float64) { s.call(r, coll, v) })
			})
		}
	case Gather:
		g := s.newGather(n, finish)
		for r := 0; r < cl.p; r++ {
			s.at(s.computeEnd[r], func() { partial(r, func(v []float64) { g.start(r, v) }) })
		}
	case FixedTree:
		b := s.newButterfly(n, finish)
		for r := 0; r < cl.p; r++ {
			s.at(s.computeEnd[r], func() { partial(r, func(v []float64) { b.start(r, v) }) })
		}
	case FixedPoint:
		e := make([][]int, cl.p)
		// Every GPU holds the same integers; round each distinct limb
		// vector once (math/big on 1,024 GPUs would dominate the run).
		var lastL, lastV []float64
		sumLimbs := s.newTree(limbs*n, opSum, func(r int, l []float64) {
			s.compute(r, cl.kern+float64(limbs*n)*cl.add, func() {
				v := make([]float64, n)
				for k := range v {
					if lastL != nil && slices.Equal(l[limbs*k:limbs*k+limbs], lastL[limbs*k:limbs*k+limbs]) {
						v[k] = lastV[k]
						continue
					}
					v[k] = fromLimbs(l[limbs*k:limbs*k+limbs], e[r][k])
				}
				lastL, lastV = l, v
				finish(r, v)
			})
		})
		maxAbs := s.newTree(n, opMax, func(r int, mx []float64) {
			e[r] = make([]int, n)
			l := make([]float64, limbs*n)
			for k := range mx {
				e[r][k] = exponent(mx[k])
				for _, v := range mine(r) {
					addLimbs(l[limbs*k:], v[k], e[r][k])
				}
			}
			s.compute(r, cl.kern+float64(nl*limbs*n)*cl.add, func() { s.call(r, sumLimbs, l) })
		})
		for r := 0; r < cl.p; r++ {
			s.at(s.computeEnd[r], func() {
				mx := make([]float64, n)
				for _, v := range mine(r) {
					for k := range mx {
						mx[k] = math.Max(mx[k], math.Abs(v[k]))
					}
				}
				s.compute(r, cl.kern+float64(nl*n)*cl.add, func() { s.call(r, maxAbs, mx) })
			})
		}
	}
	s.run()
	out.Messages = s.msgs
	out.Reduce -= out.Compute
	return out, nil
}

func randomLeaves(k, s int) [][]float64 {
	rnd := rand.New(rand.NewPCG(1, 1))
	out := make([][]float64, k)
	for i := range out {
		out[i] = make([]float64, s)
		for j := range out[i] {
			// Mixed signs and magnitudes, so that the order of the sums shows.
			out[i][j] = rnd.NormFloat64() * math.Ldexp(1, rnd.IntN(20)-10)
		}
	}
	return out
}

func allGPUs(p int) []int {
	m := make([]int, p)
	for i := range m {
		m[i] = i
	}
	return m
}

// Combining operations of the simulated reductions.
type op func(a, b float64) float64

var (
	opSum = func(a, b float64) float64 { return a + b }
	opMax = math.Max
)

// event is a callback at a simulated time; seq breaks ties in the order
// events were scheduled.
type event struct {
	t   float64
	seq uint64
	f   func()
}

// sim is the discrete-event engine: a binary heap of events and the busy
// times of every port and GPU.
type sim struct {
	cl   cluster
	now  float64
	seq  uint64
	heap []event
	msgs int

	nvOut, nvIn   []float64 // per GPU: the time its NVLink port is free
	netOut, netIn []float64 // per NIC
	gpu           []float64 // per GPU: the time its local kernels are done
	computeEnd    []float64 // per GPU: the end of its share of the trajectories
}

func newSim(cl cluster) *sim {
	nics := cl.h * cl.nics
	return &sim{cl: cl,
		nvOut: make([]float64, cl.p), nvIn: make([]float64, cl.p),
		netOut: make([]float64, nics), netIn: make([]float64, nics),
		gpu: make([]float64, cl.p), computeEnd: make([]float64, cl.p)}
}

func (s *sim) less(i, j int) bool {
	a, b := &s.heap[i], &s.heap[j]
	return a.t < b.t || (a.t == b.t && a.seq < b.seq)
}

// at schedules f at time t (not before now).
func (s *sim) at(t float64, f func()) {
	s.heap = append(s.heap, event{t: math.Max(t, s.now), seq: s.seq, f: f})
	s.seq++
	for i := len(s.heap) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s.heap[i], s.heap[p] = s.heap[p], s.heap[i]
		i = p
	}
}

func (s *sim) run() {
	for len(s.heap) > 0 {
		e := s.heap[0]
		last := len(s.heap) - 1
		s.heap[0] = s.heap[last]
		s.heap[last] = event{}
		s.heap = s.heap[:last]
		for i := 0; ; {
			l, m := 2*i+1, i
			if l < len(s.heap) && s.less(l, m) {
				m = l
			}
			if l+1 < len(s.heap) && s.less(l+1, m) {
				m = l + 1
			}
			if m == i {
				break
			}
			s.heap[i], s.heap[m] = s.heap[m], s.heap[i]
			i = m
		}
		s.now = e.t
		e.f()
	}
}

// compute runs a local kernel of d seconds on GPU r after its earlier ones,
// then f.
func (s *sim) compute(r int, d float64, f func()) {
	start := math.Max(s.now, s.gpu[r])
	s.gpu[r] = start + d
	s.at(start+d, f)
}

// nic returns the NIC GPU r uses.
func (s *sim) nic(r int) int {
	h, k := r/s.cl.g, r%s.cl.g
	return h*s.cl.nics + k*s.cl.nics/s.cl.g
}

// send sends a copy of v from GPU a to GPU b and calls recv with it on
// arrival. The message starts when a's port is free, occupies it for its
// transfer time, and is received when b's port is free after the latency.
func (s *sim) send(a, b int, v []float64, recv func([]float64)) {
	l := s.cl.net
	out, in := &s.netOut[s.nic(a)], &s.netIn[s.nic(b)]
	if a/s.cl.g == b/s.cl.g {
		l = s.cl.nv
		out, in = &s.nvOut[a], &s.nvIn[b]
	}
	x := float64(8*len(v)) / l.Bandwidth
	start := math.Max(s.now, *out)
	*out = start + x
	rs := math.Max(start+l.Latency, *in)
	*in = rs + x
	cp := slices.Clone(v)
	s.msgs++
	s.at(rs+x, func() { recv(cp) })
}

// collective is one call of a communication-library collective: GPUs enter
// it when they call it; messages for a GPU that has not entered wait.
type collective interface {
	enter(r int, v []float64)
}

// call enters coll on GPU r with v after the library's call overhead.
func (s *sim) call(r int, coll collective, v []float64) {
	if s.cl.p == 1 {
		coll.enter(r, v) // nothing to communicate
		return
	}
	s.at(s.now+s.cl.call, func() { coll.enter(r, v) })
}

// gate holds back what arrives for a GPU before it has entered.
type gate struct {
	in   []bool
	wait [][]func()
}

func newGate(p int) gate { return gate{in: make([]bool, p), wait: make([][]func(), p)} }

func (g *gate) deliver(i int, f func()) {
	if g.in[i] {
		f()
		return
	}
	g.wait[i] = append(g.wait[i], f)
}

func (g *gate) open(i int) {
	g.in[i] = true
	w := g.wait[i]
	g.wait[i] = nil
	for _, f := range w {
		f()
	}
}

// ring is NCCL's ring all-reduce over members (GPU numbers in ring order):
// a reduce-scatter in which chunk j starts at member j and gains each
// member's contribution as it passes (received + own), then an all-gather
// of the reduced chunks around the same ring.
type ring struct {
	s    *sim
	mem  []int
	n    int
	op   op
	done func(r int, v []float64)
	gate gate
	idx  map[int]int // GPU → member index
	res  [][]float64
	got  []int
}

func (s *sim) newRing(mem []int, n int, o op, done func(int, []float64)) *ring {
	g := &ring{s: s, mem: mem, n: n, op: o, done: done, gate: newGate(len(mem)),
		idx: map[int]int{}, res: make([][]float64, len(mem)), got: make([]int, len(mem))}
	for i, r := range mem {
		g.idx[r] = i
	}
	return g
}

func (g *ring) chunk(j int) (int, int) {
	p := len(g.mem)
	return j * g.n / p, (j + 1) * g.n / p
}

func (g *ring) enter(r int, v []float64) {
	i := g.idx[r]
	g.res[i] = v
	p := len(g.mem)
	if p == 1 {
		g.done(r, v)
		return
	}
	g.gate.open(i)
	lo, hi := g.chunk(i)
	g.forward(i, false, 0, i, v[lo:hi])
}

// forward sends chunk j from member i to the next member; step counts the
// hops it has made in its phase.
func (g *ring) forward(i int, gather bool, step, j int, d []float64) {
	p := len(g.mem)
	nx := (i + 1) % p
	g.s.send(g.mem[i], g.mem[nx], d, func(d []float64) {
		g.gate.deliver(nx, func() { g.receive(nx, gather, step+1, j, d) })
	})
}

func (g *ring) receive(i int, gather bool, step, j int, d []float64) {
	p := len(g.mem)
	lo, hi := g.chunk(j)
	own := g.res[i][lo:hi]
	if gather {
		copy(own, d)
		g.count(i)
		if step < p-1 {
			g.forward(i, true, step, j, d)
		}
		return
	}
	g.s.compute(g.mem[i], float64(len(d))*g.s.cl.add, func() {
		for k := range d {
			d[k] = g.op(d[k], own[k])
		}
		if step < p-1 {
			g.forward(i, false, step, j, d)
			return
		}
		copy(own, d) // chunk j is reduced: start its all-gather
		g.count(i)
		g.forward(i, true, 0, j, d)
	})
}

func (g *ring) count(i int) {
	g.got[i]++
	if g.got[i] == len(g.mem) {
		g.done(g.mem[i], g.res[i])
	}
}

// tree is NCCL's tree all-reduce: within each host a chain from its last
// GPU to its first, across hosts a binomial tree of the hosts' first GPUs
// rooted at host 0 (reduce: host h receives from h+1, h+2, h+4, … below its
// lowest set bit, then sends to its parent), then the broadcast back down
// the same trees.
type tree struct {
	s    *sim
	n    int
	op   op
	done func(int, []float64)
	gate gate
	acc  [][]float64
	// chain[r] is the message from GPU r+1; level[r][l] the message of the
	// host 2^l above (first GPUs only); busy[r] marks a combine in flight.
	chain [][]float64
	level []map[int][]float64
	mask  []int
	phase []int // 0 chain, 1 across hosts, 2 waiting for the result
	busy  []bool
}

func (s *sim) newTree(n int, o op, done func(int, []float64)) *tree {
	p := s.cl.p
	t := &tree{s: s, n: n, op: o, done: done, gate: newGate(p), acc: make([][]float64, p),
		chain: make([][]float64, p), level: make([]map[int][]float64, p), mask: make([]int, p),
		phase: make([]int, p), busy: make([]bool, p)}
	for r := range t.level {
		t.level[r] = map[int][]float64{}
		t.mask[r] = 1
	}
	return t
}

func (t *tree) enter(r int, v []float64) {
	t.acc[r] = v
	if t.s.cl.p == 1 {
		t.done(r, v)
		return
	}
	t.gate.open(r)
	t.progress(r)
}

// progress advances GPU r's reduction as far as its messages allow.
func (t *tree) progress(r int) {
	cl := t.s.cl
	if t.busy[r] || !t.gate.in[r] {
		return
	}
	k, h := r%cl.g, r/cl.g
	if t.phase[r] == 0 {
		if k < cl.g-1 {
			if t.chain[r] == nil {
				return
			}
			m := t.chain[r]
			t.chain[r] = nil
			t.combine(r, m, func() { t.afterChain(r) })
			return
		}
		t.afterChain(r)
		return
	}
	if t.phase[r] != 1 {
		return
	}
	for {
		mask := t.mask[r]
		switch {
		case mask >= cl.h: // the root: the sum is complete
			t.phase[r] = 2
			t.down(r, t.acc[r])
			return
		case h&mask != 0:
			t.phase[r] = 2
			parent := (h - mask) * cl.g
			t.s.send(r, parent, t.acc[r], func(m []float64) { t.arrive(parent, mask, m) })
			return
		case h+mask < cl.h:
			m, ok := t.level[r][mask]
			if !ok {
				return
			}
			delete(t.level[r], mask)
			t.combine(r, m, func() { t.mask[r] = mask << 1; t.progress(r) })
			return
		default:
			t.mask[r] = mask << 1
		}
	}
}

func (t *tree) combine(r int, m []float64, then func()) {
	t.busy[r] = true
	t.s.compute(r, float64(t.n)*t.s.cl.add, func() {
		a := t.acc[r]
		for i := range a {
			a[i] = t.op(m[i], a[i])
		}
		t.busy[r] = false
		then()
	})
}

func (t *tree) afterChain(r int) {
	cl := t.s.cl
	if k := r % cl.g; k > 0 {
		t.phase[r] = 2
		t.s.send(r, r-1, t.acc[r], func(m []float64) {
			t.gate.deliver(r-1, func() { t.chain[r-1] = m; t.progress(r - 1) })
		})
		return
	}
	t.phase[r] = 1
	t.progress(r)
}

func (t *tree) arrive(r, mask int, m []float64) {
	t.gate.deliver(r, func() { t.level[r][mask] = m; t.progress(r) })
}

// down delivers the result v to GPU r and passes it on: to its hosts below
// in the binomial tree (largest subtree first), then along its host's
// chain.
func (t *tree) down(r int, v []float64) {
	cl := t.s.cl
	k, h := r%cl.g, r/cl.g
	if k == 0 {
		top := cl.h // the root's subtree is all hosts
		if h > 0 {
			top = h & -h
		}
		for mask := 1 << ceilLog2(top) >> 1; mask >= 1; mask >>= 1 {
			if mask < top && h+mask < cl.h {
				c := (h + mask) * cl.g
				t.s.send(r, c, v, func(m []float64) { t.down(c, m) })
			}
		}
	}
	if k < cl.g-1 {
		t.s.send(r, r+1, v, func(m []float64) { t.down(r+1, m) })
	}
	t.done(r, v)
}

// butterfly is FixedTree's reduction: recursive doubling over all GPUs in
// index order, built from point-to-point calls. At level l GPU r sends its
// partial to GPU r XOR 2^l (one library call) and adds the partial it
// receives from there (one add kernel); both then hold the sum of the
// aligned block of 2^(l+1) GPUs containing r. For a power-of-two number of
// GPUs the sums are those of a perfect binary tree over their indices:
// a + b and b + a have the same bits.
type butterfly struct {
	s     *sim
	n     int
	done  func(int, []float64)
	acc   [][]float64
	mask  []int
	level []map[int][]float64
	busy  []bool
}

func (s *sim) newButterfly(n int, done func(int, []float64)) *butterfly {
	p := s.cl.p
	b := &butterfly{s: s, n: n, done: done, acc: make([][]float64, p), mask: make([]int, p),
		level: make([]map[int][]float64, p), busy: make([]bool, p)}
	for r := range b.level {
		b.level[r] = map[int][]float64{}
	}
	return b
}

func (b *butterfly) start(r int, v []float64) {
	b.acc[r] = v
	b.next(r, 1)
}

// next starts level mask on GPU r: the send after a call overhead, then the
// combine once the partner's partial is there.
func (b *butterfly) next(r, mask int) {
	cl := b.s.cl
	if mask >= cl.p {
		b.done(r, b.acc[r])
		return
	}
	b.mask[r] = mask
	b.busy[r] = true // until the send is posted
	to, v := r^mask, b.acc[r]
	b.s.at(b.s.now+cl.call, func() {
		b.s.send(r, to, v, func(m []float64) { b.level[to][mask] = m; b.combine(to) })
		b.busy[r] = false
		b.combine(r)
	})
}

func (b *butterfly) combine(r int) {
	cl := b.s.cl
	mask := b.mask[r]
	m, ok := b.level[r][mask]
	if b.busy[r] || b.acc[r] == nil || !ok {
		return
	}
	delete(b.level[r], mask)
	b.busy[r] = true
	b.s.compute(r, cl.kern+float64(b.n)*cl.add, func() {
		a := make([]float64, b.n) // the partner may still be sending the old partial: a new buffer
		for i := range a {
			a[i] = b.acc[r][i] + m[i]
		}
		b.acc[r] = a
		b.busy[r] = false
		b.next(r, mask<<1)
	})
}

// gatherRed is the deterministic all-gather reduction: a ring all-gather of
// the GPUs' partials within each host and a pairwise sum (the host
// partial); across hosts, GPU k of every host all-gathers slice k of the
// host partials over its own NIC and sums them pairwise; a last all-gather
// within the host assembles the slices.
type gatherRed struct {
	s       *sim
	n       int
	done    func(int, []float64)
	inHost  []*allGather // per host
	rail    []*allGather // per GPU of a host
	slices  []*allGather // per host
	hostSum [][]float64
}

func (s *sim) newGather(n int, done func(int, []float64)) *gatherRed {
	cl := s.cl
	g := &gatherRed{s: s, n: n, done: done, hostSum: make([][]float64, cl.p)}
	for h := 0; h < cl.h; h++ {
		mem := make([]int, cl.g)
		for k := range mem {
			mem[k] = h*cl.g + k
		}
		g.inHost = append(g.inHost, s.newAllGather(mem, g.hostPartial))
		g.slices = append(g.slices, s.newAllGather(mem, g.assemble))
	}
	for k := 0; k < cl.g; k++ {
		mem := make([]int, cl.h)
		for h := range mem {
			mem[h] = h*cl.g + k
		}
		g.rail = append(g.rail, s.newAllGather(mem, g.railSum))
	}
	return g
}

func (g *gatherRed) slice(k int) (int, int) {
	G := g.s.cl.g
	return k * g.n / G, (k + 1) * g.n / G
}

func (g *gatherRed) start(r int, v []float64) {
	cl := g.s.cl
	if cl.p == 1 {
		g.done(r, v)
		return
	}
	if cl.g == 1 {
		g.hostSum[r] = v
		g.acrossHosts(r)
		return
	}
	g.s.call(r, g.inHost[r/cl.g], v)
}

func (g *gatherRed) hostPartial(r int, blocks [][]float64) {
	cl := g.s.cl
	g.s.compute(r, cl.kern+float64((len(blocks)-1)*g.n)*cl.add, func() {
		v := make([]float64, g.n)
		pairwise(v, blocks)
		if cl.h == 1 {
			g.done(r, v)
			return
		}
		g.hostSum[r] = v
		g.acrossHosts(r)
	})
}

func (g *gatherRed) acrossHosts(r int) {
	k := r % g.s.cl.g
	lo, hi := g.slice(k)
	g.s.call(r, g.rail[k], g.hostSum[r][lo:hi])
}

func (g *gatherRed) railSum(r int, blocks [][]float64) {
	cl := g.s.cl
	g.s.compute(r, cl.kern+float64((len(blocks)-1)*len(blocks[0]))*cl.add, func() {
		v := make([]float64, len(blocks[0]))
		pairwise(v, blocks)
		if cl.g == 1 {
			g.done(r, v)
			return
		}
		g.s.call(r, g.slices[r/cl.g], v)
	})
}

func (g *gatherRed) assemble(r int, blocks [][]float64) {
	v := make([]float64, 0, g.n)
	for _, b := range blocks {
		v = append(v, b...)
	}
	g.done(r, v)
}

// allGather is a ring all-gather over members: block j starts at member j
// and travels P−1 hops; done receives the blocks in member order.
type allGather struct {
	s      *sim
	mem    []int
	idx    map[int]int
	done   func(int, [][]float64)
	gate   gate
	blocks [][][]float64
	got    []int
}

func (s *sim) newAllGather(mem []int, done func(int, [][]float64)) *allGather {
	a := &allGather{s: s, mem: mem, idx: map[int]int{}, done: done, gate: newGate(len(mem)),
		blocks: make([][][]float64, len(mem)), got: make([]int, len(mem))}
	for i, r := range mem {
		a.idx[r] = i
		a.blocks[i] = make([][]float64, len(mem))
	}
	return a
}

func (a *allGather) enter(r int, v []float64) {
	i := a.idx[r]
	a.blocks[i][i] = v
	a.gate.open(i)
	a.add(i)
	a.forward(i, i, v)
}

func (a *allGather) forward(i, j int, v []float64) {
	p := len(a.mem)
	nx := (i + 1) % p
	if nx == j {
		return // block j has been everywhere
	}
	a.s.send(a.mem[i], a.mem[nx], v, func(m []float64) {
		a.gate.deliver(nx, func() {
			a.blocks[nx][j] = m
			a.add(nx)
			a.forward(nx, j, m)
		})
	})
}

func (a *allGather) add(i int) {
	a.got[i]++
	if a.got[i] == len(a.mem) {
		a.done(a.mem[i], a.blocks[i])
	}
}
