package cuda

import (
	"bytes"

	"github.com/gradsolve-go/gradsolve/internal/par"
)

// Inputs that did not change are not sent again.
//
// An arena remembers the inputs the launch that last filled it uploaded
// (heldInputs): per input array, where it lies in the arena and how it
// was staged (heldKey), and a host copy of the caller's values it was
// staged from. The next launch on the arena compares each of its inputs
// with that copy (par.Equal: a memory compare on all cores, which stops
// at a block that differs) and neither stages nor uploads an input whose
// key and values are the same: a parameter sweep that changes only P
// sends only P. An input that differs is copied into the record as the
// fill stages it, block by block, while its rows are in the cache
// (inputCopy). The copy is the engine's own, so a caller that changes
// its slices in place between calls is seen.
//
// Safety rests on two rules. Only launches (run.launch) write an
// executor's arenas, and a launch drops its arena's record before it
// writes anything (reuse), installing a new one only once its uploads and
// kernels are done (done): a launch that fails, or that is not eligible,
// leaves the arena with none, and the next one uploads everything.
// Within a launch the arrays of its layout do not overlap and the
// kernels only read their inputs (kernel.cuh's const pointers), so an
// input region holds what the record says until the next launch on the
// arena. Eligible are the launches of all of a job's trajectories in
// order (the one launch of a pass that fits the device, also where it is
// staged chunk by chunk, and a rerun of every trajectory with longer
// record buffers): the chunks of a pass too large for one launch, and the
// reruns of some of the trajectories, run other trajectories over the
// same regions, and upload everything. A launch whose Y0 or P holds a
// value that is not finite records nothing, so that a later call's check
// of them (ode.CheckFinite, made as they are staged) is not skipped. A
// trainer (train.go) stages into arenas of its own, which it frees,
// never an executor's; cuda-multi's and float32's executors have arenas
// of their own, so the record is per device and per precision.
//
// An input that changes on every call (a sweep's P, a trainer's data
// given anew each step) would cost a compare and a copy into the record
// on every launch, about as much as its staging, for nothing; the
// record adapts per input (heldInput.misses, rest). A compare that finds
// the values changed is a miss; after reuseMisses consecutive misses the
// input rests: for the next launches (reuseRestMin at first) it is
// neither compared nor copied, only staged and uploaded as without the
// reuse; then it is kept again (copied as it is staged), and compared on
// the launch after. A miss then sends it back to rest for twice as many
// launches (up to reuseRestMax); a match ends the backoff. The compare
// itself stops early: par.Equal probes a few values spread over the
// array before it compares the arrays in blocks on all cores, so that a
// changed input (a sweep changes every row) costs little to find
// changed. None of this changes what is sent where it matters: an input
// is skipped only where it was compared equal, bit for bit, to the copy
// of what its region holds; a resting input is always sent.

// reusedArgs are the input arrays whose values an arena's record keeps
// (the shared block and the save times, a few bytes, are staged every
// launch; a given mesh's steps go up from its rows, writeMesh).
var reusedArgs = [...]int{argT1, argT0s, argY0, argP, argData, argLen, argEvIn}

// heldInputs is the record of the inputs an arena holds (reuse).
type heldInputs struct {
	in [numArgs]heldInput
}

// heldInput is one input array an arena holds: how it was staged, and a
// copy of the caller's values it was staged from (one of f, i, e), or,
// of an array every launch stages (stagedArgs), of the bytes staged (b).
type heldInput struct {
	key heldKey // the zero key: none held
	f   []float64
	i   []int
	e   []int32
	b   []byte

	// misses counts the consecutive launches that found the values
	// changed; rest is the launches left during which the input is
	// neither compared nor kept (0: kept), wait how many the next rest
	// lasts (0: reuseRestMin). See reuse.
	misses, rest, wait int
}

// The adaptive record (reuse): an input rests after reuseMisses
// consecutive launches that found it changed, first for reuseRestMin
// launches, each time it is found changed again after a rest twice as
// many, up to reuseRestMax.
const (
	reuseMisses  = 2
	reuseRestMin = 4
	reuseRestMax = 256
)

// miss records that input e, compared, had changed, and reports whether
// it rests from now on (reuse): neither copied nor compared for the next
// e.rest launches. After a rest one miss sends it back, for twice as
// long.
func (e *heldInput) miss() bool {
	e.misses++
	if e.misses < reuseMisses {
		return false
	}
	e.wait = min(reuseRestMax, max(reuseRestMin, 2*e.wait))
	e.rest, e.misses = e.wait, reuseMisses-1
	e.key = heldKey{}
	return true
}

