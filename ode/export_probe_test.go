package ode

// SetProbeOff turns the stability probe of gradient records
// (Job.CheckStability) off or on, and returns a function that restores
// the previous setting: for the tests that show what it prevents and the
// benchmarks of its cost. Not for parallel tests.
func SetProbeOff(off bool) (restore func()) {
	old := probeOff.Swap(off)
	return func() { probeOff.Store(old) }
}
