package cuda

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/gradsolve-go/gradsolve/ode"
)

// residentMesh holds a mesh's steps in device memory, where the record
// that wrote them ran (ode.ResidentSteps): float64, step-major, rows
// rows of n (the record buffer's rows; the mesh uses the first Rows). A
// mesh recorded with events keeps its event marks after the steps, in
// the same allocation (ode.ResidentEvents): int32, step-major, rows rows
// of n. A replay or gradient on the same device reads them in place; the
// memory goes back with Release or once the handle is unreachable.
type residentMesh struct {
	residentBlock      // the executor whose record wrote the steps, and their memory
	rows          int  // rows of the buffer
	n             int  // trajectories (row length)
	events        bool // the event marks follow the steps (eventsAddr)
	// dirty is the rows of the buffer (in its shape: rows, n, events)
	// that may hold values other than 0: the rows from dirty on, steps
	// and marks, read 0. A record's launch into the buffer zeroes only
	// rows below it (meshZero); a new or reshaped buffer's are all dirty.
	dirty int
}

// residentBlock is device memory that an executor's run wrote and a
// handle holds (a resident mesh's steps, kept saved states): their common
// methods of ode.ResidentSteps and ode.ResidentSaves.
type residentBlock struct {
	ex  *executor // the executor whose run wrote the memory (for copies)
	mem *deviceBlock
}

// newResidentBlock allocates bytes of ex's device memory (at least 8)
// and counts it as live; the handle that holds it adds the cleanup that
// frees it once unreachable.
func newResidentBlock(ex *executor, bytes int64) (residentBlock, error) {
	addr, err := ex.be.alloc(max(bytes, 8))
	if err != nil {
		return residentBlock{}, err
	}
	b := residentBlock{ex: ex, mem: &deviceBlock{be: ex.be, addr: addr, bytes: bytes}}
	live.Store(b.mem, struct{}{})
	return b, nil
}

// Engine returns the name of the engine whose run wrote the memory.
func (b residentBlock) Engine() string { return b.ex.name }

// Owner returns the backend (device) whose memory it is.
func (b residentBlock) Owner() any { return b.ex.be }

// Released reports whether the device memory was given back.
func (b residentBlock) Released() bool { return b.mem.isFreed() }

// Release gives the device memory back.
func (b residentBlock) Release() { b.mem.free() }

// deviceBlock is one device allocation with a once-only free, shared by a
// handle and its cleanup.
type deviceBlock struct {
	be    backend
	addr  uint64
	bytes int64
	mu    sync.Mutex
	freed bool
}

func (b *deviceBlock) free() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.freed {
		b.freed = true
		live.Delete(b)
		_ = b.be.free(b.addr)
	}
}

// live holds the deviceBlocks not yet freed (for residentOn).
var live sync.Map

// residentOn returns the bytes of device memory that resident meshes and
// saved states hold on be.
func residentOn(be backend) int64 {
	n := int64(0)
	live.Range(func(k, _ any) bool {
		if b := k.(*deviceBlock); b.be == be {
			n += b.bytes
		}
		return true
	})
	return n
}

func (b *deviceBlock) isFreed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.freed
}

var _ ode.ResidentEvents = (*residentMesh)(nil)

// meshRowBytes returns the bytes a resident mesh row of n trajectories
// takes: n steps, and n event marks with events.
func meshRowBytes(n int, events bool) int64 {
	if events {
		return int64(n) * (8 + 4)
	}
	return int64(n) * 8
}

// newResidentMesh allocates device memory for rows rows of n steps (and
// of n event marks, with events).
func newResidentMesh(ex *executor, rows, n int, events bool) (*residentMesh, error) {
	b, err := newResidentBlock(ex, int64(rows)*meshRowBytes(n, events))
	if err != nil {
		return nil, err
	}
	m := &residentMesh{residentBlock: b, rows: rows, n: n, events: events, dirty: rows}
	runtime.AddCleanup(m, (*deviceBlock).free, m.mem)
	return m, nil
}

// eventsAddr returns the device address of the event marks, after the
// rows of steps.
func (m *residentMesh) eventsAddr() uint64 { return m.mem.addr + uint64(m.rows)*uint64(m.n)*8 }

// HoldsEvents reports whether the event marks follow the steps.
func (m *residentMesh) HoldsEvents() bool { return m.events }

// CopyEventsTo copies the first len(dst)/n rows of event marks to dst
// (at most the buffer's): one copy from the device.
func (m *residentMesh) CopyEventsTo(dst []int32) error {
	switch {
	case m.Released():
		return fmt.Errorf("cuda: engine %s: the mesh's device memory was released", m.ex.name)
	case !m.events:
		return fmt.Errorf("cuda: engine %s: the resident mesh holds no event marks", m.ex.name)
	case len(dst) > m.rows*m.n:
		return fmt.Errorf("cuda: engine %s: %d event marks asked of a resident mesh of %d", m.ex.name, len(dst), m.rows*m.n)
	}
	r := &run{ex: m.ex}
	return r.copyMesh(int32bytes(dst), m.eventsAddr(), false)
}