// hit records that input e, compared, was the same: its backoff ends.
func (e *heldInput) hit() { e.misses, e.wait = 0, 0 }

// stagedArgs are the input arrays every launch stages from the job (the
// shared block: the shared parameters, the tolerances and MaxSteps; the
// save times), a few bytes, which reuse does not compare. A kept
// gradient's launch (keptGrads) compares their staged bytes with those
// its arena holds once they are staged, and leaves those that are the
// same where they are (holdStaged): its batch then queues no copy before
// its kernel, where one would cost a driver call and a copy that the
// kernel waits for (about the events suite's whole share of the bus:
// 256 bytes a call).
var stagedArgs = [...]int{argSh, argSaveAt}

// holdStaged compares the staged arrays (stagedArgs) of a launch of n
// trajectories in layout l, staged in up, with those the record h holds
// (the arena's, or the new record of a launch that had none), marks in
// bc those that are the same byte for byte (bc.hold: not uploaded), and
// records the others' bytes in h, which the launch installs once it is
// done (launchOnce) as it does the inputs' record. With may false (a
// launch that does not keep its results, or one staged chunk by chunk,
// whose uploads are uploadChunk's, or Tuning.uploadShared) the launch
// uploads them all, and h forgets them: a later launch uploads them
// again. The bytes are those of the arrays alone, not of the padding to
// the next array, which the staging buffer leaves as an earlier use left
// it.
func (r *run) holdStaged(up []byte, l *layout, bc *bcast, h *heldInputs, n int, may bool) {
	if h == nil {
		return
	}
	may = may && !r.ex.tun.uploadShared
	for _, a := range stagedArgs {
		e := &h.in[a]
		if !may || l.off[a] < 0 {
			e.key, e.b = heldKey{}, e.b[:0]
			continue
		}
		key := heldKey{off: l.off[a], bytes: l.bytes[a], n: n}
		b := up[l.off[a] : l.off[a]+l.bytes[a]]
		if e.key == key && bytes.Equal(e.b, b) {
			bc.hold(a, l, n)
			// (and its padding, which the upload leaves out with it:
			// heldSpans)
			bc.reused += min(int64(len(up)), (l.off[a]+l.bytes[a]+255)&^255) - l.off[a] - l.bytes[a]
			continue
		}
		e.key, e.b = key, append(e.b[:0], b...)
	}
}

// heldKey is what, besides the caller's values, decides an input array's
// bytes in the arena: its place and size, the launch's trajectories, the
// form it was staged from (the one row of Y0Row, PRow or T1Same, copied
// over the column; else every row), the device's order
// (Config.RowMajor) and, for a given mesh's lengths, the mesh's rows
// (fill checks the lengths against them).
type heldKey struct {
	off, bytes int64
	n, rows    int
	row, major bool
}

// source returns the key and the host values of input a of a launch of
// the job's n trajectories in layout l, and whether the launch has it.
func (r *run) source(a int, l *layout, n int) (key heldKey, f []float64, iv []int, ev []int32, ok bool) {
	if l.off[a] < 0 {
		return key, nil, nil, nil, false
	}
	j := r.j
	key = heldKey{off: l.off[a], bytes: l.bytes[a], n: n, major: r.rowMajor(a)}
	// rowOr is the one row where the job gives one, else every row.
	rowOr := func(row, all []float64) []float64 {
		if row != nil {
			key.row = true
			return row
		}
		return all
	}
	switch a {
	case argT1:
		f = j.T1[:n]
		if j.T1Same {
			f = rowOr(j.T1[:1], nil)
		}
	case argT0s:
		f = j.T0s[:n]
	case argY0:
		f = rowOr(j.Y0Row, j.Y0[:n*r.d])
	case argP:
		f = rowOr(j.PRow, j.P[:n*r.np])
	case argData:
		f = j.Loss.Data[:n*r.dd]
	case argLen:
		key.rows = j.Mesh.Rows
		iv = j.Mesh.Len[:n]
	case argEvIn:
		ev = j.Mesh.Events[:l.bytes[a]/4]
	default:
		return key, nil, nil, nil, false
	}
	return key, f, iv, ev, true
}

