package cuda

import (
	_ "embed"
	"encoding/binary"
	"fmt"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// Columns of a resident mesh gathered on the device (ode.ColumnSteps):
// Method Auto on the engine takes from its first pass's mesh the columns
// of the trajectories it replays and of those it continues with Rodas5P
// (ode/auto_split.go, ode/auto_continue.go); the mesh columns' kernel
// (meshcols.cuh) writes them into a resident mesh of their own, so the
// pass's steps (Rows×N values) neither come to the host nor go back.

// meshColsCuh is the mesh columns' kernel's template (after the
// prelude).
//
//go:embed meshcols.cuh
var meshColsCuh string

// meshColsKernelName is the mesh columns' kernel's name (meshcols.cuh).
const meshColsKernelName = "gs_m_cols"

// Words of struct gs_margs (meshcols.cuh), in order.
const (
	mwK = iota
	mwRows
	mwSN
	mwPad
	mwCols // the first pointer
	mwLens
	mwSrc
	mwDst
	numMeshColsWords
)

// meshColsThreads is the mesh columns' kernel's threads per block.
const meshColsThreads = 256

var _ ode.ColumnSteps = (*residentMesh)(nil)

// Columns returns a resident mesh of rows rows of len(cols) columns on
// m's device: column x the first lens[x] steps of column cols[x] of m,
// zeros past them (one launch of the mesh columns' kernel, after a copy
// of the columns and lengths, 8 bytes a column, into the row after the
// result's rows: no allocation of their own). It writes into reuse, if
// reuse is a resident mesh of m's device with room for rows + 1 rows of
// len(cols) steps (an earlier gather's, given back: no allocation), and
// returns it; else into a new allocation, leaving reuse as it is (the
// caller releases it). The caller releases the result.
func (m *residentMesh) Columns(cols, lens []int, rows int, reuse ode.ResidentSteps) (ode.ResidentSteps, error) {
	ex := m.ex
	if m.Released() {
		return nil, fmt.Errorf("cuda: engine %s: the mesh's device memory was released", ex.name)
	}
	k := len(cols)
	if len(lens) != k || rows < 0 || rows > m.rows {
		return nil, fmt.Errorf("cuda: engine %s: %d columns, %d lengths and %d rows asked of a resident mesh of %d rows", ex.name, k, len(lens), rows, m.rows)
	}
	idx := make([]byte, 8*k) // cols, then lens, as int32
	for x, c := range cols {
		if c < 0 || c >= m.n || lens[x] < 0 || lens[x] > rows {
			return nil, fmt.Errorf("cuda: engine %s: column %d (%d steps) asked of a resident mesh of %d columns of %d rows", ex.name, c, lens[x], m.n, rows)
		}
		binary.LittleEndian.PutUint32(idx[4*x:], uint32(c))
		binary.LittleEndian.PutUint32(idx[4*(k+x):], uint32(lens[x]))
	}
	if m.events {
		return nil, fmt.Errorf("cuda: engine %s: columns asked of a resident mesh recorded with events: its event marks are not gathered; copy the mesh to the host (Mesh.Host) instead", ex.name)
	}
	// One row more than the result's: the columns and lengths (8 bytes a
	// column, a row of k steps) go up into it.
	dst, _ := reuse.(*residentMesh)
	if dst == nil || dst == m || !dst.reshape(ex, rows+1, k, false) {
		var err error
		if dst, err = newResidentMesh(ex, rows+1, k, false); err != nil {
			return nil, err
		}
	}
	// The gather writes every row (zeros past the lengths, the columns
	// and lengths in the last): a record into the buffer zeroes them all.
	dst.dirty = dst.rows
	if k == 0 || rows == 0 {
		return dst, nil
	}
	kern, err := ex.auxKernel(meshColsKernelName, "mesh columns' kernel", func() string {
		return kernelgen.Prelude() + meshColsCuh
	})
	if err == nil {
		err = m.gather(kern, dst, idx, k, rows)
	}
	if err != nil {
		if dst != reuse {
			dst.Release()
		}
		return nil, err
	}
	return dst, nil
}

// gather runs the mesh columns' kernel kern from m to dst (k columns of
// rows rows, and room for a row more), with the columns and lengths idx,
// which go up into dst's row rows.
func (m *residentMesh) gather(kern backendKernel, dst *residentMesh, idx []byte, k, rows int) error {
	be := m.ex.be
	at := dst.mem.addr + uint64(rows)*uint64(k)*8
	var words [numMeshColsWords]uint64
	words[mwK], words[mwRows], words[mwSN] = uint64(k), uint64(rows), uint64(m.n)
	words[mwCols], words[mwLens] = at, at+uint64(4*k)
	words[mwSrc], words[mwDst] = m.mem.addr, dst.mem.addr
	threads := k * rows
	threads = (threads + meshColsThreads - 1) / meshColsThreads * meshColsThreads
	var done [8]byte
	return be.batch(func(q queue) error {
		if err := q.write(at, idx); err != nil {
			return err
		}
		if err := q.enqueue(kern, threads, meshColsThreads, 0, words[:]); err != nil {
			return err
		}
		// A read after the launch waits for it: the jobs that read dst
		// may launch on another stream (a graph's).
		return q.read(done[:], dst.mem.addr)
	})
}