// mark returns the event mark of step s of trajectory i (s < rows): one
// small copy from the device, for an error's message.
func (m *residentMesh) mark(s, i int) (int32, error) {
	var x [1]int32
	if !m.events || m.Released() || s < 0 || s >= m.rows || i < 0 || i >= m.n {
		return 0, fmt.Errorf("cuda: engine %s: no event mark %d of trajectory %d on the device", m.ex.name, s, i)
	}
	r := &run{ex: m.ex}
	err := r.read(int32bytes(x[:]), m.eventsAddr()+uint64(s*m.n+i)*4)
	return x[0], err
}

// CopyTo copies the first len(dst)/n rows to dst (at most the buffer's).
func (m *residentMesh) CopyTo(dst []float64) error {
	if m.Released() {
		return fmt.Errorf("cuda: engine %s: the mesh's device memory was released", m.ex.name)
	}
	if len(dst) > m.rows*m.n {
		return fmt.Errorf("cuda: engine %s: %d steps asked of a resident mesh of %d", m.ex.name, len(dst), m.rows*m.n)
	}
	r := &run{ex: m.ex}
	return r.copyMesh(f64bytes(dst), m.mem.addr, false)
}

// fits reports whether m holds rows rows of n steps on ex's device.
func (m *residentMesh) fits(ex *executor, rows, n int) bool {
	return m != nil && !m.Released() && m.ex.be == ex.be && m.n == n && m.rows >= rows
}

// reshape makes m, if it is large enough, a buffer of rows rows of n
// steps (and of n event marks, with events, right after the steps: a
// record zeroes both in one memset, deviceFills) on ex's device, and
// reports whether it did. Its memory may hold more rows: a later reshape
// to more rows reuses it while they fit.
func (m *residentMesh) reshape(ex *executor, rows, n int, events bool) bool {
	w := meshRowBytes(n, events)
	if m == nil || m.Released() || m.ex.be != ex.be || n < 1 || rows < 1 || m.mem.bytes < int64(rows)*w {
		return false
	}
	if m.n != n || m.rows != rows || m.events != events {
		m.dirty = rows // the old shape's rows lie elsewhere in the new one
	}
	m.ex, m.n, m.rows, m.events = ex, n, rows, events
	return true
}

// wrote records that a launch of all the buffer's trajectories wrote its
// mesh, its longest trajectory taking longest accepted steps: rows past
// min(longest, rows) read 0 (the launch zeroed the rows past each
// trajectory's end that were dirty before it).
func (m *residentMesh) wrote(longest int) { m.dirty = max(0, min(longest, m.rows)) }

// residentOf returns the resident steps of mesh m that ex can read in
// place, or nil.
func (ex *executor) residentOf(m *ode.Mesh) *residentMesh {
	if m == nil || !ex.keepsMeshes() {
		return nil
	}
	rm, ok := m.Resident.(*residentMesh)
	if !ok || !rm.fits(ex, m.Rows, m.N) {
		return nil
	}
	return rm
}

// eventsIn reports whether the run's mesh to replay (r.hin, in place)
// holds the job's event marks, which the kernel then reads there: the
// marks of a mesh recorded with events on this device stay with its
// steps (ode.ResidentEvents; Mesh.Events is nil).
func (r *run) eventsIn() bool {
	return r.v.Events && r.hin != nil && r.hin.events && r.j.Mesh.Events == nil
}

// eventsOut reports whether the run's recorded mesh keeps its event marks
// on the device, after its steps (r.hout): else they come back to the
// host (readEvents).
func (r *run) eventsOut() bool { return r.v.Events && r.v.MeshOut && r.hout != nil && r.hout.events }

// keepsMeshes reports whether ex keeps recorded meshes on the device: the
// single-device engines in float64 do (a MultiEngine's shards are
// gathered on the host).
func (ex *executor) keepsMeshes() bool { return ex.keepMesh && !ex.tiles && ex.prec == Float64 }

// keepMesh makes the run record its mesh (rows rows of all N
// trajectories, one launch) into device memory that the result keeps:
// the resident mesh of the Result passed back (Job.Reuse) where it is
// large enough, else a new allocation. If none can be had the mesh goes
// to the host as before.
func (r *run) keepMesh(rows int) {
	n, events := r.j.N, r.v.Events
	if old := r.j.Reuse; old != nil && old.Mesh != nil {
		if rm, ok := old.Mesh.Resident.(*residentMesh); ok {
			if rm.reshape(r.ex, rows, n, events) {
				r.hout = rm // filled in place, as a host mesh passed back is
				return
			}
			if rm.ex.be == r.ex.be {
				rm.Release() // replaced by the new record: its memory goes back now
			}
		}
	}
	rm, err := newResidentMesh(r.ex, rows, n, events)
	if err != nil {
		return
	}
	r.hout = rm
}

// residentOfReuse returns the resident mesh of the result job j passes
// back (Job.Reuse), or nil.
func residentOfReuse(j *ode.Job) *residentMesh {
	if old := j.Reuse; old != nil && old.Mesh != nil {
		rm, _ := old.Mesh.Resident.(*residentMesh)
		return rm
	}
	return nil
}