// reuse compares the inputs of a launch over the trajectories g in layout
// l with those the arena ar holds, marks in bc those it holds with the
// same values (bc.hold: neither staged nor uploaded) and those whose
// record the fill brings up to date (bc.copies), and returns the record
// of what the arena holds once the launch's uploads are done (nil where
// the launch is not eligible, or Tuning.NoInputReuse). The arena's own
// record is dropped: the launch writes the arena, and done installs the
// new one once its work on the device succeeded. The record adapts per
// input (miss): one that changed on reuseMisses launches in a row rests,
// staged without being compared or kept, for a number of launches that
// doubles each time it is found changed again.
//
// With ahead other than compareFirst (a launch that may run ahead of its
// compare: "A launch ahead of its compare" below), where every input the
// launch has was found the same at its last compare (settled), reuse
// marks them all held without comparing them, starts their compare in
// r.ahead (aheadCheck) to run as the launch's batch runs, and returns
// the record as it was.
func (r *run) reuse(ar *arena, g []int, l *layout, bc *bcast, ahead aheadMode) *heldInputs {
	old := ar.held
	ar.held = nil
	n := len(g)
	if r.ex.tun.NoInputReuse || n == 0 || n != r.j.N || g[0] != 0 || g[n-1] != n-1 {
		return nil
	}
	if ahead != compareFirst && old != nil && r.settled(old, l, n) {
		for _, a := range reusedArgs {
			if l.off[a] >= 0 {
				bc.hold(a, l, n)
			}
		}
		r.ahead.start(r, old, l, n, ahead == aheadInBatch)
		return old
	}
	h := old
	if h == nil {
		h = &heldInputs{}
	}
	for _, a := range reusedArgs {
		e := &h.in[a]
		key, f, iv, ev, ok := r.source(a, l, n)
		if !ok {
			e.key = heldKey{}
			continue
		}
		if e.rest > 0 {
			// Changed on every launch lately: staged, neither compared
			// nor kept (see miss).
			e.rest--
			e.key = heldKey{}
			continue
		}
		known := old != nil && e.key == key
		e.key = key
		// settled reports whether the input needs no copy: it matched
		// what the arena holds (same), or, changed, it starts a rest.
		settled := func(same bool) bool {
			if same {
				e.hit()
				bc.hold(a, l, n)
				return true
			}
			return known && e.miss()
		}
		switch a {
		case argLen:
			if settled(known && par.Equal(e.i, iv)) {
				continue
			}
			e.i = resize(e.i, len(iv))
			bc.copies = append(bc.copies, inputCopy{w: 1, di: e.i, si: iv})
		case argEvIn:
			if settled(known && par.Equal(e.e, ev)) {
				continue
			}
			e.e = par.Append(e.e, ev) // the fill stages the marks apart, by rows
		default:
			if settled(known && par.Equal(e.f, f)) {
				continue
			}
			if key.row {
				e.f = append(e.f[:0], f...)
				continue
			}
			e.f = resize(e.f, len(f))
			bc.copies = append(bc.copies, inputCopy{w: len(f) / n, df: e.f, sf: f})
		}
	}
	return h
}

// resize returns s with length n, its storage reused where large enough
// (its values then left as they were).
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// inputCopy copies an input that changed into an arena's record
// (reuse), w values a trajectory, row-major: of the caller's sf into df,
// or si into di. The fill runs it over each block of trajectories it
// stages, after reading their rows.
type inputCopy struct {
	w      int
	df, sf []float64
	di, si []int
}

// rows copies the rows of trajectories q0…q1−1.
func (c *inputCopy) rows(q0, q1 int) {
	if c.df != nil {
		copy(c.df[q0*c.w:q1*c.w], c.sf[q0*c.w:q1*c.w])
		return
	}
	copy(c.di[q0*c.w:q1*c.w], c.si[q0*c.w:q1*c.w])
}

// hold marks input a of a launch of n trajectories in layout l as held
// by the arena: not staged, not uploaded, not broadcast. Its bytes
// reused are those its upload would have copied (of a broadcast input,
// the seed: its tail stays in bc.skipped).
func (bc *bcast) hold(a int, l *layout, n int) {
	bc.held |= 1 << a
	if bc.broadcasts(a) {
		bc.reused += l.bytes[a] / int64(n) * int64(bc.seed)
		switch a {
		case argT1:
			bc.t1 = false
		case argY0:
			bc.y0 = false
		case argP:
			bc.p = false
		}
		return
	}
	bc.reused += l.bytes[a]
}

