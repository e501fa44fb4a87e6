package driver

import (
	"errors"
	"testing"
)

// TestBatchWaitsQueued checks that Batch waits for a copy queued without
// waiting (CopyToDeviceQueued) when f fails before any read: the caller
// overwrites the source as soon as Batch returns, and the device must
// hold the source as it was queued: 64 MiB from page-locked memory,
// about 2.5 ms on the bus, whose last MiB the caller clears first. It
// skips without a GPU.
func TestBatchWaitsQueued(t *testing.T) {
	d := openDevice(t)
	const n = 64 << 20
	src, err := d.HostAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer d.HostFree(src)
	buf, err := Alloc[byte](d, n)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	failed := errors.New("f failed")
	for round := range 3 {
		want := byte(round + 1)
		for i := range src {
			src[i] = want
		}
		err := d.Batch(func(q *Queue) error {
			if err := q.CopyToDeviceQueued(buf.Ptr(), src); err != nil {
				return err
			}
			return failed
		})
		if !errors.Is(err, failed) {
			t.Fatalf("round %d: Batch returned %v, want f's error", round, err)
		}
		// As soon as Batch returns, the last MiB first (within tens of
		// microseconds: an unfinished copy reads it last), then the rest.
		clear(src[n-1<<20:])
		clear(src)
		got := make([]byte, n)
		if err := buf.Read(got); err != nil {
			t.Fatal(err)
		}
		for i, b := range got {
			if b != want {
				t.Fatalf("round %d: byte %d is %d, want %d: the source changed under the queued copy", round, i, b, want)
			}
		}
	}
}

// openDevice opens device 0 for a test, closed when the test ends; it
// skips the test without a GPU.
func openDevice(t *testing.T) *Device {
	t.Helper()
	d, err := Open(0)
	if errors.Is(err, ErrNoGPU) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