// unkeepMesh moves a mesh being recorded on the device (rows rows) to
// the run's host mesh (and its event marks to the run's host marks) and
// gives the device memory back: a rerun of some trajectories goes
// through the host.
func (r *run) unkeepMesh(rows int) error {
	rm := r.hout
	if rm == nil {
		return nil
	}
	r.hout = nil
	n := r.j.N
	used := 0
	for _, a := range r.res.Stats.Accepted {
		used = max(used, a)
	}
	used = min(used, rows)
	g := make([]int, n)
	for i := range g {
		g[i] = i
	}
	defer rm.Release()
	if used == 0 {
		return nil
	}
	if err := r.readMesh(rm.mem.addr, g, used); err != nil {
		return err
	}
	if r.v.Events && rm.events {
		return r.readEvents(rm.eventsAddr(), g, used)
	}
	return nil
}

// residentSaves holds the saved states of a run in device memory
// (ode.ResidentSaves, ode.Settings.KeepSaves): float64, n trajectories of
// w = K·Dim values. By default they are component-major, as the engine
// kernel wrote them in place (value c of trajectory q at [c*n+q]: cols),
// with the launch's statuses and flags after them where it has them
// (status), and CopyTo rearranges them into Solution.Ys's row-major order
// on the device (the saves kernel, saves.cuh, into memory of its own for
// the read) before one copy; with Tuning.oldSaves, as before session 46,
// the saves kernel wrote them row-major after every launch, and CopyTo is
// the copy alone. The memory goes back with Release or once the handle
// is unreachable.
type residentSaves struct {
	residentBlock // the executor whose run wrote the saves, and their memory
	n, w          int
	cols          bool // component-major (the engine kernel's), not row-major
	status        bool // cols: the launch's statuses and flags follow the values
}

var _ ode.ResidentSaves = (*residentSaves)(nil)

// savesBytes returns the device memory of the saves of n trajectories of
// w values: row-major, or component-major (cols) with room for the
// launch's statuses and flags (int32 each) after them.
func savesBytes(n, w int, cols bool) int64 {
	b := int64(n) * int64(w) * 8
	if cols {
		b += int64(n) * 8
	}
	return b
}

// statusAddr and flagsAddr are the device addresses of the statuses and
// the flags of component-major saves (cols).
func (s *residentSaves) statusAddr() uint64 { return s.mem.addr + uint64(int64(s.n)*int64(s.w)*8) }
func (s *residentSaves) flagsAddr() uint64  { return s.statusAddr() + uint64(s.n)*4 }

// newResidentSaves allocates device memory for the saves of n
// trajectories of w values, component-major (cols) or row-major.
func newResidentSaves(ex *executor, n, w int, cols bool) (*residentSaves, error) {
	b, err := newResidentBlock(ex, savesBytes(n, w, cols))
	if err != nil {
		return nil, err
	}
	s := &residentSaves{residentBlock: b, n: n, w: w, cols: cols}
	runtime.AddCleanup(s, (*deviceBlock).free, s.mem)
	return s, nil
}

// CopyTo copies the n·w saved values to dst[:n·w], row-major: one copy
// from the device (through the page-locked chunk buffers where it is
// large, copyMesh), after the saves kernel's rearrangement where they are
// component-major (cols).
func (s *residentSaves) CopyTo(dst []float64) error {
	if s.Released() {
		return fmt.Errorf("cuda: engine %s: the saved states' device memory was released (Solution.Release); solve again to read them", s.ex.name)
	}
	size := s.n * s.w
	if len(dst) < size {
		return fmt.Errorf("cuda: engine %s: %d values to copy the saved states into, want N·K·Dim = %d", s.ex.name, len(dst), size)
	}
	r := &run{ex: s.ex, tr: nil}
	if !s.cols {
		return r.copyMesh(f64bytes(dst[:size]), s.mem.addr, false)
	}
	k, err := s.ex.savesKernel()
	if err != nil {
		return err
	}
	rows, err := newResidentBlock(s.ex, int64(size)*8)
	if err != nil {
		return fmt.Errorf("cuda: engine %s: memory to read the saved states: %w", s.ex.name, err)
	}
	defer rows.Release()
	var status, flags uint64
	if s.status {
		status, flags = s.statusAddr(), s.flagsAddr()
	}
	if err := s.ex.be.batch(func(q queue) error {
		return queueRows(q, k, s.n, s.w, status, flags, s.mem.addr, rows.mem.addr)
	}); err != nil {
		return err
	}
	return r.copyMesh(f64bytes(dst[:size]), rows.mem.addr, false)
}

// reshape makes s, if it is large enough and on ex's device, the saves
// of n trajectories of w values, component-major (cols) or row-major,
// and reports whether it did.
func (s *residentSaves) reshape(ex *executor, n, w int, cols bool) bool {
	if s == nil || s.Released() || s.ex.be != ex.be || s.mem.bytes < savesBytes(n, w, cols) {
		return false
	}
	s.ex, s.n, s.w, s.cols, s.status = ex, n, w, cols, false
	return true
}