// holds reports whether the arena holds input a (hold).
func (bc bcast) holds(a int) bool { return bc.held&(1<<a) != 0 }

// heldSpans returns the byte ranges of the arena of the inputs bc holds,
// each up to the next array's 256-byte boundary (the layout's padding
// goes up with neither), in the arena's order, appended to sp.
func (bc bcast) heldSpans(sp []span, l *layout, end int64) []span {
	for _, a := range l.order {
		if !bc.holds(a) || l.off[a] < 0 {
			continue
		}
		lo, hi := l.off[a], min(end, (l.off[a]+l.bytes[a]+255)&^255)
		if k := len(sp); k > 0 && sp[k-1].hi == lo {
			sp[k-1].hi = hi
			continue
		}
		sp = append(sp, span{lo, hi})
	}
	return sp
}

// A launch ahead of its compare. A repeated call whose inputs were the
// same at their last compare most likely has them the same again, and
// its compare (par.Equal of Y0, P, … with the engine's copies: about
// 0.1 ms for 65,536 trajectories of two components and one parameter,
// three megabytes read) is host work on the call's path. Such a launch
// (run.launch, of all of a job's trajectories in order) holds every
// input unseen, queues its batch at once, and compares the inputs as the
// device runs its kernels (aheadCheck), before anything of the caller's
// is written: a kept gradient's results stay on the device until it has
// checked them; results that come back in one copy are read by scatter
// after the batch, the compare run in the batch once the kernel is
// queued; results that come back in chunks or parts (scattered while the
// device still runs the batch, on a goroutine of its own) wait for the
// compare, run on the launch's goroutine before the scatter starts. The compare is the same one, bit for bit against
// the copies, so the guarantee is the same: where a caller changed a
// slice in place the compare finds it, the launch drops its results
// before it writes anything of the caller's, puts the arena's record
// back (the kernels only read the inputs: the arena still holds what it
// says) and runs again without running ahead, comparing, staging and
// uploading as without it; that compare counts the miss (reuse's
// backoff), so a sweep that changes its inputs every call runs ahead
// once and then never until a compare finds its inputs the same again.

// settled reports whether the inputs of a launch of n trajectories in
// layout l are all in the record h, as the launch would stage them (the
// same keys), and were the same at their last compare (none resting,
// none missed).
func (r *run) settled(h *heldInputs, l *layout, n int) bool {
	for _, a := range reusedArgs {
		e := &h.in[a]
		key, _, _, _, ok := r.source(a, l, n)
		if !ok {
			continue
		}
		if e.key != key || e.key == (heldKey{}) || e.rest > 0 || e.misses > 0 {
			return false
		}
	}
	return true
}

// aheadMode is whether and how a launch may run ahead of its inputs'
// compare (reuse, aheadCheck).
type aheadMode uint8

const (
	compareFirst aheadMode = iota // the compare before the batch
	aheadOwn                      // ahead, the compare on a goroutine of its own
	aheadInBatch                  // ahead, the compare in the batch once its kernels are queued
)

// aheadCheck is the compare of a launch run ahead of it (see above): it
// runs in the launch's batch once its kernels are queued (inBatch), on
// the launch's own goroutine (and all cores: par.Equal) while the device
// runs them, before the batch waits for the device: no goroutine to
// start before the batch (whose staging it would share the cores with)
// and none to wake after it, and nothing allocated. That is how a launch
// whose results come back in one copy compares (aheadInBatch; one whose
// batch runs on a goroutine of its own, results in chunks or parts,
// compares in wait, on the launch's goroutine); a kept gradient's runs
// on a goroutine of its own from start to wait (aheadOwn: on an H100 in
// session 45 the ball's kept call was 3% faster so than in its batch).
type aheadCheck struct {
	on   bool      // started and not yet waited for
	same chan bool // the compare's verdict (on a goroutine of its own)
	// help is the set the goroutine of its own compares, which inBatch
	// helps (nil: none to help).
	help *par.EqualSet

	// The compare left for the batch (aheadInBatch): its launch, the
	// record, layout and trajectories (nil r once run), and its verdict.
	deferred bool
	verdict  bool
	r        *run
	h        *heldInputs
	l        *layout
	n        int
}

// start compares the inputs of r's launch of n trajectories in layout l
// with the record h, each as reuse would: when the launch's batch calls
// inBatch (with batch), or on a goroutine of its own, which the batch's
// inBatch then helps (EqualSet.Help; not with Tuning.compareNoHelp):
// the set's probes and tasks begun here, the compare finished there.
func (c *aheadCheck) start(r *run, h *heldInputs, l *layout, n int, batch bool) {
	c.on = true
	if batch {
		c.deferred, c.r, c.h, c.l, c.n = true, r, h, l, n
		return
	}
	if r.sc.same == nil {
		// (kept with the run's scratch: empty once wait has received)
		r.sc.same = make(chan bool, 1)
	}
	c.same = r.sc.same
	c.help = nil
	if r.ex.tun.compareEach || r.ex.tun.compareNoHelp {
		go func() { c.same <- sameHeld(r, h, l, n) }()
		return
	}
	// The set begun here (its probes, its tasks out), finished on the
	// goroutine: the batch's Help finds the tasks however late the
	// goroutine starts.
	s := heldSet(r, h, l, n)
	if known, same := s.Begin(); known {
		s.Reset()
		c.same <- same
		return
	}
	c.help = s
	go func() {
		same := s.Finish()
		s.Reset() // (drops the references to the arrays)
		c.same <- same
	}()
}

// sameHeld reports whether the inputs of r's launch of n trajectories in
// layout l are those the record h holds, bit for bit: all of them in one
// pass on all cores (par.EqualSet), or, with Tuning.compareEach, each in
// turn (par.Equal).
func sameHeld(r *run, h *heldInputs, l *layout, n int) bool {
	if !r.ex.tun.compareEach {
		s := heldSet(r, h, l, n)
		defer s.Reset() // (drops the references to the arrays)
		return s.Equal()
	}
	for _, a := range reusedArgs {
		e := &h.in[a]
		_, f, iv, ev, ok := r.source(a, l, n)
		switch {
		case !ok:
			continue
		case a == argLen && par.Equal(e.i, iv), a == argEvIn && par.Equal(e.e, ev),
			a != argLen && a != argEvIn && par.Equal(e.f, f):
			continue
		}
		return false
	}
	return true
}

// heldSet returns the run's EqualSet (kept with its scratch: a pooled
// one would go at every other collection, and a call allocate it
// again), emptied and given the pairs of sameHeld's compare.
func heldSet(r *run, h *heldInputs, l *layout, n int) *par.EqualSet {
	if r.sc.eq == nil {
		r.sc.eq = new(par.EqualSet)
	}
	s := r.sc.eq
	s.Reset()
	for _, a := range reusedArgs {
		e := &h.in[a]
		_, f, iv, ev, ok := r.source(a, l, n)
		switch {
		case !ok:
		case a == argLen:
			par.AddEqual(s, e.i, iv)
		case a == argEvIn:
			par.AddEqual(s, e.e, ev)
		default:
			par.AddEqual(s, e.f, f)
		}
	}
	return s
}

// inBatch runs a compare left for the batch (start), if one is
// pending, or helps one that runs on a goroutine of its own with the
// tasks it has left (par.EqualSet.Help: none where it is done, or
// compares on one core): the batch calls it once its kernels are
// queued, before it waits for the device, whose kernels then run as
// its goroutine compares. The pool's goroutines that the compare's
// Run readies wake one after another (a kept events call's compare of
// 3 MB took about 90 µs on the H100's host in session 47, past pk's
// 51 µs kernel on the suite's inputs); the batch's goroutine is awake.
func (c *aheadCheck) inBatch() {
	if c.on && c.deferred && c.r != nil {
		c.verdict = sameHeld(c.r, c.h, c.l, c.n)
		c.r, c.h, c.l = nil, nil, nil
		return
	}
	if c.on && c.help != nil {
		c.help.Help()
	}
}

// missed reports whether a compare that ran in the batch (inBatch)
// found an input changed: the launch's results will be dropped.
func (c *aheadCheck) missed() bool { return c.on && c.deferred && c.r == nil && !c.verdict }

// wait waits for the compare, if one runs (one left for a batch that did
// not run it runs now), and reports whether it found every input the same
// (true where none ran).
func (c *aheadCheck) wait() bool {
	if !c.on {
		return true
	}
	c.on, c.help = false, nil
	if c.deferred {
		c.on = true
		c.inBatch()
		c.on, c.deferred = false, false
		return c.verdict
	}
	return <-c.same
}
